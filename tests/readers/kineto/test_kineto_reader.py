"""The Kineto (PyTorch profiler) reader on real traces, on captured traces cross-checked with
FlopCounterMode, and on broken files. References are computed here from the raw JSON."""

import glob
import gzip
import json
import os
import time

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.model.records.roofline import analyze
from tb_roofline.readers import kineto
from tb_roofline.readers.common import innermost_enclosing, op_nesting
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.readers.kineto.event_fields import exact_ns

ROOT = os.path.join(TESTS, "..", "testdata")
REAL = os.path.join(ROOT, "kineto")
CAPTURED = os.path.join(ROOT, "kineto_captured")


def real(name):
    return glob.glob(os.path.join(REAL, name, "*.pt.trace.json.gz"))[0]


def raw_events(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def x_events(doc, cat):
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat]


# ---------------------------------------------------------------- independent hand formulas


def hand_matmul(name, dims):
    if name == "aten::linear":
        x, w = dims[0], dims[1]
        return 2 * int(np.prod(x[:-1])) * x[-1] * w[0]
    if name == "aten::addmm":
        (m, k), (_, n) = dims[1], dims[2]
        return 2 * m * k * n
    if name == "aten::mm":
        (m, k), (_, n) = dims[0], dims[1]
        return 2 * m * k * n
    raise AssertionError(name)


def hand_conv(name, args):
    dims, conc = args["Input Dims"], args["Concrete Inputs"]
    if name == "aten::conv2d":
        x, w = dims[0], dims[1]
        stride, pad, dil = (json.loads(conc[i]) for i in (3, 4, 5))
        out = [
            (x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(2)
        ]
        return 2 * x[0] * out[0] * out[1] * w[2] * w[3] * w[1] * w[0]
    if name == "aten::convolution_backward":
        g, w = dims[0], dims[2]
        mask = [m == "True" for m in conc[10].strip("[]").split(", ")]
        one = 2 * g[0] * g[2] * g[3] * w[2] * w[3] * w[1] * w[0]
        return one * (mask[0] + mask[1])
    raise AssertionError(name)


def outermost(ops, names):
    """Ops named in `names` not nested inside another such op on the same thread."""
    sel = [e for e in ops if e["name"] in names]
    out = []
    for e in sel:
        nested = any(
            o is not e
            and o["tid"] == e["tid"]
            and o["ts"] <= e["ts"]
            and o["ts"] + o["dur"] >= e["ts"] + e["dur"]
            and (o["ts"], -o["dur"]) < (e["ts"], -e["dur"])
            for o in sel
        )
        if not nested:
            out.append(e)
    return out


# ---------------------------------------------------------------- real traces


def test_cpu_convnet_matmul_and_conv_flops_equal_hand_formulas():
    path = real("cpu_convnet")
    doc = raw_events(path)
    ops = x_events(doc, "cpu_op")
    data = read_kineto_file(path, "vm")
    t = data.ops
    assert data.device.kind == "cpu"
    for family, names, fn in (
        (
            "matmul",
            {"aten::linear", "aten::addmm", "aten::mm"},
            lambda e: hand_matmul(e["name"], e["args"]["Input Dims"]),
        ),
        (
            "convolution",
            {"aten::conv2d", "aten::convolution_backward"},
            lambda e: hand_conv(e["name"], e["args"]),
        ),
    ):
        expected = {}
        for e in outermost(ops, names):
            expected[e["name"]] = expected.get(e["name"], 0) + fn(e)
        got = {}
        for op, cat, fl in zip(t["operation"], t["category"], t["flops"]):
            if cat == family:
                got[op] = got.get(op, 0) + fl
        assert got == expected and expected
    assert set(t["flops_source"]) == {"formula", "none"}
    assert set(t["precision"][t["flops_source"] == "formula"]) == {"f32"}


def test_cpu_convnet_steps_time_partition_and_model():
    path = real("cpu_convnet")
    doc = raw_events(path)
    data = read_kineto_file(path, "vm")
    steps = sorted(
        int(e["name"].split("#")[1])
        for e in x_events(doc, "user_annotation")
        if e["name"].startswith("ProfilerStep#")
    )
    assert [s.step for s in data.steps] == steps == [2, 3, 4]
    ops = x_events(doc, "cpu_op")
    # Row times partition the CPU time of the top-level ops: nothing counted twice.
    tops = 0.0
    for e in ops:
        if not any(
            o is not e
            and o["tid"] == e["tid"]
            and o["ts"] <= e["ts"]
            and o["ts"] + o["dur"] >= e["ts"] + e["dur"]
            and o["dur"] > e["dur"]
            for o in ops
        ):
            tops += e["dur"]
    assert data.ops["total_time_ps"].sum() == pytest.approx(tops * 1e6, rel=1e-9)
    a = analyze([data])
    assert a.num_steps == 3
    total = a.program[True].row_dicts()[0]
    assert total["flops"] == pytest.approx(data.ops["flops"].sum())


def test_a100_80gb_kernels_counted_once_and_matmul_flops():
    path = real("a100_80gb_shapes")
    doc = raw_events(path)
    data = read_kineto_file(path, "rank0")
    t = data.ops
    kernels = x_events(doc, "kernel")
    kernel_rows = ~np.isin(t["category"], ["memcpy", "memset"])
    # Every kernel's time lands in exactly one row.
    assert t["total_time_ps"][kernel_rows].sum() == pytest.approx(
        sum(k["dur"] for k in kernels) * 1e6
    )
    assert data.kernels["total_time_ps"].sum() == pytest.approx(
        sum(e["dur"] for e in doc["traceEvents"] if e.get("cat") in kineto.GPU_CATEGORIES) * 1e6
    )
    # Matmul FLOPs: outermost matmul-family ops, by hand.
    ops = x_events(doc, "cpu_op")
    expected = sum(
        hand_matmul(e["name"], e["args"]["Input Dims"])
        for e in outermost(ops, {"aten::linear", "aten::addmm", "aten::mm"})
    )
    assert t["flops"][t["category"] == "matmul"].sum() == expected > 0
    assert data.kernels["flops"].sum() == pytest.approx(t["flops"].sum())
    # Steps: ProfilerStep#550..554 on device 0.
    assert [(s.core, s.step) for s in data.steps] == [(0, s) for s in range(550, 555)]
    assert data.rank == 0 and data.world_size == 16
    assert data.device.kind == "gpu" and data.device.type == "NVIDIA A100-SXM4-80GB"
    assert analyze([data]).num_steps == 5


def test_memcpy_rows_carry_measured_bandwidth():
    path = real("a100_alexnet")
    doc = raw_events(path)
    data = read_kineto_file(path, "w0")
    t = data.ops
    copies = x_events(doc, "gpu_memcpy")
    m = t["category"] == "memcpy"
    host = np.array(["HtoD" in n or "DtoH" in n for n in t["operation"][m]])
    # `bytes` are the bytes accessed: a device copy of N bytes (the trace's figure) reads N
    # and writes N of HBM, so its bytes are 2N, its HBM bytes; a host copy moves N.
    moved = {True: 0, False: 0}
    for e in copies:
        moved["HtoD" in e["name"] or "DtoH" in e["name"]] += e["args"]["bytes"]
    assert t["bytes"][m][host].sum() == moved[True]
    assert t["bytes"][m][~host].sum() == 2 * moved[False]
    # Host copies cross the host link, never HBM; device copies read and write HBM.
    assert host.any()
    assert (t["host_bytes"][m][host] == t["bytes"][m][host]).all()
    assert (t["hbm_bytes"][m][host] == 0).all()
    assert set(t["caveat"][m][host]) == {"host_transfer"}
    assert (t["hbm_bytes"][m][~host] == t["bytes"][m][~host]).all()
    for c in ("hbm_bytes", "host_bytes"):  # one convention: bytes never below a memory's
        assert (t["bytes"] >= t[c]).all() and (data.kernels["bytes"] >= data.kernels[c]).all()
    assert t["total_time_ps"][m].sum() == pytest.approx(sum(e["dur"] for e in copies) * 1e6)
    # One memcpy alone: bytes / time is the trace's own "memory bandwidth (GB/s)".
    k = data.kernels
    first = copies[0]
    rows = [
        i for i in range(len(k)) if k["operation"][i] == first["name"] and k["occurrences"][i] == 1
    ]
    if rows:
        i = rows[0]
        assert k["bytes"][i] / (k["total_time_ps"][i] / 1e3) > 0
    one = [e for e in copies if e["dur"] > 0][0]
    assert one["args"]["bytes"] / (one["dur"] * 1e3) == pytest.approx(
        one["args"]["memory bandwidth (GB/s)"], rel=1e-6
    )


def test_device_copies_count_their_read_and_write():
    """A DtoD copy of N bytes (the trace's figure) accesses 2N bytes of HBM: its `bytes` and
    `hbm_bytes` are both 2N, so a program's bytes are never below its HBM bytes."""
    path = real("a100_80gb_shapes")
    doc = raw_events(path)
    dtod = [e for e in x_events(doc, "gpu_memcpy") if "DtoD" in e["name"]]
    assert dtod
    data = read_kineto_file(path, "rank0")
    t = data.ops
    m = np.array(["DtoD" in str(n) for n in t["operation"]])
    assert (
        t["bytes"][m].sum() == t["hbm_bytes"][m].sum() == 2 * sum(e["args"]["bytes"] for e in dtod)
    )
    total = analyze([data]).program[True].row_dicts()[0]
    assert total["bytes"] >= total["hbm_bytes"]


def test_cupti_hw_flops_equal_metric_sums():
    path = real("a100_cupti_counters")
    doc = raw_events(path)
    ranges = x_events(doc, "cuda_profiler_range")
    data = read_kineto_file(path, "w0")
    hw = data.hw_counters
    assert data.has_hw_counters and hw is not None
    pre = "smsp__sass_thread_inst_executed_op_"
    for letter, prec in (("d", "f64"), ("f", "f32"), ("h", "f16")):
        s = {
            op: sum(r["args"][f"{pre}{letter}{op}_pred_on.sum"] for r in ranges)
            for op in ("add", "mul", "fma")
        }
        assert hw.flops[prec] == s["add"] + s["mul"] + 2 * s["fma"]
        for op in ("add", "mul", "fma"):
            assert hw.metric_sums[f"{pre}{letter}{op}_pred_on.sum"] == s[op]
    assert hw.flops["f32"] > 0 and len(hw.kernels) == len(ranges) == 77
    assert data.hw_ops["flops"].sum() == pytest.approx(hw.total_flops)
    assert set(data.hw_ops["flops_source"]) == {"counter"}
    # ranges are matched to the 77 launches in order; conv kernels belong to aten::conv2d
    assert hw.matched_to_ops
    conv = [k for k in hw.kernels if "convolve" in k["name"] or "fprop" in k["name"]]
    assert conv and all(k["op"] == "aten::conv2d" for k in conv)
    assert "tensor-core" in hw.note
    assert any(d.code == "no_kernel_timing" for d in data.diagnostics)


def test_mi250_trace():
    path = real("mi250")
    doc = raw_events(path)
    data = read_kineto_file(path, "w0")
    kernels = x_events(doc, "kernel")
    t = data.ops
    kernel_rows = ~np.isin(t["category"], ["memcpy", "memset"])
    assert t["total_time_ps"][kernel_rows].sum() == pytest.approx(
        sum(k["dur"] for k in kernels) * 1e6
    )
    devices = {k["args"]["device"] for k in kernels}
    assert {s.core for s in data.core_spans} == devices
    ops = x_events(doc, "cpu_op")
    expected = sum(
        hand_matmul(e["name"], e["args"]["Input Dims"])
        for e in outermost(ops, {"aten::linear", "aten::addmm", "aten::mm"})
    )
    assert t["flops"][t["category"] == "matmul"].sum() == expected > 0


def test_nested_ops_do_not_double_count_kernels(tmp_path):
    # linear > addmm launches one kernel; mm launches one; an outer non-formula op wraps both.
    ev = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::dropout",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100,
            "args": {"External id": 1},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::linear",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 40,
            "args": {
                "External id": 2,
                "Input Dims": [[4, 8], [16, 8], []],
                "Input type": ["float", "float", ""],
            },
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::addmm",
            "pid": 1,
            "tid": 1,
            "ts": 12,
            "dur": 30,
            "args": {
                "External id": 3,
                "Input Dims": [[16], [4, 8], [8, 16]],
                "Input type": ["float", "float", "float"],
            },
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 20,
            "dur": 5,
            "args": {"External id": 3, "correlation": 100},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 60,
            "dur": 5,
            "args": {"External id": 1, "correlation": 101},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 30,
            "dur": 7,
            "args": {"External id": 3, "correlation": 100, "device": 0},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "mask",
            "pid": 0,
            "tid": 7,
            "ts": 70,
            "dur": 3,
            "args": {"External id": 1, "correlation": 101, "device": 0},
        },
    ]
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "G"}]}))
    data = read_kineto_file(str(path), "w")
    rows = {
        op: (f, tp)
        for op, f, tp in zip(data.ops["operation"], data.ops["flops"], data.ops["total_time_ps"])
    }
    assert rows == {"aten::linear": (2 * 4 * 8 * 16, 7e6), "aten::dropout": (0.0, 3e6)}


# ------------------------------------------------------------ captured traces vs FlopCounterMode

EXPECTED = json.load(open(os.path.join(CAPTURED, "expected_flops.json")))["cases"]
PRODUCT_FAMILIES = ["matmul", "convolution", "attention"]


def captured(case):
    paths = glob.glob(os.path.join(CAPTURED, f"{case}.*.pt.trace.json.gz"))
    assert len(paths) == 1, case
    return read_kineto_file(paths[0], case)


def product_flops(data):
    t = data.ops
    return t["flops"][np.isin(t["category"], PRODUCT_FAMILIES)].sum()


# FlopCounterMode does not count matrix-vector products, and counts grouped-convolution weight
# gradients `groups` times (docs/pytorch_traces.md): those two are checked by hand below.
DIFFERENT = {"matmul_vector", "mv", "addmv", "conv2d_groups_backward", "sdpa_flash_backward"}


@pytest.mark.parametrize("case", sorted(c for c in EXPECTED if c not in DIFFERENT))
def test_captured_trace_matches_flop_counter_mode(case):
    ref = EXPECTED[case].get("flop_counter_math_backend", EXPECTED[case]["flop_counter"])["total"]
    assert product_flops(captured(case)) == ref


def test_fused_attention_backward_counts_the_recomputed_scores():
    """The CPU flash backward is one fused op that torch's counter does not register on CPU (0);
    with the math backend it counts the autograd bmms, four (dS, dV, dQ, dK). A fused backward
    kernel recomputes the scores first, and torch's registered formula for the fused ops
    (sdpa_backward_flop_count) counts that fifth product: our count is the math backend's plus
    Q·Kᵀ, a quarter of it here (equal head dims), i.e. 2.5× the forward."""
    case = EXPECTED["sdpa_flash_backward"]
    assert case["flop_counter"]["total"] == 0
    four = case["flop_counter_math_backend"]["total"]
    assert product_flops(captured("sdpa_flash_backward")) == four + four // 4


def test_captured_differences_from_flop_counter_mode():
    for case in ("matmul_vector", "mv", "addmv"):  # A [24, 40] @ x [40]
        assert EXPECTED[case]["flop_counter"]["total"] == 0
        assert product_flops(captured(case)) == 2 * 24 * 40
    data = captured("conv2d_groups_backward")
    fwd = 2 * 2 * 15 * 13 * 9 * 2 * 6  # x [2,4,17,15], w [6,2,3,3], groups 2
    assert product_flops(data) == 2 * fwd
    assert EXPECTED["conv2d_groups_backward"]["flop_counter"]["total"] == 3 * fwd


def test_captured_cover_the_formula_table():
    seen = {}
    for case in EXPECTED:
        t = captured(case).ops
        for op, src in zip(t["operation"], t["flops_source"]):
            if src == "formula":
                seen.setdefault(op, case)
    for op in (
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::matmul",
        "aten::linear",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::conv_transpose1d",
        "aten::conv_transpose2d",
        "aten::convolution_backward",
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
        "aten::add",
        "aten::add_",
        "aten::relu",
        "aten::sum",
        "aten::mean",
        "aten::softmax",
        "aten::layer_norm",
        "aten::batch_norm",
        "aten::embedding",
        "aten::clone",
        "aten::_to_copy",
        "aten::cat",
    ):
        assert op in seen, op


def test_captured_elementwise_and_copies_by_hand():
    t = captured("add").ops
    assert (
        t["flops"][t["operation"] == "aten::add"],
        t["bytes"][t["operation"] == "aten::add"],
    ) == (512, 3 * 512 * 4)
    t = captured("copy_to_bf16").ops
    m = t["operation"] == "aten::_to_copy"
    assert t["bytes"][m][0] == 512 * 4 + 512 * 2 and t["precision"][m][0] == "f32"
    t = captured("mm_bf16").ops
    assert set(t["precision"][t["operation"] == "aten::mm"]) == {"bf16"}


# ---------------------------------------------------------------- file handling


def test_plain_json_and_compact_json_read_the_same(tmp_path):
    doc = raw_events(real("mi250"))
    a = tmp_path / "pretty.pt.trace.json"
    a.write_text(json.dumps(doc, indent=2))
    b = tmp_path / "compact.pt.trace.json"
    b.write_text(json.dumps(doc, separators=(",", ":")))
    ref = read_kineto_file(real("mi250"), "h").ops
    for p in (a, b):
        t = read_kineto_file(str(p), "h").ops
        for col in ("operation", "flops", "bytes", "total_time_ps", "step", "core"):
            assert list(t[col]) == list(ref[col]), col


def test_small_chunks_and_tricky_strings(tmp_path, monkeypatch):
    doc = raw_events(real("cpu_convnet"))
    # A name holding "}," and brackets must not confuse the batch boundaries.
    doc["traceEvents"].insert(
        0,
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": 'x},{"a": ]"',
            "pid": 1,
            "tid": 1,
            "ts": 1,
            "dur": 1,
            "args": {},
        },
    )
    p = tmp_path / "t.pt.trace.json"
    p.write_text(json.dumps(doc, indent=1))
    ref = read_kineto_file(str(p), "h").ops
    monkeypatch.setattr(kineto, "CHUNK_CHARS", 97)
    t = read_kineto_file(str(p), "h").ops
    for col in ("operation", "flops", "total_time_ps", "step"):
        assert list(t[col]) == list(ref[col])


def _old(path):
    past = time.time() - 3600
    os.utime(path, (past, past))


def test_truncated_files(tmp_path):
    data = gzip.decompress(open(real("mi250"), "rb").read())
    p = tmp_path / "cut.pt.trace.json"
    p.write_bytes(data[: len(data) // 2])
    from writer import being_written

    with being_written(p), pytest.raises(ProfileIncompleteError):  # growing: being written
        read_kineto_file(str(p), "h")
    with pytest.raises(ProfileFormatError) as exc:  # just written, not growing: damaged
        read_kineto_file(str(p), "h")
    assert not isinstance(exc.value, ProfileIncompleteError)
    _old(p)
    with pytest.raises(ProfileFormatError) as exc:
        read_kineto_file(str(p), "h")
    assert not isinstance(exc.value, ProfileIncompleteError)
    g = tmp_path / "cut.pt.trace.json.gz"
    g.write_bytes(gzip.compress(data)[:-100])
    _old(g)
    with pytest.raises(ProfileFormatError, match="truncated"):
        read_kineto_file(str(g), "h")


@pytest.mark.parametrize(
    "content,match",
    [
        (b"", "empty"),
        (b"not json at all", "expected"),
        (b'{"schemaVersion": 1}', "traceEvents"),
        (b'{"traceEvents": [1, 2,, 3]}', "JSON"),
        (b"\x1f\x8b\x08garbage", None),
    ],
)
def test_corrupt_files(tmp_path, content, match):
    name = "bad.pt.trace.json.gz" if content.startswith(b"\x1f\x8b") else "bad.pt.trace.json"
    p = tmp_path / name
    p.write_bytes(content)
    _old(p)
    with pytest.raises(ProfileFormatError, match=match):
        read_kineto_file(str(p), "h")


def test_too_large(tmp_path):
    with pytest.raises(ProfileTooLargeError):
        read_kineto_file(real("mi250"), "h", max_bytes=1000)


def test_progress_is_reported():
    calls = []
    read_kineto_file(real("a100_80gb_shapes"), "h", progress=lambda d, t: calls.append((d, t)))
    assert calls[0] == (0, 1) and calls[-1] == (1, 1) and len(calls) > 3


# ---------------------------------------------------------------- malformed events and fields


def _doc_file(tmp_path, doc, name="t"):
    p = tmp_path / f"{name}.pt.trace.json"
    p.write_text(json.dumps(doc))  # writes NaN / Infinity, which Python's json reads back
    _old(p)
    return str(p)


def _summary(data):
    """Everything a trace yields, except the bad-event count."""
    from tb_roofline.table.op_table import ALL_COLUMNS

    return (
        {k: data.ops[k].tolist() for k in ALL_COLUMNS},
        {k: data.kernels[k].tolist() for k in ALL_COLUMNS},
        data.steps,
        data.core_spans,
        data.device.type,
        [d for d in data.diagnostics if d.code != "bad_events"],
    )


def _bad_events(data):
    return [d for d in data.diagnostics if d.code == "bad_events"]


MUTATIONS = {
    "no_ts": lambda e: e.pop("ts"),
    "str_ts": lambda e: e.update(ts=str(e["ts"])),
    "bool_ts": lambda e: e.update(ts=True),
    "nan_ts": lambda e: e.update(ts=float("nan")),
    "str_dur": lambda e: e.update(dur="5"),
    "inf_dur": lambda e: e.update(dur=float("inf")),
    "int_name": lambda e: e.update(name=5),
    "args_list": lambda e: e.update(args=[1]),
    "list_tid": lambda e: e.update(tid=[1]),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "cat,mutation",
    [
        (c, m)
        for c in ("cuda_runtime", "cpu_op", "kernel", "gpu_memcpy")
        for m in sorted(MUTATIONS)
        if m != "list_tid" or c in ("cuda_runtime", "cpu_op")
    ],
)  # GPU events ignore their thread
def test_one_bad_event_is_skipped_whole(tmp_path, cat, mutation):
    """A malformed event in the middle of a real trace reads exactly as if it were absent (no
    column of the collector shifts), and is counted in the bad_events diagnostic."""
    doc = raw_events(real("a100_alexnet"))
    idx = [
        i
        for i, e in enumerate(doc["traceEvents"])
        if e.get("ph") == "X"
        and e.get("cat") == cat
        and (cat != "cuda_runtime" or "correlation" in e.get("args", {}))
    ]
    victim = idx[len(idx) // 2]
    bad = json.loads(json.dumps(doc))
    MUTATIONS[mutation](bad["traceEvents"][victim])
    gone = json.loads(json.dumps(doc))
    del gone["traceEvents"][victim]
    data = read_kineto_file(_doc_file(tmp_path, bad, "bad"), "h")
    ref = read_kineto_file(_doc_file(tmp_path, gone, "gone"), "h")
    assert _summary(data) == _summary(ref)
    assert [d.message.split()[0] for d in _bad_events(data)] == ["1"]
    assert not _bad_events(ref)


def test_runtime_event_without_ts_keeps_the_alexnet_op_table(tmp_path):
    # The review's case: the first launch lost its ts; everything else must stay attributed.
    doc = raw_events(real("a100_alexnet"))
    ref = read_kineto_file(real("a100_alexnet"), "h").ops
    for e in doc["traceEvents"]:
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {}):
            e.pop("ts")
            break
    t = read_kineto_file(_doc_file(tmp_path, doc), "h").ops
    assert sorted(t["operation"]) == sorted(ref["operation"]) and len(t) == len(ref) == 10
    assert "aten::rand" in list(t["operation"])
    # aten::conv2d ran both a TF32 xmma kernel and an FP32 SIMT cuDNN kernel: two rows.
    conv = sorted(p for o, p in zip(t["operation"], t["precision"]) if o == "aten::conv2d")
    assert conv == ["fp32", "tf32"]


def _ev(cat, name, ts, dur, tid=1, **args):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _launch(ts, corr, tid, kernel_ts, device=0, dur=0.5, kdur=2.0):
    return [
        _ev("cuda_runtime", "cudaLaunchKernel", ts, dur, tid=tid, correlation=corr),
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{corr}",
            "pid": 0,
            "tid": 7,
            "ts": kernel_ts,
            "dur": kdur,
            "args": {"correlation": corr, "device": device},
        },
    ]


def test_launch_search_is_exact_on_high_thread_indices(tmp_path):
    # 61 threads (index 60 and up: a float key thread*1e15 + ts had 8 µs steps); on the last,
    # op A [100, 105) launches at 103 and op B [106, 200) right after A.
    ev = [_ev("cpu_op", "aten::relu", 0, 1, tid=t) for t in range(60)]
    ev += [_ev("cpu_op", "aten::mm", 100, 5, tid=60), _ev("cpu_op", "aten::add", 106, 94, tid=60)]
    ev += _launch(103, 1, 60, 300, kdur=3.0) + _launch(107, 2, 60, 310, kdur=5.0)
    data = read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev}), "h")
    rows = dict(zip(data.ops["operation"], data.ops["total_time_ps"]))
    assert rows == {"aten::mm": 3e6, "aten::add": 5e6}


def test_innermost_op_requires_start_before_launch():
    thread = np.array(list(range(60)) + [60, 60])
    ts = np.array([0.0] * 60 + [100.0, 106.0])
    dur = np.array([1.0] * 60 + [5.0, 94.0])
    order, parent = op_nesting(thread, ts, dur)
    end = ts + dur

    def find(th, t, e):
        return innermost_enclosing(
            order,
            parent,
            thread,
            ts,
            end,
            np.array([th]),
            np.array([t]),
            np.array([e]),
        ).tolist()[0]

    assert find(60, 103.0, 103.5) == 60  # inside A, not B
    assert find(60, 105.5, 105.6) == -1  # between A and B
    assert find(60, 99.0, 99.5) == -1  # before any op of the thread
    assert find(60, 150.0, 150.5) == 61
    assert find(5, 0.5, 0.6) == 5
    assert find(61, 0.5, 0.6) == -1  # a thread without ops


def test_negative_device_ids_do_not_merge_groups(tmp_path):
    # Row op 0 launches on device 0, row op 1 on device -1: a key inv * (max + 1) + dev mapped
    # both to 0 and merged their times into one row.
    ev = [_ev("cpu_op", "aten::mm", 0, 10), _ev("cpu_op", "aten::add", 20, 10)]
    ev += _launch(5, 1, 1, 50, device=0, kdur=3.0) + _launch(25, 2, 1, 60, device=-1, kdur=5.0)
    data = read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev}), "h")
    rows = {
        (op, c): t
        for op, c, t in zip(data.ops["operation"], data.ops["core"], data.ops["total_time_ps"])
    }
    assert rows == {("aten::mm", 0): 3e6, ("aten::add", -1): 5e6}


@pytest.mark.parametrize("device", ["cuda:0", 1.5, [0], True, 2**40])
def test_non_integer_device_ids_are_bad_events(tmp_path, device):
    ev = [_ev("cpu_op", "aten::mm", 0, 10)] + _launch(5, 1, 1, 50, kdur=3.0)
    ev += _launch(6, 2, 1, 55, kdur=1.0)
    ev[-1]["args"]["device"] = device
    data = read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev}), "h")
    assert dict(zip(data.ops["operation"], data.ops["total_time_ps"])) == {"aten::mm": 3e6}
    assert len(_bad_events(data)) == 1


def _step(n, ts, dur):
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": f"ProfilerStep#{n}",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
    }


@pytest.mark.parametrize("gpu", [False, True])
def test_overlapping_steps_never_get_negative_durations(tmp_path, gpu):
    ev = [
        _ev("cpu_op", "aten::mm", 0, 10),
        _ev("cpu_op", "aten::add", 20, 10),
        _step(1, 0, 100),
        _step(2, 10, 40),
        _step(3, 120, 10),
    ]
    if gpu:
        ev += _launch(5, 1, 1, 6, kdur=3.0)
    data = read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev}), "h")
    assert [s.step for s in data.steps] == [1, 2, 3]
    assert all(s.duration_ps >= 0 for s in data.steps)
    assert [s.duration_ps for s in data.steps][1] == 0  # step 2 lies inside step 1
    assert any(d.code == "steps_overlap" for d in data.diagnostics)
    analyze([data])


@pytest.mark.parametrize(
    "props",
    [
        {"a": 1},
        "A100",
        [1, "x", None],
        [{"id": [0], "name": "NVIDIA A100-SXM4-80GB"}],
        [
            {
                "id": 0,
                "name": "G",
                "totalGlobalMem": float("nan"),
                "numSms": float("inf"),
                "computeMajor": "x",
            }
        ],
    ],
)
def test_malformed_device_properties(tmp_path, props):
    ev = [_ev("cpu_op", "aten::mm", 0, 10)] + _launch(5, 1, 1, 50, kdur=3.0)
    data = read_kineto_file(
        _doc_file(tmp_path, {"traceEvents": ev, "deviceProperties": props}), "h"
    )
    assert data.device.kind == "gpu"
    json.dumps(data.device.to_json(), allow_nan=False)
    json.dumps(data.device_properties, allow_nan=False)
    analyze([data])


def test_malformed_counter_args(tmp_path):
    fadd = kineto.HW_PREFIX + "fadd_pred_on.sum"
    ffma = kineto.HW_PREFIX + "ffma_pred_on.sum"
    ev = [_ev("cpu_op", "aten::mm", 0, 10)]
    ev += [
        {
            "ph": "X",
            "cat": "cuda_profiler_range",
            "name": "k1",
            "ts": 1,
            "dur": 1,
            "args": {fadd: 10, ffma: "abc"},
        },
        {
            "ph": "X",
            "cat": "cuda_profiler_range",
            "name": "k2",
            "ts": 1,
            "dur": 1,
            "args": {fadd: float("nan"), ffma: 4, "other": [1]},
        },
        {"ph": "X", "cat": "cuda_profiler_range", "name": "k3", "ts": 1, "dur": 1, "args": [1, 2]},
    ]
    data = read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev}), "h")
    hw = data.hw_counters
    assert [k["name"] for k in hw.kernels] == ["k1", "k2"]
    assert hw.flops == {"f32": 10.0 + 8.0} and hw.total_flops == 18.0
    assert hw.metric_sums == {fadd: 10, ffma: 4}
    json.dumps(hw.kernels, allow_nan=False)
    assert len(_bad_events(data)) == 1
    assert kineto.hw_flops_from_metrics({fadd: "12", ffma: None}) == {"f32": 0.0}
    assert kineto.hw_flops_from_metrics([1]) == {}


@pytest.mark.parametrize(
    "field,value",
    [
        ("ts", float("nan")),
        ("ts", float("inf")),
        ("dur", float("nan")),
        ("dur", -float("inf")),
        ("ts", "12"),
        ("dur", 1e300),
    ],
)
def test_non_finite_times_of_steps_and_ops_are_bad_events(tmp_path, field, value):
    ev = [
        _ev("cpu_op", "aten::mm", 0, 10),
        _ev("cpu_op", "aten::add", 20, 10),
        _step(1, 0, 50),
        _step(2, 60, 50),
    ]
    ref = read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev[:3]}, "ref"), "h")
    ref_op = read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev[:1] + ev[2:]}, "ref2"), "h")
    for i, expect in ((3, ref), (1, ref_op)):
        bad = json.loads(json.dumps(ev))
        bad[i][field] = value
        data = read_kineto_file(_doc_file(tmp_path, {"traceEvents": bad}, "bad"), "h")
        assert _summary(data) == _summary(expect)
        assert len(_bad_events(data)) == 1


def test_step_number_out_of_range_is_a_bad_event(tmp_path):
    ev = [_ev("cpu_op", "aten::mm", 0, 10), _step(10**30, 0, 50)]
    data = read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev}), "h")
    assert data.steps == [] and len(_bad_events(data)) == 1


def test_time_span_too_long_is_a_format_error(tmp_path):
    # ts within range each, but 1e15 µs apart: ps from the first event would overflow int64.
    ev = [_ev("cpu_op", "aten::mm", 0, 10), _ev("cpu_op", "aten::add", 1e15, 10)]
    with pytest.raises(ProfileFormatError, match="span"):
        read_kineto_file(_doc_file(tmp_path, {"traceEvents": ev}), "h")


def test_ns_timestamps_are_exact(tmp_path):
    """Epoch µs with ns fractions lose ~0.25 µs as float64: a child ending exactly at its
    parent's end would seem to end after it (and its time be counted twice). Read exactly."""
    parent_ts, child_ts = "1712181098123456.789", "1712181098123456.905"  # child ends with parent
    as_float = float(parent_ts) + 10.0 < float(child_ts) + 9.884
    assert as_float, "the case must break float64 nesting"
    text = (
        '{"traceEvents": ['
        f'{{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, '
        f'"ts": {parent_ts}, "dur": 10.000, "args": {{}}}},'
        f'{{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, '
        f'"ts": {child_ts}, "dur": 9.884, "args": {{}}}}]}}'
    )
    path = tmp_path / "ns.pt.trace.json"
    path.write_text(text)
    _old(path)
    data = read_kineto_file(str(path), "h")
    # One top-level op: its row holds the whole 10 µs (the child's 9.884 inside it), exactly.
    assert list(data.ops["operation"]) == ["aten::linear"]
    assert data.ops["total_time_ps"].sum() == 10_000_000
    assert data.core_spans[0].duration_ps == 10_000_000
    assert exact_ns("1712181098123456.789") == 1712181098123456789
    assert exact_ns("-0.5") == -500 and exact_ns("3") == 3000


def test_steps_are_clipped_to_the_record_window(tmp_path):
    """A ProfilerStep marker running past the trace's "Record Window End" ends there (the
    profiler recorded nothing later), one starting after it is dropped, and a diagnostic says
    so; idle time cannot grow past the window."""
    path = real("cpu_convnet")
    doc = raw_events(path)
    end_us = next(
        float(e["ts"])
        for e in doc["traceEvents"]
        if e.get("ph") == "i" and e.get("name") == "Record Window End"
    )
    steps = [e for e in x_events(doc, "user_annotation") if e["name"].startswith("ProfilerStep")]
    last = max(steps, key=lambda e: e["ts"])
    # The last step made to last 13.3 s; one more starting after the window.
    last["dur"] = 13.3e6
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#9999",
            "ts": end_us + 10.0,
            "dur": 5.0,
            "pid": last["pid"],
            "tid": last["tid"],
        }
    )
    out = tmp_path / "w.pt.trace.json"
    out.write_text(json.dumps(doc))
    past = time.time() - 3600
    os.utime(out, (past, past))
    data = read_kineto_file(str(out), "w")
    assert 9999 not in [s.step for s in data.steps]
    clipped = max(data.steps, key=lambda s: s.start_ps)
    span = data.core_spans[0]
    assert clipped.start_ps + clipped.duration_ps <= span.end_ps
    assert clipped.duration_ps == pytest.approx((end_us - float(last["ts"])) * 1e6, abs=2000)
    note = next(d for d in data.diagnostics if d.code == "steps_clipped")
    assert "1 ProfilerStep" in note.message and "1 starting after" in note.message
    assert span.end_ps - span.start_ps < 1e12  # never the 13.3 s marker
