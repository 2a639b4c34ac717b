"""Per-step sums of columns whose rows equal another column's, or zero (`row_sums.same_rows`),
are copied, not summed again: checked on a real TPU host's table against `np.bincount` over
whole columns made here from the table's own arrays (a row's cost is its key's unit cost times
its occurrences; the op time is the total time; a flagged time is the time times its key's
flag), bit for bit, with the flags all set and with some cleared."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from testpaths import REPO

from tb_roofline.model.records import row_sums
from tb_roofline.model.records.floors import Roofs
from tb_roofline.readers.xspace.tpu.file import convert_plan, plan_file
from tb_roofline.table.op_table import COST_COLUMNS, OpTable

HOST = "testdata/demo/v6e_train/plugins/profile/*/*.xplane.pb"
CHECKED = ("total_time_ps", "op_time_ps", "flops_known_ps", "bytes_known_ps") + COST_COLUMNS


def _host():
    (path,) = glob.glob(os.path.join(REPO, HOST))
    data = convert_plan(plan_file(path, "host0"))
    return data.ops, data.device


def _expected(table: OpTable, c: str, codes: np.ndarray, n: int) -> np.ndarray:
    rows, op = table.rows, table.rows["op"]
    time = np.asarray(rows["total_time_ps"], np.float64)
    if c in ("total_time_ps", "op_time_ps"):
        w = time
    elif c in ("flops_known_ps", "bytes_known_ps"):
        w = time * table.keys[c.replace("_ps", "")][op]
    else:
        assert table.unit_costs is not None
        w = table.unit_costs[:, COST_COLUMNS.index(c)][op] * np.asarray(rows["occurrences"])
    return np.bincount(codes, weights=w, minlength=n)


@pytest.mark.parametrize("flags", ["all set", "some cleared"])
def test_copied_sums_are_the_columns_own(flags):
    table, device = _host()
    if flags == "some cleared":
        keys = dict(table.keys)
        for f in ("flops_known", "bytes_known"):
            keys[f] = keys[f].copy()
            keys[f][::3] = False
        table = OpTable(keys, table.rows, table.unit_costs)
    roofs = Roofs.of(table, device)
    same = row_sums.same_rows(table, CHECKED, roofs)
    assert same["op_time_ps"] == "total_time_ps"
    assert same["cmem_read_bytes"] is None and same["cmem_write_bytes"] is None  # (no CMEM)
    flagged = {"flops_known_ps", "bytes_known_ps"} <= same.keys()
    assert flagged == (flags == "all set")
    step = np.asarray(table.rows["step"])
    codes = step - step.min()
    n = int(codes.max()) + 1
    got = row_sums.block_sums(table, CHECKED, roofs, lambda part: part.rows["step"] - step.min(), n)
    for c in CHECKED:
        assert got[c].tobytes() == _expected(table, c, codes, n).tobytes(), c
    assert got["op_time_ps"] is not got["total_time_ps"]  # (each its own array)
