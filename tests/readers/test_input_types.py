"""Every PyTorch op row's `dtype` is the input type its trace recorded (`Input type` of its
cpu_op events, read here from the raw file), and its `precision` names the roof it is judged
under: a GEMM's is the unit its kernel names (TF32 tensor cores vs FP32 SIMT), any other op's
follows its inputs (a bf16 gather or norm never takes a unit from a kernel name)."""

from __future__ import annotations

import collections
import glob
import gzip
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

ROOT = os.path.join(os.path.dirname(TESTS), "testdata")
# The trace's spelling of an element type -> the label the API gives it (hand-written).
LABEL = {
    "c10::BFloat16": "bf16",
    "c10::Half": "f16",
    "float": "f32",
    "double": "f64",
    "int": "int",
    "long int": "int",
    "long": "int",
    "bool": "bool",
    "c10::Float8_e4m3fn": "f8e4m3",
}
FLOAT = ("c10::BFloat16", "c10::Half", "float", "double", "c10::Float8_e4m3fn")


def raw_input_types(run: str) -> tuple[dict, dict]:
    """op name -> Counter of the type of its first floating-point input (else first typed
    input), per cpu_op event of the raw trace; and op name -> every type its inputs had."""
    path = glob.glob(os.path.join(ROOT, run, "*.pt.trace.json.gz"))[0]
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    first: dict = collections.defaultdict(collections.Counter)
    every: dict = collections.defaultdict(set)
    for e in events:
        if e.get("cat") != "cpu_op":
            continue
        types = [t for t in (e.get("args") or {}).get("Input type") or [] if t in LABEL]
        floats = [t for t in types if t in FLOAT]
        if types:
            first[e["name"]][(floats or types)[0]] += 1
            every[e["name"]].update(LABEL[t] for t in types)
    return first, every


@pytest.fixture(scope="module")
def service():
    return RooflineService(ROOT)


def op_rows(service, run):
    return service.analysis(run, "").ops[True].row_dicts()


def peak_of(analysis, precision):
    return {c.precision: c.gflops for c in analysis.device.compute}[precision]


def test_b200_labels_are_the_recorded_input_types(service):
    run = "kineto/b200_eager"
    raw, every = raw_input_types(run)
    rows = {r["operation"]: r for r in op_rows(service, run)}
    # Each row's label is one of the types its inputs were recorded with (a quantizing op
    # names its source, not its fp8 output buffer); an aten op's is its first float input.
    checked = 0
    for name, r in rows.items():
        if name in raw and r["dtype"] is not None:
            assert r["dtype"] in every[name], (name, r["dtype"], every[name])
            if name.startswith("aten::") and len(raw[name]) == 1:
                assert r["dtype"] == LABEL[next(iter(raw[name]))], (name, raw[name])
            checked += 1
    assert checked >= 15
    # bf16 inputs by hand: the gather, the norm (its kernel is templated on `_typeConvert`, no
    # convolution) and the KV-cache write (`..._flash`, no attention) are labelled bf16 (the
    # data they moved) and sit under the vector units' roof (fp32 on this part, named in
    # `roof_precision`), not a tensor-core one.
    a = service.analysis(run, "")
    for name in ("aten::index", "_C::fused_add_rms_norm", "_C_cache_ops::reshape_and_cache_flash"):
        assert raw[name] == {"c10::BFloat16": raw[name]["c10::BFloat16"]}
        assert rows[name]["dtype"] == "bf16", name
        assert rows[name]["precision"] == "bf16", name
        assert rows[name]["roof_precision"] == "fp32", name
        assert rows[name]["peak_flop_rate"] == pytest.approx(peak_of(a, "fp32"), rel=1e-9)
    # A GEMM keeps the unit its kernel names (an FP4 block-scaled bmm) and carries its bf16
    # inputs beside it.
    moe = rows["vllm::moe_forward"]
    assert moe["precision"] == "fp4" and moe["dtype"] == "bf16"


def test_a100_gemms_keep_the_kernel_unit_and_carry_their_inputs(service):
    run = "kineto/a100_80gb_shapes"
    raw, _ = raw_input_types(run)
    assert raw["aten::mm"] == {"float": raw["aten::mm"]["float"]}
    mm = [r for r in op_rows(service, run) if r["operation"] == "aten::mm"]
    # cutlass tensorop_s1688 (TF32) and ampere_sgemm (FP32 SIMT) calls: both f32 inputs.
    assert sorted(r["precision"] for r in mm) == ["fp32", "tf32"]
    assert all(r["dtype"] == "f32" for r in mm)
    a = service.analysis(run, "")
    for r in mm:
        assert r["peak_flop_rate"] == pytest.approx(peak_of(a, r["precision"]), rel=1e-9)


def test_a_type_conversion_template_is_no_convolution():
    """vLLM's norm kernels are templated on `_typeConvert` (b200_eager): a normalization, not a
    convolution on tensor cores; real convolution kernels still are."""
    from tb_roofline.readers import kernel_names

    raw = glob.glob(os.path.join(ROOT, "kineto", "b200_eager", "*.pt.trace.json.gz"))[0]
    with gzip.open(raw, "rt") as f:
        names = {e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"}
    norm = [n for n in names if "_typeConvert" in n and "rms_norm" in n]
    assert norm
    assert all(kernel_names.kernel_category(n) == "reduction" for n in norm)
    assert not any(kernel_names.is_matmul_kernel(n) for n in norm)
    for conv in (
        "void at::native::conv_depthwise2d_forward_kernel<1, float>",
        "cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1>",
    ):
        assert kernel_names.kernel_category(conv) == "convolution"
