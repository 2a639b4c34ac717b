"""An op's kernels (get_op shows "one op in full (its evidence, shapes, kernels)"):
the Kineto reader keeps, per op, the kernels it launched (name, launches, time), and the MCP
tool's get_op returns them, checked against the raw trace: the kernels whose correlation id is
that of a runtime launch made inside one of the op's calls (on its thread, within its span)."""

from __future__ import annotations

import collections
import glob
import gzip
import json
import os
import shutil

import pytest
from testpaths import TESTS

from tb_roofline.model.guidance.facts import KernelUse, merge_kernels
from tb_roofline.serve.mcp import op_tools
from tb_roofline.serve.service.core import RooflineService

KINETO = os.path.join(TESTS, "..", "testdata", "kineto")


def _raw_kernels(path, op_name):
    """{kernel name: (launches, µs)} of the kernels launched inside top-level `op_name` calls,
    from the raw JSON (every call of the op here is top level: no enclosing op has a cost)."""
    with gzip.open(path, "rt") as f:
        ev = json.load(f)["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e.get("name") == op_name]
    rt = [e for e in ev if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})]
    launched = {
        e["args"]["correlation"]
        for e in rt
        if any(
            o["tid"] == e["tid"] and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
            for o in ops
        )
    }
    out = collections.defaultdict(lambda: [0, 0.0])
    for e in ev:
        if e.get("cat") == "kernel" and e["args"].get("correlation") in launched:
            out[e["name"]][0] += 1
            out[e["name"]][1] += e["dur"]
    return {k: tuple(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory):
    root = tmp_path_factory.mktemp("op_kernels")
    shutil.copytree(os.path.join(KINETO, "a100_alexnet"), root / "alex")
    return RooflineService(str(root)), glob.glob(os.path.join(KINETO, "a100_alexnet", "*.gz"))[0]


def test_get_op_lists_the_kernels_an_op_launched(alexnet):
    service, path = alexnet
    answer = op_tools.get_op(service, "alex", "aten::conv2d")
    got: dict = collections.defaultdict(lambda: [0, 0.0])
    for k in answer["kernels"]:
        assert set(k) == {
            "program_id",
            "precision",
            "kernel",
            "launches",
            "time_us",
            "mean_time_us",
        }
        assert k["mean_time_us"] == pytest.approx(k["time_us"] / k["launches"], rel=1e-5)
        got[k["kernel"]][0] += k["launches"]
        got[k["kernel"]][1] += k["time_us"]
    raw = _raw_kernels(path, "aten::conv2d")
    assert len(raw) >= 5
    assert {k: (n, pytest.approx(t, rel=1e-5)) for k, (n, t) in got.items()} == raw
    # Per record: most time first, and the record's time is its kernels' time.
    for r in answer["records"]:
        mine = [k for k in answer["kernels"] if k["precision"] == r["precision"]]
        assert [k["time_us"] for k in mine] == sorted((k["time_us"] for k in mine), reverse=True)
        assert sum(k["time_us"] for k in mine) == pytest.approx(r["total_time_us"], rel=1e-5)


def test_get_op_without_kernels_says_none(alexnet):
    """A memcpy row launches no kernel: an empty list, not an error."""
    service, _ = alexnet
    ops = op_tools.top_ops(service, "alex", category=["memcpy"])["ops"]
    assert ops
    assert op_tools.get_op(service, "alex", ops[0]["operation"])["kernels"] == []


def test_merge_kernels_adds_up_and_keeps_the_top():
    a = {("", "op", "fp32"): [KernelUse("k1", 2, 10.0), KernelUse("k2", 1, 5.0)]}
    b = {("", "op", "fp32"): [KernelUse("k2", 3, 30.0)]}
    assert merge_kernels([a, b]) == {
        ("", "op", "fp32"): [KernelUse("k2", 4, 35.0), KernelUse("k1", 2, 10.0)]
    }


def test_op_kernels_survive_the_disk_cache(alexnet):
    """ProfileData.op_kernels (and the idle causes) through the disk cache's codec."""
    from tb_roofline.readers.kineto import read_kineto_file
    from tb_roofline.serve.caches import codec as cache_codec

    _, path = alexnet
    data = read_kineto_file(path, "h")
    back = cache_codec.decode(cache_codec.encode(data))
    assert data.op_kernels and back.op_kernels == data.op_kernels
    assert back.timeline.idle_causes == data.timeline.idle_causes


def test_host_calls_are_kept_without_a_correlation_id():
    """Sync and capture runtime calls are kept (thread, ts, dur) whether or not they carry a
    correlation id; other runtime calls without one are still dropped."""
    from tb_roofline.readers.kineto import Collector
    from tb_roofline.readers.kineto.timeline import idle_causes

    col = Collector()
    col.on_events(
        [
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaDeviceSynchronize",
                "pid": 1,
                "tid": 2,
                "ts": 10,
                "dur": 5,
                "args": {},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaStreamBeginCapture",
                "pid": 1,
                "tid": 2,
                "ts": 20,
                "dur": 1,
                "args": {"correlation": 7},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaStreamEndCapture",
                "pid": 1,
                "tid": 2,
                "ts": 30,
                "dur": 2,
                "args": {"correlation": 8},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaMalloc",
                "pid": 1,
                "tid": 2,
                "ts": 40,
                "dur": 2,
                "args": {},
            },
        ]
    )
    assert [c[0] for c in col.host_calls] == [
        "cudaDeviceSynchronize",
        "cudaStreamBeginCapture",
        "cudaStreamEndCapture",
    ]
    assert len(col.rt_corr) == 2  # the two with a correlation id; cudaMalloc dropped
    causes = idle_causes(col.host_calls, 10_000)  # ps after 10 µs
    assert causes["sync"][0].tolist() == [0.0] and causes["sync"][1].tolist() == [5e6]
    assert causes["graph_capture"][0].tolist() == [10e6]
    assert causes["graph_capture"][1].tolist() == [22e6]
