"""The shapes ROCm vLLM writes in its profiler scope names, and what they cost
(docs/serving.md, "Engine shape labels").

vLLM on ROCm wraps its skinny GEMM and W4A16 MoE kernels in `record_function` scopes named
after the problem (`user_annotation` events in the trace), so a trace recorded without shapes
still says what each call computed. One grammar, two forms:

    label  = kind " " A "x" B "x" C { " " word } | kind { " " word }
    word   = name "=" integer | name "=" text | "[" tag "]" | any other word

`name=integer` words are read into `fields`, `name=text` words kept in `text`, the rest
skipped; a field a kind does not use is kept, not read.

- linear layers (vllm/model_executor/layers/utils.py, `rocm_unquantized_gemm_impl`):
  kinds `wvSplitK`, `wvSplitKrc`, `LLMM1`, `DOT` (and `BLAS`), A = n the input rows, B = m the
  weight's output features, C = k its input features: 2·n·m·k FLOPs; x [n, k] and the weight
  [m, k] read, [n, m] written. The skinny kinds run only on fp16/bf16 inputs (their dispatch
  conditions), so 2 B per element; `BLAS` (the `F.linear` fallback) runs in any dtype, which the
  label does not say: costed only with a precision found elsewhere (below).
- W4A16 MoE GEMMs (vllm/model_executor/layers/fused_moe/hybrid_w4a16_moe.py, ROCm/vllm):
  `fused_moe_wvsplitk_int4 MxNxK E=<experts> top_k=<k>`, M the tokens, N the output and K the
  input features of one expert's GEMM; each token meets top_k experts: 2·M·top_k·N·K FLOPs;
  the activations [M, K] read and [M·top_k, N] written in 16 bits, and the int4 weights of the
  experts touched (min(E, M·top_k): an upper bound) at 0.5 B each, plus one 16-bit scale per
  group of `group_size=` weights where the label gives it (the scales are not counted
  otherwise: the bytes are then a lower bound, which the cost's name says).
- attention (vllm/v1/utils.py `create_attention_profiler_scope`, ROCm/vllm, called by the
  TRITON_ATTN and ROCM_ATTN backends): the second form, with kinds
  `attn_causal`, `attn_non_causal` and fields B (sequences), Q (the longest query), S (the
  longest key/value length), H, D, KV_H (query heads, head dim, KV heads), DT (the query's
  torch dtype) and BE (the backend). 4·B·Q·S·H·D FLOPs (Q·Kᵀ and P·V over every (query, key)
  pair, a causal mask not discounted: the project's rule, costs/torch/serving_ops.py); Q read
  and O written ([B·Q, H, D]), K and V read ([B·S, KV_H, D]), all at DT. Q and S are the
  batch's longest, so both are upper bounds unless every sequence has the same lengths.

`precision`: the 16-bit kinds and the MoE's activations run in bf16 or fp16 and the `BLAS`
fallback in any dtype; the labels do not say which, the op inside or its kernels' names may
(readers/kineto/label_precision.py): a precision given to `label_cost` labels the cost, and for
`BLAS` makes it (bytes at that dtype's size).
"""

from __future__ import annotations

import dataclasses
import re

from tb_roofline.costs.torch.args import SIZES, OpCost
from tb_roofline.costs.torch.sparse_ops import experts_touched

SIXTEEN_BIT_LINEAR = ("wvSplitK", "wvSplitKrc", "LLMM1", "DOT")
LINEAR = (*SIXTEEN_BIT_LINEAR, "BLAS")
INT4_MOE = ("fused_moe_wvsplitk_int4",)
ATTENTION = ("attn_causal", "attn_non_causal")
_LABEL = re.compile(r"^(?P<kind>[A-Za-z][A-Za-z0-9_]*) (?P<a>\d+)x(?P<b>\d+)x(?P<c>\d+)(?: |$)")
_FIELD = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\S+)$")
_ATTENTION_DIMS = ("B", "Q", "S", "H", "D", "KV_H")
# `str(dtype)` without "torch." as the attention label writes it → the project's precision names
DTYPE_NAMES = {
    "bfloat16": "bf16",
    "float16": "f16",
    "half": "f16",
    "float32": "f32",
    "float": "f32",
    "float8_e4m3fn": "f8e4m3",
    "float8_e4m3fnuz": "f8e4m3",
    "float8_e5m2": "f8e5m2",
    "float8_e5m2fnuz": "f8e5m2",
}
_MAX_DIM = 1 << 40  # larger than any real dimension: a corrupt label, not a shape


@dataclasses.dataclass(frozen=True)
class Label:
    kind: str
    dims: tuple[int, ...]  # A, B, C of the GEMM forms; () for attention
    fields: dict  # name=integer words
    text: dict = dataclasses.field(default_factory=dict)  # other name=value words (DT, BE, ...)


def _fields(words: list[str]) -> tuple[dict, dict]:
    """The name=value words: integers, and the rest as text (kept; unknown ones not read)."""
    ints, text = {}, {}
    for word in words:
        f = _FIELD.match(word)
        if f is None:
            continue
        value = f.group("value")
        if value.isdigit():
            ints[f.group("name")] = int(value)
        else:
            text[f.group("name")] = value
    return ints, text


def parse(name: str) -> Label | None:
    """The label a scope name carries, or None when it is not one of the kinds above."""
    kind, _, rest = name.partition(" ")
    if kind in ATTENTION:
        ints, text = _fields(rest.split())
        if not all(0 < ints.get(k, 0) < _MAX_DIM for k in _ATTENTION_DIMS):
            return None
        return Label(kind, (), ints, text)
    m = _LABEL.match(name)
    if m is None or m.group("kind") not in LINEAR + INT4_MOE:
        return None
    dims = (int(m.group("a")), int(m.group("b")), int(m.group("c")))
    if not all(0 < d < _MAX_DIM for d in dims):
        return None
    ints, text = _fields(name[m.end() :].split())
    return Label(m.group("kind"), dims, ints, text)


def linear_cost(label: Label, precision: str = "") -> OpCost | None:
    """A linear-layer GEMM: 2·n·m·k; x, the weight and the output at 2 B (the 16-bit kinds) or
    at `precision`'s size (`BLAS`: not costed without one)."""
    size = 2 if label.kind in SIXTEEN_BIT_LINEAR else SIZES.get(precision) if precision else None
    if size is None:
        return None
    n, m, k = label.dims
    nbytes = size * (n * k + m * k + n * m)
    return OpCost("matmul", float(2 * n * m * k), float(nbytes), precision, "formula")


def attention_cost(label: Label) -> OpCost | None:
    """A labelled attention call (module docstring); None when its DT is not a known dtype."""
    precision = DTYPE_NAMES.get(label.text.get("DT", ""))
    if precision is None:
        return None
    b, q, s, h, d, kv_h = (label.fields[k] for k in _ATTENTION_DIMS)
    flops = 4 * b * q * s * h * d
    nbytes = SIZES[precision] * (2 * b * q * h * d + 2 * b * s * kv_h * d)
    return OpCost("attention", float(flops), float(nbytes), precision, "formula")


def int4_moe_cost(label: Label, precision: str = "") -> OpCost | None:
    """One W4A16 expert GEMM over the routed tokens (module docstring); `precision`: the
    activations' (the roof the GEMM runs under: int4 weights are widened to it)."""
    experts, top_k = label.fields.get("E"), label.fields.get("top_k")
    if label.kind not in INT4_MOE or not experts or not top_k:
        return None
    tokens, n, k = label.dims
    touched = experts_touched(tokens, top_k, experts)
    group = label.fields.get("group_size")
    scales = touched * n * (k // group) * 2 if group else 0
    weights = touched * n * k // 2 + scales
    acts = 2 * (tokens * k + tokens * top_k * n)
    flops = float(2 * tokens * top_k * n * k)
    return OpCost("matmul", flops, float(acts + weights), precision, "formula")


def label_cost(name: str, precision: str = "") -> OpCost | None:
    """The cost a scope name's label gives, or None (not a label, or one that is not costed);
    `precision`: the one the op inside or its kernels ran in, where known."""
    label = parse(name)
    if label is None:
        return None
    if label.kind in ATTENTION:
        return attention_cost(label)
    if label.kind in LINEAR:
        return linear_cost(label, precision)
    return int4_moe_cost(label, precision)
