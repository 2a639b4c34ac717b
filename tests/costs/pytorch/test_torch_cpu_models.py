"""Small PyTorch CPU model captures (testdata/torch_cpu, tools/torch_cpu_models.py) and the new
op cases of testdata/kineto_captured: every expected figure is worked out here from the raw
trace events (their `Input Dims`, `Input type`, `Concrete Inputs` and nesting) by hand
formulas, or is FlopCounterMode's (flop_counter.json), never from the model's code."""

from __future__ import annotations

import glob
import gzip
import json
import math
import os

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.serve.service.core import RooflineService

TESTDATA = os.path.join(TESTS, "..", "testdata")
MODELS = os.path.join(TESTDATA, "torch_cpu")
AMX = os.path.join(MODELS, "roofline_device_amx.json")
CAPTURED = os.path.join(TESTDATA, "kineto_captured")
SIZE = {"float": 4, "c10::BFloat16": 2}
PRODUCTS = ["matmul", "convolution", "attention"]


def _trace(folder, case=None):
    pattern = f"{case}.*.pt.trace.json.gz" if case else "*.pt.trace.json.gz"
    (path,) = glob.glob(os.path.join(folder, pattern))
    return path


def raw_ops(path):
    """The cpu_op events in (thread, start, -duration) order, each with its parent's index."""
    with gzip.open(path, "rt") as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op"]
    ev.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    stack: list = []
    for i, e in enumerate(ev):
        while stack and (
            ev[stack[-1]]["tid"] != e["tid"]
            or ev[stack[-1]]["ts"] + ev[stack[-1]]["dur"] < e["ts"] + e["dur"]
        ):
            stack.pop()
        e["parent"] = stack[-1] if stack else -1
        stack.append(i)
    return ev


def ancestors(ev, i):
    p = ev[i]["parent"]
    while p >= 0:
        yield ev[p]
        p = ev[p]["parent"]


def rows(folder, case=None):
    path = _trace(folder, case)
    return read_kineto_file(path, "h").ops


def by_op(t, name):
    m = t["operation"] == name
    return float(t["flops"][m].sum()), float(t["bytes"][m].sum()), int(t["occurrences"][m].sum())


# ------------------------------------------------------------------ costs of the new op cases


def _dims(e):
    a = e["args"]
    return a["Input Dims"], a["Input type"], a["Concrete Inputs"]


def _one(path, name):
    """The args of the one outermost call of `name` (an overload may call another inside)."""
    ev = raw_ops(path)
    (e,) = [
        e
        for i, e in enumerate(ev)
        if e["name"] == name and not any(a["name"] == name for a in ancestors(ev, i))
    ]
    return _dims(e)


EXPECTED = json.load(open(os.path.join(CAPTURED, "expected_flops.json")))["cases"]


def test_mv_addmv_ger_outer_by_hand():
    for case, name in (("mv", "aten::mv"), ("addmv", "aten::addmv")):
        dims, _, _ = _one(_trace(CAPTURED, case), name)
        a, x = (dims[1], dims[2]) if name == "aten::addmv" else (dims[0], dims[1])
        m, n = a
        assert x == [n]
        flops, nbytes, _ = by_op(rows(CAPTURED, case), name)
        vectors = (n + (m if name == "aten::addmv" else 0)) * 4  # x, the bias
        assert (flops, nbytes) == (2 * m * n, m * n * 4 + vectors + m * 4)
        # FlopCounterMode counts no mv: the same product as an mm / addmm is counted
        assert flops == EXPECTED[case]["flop_counter_decomposed"]["total"]
    for case in ("ger", "outer"):
        dims, _, _ = _one(_trace(CAPTURED, case), f"aten::{case}")
        (m,), (n,) = dims
        flops, nbytes, _ = by_op(rows(CAPTURED, case), f"aten::{case}")
        assert (flops, nbytes) == (m * n, (m + n + m * n) * 4)
        t = rows(CAPTURED, case)
        assert set(t["category"][t["operation"] == f"aten::{case}"]) == {"elementwise"}


def _numbers(text):
    return [float(x) for x in text.strip("[]").split(",")]


def test_upsample_bilinear_by_hand():
    """4 taps per output element: 4 multiplies + 3 adds; the input read, the output written."""
    dims, _, conc = _one(_trace(CAPTURED, "upsample_bilinear"), "aten::upsample_bilinear2d")
    n, c, h, w = dims[0]
    sh, sw = _numbers(conc[3])  # scale factors "[2., 2.]" (the .vec overload: no size)
    out = n * c * math.floor(h * sh) * math.floor(w * sw)
    t = rows(CAPTURED, "upsample_bilinear")
    assert by_op(t, "aten::upsample_bilinear2d")[:2] == (7 * out, (n * c * h * w + out) * 4)
    dims, _, conc = _one(_trace(CAPTURED, "upsample_bilinear_size"), "aten::upsample_bilinear2d")
    (n, c, h, w), (oh, ow) = dims[0], _numbers(conc[1])
    t = rows(CAPTURED, "upsample_bilinear_size")
    oh, ow = int(oh), int(ow)
    want = (7 * n * c * oh * ow, (n * c * h * w + n * c * oh * ow) * 4)
    assert by_op(t, "aten::upsample_bilinear2d")[:2] == want
    assert set(t["category"][t["operation"] == "aten::upsample_bilinear2d"]) == {"resample"}


def _lstm_by_hand(dims, conc):
    """FLOPs and bytes of aten::lstm from its recorded args: per layer, time step and row,
    2·4H·(I+H) for the gate products, 2·4H bias adds, 9H for the cell."""
    x, (h0, _), params = dims[0], dims[1], dims[2]
    bias, layers = conc[3] == "True", int(conc[4])
    hidden, batch = h0[-1], h0[1]
    rows_ = math.prod(x[:-1])
    per_layer = 4 if bias else 2
    flops = nbytes = 0
    for layer in range(layers):
        w_ih = params[layer * per_layer]
        inp = w_ih[1]
        flops += rows_ * (
            2 * 4 * hidden * (inp + hidden) + (8 * hidden if bias else 0) + 9 * hidden
        )
        weights = sum(math.prod(p) for p in params[layer * per_layer : (layer + 1) * per_layer])
        nbytes += 4 * (weights + rows_ * (inp + hidden) + 4 * batch * hidden)
    return flops, nbytes


@pytest.mark.parametrize("case", ["lstm", "lstm_nobias"])
def test_lstm_by_hand(case):
    dims, types, conc = _one(_trace(CAPTURED, case), "aten::lstm")
    assert types[0] == "float"
    t = rows(CAPTURED, case)
    flops, nbytes = _lstm_by_hand(dims, conc)
    assert by_op(t, "aten::lstm")[:2] == (flops, nbytes)
    # The gate products alone are what FlopCounterMode counts of the same LSTM written with
    # F.linear (tools/capture_torch_traces.py lstm_by_linears): the rest is 8H (biases) + 9H
    # (the cell) per layer, time step and row.
    x, (h0, _), bias, layers = dims[0], dims[1], conc[3] == "True", int(conc[4])
    hidden, rows_ = h0[-1], math.prod(x[:-1])
    rest = layers * rows_ * ((8 * hidden if bias else 0) + 9 * hidden)
    assert flops - rest == EXPECTED[case]["flop_counter_decomposed"]["total"]
    # its layers' time goes to it: no mkldnn_rnn_layer row of its own
    assert "aten::mkldnn_rnn_layer" not in set(t["operation"])


def test_bidirectional_lstm_and_other_resampling_by_hand():
    """Recorded-args forms the captures do not hold: a bidirectional 2-layer LSTM (the second
    layer reads both directions, 2H), nearest upsampling (a copy) and the bilinear gradient."""
    from tb_roofline.costs.torch.custom_ops import op_cost

    i, h, t_, b = 6, 5, 7, 3
    params = [[4 * h, i], [4 * h, h], [4 * h], [4 * h]] * 2
    params += [[4 * h, 2 * h], [4 * h, h], [4 * h], [4 * h]] * 2
    args = {
        "Input Dims": [[t_, b, i], [[4, b, h], [4, b, h]], params, [], [], [], [], [], []],
        "Input type": ["float", "TensorList", "TensorList"] + ["Scalar"] * 6,
        "Concrete Inputs": ["", "", "", "True", "2", "0.", "False", "True", "False"],
    }
    rows_ = t_ * b
    per = 2 * 4 * h * (i + h) + 8 * h + 9 * h, 2 * 4 * h * (2 * h + h) + 8 * h + 9 * h
    assert op_cost("aten::lstm", args).flops == 2 * rows_ * (per[0] + per[1])
    near = {
        "Input Dims": [[2, 3, 4, 5], [], []],
        "Input type": ["float", "", "ScalarList"],
        "Concrete Inputs": ["", "", "[3., 2.]"],
    }
    c = op_cost("aten::upsample_nearest2d", near)
    assert (c.flops, c.bytes) == (0, (120 + 2 * 3 * 12 * 10) * 4)
    grad = {
        "Input Dims": [[2, 3, 14, 18], [], [], [], [], []],
        "Input type": ["float", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar"],
        "Concrete Inputs": ["", "[14, 18]", "[2, 3, 7, 9]", "False", "2.", "2."],
    }
    c = op_cost("aten::upsample_bilinear2d_backward", grad)
    assert (c.flops, c.bytes) == (8 * 2 * 3 * 14 * 18, (2 * 3 * 14 * 18 + 2 * 3 * 7 * 9) * 4)


def test_extras_run_costs_each_op():
    """The extras run: LSTM, upsample, addmv, mv and ger each with FLOPs and bytes."""
    t = rows(os.path.join(MODELS, "extras"))
    for op in ("aten::lstm", "aten::upsample_bilinear2d", "aten::addmv", "aten::mv", "aten::ger"):
        flops, nbytes, calls = by_op(t, op)
        assert flops > 0 and nbytes > 0 and calls == 3, op
    ev = raw_ops(_trace(os.path.join(MODELS, "extras")))
    lstm = [_dims(e) for e in ev if e["name"] == "aten::lstm"]
    want = sum(_lstm_by_hand(d, c)[0] for d, _, c in lstm)
    assert by_op(t, "aten::lstm")[0] == want


# ------------------------------------------------------------------ models vs FlopCounterMode


FORWARD_ATTENTION = (
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",  # called directly by compiled code
)


def _attention_by_hand(ev):
    """The CPU flash attention calls' products from their shapes: forward Q·Kᵀ and P·V,
    2·b·h·Lq·Lk·(Dqk + Dv); backward (recomputing Q·Kᵀ) 2·b·h·Lq·Lk·(3·Dqk + 2·Dv)."""
    total = 0
    for e in ev:
        dims = e["args"].get("Input Dims")
        if e["name"] in FORWARD_ATTENTION and not any(
            a["name"].startswith("aten::") for a in ancestors(ev, ev.index(e))
        ):
            (b, h, lq, dq), (_, _, lk, _), (_, _, _, dv) = dims[:3]
            total += 2 * b * h * lq * lk * (dq + dv)
        elif e["name"] == "aten::_scaled_dot_product_flash_attention_for_cpu_backward":
            (b, h, lq, dq), (_, _, lk, _), (_, _, _, dv) = dims[1:4]
            total += 2 * b * h * lq * lk * (3 * dq + 2 * dv)
    return total


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", ["gpt_eager", "gpt_autocast_bf16", "gpt_compiled", "convnet", "prefill_decode"]
)
def test_model_flops_match_flop_counter_mode(case):
    """Matmul and convolution FLOPs per step = FlopCounterMode's (which counts no CPU flash
    attention); attention FLOPs = the hand formula over the raw attention calls."""
    folder = os.path.join(MODELS, case)
    with open(os.path.join(folder, "flop_counter.json")) as f:
        ref = json.load(f)
    t = rows(folder)
    steps = ref["steps"]
    assert len(set(t["step"].tolist())) == steps
    mm = np.isin(t["category"], ["matmul", "convolution"])
    assert t["flops"][mm].sum() == steps * ref["flop_counter_per_step"]["total"]
    att = t["category"] == "attention"
    assert t["flops"][att].sum() == _attention_by_hand(raw_ops(_trace(folder)))


# ------------------------------------------------------------------ autocast: the inner precision


def test_autocast_matmuls_take_the_inner_calls_precision():
    """Under autocast an outer aten::linear with fp32 tensors wraps the bf16 aten::linear
    autocast makes: every outermost linear is one bf16 row call, none is fp32, with the
    outer call's FLOPs 2·M·K·N."""
    folder = os.path.join(MODELS, "gpt_autocast_bf16")
    ev = raw_ops(_trace(folder))
    outer = [
        e
        for i, e in enumerate(ev)
        if e["name"] == "aten::linear"
        and not any(a["name"] == "aten::linear" for a in ancestors(ev, i))
    ]
    wrapped = [
        e
        for i, e in enumerate(ev)
        if e["name"] == "aten::linear"
        and e["args"]["Input type"][0] == "c10::BFloat16"
        and ev[e["parent"]]["name"] == "aten::linear"
        and ev[e["parent"]]["args"]["Input type"][0] == "float"
    ]
    assert len(wrapped) == 15  # 5 per step: qkv and fc of 2 blocks (after a norm), the head
    flops = sum(
        2 * math.prod(e["args"]["Input Dims"][0]) * e["args"]["Input Dims"][1][0] for e in outer
    )
    t = rows(folder)
    lin = t["operation"] == "aten::linear"
    assert set(t["precision"][lin]) == {"bf16"}
    assert t["occurrences"][lin].sum() == len(outer)
    assert t["flops"][lin].sum() == flops
    products = np.isin(t["category"], PRODUCTS)
    assert set(t["precision"][products]) == {"bf16"}


def _service_answer(run, device_file=AMX):
    s = RooflineService(MODELS, device_file=device_file)
    return s, s.guidance(run, "", True)


def _ops(s, run):
    ans = s.ops(run, "", True)
    return [dict(zip(ans["columns"], r)) for r in ans["rows"]]


def test_no_precision_advice_for_matmuls_already_under_autocast():
    _, g = _service_answer("gpt_autocast_bf16")
    assert not [f for f in g["findings"] if f["rule"] == "precision"]
    _, g = _service_answer("gpt_eager")  # the same model in fp32 does get it
    found = [f for f in g["findings"] if f["rule"] == "precision"]
    assert found and all("device_type='cpu'" in f["suggestion"] for f in found)


CUDA_WORDS = ("Nsight", "cuBLAS", "cuDNN", "CUDA", "TF32", "tf32", "HBM", "Triton", "pin_memory")


@pytest.mark.parametrize("run", ["gpt_eager", "convnet", "prefill_decode", "gpt_compiled"])
def test_cpu_advice_names_no_cuda_tool(run):
    _, g = _service_answer(run)
    assert g["findings"]
    for f in g["findings"]:
        for word in CUDA_WORDS:
            assert word not in f["suggestion"], (f["rule"], word)


def test_far_below_roof_is_not_hidden_by_another_rule():
    """On the convnet, fusion names max_pool2d and dropout; each is still under its roof by its
    own gap (from the op rows: under half its roof, >= 5% of the op time or a gap >= 2% of the
    time), so each has its far_below_roof finding with that gap; the union counts each op once."""
    s, g = _service_answer("convnet")
    fused = {o["operation"] for f in g["findings"] if f["rule"] == "fusion" for o in f["ops"]}
    assert {"aten::max_pool2d", "aten::dropout"} <= fused
    total = g["time"]["total_time_us"]
    far = {f["ops"][0]["operation"]: f for f in g["findings"] if f["rule"] == "far_below_roof"}
    for r in _ops(s, "convnet"):
        if r["operation"] not in ("aten::max_pool2d", "aten::dropout"):
            continue
        gap = r["potential_time_saved_us"]
        assert r["roof_time_us"] / r["total_time_us"] < 0.5
        assert r["self_time_percent"] >= 5 or gap >= 0.02 * total
        assert far[r["operation"]]["time_saved_us"] == gap
    claims: dict = {}
    for f in g["findings"]:
        if f["scope"] == "op":
            claims.setdefault(f["ops"][0]["operation"], []).append(f)
    assert g["total_time_saved_us"] <= total
    savings = [f["time_saved_us"] for f in g["findings"]]
    assert savings == sorted(savings, reverse=True)  # the largest first
