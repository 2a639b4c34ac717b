"""THE ranking of op records: "top opportunities", the records whose time would shrink most
on their roof. Every consumer (the tab's Top opportunities box, `tb-roofline report` in text
and JSON, the MCP `top_ops` tool with `order=time_saved`) reads this order; none ranks itself.

Which records are ranked (one rule, `opportunity_mask`): those with a proven saving, i.e.
- `potential_time_saved_us` is a finite number above 0 (known peaks, a place under a roof;
  containers save 0: their children hold the time), and
- no caveat at all. Records that are not roofline measurements (`records.measurements`:
  async halves, peer copies, no cost, above their roof) have no saving; of the caveated
  measurements, containers save 0 (their children hold the time) and a `host_transfer` under
  a known link speed has a real saving, but it is won by moving less data across the host
  link, not by a faster kernel, so it is reported by the guidance's findings and the caveat
  table, not among the kernels to tune.

Order: potential time saved, largest first; ties keep the table's own order (self time rank).
"""

from __future__ import annotations

import numpy as np

RANK_COLUMN = "opportunity_rank"


def opportunity_mask(columns: dict) -> np.ndarray:
    """The records the ranking holds (the rule in the module docstring)."""
    saved = np.asarray(columns["potential_time_saved_us"], dtype=float)
    caveat = np.asarray(columns["caveat"], dtype=object)
    no_caveat = np.array([not c for c in caveat.tolist()], dtype=bool)
    return np.isfinite(saved) & (saved > 0) & no_caveat


def opportunity_order(columns: dict) -> np.ndarray:
    """Indices of the ranked records, best first (stable: ties keep the table's order)."""
    idx = np.flatnonzero(opportunity_mask(columns))
    saved = np.asarray(columns["potential_time_saved_us"], dtype=float)[idx]
    return idx[np.argsort(-saved, kind="stable")]


def opportunity_ranks(columns: dict) -> np.ndarray:
    """Each record's place in the ranking (1 = the largest saving), NaN (null in answers)
    for records the ranking leaves out. A subset of the records (the rows a filter keeps)
    sorted by it is that subset's own ranking, so a client that filters reads it as is."""
    n = len(columns["potential_time_saved_us"])
    ranks = np.full(n, np.nan)
    order = opportunity_order(columns)
    ranks[order] = np.arange(1, len(order) + 1, dtype=float)
    return ranks


def none_ranked_reason(columns: dict, peaks_known: bool) -> str | None:
    """Why the ranking of these records is empty, in words (None when it is not): a saving
    needs a roof, so without peaks no record has one; otherwise every record is either not a
    roofline measurement (a caveat) or already on its roof."""
    if opportunity_mask(columns).any():
        return None
    n = len(columns["potential_time_saved_us"])
    if n == 0:
        return "no op matches the filters"
    if not peaks_known:
        return (
            "no op has a time saved: the device's peaks are unknown, so no op has a roof to be "
            "measured against (give the run a device file: roofline_device.json in the logdir, "
            "--device-file, or `tb-roofline calibrate` for a CPU)"
        )
    caveat = np.array([bool(c) for c in np.asarray(columns["caveat"], dtype=object).tolist()])
    saved = np.asarray(columns["potential_time_saved_us"], dtype=float)
    unknown = int(np.count_nonzero(~caveat & ~np.isfinite(saved)))
    on_roof = int(np.count_nonzero(~caveat & np.isfinite(saved)))
    return (
        f"no op has a proven time saved: {int(caveat.sum())} of {n} are not roofline "
        f"measurements as they stand (a caveat), {unknown} have no known cost and {on_roof} "
        "run on their roof or save nothing (containers)"
    )


def ranked_rows(columns: list, rows: list) -> list:
    """Rows (lists) of an answer whose `columns` carry `opportunity_rank`: the ranked ones
    only, in the ranking's order."""
    i = columns.index(RANK_COLUMN)
    return sorted((r for r in rows if r[i] is not None), key=lambda r: r[i])


def ranked_dicts(rows: list) -> list:
    """Row dicts of an answer that carries `opportunity_rank`, ranked ones only, in order."""
    kept = [r for r in rows if r.get(RANK_COLUMN) is not None]
    return sorted(kept, key=lambda r: r[RANK_COLUMN])
