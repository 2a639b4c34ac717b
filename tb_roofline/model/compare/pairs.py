"""Paired records as columns: each side's values (None / NaN on a missing side), the deltas of
time, rates and efficiency, and whether the binding roof changed (docs/compare.md lists the
columns). The comparison (model/compare/comparison.py) pairs the records and ranks the pairs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.model.compare.matching import Matching
from tb_roofline.model.records.record_table import json_rows
from tb_roofline.model.records.records import binding_roof_ids, div, measurements

MATCHED, NEW, REMOVED = "matched", "new", "removed"
# Side columns held as objects (None on a missing side); the rest are floats (NaN there).
_STRING_COLUMNS = frozenset(
    {
        "operation",
        "program",
        "category",
        "precision",
        "caveat",
        "fingerprint",
        "bound_by",
        "record_type",
        "step",
        "host",
    }
)


@dataclasses.dataclass
class PairTable:
    """Paired records as numpy columns, in `names` order."""

    columns: dict
    names: tuple

    def __len__(self):
        return len(self.columns["status"])

    def select(self, mask) -> PairTable:
        return PairTable({k: v[mask] for k, v in self.columns.items()}, self.names)

    def rows(self) -> list[list]:
        return json_rows(self.columns, self.names)

    def row_dicts(self) -> list[dict]:
        return [dict(zip(self.names, r)) for r in self.rows()]


def _side_values(base: dict, cand: dict, m: Matching, side_columns) -> dict:
    """`{side}_{column}` for each pair: the side's value, None (strings) or NaN where the pair
    has no op on that side."""
    out = {}
    for prefix, cols, idx in (("base", base, m.base), ("cand", cand, m.cand)):
        present = idx >= 0
        safe = np.where(present, idx, 0)
        for c in side_columns:
            arr = cols.get(c)
            if c in _STRING_COLUMNS:
                values = np.full(len(idx), None, dtype=object)
                if arr is not None and len(arr):
                    values[present] = arr[safe[present]]
            else:
                values = np.full(len(idx), np.nan)
                if arr is not None and len(arr):
                    values[present] = np.asarray(arr, np.float64)[safe[present]]
            out[f"{prefix}_{c}"] = values
    return out


def _pair_programs(base: dict, cand: dict, m: Matching) -> np.ndarray:
    """The program of each pair: the candidate's where it has the op, else the base's."""
    program = np.full(len(m.base), "", dtype=object)
    for cols, idx in ((base, m.base), (cand, m.cand)):
        if "program" in cols and len(cols["program"]):
            present = idx >= 0
            program[present] = cols["program"][idx[present]]
    return program


def _time_deltas(out: dict, m: Matching, both, time_columns, total_change: float) -> None:
    summed, per_core = time_columns
    delta = np.nan_to_num(out[f"cand_{summed}"]) - np.nan_to_num(out[f"base_{summed}"])
    out["delta_time_us"] = delta
    tb = np.nan_to_num(out[f"base_{per_core}"])
    tc = np.nan_to_num(out[f"cand_{per_core}"])
    delta_core = tc - tb
    out["delta_time_per_core_us"] = delta_core
    out["delta_time_percent"] = np.where(both & (tb > 0), div(delta_core, tb) * 100.0, np.nan)
    out["speedup"] = np.where(both & (tc > 0), div(tb, tc), np.nan)
    out["share_of_change"] = (
        delta / total_change
        if np.isfinite(total_change) and total_change != 0
        else np.full(len(delta), np.nan)
    )
    out["change"] = np.select(
        [~both & (m.base < 0), ~both, delta_core < 0, delta_core > 0],
        [NEW, REMOVED, "faster", "slower"],
        "same",
    ).astype(object)


def _roof_deltas(out: dict, both) -> None:
    for c in ("flop_rate", "operational_intensity", "roofline_efficiency"):
        d = out[f"cand_{c}"] - out[f"base_{c}"]
        out[f"delta_{c}"] = np.where(both, d, np.nan)
    # An efficiency delta only between two roofline measurements (records.measurements).
    if "base_caveat" in out:
        measured = [
            measurements(out[f"{s}_caveat"], out[f"{s}_roofline_efficiency"], out[f"{s}_bound_by"])
            for s in ("base", "cand")
        ]
        both_measured = measured[0].astype(bool) & measured[1].astype(bool)
        out["delta_roofline_efficiency"][~both_measured] = np.nan
    out["bound_by_changed"] = _on_pairs(both, out["base_bound_by"] != out["cand_bound_by"])
    pb, pc = out["base_peak_flop_rate"], out["cand_peak_flop_rate"]
    same_roof = (pb == pc) | (np.isnan(pb) & np.isnan(pc))
    out["roof_changed"] = _on_pairs(both, ~same_roof)


def pair_table(
    base: dict,
    cand: dict,
    m: Matching,
    side_columns,
    names,
    time_columns: tuple[str, str],
    total_change: float,
) -> PairTable:
    """Both sides' columns for each pair (None / NaN on a missing side) and the deltas.
    `time_columns`: (the time summed over a side's cores, the same per core). `delta_time_us`
    is of the sums (the pairs' deltas add up to the program's); the per-core delta, the percent,
    the speedup and the faster/slower verdict are of the times per core, so two sides over
    different numbers of cores compare by what each core spent."""
    out = _side_values(base, cand, m, side_columns)
    both = (m.base >= 0) & (m.cand >= 0)
    out["program"] = _pair_programs(base, cand, m)
    out["status"] = np.where(both, MATCHED, np.where(m.base >= 0, REMOVED, NEW)).astype(object)
    rule = np.asarray(m.rule, dtype=object).copy()
    rule[~both] = None
    out["match_rule"] = rule
    _time_deltas(out, m, both, time_columns, total_change)
    _roof_deltas(out, both)
    return PairTable(out, tuple(names))


def _on_pairs(both: np.ndarray, values: np.ndarray) -> np.ndarray:
    """An object column of `values` where both sides are present and None (unknown) on a
    missing side."""
    out = np.asarray(values).astype(object)
    out[~both] = None
    return out


def with_roof_ids(table: PairTable, base_device: DeviceInfo, cand_device: DeviceInfo):
    """Adds each side's binding roof id (ROOF_ID_COLUMNS), judged on that side's device; None
    on a missing side (no bound-by) and where nothing binds the record."""
    for prefix, device in (("base", base_device), ("cand", cand_device)):
        table.columns[f"{prefix}_binding_roof_id"] = binding_roof_ids(
            table.columns[f"{prefix}_bound_by"], device
        )


def with_measurements(table: PairTable):
    """Adds whether each op side is a roofline measurement (MEASUREMENT_COLUMNS: the one rule,
    records.measurements, on that side's caveat, efficiency and bound-by); None when missing."""
    c = table.columns
    for s in ("base", "cand"):
        c[f"{s}_measurement"] = measurements(
            c[f"{s}_caveat"], c[f"{s}_roofline_efficiency"], c[f"{s}_bound_by"]
        )
