"""Fused attention custom calls: FLOPs and bytes.

Counted as `torch.utils.flop_counter` counts scaled-dot-product attention, so XLA and PyTorch
profiles agree (docs/hlo_cost_model.md):
- forward: two batched GEMMs, Q·Kᵀ and P·V: 2·B·H·Sq·Skv·(Dqk + Dv) (= 4·B·H·Sq·Skv·D);
- backward: five (Q·Kᵀ recomputed, dV, dP, dQ, dK): 2·B·H·Sq·Skv·(3·Dqk + 2·Dv) (= 2.5× the
  forward for Dqk = Dv).
H is the number of query heads (grouped-query attention shares K/V heads, not the work). Masks
are NOT discounted (the torch counter ignores them): a causal or windowed call is counted as a
full one, and the reader says which rows have such a mask. Bytes: every operand read once and
every result array written once, except byte-typed scratch (workspace) results.

Targets:
- Transformer Engine (JAX, CUDA and ROCm): `te_fused_attn_forward_ffi` /
  `te_fused_attn_backward_ffi`, whose backend config is an MLIR attribute dictionary
  (`{attn_heads = 16 : i64, input_batch = 2 : i64, q_max_seqlen = 2048 : i64, ...}`) giving
  the batch, heads, sequence lengths, head dims, GQA groups, mask type and window.
- cuDNN in XLA GPU: `__cudnn$fmha*` (forward) and `__cudnn$fmha*Backward*`, sizes from Q, K, V
  and the dot dimension numbers of the `cudnn_fmha_backend_config`.
"""

from __future__ import annotations

import json
import re

from tb_roofline.costs.hlo.cost_basics import prod
from tb_roofline.costs.hlo.module import Instruction
from tb_roofline.costs.hlo.shapes import S8, TUPLE, U8, byte_size

_ATTR = re.compile(rb'"?(\w+)"?\s*[=:]\s*"?(-?\d+|true|false)\b')
# Transformer Engine's NVTE_Mask_Type: 0 none, 1 padding, 2 causal, 3 padding + causal,
# 4 causal (bottom right), 5 padding + causal (bottom right).
TE_CAUSAL_MASKS = frozenset((2, 3, 4, 5))


def is_attention_target(target: str) -> bool:
    t = target.lower()
    return t.startswith("te_fused_attn_") or t.startswith("__cudnn$fmha")


def is_backward(target: str) -> bool:
    return "backward" in target.lower()


def attention_flops(b: int, h: int, sq: int, skv: int, dqk: int, dv: int, backward: bool) -> int:
    """FLOPs of one call, as torch.utils.flop_counter counts SDPA (masks not discounted):
    forward Q·Kᵀ and P·V; backward the recomputed Q·Kᵀ, dV, dP, dQ and dK. Exact integers (the
    PyTorch reader uses this function too, costs/torch/flops.py)."""
    pairs = 2 * int(b) * int(h) * int(sq) * int(skv)
    return pairs * (3 * int(dqk) + 2 * int(dv)) if backward else pairs * (int(dqk) + int(dv))


class Attention:
    """What one fused-attention call computes."""

    __slots__ = ("batch", "heads", "q_len", "kv_len", "qk_dim", "v_dim", "backward", "mask")

    def __init__(self, batch, heads, q_len, kv_len, qk_dim, v_dim, backward, mask=""):
        self.batch, self.heads, self.q_len, self.kv_len = batch, heads, q_len, kv_len
        self.qk_dim, self.v_dim, self.backward, self.mask = qk_dim, v_dim, backward, mask

    @property
    def flops(self) -> float:
        return attention_flops(
            self.batch, self.heads, self.q_len, self.kv_len, self.qk_dim, self.v_dim, self.backward
        )


def _attrs(raw: bytes) -> dict:
    out = {}
    for k, v in _ATTR.findall(raw):
        key = k.decode()
        if key not in out:
            out[key] = True if v == b"true" else False if v == b"false" else int(v)
    return out


def te_attention(ins: Instruction) -> Attention | None:
    """Transformer Engine: everything from the backend config; None when it lacks a size."""
    a = _attrs(bytes(ins.proto.backend_config))
    need = ("input_batch", "attn_heads", "q_max_seqlen", "kv_max_seqlen")
    if any(not isinstance(a.get(k), int) or a[k] <= 0 for k in need):
        return None
    dqk = a.get("qk_head_dim") or a.get("head_dim") or 0
    dv = a.get("v_head_dim") or dqk
    if dqk <= 0 or dv <= 0:
        return None
    masks = []
    if a.get("mask_type") in TE_CAUSAL_MASKS:
        masks.append("causal")
    if any(
        isinstance(a.get(k), int) and a[k] >= 0 for k in ("window_size_left", "window_size_right")
    ):
        masks.append(f"window ({a.get('window_size_left', -1)}, {a.get('window_size_right', -1)})")
    return Attention(
        a["input_batch"],
        a["attn_heads"],
        a["q_max_seqlen"],
        a["kv_max_seqlen"],
        dqk,
        dv,
        is_backward(ins.proto.custom_call_target),
        ", ".join(masks),
    )


def _dims(cfg: dict, name: str) -> dict | None:
    d = cfg.get(name)
    return d if isinstance(d, dict) else None


def _split(dims: list, batch, contracting) -> tuple[int, int, int]:
    """(batch size, contracted size, the rest) of one GEMM operand; ValueError when the
    dimension numbers do not fit the operand."""
    b = [int(x) for x in batch or []]
    c = [int(x) for x in contracting or []]
    if any(not 0 <= i < len(dims) for i in b + c) or len(set(b + c)) < len(b + c):
        raise ValueError("dimension numbers outside the operand")
    rest = [n for i, n in enumerate(dims) if i not in b and i not in c]
    return prod(dims[i] for i in b), prod(dims[i] for i in c), prod(rest)


def _side(dims: list, numbers: dict, side: str) -> tuple[int, int, int]:
    return _split(
        dims, numbers.get(f"{side}_batch_dimensions"), numbers.get(f"{side}_contracting_dimensions")
    )


def cudnn_attention(ins: Instruction) -> Attention | None:
    """cuDNN fused attention: Q, K, V are operands 0-2 (forward and backward); their roles come
    from the GEMMs' dimension numbers (forward: bmm1 = Q·Kᵀ, bmm2 = P·V; backward:
    bmm1_grad_gemm1 = dSᵀ·Q, bmm1_grad_gemm2 = dS·K, bmm2_grad_gemm2 = dO·Vᵀ), else the
    [B, S, H, D] layout JAX uses."""
    if len(ins.operands) < 3:
        return None
    q, k, v = (list(ins.operands[i].shape.dims) for i in range(3))
    if not (len(q) == len(k) == len(v) >= 3):
        return None
    try:
        cfg = json.loads(bytes(ins.proto.backend_config) or b"{}")
    except ValueError:
        cfg = {}
    cfg = cfg.get("cudnn_fmha_backend_config", cfg) if isinstance(cfg, dict) else {}
    try:
        return _cudnn_sizes(q, k, v, cfg, is_backward(ins.proto.custom_call_target))
    except (TypeError, ValueError, AttributeError):  # a config that does not fit: no rule
        return None


def _cudnn_sizes(q, k, v, cfg: dict, backward: bool) -> Attention | None:
    if (
        not backward
        and _dims(cfg, "bmm1_dot_dimension_numbers")
        and _dims(cfg, "bmm2_dot_dimension_numbers")
    ):
        d1, d2 = cfg["bmm1_dot_dimension_numbers"], cfg["bmm2_dot_dimension_numbers"]
        bh, dqk, sq = _side(q, d1, "lhs")
        _, _, skv = _side(k, d1, "rhs")
        _, _, dv = _side(v, d2, "rhs")
    elif backward and all(
        _dims(cfg, n)
        for n in (
            "bmm1_grad_gemm1_dot_dimension_numbers",
            "bmm1_grad_gemm2_dot_dimension_numbers",
            "bmm2_grad_gemm2_dot_dimension_numbers",
        )
    ):
        g1 = cfg["bmm1_grad_gemm1_dot_dimension_numbers"]
        g2 = cfg["bmm1_grad_gemm2_dot_dimension_numbers"]
        g3 = cfg["bmm2_grad_gemm2_dot_dimension_numbers"]
        bh, sq, dqk = _side(q, g1, "rhs")
        _, skv, _ = _side(k, g2, "rhs")
        _, dv, _ = _side(v, g3, "rhs")
    else:  # [B, S, H, D]
        bh, sq, dqk = q[0] * q[-2], prod(q[1:-2]), q[-1]
        skv, dv = prod(k[1:-2]), v[-1]
    if min(bh, sq, skv, dqk, dv) <= 0:
        return None
    mask = "causal" if "causal" in json.dumps(cfg).lower() else ""
    return Attention(bh, 1, sq, skv, dqk, dv, backward, mask)  # B·H as one batch


def attention_of(ins: Instruction) -> Attention | None:
    target = ins.proto.custom_call_target
    if target.lower().startswith("te_fused_attn_"):
        return te_attention(ins)
    return cudnn_attention(ins)


def attention_bytes(ins: Instruction) -> tuple[float, float]:
    """(read, written): operands once, result arrays once (byte-typed scratch left out)."""
    read = float(sum(byte_size(o.shape) for o in ins.operands))
    leaves = ins.shape.tuple_shapes if ins.shape.etype == TUPLE else [ins.shape]
    written = float(sum(byte_size(s) for s in leaves if s.is_array and s.etype not in (U8, S8)))
    return read, written
