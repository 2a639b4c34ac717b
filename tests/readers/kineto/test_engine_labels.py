"""ROCm vLLM's GEMM scope labels (costs/torch/engine_labels.py): the grammar, the costs worked
out here from the label text, and a trace recorded without shapes whose labelled GEMMs get
their FLOPs, bytes and kernel time (testdata/kineto/h200_decode_labels, built by
tools/build_engine_label_fixture.py from the real H200 decode trace). References: the label
text, FlopCounterMode's aten.mm total for the same step (flop_counter.json) and the kernels
launched inside each label's span, read from the raw events without the reader."""

import glob
import gzip
import json
import os

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.costs.torch import engine_labels
from tb_roofline.readers.kineto import read_kineto_file

HERE = TESTS
KINETO = os.path.join(HERE, "..", "testdata", "kineto")
(LABELS,) = glob.glob(os.path.join(KINETO, "h200_decode_labels", "*.pt.trace.json.gz"))
FLOP_COUNTER = os.path.join(KINETO, "h200_decode_eager", "flop_counter.json")


@pytest.mark.parametrize(
    "name, kind, dims, fields",
    [
        ("wvSplitK 4x6144x4096", "wvSplitK", (4, 6144, 4096), {}),
        ("DOT 3x1x2048 [tk]", "DOT", (3, 1, 2048), {}),
        ("BLAS 8192x4096x4096", "BLAS", (8192, 4096, 4096), {}),
        (
            "fused_moe_wvsplitk_int4 4x1536x2048 E=128 top_k=8 group_size=32 phase=decode",
            "fused_moe_wvsplitk_int4",
            (4, 1536, 2048),
            {"E": 128, "top_k": 8, "group_size": 32},
        ),
    ],
)
def test_grammar_reads_the_shapes_and_skips_unknown_fields(name, kind, dims, fields):
    label = engine_labels.parse(name)
    assert (label.kind, label.dims, label.fields) == (kind, dims, fields)


@pytest.mark.parametrize(
    "name",
    ["ProfilerStep#3", "wvSplitK 4x6144", "wvSplitK 0x6144x4096", "attn 4x4x4", "BLAS4x4x4"],
)
def test_other_names_are_not_labels(name):
    assert engine_labels.parse(name) is None


def test_linear_costs_from_the_label_text():
    cost = engine_labels.label_cost("LLMM1 1x4096x8192")
    assert (cost.category, cost.source) == ("matmul", "formula")
    assert cost.flops == 2 * 1 * 4096 * 8192
    assert cost.bytes == 2 * (1 * 8192 + 4096 * 8192 + 1 * 4096)  # x, W, out: 16-bit
    assert engine_labels.label_cost("BLAS 8x4096x8192") is None  # the label says no dtype


def test_int4_moe_costs_from_the_label_text():
    # gate/up GEMM of a 128-expert, top-8 layer at 4 decode tokens: 32 routed rows, so at most
    # 32 experts' int4 weights read (0.5 B each), activations in 16 bits
    cost = engine_labels.label_cost("fused_moe_wvsplitk_int4 4x1536x2048 E=128 top_k=8")
    assert cost.flops == 2 * 4 * 8 * 1536 * 2048
    weights = 32 * 1536 * 2048 / 2
    assert cost.bytes == 2 * (4 * 2048 + 32 * 1536) + weights
    grouped = engine_labels.label_cost(
        "fused_moe_wvsplitk_int4 4x1536x2048 E=128 top_k=8 group_size=128"
    )
    assert grouped.bytes == cost.bytes + 32 * 1536 * (2048 // 128) * 2  # one bf16 scale a group
    few = engine_labels.label_cost("fused_moe_wvsplitk_int4 1x2048x768 E=8 top_k=2")
    assert few.bytes == 2 * (1 * 768 + 2 * 2048) + 2 * 2048 * 768 / 2  # 2 of the 8 experts
    assert engine_labels.label_cost("fused_moe_wvsplitk_int4 4x1536x2048 top_k=8") is None


def _raw_label_kernel_time(events):
    """Per label name: its calls and the kernel time launched inside its span (µs)."""
    launch = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    labels = [e for e in events if e.get("cat") == "user_annotation" and "x" in e["name"]]
    out = {}
    for k in (e for e in events if e.get("cat") == "kernel"):
        r = launch.get(k["args"].get("correlation"))
        for lab in labels:
            if r and lab["tid"] == r["tid"] and lab["ts"] <= r["ts"] <= lab["ts"] + lab["dur"]:
                out[lab["name"]] = out.get(lab["name"], 0.0) + k["dur"]
    calls = {}
    for lab in labels:
        calls[lab["name"]] = calls.get(lab["name"], 0) + 1
    return calls, out


def test_a_trace_without_shapes_costs_its_labelled_gemms():
    with gzip.open(LABELS, "rt") as f:
        events = json.load(f)["traceEvents"]
    calls, kernel_us = _raw_label_kernel_time(events)
    data = read_kineto_file(LABELS, "h")
    t = data.ops
    names = np.asarray(t.keys["operation"], dtype=object)[np.asarray(t.rows["op"])]
    flops, nbytes = np.asarray(t["flops"]), np.asarray(t["bytes"])
    time_ps = np.asarray(t.rows["total_time_ps"], np.float64)
    total = 0.0
    for name, n_calls in calls.items():
        n, m, k = map(int, name.split()[1].split("x"))
        rows = names == name
        assert flops[rows].sum() == n_calls * 2 * n * m * k
        assert nbytes[rows].sum() == n_calls * 2 * (n * k + m * k + n * m)
        assert time_ps[rows].sum() == pytest.approx(kernel_us[name] * 1e6, rel=1e-9)
        total += flops[rows].sum()
    with open(FLOP_COUNTER, encoding="utf-8") as f:
        reference = json.load(f)["by_op"]["aten.mm"]  # per step; the trace holds 5 steps
    assert total == 5 * reference
