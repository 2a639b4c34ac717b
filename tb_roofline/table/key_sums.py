"""The op table's row columns summed per key (distinct op): the part of the model's key sums
that needs neither the device nor the cost flags, so the unit that read a host makes it where
the rows are (a pool process, a Dask worker) and the analysis concatenates the hosts' sums
instead of passing over every row again (model/records/row_sums.py `key_sums`).

A run's keys are its hosts' keys side by side (`OpTable.concat`), and a key's sum adds only
its own host's rows, in their order: the hosts' sums put side by side are the run's, bit for
bit. Adding goes a block of rows at a time (`block_sums`), which the model's per-step pass
uses too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

import numpy as np

from tb_roofline.table.op_table import (
    COST_COLUMNS,
    MEMORY_COLUMNS,
    ROW_BLOCK,
    OpTable,
    constant,
    is_constant,
    narrow_ints,
)

# The row columns the model sums per key; the model adds the sums it derives with the roofs
# and cost flags (model/records/record_table.py `SUM_COLUMNS`).
ROW_SUM_COLUMNS = (
    ("occurrences", "total_time_ps", "self_time_ps", "dma_stall_ps")
    + ("flops", "model_flops", "bytes")
    + tuple(c for c, *_ in MEMORY_COLUMNS)
    + ("async_span_ps",)
)


def row_values(table: OpTable, c: str) -> np.ndarray:
    """A row column as float64 (one of one value stays constant: `block_sums` counts it)."""
    rows = table.rows
    if c in rows and is_constant(rows[c]):
        return constant(np.float64(rows[c][0]), len(rows[c]))
    return np.asarray(table[c], np.float64)


def _block(rows: Mapping, lo: int) -> dict:
    """The rows of one block, its `op` codes as numpy's index type: a block's columns are
    gathered by them a dozen times (unit costs, key flags, roofs), and a gather by int32
    codes converts them each time (65,536 rows: 135 us a gather, 37 us by intp codes)."""
    block = {k: v[lo : lo + ROW_BLOCK] for k, v in rows.items()}
    op = block["op"]
    if op.dtype != np.intp and not is_constant(op):
        block["op"] = op.astype(np.intp)
    return block


def block_sums(
    table: OpTable, columns, column_of: Callable, codes_of: Callable, n: int, onto=None
) -> dict:
    """Each of `columns` (per row as `column_of(part, c)` makes them) summed by a code per row
    into `n` sums, ROW_BLOCK rows at a time: `codes_of(part)` gives the codes of a block's
    rows. `np.add.at` adds each row in turn, as `np.bincount` does over a whole column, so the
    sums are one pass's over whole columns bit for bit, while no temporary is longer than a
    block: a run of 64 hosts is 3.2 million rows, 25 MB per float64 column.

    `onto`: the sums so far (of the tables before this one, in a run's order), added to in
    place: a run's tables summed one after the other so are the run's table summed at once,
    bit for bit (`_exact_count`), without their rows in one place."""
    rows = table.rows
    counted = [c for c in columns if _counted(rows.get(c)) and _exact_count(onto, c, rows)]
    sums: dict[str, np.ndarray] = {c: np.zeros(n) for c in columns if c not in counted}
    if onto is not None:
        _native(onto)
        sums = {c: onto[c] for c in sums}
    counts = np.zeros(n, np.int64)  # rows per code: what every counted column sums to
    for lo in range(0, len(table), ROW_BLOCK):
        part = OpTable(table.keys, _block(rows, lo), table.unit_costs)
        code = codes_of(part)
        if counted:
            counts += np.bincount(code, minlength=n)
        for c, total in sums.items():
            np.add.at(total, code, column_of(part, c))
    for c in counted:  # (the counts times the one value, never -0.0)
        sums[c] = counts * (float(rows[c][0]) + 0.0)
        if onto is not None:
            sums[c] = onto[c] + sums[c]
            onto[c] = sums[c]
    return sums if onto is None else onto


def _native(sums: dict) -> None:
    """Sums that came pickled (from another worker) as float64 arrays of numpy's own float64
    type, in place: an unpickled dtype is an equal copy, not numpy's instance, and `np.add.at`
    into an array of it takes its general path, 10 to 50 times slower (the same values)."""
    for c, v in sums.items():
        if v.dtype is not _FLOAT64:
            sums[c] = v.astype(np.float64)


_FLOAT64 = np.dtype(np.float64)


def _exact_count(onto, c: str, rows: Mapping) -> bool:
    """Whether a counted column's rows may be added as their count onto the sums so far: adding
    zeros is exact, and so is adding ones onto whole numbers below 2**53; ones onto a sum with
    a fraction round as each is added, so those are added one by one, as the run's pass does."""
    if onto is None or float(rows[c][0]) == 0.0:
        return True
    so_far = onto[c]
    return bool(np.all((so_far == np.floor(so_far)) & (np.abs(so_far) < 2.0**52)))


def _counted(column) -> bool:
    """A constant row column of zeros or ones: summed as counts (exact, as adding them is)."""
    return column is not None and is_constant(column) and column[0] in (0, 1)


def summed_columns(table: OpTable) -> list:
    """The ROW_SUM_COLUMNS summed from the rows: a table of unit costs has its cost columns
    per key already (a row's are its key's times its occurrences)."""
    unit = table.unit_costs
    return [c for c in ROW_SUM_COLUMNS if unit is None or c not in COST_COLUMNS]


def row_key_sums(table: OpTable) -> dict:
    """`summed_columns` per key: the ones made where the table was read (`with_row_sums`) when
    it carries them, else one pass over its rows now."""
    if table.row_sums is not None:
        return dict(table.row_sums)
    return block_sums(
        table, summed_columns(table), row_values, lambda part: part.rows["op"], table.num_keys
    )


def with_row_sums(table: OpTable | None) -> OpTable | None:
    """The table carrying its `row_key_sums`, made now (where its rows are), its integer row
    columns as narrow as their values allow (`op_table.narrow_ints`: what travels and is
    kept)."""
    if table is not None and table.row_sums is None:
        table.row_sums = row_key_sums(narrow_ints(table))
    return table
