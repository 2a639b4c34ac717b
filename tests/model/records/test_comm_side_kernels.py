"""One rule for a collective's time: its communication kernels (NCCL / RCCL, named so), never
the copy kernels its op also launched. The real B200 vLLM trace's `c10d::_allgather_base_`
launched one `ncclDevKernel_AllGather_RING_LL`; here the same trace gets a concat-copy kernel
launched inside that op's `record_param_comms` (as `all_gather` into a tensor list launches
one), and the communication roofline point keeps the NCCL kernel's time and bus bandwidth,
worked out from the raw events, while the op's record keeps both kernels' time."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

SRC = os.path.join(
    TESTS,
    "..",
    "testdata",
    "kineto",
    "b200_eager",
    "worker0.1773700000000.pt.trace.json.gz",
)
OP = "c10d::_allgather_base_"
COPY = (
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
    "namespace)::OpaqueType<2u>, unsigned int, 2, 128, 1>(...)"
)
COPY_US = 5.0
CORRELATION = 990000001


def _with_copy_kernel(tmp_path):
    """The trace with a copy kernel launched by the all-gather op, right after its NCCL
    kernel on the same stream; (logdir, the NCCL kernel event)."""
    with gzip.open(SRC, "rt") as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    (op,) = [e for e in ev if e.get("name") == OP]
    (nccl,) = [e for e in ev if e.get("cat") == "kernel" and "AllGather" in e["name"]]
    (launch,) = [
        e
        for e in ev
        if e.get("args", {}).get("correlation") == nccl["args"]["correlation"]
        and e.get("cat") == "cuda_driver"
    ]
    assert op["ts"] < launch["ts"] < op["ts"] + op["dur"]
    ev.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": launch["pid"],
            "tid": launch["tid"],
            "ts": launch["ts"] + launch["dur"] + 8.0,
            "dur": 3.0,
            "args": {"correlation": CORRELATION, "External id": op["args"]["External id"]},
        }
    )
    args = {k: nccl["args"][k] for k in ("device", "context", "stream", "queued")}
    args.update(correlation=CORRELATION, grid=[64, 1, 1], block=[128, 1, 1])
    args["External id"] = op["args"]["External id"]
    ev.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": COPY,
            "pid": nccl["pid"],
            "tid": nccl["tid"],
            "ts": nccl["ts"] + nccl["dur"] + 1.0,
            "dur": COPY_US,
            "args": args,
        }
    )
    run = tmp_path / "b200"
    run.mkdir()
    with gzip.open(run / os.path.basename(SRC), "wt") as f:
        json.dump(doc, f)
    return str(tmp_path), nccl


def test_collective_point_counts_only_its_communication_kernels(tmp_path):
    logdir, nccl = _with_copy_kernel(tmp_path)
    service = RooflineService(logdir)
    run = service.list_runs()["runs"][0]["run"]
    (p,) = [p for p in service.comm(run, "")["points"] if p["operation"] == OP]
    # By hand from the NCCL kernel's args: all-gather of 201,088 bf16 elements over 8 ranks,
    # S = the gathered bytes, bus bytes = S × (n − 1) / n (nccl-tests), one execution.
    a = nccl["args"]
    message = a["Out msg nelems"] * 2
    bus = message * (a["Group size"] - 1) / a["Group size"]
    assert p["message_bytes"] == message and p["occurrences"] == 1
    assert p["total_time_us"] == pytest.approx(nccl["dur"], rel=1e-9)
    assert p["bus_bw_gbs"] == pytest.approx(bus / (nccl["dur"] * 1e3), rel=1e-9)
    ops = service.ops(run, "")
    rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
    (rec,) = [r for r in rows if r["operation"] == OP]
    # the op's record keeps all its work: both kernels, one call
    assert rec["total_time_us"] == pytest.approx(nccl["dur"] + COPY_US, rel=1e-9)
    assert rec["occurrences"] == 1
    assert rec["interconnect_bytes"] == pytest.approx(bus, rel=1e-9)
