"""The matmul rules: compute-bound matmuls and convolutions whose shapes do not fill the
device's matrix tiles (`tiling`), and f32 ones on a device with a far higher tf32 or bf16
roof (`precision`). Thresholds, reasons and sources: docs/guidance.md.
"""

from __future__ import annotations

import math

import numpy as np

from tb_roofline.costs.hlo.shapes import element_bytes
from tb_roofline.devices.precision import normalize_precision, plain_precision
from tb_roofline.model.guidance.rule_context import (
    FAR_BELOW_ROOF,
    Context,
    Finding,
    floor_us,
    per_call_efficiency,
    regimes_note,
    us_text,
)

MISALIGNED_SHARE = 0.2  # at least a fifth of the op's time in shapes that do not tile
PRECISION_RATIO = 4.0  # a roof at least 4x higher for another precision
TPU_TILE = (8, 128)  # XLA's TPU array tile: second-minor x minor dimension
# Tensor cores want M, N, K multiples of 16 bytes of the input type (NVIDIA's guide).
GPU_TILE_BYTES = 16
# Precisions that run on tensor cores (plain fp32 runs on CUDA cores: no tile; see precision).
_TENSOR_CORE = frozenset({"tf32", "bf16", "fp16", "fp8", "int8"})
_MATMUL_WORDS = ("matmul", "convolution", "dot", "gemm", "conv")


def tiling(ctx: Context) -> list:
    """Compute-bound matmuls / convolutions far below their roof whose shapes do not fill the
    device's matrix tiles."""
    kind = ctx.device.kind
    if kind not in ("gpu", "tpu"):
        return []
    c, out = ctx.c, []
    cand = ctx.trusted & ctx.compute_bound & (per_call_efficiency(ctx) < FAR_BELOW_ROOF)
    op_shapes = ctx.facts.op_shapes if ctx.facts is not None else {}
    for i in np.flatnonzero(cand).tolist():
        ident = (c["program_id"][i], c["operation"][i], c["precision"][i])
        uses = [u for u in op_shapes.get(ident, []) if u.kind in ("gemm", "array")]
        total = sum(u.time_ps for u in uses)
        if not uses or total <= 0:
            continue
        bad, tile = _misaligned(uses, c["precision"][i])
        share = sum(u.time_ps for u, _ in bad) / total
        gap = float(c["potential_time_saved_us"][i])
        saved = gap * share
        if share < MISALIGNED_SHARE or saved < ctx.min_us:
            continue
        worst = max(bad, key=lambda b: b[0].time_ps)[0].text
        text = _tiling_advice(kind, tile, c["precision"][i], worst)
        out.append(
            Finding(
                "tiling",
                f"{c['operation'][i]}: shapes do not fill the matrix tiles",
                [i],
                _tiling_facts(tile, share, worst, bad),
                saved,
                text[0].upper() + text[1:] + ".",
                i,
                bound_us=gap,
                formula=f"(t − Σ max(F_i/P, B_i/BW)) × misaligned "
                f"share = {us_text(gap)} × {share:.3f} = "
                f"{us_text(saved)}" + regimes_note(ctx, i),
            )
        )
    return out


def _misaligned(uses, precision: str) -> tuple[list, tuple[int, int] | int | None]:
    """([(use, what misses the tile)] of the uses whose shapes do not fill it, the tile): TPU
    arrays against TPU_TILE (the padding share), GPU GEMMs against a tile of GPU_TILE_BYTES
    in the op's element width (the dims that are not a multiple), for tensor-core precisions."""
    bad: list = []
    tile: tuple[int, int] | int | None = None
    for u in uses:
        if u.kind == "array":
            tile = TPU_TILE
            miss = _tpu_waste(u.dims)
        else:
            p = normalize_precision(plain_precision(precision))
            width = element_bytes(p) if p in _TENSOR_CORE else None
            if width is None:
                continue
            tile = max(GPU_TILE_BYTES // width, 1)
            miss = [d for d in u.dims if d % tile]
        if miss:
            bad.append((u, miss))
    return bad, tile


def _tiling_facts(tile, share: float, worst: str, bad: list) -> dict:
    return {
        "tile": list(tile) if isinstance(tile, tuple) else tile,
        "misaligned_time_share": share,
        "shape": worst,
        "shapes": [
            {
                "shape": u.text,
                "calls": u.calls,
                "time_us": u.time_ps / 1e6,
                "misaligned": m if isinstance(m, list) else None,
                "padding_share": m if isinstance(m, float) else None,
            }
            for u, m in bad[:8]
        ],
    }


def _tiling_advice(kind: str, tile, precision: str, worst: str) -> str:
    if kind == "tpu":
        return (
            f"pad the arrays' last dimension to a multiple of 128 and the second-to-last "
            f"to a multiple of 8: XLA stores TPU arrays in (8, 128) tiles and feeds the "
            f"MXU 128 wide, so the padding of {worst} is work for nothing"
        )
    return (
        f"pad M, N and K to multiples of {tile} for {precision}: tensor "
        f"cores multiply {GPU_TILE_BYTES}-byte-aligned tiles, and cuBLAS/cuDNN fall "
        f"back to slower kernels otherwise ({worst}; e.g. round vocabulary, "
        "hidden and batch sizes up)"
    )


def _tpu_waste(arrays) -> float | list:
    """The share of (8, 128)-tile space that is padding over the arrays (0 when they tile)."""
    real = padded = 0
    for dims in arrays:
        if len(dims) < 1:
            continue
        minor = dims[-1]
        second = dims[-2] if len(dims) > 1 else 1
        rest = math.prod(dims[:-2]) if len(dims) > 2 else 1
        real += rest * second * minor
        padded += rest * math.ceil(second / 8) * 8 * math.ceil(minor / 128) * 128
    return [] if padded == real or padded == 0 else 1.0 - real / padded


def precision(ctx: Context) -> list:
    """Compute-bound f32 matmuls / convolutions on a device whose tf32 or bf16 roof is >= 4x
    higher. Saves the floor on the current roof less the floor on the target roof (memory-bound
    ops: both floors are the memory time, nothing to save)."""
    c, dev, out = ctx.c, ctx.device, []
    roofs = {normalize_precision(p.precision): p.gflops for p in dev.compute}
    # Every trusted f32 matmul: the saving is the compute-bound calls' part (a memory-bound
    # call's floor is its memory time on either roof).
    for i in np.flatnonzero(ctx.trusted).tolist():
        cat = str(c["category"][i]).lower()
        if not any(w in cat for w in _MATMUL_WORDS):
            continue
        if normalize_precision(plain_precision(c["precision"][i])) != "fp32":
            continue
        peak = float(c["peak_flop_rate"][i])
        target = next(
            (p for p in ("tf32", "bf16") if roofs.get(p, 0) >= PRECISION_RATIO * peak), None
        )
        if target is None or peak <= 0:
            continue
        now, new = floor_us(ctx, i), floor_us(ctx, i, roofs[target])
        saved = max(now - new, 0.0)
        if saved < ctx.min_us:
            continue
        t = float(c["total_time_us"][i])
        formula = (
            f"Σ max(F_i/P, B_i/BW) − Σ max(F_i/P′, B_i/BW) = {us_text(now)} − {us_text(new)} = "
            f"{us_text(saved)} (P = {peak:,.0f}, P′ = {roofs[target]:,.0f} GFLOP/s {target})"
            + regimes_note(ctx, i)
        )
        facts = {
            "target_precision": target,
            "target_peak_flop_rate": roofs[target],
            "roof_ratio": roofs[target] / peak,
            "floor_us": now,
            "floor_on_target_roof_us": new,
            "time_on_target_roof_us": t - saved,
            "mixed_regimes": bool(c["mixed_regimes"][i]),
        }
        out.append(
            Finding(
                "precision",
                f"{c['operation'][i]}: f32 on a device with a "
                f"{roofs[target] / peak:.0f}x higher {target} roof",
                [i],
                facts,
                saved,
                f"Run it in {target}: {ctx.advise('precision')}. Its roof moves from "
                f"{peak:,.0f} to {roofs[target]:,.0f} GFLOP/s; check the accuracy of the result.",
                i,
                bound_us=saved,
                formula=formula,
            )
        )
    return out
