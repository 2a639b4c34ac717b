"""Costs of PyTorch layers that run as one op over recorded shapes: LSTMs (`aten::lstm`, one
layer of it `aten::mkldnn_rnn_layer`) and upsampling (`aten::upsample_*`, forward and
backward). costs/torch/custom_ops.py routes the calls here; docs/pytorch_traces.md states the
conventions.

LSTM, per layer, direction, time step and batch row (hidden size H, layer input size I):
- the gate products, x·W_ihᵀ and h·W_hhᵀ: 2·4H·(I + H) FLOPs (as FlopCounterMode counts the
  same products written as `F.linear` calls);
- the bias adds, b_ih and b_hh onto the 4H gates: 2·4H (with biases);
- the cell: 4H gate activations (3 sigmoids, 1 tanh), c′ = f·c + i·g (3H), tanh(c′) (H),
  h′ = o·tanh(c′) (H): 9H, one FLOP per element as for every elementwise op.
Bytes: per layer and direction, its input sequence, weights, biases and initial h, c read once,
its output sequence and final h, c written once (a layer's output is the next one's input: each
layer reads and writes it). Projections (`proj_size`) are not costed (None).

Upsampling: each output element weighs 2^d input taps (linear family, d spatial dims) or 4^d
(bicubic): taps multiplies and taps − 1 adds, 2·taps − 1 FLOPs; nearest copies (0 FLOPs).
The gradient scatters each output gradient element to its taps: 2·taps FLOPs per element.
Bytes: the input read once, the output written once (the gradient: grad_output read,
grad_input written).
"""

from __future__ import annotations

import math

from tb_roofline.costs.torch.args import Args, OpCost, Tensor

GATES = 4  # an LSTM cell's input, forget, cell and output gates
CELL_FLOPS_PER_H = 9  # 4 activations, f·c + i·g (3), tanh(c′), o·tanh(c′)


def lstm_layer_flops(steps_rows: int, inp: int, hidden: int, bias: bool) -> int:
    """FLOPs of one LSTM layer and direction over `steps_rows` (time steps × batch rows)."""
    per = 2 * GATES * hidden * (inp + hidden) + CELL_FLOPS_PER_H * hidden
    if bias:
        per += 2 * GATES * hidden
    return steps_rows * per


def _layer_bytes(steps_rows: int, inp: int, hidden: int, bias: bool, batch: int, size: int):
    weights = GATES * hidden * (inp + hidden) + (2 * GATES * hidden if bias else 0)
    seq = steps_rows * (inp + hidden)  # the input sequence read, the output sequence written
    state = 4 * batch * hidden  # h0, c0 read; h_n, c_n written
    return (weights + seq + state) * size


def lstm_cost(args: Args) -> OpCost | None:
    """aten::lstm(input, hx [h0, c0], params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first): every layer and direction, from the recorded shapes."""
    x = args.tensor(0)
    hx, params = args.tensor_list(1), args.tensor_list(2)
    bias, layers, bidir = args.value(3), args.value(4), args.value(7)
    if x is None or not hx or not params or len(x.shape) not in (2, 3):
        return None
    if not isinstance(bias, bool) or not isinstance(bidir, bool) or not isinstance(layers, int):
        return None
    dirs = 2 if bidir else 1
    per_dir = 4 if bias else 2
    if layers < 1 or len(params) != layers * dirs * per_dir or len(hx[0].shape) < 2:
        return None
    hidden = hx[0].shape[-1]
    batch = hx[0].shape[1] if len(hx[0].shape) == 3 else 1
    steps_rows = x.numel // max(x.shape[-1], 1)
    flops = nbytes = 0
    for layer in range(layers):
        for d in range(dirs):
            w_ih = params[(layer * dirs + d) * per_dir]
            if len(w_ih.shape) != 2 or w_ih.shape[0] != GATES * hidden:
                return None
            inp = w_ih.shape[1]
            flops += lstm_layer_flops(steps_rows, inp, hidden, bias)
            nbytes += _layer_bytes(
                steps_rows, inp, hidden, bias, batch, Tensor((), x.precision).nbytes
            )
    return OpCost("recurrent", float(flops), float(nbytes), x.precision, "formula")


def mkldnn_layer_cost(args: Args) -> OpCost | None:
    """aten::mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse, batch_sizes,
    mode, hidden_size, num_layers, has_biases, ...): one LSTM layer and direction (mode 2)."""
    x, w_ih, h0 = args.tensor(0), args.tensor(1), args.tensor(5)
    mode, hidden, bias = args.value(9), args.value(10), args.value(12)
    if x is None or w_ih is None or h0 is None or mode != 2 or not isinstance(bias, bool):
        return None
    if not isinstance(hidden, int) or len(w_ih.shape) != 2 or w_ih.shape[0] != GATES * hidden:
        return None
    steps_rows = x.numel // max(x.shape[-1], 1)
    batch = h0.shape[0] if len(h0.shape) == 2 else 1
    inp = w_ih.shape[1]
    size = Tensor((), x.precision).nbytes
    return OpCost(
        "recurrent",
        float(lstm_layer_flops(steps_rows, inp, hidden, bias)),
        float(_layer_bytes(steps_rows, inp, hidden, bias, batch, size)),
        x.precision,
        "formula",
    )


# ------------------------------------------------------------------------------ upsampling

# name -> (spatial dims, taps per output element)
UPSAMPLE_OPS = {
    "upsample_linear1d": (1, 2),
    "upsample_bilinear2d": (2, 4),
    "upsample_trilinear3d": (3, 8),
    "upsample_bicubic2d": (2, 16),
    "upsample_nearest1d": (1, 1),
    "upsample_nearest2d": (2, 1),
    "upsample_nearest3d": (3, 1),
    "_upsample_nearest_exact1d": (1, 1),
    "_upsample_nearest_exact2d": (2, 1),
    "_upsample_nearest_exact3d": (3, 1),
}


def _upsampled(x: Tensor, n: int, size, scales) -> tuple | None:
    """The output shape: the recorded output size, else floor(input × scale) per dim."""
    if len(x.shape) < n + 1:
        return None
    if isinstance(size, list) and len(size) == n and all(type(s) is int and s > 0 for s in size):
        return x.shape[:-n] + tuple(size)
    if (
        isinstance(scales, list)
        and len(scales) == n
        and all(type(s) in (int, float) and 0 < s < 1e6 for s in scales)
    ):
        out = tuple(math.floor(d * s) for d, s in zip(x.shape[-n:], scales))
        return x.shape[:-n] + out if all(o > 0 for o in out) else None
    return None


def upsample_cost(name: str, args: Args) -> OpCost | None:
    """upsample_*(input, output_size, [align_corners,] scale_factors) (the `.vec` overloads,
    output_size None) or upsample_*(input, output_size, [align_corners,] scales...), and their
    `_backward` (grad_output, output_size, input_size, ...)."""
    backward = name.endswith("_backward")
    n, taps = UPSAMPLE_OPS[name[: -len("_backward")] if backward else name]
    x = args.tensor(0)
    if x is None:
        return None
    if backward:
        size = args.value(2)
        if not isinstance(size, list) or len(size) != len(x.shape):
            return None
        if not all(type(s) is int and s > 0 for s in size):
            return None
        grad_in = Tensor(tuple(size), x.precision)
        flops = 2 * taps * x.numel if taps > 1 else 0
        return OpCost(
            "resample", float(flops), float(x.nbytes + grad_in.nbytes), x.precision, "formula"
        )
    scales = args.value(len(args) - 1)
    if not isinstance(scales, list):
        scales = [args.value(i) for i in range(len(args) - n, len(args))]
    out_shape = _upsampled(x, n, args.value(1), scales)
    if out_shape is None:
        return None
    out = Tensor(out_shape, x.precision)
    flops = (2 * taps - 1) * out.numel if taps > 1 else 0
    return OpCost("resample", float(flops), float(x.nbytes + out.nbytes), x.precision, "formula")
