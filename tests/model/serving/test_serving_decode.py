"""The decode roofline of the whole model and the labels of serving traces: the step's device
span, the share of GEMM time whose weights a floor counts (none below MIN_WEIGHT_COVERAGE), the
engine from the trace's ops, graph replays named as the cause, bf16 kernel names, sliding-window
attention said. Expected figures are worked out here from the raw trace events (launch
correlations, op spans, kernel durations), without the reader or the model."""

import copy
import functools
import gzip
import json
import os
import shutil

import pytest
from testpaths import TESTS

from tb_roofline.devices.precision import with_input_type
from tb_roofline.model.records.roofline import analyze
from tb_roofline.model.serving.phases import MIN_WEIGHT_COVERAGE
from tb_roofline.readers.kernel_names import kernel_unit
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.readers.kineto.device import why_no_cost

HERE = TESTS
KINETO = os.path.join(HERE, "..", "testdata", "kineto")
DECODE_FILE = os.path.join(KINETO, "sglang_qwen3_8b_decode", "worker0.pt.trace.json.gz")
CAPTURE_FILE = os.path.join(
    KINETO, "sglang_qwen3_8b_decode", "capture", "bs_32_rank0.pt.trace.json.gz"
)
B200 = os.path.join(KINETO, "b200_eager", "worker0.1773700000000.pt.trace.json.gz")
B200_ANNOTATION = "execute_context_1(888_788544)_generation_0(0)"


@functools.lru_cache(maxsize=4)
def _load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _device_span(events, annotation):
    """(first start, last end) in µs of the GPU activity launched inside the annotation's CPU
    span: each activity's launch is the runtime call with its correlation id."""
    ann = next(e for e in events if e.get("name") == annotation)
    lo, hi = ann["ts"], ann["ts"] + ann["dur"]
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gpu = [
        e
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and lo <= launch.get(e["args"].get("correlation"), -1) <= hi
    ]
    return min(e["ts"] for e in gpu), max(e["ts"] + e["dur"] for e in gpu), ann["dur"]


def _kernel_time_under(events, op_names):
    """Per op name: the duration of the kernels whose launch lies inside a call of that op (on
    the launching thread), µs."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] in op_names]
    runtime = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    out = dict.fromkeys(op_names, 0.0)
    for k in (e for e in events if e.get("cat") == "kernel"):
        r = runtime.get(k["args"].get("correlation"))
        if r is None:
            continue
        owners = [
            o for o in ops if o["tid"] == r["tid"] and o["ts"] <= r["ts"] <= o["ts"] + o["dur"]
        ]
        if owners:
            out[min(owners, key=lambda o: o["ts"])["name"]] += k["dur"]
    return out


ROOFLINE_NAME = (
    "execute_888_context_1(sq888sk888sqsq788544sqsk788544)_generation_0(sq0sk0sqsq0sqsk0)"
)


def _relabelled(tmp_path, name):
    """The B200 vLLM trace with its step annotation renamed (every event else unchanged)."""
    doc = copy.deepcopy(_load(B200))
    for e in doc["traceEvents"]:
        if e.get("name") == B200_ANNOTATION:
            e["name"] = name
    path = tmp_path / os.path.basename(B200)
    with gzip.open(path, "wt", compresslevel=1) as f:
        json.dump(doc, f)
    return str(path)


@pytest.fixture(scope="module")
def vllm_roofline(tmp_path_factory):
    """The B200 vLLM step written in the roofline-annotation form (its Σ Sq² = Σ Sq·Sk =
    888², the number vLLM wrote beside its tokens)."""
    return read_kineto_file(_relabelled(tmp_path_factory.mktemp("roofline"), ROOFLINE_NAME), "h")


@pytest.fixture(scope="module")
def decode():
    return analyze([read_kineto_file(DECODE_FILE, "h")], "h")


# ----------------------------------------------------------------------------- step time


def test_decode_step_time_is_its_device_span(decode):
    ev = _load(DECODE_FILE)["traceEvents"]
    ann = next(e["name"] for e in ev if e.get("name", "").startswith("execute_"))
    first, last, cpu = _device_span(ev, ann)
    (s,) = decode.serving
    assert s["time_source"] == "device"
    assert s["time_ps"] == pytest.approx((last - first) * 1e6, rel=1e-9)
    assert s["cpu_span_ps"] == pytest.approx(cpu * 1e6, rel=1e-9)
    assert s["tokens_per_s"] == pytest.approx(32 / ((last - first) * 1e-6), rel=1e-9)


def test_vllm_step_time_is_its_device_span_not_its_cpu_annotation():
    ev = _load(B200)["traceEvents"]
    first, last, cpu = _device_span(ev, B200_ANNOTATION)
    assert last - first < cpu  # the host annotation outlasts the device work: 84.5 vs 87.4 ms
    data = read_kineto_file(B200, "h")
    (s,) = data.serving_steps
    # (no Σ Sq·Sk in vLLM's own form: no attention count, nothing to say about windows)
    assert not any(d.code == "attention_sliding_window" for d in data.diagnostics)
    # (epoch µs as float64 here: ~0.3 ns of rounding)
    assert s["time_ps"] == pytest.approx((last - first) * 1e6, rel=1e-8)
    assert s["tokens_per_s"] == pytest.approx(888 / ((last - first) * 1e-6), rel=1e-8)


# ----------------------------------------------------------------------------- weight floor


def test_weight_floor_with_every_gemm_counted(decode):
    ev = _load(DECODE_FILE)["traceEvents"]
    gemm_us = sum(
        e["dur"] for e in ev if e.get("cat") == "kernel" and e["name"].startswith("Cijk_")
    )
    (s,) = decode.serving
    assert s["gemm_time_us"] == pytest.approx(gemm_us, rel=1e-9)
    assert s["weight_coverage"] == 1.0
    assert s["weight_floor_us"] is not None and s["ridge_batch"] > 32
    (f,) = [f for f in s["findings"] if f["code"] == "batch_below_ridge"]
    assert "every GEMM of the step counted" in f["text"]
    assert (
        "6,078" not in f["text"] and "weight_floor_us = GEMM bytes / HBM bandwidth" in f["formula"]
    )


def test_no_weight_floor_from_replays_without_their_capture(tmp_path, decode):
    """The execution trace alone: its GEMMs are graph replays without ops, so no weights are
    counted; no floor, ridge batch or KV share is stated, and the finding names the GEMM
    kernels left out, longest first."""
    shutil.copy(DECODE_FILE, tmp_path / "worker0.pt.trace.json.gz")
    a = analyze([read_kineto_file(str(tmp_path / "worker0.pt.trace.json.gz"), "h")], "h")
    (s,) = a.serving
    ev = _load(DECODE_FILE)["traceEvents"]
    per_kernel: dict = {}
    for e in ev:
        if e.get("cat") == "kernel" and e["name"].startswith("Cijk_"):
            per_kernel[e["name"]] = per_kernel.get(e["name"], 0.0) + e["dur"]
    longest = max(per_kernel, key=per_kernel.get)
    assert s["gemm_time_us"] == pytest.approx(sum(per_kernel.values()), rel=1e-9)
    assert s["gemm_time_us"] == pytest.approx(decode.serving[0]["gemm_time_us"], rel=1e-9)
    assert s["weight_coverage"] == 0.0
    assert s["weight_floor_us"] is None and s["ridge_batch"] is None and s["kv_share"] is None
    codes = [f["code"] for f in s["findings"]]
    assert "batch_below_ridge" not in codes and "kv_reads_dominate" not in codes
    (f,) = [f for f in s["findings"] if f["code"] == "decode_floor_unknown"]
    assert f["bound_us"] is None and "0.0% of the step's GEMM time" in f["text"]
    assert f"{longest[:80]} ({per_kernel[longest]:,.0f} µs)" in f["text"]


def test_no_weight_floor_below_the_coverage(tmp_path):
    """The B200 vLLM step relabelled decode (its rows unchanged): the dense GEMMs
    (`aten::linear`) have their weights, the mxfp4 MoE (`vllm::moe_forward`, `bmm_…MxE2m1…`
    kernels) records none. The floor of the linears alone would be the model's floor of a
    tenth of its GEMM time: none is stated."""
    a = analyze(
        [read_kineto_file(_relabelled(tmp_path, "execute_context_0(0)_generation_1(1)"), "h")], "h"
    )
    (s,) = a.serving
    t = _kernel_time_under(_load(B200)["traceEvents"], ("aten::linear", "vllm::moe_forward"))
    expected = t["aten::linear"] / (t["aten::linear"] + t["vllm::moe_forward"])
    assert s["phase"] == "decode" and s["weight_coverage"] == pytest.approx(expected, rel=1e-9)
    assert s["weight_coverage"] < MIN_WEIGHT_COVERAGE
    assert s["weight_floor_us"] is None and s["ridge_batch"] is None
    (f,) = [f for f in s["findings"] if f["code"] == "decode_floor_unknown"]
    assert f"vllm::moe_forward ({t['vllm::moe_forward']:,.0f} µs)" in f["text"]
    assert f"{expected:.1%} of the step's GEMM time" in f["text"]


# ----------------------------------------------------------------------------- labels


def test_engine_of_a_roofline_annotation_from_the_ops(vllm_roofline, decode):
    """vLLM can write the `execute_<tokens>_context_…(sq…sk…)` form SGLang writes: the trace's
    ops name the engine; the step's sums then cost its attention."""
    data = vllm_roofline
    (s,) = data.serving_steps
    assert (s["engine"], s["phase"], s["tokens"]) == ("vllm", "prefill", 888)
    assert decode.serving[0]["engine"] == "sglang"
    calls = [
        e
        for e in _load(B200)["traceEvents"]
        if e.get("cat") == "cpu_op" and e["name"] == "vllm::unified_attention_with_output"
    ]
    q = calls[0]["args"]["Input Dims"][0]  # [T, H_q, D]
    a = analyze([data], "h")
    assert a.serving[0]["attention_flops"] == len(calls) * 4 * q[1] * q[2] * 788544


def test_sliding_window_attention_is_said(vllm_roofline):
    """gpt-oss alternates sliding-window layers: their attention kernels say so by name, the
    trace holds no window, so the counts are said to be full attention."""
    data = vllm_roofline
    ev = _load(B200)["traceEvents"]
    windowed = sum(1 for e in ev if e.get("cat") == "kernel" and "Sliding" in e["name"])
    note = next(d for d in data.diagnostics if d.code == "attention_sliding_window")
    assert note.message.startswith(f"{windowed} vllm::unified_attention_with_output calls")
    assert windowed == 18 and "full attention" in note.message


def test_replayed_kernels_are_named_as_replays(tmp_path):
    shutil.copy(DECODE_FILE, tmp_path / "worker0.pt.trace.json.gz")
    data = read_kineto_file(str(tmp_path / "worker0.pt.trace.json.gz"), "h")
    note = next(d for d in data.diagnostics if d.code == "uncosted_ops")
    assert "paged_attention_ll4mi_QKV" in note.message and "no_step_sums" not in note.message
    assert "(graph_replay)" in note.message and "graph_replay: a kernel replayed" in note.message
    # vLLM's Triton attention kernel: its name is an attention op's, its cause the replay
    assert why_no_cost("kernel_unified_attention_3d", "none", None, True) == "graph_replay"
    assert why_no_cost("kernel_unified_attention_3d", "none", None) == "no_step_sums"


def test_bf16_in_mangled_kernel_names():
    """aiter's templated kernels spell bf16 `DF16b` (std::bfloat16_t): the capture shows their
    ops' inputs are bf16."""
    names = {
        e["name"]
        for e in _load(DECODE_FILE)["traceEvents"]
        if e.get("cat") == "kernel" and "DF16b" in e["name"]
    }
    types = {
        t
        for e in _load(CAPTURE_FILE)["traceEvents"]
        if e.get("cat") == "cpu_op" and e["name"] == "aiter::add_rmsnorm"
        for t in e["args"]["Input type"]
        if t.startswith("c10::")
    }
    assert names and types == {"c10::BFloat16"}
    assert {kernel_unit(n) for n in names} == {"bf16"}
    # a 16-bit kernel unit follows the recorded inputs; other units keep the kernel's
    assert with_input_type("kernel:fp16", "bf16") == "kernel:bf16/bf16"
    assert with_input_type("kernel:bf16", "f16") == "kernel:fp16/f16"
    assert with_input_type("kernel:tf32", "f32") == "kernel:tf32/f32"


# ------------------------------------------------- the H200 fp8 decode step, eager and replayed

H200_EAGER = os.path.join(KINETO, "h200_decode_eager")
H200_GRAPH = os.path.join(KINETO, "h200_decode_graph")
H200_DECODE = "execute_context_0(0)_generation_16(16)"  # vLLM's form: 16 decode requests
GEMM_OPS = ("aten::mm", "aten::_scaled_mm")
# Bytes per element of the recorded input types, and of the ScalarType codes `_scaled_mm`
# records as its out_dtype (15 = BFloat16)
ELEMENT_BYTES = {"c10::BFloat16": 2, "c10::Float8_e4m3fn": 1, "float": 4}
SCALAR_TYPE_BYTES = {"15": 2, "5": 2, "6": 4}


def _trace(folder):
    (name,) = [n for n in os.listdir(folder) if n.endswith(".pt.trace.json.gz")]
    return os.path.join(folder, name)


def _as_decode_steps(tmp_path, folder):
    """The H200 trace with a vLLM decode annotation (16 requests, 16 tokens) around each
    ProfilerStep's CPU span (every event else unchanged): its steps become serving steps."""
    doc = copy.deepcopy(_load(_trace(folder)))
    marks = [
        dict(e, name=H200_DECODE, ts=e["ts"] + 0.001, dur=e["dur"] - 0.002)
        for e in doc["traceEvents"]
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    ]
    doc["traceEvents"] += marks
    path = tmp_path / os.path.basename(_trace(folder))
    with gzip.open(path, "wt", compresslevel=1) as f:
        json.dump(doc, f)
    return str(path)


def _steps(events):
    return sorted(
        (e for e in events if e.get("cat") == "user_annotation" and "ProfilerStep#" in e["name"]),
        key=lambda e: e["ts"],
    )


def _launched_in(events, lo, hi):
    """The kernels whose launch (the runtime call with their correlation id) lies in [lo, hi],
    each with its launch event."""
    runtime = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    out = []
    for k in (e for e in events if e.get("cat") == "kernel"):
        r = runtime.get(k["args"].get("correlation"))
        if r is not None and lo <= r["ts"] <= hi:
            out.append((k, r))
    return out


def _gemm_bytes(op) -> float:
    """A GEMM call's bytes from its recorded shapes: A [M,K], B [K,N] in their recorded types,
    C [M,N] in the inputs' type (`mm`) or `_scaled_mm`'s out_dtype."""
    (m, k), (_, n) = op["args"]["Input Dims"][:2]
    ta, tb = op["args"]["Input type"][:2]
    out = ELEMENT_BYTES[ta]
    if op["name"] == "aten::_scaled_mm":
        out = SCALAR_TYPE_BYTES[op["args"]["Concrete Inputs"][6]]
    return m * k * ELEMENT_BYTES[ta] + k * n * ELEMENT_BYTES[tb] + m * n * out


def _h200_eager_steps(events):
    """Per ProfilerStep of the eager trace, from the raw events: {op name: kernel µs} of the
    GEMM ops (the kernels each `aten::mm` / `aten::_scaled_mm` call launched, split-K
    reductions included), their bytes by their shapes, and the device span."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] in GEMM_OPS]
    out = []
    for st in _steps(events):
        lo, hi = st["ts"], st["ts"] + st["dur"]
        time = dict.fromkeys(GEMM_OPS, 0.0)
        nbytes = dict.fromkeys(GEMM_OPS, 0.0)
        for o in ops:
            if lo <= o["ts"] <= hi:
                nbytes[o["name"]] += _gemm_bytes(o)
        launched = _launched_in(events, lo, hi)
        for k, r in launched:
            owner = [
                o for o in ops if o["tid"] == r["tid"] and o["ts"] <= r["ts"] <= o["ts"] + o["dur"]
            ]
            if owner:
                time[owner[0]["name"]] += k["dur"]
        span = (min(k["ts"] for k, _ in launched), max(k["ts"] + k["dur"] for k, _ in launched))
        out.append({"time": time, "bytes": nbytes, "span": span, "cpu": st["dur"]})
    return out


@pytest.fixture(scope="module")
def h200_eager(tmp_path_factory):
    path = _as_decode_steps(tmp_path_factory.mktemp("h200e"), H200_EAGER)
    data = read_kineto_file(path, "h")
    return data, analyze([data], "h")


def test_h200_fp8_gemms_count_in_the_gemm_time(h200_eager):
    """Every GEMM of the step is in the GEMM time, costed or not: the bf16 `mm` calls and the
    fp8 `_scaled_mm` calls (cuBLASLt `nvjet_sm90_qqtst…` kernels). The coverage is the time of
    those whose bytes the cost layer counts; without an fp8 cost it is under 80% and no floor
    is drawn (the bf16 weights alone, 167 µs, would have been called the model's); with one,
    the floor is the step's GEMM bytes at HBM bandwidth, and those bytes are the weights that
    FlopCounterMode's capture listed, plus the small activations."""
    data, a = h200_eager
    ev = _load(_trace(H200_EAGER))["traceEvents"]
    costed = {
        str(n)
        for n, known in zip(data.ops.keys["operation"], data.ops.keys["flops_known"])
        if known and str(n) in ("aten::matmul", "aten::mm", "aten::_scaled_mm")
    }
    costed = {"aten::mm" if n == "aten::matmul" else n for n in costed}
    assert "aten::mm" in costed
    # costed or not, the fp8 calls are GEMM rows: their longest kernel is cuBLASLt's nvjet GEMM
    cats = {
        str(c)
        for n, c in zip(data.ops.keys["operation"], data.ops.keys["category"])
        if n == "aten::_scaled_mm"
    }
    assert cats == {"matmul"}
    ref = json.load(open(os.path.join(H200_EAGER, "flop_counter.json")))
    size = {"bf16": 2, "float8_e4m3fn": 1}
    weights = 0
    for name, text in ref["weights"].items():
        dtype, dims = text.split(" ")
        k, n = json.loads(dims)
        weights += k * n * size[dtype] * (1 if name == "lm_head" else ref["layers"])
    bw = a.device.memory("hbm").gbs
    for s, raw in zip(a.serving, _h200_eager_steps(ev)):
        gemm = sum(raw["time"].values())
        covered = sum(t for n, t in raw["time"].items() if n in costed)
        assert s["gemm_time_us"] == pytest.approx(gemm, rel=1e-9)
        assert s["weight_coverage"] == pytest.approx(covered / gemm, rel=1e-9)
        if covered / gemm < MIN_WEIGHT_COVERAGE:
            assert s["weight_floor_us"] is None and s["ridge_batch"] is None
            (f,) = [f for f in s["findings"] if f["code"] == "decode_floor_unknown"]
            assert f"aten::_scaled_mm ({raw['time']['aten::_scaled_mm']:,.0f} µs)" in f["text"]
            assert f"{covered / gemm:.1%} of the step's GEMM time" in f["text"]
        else:
            nbytes = sum(raw["bytes"].values())
            assert weights <= nbytes <= 1.01 * weights
            assert s["weight_floor_us"] == pytest.approx(nbytes / bw / 1e3, rel=1e-4)


LM_HEAD = [[16, 4096], [4096, 32000]]  # the H200 model's LM head GEMM, as recorded


def _lm_head_without_shapes(tmp_path):
    """The H200 eager decode steps with the LM head's `aten::matmul` and `aten::mm` recorded
    without shapes (every other event unchanged): its weights cannot be counted."""
    path = _as_decode_steps(tmp_path, H200_EAGER)
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op" and e["args"].get("Input Dims", [])[:2] == LM_HEAD:
            for k in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                e["args"].pop(k, None)
    with gzip.open(path, "wt", compresslevel=1) as f:
        json.dump(doc, f)
    return str(path)


def _scale_bytes(op) -> int:
    """`_scaled_mm`'s scale_a and scale_b: recorded 0-d (`[]`, one element) in their type."""
    if op["name"] != "aten::_scaled_mm":
        return 0
    return sum(ELEMENT_BYTES[op["args"]["Input type"][i]] for i in (2, 3))


def test_h200_partial_coverage_draws_the_floor_and_says_its_share(tmp_path):
    """Between MIN_WEIGHT_COVERAGE and every GEMM: the floor of the GEMMs whose weights are
    counted is drawn, named a lower bound, with the share of GEMM time it covers and the GEMM
    left out. Expected from the raw events: each GEMM call's kernels (launched inside it on its
    thread) and its bytes from its shapes, the LM head's left out."""
    a = analyze([read_kineto_file(_lm_head_without_shapes(tmp_path), "h")], "h")
    ev = _load(_trace(H200_EAGER))["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] in GEMM_OPS]
    bw = a.device.memory("hbm").gbs
    assert len(a.serving) == len(_steps(ev)) == 5
    for s, st in zip(a.serving, _steps(ev)):
        lo, hi = st["ts"], st["ts"] + st["dur"]
        calls = [o for o in ops if lo <= o["ts"] <= hi]
        time = {id(o): 0.0 for o in calls}
        for k, r in _launched_in(ev, lo, hi):
            owner = [
                o
                for o in calls
                if o["tid"] == r["tid"] and o["ts"] <= r["ts"] <= o["ts"] + o["dur"]
            ]
            if owner:
                time[id(owner[0])] += k["dur"]
        head = [o for o in calls if o["args"]["Input Dims"][:2] == LM_HEAD]
        assert len(head) == 1
        gemm = sum(time.values())
        covered = gemm - time[id(head[0])]
        nbytes = sum(_gemm_bytes(o) + _scale_bytes(o) for o in calls if o is not head[0])
        cov = covered / gemm
        assert MIN_WEIGHT_COVERAGE <= cov < 1.0  # 83% here: the band this test is about
        assert s["weight_coverage"] == pytest.approx(cov, rel=1e-9)
        assert s["weight_floor_us"] == pytest.approx(nbytes / bw / 1e3, rel=1e-9)
        assert f"aten::matmul ({time[id(head[0])]:,.0f} µs)" == s["uncounted_gemms"]
        codes = [f["code"] for f in s["findings"]]
        assert "decode_floor_unknown" not in codes
        (f,) = [f for f in s["findings"] if f["code"] == "batch_below_ridge"]
        assert f"({cov:.1%} of the step's GEMM time)" in f["text"]
        assert "a lower bound on the model's" in f["text"] and "every GEMM" not in f["text"]
        assert f"coverage = {covered:,.1f} / {gemm:,.1f} µs" in f["formula"]
        assert f"{nbytes:,.0f} B" in f["formula"]


def test_h200_eager_step_time_is_its_device_span(h200_eager):
    _, a = h200_eager
    raw = _h200_eager_steps(_load(_trace(H200_EAGER))["traceEvents"])
    for s, r in zip(a.serving, raw):
        first, last = r["span"]
        assert s["time_source"] == "device"
        # (the reader keeps ns; the trace's epoch µs hold fractions of one)
        assert s["time_ps"] == pytest.approx((last - first) * 1e6, abs=1e3)
        # (the annotation written 2 ns inside the ProfilerStep)
        assert s["cpu_span_ps"] == pytest.approx((r["cpu"] - 0.002) * 1e6, abs=1e3)
        assert s["tokens_per_s"] == pytest.approx(16 / ((last - first) * 1e-6), rel=1e-6)
        assert s["time_ps"] < s["cpu_span_ps"]


def test_h200_graph_replay_has_no_floor(tmp_path):
    """The same step as one CUDA graph replayed, without its capture trace: no GEMM has a
    cost (coverage 0), so no floor, ridge batch or KV share. The step's time is its device
    span, and that agrees with the replay's own CUDA-event timing in flop_counter.json."""
    a = analyze([read_kineto_file(_as_decode_steps(tmp_path, H200_GRAPH), "h")], "h")
    ev = _load(_trace(H200_GRAPH))["traceEvents"]
    ref = json.load(open(os.path.join(H200_GRAPH, "flop_counter.json")))
    assert len(a.serving) == len(_steps(ev)) == 5
    for s, st in zip(a.serving, _steps(ev)):
        launched = _launched_in(ev, st["ts"], st["ts"] + st["dur"])
        gemm = [k for k, _ in launched if k["name"].startswith("nvjet_")]
        first = min(k["ts"] for k, _ in launched)
        last = max(k["ts"] + k["dur"] for k, _ in launched)
        assert s["gemm_time_us"] == pytest.approx(sum(k["dur"] for k in gemm), rel=1e-9)
        assert s["weight_coverage"] == 0.0
        assert s["weight_floor_us"] is None and s["ridge_batch"] is None and s["kv_share"] is None
        assert s["time_ps"] == pytest.approx((last - first) * 1e6, abs=1e3)
        assert s["time_ps"] / 1e9 == pytest.approx(ref["graph_replay_ms_mean_of_20"], rel=0.03)
        (f,) = [f for f in s["findings"] if f["code"] == "decode_floor_unknown"]
        assert "0.0% of the step's GEMM time" in f["text"] and "nvjet_sm90_" in f["text"]
        assert not [f for f in s["findings"] if f["code"] == "batch_below_ridge"]
