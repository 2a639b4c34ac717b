"""Serving traces: step annotations, attention from their sums, serving custom ops, graph
capture, the decode roofline. Expected numbers are counted here from the raw trace files and
the annotations (independently of the reader), or derived by hand from recorded shapes."""

import gzip
import json
import os
import re
import shutil

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.costs.torch import serving_ops
from tb_roofline.costs.torch.args import Args
from tb_roofline.model.records.roofline import analyze, scoped_op_records
from tb_roofline.readers import serving_steps
from tb_roofline.readers.kernel_names import kernel_unit
from tb_roofline.readers.kineto import read_kineto_file

HERE = TESTS
DECODE = os.path.join(HERE, "..", "testdata", "kineto", "sglang_qwen3_8b_decode")
DECODE_FILE = os.path.join(DECODE, "worker0.pt.trace.json.gz")
CAPTURE_FILE = os.path.join(DECODE, "capture", "bs_32_rank0.pt.trace.json.gz")
B200 = os.path.join(
    HERE, "..", "testdata", "kineto", "b200_eager", "worker0.1773700000000.pt.trace.json.gz"
)


def _events(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _rows(data):
    """(operation, category, flops_source, occurrences, flops, bytes, time ps) per row."""
    t = data.ops
    op = np.asarray(t.rows["op"])
    return [
        (
            t.keys["operation"][o],
            t.keys["category"][o],
            t.keys["flops_source"][o],
            int(t.rows["occurrences"][i]),
            float(t["flops"][i]),
            float(t["bytes"][i]),
            float(t.rows["total_time_ps"][i]),
        )
        for i, o in enumerate(op.tolist())
    ]


@pytest.fixture(scope="module")
def decode():
    return read_kineto_file(DECODE_FILE, "h")


# ----------------------------------------------------------------------------- annotations


def test_parse_sglang_prefill_annotation_of_the_issue():
    f = serving_steps.parse(
        "execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)"
        "_generation_0(sq0sk0sqsq0sqsk0)"
    )
    # SGLang, ATOM and vLLM write this form: the trace's ops name the engine (with_engine)
    assert (f.engine, f.phase, f.batch, f.tokens) == ("", "prefill", 15, 15360)
    assert (f.context.sq, f.context.sk, f.context.sqsq, f.context.sqsk) == (
        15360,
        15360,
        15728640,
        15728640,
    )
    assert f.generation.requests == 0 and f.sums_known()
    # 15 sequences of 1024: Σ Sq² = 15·1024²
    assert f.context.sqsq == 15 * 1024**2


def test_parse_modes_and_vllm():
    m = serving_steps.parse("step[EXTEND bs=15 toks=15360]")
    assert (m.phase, m.mode, m.batch, m.tokens) == ("prefill", "EXTEND", 15, 15360)
    assert serving_steps.parse("step[DECODE bs=32]").phase == "decode"
    mixed = serving_steps.parse(
        "execute_40_context_1(sq8sk8sqsq64sqsk64)_generation_32(sq32sk900sqsq32sqsk900)"
    )
    assert mixed.phase == "mixed" and mixed.total("sqsk") == 964 and mixed.batch == 33
    v = serving_steps.parse("execute_context_1(888_788544)_generation_0(0)")
    assert (v.engine, v.phase, v.batch, v.tokens) == ("vllm", "prefill", 1, 888)
    assert v.context.extra == (788544,) and v.context.sqsk is None and not v.sums_known()
    assert serving_steps.parse("execute_context_0(0)_generation_8(8)").phase == "decode"
    for bad in ("step[DECODE bs=x]", "execute_1_context_", "ProfilerStep#3", "step[]"):
        assert serving_steps.parse(bad) is None


# ----------------------------------------------------------------------------- attention


def _prefill_args():
    # aiter::mha_batch_prefill of the issue: q [15360, 32, 128], paged KV [835874, 8, 128]
    dims = [
        [15360, 32, 128],
        [835874, 8, 128],
        [835874, 8, 128],
        [16],
        [16],
        [15360],
        [],
        [],
        [],
        [],
        [],
    ]
    types = [
        "c10::BFloat16",
        "c10::BFloat16",
        "c10::BFloat16",
        "int",
        "int",
        "int",
        "Scalar",
        "Scalar",
        "Scalar",
        "Scalar",
        "Scalar",
    ]
    concrete = ["", "", "", "", "", "", "1024", "1024", "0.", "0.088", "True"]
    return Args(dims, types, concrete)


def test_prefill_attention_from_the_annotation():
    f = serving_steps.parse(
        "execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)"
        "_generation_0(sq0sk0sqsq0sqsk0)"
    )
    cost = serving_ops.attention_cost(_prefill_args(), f)
    assert cost.flops == 4 * 32 * 128 * 15728640 == pytest.approx(2.577e11, rel=1e-3)
    q_bytes = 15360 * 32 * 128 * 2
    assert cost.bytes == 2 * q_bytes + 2 * 15360 * 8 * 128 * 2  # KV of Σ Sk tokens only
    assert cost.category == "attention"


def test_attention_bound_without_annotation():
    flops, formula = serving_ops.attention_bound(_prefill_args())
    assert flops == 4 * 32 * 128 * 15360 * 1024
    assert "max_seqlen" in formula and "15360" in formula


def test_call_covering_one_phase_of_a_mixed_step():
    f = serving_steps.parse(
        "execute_40_context_1(sq8sk8sqsq64sqsk64)_generation_32(sq32sk900sqsq32sqsk900)"
    )
    q = Args([[32, 16, 64], [100, 16, 4, 64]], ["c10::Half", "c10::Half"])
    assert serving_ops.attention_cost(q, f).flops == 4 * 16 * 64 * 900  # the decode rows
    both = Args([[40, 16, 64], [100, 16, 4, 64]], ["c10::Half", "c10::Half"])
    assert serving_ops.attention_cost(both, f).flops == 4 * 16 * 64 * 964
    assert serving_ops.attention_cost(Args([[7, 16, 64]], ["c10::Half"]), f) is None


# ----------------------------------------------------------------------------- custom ops


def test_serving_custom_ops_from_shapes():
    bf = "c10::BFloat16"
    x = 32 * 4096 * 2
    add = serving_ops.op_cost(
        "aiter::add_rmsnorm", Args([[32, 4096]] * 4 + [[4096], []], [bf] * 5 + ["Scalar"])
    )
    assert (add.flops, add.bytes) == (5 * 32 * 4096, 4 * x + 4096 * 2)
    plain = serving_ops.op_cost(
        "aiter::rmsnorm", Args([[32, 4096], [32, 4096], [4096], []], [bf, bf, bf, "Scalar"])
    )
    assert (plain.flops, plain.bytes) == (4 * 32 * 4096, 2 * x + 4096 * 2)
    act = serving_ops.op_cost(
        "sgl_kernel::silu_and_mul", Args([[32, 12288], [32, 24576]], [bf, bf])
    )
    assert (act.flops, act.bytes) == (2 * 32 * 12288, 3 * 32 * 12288 * 2)
    kv = serving_ops.op_cost(
        "sglang::store_cache",
        Args(
            [[32, 1024], [32, 1024], [835874, 1024], [835874, 1024], [32], [], []],
            [bf] * 4 + ["long int", "Scalar", "Scalar"],
        ),
    )
    assert (kv.flops, kv.bytes) == (0, 4 * 32 * 1024 * 2 + 32 * 8)  # the cache never read
    rope = serving_ops.op_cost(
        "sgl_kernel::rotary_embedding",
        Args(
            [[32], [32, 4096], [32, 1024], [], [41216, 128], []],
            ["long int", bf, bf, "Scalar", bf, "Scalar"],
            ["", "", "", "128", "", "True"],
        ),
    )
    assert rope.flops == 3 * 128 * (32 * 40)
    quant = serving_ops.op_cost(
        "_C::dynamic_per_token_scaled_fp8_quant",
        Args([[888, 512], [888, 512], [888, 1]], ["c10::Float8_e4m3fn", bf, "float"]),
    )
    assert quant.flops == 2 * 888 * 512
    assert quant.bytes == 888 * 512 * (1 + 2) + 888 * 4
    gemm = serving_ops.op_cost("aiter::gemm_a16w16", Args([[32, 4096], [6144, 4096]], [bf, bf]))
    assert gemm.flops == 2 * 32 * 6144 * 4096
    assert (
        serving_ops.op_cost("vllm::moe_forward", Args([[888, 3072], [888, 128]], [bf, bf])) is None
    )  # no expert weights, no top-k: named uncosted, never guessed


def test_kv_cache_type_in_a_kernel_name_is_not_its_math():
    name = (
        "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, "
        "(vllm::Fp8KVCacheDataType)0, 1, 128, 256"
    )
    assert kernel_unit(name) == "bf16"


# ----------------------------------------------------------------------------- real decode


def _raw_step():
    ann = [e["name"] for e in _events(DECODE_FILE) if e.get("cat") == "user_annotation"]
    m = next(
        re.match(
            r"execute_(\d+)_context_(\d+)\(.*\)_generation_(\d+)\(sq(\d+)sk(\d+)"
            r"sqsq(\d+)sqsk(\d+)\)",
            a,
        )
        for a in ann
        if a.startswith("execute_")
    )
    return [int(x) for x in m.groups()]


def _capture_window_ops():
    ev = _events(CAPTURE_FILE)
    begin = next(e["ts"] for e in ev if e.get("name") == "hipStreamBeginCapture")
    end = next(e["ts"] for e in ev if e.get("name") == "hipStreamEndCapture")
    return [e for e in ev if e.get("cat") == "cpu_op" and begin <= e["ts"] <= end]


def test_decode_step_facts(decode):
    tokens, ctx, gen, sq, sk, sqsq, sqsk = _raw_step()
    (step,) = decode.serving_steps
    assert step["label"] == f"0 · decode bs {gen}" == "0 · decode bs 32"
    assert (step["phase"], step["batch"], step["tokens"]) == ("decode", 32, tokens)
    assert step["generation"]["sk"] == sk and step["generation"]["sqsk"] == sqsk
    assert step["tokens_per_s"] == pytest.approx(tokens / (step["time_ps"] * 1e-12))


def test_decode_attention_against_the_annotation(decode):
    _, _, _, _, sk, _, sqsk = _raw_step()
    calls = [e for e in _capture_window_ops() if "attention" in e["name"]]
    q = calls[0]["args"]["Input Dims"][2]  # query [T, H_q, D]
    kv = calls[0]["args"]["Input Dims"][3]  # paged cache [blocks, 1, H_kv, D]
    hq, d, hkv = q[1], q[2], kv[2]
    rows = [r for r in _rows(decode) if r[1] == "attention" and r[2] == "formula"]
    assert sum(r[3] for r in rows) == len(calls) == 36
    assert sum(r[4] for r in rows) == len(calls) * 4 * hq * d * sqsk
    per_call = 2 * q[0] * hq * d * 2 + 2 * sk * hkv * d * 2
    assert sum(r[5] for r in rows) == len(calls) * per_call


def test_decode_gemms_counted_once(decode):
    ops = _capture_window_ops()
    gemm = sum(
        2 * a[0] * a[1] * w[0]
        for e in ops
        if e["name"] == "aiter::gemm_a16w16"
        for a, w in [e["args"]["Input Dims"][:2]]
    )
    lm_head = 2 * 32 * 4096 * 151936  # the step's own aten::matmul (hidden [32, 4096])
    matmul = sum(r[4] for r in _rows(decode) if r[1] == "matmul")
    assert matmul == gemm + lm_head


def test_decode_graph_replay_attributed(decode):
    ev = _events(DECODE_FILE)
    launch = next(e["args"]["correlation"] for e in ev if e.get("name") == "hipGraphLaunch")
    replayed = [
        e for e in ev if e.get("cat") == "kernel" and e["args"].get("correlation") == launch
    ]
    note = next(d for d in decode.diagnostics if d.code == "graph_capture")
    assert f"{len(replayed)} kernels" in note.message and len(replayed) == 544
    kernel_ps = sum(
        round(e["dur"] * 1000) for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    assert sum(r[6] for r in _rows(decode)) == pytest.approx(kernel_ps * 1000, rel=1e-9)
    kernel_rows = [r for r in _rows(decode) if r[0].startswith(("Cijk", "void paged"))]
    assert not kernel_rows  # every replayed GEMM/attention kernel has its op


def test_decode_model_records_and_roofline(decode):
    a = analyze([decode], "h")
    recs = {r["step"]: r for r in a.program[True].row_dicts()}
    assert "0 · decode bs 32" in recs and recs["Average · decode"]["record_type"] == "average"
    assert recs["Total"]["flop_coverage"] >= 0.95
    avg = scoped_op_records(a, "Average · decode")
    assert np.nansum(avg.columns["flops"]) == pytest.approx(recs["Total"]["flops"])
    (s,) = a.serving
    bw = a.device.memory("hbm").gbs
    assert s["weight_floor_us"] == pytest.approx(s["matmul_bytes"] / bw / 1e3)
    assert s["ridge_batch"] == pytest.approx(
        32 * s["ridge_flops_per_byte"] / (s["matmul_flops"] / s["matmul_bytes"])
    )
    assert s["ridge_batch"] > 32
    small = [r for r in _rows(decode) if r[1] in ("normalization", "elementwise", "copy")]
    assert s["small_ops_us"] == pytest.approx(sum(r[6] for r in small) / 1e6)
    assert s["small_ops_floor_us"] == pytest.approx(sum(r[5] for r in small) / bw / 1e3)
    codes = [f["code"] for f in s["findings"]]
    assert codes == ["batch_below_ridge", "unfused_small_ops"]  # KV reads are 24%: no finding
    assert s["kv_share"] == pytest.approx(s["attention_bytes"] / s["op_bytes"])
    assert s["kv_share"] < 0.5


def test_only_one_of_the_two_traces(tmp_path):
    shutil.copy(DECODE_FILE, tmp_path / "worker0.pt.trace.json.gz")
    alone = read_kineto_file(str(tmp_path / "worker0.pt.trace.json.gz"), "h")
    note = next(d for d in alone.diagnostics if d.code == "graph_replay_without_capture")
    assert "544 of 544" in note.message and "capture" in note.message
    cap = read_kineto_file(CAPTURE_FILE, "h")
    assert any(d.code == "graph_capture_trace" for d in cap.diagnostics)
    assert any(d.code == "attention_bound" for d in cap.diagnostics)


def test_vllm_step_from_its_annotation():
    data = read_kineto_file(B200, "h")
    (step,) = data.serving_steps
    assert (step["label"], step["tokens"], step["engine"]) == ("0 · prefill bs 1", 888, "vllm")
    note = next(d for d in data.diagnostics if d.code == "attention_bound")
    assert "unified_attention_with_output: 36 calls" in note.message
    rows = [r for r in _rows(data) if r[0] == "vllm::unified_attention_with_output"]
    assert rows and all(r[2] == "none" for r in rows)  # no Σ Sq·Sk: no count, no guess


def test_norms_of_wrappers_and_kernels_counted_once(decode):
    """`sglang_profiler::rmsnorm_…` wraps `aiter::rmsnorm` (and apply_qk_norm wraps two of
    them): the normalization FLOPs are those of the innermost aiter calls, once each."""
    ops = _capture_window_ops()
    expected = 0
    for e in ops:
        dims = e["args"]["Input Dims"]
        if e["name"] == "aiter::rmsnorm":
            expected += 4 * dims[1][0] * dims[1][1]
        elif e["name"] == "aiter::add_rmsnorm":
            expected += 5 * dims[0][0] * dims[0][1]
    got = sum(r[4] for r in _rows(decode) if r[1] == "normalization")
    assert got == expected > 0


# ----------------------------------------------------------------------------- synthetic vLLM

BF = "c10::BFloat16"


# (op, Input Dims, Input type, kernel) of one decoder layer as the B200 vLLM trace records its
# ops (hidden 2880, 8 query heads and 1 KV head of 64 on this rank), at a batch of T tokens
def _layer(t):
    return [
        (
            "_C::rms_norm",
            [[t, 2880], [t, 2880], [2880], []],
            [BF, BF, BF, "Scalar"],
            "rms_norm_kernel",
        ),
        (
            "_C::rotary_embedding",
            [[t], [t, 512], [t, 64], [], [131072, 64], []],
            ["long int", BF, BF, "Scalar", BF, "Scalar"],
            "rotary_embedding_kernel",
        ),
        (
            "vllm::unified_attention_with_output",
            [[t, 8, 64], [t, 1, 64], [t, 1, 64], [t, 8, 64], [], [], []],
            [BF, BF, BF, BF, "", "", ""],
            "kernel_unified_attention_2d",
        ),
        (
            "_C_cache_ops::reshape_and_cache_flash",
            [[t, 1, 64], [t, 1, 64], [4213816, 16, 1, 64], [4213816, 16, 1, 64], [t], [], [], []],
            [BF, BF, BF, BF, "long int", "", "float", "float"],
            "reshape_and_cache_flash_kernel",
        ),
    ]


def _capture_trace(batches, grids=True):
    """A vLLM capture trace: one capture window per batch size, each op launching its kernel."""
    ev, ts, corr, ext = [], 1000.0, 1, 1
    for t in batches:
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaStreamBeginCapture",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": 1,
                "args": {"correlation": corr},
            }
        )
        corr += 1
        ts += 2
        for name, dims, types, kernel in _layer(t) * 2:
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": name,
                    "pid": 1,
                    "tid": 1,
                    "ts": ts,
                    "dur": 10,
                    "args": {"Input Dims": dims, "Input type": types, "External id": ext},
                }
            )
            launch = {"External id": ext, "correlation": corr, "kernel": kernel}
            if grids:
                launch["grid"] = [t, 1, 1]
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": ts + 2,
                    "dur": 3,
                    "args": launch,
                }
            )
            ts, corr, ext = ts + 12, corr + 1, ext + 1
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaStreamEndCapture",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": 1,
                "args": {"correlation": corr},
            }
        )
        ts, corr = ts + 100, corr + 1
    return {"traceEvents": ev}


def _execution_trace(t, grids=False):
    """A vLLM decode step of batch t replaying the graph captured for it."""
    ev = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"execute_context_0(0)_generation_{t}({t})",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 500,
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaGraphLaunch",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 20,
            "args": {"correlation": 7},
        },
    ]
    ts = 40.0
    for _, _, _, kernel in _layer(t) * 2:
        args = {"correlation": 7, "device": 0, "stream": 7}
        if grids:
            args["grid"] = [t, 1, 1]
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": kernel,
                "pid": 0,
                "tid": 7,
                "ts": ts,
                "dur": 5,
                "args": args,
            }
        )
        ts += 6
    return {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA B200"}]}


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump(obj, f)


def test_vllm_decode_graph_replay_with_its_capture(tmp_path):
    _write(tmp_path / "w.pt.trace.json.gz", _execution_trace(32))
    _write(
        tmp_path / "capture_traces" / "graph_capture_rank_0.pt.trace.json.gz", _capture_trace([32])
    )
    data = read_kineto_file(str(tmp_path / "w.pt.trace.json.gz"), "h")
    assert any(d.code == "graph_capture" and "8 kernels" in d.message for d in data.diagnostics)
    rows = {r[0]: r for r in _rows(data)}
    assert rows["_C::rms_norm"][3] == 2
    assert rows["_C::rms_norm"][4] == 2 * 4 * 32 * 2880  # as _C::rms_norm's formula
    kv = rows["_C_cache_ops::reshape_and_cache_flash"]
    assert kv[5] == 2 * (4 * 32 * 64 * 2 + 32 * 8)  # k, v read and written; slots read
    assert rows["vllm::unified_attention_with_output"][2] == "none"  # no Σ Sq·Sk from vLLM
    (step,) = data.serving_steps
    assert step["label"] == "0 · decode bs 32"


def test_capture_windows_of_several_batches(tmp_path):
    """Two windows launch the same kernels with other shapes: grids decide; without them
    nothing is guessed."""
    _write(tmp_path / "a" / "w.pt.trace.json.gz", _execution_trace(16, grids=True))
    _write(tmp_path / "a" / "capture_traces" / "c.pt.trace.json.gz", _capture_trace([8, 16]))
    data = read_kineto_file(str(tmp_path / "a" / "w.pt.trace.json.gz"), "h")
    rows = {r[0]: r for r in _rows(data)}
    assert rows["_C::rms_norm"][4] == 2 * 4 * 16 * 2880  # the batch-16 window's shapes
    _write(tmp_path / "b" / "w.pt.trace.json.gz", _execution_trace(16))
    _write(
        tmp_path / "b" / "capture_traces" / "c.pt.trace.json.gz",
        _capture_trace([8, 16], grids=False),
    )
    data = read_kineto_file(str(tmp_path / "b" / "w.pt.trace.json.gz"), "h")
    note = next(d for d in data.diagnostics if d.code == "graph_replay_without_capture")
    assert "8 of 8" in note.message and "several did" in note.message
    # the tie is named: both buckets' first ops, none picked
    tie = next(d for d in data.diagnostics if d.code == "graph_capture_tie")
    assert tie.message.startswith("8 replayed kernels match 2 capture windows")
    assert "[[8, 2880]" in tie.message and "[[16, 2880]" in tie.message
    assert "none was picked" in tie.message
    decided = read_kineto_file(str(tmp_path / "a" / "w.pt.trace.json.gz"), "h")
    assert not any(d.code == "graph_capture_tie" for d in decided.diagnostics)


def test_serving_steps_inside_profiler_steps(tmp_path):
    """With ProfilerStep markers the serving step takes the id of the one it starts in; one
    outside every ProfilerStep keeps its facts but is no step's."""
    ev = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#134",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100,
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "step[DECODE bs=32]",
            "pid": 1,
            "tid": 1,
            "ts": 5,
            "dur": 50,
        },
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "step[EXTEND bs=2 toks=100]",
            "pid": 1,
            "tid": 1,
            "ts": 500,
            "dur": 50,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 5,
            "args": {"Input Dims": [[4], [4], []], "Input type": ["float", "float", "Scalar"]},
        },
    ]
    _write(tmp_path / "w.pt.trace.json.gz", {"traceEvents": ev})
    data = read_kineto_file(str(tmp_path / "w.pt.trace.json.gz"), "h")
    labels = [s["label"] for s in data.serving_steps]
    assert labels == ["134 · decode bs 32", "-1 · prefill bs 2"]
    a = analyze([data], "h")
    steps = [r["step"] for r in a.program[True].row_dicts() if r["record_type"] == "step"]
    assert steps == ["134 · decode bs 32"]
    assert [s["step"] for s in a.serving] == [134, -1]


def test_annotation_parser_never_raises():
    """Names cut short, with huge or missing numbers, or other text: facts or None, never an
    exception (the reader parses every user annotation)."""
    import random

    rng = random.Random(33)
    good = (
        "execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)_generation_0("
        "sq0sk0sqsq0sqsk0)"
    )
    pieces = [good, "step[DECODE bs=32]", "execute_context_1(888_788544)_generation_0(0)"]
    for _ in range(3000):
        base = rng.choice(pieces)
        cut = rng.randrange(len(base) + 1)
        name = (
            base[:cut]
            + rng.choice(["", "9" * 40, ")", "(", "_", "x", " bs=1]"])
            + base[cut + rng.randrange(3) :]
        )
        facts = serving_steps.parse(name)
        assert facts is None or facts.phase in ("prefill", "decode", "mixed", "idle") or facts.mode


MI300X_CAPTURE = os.path.join(
    HERE,
    "..",
    "testdata",
    "kineto",
    "mi300x_vllm_graph_capture",
    "worker0.1773709679453.pt.trace.json.gz",
)


def test_vllm_capture_trace_alone():
    """A vLLM graph capture trace read on its own says what it is; its wrapped custom ops
    (vLLM's ROCm wrappers around aiter ops) cost the same at every level, so whichever is the
    row, a call counts once with the same numbers."""
    from tb_roofline.costs.torch import custom_ops as torch_custom_ops

    data = read_kineto_file(MI300X_CAPTURE, "h")
    assert any(d.code == "graph_capture_trace" for d in data.diagnostics)
    ev = [e for e in _events(MI300X_CAPTURE) if e.get("cat") == "cpu_op"]
    pairs = [
        ("vllm::rocm_aiter_rmsnorm2d_fwd_with_add", "aiter::rmsnorm2d_fwd_with_add_ck"),
        ("vllm::rocm_aiter_rms_norm", "aiter::rms_norm"),
    ]
    for outer, inner in pairs:
        o = next(e for e in ev if e["name"] == outer)
        i = next(e for e in ev if e["name"] == inner and o["ts"] <= e["ts"] <= o["ts"] + o["dur"])
        co, ci = (torch_custom_ops.op_cost(e["name"], e["args"]) for e in (o, i))
        assert (co.flops, co.bytes) == (ci.flops, ci.bytes) and co.flops > 0
    x = next(e for e in ev if e["name"] == "aiter::rmsnorm2d_fwd_with_add_ck")["args"]
    t, h = x["Input Dims"][0]
    fused = torch_custom_ops.op_cost("aiter::rmsnorm2d_fwd_with_add_ck", x)
    assert (fused.flops, fused.bytes) == (5 * t * h, 4 * t * h * 2 + h * 2)
    g = next(e for e in ev if e["name"] == "vllm::rocm_unquantized_gemm")["args"]
    (m, k), (n, _) = g["Input Dims"][:2]
    gemm = torch_custom_ops.op_cost("vllm::rocm_unquantized_gemm", g)  # not a quant op
    assert (gemm.category, gemm.flops) == ("matmul", 2 * m * n * k)
    assert gemm.bytes == (m * k + n * k + m * n + n) * 2  # A, W, bias read; out written


def test_an_average_per_phase(tmp_path):
    """Two decode steps and a prefill (no ProfilerStep markers): three step records labelled
    by phase, `Average · decode` over the two decode steps only, tokens/s per step."""
    ev, corr = [], 1
    for i, (name, t) in enumerate(
        [
            ("execute_64_context_1(sq64sk64sqsq4096sqsk4096)_generation_0(sq0sk0sqsq0sqsk0)", 64),
            ("execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk260sqsq4sqsk260)", 4),
            ("execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk264sqsq4sqsk264)", 4),
        ]
    ):
        base = 1000.0 * i
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": base,
                "dur": 500,
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aiter::mha_batch_prefill",
                "pid": 1,
                "tid": 1,
                "ts": base + 10,
                "dur": 50,
                "args": {
                    "Input Dims": [[t, 4, 64], [1000, 1, 64], [1000, 1, 64]],
                    "Input type": ["c10::Half"] * 3,
                    "External id": corr,
                },
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": base + 20,
                "dur": 5,
                "args": {"correlation": corr, "External id": corr},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "fmha_fwd_kernel",
                "pid": 0,
                "tid": 7,
                "ts": base + 30,
                "dur": 100 * (i + 1),
                "args": {"correlation": corr, "device": 0},
            }
        )
        corr += 1
    _write(
        tmp_path / "w.pt.trace.json.gz",
        {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]},
    )
    data = read_kineto_file(str(tmp_path / "w.pt.trace.json.gz"), "h")
    a = analyze([data], "h")
    recs = {r["step"]: r for r in a.program[True].row_dicts()}
    assert {
        "0 · prefill bs 1",
        "1 · decode bs 4",
        "2 · decode bs 4",
        "Average · decode",
        "Average · prefill",
    } <= set(recs)
    per_call = {0: 4 * 4 * 64 * 4096, 1: 4 * 4 * 64 * 260, 2: 4 * 4 * 64 * 264}
    assert recs["Average · decode"]["flops"] == (per_call[1] + per_call[2]) / 2
    assert recs["Average · prefill"]["flops"] == per_call[0]
    assert recs["Average"]["flops"] == sum(per_call.values()) / 3
    dec = scoped_op_records(a, "Average · decode")
    assert np.nansum(dec.columns["flops"]) == (per_call[1] + per_call[2]) / 2
    assert dec.columns["total_time_us"].sum() == pytest.approx((200 + 300) / 2)  # µs
    steps = {s["label"]: s for s in a.serving}
    assert steps["1 · decode bs 4"]["tokens_per_s_busy"] == pytest.approx(4 / 200e-6)


def test_capture_files_of_this_rank(tmp_path):
    from tb_roofline.readers.kineto.capture import capture_files

    d = tmp_path / "capture_traces"
    d.mkdir()
    for name in (
        "graph_capture_rank_0.1.pt.trace.json.gz",
        "graph_capture_rank_1.1.pt.trace.json.gz",
        "graph_capture_rank_10.1.pt.trace.json.gz",
        "execution_details.json",
    ):
        (d / name).write_text("{}")
    exec_file = str(tmp_path / "w.pt.trace.json.gz")
    assert [os.path.basename(f) for f in capture_files(exec_file, 1)] == [
        "graph_capture_rank_1.1.pt.trace.json.gz"
    ]
    assert len(capture_files(exec_file, None)) == 3  # rank unknown: all of them
    assert len(capture_files(exec_file, 7)) == 3  # none named for this rank: all of them


def _sglang_prefill_trace(layers=2):
    """An SGLang EXTEND step of Qwen3-8B as the issue records it (15 sequences of 1,024 tokens):
    per layer a GEMM (`aiter::gemm_a16w16` with the `aten::mm` it calls nested inside), a fused
    add-RMSNorm inside SGLang's profiler wrapper, and `aiter::mha_batch_prefill`; each innermost
    op launches one kernel."""
    t, bf = 15360, "c10::BFloat16"
    ev, corr = [], [0]

    def op(name, ts, dur, dims, types, concrete=None, kernel=None):
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": {
                    "Input Dims": dims,
                    "Input type": types,
                    "Concrete Inputs": concrete or [""] * len(dims),
                },
            }
        )
        if kernel:
            corr[0] += 1
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": ts + 1,
                    "dur": 1,
                    "args": {"correlation": corr[0]},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": kernel,
                    "pid": 0,
                    "tid": 7,
                    "ts": 10 * corr[0] + 5000,
                    "dur": 8,
                    "args": {"correlation": corr[0], "device": 0},
                }
            )

    ev.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "step[EXTEND bs=15 toks=15360]",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 4000,
        }
    )
    ev.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": (
                "execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)_generation_0("
                "sq0sk0sqsq0sqsk0)"
            ),
            "pid": 1,
            "tid": 1,
            "ts": 1,
            "dur": 3998,
        }
    )
    for layer in range(layers):
        base = 10 + 1000 * layer
        op(
            "aiter::gemm_a16w16",
            base,
            20,
            [[t, 4096], [6144, 4096], [], []],
            [bf, bf, "", "Scalar"],
        )
        op(
            "aten::mm",
            base + 2,
            10,
            [[t, 4096], [4096, 6144]],
            [bf, bf],
            kernel="Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x1",
        )
        op(
            "sglang_profiler::rmsnorm_rmsnorm2d_fwd_with_add_110",
            base + 100,
            30,
            [[t, 4096]] * 4 + [[4096]],
            [bf] * 5,
        )
        op(
            "aiter::add_rmsnorm",
            base + 105,
            10,
            [[t, 4096]] * 4 + [[4096], []],
            [bf] * 5 + ["Scalar"],
            kernel="add_rmsnorm_quant_kernel",
        )
        op(
            "aiter::mha_batch_prefill",
            base + 200,
            30,
            [[t, 32, 128], [835874, 8, 128], [835874, 8, 128], [16], [16], [t], [], [], [], []],
            [bf, bf, bf, "int", "int", "int", "Scalar", "Scalar", "Scalar", "Scalar"],
            ["", "", "", "", "", "", "1024", "1024", "0.088", "True"],
            kernel="mha_batch_prefill_kernel",
        )
    return {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X"}]}


def test_sglang_prefill_step_of_the_issue(tmp_path):
    _write(tmp_path / "p.pt.trace.json.gz", _sglang_prefill_trace())
    data = read_kineto_file(str(tmp_path / "p.pt.trace.json.gz"), "h")
    (step,) = data.serving_steps
    assert (step["label"], step["mode"], step["tokens"]) == ("0 · prefill bs 15", "EXTEND", 15360)
    rows = {r[0]: r for r in _rows(data)}
    att = rows["aiter::mha_batch_prefill"]
    assert att[3] == 2 and att[4] == 2 * 2.5769803776e11  # 4·32·128·15,728,640 a call
    gemm = rows["aiter::gemm_a16w16"]
    assert gemm[4] == 2 * 2 * 15360 * 4096 * 6144 and "aten::mm" not in rows  # once, not twice
    norm = rows["sglang_profiler::rmsnorm_rmsnorm2d_fwd_with_add_110"]
    assert norm[4] == 2 * 5 * 15360 * 4096 and "aiter::add_rmsnorm" not in rows
    a = analyze([data], "h")
    total = next(r for r in a.program[True].row_dicts() if r["record_type"] == "total")
    assert total["flop_coverage"] >= 0.95
    assert total["flops"] == att[4] + gemm[4] + norm[4]


def test_capture_batch_label_checked_against_the_replaying_steps(tmp_path):
    """SGLang can label a capture trace with the wrong batch size (one bucket capturing two
    graphs): the label is checked against the batch of the steps that replay the graph, and
    the shapes recorded at capture are said to be what was used."""
    shutil.copytree(DECODE, tmp_path / "run")
    data = read_kineto_file(str(tmp_path / "run" / "worker0.pt.trace.json.gz"), "h")
    assert not any(d.code == "capture_batch_label" for d in data.diagnostics)  # 32 and bs=32
    details = tmp_path / "run" / "capture" / "execution_details.json"
    entries = json.loads(details.read_text())
    entries[0]["batch_size"] = 16
    details.write_text(json.dumps(entries))
    data = read_kineto_file(str(tmp_path / "run" / "worker0.pt.trace.json.gz"), "h")
    note = next(d for d in data.diagnostics if d.code == "capture_batch_label")
    assert "labelled batch 16" in note.message and "run batch 32" in note.message
    assert "shapes recorded at capture were used" in note.message
    assert any(d.code == "graph_capture" and "544 kernels" in d.message for d in data.diagnostics)
