"""An oracle that reads the raw PyTorch trace itself: no reader, no model code.

From a `*.pt.trace.json.gz` it takes the GEMM calls (`cpu_op` events aten::mm / addmm / bmm /
linear / matmul with their `Input Dims` and `Input type`), each call's FLOPs 2·batch·M·N·K and
bytes (every input tensor and the output, dims × element size), the device kernels it
launched (the runtime / driver launches inside its span on its thread, matched to kernels by
`correlation`) and the unit its longest GEMM kernel names. It then checks the service's
HTTP-shaped answers (`ops`: the op records; `device`: the peaks, the only shared input):
each GEMM record's FLOPs, bytes, time and input type, its floor Σ over its calls of
max(F_i / P, B_i / BW) and time saved = time − that floor, and the bound of every op finding
on a GEMM record (`guidance`).
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import math
import os

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

TESTDATA = os.path.join(TESTS, "..", "testdata")
GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul")
SIZE = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2}
DTYPE = {"float": "f32", "double": "f64", "c10::BFloat16": "bf16", "c10::Half": "f16"}
LAUNCH = ("cuda_runtime", "cuda_driver")


def kernel_unit(name: str, input_type: str) -> str | None:
    """The unit a GEMM kernel's name says ran (the name rules of these traces' libraries, by
    hand): cuBLAS/CUTLASS `s1688` tensor-op kernels are TF32, `sgemm` FP32 SIMT; bf16 inputs
    on nvjet / cutlass / cuBLASLt kernels run bf16 tensor cores. None: not a GEMM kernel."""
    low = name.lower()
    if "s1688" in low or "tf32" in low:
        return "tf32"
    if "sgemm" in low:
        return "fp32"
    if input_type == "c10::BFloat16" and ("nvjet" in low or "gemm" in low or "cutlass" in low):
        return "bf16"
    return None


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def gemm_operands(name, dims):
    """(batch, M, K, N, output dims, input dims used) of one call, from its Input Dims."""
    if name == "aten::addmm":
        bias, a, b = dims[0], dims[1], dims[2]
        used = [bias, a, b]
    elif name == "aten::linear":
        a, w = dims[0], dims[1]
        bias = dims[2] if len(dims) > 2 else []
        b = [w[1], w[0]]  # x @ w.T
        used = [a, w, bias]
    else:
        a, b = dims[0], dims[1]
        used = [a, b]
    m, k, n = a[-2], a[-1], b[-1]
    assert k == b[-2], (name, dims)
    batch_dims = list(a[:-2]) if len(a) >= len(b) else list(b[:-2])
    out = batch_dims + [m, n]
    return math.prod(batch_dims), m, k, n, out, used


def gemm_calls(events) -> list[dict]:
    """The outermost GEMM calls (a GEMM inside another, linear -> addmm, is part of it) with
    their FLOPs, bytes, kernel time (µs) and the unit of their longest GEMM kernel."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    gemm = [e for e in ops if e["name"] in GEMMS]
    by_thread = collections.defaultdict(list)
    for e in gemm:
        by_thread[(e["pid"], e["tid"])].append(e)
    outer = []
    for calls in by_thread.values():
        calls.sort(key=lambda e: (e["ts"], -e["dur"]))
        end = -math.inf
        for e in calls:
            if e["ts"] + e["dur"] <= end:  # inside the previous outer GEMM call
                continue
            outer.append(e)
            end = e["ts"] + e["dur"]
    launches = collections.defaultdict(list)
    for e in events:
        if e.get("cat") in LAUNCH and "correlation" in (e.get("args") or {}):
            launches[(e["pid"], e["tid"])].append(e)
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    out = []
    for e in outer:
        args = e["args"]
        types = args["Input type"]
        dims = args["Input Dims"]
        batch, m, k, n, out_dims, used = gemm_operands(e["name"], dims)
        size = SIZE[types[0]]
        nbytes = sum(math.prod(d) * size for d in used if d) + math.prod(out_dims) * size
        t0, t1 = e["ts"], e["ts"] + e["dur"]
        ks = [
            kernels[r["args"]["correlation"]]
            for r in launches[(e["pid"], e["tid"])]
            if t0 <= r["ts"]
            and r["ts"] + r.get("dur", 0) <= t1
            and r["args"]["correlation"] in kernels
        ]
        if not ks:
            continue  # nothing ran on the device for it
        units = [(k_["dur"], kernel_unit(k_["name"], types[0])) for k_ in ks]
        units = [u for u in units if u[1]]
        assert units, (e["name"], [k_["name"] for k_ in ks])
        out.append(
            {
                "name": e["name"],
                "dtype": DTYPE[types[0]],
                "flops": 2.0 * batch * m * k * n,
                "bytes": float(nbytes),
                "time_us": float(sum(k_["dur"] for k_ in ks)),
                "unit": max(units)[1],
            }
        )
    return out


def records(answer) -> list[dict]:
    return [dict(zip(answer["columns"], r)) for r in answer["rows"]]


@pytest.mark.parametrize(
    "run,count,findings", [("kineto/a100_80gb_shapes", 25, 0), ("kineto/b200_eager", 109, 1)]
)
def test_gemm_records_recomputed_from_the_raw_trace(run, count, findings):
    path = glob.glob(os.path.join(TESTDATA, run, "*.pt.trace.json.gz"))[0]
    calls = gemm_calls(load(path))
    assert len(calls) == count
    service = RooflineService(TESTDATA)
    device = service.device(run, "")["device"]
    peak = {c["precision"]: c["peak_gflops"] * 1e9 for c in device["compute"]}
    hbm = next(m["peak_gbs"] for m in device["memories"] if m["id"] == "hbm") * 1e9
    expect = collections.defaultdict(
        lambda: {"flops": 0.0, "bytes": 0.0, "time_us": 0.0, "floor_us": 0.0, "calls": 0}
    )
    for c in calls:
        x = expect[(c["name"], c["unit"])]
        x["flops"] += c["flops"]
        x["bytes"] += c["bytes"]
        x["time_us"] += c["time_us"]
        x["floor_us"] += max(c["flops"] / peak[c["unit"]], c["bytes"] / hbm) * 1e6
        x["calls"] += 1
        x.setdefault("per_call", []).append((c["flops"], c["bytes"]))
        x["dtype"] = c["dtype"]
    got = {}
    for r in records(service.ops(run, "", True)):
        if r["record_type"] == "op" and r["operation"] in GEMMS:
            assert (r["operation"], r["precision"]) not in got
            got[(r["operation"], r["precision"])] = r
    assert set(got) == set(expect)
    for key, x in expect.items():
        r = got[key]
        assert r["occurrences"] == x["calls"], key
        assert r["flops"] == pytest.approx(x["flops"], rel=1e-12), key
        assert r["bytes"] == pytest.approx(x["bytes"], rel=1e-12), key
        assert r["total_time_us"] == pytest.approx(x["time_us"], rel=1e-9), key
        assert r["peak_flop_rate"] * 1e9 == pytest.approx(peak[key[1]], rel=1e-12), key
        assert r["roof_time_us"] == pytest.approx(x["floor_us"], rel=1e-9), key
        assert r["potential_time_saved_us"] == pytest.approx(
            max(x["time_us"] - x["floor_us"], 0.0), rel=1e-9, abs=1e-6
        ), key
        assert r["dtype"] == x["dtype"], key  # the recorded input type, beside the kernel's unit
    assert _check_findings(service.guidance(run, "", True), expect, hbm) == findings


def _check_findings(answer, expect, hbm) -> int:
    """Every op finding on a GEMM record: its bound from the raw calls' floors. The count."""
    checked = 0
    for f in answer["findings"]:
        op = f["ops"][0] if f["scope"] == "op" else None
        key = (op["operation"], op["precision"]) if op else None
        if key not in expect:
            continue
        x, facts = expect[key], f["evidence"]["facts"]
        gap = max(x["time_us"] - x["floor_us"], 0.0)
        assert f["time_saved_us"] <= f["bound_us"] * (1 + 1e-9) + 1e-9, f["id"]
        if "floor_us" in facts:
            assert facts["floor_us"] == pytest.approx(x["floor_us"], rel=1e-9), f["id"]
        if f["rule"] in ("far_below_roof", "tiny_ops", "tiling"):
            assert f["bound_us"] == pytest.approx(gap, rel=1e-9, abs=1e-6), f["id"]
        elif f["rule"] == "precision":
            target = facts["target_peak_flop_rate"] * 1e9
            new = sum(max(fl / target, b / hbm) for fl, b in x["per_call"]) * 1e6
            assert f["bound_us"] == pytest.approx(
                max(x["floor_us"] - new, 0.0), rel=1e-9, abs=1e-6
            ), f["id"]
        else:
            assert f["time_saved_us"] <= x["time_us"] * (1 + 1e-9), f["id"]
        checked += 1
    return checked
