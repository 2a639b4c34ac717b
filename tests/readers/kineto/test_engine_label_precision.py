"""vLLM's attention scope labels and the precision of labelled GEMMs
(costs/torch/engine_labels.py, readers/kineto/label_precision.py): the attention grammar, costs
worked out here from the label text, and the labels of testdata/kineto/h200_block_labels (built
by tools/build_block_label_fixture.py from the real H200 training trace) and
h200_decode_labels. References: the label text, the dtypes the wrapped op recorded and the
names of the kernels launched inside each label, read from the raw events without the reader."""

import glob
import gzip
import json
import os

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.costs.torch import engine_labels
from tb_roofline.readers.kineto import label_precision, read_kineto_file

KINETO = os.path.join(TESTS, "..", "testdata", "kineto")
BLOCK = os.path.join(KINETO, "h200_block_labels")
DECODE = os.path.join(KINETO, "h200_decode_labels")
ATTN = "attn_causal B=4 Q=1 S=2048 H=32 D=128 KV_H=8 DT=bfloat16 BE=TRITON_ATTN Vstride=3072"


def _trace(folder):
    (path,) = glob.glob(os.path.join(folder, "*.pt.trace.json.gz"))
    return path


def test_attention_grammar_keeps_every_field():
    label = engine_labels.parse(ATTN)
    assert label.kind == "attn_causal"
    dims = {"B": 4, "Q": 1, "S": 2048, "H": 32, "D": 128, "KV_H": 8}
    assert label.fields == {**dims, "Vstride": 3072}
    assert label.text == {"DT": "bfloat16", "BE": "TRITON_ATTN"}


@pytest.mark.parametrize(
    "name",
    [
        "attn_causal B=4 Q=1 S=2048 H=32 D=128 DT=bfloat16",  # no KV_H
        "attn_causal B=0 Q=1 S=2048 H=32 D=128 KV_H=8 DT=bfloat16",
        "attn_sliding B=4 Q=1 S=2048 H=32 D=128 KV_H=8 DT=bfloat16",
        "attn_causal",
    ],
)
def test_incomplete_attention_labels_are_not_labels(name):
    assert engine_labels.parse(name) is None


def test_attention_costs_from_the_label_text():
    cost = engine_labels.label_cost(ATTN)
    assert (cost.category, cost.precision, cost.source) == ("attention", "bf16", "formula")
    assert cost.flops == 4 * 4 * 1 * 2048 * 32 * 128  # Q·Kᵀ and P·V, every pair
    assert cost.bytes == 2 * (2 * 4 * 1 * 32 * 128 + 2 * 4 * 2048 * 8 * 128)  # Q, O; K, V
    fp8 = engine_labels.label_cost(ATTN.replace("bfloat16", "float8_e4m3fn"))
    assert (fp8.precision, fp8.bytes) == ("f8e4m3", cost.bytes / 2)
    assert engine_labels.label_cost(ATTN.replace("bfloat16", "int8")) is None  # no float type


def test_blas_costs_only_with_a_dtype():
    assert engine_labels.label_cost("BLAS 8x4096x8192") is None
    bf16 = engine_labels.label_cost("BLAS 8x4096x8192", "bf16")
    assert (bf16.flops, bf16.bytes, bf16.precision) == (
        2 * 8 * 4096 * 8192,
        2 * (8 * 8192 + 4096 * 8192 + 8 * 4096),
        "bf16",
    )
    f32 = engine_labels.label_cost("BLAS 8x4096x8192", "f32")
    assert f32.bytes == 2 * bf16.bytes
    skinny = engine_labels.label_cost("wvSplitK 4x6144x4096", "f16")
    assert (skinny.precision, skinny.bytes) == ("f16", 2 * (4 * 4096 + 6144 * 4096 + 4 * 6144))


def _raw_labels(path):
    """Per label event: (name, dtype the op inside recorded, kernel names launched inside)."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    labels = [e for e in events if e.get("cat") == "user_annotation" and engine_name(e["name"])]
    launch = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    out = []
    for lab in labels:
        inside = lambda e: lab["tid"] == e["tid"] and lab["ts"] <= e["ts"] <= lab["ts"] + lab["dur"]
        ops = [e for e in events if e.get("cat") == "cpu_op" and inside(e)]
        types = [t for e in ops for t in e["args"].get("Input type", [])[:1]]
        kernels = [
            k["name"]
            for k in events
            if k.get("cat") == "kernel"
            and (r := launch.get(k["args"].get("correlation"))) is not None
            and inside(r)
        ]
        out.append((lab["name"], types[0] if types else None, kernels))
    return out


def engine_name(name):
    return name.split(" ")[0] in ("BLAS", "wvSplitKrc", "attn_non_causal", "attn_causal")


def _read(path):
    data = read_kineto_file(path, "h")
    t = data.ops
    key = np.asarray(t.rows["op"])
    names = np.asarray(t.keys["operation"], dtype=object)[key]
    precisions = np.asarray(t.keys["precision"], dtype=object)[key]
    return names, precisions, np.asarray(t["flops"]), np.asarray(t["bytes"]), data.diagnostics


def _rows(path):
    return _read(path)[:4]


def _note_count(diagnostics, code):
    """The count a note starts with (0 when the note is absent)."""
    said = [d.message for d in diagnostics if d.code == code]
    return int(said[0].split()[0]) if said else 0


def _expected(name, precision):
    """FLOPs and bytes of one labelled call, from its text (not through engine_labels)."""
    kind, rest = name.split(" ", 1)
    if kind.startswith("attn_"):
        f = dict(w.split("=") for w in rest.split())
        b, q, s, h, d, kv = (int(f[k]) for k in ("B", "Q", "S", "H", "D", "KV_H"))
        return 4 * b * q * s * h * d, 2 * (2 * b * q * h * d + 2 * b * s * kv * d)
    n, m, k = map(int, rest.split("x"))
    return 2 * n * m * k, 2 * (n * k + m * k + n * m)


def _bf16_named(kernels):
    return any("bfloat16" in k.lower() or "bf16" in k.lower() for k in kernels)


@pytest.mark.parametrize("variant", ["shapes", "no_shapes"])
def test_block_labels_costed_where_a_dtype_is_known(variant):
    path = _trace(os.path.join(BLOCK, variant))
    names, precisions, flops, nbytes, diagnostics = _read(path)
    raw = _raw_labels(path)
    assert len(raw) == 15  # 3 steps × (4 linears + 1 attention)
    uncosted = 0
    for name in {r[0] for r in raw}:
        calls = [r for r in raw if r[0] == name]
        rows = names == name
        if name.startswith("attn_"):
            known = True  # the label names its dtype
        elif variant == "shapes":
            known = all(r[1] == "c10::BFloat16" for r in calls)  # the wrapped aten::linear's
        else:
            known = all(_bf16_named(r[2]) for r in calls)  # only the kernels' names can say
        if known:
            f, b = _expected(name, "bf16")
            assert flops[rows].sum() == len(calls) * f, name
            assert nbytes[rows].sum() == len(calls) * b, name
            assert set(precisions[rows]) == {"bf16"}, name
        else:
            assert flops[rows].sum() == 0, name
            uncosted += len(calls)
    assert _note_count(diagnostics, "blas_label_no_dtype") == uncosted
    batched = [r for r in raw if r[0].startswith("attn_") and int(r[0].split()[1][2:]) > 1]
    assert _note_count(diagnostics, "attention_label_bound") == len(batched) == 3
    if variant == "shapes":
        assert all(r[1] == "c10::BFloat16" for r in raw)  # every label was costed
    else:
        assert not all(_bf16_named(r[2]) for r in raw)  # the case left uncosted exists


def test_decode_labels_take_the_precision_their_kernels_name():
    path = _trace(DECODE)
    names, precisions, _, _ = _rows(path)
    raw = _raw_labels(path)
    for name in {r[0] for r in raw}:
        want = "bf16" if all(_bf16_named(r[2]) for r in raw if r[0] == name) else ""
        assert set(precisions[names == name]) == {want}, name
    assert {"bf16", ""} <= set(precisions[np.char.startswith(names.astype(str), "wvSplitKrc")])


def test_the_nearest_label_above_an_op():
    # ops: 0 ⊃ 1 (a label) ⊃ 2; 3 ⊃ 4 with no label
    parent = np.array([-1, 0, 1, -1, 3])
    is_label = np.array([False, True, False, False, False])
    found, steps = label_precision._label_above(parent, is_label, np.array([2, 4, 1, -1, 0]))
    assert found.tolist() == [1, -1, 1, -1, -1]
    assert steps[[0, 2]].tolist() == [1, 0]


def _event(cat, name, ts, dur, **args):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def test_blas_under_autocast_takes_the_gemm_calls_dtype(tmp_path):
    # autocast records the outer aten::linear with the caller's fp32 tensors around the bf16
    # aten::mm it makes: the GEMM's dtype is the one the label ran in
    events = [
        _event("user_annotation", "BLAS 4x8x16", 0, 100),
        _event(
            "cpu_op",
            "aten::linear",
            1,
            98,
            **{"Input Dims": [[4, 16], [8, 16]], "Input type": ["float", "float"]},
        ),
        _event(
            "cpu_op",
            "aten::mm",
            10,
            50,
            **{"Input Dims": [[4, 16], [16, 8]], "Input type": ["c10::BFloat16", "c10::BFloat16"]},
        ),
        _event("cuda_runtime", "cudaLaunchKernel", 20, 5, correlation=100),
        _event("kernel", "gemm", 30, 7, correlation=100, device=0),
    ]
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    names, precisions, flops, nbytes = _rows(str(path))
    row = names == "BLAS 4x8x16"
    assert (flops[row].sum(), nbytes[row].sum()) == (2 * 4 * 8 * 16, 2 * (4 * 16 + 8 * 16 + 4 * 8))
    assert set(precisions[row]) == {"bf16"}


# The kernel as ROCm vLLM's `moe_wvSplitK_int4_hf_sml_<scalar_t, THRDS, YTILE, WvPrGrp, A_CHUNK,
# UNRL, N, GROUP_SIZE, HAS_ZERO_POINTS, FUSED_SILU_MUL>` template instantiates for bf16.
MOE_KERNEL = (
    "void moe_wvSplitK_int4_hf_sml_<__hip_bfloat16, 64, 2, 16, 16, 4, 1, 128, false, false>"
    "(int, int, unsigned char const*, __hip_bfloat16 const*, __hip_bfloat16 const*, "
    "unsigned int const*, __hip_bfloat16*, int const*, int const*, int, long, long, long, "
    "int, int, int)"
)


def test_int4_moe_label_takes_its_activations_precision_from_the_kernel(tmp_path):
    label = "fused_moe_wvsplitk_int4 1x2048x768 E=8 top_k=2"
    events = [
        _event("user_annotation", label, 0, 100),
        _event("cuda_runtime", "hipLaunchKernel", 20, 5, correlation=100),
        _event("kernel", MOE_KERNEL, 30, 7, correlation=100, device=0),
    ]
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    names, precisions, flops, nbytes = _rows(str(path))
    row = names == label
    # 1 token × top-2 of 8 experts; activations in 16 bits, 2 experts' int4 weights at 0.5 B
    assert flops[row].sum() == 2 * 1 * 2 * 2048 * 768
    assert nbytes[row].sum() == 2 * (1 * 768 + 2 * 2048) + 2 * 2048 * 768 / 2
    assert set(precisions[row]) == {"bf16"}
