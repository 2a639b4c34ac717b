"""Sums of the op table's rows: every SUM_COLUMNS column per key (distinct op), grouped sums
of those, and per-step sums (the one pass over the rows the analysis makes itself).

Records that group whole keys (ops, program totals, hosts) are sums over keys
(`key_sums`, `group_sums`): the row columns' part of them is made where each host was read
(table/key_sums.py `row_key_sums`) and finished here with the device's roofs and the cost
flags. Only per-step records need the rows again (`step_sums`), a block of rows at a time
(`block_sums`), with the sums of one pass over the whole columns, bit for bit.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.precision_ceilings import roof_precisions
from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.model.records import steps as steps_model
from tb_roofline.model.records.floors import Roofs
from tb_roofline.model.records.record_table import SUM_COLUMNS
from tb_roofline.model.records.records import call_floors, compute_roof, div, resources
from tb_roofline.table import key_sums as table_sums
from tb_roofline.table.key_sums import row_key_sums, row_values
from tb_roofline.table.op_table import COST_COLUMNS, OpTable, is_constant


def key_peaks(table: OpTable, device: DeviceInfo) -> np.ndarray:
    """The compute ceiling each key is judged under (records.compute_roof of its
    precision_ceilings.roof_precisions; 0 when none)."""
    return compute_roof(device, roof_precisions(table.keys, device))


def row_column(table: OpTable, c: str, roofs: Roofs | None) -> np.ndarray:
    """One per-row column of SUM_COLUMNS (float64; the table's own array when it is one)."""
    rows, keys, op = table.rows, table.keys, table.rows["op"]
    if c in rows or c in COST_COLUMNS:  # (one of one value stays so: `sum_by` counts it)
        return row_values(table, c)
    if c in ("roof_time", "floor_time", "gap_ps", "link_roof_bytes"):
        if roofs is None:
            raise ValueError(f"the {c} column needs the device's roofs")
        return _roof_column(table, c, roofs)
    time = np.asarray(rows["total_time_ps"], np.float64)
    if c == "op_time_ps":
        return time
    return time * keys["flops_known" if c == "flops_known_ps" else "bytes_known"][op]


def _roof_column(table: OpTable, c: str, roofs: Roofs) -> np.ndarray:
    """roof_time, floor_time, gap_ps or link_roof_bytes of each row."""
    op = table.rows["op"]
    if c == "roof_time":
        return table["flops"] * roofs.inv_peak[op]
    if c == "link_roof_bytes":
        return link_roof_bytes(table["interconnect_bytes"], roofs, op)
    if c == "gap_ps" and roofs.proven is None:
        return np.zeros(len(op))
    floor = _row_floors(table, roofs)
    if c == "floor_time":
        return floor
    assert roofs.proven is not None
    return (np.asarray(table.rows["total_time_ps"], np.float64) - floor * 1e3) * roofs.proven[op]


def _row_floors(table: OpTable, roofs: Roofs) -> np.ndarray:
    """The floor of each row. A row's FLOPs and bytes are its key's unit costs times its
    occurrences, so rows of one (key, occurrences) share a floor, bit for bit (the same
    arithmetic on the same values): where those pairs are fewer than the rows (a host of a
    row per event: 5.8 million rows, 1,700 keys, one or two executions a row), each pair's
    floor is worked out once and gathered, not once per row."""
    op, occ, unit = table.rows["op"], table.rows["occurrences"], table.unit_costs
    cols = ["flops"] + [col for _, col, _ in resources(roofs.device)]
    pairs = _occurrence_pairs(table, cols)
    if pairs is None:
        mem = {col: table[col] for col in cols[1:]}
        return roofs.floors(table["flops"], mem, op)
    key, times, lo, span = pairs
    assert unit is not None
    per_pair = {
        c: unit[:, j][key] * times
        if (j := COST_COLUMNS.index(c)) < unit.shape[1]
        else np.zeros(len(key))
        for c in cols
    }
    floors = roofs.floors(per_pair["flops"], per_pair, key)
    at = op * span
    at += occ
    at -= lo
    return floors[at]


def _occurrence_pairs(table: OpTable, cols: list):
    """(key, occurrences of every (key, occurrences) pair, least occurrences, their range)
    when the table's costs are float64 unit costs and the pairs are fewer than its rows; else
    None."""
    unit, occ = table.unit_costs, table.rows["occurrences"]
    if unit is None or unit.dtype != np.float64 or not all(c in COST_COLUMNS for c in cols):
        return None
    if occ.dtype.kind not in "iu" or not len(occ):
        return None
    lo, hi = (int(occ[0]),) * 2 if is_constant(occ) else (int(occ.min()), int(occ.max()))
    span = hi - lo + 1
    if len(unit) * span > len(occ):
        return None
    key = np.repeat(np.arange(len(unit)), span)
    times = np.tile(np.arange(lo, hi + 1, dtype=occ.dtype), len(unit))
    return key, times, lo, span


def link_roof_bytes(link_bytes, roofs: Roofs, keys) -> np.ndarray:
    """Interconnect bytes ÷ the share of the link figure their key's group can use (per row,
    `keys` its key; None: per key): summed over a record, `link_roofs.link_share` of it is the
    record's share."""
    scale = roofs.link_scale
    if scale is None:
        return np.asarray(link_bytes, np.float64)
    return div(link_bytes, scale if keys is None else scale[keys])


def block_sums(table: OpTable, columns, roofs: Roofs | None, codes_of, n: int, onto=None) -> dict:
    """Each of `columns` (SUM_COLUMNS, per row as `row_column` makes them) summed by a code per
    row into `n` sums, a block of rows at a time (table/key_sums.py `block_sums`: `sum_by`'s
    sums bit for bit, no temporary longer than a block); `onto`: the sums so far, added to
    (then every column gets its own pass: a column equal to another on this table may not
    have been on the tables summed before)."""
    same = same_rows(table, columns, roofs) if onto is None else {}
    sums = table_sums.block_sums(
        table,
        [c for c in columns if c not in same],
        lambda part, c: row_column(part, c, roofs),
        codes_of,
        n,
        onto,
    )
    for c, like in same.items():  # (the same values added in the same order: the same sums)
        sums[c] = np.zeros(n) if like is None else sums[like].copy()
    return sums


def same_rows(table: OpTable, columns, roofs: Roofs | None) -> dict:
    """The columns of `columns` whose per-row values `row_column` makes equal to an earlier
    column's, bit for bit, or to zero (None), so their sums need no pass of their own: the op
    time is the total time; a cost flag set on every key multiplies the time by one; a cost
    column whose unit costs are all zero or another's (the CMEM columns of a TPU without CMEM);
    link roof bytes without link scales are the interconnect bytes."""
    unit, keys = table.unit_costs, table.keys
    made: dict = {}  # a recipe of row values -> the first column made by it
    same: dict = {}
    for c in columns:
        recipe: object = c
        if c in ("op_time_ps", "flops_known_ps", "bytes_known_ps"):
            flag = "flops_known" if c == "flops_known_ps" else "bytes_known"
            if c == "op_time_ps" or bool(np.all(keys[flag] == 1)):
                recipe = "total_time_ps"
        elif c == "link_roof_bytes" and roofs is not None and roofs.link_scale is None:
            recipe = "interconnect_bytes"
        elif c in COST_COLUMNS and c not in table.rows and _plain_units(unit):
            assert unit is not None
            j = COST_COLUMNS.index(c)
            col = unit[:, j] if j < unit.shape[1] else None
            recipe = None if col is None or not col.any() else ("unit", col.tobytes())
        if recipe is None:
            same[c] = None
        elif recipe in made:
            same[c] = made[recipe]
        else:
            made[recipe] = c
    return same


def _plain_units(unit) -> bool:
    """Unit costs whose equal bytes make equal row values (finite float64: no NaN payloads)."""
    return unit is not None and unit.dtype == np.float64 and bool(np.isfinite(unit).all())


def sum_by(codes: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """`np.bincount(codes, weights, n)`; a constant column of zeros or ones (table/op_table.py)
    as counts, without the full-length copy bincount would make of it (the same sums, exactly:
    counts of ones are integers)."""
    if is_constant(weights) and weights[0] in (0, 1) and len(weights) == len(codes):
        return np.bincount(codes, minlength=n) * (float(weights[0]) + 0.0)  # (never -0.0)
    return np.bincount(codes, weights=weights, minlength=n)


def key_sums(table: OpTable, device: DeviceInfo) -> dict[str, np.ndarray]:
    """SUM_COLUMNS summed per key (distinct op): every record that groups whole keys (ops,
    program totals, hosts) is then a sum over keys. The row columns' sums are the ones made
    where the hosts were read when the table carries them, else one pass over its rows."""
    n, unit = table.num_keys, table.unit_costs
    out = row_key_sums(table)
    if unit is not None:  # a row's costs are its key's times its occurrences
        for j, c in enumerate(COST_COLUMNS):  # (columns a reader does not give: 0)
            out[c] = unit[:, j] * out["occurrences"] if j < unit.shape[1] else np.zeros(n)
    out["roof_time"] = div(out["flops"], key_peaks(table, device))
    out["flops_known_ps"] = out["total_time_ps"] * table.keys["flops_known"]
    out["bytes_known_ps"] = out["total_time_ps"] * table.keys["bytes_known"]
    out["op_time_ps"] = out["total_time_ps"]
    # A key's calls share one shape (PyTorch keys hold their input shapes, XLA keys are one
    # instruction): its floor from its sums is the sum of its calls' floors.
    roofs = Roofs.of(table, device)
    out["link_roof_bytes"] = link_roof_bytes(out["interconnect_bytes"], roofs, None)
    out["floor_time"], out["bound_code"] = call_floors(
        out["flops"], out, div(1.0, key_peaks(table, device)), device, roofs.link, roofs.link_scale
    )
    out["gap_ps"] = np.zeros(n)  # (set once the op records say which gaps are proven)
    return out


def group_sums(sums: dict, codes: np.ndarray, n: int, mask=None) -> dict:
    """Sums grouped by a code per element (elements with mask False left out)."""
    if mask is not None:
        codes = codes[mask]
    return {
        c: np.bincount(codes, weights=v if mask is None else v[mask], minlength=n)
        for c, v in sums.items()
    }


def step_sums(
    table: OpTable,
    roofs: Roofs,
    aligned: steps_model.Steps,
    profile_host: np.ndarray,
    key_host: np.ndarray,
) -> dict:
    """SUM_COLUMNS per (aligned step, infeed/outfeed or not), as (steps, 2) arrays, in one
    pass over the rows; rows outside complete steps and containers left out."""
    one = StepPass(roofs, aligned, profile_host, key_host, np.zeros(2, np.int64))
    one.bounds[1] = table.num_keys
    return one.finish(one.add(one.start(), 0, table))


# (floor_time is the op records' column: a program's saving is its gap_ps)
STEP_SUMMED = tuple(c for c in SUM_COLUMNS if c != "floor_time")


@dataclasses.dataclass
class StepPass:
    """The per-step sums of a run made host by host, where each host's rows are (a Dask worker
    holding its table): `start()` the sums before any row, `add(sums, h, table)` host h's rows
    added onto them in place (hosts in the run's order), `finish(sums)` the (steps, 2) arrays
    `step_sums` gives. Adding each host's rows onto the sums so far adds every row in the order
    one pass over the run's table does (table/key_sums.py `block_sums`), so the sums are
    `step_sums`'s bit for bit; what travels between hosts is the sums (kilobytes), not rows.
    Every array here is the run's, per key: `bounds[h]:bounds[h + 1]` are host h's keys."""

    roofs: Roofs
    aligned: steps_model.Steps
    profile_host: np.ndarray
    key_host: np.ndarray
    bounds: np.ndarray  # the run's key offset of each host's table, and the key count last

    @property
    def n_codes(self) -> int:
        return 2 * len(self.aligned) + 1

    def start(self) -> dict:
        return {c: np.zeros(self.n_codes) for c in STEP_SUMMED}

    def add(self, sums: dict, h: int, table: OpTable) -> dict:
        """Host h's rows (`table`, its own keys: the run's keys of host h) added onto `sums`."""
        lo, hi = int(self.bounds[h]), int(self.bounds[h + 1])
        if hi - lo != table.num_keys:
            raise ValueError(
                f"host {h}'s table has {table.num_keys} keys, the run has {hi - lo} for it"
            )
        keys, n_steps = table.keys, len(self.aligned)
        coder = steps_model.step_coder(
            self.aligned, self.profile_host, self.key_host[lo:hi], table.rows["step"]
        )

        def codes(part: OpTable) -> np.ndarray:  # (in place where it can)
            op = part.rows["op"]
            code = coder(op, part.rows["step"])
            left_out = code < 0
            left_out |= keys["is_container"][op]
            code *= 2
            code += keys["is_infeed_outfeed"][op]
            code[left_out] = 2 * n_steps
            return code

        return block_sums(table, STEP_SUMMED, self.roofs.sliced(lo, hi), codes, self.n_codes, sums)

    def add_host(self, sums: dict, h: int, profile) -> dict:
        """`add` of host h's profile (its `ProfileData`, where it is held)."""
        return self.add(sums, h, profile.ops)

    def finish(self, sums: dict) -> dict:
        n_steps = len(self.aligned)
        return {
            c: sums[c][:-1].reshape(n_steps, 2) if c in sums else np.zeros((n_steps, 2))
            for c in SUM_COLUMNS
        }


ROW_COUNT = "rows"  # (ScopePass: the rows of each key, summed as ones)


@dataclasses.dataclass
class ScopePass:
    """The op table's row columns summed per key over the rows of some complete steps (a
    step's or the average step's op records), made host by host where the hosts' rows are
    kept, as `StepPass` makes the per-step sums: `add_host(sums, h, profile)` adds host h's
    rows onto the sums so far (hosts in the run's order), `finish(sums)` gives the run's key
    sums and each key's row count. A key's rows are its host's, added in their order, so the
    sums are those of the run's table cut to those rows, bit for bit."""

    aligned: steps_model.Steps
    profile_host: np.ndarray
    key_host: np.ndarray
    bounds: np.ndarray  # the run's key offset of each host's table, and the key count last
    steps: np.ndarray  # the aligned steps whose rows are summed
    columns: tuple  # table/key_sums.py `summed_columns` of the run's table

    def start(self) -> dict:
        n = int(self.bounds[-1]) + 1  # (the last: rows of no wanted step)
        return {c: np.zeros(n) for c in self.columns + (ROW_COUNT,)}

    def add_host(self, sums: dict, h: int, profile) -> dict:
        table = profile.ops
        lo, hi = int(self.bounds[h]), int(self.bounds[h + 1])
        if hi - lo != table.num_keys:
            raise ValueError(
                f"host {h}'s table has {table.num_keys} keys, the run has {hi - lo} for it"
            )
        coder = steps_model.step_coder(
            self.aligned, self.profile_host, self.key_host[lo:hi], table.rows["step"]
        )
        wanted = np.zeros(len(self.aligned) + 1, bool)  # (-1, no complete step: the last)
        wanted[self.steps] = True
        dump = int(self.bounds[-1])

        def codes(part: OpTable) -> np.ndarray:
            op = part.rows["op"]
            keep = wanted[coder(op, part.rows["step"])]
            return np.where(keep, np.add(op, lo, dtype=np.int64), dump)

        def values(part: OpTable, c: str) -> np.ndarray:
            return np.ones(len(part)) if c == ROW_COUNT else row_values(part, c)

        columns = list(self.columns) + [ROW_COUNT]
        return table_sums.block_sums(table, columns, values, codes, dump + 1, sums)

    def finish(self, sums: dict) -> tuple:
        """(the key sums of `columns`, each key's row count)."""
        return (
            {c: sums[c][:-1] for c in self.columns},
            sums[ROW_COUNT][:-1].astype(np.int64),
        )
