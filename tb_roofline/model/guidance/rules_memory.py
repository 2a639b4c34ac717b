"""The memory traffic rules: memory-bound ops run back to back on one tensor, which fused
would write and read it once less (`fusion`), and one copy run several times a step
(`repeated_copy`). Thresholds, reasons and sources: docs/guidance.md.
"""

from __future__ import annotations

import math

from tb_roofline.costs.hlo.shapes import element_bytes
from tb_roofline.model.guidance.rule_context import Context, Finding, recorded_arrays, us_text
from tb_roofline.table.timeline import Timeline, is_fusible


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


def _call_shared_tensor(ctx: Context, a: int, b: int, pair):
    """The tensor the first call of a back-to-back pair hands the second, from the shapes both
    calls recorded: the producer's output is its largest array (an elementwise op's
    broadcast result, the normalised or rotated array; a copy's one array), and the consumer
    must read an array of that shape. (dims, bytes), or None when the calls share none."""
    produced, consumed = recorded_arrays(pair.first_dims), recorded_arrays(pair.second_dims)
    if not produced or not consumed:
        return None
    largest = max(math.prod(d) for d in produced)
    outputs = {d for d in produced if math.prod(d) == largest}
    best = None
    for dims in outputs & set(consumed):
        sizes = [ctx.tensors.get(_ident(ctx, i), {}).get(dims) for i in (a, b)]
        size = sizes[0] or sizes[1] or element_bytes(str(ctx.c["precision"][a]))
        if size and (best is None or math.prod(dims) * size < best[1]):
            best = (dims, math.prod(dims) * size)
    return best


def _ident(ctx: Context, i: int) -> tuple:
    return tuple(str(ctx.c[k][i]) for k in ("program_id", "operation", "precision"))


def _pair_tensors(ctx: Context, tl: Timeline) -> dict:
    """(first record, second record) -> [(pair, dims, bytes)]: the fusible back-to-back pairs
    of memory-bound trusted ops and the tensor each hands on. PyTorch pairs are judged call by
    call, from the tensors both calls recorded (`_call_shared_tensor`); XLA pairs by the shapes
    of the two instructions (`_shared_tensor`: one instruction has one shape)."""
    c = ctx.c
    out: dict = {}
    for pair in tl.pairs:
        a, b = ctx.index.get(pair.first), ctx.index.get(pair.second)
        if a is None or b is None or a == b or pair.count < 2:
            continue
        if not all(
            ctx.trusted[i] and is_fusible(str(c["category"][i])) and ctx.memory_bound[i]
            for i in (a, b)
        ):
            continue
        if ctx.framework == "xla":
            shared = _shared_tensor(ctx, a, b)
        else:  # a PyTorch pair with a call that recorded no shapes shares no known tensor
            shared = _call_shared_tensor(ctx, a, b, pair)
        if shared is not None:
            out.setdefault((a, b), []).append((pair, *shared))
    return out


def fusion(ctx: Context) -> list:
    """Memory-bound elementwise / data-movement ops that ran back to back on one stream, the
    first call's output the second's input (by the recorded shapes, call by call where the
    trace records them): fused, the intermediate is written and read once less. Saves that
    traffic at the memory roof, per tensor at most the shorter op's time in those pairs."""
    tl = ctx.facts.timeline if ctx.facts is not None else None
    hbm = ctx.device.memory("hbm")
    if tl is None or hbm is None or not hbm.gbs > 0:
        return []
    c, out = ctx.c, []
    for (a, b), terms in _pair_tensors(ctx, tl).items():
        terms.sort(key=lambda t: -t[0].count * t[2])
        bounds = [p.count * 2.0 * nbytes / (hbm.gbs * 1e3) for p, _, nbytes in terms]  # µs
        bound = sum(bounds)
        saved = sum(min(x, p.shorter_ps / 1e6) for x, (p, _, _) in zip(bounds, terms))
        if saved < ctx.min_us:
            continue
        pair, dims, nbytes = terms[0]
        count = sum(p.count for p, _, _ in terms)
        shorter = sum(p.shorter_ps for p, _, _ in terms) / 1e6
        claim = a if float(c["total_time_us"][a]) <= float(c["total_time_us"][b]) else b
        facts = {
            "pairs": count,
            "pairs_per_step": ctx.per_step(count),
            "mean_gap_us": sum(p.gap_ps for p, _, _ in terms) / count / 1e6,
            "shorter_op_time_us": shorter,
            "shared_shape": list(dims),
            "intermediate_bytes": nbytes,
            "tensors": [
                {"shape": list(d), "bytes": n, "pairs": p.count, "bound_us": x}
                for (p, d, n), x in zip(terms, bounds)
            ],
            "memory_roof_gbs": hbm.gbs,
        }
        sizes = " + ".join(f"{p.count:,} × 2 × {n:,} B" for p, _, n in terms)
        sizes = f"({sizes})" if len(terms) > 1 else sizes
        formula = f"Σ pairs × 2 × S ÷ BW = {sizes} ÷ {hbm.gbs:,.0f} GB/s = {us_text(bound)}"
        if saved < bound:
            formula += f", each tensor capped at the shorter op's time: {us_text(saved)}"
        shapes = ", ".join(str(list(d)) for _, d, _ in terms)
        out.append(
            Finding(
                "fusion",
                f"{c['operation'][a]} → {c['operation'][b]}: memory-bound ops back to "
                + (f"back on one {list(dims)} tensor" if len(terms) == 1 else f"back on {shapes}"),
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
    for ident, uses in (ctx.facts.op_shapes if ctx.facts is not None else {}).items():
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
                    formula=f"t(shape, in steps) × (1 − 1/k) = {us_text(in_shape)} × "
                    f"(1 − 1/{k:,.1f}) = {us_text(bound)}",
                )
            )
    return out
