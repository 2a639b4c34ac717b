"""Costs of serving engines' custom ops (SGLang, vLLM, aiter, FlashInfer, sgl_kernel) from their
recorded shapes (docs/pytorch_traces.md, "Serving ops"), and of their attention from a step's
annotation (readers/serving_steps.py).

Conventions are torch_flops's: FLOPs of the products (matmul, attention) and 1 per output
element for elementwise work, bytes = what an ideal kernel reads and writes once. Engines wrap
their kernels in several layers of ops (`sglang_profiler::rmsnorm_…` > `aiter::rmsnorm`); each
layer gets the same formula, and the reader charges a call to the outermost op with a cost, so
nothing is counted twice.
"""

from __future__ import annotations

import re

from tb_roofline.costs.torch.args import FLOAT_PRECISIONS, SIZES, Args, OpCost, Tensor

# Attention ops whose work depends on per-sequence lengths (values, not shapes): paged, varlen
# and batch attention of aiter, FlashInfer, vLLM, SGLang and FlashAttention's varlen entry.
_ATTENTION = re.compile(
    r"attention|attn_varlen|varlen_fwd|mha_batch|mha_varlen|batch_prefill|"
    r"batch_decode|fwd_kvcache|paged_attn|flash_attn_with_kvcache|"
    r"BatchPrefill|BatchDecode|unified_attention",
    re.I,
)
_NOT_ATTENTION = re.compile(r"^(aten::|flash_attn::_flash_attn_(forward|backward)$)|backward", re.I)
_RMS = re.compile(r"rms_?norm", re.I)
_ACT_AND_MUL = re.compile(r"(silu|gelu|gelu_tanh|gelu_quick|relu2?|swiglu)_and_mul", re.I)
_KV_WRITE = re.compile(
    r"store_cache|store_kvcache|reshape_and_cache|set_kv_buffer|"
    r"concat_and_cache",
    re.I,
)
_ROTARY = re.compile(r"rotary_embedding|apply_rope", re.I)
_QUANT = re.compile(r"(?<!un)quant", re.I)  # not `unquantized_gemm`
_SAMPLING = re.compile(r"top_k|top_p|min_p|sampling_from", re.I)
_GEMM = re.compile(r"^aiter::gemm_a16w16$|^sgl_kernel::bmm|^vllm::rocm_unquantized_gemm$")


def is_serving_attention(name: str) -> bool:
    """An attention op whose cost needs the step's sequence lengths."""
    return bool(_ATTENTION.search(name)) and not _NOT_ATTENTION.search(name)


def op_cost(name: str, args: Args) -> OpCost | None:
    """The cost of a serving custom op from its shapes, or None when none applies (attention
    is costed per step: `attention_cost`)."""
    if name.startswith("aten::") or is_serving_attention(name):
        return None
    if _RMS.search(name):
        return rms_norm_cost(args, fused_add="add" in name.lower())
    if _ACT_AND_MUL.search(name):
        return act_and_mul_cost(args)
    if _KV_WRITE.search(name):
        return kv_write_cost(args)
    if _ROTARY.search(name):
        return rotary_cost(args)
    if _GEMM.search(name):
        return gemm_cost(args)
    if _SAMPLING.search(name):
        return _read_all(args, "reduction")
    if _QUANT.search(name):
        return quant_cost(args, dynamic="dynamic" in name or "per_token" in name)
    return None


def _tensors(args: Args) -> list[Tensor]:
    return [t for t in (args.tensor(i) for i in range(len(args))) if t is not None]


def rms_norm_cost(args: Args, fused_add: bool) -> OpCost | None:
    """RMSNorm over the last dimension: 4 FLOPs per element (square, mean, rsqrt-scale,
    weight), 1 more for a fused residual add. Bytes: input (and residual) read, output (and the
    updated residual) written, the weight read: 2 (4 fused) activation transfers."""
    ts = _tensors(args)
    x = next((t for t in ts if len(t.shape) >= 2), None)
    if x is None:
        return None
    w = next((t for t in ts if len(t.shape) == 1 and t.shape[0] == x.shape[-1]), None)
    flops = (5 if fused_add else 4) * x.numel
    nbytes = (4 if fused_add else 2) * x.nbytes + (w.nbytes if w is not None else 0)
    return OpCost("normalization", float(flops), float(nbytes), x.precision, "formula")


def act_and_mul_cost(args: Args) -> OpCost | None:
    """act(x[..., :N]) · x[..., N:] (out [T, N], input [T, 2N]): 2 FLOPs per output element
    (the activation and the product, 1 each as torch counts elementwise ops)."""
    ts = [t for t in _tensors(args) if len(t.shape) >= 1]
    for a in ts:
        for b in ts:
            if a is not b and a.shape[:-1] == b.shape[:-1] and b.shape[-1] == 2 * a.shape[-1]:
                return OpCost(
                    "elementwise",
                    float(2 * a.numel),
                    float(a.nbytes + b.nbytes),
                    b.precision,
                    "formula",
                )
    return None


def kv_write_cost(args: Args) -> OpCost | None:
    """New keys and values into the paged cache (k, v, k_cache, v_cache, slots, ...): k and v
    read, the same elements written in the cache's element type, the slot indices read; the
    cache itself is not read."""
    ts = _tensors(args)
    if len(ts) < 4:
        return None
    k, v, kc, vc = ts[:4]
    slots = ts[4] if len(ts) > 4 else None
    written = k.numel * SIZES.get(kc.precision, 4) + v.numel * SIZES.get(vc.precision, 4)
    nbytes = k.nbytes + v.nbytes + written + (slots.nbytes if slots is not None else 0)
    return OpCost("copy", 0.0, float(nbytes), k.precision, "formula")


def rotary_cost(args: Args) -> OpCost | None:
    """(positions, query, key, head_size, cos_sin_cache, is_neox): 3 FLOPs per rotated element
    (4 multiplies and 2 adds per pair) over the cache width of every query and key head; q and
    k read and written in place, positions and one cache row per token read."""
    pos, q, k, cache = args.tensor(0), args.tensor(1), args.tensor(2), args.tensor(4)
    head = args.value(3)
    if (
        pos is None
        or q is None
        or k is None
        or cache is None
        or type(head) is not int
        or head <= 0
        or len(cache.shape) != 2
        or not q.shape
        or not k.shape
    ):
        return None
    heads = (q.numel + k.numel) // head
    flops = 3 * cache.shape[1] * heads
    nbytes = (
        pos.nbytes
        + 2 * (q.nbytes + k.nbytes)
        + pos.numel * cache.shape[1] * SIZES.get(cache.precision, 4)
    )
    return OpCost("elementwise", float(flops), float(nbytes), q.precision, "formula")


def quant_cost(args: Args, dynamic: bool) -> OpCost | None:
    """fp8/int8 quantisation (and dequantisation): 1 multiply per element of the largest
    tensor, 2 when the scale is computed from the data (an abs-max per token); every tensor
    argument read or written once."""
    ts = _tensors(args)
    if not ts:
        return None
    big = max(ts, key=lambda t: t.numel)
    flops = (2 if dynamic else 1) * big.numel
    wide = max(ts, key=lambda t: (t.numel, SIZES.get(t.precision, 4)))
    return OpCost(
        "elementwise", float(flops), float(sum(t.nbytes for t in ts)), wide.precision, "formula"
    )


def _read_all(args: Args, category: str) -> OpCost | None:
    """1 FLOP (a comparison or an add) per element of the largest tensor; all tensors read."""
    ts = _tensors(args)
    if not ts:
        return None
    big = max(ts, key=lambda t: t.numel)
    return OpCost(
        category, float(big.numel), float(sum(t.nbytes for t in ts)), big.precision, "formula"
    )


def gemm_cost(args: Args) -> OpCost | None:
    """A [M, K] × W [N, K]ᵀ (+ bias [N]; aiter's and vLLM's linear-layer GEMMs): 2·M·N·K (the
    bias add not counted, as torch counts addmm); A, W and the bias read, [M, N] written in A's
    type."""
    a, w = args.tensor(0), args.tensor(1)
    if a is None or w is None or len(w.shape) != 2 or not a.shape or a.shape[-1] != w.shape[1]:
        return None
    m = a.numel // a.shape[-1]
    n, k = w.shape
    out = Tensor((m, n), a.precision)
    bias = args.tensor(2)
    extra = bias.nbytes if bias is not None and bias.shape == (n,) else 0
    return OpCost(
        "matmul",
        float(2 * m * n * k),
        float(a.nbytes + w.nbytes + out.nbytes + extra),
        a.precision,
        "formula",
    )


# ------------------------------------------------------------------------------ attention


def attention_geometry(args: Args):
    """(q, query heads, head dim, KV heads, KV tensor) of an attention call: q is the first
    [T, H, D] tensor; the KV tensor the first one of rank ≥ 3 with the same head dim and another
    shape (a paged cache [blocks, block, H_kv, D] or [T, H_kv, D]); none: H_kv = H_q."""
    ts = [t for t in _tensors(args) if t.precision in FLOAT_PRECISIONS]
    q = next((t for t in ts if len(t.shape) == 3), None)
    if q is None or not all(q.shape):
        return None
    d = q.shape[2]
    # (a cache stored as bytes, `unsigned char` fp8, counts: its element size is what moves)
    kv = next(
        (
            t
            for t in _tensors(args)
            if len(t.shape) >= 3 and t.shape[-1] == d and t.shape != q.shape
        ),
        None,
    )
    hkv = kv.shape[-2] if kv is not None else q.shape[1]
    return q, q.shape[1], d, hkv, kv


def phases_of_call(q_tokens: int, facts) -> tuple | None:
    """Which phases of the step one attention call covers, from its query rows: both (the
    rows equal — or, padded for a captured graph, exceed — the step's tokens), or one phase
    whose tokens they equal; None when they match nothing."""
    ctx, gen = facts.context, facts.generation
    total = facts.total("sq")
    if ctx is None or gen is None or total is None:
        return None
    if q_tokens >= total and total > 0:
        return (ctx, gen)
    if ctx.requests and q_tokens == ctx.sq:
        return (ctx,)
    if gen.requests and q_tokens == gen.sq:
        return (gen,)
    return None


def windowed_sums(phase, window: int | None) -> tuple[int, int, bool]:
    """(Σ Sq·min(Sk, W), Σ min(Sk, W), exact) of one phase on a layer whose queries see at most
    W keys: vLLM's rule (vllm/v1/metrics/perf.py, `total_token_context_product(sliding_window)`:
    each request's tokens × its context clamped to the window). The annotation gives sums, not
    each request's Sk, so the clamp is min(Σ Sq·Sk, W·Σ Sq) and min(Σ Sk, W·requests): exact
    for one request, or when every request's Sk ≤ W (Σ Sk − (requests − 1) ≤ W, each other
    request holding at least one key); else an upper bound. W None: the sums as they are."""
    if window is None:
        return phase.sqsk, phase.sk, True
    exact = phase.requests <= 1 or phase.sk - (phase.requests - 1) <= window
    return min(phase.sqsk, window * phase.sq), min(phase.sk, window * phase.requests), exact


def attention_cost(args: Args, facts, window: int | None = None) -> OpCost | None:
    """One attention call of a step whose annotation gives Σ Sq·Sk per phase: FLOPs
    2·H_q·(D_qk + D_v)·Σ Sq·Sk (= 4·H_q·D·Σ Sq·Sk; every (query, key) pair, a causal prefill
    counted in full as the training rule counts causal attention); bytes: Q read and O written
    (the call's tensors), and the keys and values of Σ Sk tokens read (H_kv heads, the cache's
    element type), not the whole cache. On a sliding-window layer (`window` keys) the sums are
    the clamped ones (`windowed_sums`)."""
    geo = attention_geometry(args)
    if geo is None:
        return None
    q, hq, d, hkv, kv = geo
    phases = phases_of_call(q.shape[0], facts)
    if phases is None or any(
        p.sqsk is None or p.sk is None or p.sq is None for p in phases if p.requests
    ):
        return None
    sums = [windowed_sums(p, window) for p in phases if p.requests]
    sqsk = sum(s[0] for s in sums)
    sk = sum(s[1] for s in sums)
    kv_size = SIZES.get(kv.precision, 2) if kv is not None else SIZES.get(q.precision, 2)
    flops = 4 * hq * d * sqsk
    nbytes = 2 * q.nbytes + 2 * sk * hkv * d * kv_size
    return OpCost("attention", float(flops), float(nbytes), q.precision, "formula")


def attention_bound(args: Args) -> tuple[float, str] | None:
    """Without a step annotation: an upper bound on an attention call's FLOPs, 4·H_q·D·T·L
    with T the query rows and L the largest integer scalar it recorded (its max_seqlen), and
    the formula as text; None when it recorded no such scalar."""
    geo = attention_geometry(args)
    if geo is None:
        return None
    q, hq, d, _, _ = geo
    ints = [
        v for v in (args.value(i) for i in range(len(args))) if type(v) is int and 0 < v < 10**9
    ]
    if not ints:
        return None
    lmax = max(ints)
    t = q.shape[0]
    return float(4 * hq * d * t * lmax), f"4·H_q·D·T·max_seqlen = 4·{hq}·{d}·{t}·{lmax}"
