"""The shapes ROCm vLLM writes in its profiler scope names, and what they cost
(docs/serving.md, "Engine shape labels").

vLLM on ROCm wraps its skinny GEMM and W4A16 MoE kernels in `record_function` scopes named
after the problem (`user_annotation` events in the trace), so a trace recorded without shapes
still says what each call computed. One grammar:

    label  = kind " " A "x" B "x" C { " " field }
    field  = name "=" integer | "[" tag "]" | any other word (kept, not read)

- linear layers (vllm/model_executor/layers/utils.py, `rocm_unquantized_gemm_impl`):
  kinds `wvSplitK`, `wvSplitKrc`, `LLMM1`, `DOT` (and `BLAS`), A = n the input rows, B = m the
  weight's output features, C = k its input features: 2·n·m·k FLOPs; x [n, k] and the weight
  [m, k] read, [n, m] written. The skinny kinds run only on fp16/bf16 inputs (their dispatch
  conditions), so 2 B per element; `BLAS` (the `F.linear` fallback) runs in any dtype, which the
  label does not say: it is parsed but not costed (the op inside, with shapes, is).
- W4A16 MoE GEMMs (vllm/model_executor/layers/fused_moe/hybrid_w4a16_moe.py, ROCm/vllm):
  `fused_moe_wvsplitk_int4 MxNxK E=<experts> top_k=<k>`, M the tokens, N the output and K the
  input features of one expert's GEMM; each token meets top_k experts: 2·M·top_k·N·K FLOPs;
  the activations [M, K] read and [M·top_k, N] written in 16 bits, and the int4 weights of the
  experts touched (min(E, M·top_k): an upper bound) at 0.5 B each, plus one 16-bit scale per
  group of `group_size=` weights where the label gives it (the scales are not counted
  otherwise: the bytes are then a lower bound, which the cost's name says).
"""

from __future__ import annotations

import dataclasses
import re

from tb_roofline.costs.torch.args import OpCost
from tb_roofline.costs.torch.sparse_ops import experts_touched

SIXTEEN_BIT_LINEAR = ("wvSplitK", "wvSplitKrc", "LLMM1", "DOT")
LINEAR = (*SIXTEEN_BIT_LINEAR, "BLAS")
INT4_MOE = ("fused_moe_wvsplitk_int4",)
_LABEL = re.compile(r"^(?P<kind>[A-Za-z][A-Za-z0-9_]*) (?P<a>\d+)x(?P<b>\d+)x(?P<c>\d+)(?: |$)")
_FIELD = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\d+)$")
_MAX_DIM = 1 << 40  # larger than any real dimension: a corrupt label, not a shape


@dataclasses.dataclass(frozen=True)
class Label:
    kind: str
    dims: tuple[int, int, int]
    fields: dict


def parse(name: str) -> Label | None:
    """The label a scope name carries, or None when it is not one of the kinds above."""
    m = _LABEL.match(name)
    if m is None or m.group("kind") not in LINEAR + INT4_MOE:
        return None
    dims = (int(m.group("a")), int(m.group("b")), int(m.group("c")))
    if not all(0 < d < _MAX_DIM for d in dims):
        return None
    fields = {}
    for word in name[m.end() :].split():
        f = _FIELD.match(word)
        if f is not None:
            fields[f.group("name")] = int(f.group("value"))
    return Label(m.group("kind"), dims, fields)


def linear_cost(label: Label) -> OpCost | None:
    """A skinny linear-layer GEMM in 16 bits: 2·n·m·k; x, the weight and the output."""
    if label.kind not in SIXTEEN_BIT_LINEAR:
        return None
    n, m, k = label.dims
    return OpCost("matmul", float(2 * n * m * k), float(2 * (n * k + m * k + n * m)), "", "formula")


def int4_moe_cost(label: Label) -> OpCost | None:
    """One W4A16 expert GEMM over the routed tokens (module docstring)."""
    experts, top_k = label.fields.get("E"), label.fields.get("top_k")
    if label.kind not in INT4_MOE or not experts or not top_k:
        return None
    tokens, n, k = label.dims
    touched = experts_touched(tokens, top_k, experts)
    group = label.fields.get("group_size")
    scales = touched * n * (k // group) * 2 if group else 0
    weights = touched * n * k // 2 + scales
    acts = 2 * (tokens * k + tokens * top_k * n)
    return OpCost("matmul", float(2 * tokens * top_k * n * k), float(acts + weights), "", "formula")


def label_cost(name: str) -> OpCost | None:
    """The cost a scope name's label gives, or None (not a label, or one that is not costed)."""
    label = parse(name)
    if label is None:
        return None
    return linear_cost(label) if label.kind in LINEAR else int4_moe_cost(label)
