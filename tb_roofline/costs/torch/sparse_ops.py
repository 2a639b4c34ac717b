"""Costs of sparse PyTorch ops from their recorded shapes (docs/pytorch_traces.md, "MoE and
embedding bags"): mixture-of-experts expert GEMMs, grouped GEMMs and embedding-bag lookups.
Conventions are torch_flops's: FLOPs of the products only, bytes = what is read once + written
once. costs/torch/custom_ops.py routes the calls here.
"""

from __future__ import annotations

from tb_roofline.costs.torch.args import FLOAT_PRECISIONS, SIZES, Args, OpCost, Tensor

_INT = frozenset({"s64", "s32", "s16", "s8", "u8", "u32", "u16", "u64"})


def experts_touched(tokens: int, top_k: int, experts: int) -> int:
    """Experts whose weights a MoE call reads: each token goes to `top_k` experts, so at most
    tokens·top_k distinct ones, and never more than the layer has (the trace records no
    routing histogram: min(E, T·k), an upper bound when few tokens share few experts)."""
    return max(0, min(experts, tokens * top_k))


def moe_gemm_cost(
    hidden: Tensor, w1: Tensor, w2: Tensor, top_k: int, extra: list | None = None
) -> OpCost | None:
    """A fused MoE layer: hidden [T, H], w1 [E, N1, H] (gate and up projections), w2 [E, H, N2]
    (down projection), each token routed to `top_k` experts.

    FLOPs: every routed token runs through both expert GEMMs, 2·T·k·N1·H + 2·T·k·H·N2.
    Bytes: hidden states read, output [T, H] written, `extra` (the top-k ids and weights) read,
    and the weights of the experts touched (experts_touched of E). The intermediate
    activations [T·k, N1] are not counted (fused kernels keep them on chip): a lower bound."""
    if len(hidden.shape) != 2 or len(w1.shape) != 3 or len(w2.shape) != 3 or top_k <= 0:
        return None
    t, h = hidden.shape
    e, n1, h1 = w1.shape
    e2, h2, n2 = w2.shape
    if e != e2 or h1 != h or h2 != h or e <= 0:
        return None
    flops = 2 * t * top_k * (n1 * h + h * n2)
    touched = experts_touched(t, top_k, e)
    weights = (w1.nbytes + w2.nbytes) * touched / e
    nbytes = 2 * hidden.nbytes + weights + sum(x.nbytes for x in (extra or []))
    precision = w1.precision if w1.precision in FLOAT_PRECISIONS else hidden.precision
    return OpCost("matmul", float(flops), float(nbytes), precision, "formula")


def fused_experts_cost(args: Args) -> OpCost | None:
    """vLLM / SGLang `fused_experts`-style ops (hidden_states, w1, w2, topk_weights, topk_ids,
    ...): the first 2-D float tensor is the hidden states, the first two 3-D tensors the expert
    weights, a 2-D integer tensor [T, k] the top-k ids (k from its shape)."""
    tensors = [x for x in map(args.tensor, range(len(args))) if x is not None]
    hidden = next(
        (x for x in tensors if len(x.shape) == 2 and x.precision in FLOAT_PRECISIONS), None
    )
    weights = [x for x in tensors if len(x.shape) == 3]
    ids = next((x for x in tensors if len(x.shape) == 2 and x.precision in _INT), None)
    if hidden is None or len(weights) < 2 or ids is None or ids.shape[0] != hidden.shape[0]:
        return None
    topk_w = next(
        (
            x
            for x in tensors
            if x is not hidden
            and len(x.shape) == 2
            and x.shape == ids.shape
            and x.precision in FLOAT_PRECISIONS
        ),
        None,
    )
    extra = [ids] + ([topk_w] if topk_w is not None else [])
    return moe_gemm_cost(hidden, weights[0], weights[1], ids.shape[1], extra)


def grouped_mm_cost(args: Args) -> OpCost | None:
    """aten::_grouped_mm(mat_a, mat_b, offs, bias, out_dtype): a [M, K] (the groups' rows one
    after another, split by `offs`) times b [G, K, N] (one matrix per group): each row meets
    one group's matrix, 2·M·K·N FLOPs; or [G, M, K] times [G, K, N], 2·G·M·K·N. Bytes: a, b,
    offs read, the output [M, N] (or [G, M, N]) written in a's type."""
    a, b = args.tensor(0), args.tensor(1)
    if a is None or b is None or len(b.shape) != 3:
        return None
    g, k, n = b.shape
    if len(a.shape) == 2 and a.shape[1] == k:
        m = a.shape[0]
        flops, out = 2 * m * k * n, Tensor((m, n), a.precision)
    elif len(a.shape) == 3 and a.shape[0] == g and a.shape[2] == k:
        m = a.shape[1]
        flops, out = 2 * g * m * k * n, Tensor((g, m, n), a.precision)
    else:
        return None
    offs = args.tensor(2)
    nbytes = a.nbytes + b.nbytes + out.nbytes + (offs.nbytes if offs is not None else 0)
    return OpCost("matmul", float(flops), float(nbytes), a.precision, "formula")


def embedding_bag_cost(args: Args) -> OpCost | None:
    """aten::embedding_bag / _embedding_bag(weight [R, D], indices, offsets, scale_grad_by_freq,
    mode, sparse, per_sample_weights, include_last_offset, ...): each index reads one table row.

    indices 1-D [L] with offsets [B] (B + 1 with include_last_offset), or 2-D [B, L] (fixed
    bags). Bytes: L rows of D elements read (L·D·size; the table itself is never read whole),
    the indices, offsets and per-sample weights read, the output [B, D] written. FLOPs: the
    products only: L·D multiplies with per-sample weights, else 0 (pooling is adds)."""
    w, idx = args.tensor(0), args.tensor(1)
    if w is None or idx is None or len(w.shape) != 2 or not 1 <= len(idx.shape) <= 2:
        return None
    d = w.shape[1]
    lookups = idx.numel
    offsets = args.tensor(2)
    if len(idx.shape) == 2:
        bags = idx.shape[0]
    elif offsets is not None and len(offsets.shape) == 1:
        bags = offsets.shape[0] - (1 if args.value(7) is True else 0)
    else:
        return None
    psw = args.tensor(6)
    psw = psw if psw is not None and psw.numel == lookups else None
    size = SIZES.get(w.precision, 4)
    nbytes = lookups * d * size + idx.nbytes + max(bags, 0) * d * size
    nbytes += (offsets.nbytes if offsets is not None else 0) + (psw.nbytes if psw else 0)
    flops = lookups * d if psw is not None else 0
    return OpCost("embedding", float(flops), float(nbytes), w.precision, "formula")
