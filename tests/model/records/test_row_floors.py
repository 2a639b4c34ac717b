"""Row floors worked out once per (key, occurrences) pair (`row_sums._row_floors`) are the
floors of the rows' own FLOPs and bytes, bit for bit: checked on a real TPU host's table
with its occurrences made to vary, against `records.call_floors` of each row's costs made
here from the unit costs (unit cost times occurrences)."""

from __future__ import annotations

import glob
import os

import numpy as np
from testpaths import REPO

from tb_roofline.model.records import row_sums
from tb_roofline.model.records.floors import Roofs
from tb_roofline.model.records.records import call_floors, resources
from tb_roofline.readers.xspace.tpu.file import convert_plan, plan_file
from tb_roofline.table.op_table import COST_COLUMNS, OpTable, constant

HOST = "testdata/demo/v6e_train/plugins/profile/*/*.xplane.pb"


def _host():
    (path,) = glob.glob(os.path.join(REPO, HOST))
    data = convert_plan(plan_file(path, "host0"))
    return data.ops, data.device


def _expected(table: OpTable, roofs: Roofs, occ: np.ndarray) -> np.ndarray:
    op, unit = table.rows["op"], table.unit_costs
    cost = {c: unit[:, j][op] * occ for j, c in enumerate(COST_COLUMNS)}
    mem = {col: cost[col] for _, col, _ in resources(roofs.device)}
    scale = None if roofs.link_scale is None else roofs.link_scale[op]
    return call_floors(cost["flops"], mem, roofs.inv_peak[op], roofs.device, roofs.link[op], scale)[
        0
    ]


def test_pair_floors_are_the_rows_floors():
    table, device = _host()
    roofs = Roofs.of(table, device)
    n = len(table)
    for occ in (
        np.random.default_rng(0).integers(1, 4, n),  # one to three executions a row
        constant(np.int64(1), n),  # one execution a row (a constant column)
        np.full(n, 7, np.int64),
    ):
        rows = dict(table.rows, occurrences=occ)
        t = OpTable(table.keys, rows, table.unit_costs)
        assert row_sums._occurrence_pairs(t, ["flops"]) is not None  # the pairs' path taken
        got = row_sums._row_floors(t, roofs)
        want = _expected(t, roofs, np.asarray(occ))
        assert got.tobytes() == want.tobytes()
        assert (got > 0).any()


def test_too_many_pairs_take_the_rows_path():
    table, device = _host()
    n = len(table)
    occ = np.arange(n, dtype=np.int64) * 1000 + 1  # as many pairs as keys times rows
    t = OpTable(table.keys, dict(table.rows, occurrences=occ), table.unit_costs)
    assert row_sums._occurrence_pairs(t, ["flops"]) is None
    roofs = Roofs.of(table, device)
    assert row_sums._row_floors(t, roofs).tobytes() == _expected(t, roofs, occ).tobytes()
