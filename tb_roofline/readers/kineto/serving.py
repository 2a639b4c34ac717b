"""Serving steps in a Kineto trace: the engines' step annotations (readers/serving_steps.py)
become steps with facts, and each attention call is costed from the sums of the step it ran in
(costs/torch/serving_ops.py). Runs on the collector, before the columns are made, so the new costs
go through the reader like any other.
"""

from __future__ import annotations

import bisect
import dataclasses
import re

import numpy as np

from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.costs.torch import serving_ops
from tb_roofline.costs.torch.args import Args
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers import serving_steps
from tb_roofline.readers.kineto import attention_windows


@dataclasses.dataclass
class ServingStep:
    """One forward step of a serving engine: its CPU span (ns, the trace's own clock) and what
    its annotation says; `step` is the step id its ops and kernels are counted under."""

    ts: int
    end: int
    facts: serving_steps.StepFacts
    step: int = -1


def steps_of(col) -> list[ServingStep]:
    """The serving steps of a trace, in time order: an `execute_…` annotation merged with the
    `step[MODE …]` span it overlaps most (SGLang writes both around one forward)."""
    execs = sorted((ts, ts + dur, f) for _, ts, dur, f in col.serving if not f.mode)
    modes = sorted((ts, ts + dur, f) for _, ts, dur, f in col.serving if f.mode)
    used, out = set(), []
    for ts, end, f in execs:
        best, best_overlap = -1, 0
        for j, (mts, mend, _) in enumerate(modes):
            overlap = min(end, mend) - max(ts, mts)
            if j not in used and overlap > best_overlap:
                best, best_overlap = j, overlap
        if best >= 0:
            used.add(best)
            f = serving_steps.merge(f, modes[best][2])
        out.append(ServingStep(ts, end, f))
    out += [ServingStep(ts, end, f) for j, (ts, end, f) in enumerate(modes) if j not in used]
    out.sort(key=lambda s: s.ts)
    if any(not s.facts.engine for s in out):
        ops = [n for n in col.names if "::" in n]
        for s in out:
            s.facts = serving_steps.with_engine(s.facts, ops)
    return out


def assign_steps(col, steps: list[ServingStep]) -> None:
    """Each serving step's step id: the ProfilerStep it starts in; without ProfilerStep
    markers the serving steps are the trace's steps (numbered in time order)."""
    if not col.steps:
        for i, s in enumerate(steps):
            s.step = i
            col.steps.append((i, s.ts, max(s.end - s.ts, 0)))
        return
    for s in steps:
        for sid, ts, dur in col.steps:
            if ts <= s.ts <= ts + dur:
                s.step = sid
                break


def _step_at(steps: list[ServingStep], starts: list, t: int) -> int:
    """The index of the serving step (in time order, `starts` their starts) whose span holds
    time t, or -1: the latest one starting at or before t, when it has not ended."""
    i = bisect.bisect_right(starts, t) - 1
    return i if i >= 0 and t <= steps[i].end else -1


def _add_cost(col, key, cost, base: int) -> int:
    """A new cost id for a call re-costed from cost id `base` (its shapes kept)."""
    idx = col._cost_index.get(key)
    if idx is None:
        cost = cost._replace(precision=torch_flops.precision_label(cost.precision))
        idx = col._cost_index[key] = len(col.costs)
        col.costs.append(cost)
        col.cost_shapes.append(col.cost_shapes[base])
        col.cost_fingerprints.append(col.cost_fingerprints[base])
        col.cost_dims.append(col.cost_dims[base])
        col.cost_negative.append(False)
    return idx


def cost_attention(col, steps: list[ServingStep], windows=None) -> list[Diagnostic]:
    """Attention calls costed from the step they ran in; calls outside an annotated step get
    no cost, and a diagnostic gives the bound their shapes allow, with its formula. With the
    model's `windows` (readers/model_config.py), calls on its sliding-window layers count each
    request's context clamped to the window (readers/kineto/attention_windows.py says which
    layer a call is)."""
    if not col.attention_calls:
        return []
    bounds: dict = {}
    starts = [s.ts for s in steps]
    step_of = {
        i: _step_at(steps, starts, col.op_ts[i])
        for i, cid in enumerate(col.op_cost)
        if cid in col.attention_calls
    }
    layer_of, notes = attention_windows.layers_of_calls(col, steps, step_of, windows)
    clamped: dict = {}
    for i, k in step_of.items():
        cid = col.op_cost[i]
        name, args = col.attention_calls[cid]
        a = Args(args.get("Input Dims"), args.get("Input type"), args.get("Concrete Inputs"))
        layer = layer_of.get(i)
        window = windows.window if layer is not None and windows.windowed[layer] else None
        cost = serving_ops.attention_cost(a, steps[k].facts, window) if k >= 0 else None
        if cost is not None:
            col.op_cost[i] = _add_cost(col, ("serving", cid, k, window), cost, cid)
            if window is not None and layer is not None:
                attention_windows.count_clamp(clamped, name, layer, steps[k].facts, window)
            continue
        bound = serving_ops.attention_bound(a)
        entry = bounds.setdefault(name, [0, bound])
        entry[0] += 1
    if clamped:
        notes.append(attention_windows.clamp_note(clamped, windows))
    return notes + _bound_notes(bounds, steps)


def _bound_notes(bounds: dict, steps: list[ServingStep]) -> list[Diagnostic]:
    out = []
    for name, (calls, bound) in sorted(bounds.items()):
        why = (
            "no serving step annotation with Σ Sq·Sk around it"
            if not steps
            else "its step's annotation does not give Σ Sq·Sk for the phases it ran"
        )
        text = (
            f"{name}: {calls} calls without a FLOP count ({why}); at most "
            f"{bound[0]:.4g} FLOPs a call, {bound[1]} (a bound, not a measurement)"
            if bound
            else f"{name}: {calls} calls without a FLOP count ({why}); "
            "no max_seqlen recorded, so not even a bound"
        )
        out.append(Diagnostic("info", "attention_bound", text))
    return out


def device_spans(steps: list[ServingStep], c, launch) -> list:
    """Per serving step, (first start, last end) in relative ns of the device activity
    (kernels, copies) launched inside its CPU span, or None when it launched none: the step's
    device span, without the host's time before its first launch or after its last kernel."""
    if launch is None or not len(launch):
        return [None] * len(steps)
    order = np.argsort(launch, kind="stable")
    at = np.asarray(launch, np.float64)[order]
    begin = np.asarray(c.gpu_ts, np.float64)[order]
    end = begin + np.asarray(c.gpu_dur, np.float64)[order]
    out: list = []
    for s in steps:
        lo = int(np.searchsorted(at, s.ts - c.base_ns, side="left"))
        hi = int(np.searchsorted(at, s.end - c.base_ns, side="right"))
        out.append((float(begin[lo:hi].min()), float(end[lo:hi].max())) if hi > lo else None)
    return out


# Attention kernels whose names say they mask to a sliding window or chunk (FlashInfer/TRT-LLM
# `…SlidingOrChunkedCausal…`, `swa`, `sliding_window`): the window size is not in the name.
WINDOW_CODES = ("attention_sliding_window", "attention_window_layers")
_WINDOWED = re.compile(r"sliding|chunked|_swa_|swa_|window", re.I)


def window_notes(c, links, steps: list[ServingStep]) -> list[Diagnostic]:
    """Attention calls costed from their step's sums whose kernel masks a sliding window: the
    count assumes every (query, key) pair, which over-counts them, and the trace records no
    window to clamp to."""
    if not steps or not len(links.row):
        return []
    # per distinct name, not per event
    by_name = np.array([bool(_WINDOWED.search(str(n))) for n in c.names.tolist()], bool)
    windowed = by_name[c.gpu_name]
    rows = np.unique(links.row[windowed & (links.row >= 0)])
    calls = [
        r
        for r in rows.tolist()
        if c.costs[c.op_cost[r]].category == "attention"
        and c.costs[c.op_cost[r]].source == "formula"
    ]
    if not calls:
        return []
    first = np.flatnonzero(windowed & np.isin(links.row, calls))[0]
    kernel = str(c.names[c.gpu_name[first]])
    op = ", ".join(sorted({str(c.names[c.op_name[r]]) for r in calls}))
    return [
        Diagnostic(
            "info",
            "attention_sliding_window",
            f"{len(calls)} {op} calls ran sliding-window or chunked attention kernels "
            f"({kernel[:100]}): their FLOPs and KV bytes count every (query, key) pair of the "
            "step, full attention, since the trace records no window to clamp each query's "
            "keys to; for them the counts are upper bounds",
        )
    ]


def step_records(steps: list[ServingStep], spans: list, base_ns: int) -> list[dict]:
    """The facts of each serving step for the model: id, label, phase, batch, tokens, the
    per-phase sums, its time and tokens/s. The time is the step's device span (`spans`, from
    `device_spans`: first activity start to last activity end); a step that launched no device
    work keeps its CPU span, and `time_source` says which one it is."""
    out = []
    for i, s in enumerate(steps):
        f = s.facts
        span = spans[i] if i < len(spans) else None
        if span is not None:
            ps, start_ps, source = (span[1] - span[0]) * 1000, span[0] * 1000, "device"
        else:
            ps, start_ps, source = (s.end - s.ts) * 1000, (s.ts - base_ns) * 1000, "cpu_span"
        seconds = ps * 1e-12
        out.append(
            {
                "step": s.step,
                "label": serving_steps.label(s.step, f),
                "engine": f.engine,
                "phase": f.phase,
                "mode": f.mode,
                "batch": f.batch,
                "tokens": f.tokens,
                "context": f.context.as_dict() if f.context else None,
                "generation": f.generation.as_dict() if f.generation else None,
                "start_ps": start_ps,
                "time_ps": ps,
                "time_source": source,
                "cpu_span_ps": (s.end - s.ts) * 1000,
                "tokens_per_s": f.tokens / seconds
                if f.tokens is not None and seconds > 0
                else None,
                "annotation": f.name,
            }
        )
    return out
