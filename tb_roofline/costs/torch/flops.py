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

from tb_roofline.costs.torch.args import (  # noqa: F401 (re-exported)
    DTYPES,
    FLOAT_PRECISIONS,
    INT_LABELS,
    SCALAR_TYPE_CODES,
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
from tb_roofline.costs.torch.contractions import (
    ATTENTION_OPS,
    attention_cost,
    attention_flops,
    conv_backward_cost,
    conv_cost,
    conv_flops,
    einsum_cost,
    matmul_cost,
    matmul_shapes,
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
            SCALAR_TYPE_CODES.get(code, x.precision) if isinstance(code, int) else x.precision
        )
    out = Tensor(x.shape, out_prec)
    return OpCost("copy", 0.0, float(x.nbytes + out.nbytes), x.precision, "formula")


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
    if n in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv"):
        return matmul_cost(n, args)
    if n in OUTER_PRODUCTS:
        return outer_cost(n, args)
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


# Outer products (BLAS ger): one multiply per output element; addr also adds its input.
OUTER_PRODUCTS = frozenset({"ger", "outer", "addr"})


def outer_cost(name: str, args: Args) -> OpCost | None:
    """ger / outer(u, v) = u ⊗ v: len(u)·len(v) multiplies; addr(M, u, v) adds M: 2 per
    element (beta and alpha scalings, 1 by default, are not counted). Elementwise work: the
    vectors and M read, the product written."""
    first = 1 if name == "addr" else 0
    u, v = args.tensor(first), args.tensor(first + 1)
    if u is None or v is None or len(u.shape) != 1 or len(v.shape) != 1:
        return None
    out = Tensor((u.shape[0], v.shape[0]), _first_float([u, v]) or u.precision)
    inputs = args.tensors()[: first + 2]
    per = 2 if name == "addr" else 1
    return _cost("elementwise", per * out.numel, inputs, out)


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
    if n in (
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "addbmm",
        "matmul",
        "linear",
        "einsum",
        "mv",
        "addmv",
        "_scaled_mm",
        "_scaled_mm_v2",
        "_grouped_mm",
        "_scaled_grouped_mm",
        "_scaled_grouped_mm_v2",
    ):
        return "matmul"
    if n in ("lstm", "gru", "rnn_tanh", "rnn_relu", "mkldnn_rnn_layer", "_cudnn_rnn", "miopen_rnn"):
        return "recurrent"
    if n.startswith(("upsample", "_upsample")):
        return "resample"
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
