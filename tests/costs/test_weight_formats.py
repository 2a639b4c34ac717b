"""Quantized GEMM kernels named by what they read (costs/weight_formats.py,
readers/kernel_names.py): cuBLAS's `nvjet_…qq…` kernels take two fp8 operands, checked on the
real H200 decode traces (testdata/kineto/h200_decode_eager: which op launched each kernel, by
External id, and that op's recorded input types; h200_decode_graph: the same kernels replayed
without their ops), and the bytes per weight of the MXFP4 kernels of the real vLLM traces
(b200_eager, mi300x_vllm_graph_capture)."""

from __future__ import annotations

import glob
import gzip
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.costs.weight_formats import weight_bytes_per_element
from tb_roofline.readers.kernel_names import kernel_unit
from tb_roofline.readers.kineto import read_kineto_file

KINETO = os.path.join(TESTS, "..", "testdata", "kineto")


def _events(case: str, pattern: str = "*.pt.trace.json.gz") -> list:
    (path,) = glob.glob(os.path.join(KINETO, case, pattern))
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _gemm_kernels_by_op_types() -> dict:
    """nvjet kernel name -> the set of (op name, first input type) of the ops launching it."""
    ev = _events("h200_decode_eager")
    ops = {
        e["args"]["External id"]: (e["name"], e["args"]["Input type"][0])
        for e in ev
        if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::_scaled_mm")
    }
    out: dict = {}
    for e in ev:
        if e.get("cat") == "kernel" and e["name"].startswith("nvjet_"):
            out.setdefault(e["name"], set()).add(ops[e["args"]["External id"]])
    return out


def test_nvjet_qq_kernels_are_the_fp8_gemms():
    by_kernel = _gemm_kernels_by_op_types()
    qq = {k for k in by_kernel if k.startswith("nvjet_sm90_qq")}
    plain = set(by_kernel) - qq
    assert len(qq) == 2 and len(plain) == 3
    for k in qq:
        assert by_kernel[k] == {("aten::_scaled_mm", "c10::Float8_e4m3fn")}, k
        assert kernel_unit(k) == "fp8" and weight_bytes_per_element(k) == 1.0
    for k in plain:  # bf16 GEMMs: their names say no quantized format
        assert by_kernel[k] == {("aten::mm", "c10::BFloat16")}, k
        assert weight_bytes_per_element(k) is None


def test_replayed_fp8_gemms_sit_under_the_fp8_roof():
    """The CUDA-graph replay has no ops: its rows are the kernels, and the fp8 ones say so."""
    (path,) = glob.glob(os.path.join(KINETO, "h200_decode_graph", "*.pt.trace.json.gz"))
    t = read_kineto_file(path, "h").ops
    names = t.keys["operation"].tolist()
    prec = dict(zip(names, t.keys["precision"].tolist()))
    qq = [n for n in names if n.startswith("nvjet_sm90_qq")]
    assert qq and all(prec[n] == "fp8" for n in qq)
    assert set(qq) <= set(_gemm_kernels_by_op_types())  # the eager trace's fp8 kernels


@pytest.mark.parametrize(
    "case,prefix",
    [("b200_eager", "bmm_"), ("mi300x_vllm_graph_capture", "_matmul_ogs_")],
)
def test_mxfp4_kernels_read_half_a_byte_and_a_scale_per_32(case, prefix):
    """MXFP4 weights: 4 bits each plus one 8-bit E8M0 scale per 32 = 0.53125 B."""
    names = set()
    for e in _events(case):
        name = str(e.get("args", {}).get("kernel") or e.get("name", ""))
        if name.startswith(prefix) and ("E2m1" in name or "mxfp4" in name):
            names.add(name)
    assert names
    for n in names:
        assert weight_bytes_per_element(n) == 0.5 + 1 / 32, n
        assert kernel_unit(n) == "fp4", n


def test_decode_floor_names_the_weight_format_of_replayed_fp8_gemms(tmp_path):
    """The H200 graph replay with each ProfilerStep also annotated as a vLLM decode step of
    its batch (16 requests, 16 tokens; every recorded event unchanged): its GEMMs are replays
    without ops, so no weights are counted and no floor is drawn; the finding names the
    longest GEMM kernels and, for the fp8 ones, the bytes per weight their names say."""
    from tb_roofline.model.records.roofline import analyze

    (path,) = glob.glob(os.path.join(KINETO, "h200_decode_graph", "*.pt.trace.json.gz"))
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    steps = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    doc["traceEvents"] += [
        dict(e, name="execute_context_0(0)_generation_16(16)", dur=e["dur"] - 0.001)
        for e in steps
        if e.get("cat") == "user_annotation"
    ]
    out = tmp_path / os.path.basename(path)
    with gzip.open(out, "wt", compresslevel=1) as f:
        json.dump(doc, f)
    a = analyze([read_kineto_file(str(out), "h")], "h")
    decode = [s for s in a.serving if s.get("phase") == "decode" and "findings" in s]
    assert len(decode) == 5
    for s in decode:
        assert s["weight_coverage"] == 0.0 and s["weight_floor_us"] is None
        (f,) = [x for x in s["findings"] if x["code"] == "decode_floor_unknown"]
        assert "nvjet_sm90_qqtst_64x16_128x16_2x1_v_bz_algo2" in f["text"]
        assert "its name says 1 B per weight, their count is not recorded" in f["text"]
