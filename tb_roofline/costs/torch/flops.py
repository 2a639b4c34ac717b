"""FLOPs and bytes of PyTorch (aten) ops from what `record_shapes=True` writes into a trace.

A Kineto `cpu_op` event carries, per argument, `Input Dims` (a shape, a list of shapes for a
TensorList, `[]` for non-tensors), `Input type` (the dtype of a tensor argument, or `Scalar`,
`ScalarList`, `TensorList`, `""`) and `Concrete Inputs` (the value of scalar arguments as text;
strings such as an einsum equation or `padding="same"` are not recorded). Output shapes are not
recorded, so each family below derives them from the inputs.

Conventions (docs/pytorch_traces.md):
- One multiply-add = 2 FLOPs. Matmul, convolution and attention FLOPs are those of the products
  only, as `torch.utils.flop_counter.FlopCounterMode` counts them (bias adds, scaling and
  softmax are not counted; causal masks are not discounted).
- Elementwise ops cost 1 FLOP per output element (`addcmul`/`addcdiv`/`lerp`: 2), reductions 1
  FLOP per input element; normalisation layers use the per-element constants in `_NORM_FLOPS`.
- Bytes = every tensor argument once (read) + the output once (written); an in-place op's
  output is its first argument. Views cost nothing. These are the bytes an ideal kernel moves,
  not measured traffic.
- `op_cost` returns None when the op is unknown or its arguments are not in the trace; the
  reader then looks at the ops nested inside it instead.
"""

from __future__ import annotations

import math
import re

from tb_roofline.costs.hlo import attention as hlo_attention
from tb_roofline.costs.torch.args import (  # noqa: F401 (re-exported)
    DTYPES,
    FLOAT_PRECISIONS,
    INT_LABELS,
    SIZES,
    Args,
    OpCost,
    Tensor,
    _cost,
    _first_float,
    _tuple,
    broadcast,
    has_negative_dim,
    parse_concrete,
    precision_label,
)

__all__ = [
    "DTYPES",
    "FLOAT_PRECISIONS",
    "SIZES",
    "OpCost",
    "Tensor",
    "Args",
    "has_negative_dim",
    "INT_LABELS",
    "precision_label",
    "parse_concrete",
    "broadcast",
    "op_cost",
    "precision_of",
    "category_of",
    "base_name",
    "COMMUNICATION",
    "attention_flops",
    "norm_flops_per_element",
    "ELEMENTWISE_1",
    "ELEMENTWISE_2",
    "REDUCTIONS",
    "ATTENTION_OPS",
    "NORM_OPS",
    "COPY_OPS",
    "VIEW_OPS",
    "matmul_shapes",
    "conv_flops",
]


# ---------------------------------------------------------------- matmul family


def matmul_shapes(a: tuple, b: tuple):
    """(batch, M, K, N, output shape) of torch.matmul semantics, or None if they don't fit."""
    if not a or not b:
        return None
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    batch = broadcast(a2[:-2], b2[:-2])
    if batch is None:
        return None
    m, k, n = a2[-2], a2[-1], b2[-1]
    out = batch + ((m,) if len(a) > 1 else ()) + ((n,) if len(b) > 1 else ())
    return math.prod(batch), m, k, n, out


def matmul_cost(name: str, args: Args) -> OpCost | None:
    """mm, addmm, bmm, baddbmm, matmul, addbmm, linear: 2·batch·M·K·N."""
    if name in ("addmm", "baddbmm", "addbmm", "addmv", "addr"):
        bias, a, b = args.tensor(0), args.tensor(1), args.tensor(2)
        inputs = [bias, a, b]
    elif name == "linear":
        a, w, bias = args.tensor(0), args.tensor(1), args.tensor(2)
        if a is None or w is None:
            return None
        b = Tensor(tuple(reversed(w.shape)), w.precision)  # x @ w.T
        inputs = [a, w, bias]
    else:
        a, b = args.tensor(0), args.tensor(1)
        inputs = [a, b]
    if a is None or b is None:
        return None
    if name in ("mm", "addmm") and (len(a.shape) != 2 or len(b.shape) != 2):
        return None
    if name in ("bmm", "baddbmm") and (
        len(a.shape) != 3 or len(b.shape) != 3 or a.shape[0] != b.shape[0]
    ):
        return None
    shapes = matmul_shapes(a.shape, b.shape)
    if shapes is None:
        return None
    batch, m, k, n, out_shape = shapes
    if name == "addbmm":  # sums the batch into one M×N output
        out_shape = (m, n)
    out = Tensor(out_shape, a.precision)
    return _cost("matmul", 2 * batch * m * k * n, [t for t in inputs if t is not None], out)


def einsum_cost(args: Args) -> OpCost | None:
    """Two-operand einsum when the equation is recorded (PyTorch 2.x does not record it)."""
    eq = args.value(0)
    ops = args.tensor_list(1)
    if not isinstance(eq, str) or "->" not in eq or not ops or len(ops) != 2:
        return None
    lhs, out = eq.replace(" ", "").split("->")
    terms = lhs.split(",")
    if len(terms) != 2 or "." in eq:
        return None
    sizes: dict[str, int] = {}
    for term, t in zip(terms, ops):
        if len(term) != len(t.shape):
            return None
        for letter, size in zip(term, t.shape):
            if sizes.get(letter, size) != size and 1 not in (sizes[letter], size):
                return None
            sizes[letter] = max(sizes.get(letter, 1), size)
    a, b = set(terms[0]), set(terms[1])
    used = (a & b) | set(out)  # letters summed inside one operand are reduced first
    flops = 2 * math.prod(sizes[c] for c in used)
    out_t = Tensor(tuple(sizes[c] for c in out), ops[0].precision)
    return _cost("matmul", flops, ops, out_t)


# ---------------------------------------------------------------- convolution family


def conv_output_spatial(inp, kernel, stride, padding, dilation, transposed, output_padding):
    out = []
    for i, k, s, p, d, op in zip(inp, kernel, stride, padding, dilation, output_padding):
        if transposed:
            out.append((i - 1) * s - 2 * p + d * (k - 1) + op + 1)
        else:
            out.append((i + 2 * p - d * (k - 1) - 1) // s + 1)
    return tuple(out)


def conv_flops(x_shape, w_shape, out_shape, transposed) -> int:
    """2 · N · (spatial positions the filter visits) · (filter size) · w[0] · w[1].

    Forward: weight is [Cout, Cin/groups, k...] and positions are the output's.
    Transposed: weight is [Cin, Cout/groups, k...] and positions are the input's.
    """
    positions = (x_shape if transposed else out_shape)[2:]
    return 2 * x_shape[0] * math.prod(positions) * math.prod(w_shape[2:]) * w_shape[0] * w_shape[1]


def _conv_params(name: str, args: Args):
    """(x, w, bias, stride, padding, dilation, transposed, output_padding, groups) or None."""
    x, w, bias = args.tensor(0), args.tensor(1), args.tensor(2)
    if x is None or w is None or len(x.shape) < 3 or len(w.shape) != len(x.shape):
        return None
    n = len(x.shape) - 2
    if name in ("convolution", "_convolution"):
        stride, padding, dilation = (args.value(i) for i in (3, 4, 5))
        transposed, output_padding, groups = args.value(6), args.value(7), args.value(8)
    elif name.startswith("conv_transpose"):
        stride, padding, output_padding = args.value(3), args.value(4), args.value(5)
        groups, dilation, transposed = args.value(6), args.value(7), True
    else:  # conv1d/2d/3d
        stride, padding, dilation, groups = (args.value(i) for i in (3, 4, 5, 6))
        transposed, output_padding = False, 0
    if isinstance(padding, str) or stride is None or padding is None or dilation is None:
        return None  # e.g. padding="same": strings are not recorded; the nested op has numbers
    stride, padding, dilation = _tuple(stride, n, 1), _tuple(padding, n, 0), _tuple(dilation, n, 1)
    output_padding = _tuple(output_padding, n, 0)
    if None in (stride, padding, dilation, output_padding) or not isinstance(transposed, bool):
        return None
    groups = int(groups) if isinstance(groups, (int, float)) else 1
    return x, w, bias, stride, padding, dilation, transposed, output_padding, groups


def conv_cost(name: str, args: Args) -> OpCost | None:
    p = _conv_params(name, args)
    if p is None:
        return None
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = p
    spatial = conv_output_spatial(
        x.shape[2:], w.shape[2:], stride, padding, dilation, transposed, output_padding
    )
    cout = w.shape[1] * groups if transposed else w.shape[0]
    out = Tensor((x.shape[0], cout) + spatial, x.precision)
    flops = conv_flops(x.shape, w.shape, out.shape, transposed)
    return _cost("convolution", flops, [t for t in (x, w, bias) if t is not None], out)


def conv_backward_cost(args: Args) -> OpCost | None:
    """convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight each cost one
    forward convolution; grad_bias (a sum over grad_out) is not counted, like the forward bias
    and like FlopCounterMode, but its output bytes are."""
    g, x, w = args.tensor(0), args.tensor(1), args.tensor(2)
    if g is None or x is None or w is None:
        return None
    transposed = args.value(7)
    mask = args.value(10)
    if not isinstance(transposed, bool):
        return None
    if not (isinstance(mask, list) and len(mask) == 3):
        mask = [True, True, True]
    one = conv_flops(x.shape, w.shape, g.shape, transposed)
    flops = one * (bool(mask[0]) + bool(mask[1]))
    outs = []
    if mask[0]:
        outs.append(x)
    if mask[1]:
        outs.append(w)
    if mask[2] and args.value(3):
        outs.append(Tensor((g.shape[1],), g.precision))
    return _cost("convolution", flops, [g, x, w], outs)


# ---------------------------------------------------------------- attention family


def _attention_bhsd(q, k, v, layout):
    """(batch, heads, Lq, Lk, Dqk, Dv) from [B, H, S, D] or flash layout [B, S, H, D]."""
    if len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
        return None
    if layout == "bshd":
        b, lq, h, dq = q.shape
        lk, dv = k.shape[1], v.shape[3]
    else:
        b, h, lq, dq = q.shape
        lk, dv = k.shape[2], v.shape[3]
    return b, h, lq, lk, dq, dv


def attention_flops(b, h, lq, lk, dq, dv, backward=False) -> int:
    """Q·Kᵀ (2·b·h·Lq·Lk·Dqk) + P·V (2·b·h·Lq·Lk·Dv); the backward pass recomputes Q·Kᵀ and
    does four more products, 2·b·h·Lq·Lk·(3·Dqk + 2·Dv), as torch.utils.flop_counter counts
    SDPA: one rule for PyTorch ops and XLA custom calls (tb_roofline/costs/hlo/attention.py)."""
    return hlo_attention.attention_flops(b, h, lq, lk, dq, dv, backward)


# name → (index of q, layout, backward?)
ATTENTION_OPS = {
    "scaled_dot_product_attention": (0, "bhsd", False),
    "_scaled_dot_product_attention_math": (0, "bhsd", False),
    "_scaled_dot_product_flash_attention": (0, "bhsd", False),
    "_scaled_dot_product_flash_attention_for_cpu": (0, "bhsd", False),
    "_scaled_dot_product_efficient_attention": (0, "bhsd", False),
    "_scaled_dot_product_cudnn_attention": (0, "bhsd", False),
    "_scaled_dot_product_fused_attention_overrideable": (0, "bhsd", False),
    "_flash_attention_forward": (0, "bshd", False),
    "_efficient_attention_forward": (0, "bshd", False),
    "_scaled_dot_product_flash_attention_backward": (1, "bhsd", True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": (1, "bhsd", True),
    "_scaled_dot_product_efficient_attention_backward": (1, "bhsd", True),
    "_scaled_dot_product_cudnn_attention_backward": (1, "bhsd", True),
    "_flash_attention_backward": (1, "bshd", True),
    "_efficient_attention_backward": (1, "bshd", True),
}


def attention_cost(name: str, args: Args) -> OpCost | None:
    qi, layout, backward = ATTENTION_OPS[name]
    q, k, v = args.tensor(qi), args.tensor(qi + 1), args.tensor(qi + 2)
    if q is None or k is None or v is None:
        return None
    dims = _attention_bhsd(q, k, v, layout)
    if dims is None:
        return None
    b, h, lq, lk, dq, dv = dims
    out_shape = (b, lq, h, dv) if layout == "bshd" else (b, h, lq, dv)
    inputs = [q, k, v]
    if backward:
        g = args.tensor(0)
        inputs = [g] + inputs if g is not None else inputs
        outs = [q, k, v]  # gradients of q, k and v
    else:
        outs = [Tensor(out_shape, q.precision)]
    return _cost("attention", attention_flops(*dims, backward=backward), inputs, outs)


# ---------------------------------------------------------------- elementwise and reductions

ELEMENTWISE_1 = frozenset(
    """
add sub mul div true_divide floor_divide remainder fmod neg abs exp exp2 expm1 log log2 log10
log1p sqrt rsqrt pow reciprocal sign sin cos tan asin acos atan atan2 sinh cosh tanh erf erfc
erfinv sigmoid logit relu relu6 gelu silu mish hardswish hardsigmoid hardtanh leaky_relu elu selu
celu softplus softshrink hardshrink threshold clamp clamp_min clamp_max clip maximum minimum
fmax fmin where masked_fill gt lt ge le eq ne logical_and logical_or logical_xor logical_not
bitwise_and bitwise_or bitwise_xor bitwise_not rsub square floor ceil round trunc frac
nan_to_num isnan isinf isneginf isposinf isfinite
threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward
hardtanh_backward leaky_relu_backward elu_backward hardswish_backward mish_backward
softplus_backward native_dropout dropout native_dropout_backward bernoulli
""".split()
)
ELEMENTWISE_2 = frozenset({"addcmul", "addcdiv", "lerp"})
COMPARISONS = frozenset(
    """gt lt ge le eq ne logical_and logical_or logical_xor logical_not
isnan isinf isneginf isposinf isfinite""".split()
)
REDUCTIONS = frozenset(
    """sum mean amax amin max min prod norm linalg_vector_norm var std
var_mean std_mean argmax argmin all any logsumexp softmax _softmax log_softmax _log_softmax
_safe_softmax _softmax_backward_data _log_softmax_backward_data cumsum""".split()
)
# Reductions whose output has the input's shape (the reduction is along one dim).
SAME_SHAPE_REDUCTIONS = frozenset(
    """softmax _softmax log_softmax _log_softmax _safe_softmax
_softmax_backward_data _log_softmax_backward_data cumsum""".split()
)


def elementwise_cost(name: str, args: Args, inplace: bool) -> OpCost | None:
    tensors = args.tensors()
    if not tensors:
        return None
    out_shape = broadcast(*(t.shape for t in tensors))
    if out_shape is None:
        return None
    first = tensors[0]
    if inplace:
        out_shape = first.shape
    prec = "pred" if name in COMPARISONS else _first_float(tensors)
    out = Tensor(out_shape, prec if prec else first.precision)
    per = 2 if name in ELEMENTWISE_2 else 1
    return _cost(
        "elementwise", per * math.prod(out_shape), tensors, out, precision=_first_float(tensors)
    )


def reduction_cost(name: str, args: Args) -> OpCost | None:
    x = args.tensor(0)
    if x is None:
        return None
    if name in SAME_SHAPE_REDUCTIONS:
        out = Tensor(x.shape, x.precision)
        inputs = args.tensors()
    else:
        dims = args.value(1)
        keep = args.value(2)
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = [dims]
        if isinstance(dims, list) and dims and len(x.shape):
            axes = {d % len(x.shape) for d in dims}
            shape = tuple(
                1 if i in axes else s
                for i, s in enumerate(x.shape)
                if keep is True or i not in axes
            )
        else:  # full reduction
            shape = ()
        out = Tensor(
            shape,
            "pred"
            if name in ("all", "any")
            else ("s64" if name in ("argmax", "argmin") else x.precision),
        )
        inputs = [x]
    return _cost("reduction", x.numel, inputs, out, precision=x.precision)


# ---------------------------------------------------------------- normalisation

# FLOPs per input element: statistics (mean and variance: 1 add, 1 multiply-add) = 3, normalise
# (subtract the mean, multiply by 1/std) = 2, affine (scale, shift) = 2 when weights are given.
# Backward passes: 2× the forward estimate. RMS norm has no mean: stats 2 + normalise 1 + scale 1.
_NORM_FLOPS = {"stats": 3, "normalize": 2, "affine": 2}


def norm_flops_per_element(kind: str, affine: bool, training: bool) -> int:
    if kind == "rms":
        return 2 + 1 + (1 if affine else 0)
    per = _NORM_FLOPS["normalize"] + (_NORM_FLOPS["affine"] if affine else 0)
    if training:
        per += _NORM_FLOPS["stats"]
    return per


NORM_OPS = {
    # name: (kind, weight arg index or None, training flag arg index or None, backward?)
    "layer_norm": ("layer", 2, None, False),
    "native_layer_norm": ("layer", 2, None, False),
    "group_norm": ("group", 2, None, False),
    "native_group_norm": ("group", 1, None, False),
    "batch_norm": ("batch", 1, 5, False),
    "native_batch_norm": ("batch", 1, 5, False),
    "_native_batch_norm_legit": ("batch", 1, 5, False),
    "_native_batch_norm_legit_no_training": ("batch", 1, None, False),
    "instance_norm": ("instance", 1, 5, False),
    "rms_norm": ("rms", 2, None, False),
    "_fused_rms_norm": ("rms", 2, None, False),
    "native_layer_norm_backward": ("layer", 5, None, True),
    "native_batch_norm_backward": ("batch", 2, 7, True),
    "native_group_norm_backward": ("group", 4, None, True),
    "_fused_rms_norm_backward": ("rms", 3, None, True),
}


def norm_cost(name: str, args: Args) -> OpCost | None:
    kind, wi, ti, backward = NORM_OPS[name]
    x = args.tensor(0)
    if x is None:
        return None
    weight = args.tensor(wi) if wi is not None else None
    training = True
    if name == "_native_batch_norm_legit_no_training":
        training = False
    elif ti is not None:
        flag = args.value(ti)
        training = flag if isinstance(flag, bool) else True
    per = norm_flops_per_element(kind, weight is not None, training)
    data = x.numel
    if backward:
        per *= 2
        # backward ops' first argument is grad_out (same shape as the input)
    out = Tensor(x.shape, x.precision)
    inputs = [t for t in args.tensors()]
    return _cost("normalization", per * data, inputs, out, precision=x.precision)


# ---------------------------------------------------------------- embedding and copies


def embedding_cost(name: str, args: Args) -> OpCost | None:
    if name == "embedding":
        w, idx = args.tensor(0), args.tensor(1)
        if w is None or idx is None or len(w.shape) != 2:
            return None
        rows = Tensor(idx.shape + (w.shape[1],), w.precision)
        # A gather: reads the selected rows and the indices, writes them out; no FLOPs.
        return OpCost("embedding", 0.0, float(idx.nbytes + 2 * rows.nbytes), w.precision, "formula")
    # embedding_dense_backward(grad, indices, num_weights, ...): scatter-add of grad rows.
    g, idx = args.tensor(0), args.tensor(1)
    num = args.value(2)
    if g is None or idx is None or not isinstance(num, int) or not g.shape:
        return None
    table = Tensor((num, g.shape[-1]), g.precision)
    return _cost("embedding", g.numel, [g, idx], table, precision=g.precision)


COPY_OPS = frozenset(
    {
        "copy_",
        "clone",
        "_to_copy",
        "cat",
        "stack",
        "index_select",
        "gather",
        "_copy_from",
        "_copy_from_and_resize",
    }
)


def copy_cost(name: str, args: Args) -> OpCost | None:
    if name == "copy_":
        dst, src = args.tensor(0), args.tensor(1)
        if dst is None or src is None:
            return None
        return OpCost("copy", 0.0, float(src.nbytes + dst.nbytes), dst.precision, "formula")
    if name in ("cat", "stack"):
        parts = args.tensor_list(0)
        if not parts:
            return None
        total = sum(t.nbytes for t in parts)
        return OpCost("copy", 0.0, float(2 * total), parts[0].precision, "formula")
    if name in ("index_select", "gather"):
        x = args.tensor(0)
        idx = args.tensor(2)
        if x is None or idx is None:
            return None
        if name == "gather":
            out_numel = idx.numel
        else:
            dim = args.value(1)
            if not isinstance(dim, int) or not x.shape:
                return None
            out_numel = x.numel // max(x.shape[dim], 1) * idx.numel
        out_bytes = out_numel * SIZES.get(x.precision, 4)
        return OpCost("copy", 0.0, float(idx.nbytes + 2 * out_bytes), x.precision, "formula")
    x = args.tensor(0)  # clone, _to_copy: read x, write a copy (dtype may change for _to_copy)
    if x is None:
        return None
    out_prec = x.precision
    if name == "_to_copy":
        code = args.value(1)
        out_prec = (
            _SCALAR_TYPE_CODES.get(code, x.precision) if isinstance(code, int) else x.precision
        )
    out = Tensor(x.shape, out_prec)
    return OpCost("copy", 0.0, float(x.nbytes + out.nbytes), x.precision, "formula")


# c10::ScalarType codes as recorded in Concrete Inputs (e.g. `aten::to(x, 6)` = float).
_SCALAR_TYPE_CODES = {
    0: "u8",
    1: "s8",
    2: "s16",
    3: "s32",
    4: "s64",
    5: "f16",
    6: "f32",
    7: "f64",
    8: "c32",
    9: "c64",
    10: "c128",
    11: "pred",
    15: "bf16",
    23: "f8e5m2",
    24: "f8e4m3",
}

VIEW_OPS = frozenset(
    """view reshape _reshape_alias _unsafe_view as_strided t transpose permute
expand expand_as select slice squeeze unsqueeze detach alias narrow flatten unflatten split
split_with_sizes chunk unbind view_as numpy_T contiguous lift_fresh resolve_conj resolve_neg
empty empty_like empty_strided new_empty new_empty_strided resize_ as_strided_ unfold""".split()
)

COMMUNICATION = re.compile(
    r"nccl|rccl|c10d::|record_param_comms|all_?reduce|all_?gather|"
    r"reduce_?scatter|all_?to_?all|all_?2_?all|"
    r"(?<!aten::)broadcast_(?!tensors|to\b)",
    re.I,
)


def base_name(name: str) -> tuple[str, bool]:
    """('aten::add_', ...) → ('add', inplace=True)."""
    n = name.split("::", 1)[1] if name.startswith("aten::") else name
    inplace = n.endswith("_") and not n.endswith("__") and n not in COPY_OPS
    if inplace:
        n = n[:-1]
    return n, inplace


def op_cost(name: str, dims, types, concrete=None) -> OpCost | None:
    """The cost of one call of `name`, or None when no formula applies to what was recorded."""
    if not name.startswith("aten::"):
        return None
    n, inplace = base_name(name)
    args = Args(dims, types, concrete)
    if not args.types:
        return None
    if n in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear"):
        return matmul_cost(n, args)
    if n == "einsum":
        return einsum_cost(args)
    if n in (
        "conv1d",
        "conv2d",
        "conv3d",
        "convolution",
        "_convolution",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ):
        return conv_cost(n, args)
    if n == "convolution_backward":
        return conv_backward_cost(args)
    if n in ATTENTION_OPS:
        return attention_cost(n, args)
    if n in NORM_OPS:
        return norm_cost(n, args)
    if n in ("embedding", "embedding_dense_backward"):
        return embedding_cost(n, args)
    if n in COPY_OPS or name == "aten::copy_":
        return copy_cost("copy_" if name == "aten::copy_" else n, args)
    if n in REDUCTIONS:
        return reduction_cost(n, args)
    if n in ELEMENTWISE_1 or n in ELEMENTWISE_2:
        return elementwise_cost(n, args, inplace)
    return None


def precision_of(types) -> str:
    """The precision of an op: its first floating-point tensor argument, else its first tensor."""
    if not isinstance(types, list):
        return ""
    first = ""
    for t in types:
        info = DTYPES.get(t) if isinstance(t, str) else None
        if info:
            if info[0] in FLOAT_PRECISIONS:
                return info[0]
            first = first or info[0]
    return first


def category_of(name: str) -> str:
    """A category for ops without a formula (their FLOPs are unknown)."""
    n, _ = base_name(name)
    if n in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum"):
        return "matmul"
    if "conv" in n:
        return "convolution"
    if "attention" in n:
        return "attention"
    if n in NORM_OPS or "norm" in n:
        return "normalization"
    if n in ELEMENTWISE_1 or n in ELEMENTWISE_2:
        return "elementwise"
    if n in REDUCTIONS:
        return "reduction"
    if n in COPY_OPS or n in ("to", "copy"):
        return "copy"
    if "embedding" in n:
        return "embedding"
    if n in VIEW_OPS:
        return "view"
    if COMMUNICATION.search(name):
        return "communication"
    return "other"
