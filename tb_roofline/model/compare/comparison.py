"""Two runs (or hosts, or steps) on one roofline: paired records, their deltas, and which ops
explain the change in time.

Each side keeps its own device and roofs: a point is placed and judged under the roofs of the
run it comes from, so efficiencies compare how close each side ran to its own limits, and the
comparison says when the devices or an op's precision (its compute roof) differ. Records that
are not roofline measurements (records.measurements: async halves, transfers, no cost, ...) are
compared by time; their efficiency deltas are not given. Definitions: docs/compare.md.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.model.compare.matching import OP, Matching, MatchKeys, match
from tb_roofline.model.compare.pairs import (
    MATCHED,
    NEW,
    REMOVED,
    PairTable,
    pair_table,
    with_measurements,
    with_roof_ids,
)
from tb_roofline.model.records.record_table import RecordTable, scope_record_type
from tb_roofline.model.records.records import div

# Per side (prefixed `base_` and `cand_`); a pair's sides always share their program.
_COMMON = (
    "occurrences",
    "total_time_us",
    "flops",
    "bytes",
    "flop_rate",
    "operational_intensity",
    "bottleneck_operational_intensity",
    "bound_by",
    "roofline_efficiency",
    "peak_flop_rate",
)
SIDE_COLUMNS = (
    "operation",
    "category",
    "precision",
    "caveat",
    "fingerprint",
    "total_self_time_us",
    "self_time_per_core_us",
) + _COMMON
PROGRAM_SIDE_COLUMNS = ("record_type", "step", "host", "total_time_per_core_us") + _COMMON
PAIR_COLUMNS = (
    "status",
    "match_rule",
    "change",
    "program",
    "delta_time_us",
    "delta_time_per_core_us",
    "delta_time_percent",
    "speedup",
    "share_of_change",
    "delta_flop_rate",
    "delta_operational_intensity",
    "delta_roofline_efficiency",
    "bound_by_changed",
    "roof_changed",
)
# Per side, derived by the model from the side's own device: the roof a record is bound by, as
# an id ("compute", or a memory id of that device's `memories`: records.binding_roof_ids).
ROOF_ID_COLUMNS = ("base_binding_roof_id", "cand_binding_roof_id")
# Per op side: whether it is a roofline measurement (records.measurements), None when missing.
MEASUREMENT_COLUMNS = ("base_measurement", "cand_measurement")
OP_COLUMNS = (
    PAIR_COLUMNS
    + tuple(f"{s}_{c}" for s in ("base", "cand") for c in SIDE_COLUMNS)
    + ROOF_ID_COLUMNS
    + MEASUREMENT_COLUMNS
)
PROGRAM_COLUMNS = (
    PAIR_COLUMNS
    + tuple(f"{s}_{c}" for s in ("base", "cand") for c in PROGRAM_SIDE_COLUMNS)
    + ROOF_ID_COLUMNS
)


@dataclasses.dataclass
class Side:
    """One side: its device, program records, and op records in the compared scope (`Total`,
    `Average` or a step label; op records carry a `fingerprint` column). `merge`: groups of op
    records (lists of indices) -> one record per group holding all their calls, made by the
    model from the op table (model/compare/op_merge.py)."""

    device: DeviceInfo
    program: RecordTable
    ops: RecordTable
    scope: str
    num_steps: int
    merge: Callable[[list], RecordTable]


@dataclasses.dataclass
class Comparison:
    program: PairTable
    ops: PairTable
    summary: dict
    notes: list


def compare(base: Side, cand: Side, top: int = 10) -> Comparison:
    program = _pair_program(base, cand)
    time_pair = _scope_pair(program, base.scope)
    change = (
        float(time_pair["cand_total_time_us"] - time_pair["base_total_time_us"])
        if time_pair is not None
        else np.nan
    )
    keys_b, keys_c = MatchKeys.of(base.ops.columns), MatchKeys.of(cand.ops.columns)
    base_cols, cand_cols, matching = _op_level(base, cand, keys_b, keys_c, match(keys_b, keys_c))
    base_cols = with_time_per_core(base_cols, base.device.num_cores)
    cand_cols = with_time_per_core(cand_cols, cand.device.num_cores)
    ops = pair_table(
        base_cols,
        cand_cols,
        matching,
        SIDE_COLUMNS,
        OP_COLUMNS,
        ("total_self_time_us", "self_time_per_core_us"),
        change,
    )
    with_roof_ids(ops, base.device, cand.device)
    with_measurements(ops)
    with_roof_ids(program, base.device, cand.device)
    order = _largest_change_first(ops)
    ops = ops.select(order)
    summary = _summary(program, ops, time_pair, change, base, cand, top)
    notes = _notes(base, cand, ops)
    if summary["within_one_call"]:
        notes.append(
            f"the time per core changed by {_us(summary['time_change_per_core_us'])}, no more "
            f"than the longest single op call ({_us(summary['longest_call_us'])}): one call "
            "more or less, not a speedup or slowdown the profiles can tell"
        )
    return Comparison(program, ops, summary, notes)


def _us(v: float) -> str:
    return f"{abs(v):,.3g} µs"


def longest_call_us(ops: PairTable) -> float | None:
    """The longest single call of any op on either side, µs: an op record's self time over its
    calls (`total_self_time_us / occurrences`); None when no record has a call."""
    c = ops.columns
    per_call = [
        div(np.nan_to_num(c[f"{s}_total_self_time_us"]), np.nan_to_num(c[f"{s}_occurrences"]))
        for s in ("base", "cand")
    ]
    values = np.concatenate(per_call) if len(ops) else np.zeros(0)
    return float(values.max()) if values.size and values.max() > 0 else None


def _op_level(base: Side, cand: Side, keys_b: MatchKeys, keys_c: MatchKeys, m: Matching):
    """(base columns, candidate columns, matching) after the `op` rule: an op (program and op
    name) with a record left unpaired on one side while the other side runs it too has all its
    records on each side merged into one (Side.merge), and the two merged records pair. So an
    op is new or removed only when the other side does not run it at all."""
    op_b = list(zip(keys_b.program.tolist(), keys_b.operation.tolist()))
    op_c = list(zip(keys_c.program.tolist(), keys_c.operation.tolist()))
    left = {op_b[i] for i in m.base[m.cand < 0].tolist()} | {
        op_c[j] for j in m.cand[m.base < 0].tolist()
    }
    ops = sorted(left & set(op_b) & set(op_c))
    if not ops:
        return base.ops.columns, cand.ops.columns, m
    index = {op: g for g, op in enumerate(ops)}
    group_b = np.array([index.get(op, -1) for op in op_b], np.int64)
    group_c = np.array([index.get(op, -1) for op in op_c], np.int64)
    merged_b = base.merge([np.flatnonzero(group_b == g) for g in range(len(ops))])
    merged_c = cand.merge([np.flatnonzero(group_c == g) for g in range(len(ops))])
    nb, nc = len(op_b), len(op_c)
    kept = np.where(m.base >= 0, group_b[np.maximum(m.base, 0)] < 0, True) & np.where(
        m.cand >= 0, group_c[np.maximum(m.cand, 0)] < 0, True
    )
    n = len(ops)
    matching = Matching(
        np.concatenate([m.base[kept], nb + np.arange(n)]),
        np.concatenate([m.cand[kept], nc + np.arange(n)]),
        np.concatenate([m.rule[kept], np.full(n, OP, dtype=object)]),
    )
    return (
        _append(base.ops.columns, merged_b.columns),
        _append(cand.ops.columns, merged_c.columns),
        matching,
    )


def _append(cols: dict, more: dict) -> dict:
    """Record columns with the rows of `more` after their own (the columns both have)."""
    return {k: np.concatenate([v, more[k]]) for k, v in cols.items() if k in more}


def with_time_per_core(cols: dict, num_cores: int) -> dict:
    """Op record columns with each record's self time per core (per chip, GPU, ...): its self
    time summed over the side's cores divided by their number, NaN when the side counts none.
    The verdicts of a pair are read from it, so a side over fewer cores is not faster for it."""
    per_core = (
        np.asarray(cols["total_self_time_us"], np.float64) / num_cores
        if num_cores
        else np.full(len(cols["total_self_time_us"]), np.nan)
    )
    return {**cols, "self_time_per_core_us": per_core}


def _largest_change_first(t: PairTable) -> np.ndarray:
    cand = t.columns["cand_operation"]
    missing = np.array([v is None for v in cand.tolist()], bool)
    name = np.where(missing, t.columns["base_operation"], cand).astype(str)
    return np.lexsort((name, -np.abs(t.columns["delta_time_us"])))


# --- program records ------------------------------------------------------------------------


def _pair_program(base: Side, cand: Side) -> PairTable:
    """Total with Total, Total (HW) with Total (HW), Average with Average, hosts by name (then
    by position), steps by position; for a step scope, the two chosen steps."""
    b, c = base.program.columns, cand.program.columns
    pairs: list[tuple[int, int, str]] = []
    if base.scope != cand.scope or scope_record_type(base.scope) == "step":
        pairs.append((scope_record(b, base.scope), scope_record(c, cand.scope), "scope"))
    else:
        for kind in ("total", "total_hw", "average"):
            ib, ic = _find(b, "record_type", kind), _find(c, "record_type", kind)
            if ib >= 0 or ic >= 0:
                pairs.append((ib, ic, "record"))
        pairs += _by_position(
            _indices(b, "host"), _indices(c, "host"), b["host"], c["host"], "host"
        )
        pairs += _by_position(_indices(b, "step"), _indices(c, "step"), None, None, "position")
    bi = np.array([p[0] for p in pairs], np.int64)
    ci = np.array([p[1] for p in pairs], np.int64)
    rule = np.array([p[2] for p in pairs], dtype=object)
    return pair_table(
        b,
        c,
        Matching(bi, ci, rule),
        PROGRAM_SIDE_COLUMNS,
        PROGRAM_COLUMNS,
        ("total_time_us", "total_time_per_core_us"),
        np.nan,
    )


def _find(cols: dict, column: str, value) -> int:
    values = cols[column].tolist()
    return values.index(value) if value in values else -1


def scope_record(cols: dict, scope: str) -> int:
    """The program record of a scope: the Total, the Average or the step so labelled (-1)."""
    kinds, steps = cols["record_type"].tolist(), cols["step"].tolist()
    want = scope_record_type(scope)
    for i, (k, s) in enumerate(zip(kinds, steps)):
        if k == want and (want != "step" or s == scope):
            return i
    return -1


def _indices(cols: dict, kind: str) -> list[int]:
    return [i for i, k in enumerate(cols["record_type"].tolist()) if k == kind]


def _by_position(ib: list, ic: list, names_b, names_c, rule: str) -> list:
    """Records of one kind: same name first (hosts), then in order."""
    pairs = []
    if names_b is not None:
        by_name = {names_c[i]: i for i in ic}
        for i in list(ib):
            j = by_name.get(names_b[i])
            if j is not None:
                pairs.append((i, j, "name"))
                ib = [x for x in ib if x != i]
                ic = [x for x in ic if x != j]
    k = min(len(ib), len(ic))
    pairs += [(ib[n], ic[n], rule) for n in range(k)]
    pairs += [(i, -1, "") for i in ib[k:]] + [(-1, j, "") for j in ic[k:]]
    return pairs


def _scope_pair(program: PairTable, scope: str):
    """The program pair whose time the summary explains: Total, Average, or the chosen steps."""
    cols = program.columns
    want = scope_record_type(scope)
    for i in range(len(program)):
        if cols["match_rule"][i] == "scope" or cols["base_record_type"][i] == want:
            if cols["status"][i] == MATCHED:
                return {k: v[i] for k, v in cols.items()}
            return None
    return None


# --- summary --------------------------------------------------------------------------------


def _summary(
    program: PairTable, ops: PairTable, pair, change: float, base: Side, cand: Side, top: int
) -> dict:
    delta = ops.columns["delta_time_us"]
    op_change = float(delta.sum())
    n_top = min(top, len(ops))
    top_rows = ops.select(np.arange(n_top)).row_dicts()  # ops are in largest-change order
    return {
        "scope": {"base": base.scope, "cand": cand.scope},
        "num_steps": {"base": base.num_steps, "cand": cand.num_steps},
        **_time_summary(pair, change, longest_call_us(ops)),
        "op_time_change_us": op_change,
        "other_time_change_us": change - op_change if np.isfinite(change) else None,
        **_pair_counts(ops.columns),
        "top_contributors": [{k: r[k] for k in _CONTRIBUTOR_KEYS} for r in top_rows],
        "explained_share": (
            float(delta[:n_top].sum()) / change if np.isfinite(change) and change else None
        ),
    }


_CONTRIBUTOR_KEYS = (
    "status",
    "match_rule",
    "program",
    "base_operation",
    "cand_operation",
    "delta_time_us",
    "share_of_change",
)


def _time_summary(pair, change: float, longest: float | None) -> dict:
    """The scope's time on each side, summed over cores and per core, and its change. Percent
    and speedup are of the wall time (per core): the same as of the sums over cores when both
    sides have as many cores."""
    wb, wc = _num(pair, "base_total_time_per_core_us"), _num(pair, "cand_total_time_per_core_us")
    per_core_change = wc - wb if wb is not None and wc is not None else None
    percent = 100.0 * (wc - wb) / wb if wb and wc is not None else None
    return {
        "base_time_us": float(pair["base_total_time_us"]) if pair is not None else None,
        "cand_time_us": float(pair["cand_total_time_us"]) if pair is not None else None,
        "base_time_per_core_us": wb,
        "cand_time_per_core_us": wc,
        "time_change_us": change if np.isfinite(change) else None,
        "time_change_per_core_us": per_core_change,
        # A change no larger than one call is one kernel more or less, not a speedup.
        "longest_call_us": longest,
        "within_one_call": (
            0 < abs(per_core_change) <= longest
            if per_core_change is not None and longest is not None
            else None
        ),
        "time_change_percent": percent,
        "speedup": wb / wc if wb and wc else None,
        **change_label(percent),
    }


def _pair_counts(c: dict) -> dict:
    """How many pairs of each status, rule and change, and the time of the new and removed."""
    status = c["status"]
    rules: dict = {}
    for r in c["match_rule"][status == MATCHED].tolist():
        rules[r] = rules.get(r, 0) + 1
    return {
        "matched": int((status == MATCHED).sum()),
        "new": int((status == NEW).sum()),
        "removed": int((status == REMOVED).sum()),
        "rules": rules,
        "faster": int((c["change"] == "faster").sum()),
        "slower": int((c["change"] == "slower").sum()),
        "same": int((c["change"] == "same").sum()),
        "new_time_us": float(np.nansum(c["cand_total_self_time_us"][status == NEW])),
        "removed_time_us": float(np.nansum(c["base_total_self_time_us"][status == REMOVED])),
    }


def change_label(percent) -> dict:
    """The wall-time change in words that follow its sign: a negative change is faster, a
    positive one slower (`change`, `change_label`: "0.7% slower")."""
    if percent is None or not np.isfinite(percent):
        return {"change": None, "change_label": None}
    word = "faster" if percent < 0 else "slower" if percent > 0 else "same"
    return {
        "change": word,
        "change_label": "no change" if word == "same" else f"{abs(percent):.1f}% {word}",
    }


def _num(pair, key):
    if pair is None:
        return None
    v = float(pair[key])
    return v if np.isfinite(v) else None


def _notes(base: Side, cand: Side, ops: PairTable) -> list[str]:
    notes = []
    db, dc = base.device, cand.device
    if _roofs(db) != _roofs(dc):
        notes.append(
            f"the two sides ran on different devices or under other peaks ({db.type} "
            f"vs {dc.type}): each point is placed under its own device's roofs and "
            "its efficiency is against those roofs"
        )
    for name, d in (("base", db), ("candidate", dc)):
        if not d.peaks_known:
            notes.append(
                f"the {name} has no known peaks: its efficiencies are unknown "
                "(tb-roofline calibrate, or a device file)"
            )
    if db.num_cores != dc.num_cores:
        notes.append(
            f"the base has {db.num_cores} core(s) and the candidate {dc.num_cores}: op "
            "times are summed over cores (as in the op table); every change in percent, "
            "speedup and faster/slower verdict is of the time per core"
        )
    if base.scope == cand.scope == "Total" and base.num_steps != cand.num_steps:
        notes.append(
            f"the base holds {base.num_steps} step(s) and the candidate "
            f"{cand.num_steps}: Total compares whole profiles; compare per step with "
            "step=Average"
        )
    c = ops.columns
    matched = c["status"] == MATCHED
    prec = int((matched & (c["base_precision"] != c["cand_precision"])).sum())
    if prec:
        notes.append(f"{prec} matched op(s) ran at another precision (another compute roof)")
    apart = sum(
        b is False or c_ is False
        for b, c_ in zip(c["base_measurement"].tolist(), c["cand_measurement"].tolist())
    )
    if apart:
        notes.append(
            f"{apart} op pair(s) have a side that is not a roofline measurement (async "
            "halves, transfers, no cost, ...): their times are compared, their efficiencies "
            "are not"
        )
    return notes


def _roofs(device: DeviceInfo) -> tuple:
    return (
        tuple((c.precision, round(c.gflops, 6)) for c in device.compute),
        tuple((m.id, round(m.gbs, 6)) for m in device.memories),
    )
