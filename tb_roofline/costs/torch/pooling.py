"""Costs of PyTorch pooling ops from their recorded shapes and concrete arguments
(docs/pytorch_traces.md, "Pooling"): max and average pooling in 1-3 spatial dimensions,
their adaptive forms, and their gradients. costs/torch/custom_ops.py routes the calls here.

FLOPs follow XLA's reduce-window and select-and-scatter counts (costs/hlo/cost_model.py), so that a
PyTorch max-pool and the same JAX max-pool (a reduce-window) land on the same point:
- a window reduction: (window − 1) operations per output element (comparisons for max, adds
  for average), plus one divide per output for average pooling;
- the gradient of max pooling with its indices: one add per gradient element (the indices
  say where it goes: no comparisons);
- the gradient of average pooling: one add per (gradient element, window position).
`torch.utils.flop_counter` counts no FLOPs for pooling (it registers no formula): the
deviation is stated in the docs. Bytes: every tensor read once and written once (input read,
output and indices written; the gradient, indices read and the input-sized gradient written).
"""

from __future__ import annotations

import math

from tb_roofline.costs.torch.args import Args, OpCost, Tensor, _tuple

_MAX = ("max_pool1d", "max_pool2d", "max_pool3d")
_MAX_WITH_INDICES = (
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
)
_AVG = ("avg_pool1d", "avg_pool2d", "avg_pool3d")
_ADAPTIVE = (
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "_adaptive_avg_pool2d",
    "_adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
)
_MAX_BACKWARD = ("max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward")
_AVG_BACKWARD = ("avg_pool2d_backward", "avg_pool3d_backward")
_ADAPTIVE_BACKWARD = (
    "_adaptive_avg_pool2d_backward",
    "_adaptive_avg_pool3d_backward",
    "adaptive_max_pool2d_backward",
    "adaptive_max_pool3d_backward",
)
POOL_OPS = frozenset(
    _MAX + _MAX_WITH_INDICES + _AVG + _ADAPTIVE + _MAX_BACKWARD + _AVG_BACKWARD + _ADAPTIVE_BACKWARD
)


def _spatial_dims(name: str) -> int:
    return next(int(c) for c in name if c in "123")


def pool_output_size(
    size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> int:
    """PyTorch's pooling output length (pooling_output_shape in ATen's Pool.h): with
    `ceil_mode` the last window may start past the input, but not inside the right padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _window_args(name: str, args: Args, first: int):
    """(kernel, stride, padding, dilation, ceil_mode) from the concrete args at `first`.
    max pooling: kernel, stride, padding, dilation, ceil_mode; average pooling: kernel,
    stride, padding, ceil_mode (no dilation)."""
    n = _spatial_dims(name)
    kernel = _tuple(args.value(first), n, None) if args.value(first) is not None else None
    if kernel is None or not all(k > 0 for k in kernel):
        return None
    stride_value = args.value(first + 1)
    stride = kernel if stride_value in (None, []) else _tuple(stride_value, n, None)
    padding = _tuple(args.value(first + 2, 0), n, 0)
    if name.startswith("max_pool"):
        dilation = _tuple(args.value(first + 3, 1), n, 1)
        ceil_mode = args.value(first + 4, False)
    else:
        dilation = (1,) * n
        ceil_mode = args.value(first + 3, False)
    if (
        stride is None
        or padding is None
        or dilation is None
        or not all(s > 0 for s in stride)
        or not all(p >= 0 for p in padding)
        or not all(d > 0 for d in dilation)
    ):
        return None
    return kernel, stride, padding, dilation, bool(ceil_mode)


def _pooled_shape(x: Tensor, n: int, window) -> tuple | None:
    if len(x.shape) < n + 1:
        return None
    kernel, stride, padding, dilation, ceil_mode = window
    spatial = tuple(
        pool_output_size(s, k, st, p, d, ceil_mode)
        for s, k, st, p, d in zip(x.shape[-n:], kernel, stride, padding, dilation)
    )
    if not all(s > 0 for s in spatial):
        return None
    return x.shape[:-n] + spatial


def pool_cost(name: str, args: Args) -> OpCost | None:
    """The cost of one pooling call (`name` without `aten::`), or None when its shapes or
    window arguments were not recorded."""
    x = args.tensor(0)
    if x is None or name not in POOL_OPS:
        return None
    n = _spatial_dims(name)
    if name in _MAX or name in _MAX_WITH_INDICES or name in _AVG:
        window = _window_args(name, args, 1)
        out_shape = _pooled_shape(x, n, window) if window else None
        if out_shape is None:
            return None
        out = Tensor(out_shape, x.precision)
        size = math.prod(window[0])
        flops = (size - 1) * out.numel + (out.numel if name in _AVG else 0)
        written = out.nbytes + (Tensor(out_shape, "s64").nbytes if name in _MAX_WITH_INDICES else 0)
        return OpCost("reduction", float(flops), float(x.nbytes + written), x.precision, "formula")
    if name in _ADAPTIVE:
        size = _tuple(args.value(1), n, None) if args.value(1) is not None else None
        if size is None or len(x.shape) < n + 1 or not all(s > 0 for s in size):
            return None
        out = Tensor(x.shape[:-n] + size, x.precision)
        # Windows that tile the input (sizes that divide): in − out reductions, out divides
        # for the average; overlapping windows (sizes that do not divide) do more: a lower bound.
        flops = max(x.numel - out.numel, 0) + (out.numel if "avg" in name else 0)
        written = out.nbytes + (Tensor(out.shape, "s64").nbytes if "max" in name else 0)
        return OpCost("reduction", float(flops), float(x.nbytes + written), x.precision, "formula")
    # Gradients: (grad_output, self, ...): the input-sized gradient written.
    grad, inp = x, args.tensor(1)
    if inp is None:
        return None
    grad_in = Tensor(inp.shape, grad.precision)
    if name in _MAX_BACKWARD or name.startswith("adaptive_max"):
        indices = args.tensor(len(args) - 1) if name in _MAX_BACKWARD else args.tensor(2)
        read = grad.nbytes + (indices.nbytes if indices is not None else 0)
        return OpCost(
            "reduction", float(grad.numel), float(read + grad_in.nbytes), grad.precision, "formula"
        )
    if name in _AVG_BACKWARD:
        window = _window_args(name, args, 2)
        if window is None:
            return None
        flops = grad.numel * math.prod(window[0])
        return OpCost(
            "reduction",
            float(flops),
            float(grad.nbytes + grad_in.nbytes),
            grad.precision,
            "formula",
        )
    # Adaptive average gradient: each gradient element spread over its window (the windows
    # tile the input when sizes divide): one add per input element.
    return OpCost(
        "reduction",
        float(inp.numel),
        float(grad.nbytes + grad_in.nbytes),
        grad.precision,
        "formula",
    )
