"""The rows of a profile on devices with no core span: devices that ran no program (the
readers' program_devices leave them out of the spans; their rows stay in the table). The
guidance names the time they took apart (model/guidance/facts.py)."""

from __future__ import annotations

import numpy as np

from tb_roofline.table.held_rows import HeldRows, is_held

DERIVED = "unspanned_self_ps"  # the per-key sums, made where rows kept elsewhere are


def unspanned_rows(p) -> np.ndarray:
    """Whether each op-table row of profile `p` ran on a device with no core span."""
    cores = {s.core for s in p.core_spans or ()}
    core = np.asarray(p.ops.rows["core"])
    if not cores or not len(core):
        return np.zeros(len(core), bool)
    lo, hi = int(core.min()), int(core.max())
    if lo < 0 or hi >= 1 << 20:
        return ~np.isin(core, sorted(cores))
    # A table per core number (`np.isin` of a row per event held three of the rows' copies)
    off = np.ones(hi + 1, bool)
    off[[c for c in cores if 0 <= c <= hi]] = False
    return off[core] if off[lo:].any() else np.zeros(len(core), bool)


def unspanned_self_ps(p) -> np.ndarray | None:
    """The self time (ps) of each key's rows on devices with no core span; None when no row
    ran on one. Rows kept elsewhere: the sums made where they are (`summarized`)."""
    if is_held(p.ops.rows):
        return p.ops.rows.derived.get(DERIVED)
    off = unspanned_rows(p)
    if not off.any():
        return None
    rows = p.ops.rows
    op = np.asarray(rows["op"])[off]
    self_ps = np.asarray(rows["self_time_ps"], np.float64)[off]
    return np.bincount(op, weights=self_ps, minlength=p.ops.num_keys)


def summarized(p, rows: HeldRows) -> HeldRows:
    """`rows` (what stands for `p.ops`'s rows) with the sums `unspanned_self_ps` reads."""
    rows.derived[DERIVED] = unspanned_self_ps(p)
    return rows
