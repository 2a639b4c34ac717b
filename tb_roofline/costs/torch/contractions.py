"""Costs of the contractions among PyTorch ops (matmul, einsum, convolution, attention) from
what `record_shapes=True` writes into a trace, with the conventions of costs/torch/flops.py
(which dispatches to them): FLOPs of the products only, as `torch.utils.flop_counter`
counts them; bytes = every tensor argument read once and the output written once.
"""

from __future__ import annotations

import math

from tb_roofline.costs.hlo import attention as hlo_attention
from tb_roofline.costs.torch.args import (
    Args,
    OpCost,
    Tensor,
    _cost,
    _tuple,
    broadcast,
)

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


# The backends' convolutions take padding before stride (and cuDNN's no bias): the positions
# of (padding, stride, dilation, groups) in their argument lists.
_BACKEND_CONV_ARGS = {
    "mkldnn_convolution": (3, 4, 5, 6),
    "miopen_convolution": (3, 4, 5, 6),
    "miopen_depthwise_convolution": (3, 4, 5, 6),
    "cudnn_convolution": (2, 3, 4, 5),
}


def _backend_conv_params(name: str, args: Args):
    """_conv_params for the backends' own convolution ops (never transposed)."""
    x, w = args.tensor(0), args.tensor(1)
    if x is None or w is None or len(x.shape) < 3 or len(w.shape) != len(x.shape):
        return None
    n = len(x.shape) - 2
    pad, stride, dil, groups = (args.value(i) for i in _BACKEND_CONV_ARGS[name])
    if isinstance(pad, str) or None in (pad, stride, dil):
        return None
    stride, pad, dil = _tuple(stride, n, 1), _tuple(pad, n, 0), _tuple(dil, n, 1)
    if None in (stride, pad, dil):
        return None
    groups = int(groups) if isinstance(groups, (int, float)) else 1
    return x, w, None, stride, pad, dil, False, (0,) * n, groups


def conv_gemm(name: str, args: Args) -> tuple | None:
    """The implicit GEMM a convolution runs as (cuDNN, MIOpen and oneDNN tile this product),
    (M, N, K): M = batch × output positions, N = output channels, K = input channels per
    group × filter positions. A transposed convolution runs as the data gradient of the
    forward one: its output positions and channels, the input channels per group. None when
    the trace does not record stride, padding and dilation (the output size is then unknown)."""
    p = _backend_conv_params(name, args) if name in _BACKEND_CONV_ARGS else _conv_params(name, args)
    if p is None:
        return None
    x, w, _, stride, padding, dilation, transposed, output_padding, groups = p
    spatial = conv_output_spatial(
        x.shape[2:], w.shape[2:], stride, padding, dilation, transposed, output_padding
    )
    if transposed:
        cout, cin_per_group = w.shape[1] * groups, w.shape[0] // max(groups, 1)
    else:
        cout, cin_per_group = w.shape[0], w.shape[1]
    return x.shape[0] * math.prod(spatial), cout, cin_per_group * math.prod(w.shape[2:])


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
    flops = attention_flops(b, h, lq, lk, dq, dv, backward=backward)
    return _cost("attention", flops, inputs, outs)
