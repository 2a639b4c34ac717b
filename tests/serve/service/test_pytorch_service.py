"""PyTorch traces through the service: Total (HW), kernel views, data-sheet peaks, mixed logdirs."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
KINETO = os.path.join(REPO, "testdata", "kineto")


def _rows(answer):
    return [dict(zip(answer["columns"], r)) for r in answer["rows"]]


def _metric_flops(path):
    """add + mul + 2 x fma over every counter metric of the trace, straight from the JSON."""
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    total = 0.0
    for ev in trace["traceEvents"]:
        if ev.get("cat") != "cuda_profiler_range":
            continue
        for key, value in (ev.get("args") or {}).items():
            if key.startswith("smsp__sass_thread_inst_executed_op_") and key.endswith(
                "_pred_on.sum"
            ):
                op = key[len("smsp__sass_thread_inst_executed_op_") : -len("_pred_on.sum")]
                total += float(value) * (2.0 if op.endswith("fma") else 1.0)
    return total


def test_total_hw_is_the_counter_sum():
    service = RooflineService(KINETO)
    run = "a100_cupti_counters"
    prog = service.program(run, "", True)
    assert prog["has_hw_counters"] and "kernel_hw" in prog["views"]
    hw = next(r for r in _rows(prog) if r["record_type"] == "total_hw")
    path = os.path.join(KINETO, run, os.listdir(os.path.join(KINETO, run))[0])
    assert hw["flops"] == pytest.approx(_metric_flops(path), rel=1e-12)
    assert hw["step"] == "Total (HW)" and hw["flops_source"] == "counter"
    assert hw["bytes"] is None  # the counters hold no memory traffic
    notes = [d["message"] for d in service.diagnostics(run, "")["diagnostics"]]
    assert any("tensor" in n.lower() for n in notes)  # says tensor-core work is not counted
    kernels = service.ops(run, "", True, view="kernel_hw")
    assert sum(r["flops"] for r in _rows(kernels)) == pytest.approx(hw["flops"], rel=1e-9)


def test_kernel_view_and_datasheet_peaks():
    service = RooflineService(KINETO)
    run = "a100_80gb_shapes"
    dev = service.device(run, "")["device"]
    assert dev["type"] == "NVIDIA A100-SXM4-80GB"
    peaks = {c["precision"]: c for c in dev["compute"]}
    assert peaks["bf16"]["peak_gflops"] == pytest.approx(312_000, rel=0.01)
    assert peaks["bf16"]["source"] == "datasheet"
    hbm = next(m for m in dev["memories"] if m["id"] == "hbm")
    assert hbm["peak_gbs"] == pytest.approx(2039, rel=0.01)
    ops = _rows(service.ops(run, "", True))
    kernels = _rows(service.ops(run, "", True, view="kernel"))
    # (records whose FLOPs are unknown answer null, not 0: they add nothing known)
    assert kernels and sum(k["flops"] or 0.0 for k in kernels) == pytest.approx(
        sum(o["flops"] or 0.0 for o in ops), rel=1e-9
    )
    with pytest.raises(Exception, match="view 'nope' is not available"):
        service.ops(run, "", True, view="nope")


def test_logdir_mixing_xla_and_pytorch_runs(tmp_path):
    shutil.copytree(os.path.join(REPO, "testdata", "demo", "v6e_train"), tmp_path / "jax_tpu")
    shutil.copytree(os.path.join(KINETO, "cpu_convnet"), tmp_path / "torch_cpu")
    service = RooflineService(str(tmp_path))
    runs = {r["run"]: r["format"] for r in service.list_runs()["runs"]}
    assert runs == {"jax_tpu/2026_11_29_10_00_00": "xplane", "torch_cpu": "kineto"}
    for run in runs:
        total = _rows(service.program(run, "", True))[0]
        assert total["flops"] > 0
