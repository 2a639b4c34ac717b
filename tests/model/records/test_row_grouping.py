"""`/ops?rows=op|shapes|kernel` (model/records/row_grouping.py): PyTorch rows by op, by op × input
shapes, or by GPU kernel; the shape rows checked against the trace's own `Input Dims`."""

from __future__ import annotations

import collections
import gzip
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline import errors
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
KINETO = os.path.join(REPO, "testdata", "kineto")
RUN = "a100_80gb_shapes"


def _rows(answer):
    return [dict(zip(answer["columns"], r)) for r in answer["rows"]]


@pytest.fixture(scope="module")
def service():
    return RooflineService(KINETO)


def _trace_calls_by_dims(name):
    """Calls of a CPU op per recorded `Input Dims`, straight from the trace JSON."""
    path = os.path.join(KINETO, RUN, "rank0.pt.trace.json.gz")
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    out = collections.Counter()
    for ev in trace["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("name") == name and ev.get("cat") == "cpu_op":
            out[json.dumps((ev.get("args") or {}).get("Input Dims"), separators=(",", ":"))] += 1
    return out


def test_shape_rows_split_each_op_and_add_up(service):
    by_op = service.ops(RUN, "", True)
    by_shape = service.ops(RUN, "", True, rows="shapes")
    assert by_op["rows_grouping"] == "op" and by_shape["rows_grouping"] == "shapes"
    assert by_shape["row_groupings"] == ["op", "shapes", "kernel"]
    assert "shapes" in by_shape["columns"] and "shapes" not in by_op["columns"]
    ops, shapes = _rows(by_op), _rows(by_shape)
    assert len(shapes) > len(ops)
    for key in ("occurrences", "total_self_time_us", "flops"):
        per_op = collections.defaultdict(float)
        for r in shapes:
            # (unknown FLOPs are null: a record's known FLOPs are its shapes' known ones)
            per_op[(r["program_id"], r["operation"], r["precision"])] += r[key] or 0.0
        for r in ops:
            assert per_op[(r["program_id"], r["operation"], r["precision"])] == pytest.approx(
                r[key] or 0.0, rel=1e-9, abs=1e-6
            ), (key, r["operation"])
    # aten::mm: one row per (precision, input dims); the calls per dims are the trace's.
    mm = [r for r in shapes if r["operation"] == "aten::mm"]
    counted = collections.Counter()
    for r in mm:
        assert r["shapes"].startswith("[[")
        counted[r["shapes"]] += r["occurrences"]
    assert counted == _trace_calls_by_dims("aten::mm")
    # The shape rows of one op differ in intensity (the merged row blends them).
    assert len({round(r["bottleneck_operational_intensity"], 3) for r in mm}) > 1


def test_kernel_rows_are_the_kernel_view(service):
    assert (
        service.ops(RUN, "", True, rows="kernel")["rows"]
        == service.ops(RUN, "", True, view="kernel")["rows"]
    )


def test_filters_and_paging_apply_to_shape_rows(service):
    answer = service.ops(RUN, "", True, rows="shapes", name="aten::mm", limit=2)
    assert answer["total_count"] == 3 and len(answer["rows"]) == 2
    assert all(r["operation"] == "aten::mm" and r["shapes"] for r in _rows(answer))


def test_unknown_or_unavailable_rows_are_clear_errors(service):
    with pytest.raises(errors.InvalidArgumentError, match="not one of: op, shapes, kernel"):
        service.ops(RUN, "", True, rows="bogus")
    xla = RooflineService(os.path.join(REPO, "testdata", "jax_cpu"))
    run = xla.list_runs()["runs"][0]["run"]
    assert xla.ops(run, "", True)["row_groupings"] == ["op"]
    with pytest.raises(errors.InvalidArgumentError, match="not available for this run"):
        xla.ops(run, "", True, rows="shapes")
