"""The guidance rules: each looks at op records (and the timeline facts) and returns findings.

Op-level rules only consider *trusted* records (`Context.trusted`): no caveat, FLOPs and bytes
known for all of the op's time, a potential time saved (peaks known), not a container,
not infeed/outfeed, not communication. Their evidence is the record's own exported values.
Thresholds, reasons and sources: docs/guidance.md.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from tb_roofline.costs.hlo.shapes import element_bytes
from tb_roofline.devices.spec import normalize_precision, plain_precision
from tb_roofline.model import advice
from tb_roofline.table.timeline import is_communication, is_fusible

MIN_SHARE = 0.0005  # an op finding must be worth at least 0.05% of the profiled time
FAR_BELOW_ROOF = 0.5  # compute-bound and under half its roof
MISALIGNED_SHARE = 0.2  # at least a fifth of the op's time in shapes that do not tile
PRECISION_RATIO = 4.0  # a roof at least 4x higher for another precision
TINY_CALL_US = 5.0  # a call shorter than this is mostly launch / dispatch overhead
TINY_CALLS_PER_STEP = 20
FAR_BELOW_SHARE = 0.05  # ops with at least 5% of the op self time ...
FAR_BELOW_GAP_SHARE = 0.02  # ... or a gap to their roof of at least 2% of the profiled time
IDLE_SHARE = 0.10
EXPOSED_SHARE = 0.05
STRAGGLER_RATIO = 1.15
TPU_TILE = (8, 128)  # XLA's TPU array tile: second-minor x minor dimension
# Tensor cores want M, N, K multiples of 16 bytes of the input type (NVIDIA's guide).
GPU_TILE_BYTES = 16
# Precisions that run on tensor cores (plain fp32 runs on CUDA cores: no tile; see precision).
_TENSOR_CORE = frozenset({"tf32", "bf16", "fp16", "fp8", "int8"})
_MEMORY_BOUND_EXCLUDE = ("Compute", "Unknown", "Async")
_MATMUL_WORDS = ("matmul", "convolution", "dot", "gemm", "conv")

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


@dataclasses.dataclass
class Finding:
    rule: str
    title: str
    rows: list  # op record indices (op findings), [] for program findings
    facts: dict
    time_saved_us: float
    suggestion: str
    claim: int = -1  # the record whose time this saving comes out of (op findings)
    counted_us: float = 0.0  # what it adds to the total (model.guidance._count)
    bound_us: float = math.inf  # the most the rule's model proves this could save
    formula: str = ""  # the bound, written out with its numbers


@dataclasses.dataclass
class Context:
    ops: object  # RecordTable (one infeed/outfeed variant)
    device: object
    facts: object  # model.facts.Facts
    total_time_us: float
    num_steps: int
    framework: str  # "pytorch" or "xla"
    runtime: str = advice.XLA  # model.advice: xla, pytorch_eager, torch_compile, cuda_graphs
    tensors: dict = dataclasses.field(default_factory=dict)  # identity -> {input dims}
    # identity -> ({output dims}, {operand dims}, {operand names}) where the HLO says which is
    # which (`tensor` shapes): such a pair shares a tensor only when the producer's output is
    # an operand of the consumer (two ops writing, or both reading, one shape share no
    # intermediate), and, where operand names are known, the producer is one of them.
    flows: dict = dataclasses.field(default_factory=dict)
    floors: object = None  # model.roofline.KeyFloors: each record's per-call floor parts
    include_io: bool = True
    # identity -> (time µs, calls) of the op within complete steps (repeated_copy)
    step_ops: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        c = self.ops.columns
        self.c = c
        self.index = {
            (pid, op, p): i
            for i, (pid, op, p) in enumerate(
                zip(c["program_id"].tolist(), c["operation"].tolist(), c["precision"].tolist())
            )
        }
        caveat = np.array([not v for v in c["caveat"].tolist()], bool)
        saved = np.isfinite(c["potential_time_saved_us"].astype(float))
        comm = np.array([is_communication(cat) for cat in c["category"].tolist()], bool)
        full = (np.nan_to_num(c["flop_coverage"].astype(float)) >= 1.0) & (
            np.nan_to_num(c["bytes_coverage"].astype(float)) >= 1.0
        )
        self.trusted = (
            caveat
            & saved
            & ~comm
            & full
            & ~c["is_infeed_outfeed"].astype(bool)
            & (c["flops_source"] != "none")
        )
        self.min_us = MIN_SHARE * self.total_time_us

    def advise(self, rule: str) -> str:
        """The rule's suggestion for the runtime that ran, on this device (model.advice)."""
        return advice.advice(rule, self.runtime, getattr(self.device, "kind", ""))

    def per_step(self, calls: float) -> float:
        """Calls per step of one core (occurrences add up over every core and host: each core
        runs the program once a step)."""
        return calls / max(self.num_steps, 1) / max(getattr(self.device, "num_cores", 1) or 1, 1)


def tiling(ctx: Context) -> list:
    """Compute-bound matmuls / convolutions far below their roof whose shapes do not fill the
    device's matrix tiles."""
    kind = ctx.device.kind
    if kind not in ("gpu", "tpu"):
        return []
    c, out = ctx.c, []
    cand = ctx.trusted & (c["bound_by"] == "Compute") & (per_call_efficiency(ctx) < FAR_BELOW_ROOF)
    for i in np.flatnonzero(cand).tolist():
        ident = (c["program_id"][i], c["operation"][i], c["precision"][i])
        uses = [u for u in ctx.facts.op_shapes.get(ident, []) if u.kind in ("gemm", "array")]
        total = sum(u.time_ps for u in uses)
        if not uses or total <= 0:
            continue
        bad, tile = [], None
        for u in uses:
            if u.kind == "array":
                tile = TPU_TILE
                miss = _tpu_waste(u.dims)
            else:
                p = normalize_precision(plain_precision(c["precision"][i]))
                width = element_bytes(p) if p in _TENSOR_CORE else None
                if width is None:
                    continue
                tile = max(GPU_TILE_BYTES // width, 1)
                miss = [d for d in u.dims if d % tile]
            if miss:
                bad.append((u, miss))
        share = sum(u.time_ps for u, _ in bad) / total
        saved = float(c["potential_time_saved_us"][i]) * share
        if share < MISALIGNED_SHARE or saved < ctx.min_us:
            continue
        worst = max(bad, key=lambda b: b[0].time_ps)
        facts = {
            "tile": list(tile) if isinstance(tile, tuple) else tile,
            "misaligned_time_share": share,
            "shape": worst[0].text,
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
        if kind == "tpu":
            text = (
                f"pad the arrays' last dimension to a multiple of 128 and the second-to-last "
                f"to a multiple of 8: XLA stores TPU arrays in (8, 128) tiles and feeds the "
                f"MXU 128 wide, so the padding of {worst[0].text} is work for nothing"
            )
        else:
            text = (
                f"pad M, N and K to multiples of {tile} for {c['precision'][i]}: tensor "
                f"cores multiply {GPU_TILE_BYTES}-byte-aligned tiles, and cuBLAS/cuDNN fall "
                f"back to slower kernels otherwise ({worst[0].text}; e.g. round vocabulary, "
                "hidden and batch sizes up)"
            )
        gap = float(c["potential_time_saved_us"][i])
        out.append(
            Finding(
                "tiling",
                f"{c['operation'][i]}: shapes do not fill the matrix tiles",
                [i],
                facts,
                saved,
                text[0].upper() + text[1:] + ".",
                i,
                bound_us=gap,
                formula=f"(t − Σ max(F_i/P, B_i/BW)) × misaligned "
                f"share = {_us(gap)} × {share:.3f} = "
                f"{_us(saved)}" + _regimes(ctx, i),
            )
        )
    return out


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


def _us(x: float) -> str:
    return f"{x:,.1f} µs"


def floor_us(ctx: Context, i: int, peak: float | None = None) -> float:
    """The op's time at its roofs: the sum of its calls' floors, Σ max(F_i/P, B_i/BW) over its
    distinct shapes (`roof_time_us`: calls in different regimes are not averaged into one
    floor); `peak`: the same FLOPs on another compute roof, summed the same way."""
    if peak is not None and ctx.floors is not None:
        return ctx.floors.floor_us(ctx.include_io, i, peak)
    return float(np.nan_to_num(ctx.c["roof_time_us"][i]))


def per_call_efficiency(ctx: Context) -> np.ndarray:
    """Each record's floor over its time (its roofline efficiency by its calls' floors)."""
    t = ctx.c["total_time_us"].astype(float)
    floor = np.nan_to_num(ctx.c["roof_time_us"].astype(float))
    return np.divide(floor, t, out=np.zeros(len(t)), where=t > 0)


def _regimes(ctx: Context, i: int) -> str:
    if not bool(ctx.c["mixed_regimes"][i]):
        return ""
    return " (its calls run in different regimes: the floor is their floors' sum)"


def gap_formula(ctx: Context, i: int) -> str:
    t = float(ctx.c["total_time_us"][i])
    return (
        f"t − Σ max(F_i/P, B_i/BW) = {_us(t)} − {_us(floor_us(ctx, i))} = "
        f"{_us(float(ctx.c['potential_time_saved_us'][i]))}" + _regimes(ctx, i)
    )


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
            f"Σ max(F_i/P, B_i/BW) − Σ max(F_i/P′, B_i/BW) = {_us(now)} − {_us(new)} = "
            f"{_us(saved)} (P = {peak:,.0f}, P′ = {roofs[target]:,.0f} GFLOP/s {target})"
            + _regimes(ctx, i)
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


def _shared_tensor(ctx: Context, a: int, b: int):
    """The smallest array both ops touch (the same dims in both ops' recorded shapes), as
    (dims, bytes), or None when no shape says they share one or its element size is unknown."""
    ia = tuple(str(ctx.c[k][a]) for k in ("program_id", "operation", "precision"))
    ib = tuple(str(ctx.c[k][b]) for k in ("program_id", "operation", "precision"))
    ta, tb = ctx.tensors.get(ia, {}), ctx.tensors.get(ib, {})
    common = set(ta) & set(tb)
    if ia in ctx.flows and ib in ctx.flows:
        common &= ctx.flows[ia][0] & ctx.flows[ib][1]
        names = ctx.flows[ib][2]
        if names and ia[1] not in names and ia[1].rsplit("::", 1)[-1] not in names:
            return None  # the consumer does not read the producer's output
    best = None
    for dims in common:
        size = ta[dims] or tb[dims] or element_bytes(str(ctx.c["precision"][a]))
        if size and (best is None or math.prod(dims) * size < best[1]):
            best = (dims, math.prod(dims) * size)
    return best


def fusion(ctx: Context) -> list:
    """Memory-bound elementwise / data-movement ops that ran back to back on one stream and
    share a tensor (the producer's output is the consumer's input, by shape): fused, the
    intermediate is written and read once less. Saves that traffic at the memory roof."""
    tl = ctx.facts.timeline
    hbm = ctx.device.memory("hbm")
    if tl is None or hbm is None or not hbm.gbs > 0:
        return []
    c, out = ctx.c, []
    for pair in tl.pairs:
        a, b = ctx.index.get(pair.first), ctx.index.get(pair.second)
        if a is None or b is None or a == b or pair.count < 2:
            continue
        if not all(
            ctx.trusted[i]
            and is_fusible(str(c["category"][i]))
            and c["bound_by"][i] not in _MEMORY_BOUND_EXCLUDE
            for i in (a, b)
        ):
            continue
        shared = _shared_tensor(ctx, a, b)
        if shared is None:
            continue
        dims, nbytes = shared
        bound = pair.count * 2.0 * nbytes / (hbm.gbs * 1e3)  # µs
        saved = min(bound, pair.shorter_ps / 1e6)
        if saved < ctx.min_us:
            continue
        claim = a if float(c["total_time_us"][a]) <= float(c["total_time_us"][b]) else b
        facts = {
            "pairs": pair.count,
            "pairs_per_step": ctx.per_step(pair.count),
            "mean_gap_us": pair.gap_ps / pair.count / 1e6,
            "shorter_op_time_us": pair.shorter_ps / 1e6,
            "shared_shape": list(dims),
            "intermediate_bytes": nbytes,
            "memory_roof_gbs": hbm.gbs,
        }
        formula = (
            f"pairs × 2 × S ÷ BW = {pair.count:,} × 2 × {nbytes:,} B ÷ "
            f"{hbm.gbs:,.0f} GB/s = {_us(bound)}"
        )
        if saved < bound:
            formula += f", capped at the shorter op's {_us(pair.shorter_ps / 1e6)}"
        out.append(
            Finding(
                "fusion",
                f"{c['operation'][a]} → {c['operation'][b]}: memory-bound ops back to "
                f"back on one {list(dims)} tensor",
                [a, b],
                facts,
                saved,
                f"Fuse them: {ctx.advise('fusion')}. The intermediate array is then "
                "written and read once less: that traffic at the memory roof is the saving.",
                claim,
                bound_us=bound,
                formula=formula,
            )
        )
    return out


def repeated_copy(ctx: Context) -> list:
    """One copy / transpose instruction run several times within a step: the same data
    relaid out again. Claimed only where the trace says it is the same data: step markers (a
    repeat per step needs steps) and XLA, where one instruction in one step copies one array;
    a PyTorch trace records no tensor identity (ids or storage), and an equal shape is not the
    same tensor, so nothing is claimed there. Bounded by the op's own time in those steps."""
    if ctx.num_steps <= 0 or ctx.framework != "xla":
        return []
    c, out = ctx.c, []
    for ident, uses in ctx.facts.op_shapes.items():
        i = ctx.index.get(ident)
        steps = ctx.step_ops.get(ident)
        if i is None or not ctx.trusted[i] or not steps:
            continue
        time_in_steps, calls_in_steps = steps
        occurrences = float(c["occurrences"][i])
        t = float(c["total_time_us"][i])
        for u in uses:
            if u.kind != "copy" or not u.calls or occurrences <= 0 or t <= 0:
                continue
            k = ctx.per_step(calls_in_steps * u.calls / occurrences)
            if k < 2:
                continue
            in_shape = time_in_steps * min(u.time_ps / 1e6 / t, 1.0)
            bound = in_shape * (1.0 - 1.0 / k)
            if bound < ctx.min_us:
                continue
            facts = {
                "shape": u.text,
                "calls_per_step_of_shape": k,
                "ops_with_shape": [str(c["operation"][i])],
                "time_in_shape_us": u.time_ps / 1e6,
                "time_in_steps_us": in_shape,
                "same_data": "one instruction, one step",
            }
            out.append(
                Finding(
                    "repeated_copy",
                    f"{c['operation'][i]}: {u.text} copied {k:,.1f}× per step",
                    [i],
                    facts,
                    bound,
                    f"The same relayout repeats: {ctx.advise('repeated_copy')}; "
                    "keeping one copy per step saves the rest.",
                    i,
                    bound_us=bound,
                    formula=f"t(shape, in steps) × (1 − 1/k) = {_us(in_shape)} × (1 − 1/{k:,.1f}) "
                    f"= {_us(bound)}",
                )
            )
    return out


def far_below_roof(ctx: Context, covered: set) -> list:
    """Big ops (>= 5% of the op self time, or a gap to their roof >= 2% of the profiled time)
    under half their roof that no other rule explains: the gap to the roof, and what bounds it."""
    c, out = ctx.c, []
    eff = per_call_efficiency(ctx)
    gap = np.nan_to_num(c["potential_time_saved_us"].astype(float))
    big = (np.nan_to_num(c["self_time_percent"].astype(float)) >= 100 * FAR_BELOW_SHARE) | (
        gap >= FAR_BELOW_GAP_SHARE * ctx.total_time_us
    )
    cand = ctx.trusted & (eff < FAR_BELOW_ROOF) & (eff > 0) & big & (gap >= ctx.min_us)
    for i in np.flatnonzero(cand).tolist():
        if i in covered:
            continue
        bound = str(c["bound_by"][i])
        if bound == "Compute":
            what = (
                f"compute-bound at {eff[i]:.0%} of its {c['precision'][i]} roof "
                f"({float(c['peak_flop_rate'][i]):,.0f} GFLOP/s)"
            )
        else:
            what = f"bound by {bound} at {eff[i]:.0%} of its bandwidth"
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


OP_RULES = (tiling, precision, tiny_ops, fusion, repeated_copy)
