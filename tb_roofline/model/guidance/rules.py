"""The op-level guidance rules: each looks at op records (and the timeline facts) and returns
findings. The matmul rules are in model/guidance/rules_matmul.py, the memory traffic rules in
model/guidance/rules_memory.py; here the rules over any op (`tiny_ops`, `far_below_roof`), the
evidence columns each rule's findings show (`OP_COLUMNS`) and the rules in the order they run
(`OP_RULES`).

Op-level rules only consider *trusted* records (`Context.trusted`): no caveat, FLOPs and bytes
known for all of the op's time, a potential time saved (peaks known), not a container,
not infeed/outfeed, not communication. Their evidence is the record's own exported values.
Thresholds, reasons and sources: docs/guidance.md.
"""

from __future__ import annotations

import re

import numpy as np

from tb_roofline.model.guidance.rule_context import (
    FAR_BELOW_ROOF,
    Context,
    Finding,
    floor_us,
    gap_formula,
    per_call_efficiency,
)
from tb_roofline.model.guidance.rules_matmul import precision, tiling
from tb_roofline.model.guidance.rules_memory import fusion, repeated_copy

TINY_CALL_US = 5.0  # a call shorter than this is mostly launch / dispatch overhead
TINY_CALLS_PER_STEP = 20
FAR_BELOW_SHARE = 0.05  # ops with at least 5% of the op self time ...
FAR_BELOW_GAP_SHARE = 0.02  # ... or a gap to their roof of at least 2% of the profiled time

OP_COLUMNS = {
    "tiling": (
        "bound_by",
        "roofline_efficiency",
        "compute_efficiency",
        "flop_rate",
        "peak_flop_rate",
        "precision",
        "total_time_us",
        "roof_time_us",
        "mixed_regimes",
        "potential_time_saved_us",
    ),
    "precision": (
        "category",
        "precision",
        "peak_flop_rate",
        "flop_rate",
        "compute_efficiency",
        "max_mem_bw_utilization",
        "total_time_us",
        "roof_time_us",
        "mixed_regimes",
        "potential_time_saved_us",
    ),
    "tiny_ops": (
        "occurrences",
        "avg_time_us",
        "total_time_us",
        "roof_time_us",
        "mixed_regimes",
        "self_time_percent",
        "potential_time_saved_us",
    ),
    "fusion": (
        "category",
        "bound_by",
        "roofline_efficiency",
        "occurrences",
        "avg_time_us",
        "total_time_us",
        "potential_time_saved_us",
    ),
    "repeated_copy": (
        "category",
        "bound_by",
        "occurrences",
        "total_time_us",
        "potential_time_saved_us",
    ),
    "far_below_roof": (
        "category",
        "bound_by",
        "roofline_efficiency",
        "compute_efficiency",
        "max_mem_bw_utilization",
        "precision",
        "peak_flop_rate",
        "self_time_percent",
        "total_time_us",
        "roof_time_us",
        "mixed_regimes",
        "potential_time_saved_us",
    ),
}
ARRAY_TYPE = re.compile(r"\b([a-z][a-z0-9]*)\[[0-9,]*\]")  # the element type of "f32[8,128]"


def tiny_ops(ctx: Context) -> list:
    """Ops called many times for a few µs each: launch / dispatch overhead dominates."""
    c, out = ctx.c, []
    avg = c["avg_time_us"].astype(float)
    calls = c["occurrences"].astype(float)
    cand = ctx.trusted & (avg < TINY_CALL_US) & (ctx.per_step(1.0) * calls >= TINY_CALLS_PER_STEP)
    for i in np.flatnonzero(cand).tolist():
        saved = float(c["potential_time_saved_us"][i])
        if saved < ctx.min_us:
            continue
        per_step = ctx.per_step(float(calls[i]))
        out.append(
            Finding(
                "tiny_ops",
                f"{c['operation'][i]}: {per_step:,.0f} calls per step of {avg[i]:.2f} µs",
                [i],
                {"calls_per_step": per_step, "max_call_us": TINY_CALL_US},
                saved,
                f"Each call is too short to amortise its launch: {ctx.advise('tiny_ops')}.",
                i,
                bound_us=saved,
                formula=gap_formula(ctx, i),
            )
        )
    return out


def memory_label(ctx: Context, bound: str) -> str:
    """The memory a record is bound by, as the device names it: a CPU's main memory is its
    DRAM (its device file's `hbm` entry), never HBM."""
    if bound != "HBM" or getattr(ctx.device, "kind", "") != "cpu":
        return bound
    hbm = next((m for m in getattr(ctx.device, "memories", []) if m.id == "hbm"), None)
    return hbm.name if hbm is not None and hbm.name and hbm.name != "HBM" else "main memory"


def far_below_roof(ctx: Context) -> list:
    """Big ops (>= 5% of the op self time, or a gap to their roof >= 2% of the profiled time)
    under half their roof: the gap to the roof, and what bounds it. Another rule naming the op
    does not hide this one: each is its own bound, the union counts the op once (its largest
    claim) and the ranking shows the largest first."""
    c, out = ctx.c, []
    eff = per_call_efficiency(ctx)
    gap = np.nan_to_num(c["potential_time_saved_us"].astype(float))
    big = (np.nan_to_num(c["self_time_percent"].astype(float)) >= 100 * FAR_BELOW_SHARE) | (
        gap >= FAR_BELOW_GAP_SHARE * ctx.total_time_us
    )
    cand = ctx.trusted & (eff < FAR_BELOW_ROOF) & (eff > 0) & big & (gap >= ctx.min_us)
    for i in np.flatnonzero(cand).tolist():
        bound = str(c["bound_by"][i])
        if ctx.compute_bound[i]:
            what = (
                f"compute-bound at {eff[i]:.0%} of its {roof_name(c, i)} "
                f"({float(c['peak_flop_rate'][i]):,.0f} GFLOP/s)"
            )
        else:
            what = f"bound by {memory_label(ctx, bound)} at {eff[i]:.0%} of its bandwidth"
        facts = {
            "roofline_efficiency": float(np.nan_to_num(c["roofline_efficiency"][i])),
            "floor_efficiency": float(eff[i]),
            "bound_by": bound,
            "self_time_percent": float(c["self_time_percent"][i]),
            "floor_us": floor_us(ctx, i),
            "mixed_regimes": bool(c["mixed_regimes"][i]),
        }
        out.append(
            Finding(
                "far_below_roof",
                f"{c['operation'][i]}: {eff[i]:.0%} of its roof, "
                f"{float(c['self_time_percent'][i]):.0f}% of the op time",
                [i],
                facts,
                float(gap[i]),
                f"It is {what}: {ctx.advise('far_below_roof')}.",
                i,
                bound_us=float(gap[i]),
                formula=gap_formula(ctx, i),
            )
        )
    return out


def roof_name(c, i: int) -> str:
    """'fp32 roof', or for an op judged under the vector ceiling of other data 'fp32 roof
    (bf16 data on the vector units)'."""
    prec = str(c["precision"][i])
    roof = str(c["roof_precision"][i] or prec) if "roof_precision" in c else prec
    return f"{roof} roof" + (f" ({prec} data on the vector units)" if roof != prec else "")


OP_RULES = (tiling, precision, tiny_ops, fusion, repeated_copy, far_below_roof)
