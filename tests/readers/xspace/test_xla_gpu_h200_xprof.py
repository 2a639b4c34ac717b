"""The real H200 XLA GPU profile (testdata/xla_gpu_h200/mlp) against the XProf converter.

Every op's self time is XProf's. A cuBLAS custom call runs as two device events under one
`hlo_op` (a `Memset` and the GEMM kernel): XProf counts each event as an occurrence and gives
each the call's FLOPs and bytes, so its rates for those calls are twice ours and above its own
peak; ours count the call once (docs/xprof_differences.md). Which calls have two events is read
here from the raw XSpace, not from the reader.
"""

from __future__ import annotations

import collections
import glob
import os

import pytest
from testpaths import TESTS
from xprof_reference import xprof_roofline

from tb_roofline.protos import xplane_pb2
from tb_roofline.serve.service.core import RooflineService

RUN = os.path.join(TESTS, "..", "testdata", "xla_gpu_h200")
RUN = os.path.join(RUN, "mlp")


def _events_per_call(path) -> dict:
    """hlo_op -> device events per execution (events ÷ 5 steps), from the raw GPU plane."""
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    (plane,) = [p for p in space.planes if p.name == "/device:GPU:0"]
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    hlo_op = next(k for k, v in names.items() if v == "hlo_op")
    count: collections.Counter = collections.Counter()
    for line in plane.lines:
        for e in line.events:
            for s in e.stats:
                if s.metadata_id == hlo_op:
                    count[s.str_value or names.get(s.ref_value, "")] += 1
    return {op: n / 5 for op, n in count.items()}


@pytest.fixture(scope="module")
def both():
    (path,) = glob.glob(os.path.join(RUN, "plugins", "profile", "*", "*.xplane.pb"))
    xrows, props, _ = xprof_roofline([path])
    theirs = {r["operation"]: r for r in xrows if r["category"] != "Program"}
    service = RooflineService(RUN)
    run = service.list_runs()["runs"][0]["run"]
    ops = service.ops(run, "*", True)
    ours = {r[ops["columns"].index("operation")]: dict(zip(ops["columns"], r)) for r in ops["rows"]}
    return ours, theirs, props, _events_per_call(path), service.device(run, "*")


def test_every_op_and_its_self_time_are_xprofs(both):
    ours, theirs, *_ = both
    assert set(ours) == set(theirs)
    for op, t in theirs.items():
        assert ours[op]["total_self_time_us"] == pytest.approx(t["total_self_time"], rel=1e-6)


def test_two_event_calls_are_counted_once(both):
    ours, theirs, props, per_call, _ = both
    doubled = {op for op, n in per_call.items() if n == 2}
    assert {"cublas-lt-matmul.0", "cublas-lt-matmul.2", "custom-call.0"} <= doubled
    peak = float(props["peak_flop_rate"])
    for op, t in theirs.items():
        o = ours[op]
        k = 2 if op in doubled else 1
        assert t["occurrences"] == k * o["occurrences"] == k * 5
        assert t["measured_memory_bw"] == pytest.approx(k * o["memory_bw"], rel=1e-6)
        if op in doubled and op.startswith(("cublas", "custom-call")):
            assert t["measured_flop_rate"] == pytest.approx(2 * o["flop_rate"], rel=1e-6)
        assert o["flop_rate"] <= peak
    above = [op for op, t in theirs.items() if t["measured_flop_rate"] > peak]
    assert above and set(above) <= doubled
