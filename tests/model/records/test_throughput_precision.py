"""The peak HFU and MFU divide by names its precision on every run, also where no op has counted
FLOPs (a CUDA-graph replay without its capture): then it is the device's first compute ceiling,
the roof `peak_for` falls back to, and no consumer has to print "default"."""

from __future__ import annotations

import gzip
import json
import os

from testpaths import TESTDATA

from tb_roofline.serve.service.core import RooflineService

KINETO = os.path.join(TESTDATA, "kineto")
# The H200 SXM data sheet lists dense bf16 first (devices/datasheets_nvidia_hopper_blackwell.py).
H200_BF16_GFLOPS = 989_500.0


def _cpu_ops(path: str) -> int:
    """CPU ops of a trace: a graph replay records only its launches, no op to cost."""
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    return sum(1 for e in events if e.get("cat") == "cpu_op")


def test_no_counted_flops_names_the_default_roof():
    run_dir = os.path.join(KINETO, "h200_decode_graph")
    traces = [n for n in os.listdir(run_dir) if n.endswith(".pt.trace.json.gz")]
    assert traces and all(_cpu_ops(os.path.join(run_dir, n)) == 0 for n in traces)
    service = RooflineService(KINETO)
    t = service.guidance("h200_decode_graph", "")["throughput"]
    assert t["precision"] == "bf16"
    assert t["peak_gflops_per_device"] == H200_BF16_GFLOPS
    assert t["hfu"] is None  # no FLOPs counted: unknown, not 0
