"""The idle-time rules: time no op ran on a core, split by what the trace proves caused it.

Readers that know when each device activity was launched (PyTorch GPU traces: the runtime call
with the activity's correlation id) split each idle gap by the launch of the activity that ends
it (table/timeline.py, LAUNCH_CAUSES): before the launch the host had not launched the work
(host-bound), then the launch's own latency, then a wait with the work queued (an event, a
sync or blocking copy, or nothing the trace shows); without a launch the cause is undetermined.
Each class is its own finding, its saving the idle time of its class (docs/guidance.md, "Idle
time"). Readers without launches (XLA, CPU threads) give the older split: captures, syncs, the
profile's edges, the rest host-bound.
"""

from __future__ import annotations

from tb_roofline.model.guidance import advice
from tb_roofline.model.guidance.rule_context import (
    IDLE_CLASS_SHARE,
    IDLE_SHARE,
    Context,
    Finding,
    us_text,
)
from tb_roofline.table.timeline import (
    IDLE_CAPTURE,
    IDLE_EDGES,
    IDLE_EVENT,
    IDLE_EVENT_BLOCKED,
    IDLE_HOST,
    IDLE_LAUNCH,
    IDLE_NO_LAUNCH,
    IDLE_QUEUED,
    IDLE_SYNC,
    IDLE_WAIT_COPY,
    IDLE_WAIT_SYNC,
    LAUNCH_CAUSES,
    LAUNCH_LATENCY_PS,
)

CAPTURE_DOMINATES = 0.5  # a graph capture explains at least half of the idle time


def idle_split(ctx: Context, idle_us: float) -> dict:
    """The idle time split by cause (µs, core-time), each idle instant once, the parts adding up
    to `idle_us`: graph capture, the profile's start / end, then, where the reader knew the
    launches, the LAUNCH_CAUSES and `sync` (the host in a sync before the launch); otherwise
    syncs and the rest host-bound. `launch_known` says which."""
    tl = ctx.facts.timeline if ctx.facts is not None else None
    causes = tl.idle_causes if tl is not None else {}
    known = IDLE_HOST in causes
    keys = (IDLE_CAPTURE, IDLE_EDGES, IDLE_SYNC) + (LAUNCH_CAUSES if known else ())
    left = max(idle_us, 0.0)
    out: dict = {}
    for key in keys:
        out[key] = min(float(causes.get(key, 0.0)) / 1e6, left)
        left -= out[key]
    # What the reader did not classify (rounding): undetermined where launches are known.
    out[IDLE_NO_LAUNCH if known else IDLE_HOST] = out.get(IDLE_NO_LAUNCH, 0.0) + left
    out.setdefault(IDLE_HOST, 0.0)
    out["launch_known"] = known
    out[IDLE_EVENT_BLOCKED] = float(causes.get(IDLE_EVENT_BLOCKED, 0.0)) / 1e6
    return out


def _facts(split: dict, t_idle: float, total: float, wall: dict) -> dict:
    facts = {
        "idle_us": t_idle,
        "idle_in_steps_us": wall["idle_in_steps"],
        "idle_outside_steps_us": t_idle - wall["idle_in_steps"],
        "idle_share": t_idle / total,
        "host_bound_us": split[IDLE_HOST],
        "graph_capture_us": split[IDLE_CAPTURE],
        "sync_us": split[IDLE_SYNC],
        "profile_edges_us": split[IDLE_EDGES],
        "launch_known": split["launch_known"],
    }
    if split["launch_known"]:
        facts.update({f"{k}_us": split[k] for k in LAUNCH_CAUSES if k != IDLE_HOST})
        facts["event_wait_host_blocked_us"] = min(split[IDLE_EVENT_BLOCKED], split[IDLE_EVENT])
        facts["before_launch_us"] = split[IDLE_HOST] + split[IDLE_SYNC]
    return facts


def idle(ctx: Context, wall: dict) -> list:
    total = ctx.total_time_us
    t_idle = wall["idle"]
    if total <= 0 or t_idle < IDLE_SHARE * total:
        return []
    split = idle_split(ctx, t_idle)
    facts = _facts(split, t_idle, total, wall)
    if split[IDLE_CAPTURE] >= CAPTURE_DOMINATES * t_idle or not split["launch_known"]:
        return [_idle_whole(ctx, split, facts, t_idle, total)]
    times = {
        _host_bound: split[IDLE_HOST] + split[IDLE_SYNC],
        _waited: split[IDLE_EVENT] + split[IDLE_WAIT_SYNC] + split[IDLE_WAIT_COPY],
        _launch_latency: split[IDLE_LAUNCH],
        _undetermined: split[IDLE_QUEUED] + split[IDLE_NO_LAUNCH],
    }
    largest = max(times.values())
    # Each class of at least IDLE_CLASS_SHARE of the time, and the largest one in any case.
    found = [
        rule(ctx, split, facts, total)
        for rule, t in times.items()
        if t >= IDLE_CLASS_SHARE * total or (t == largest and t > 0)
    ]
    if not found:
        return [_idle_whole(ctx, split, facts, t_idle, total)]
    found[0].suggestion += _edges_note(split, t_idle)
    return found


def _edges_note(split: dict, t_idle: float) -> str:
    if split[IDLE_EDGES] > 0.25 * t_idle:
        return (
            f" {us_text(split[IDLE_EDGES])} is before the first op or after the last one: "
            "the profile's own start and end, not counted."
        )
    return ""


def _idle_whole(ctx: Context, split: dict, facts: dict, t_idle: float, total: float) -> Finding:
    """One idle finding: a graph capture explains most of it, or the reader knew no launches
    (XLA, CPU threads): the rest after captures, syncs and edges is the host's."""
    saved = split[IDLE_HOST] + split[IDLE_SYNC]
    rest = t_idle - split[IDLE_EDGES] - split[IDLE_CAPTURE]
    formula = (
        f"idle − profile start/end − graph capture = {us_text(t_idle)} − "
        f"{us_text(split[IDLE_EDGES])} − {us_text(split[IDLE_CAPTURE])} = {us_text(rest)} "
        f"(host-bound {us_text(split[IDLE_HOST])}, syncs {us_text(split[IDLE_SYNC])}"
        + (f", other causes {us_text(rest - saved)})" if rest - saved > 0 else ")")
    )
    if split[IDLE_CAPTURE] >= CAPTURE_DOMINATES * t_idle:
        title = (
            f"The device is idle {t_idle / total:.0%} of the time, mostly while CUDA/HIP "
            f"graphs are captured ({split[IDLE_CAPTURE] / total:.0%})"
        )
        note = advice.CAPTURE_NOTES["graph_capture"]
        text = (
            "A graph capture records launches without running them: this profile shows the "
            "capture, not the workload. " + note[0].upper() + note[1:] + "."
        )
        saved = rest
    else:
        title = f"The device is idle {t_idle / total:.0%} of the time"
        text = f"No op runs for this long: {ctx.advise('idle')}."
        if split[IDLE_SYNC] > 0:
            text += (
                f" {us_text(split[IDLE_SYNC])} of it is spent in device syncs "
                "(cudaDeviceSynchronize / StreamSynchronize): remove the ones in the step."
            )
    text += _edges_note(split, t_idle)
    return Finding("idle", title, [], facts, saved, text, bound_us=rest, formula=formula)


def _advise(ctx: Context, rule: str) -> str:
    """The rule's advice; in a serving engine's trace the device waits for its scheduler,
    whatever ran the model (eager, compiled or graph replays)."""
    if ctx.serving and rule in ("idle", "idle_wait"):
        return advice.advice(rule, advice.GRAPHS)
    return ctx.advise(rule)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _host_bound(ctx: Context, split: dict, facts: dict, total: float) -> Finding:
    t = split[IDLE_HOST] + split[IDLE_SYNC]
    text = (
        "The next kernel or copy had not been launched yet: the host was busy elsewhere. "
        f"{_sentence(_advise(ctx, 'idle'))}"
    )
    if split[IDLE_SYNC] > 0:
        text += (
            f" {us_text(split[IDLE_SYNC])} of it the host sat in a device sync or blocking "
            "copy (…Synchronize, cudaMemcpy / hipMemcpyWithStream): remove the ones in the step."
        )
    formula = (
        f"Σ over idle gaps of the time before the next activity's launch call = host-bound "
        f"{us_text(split[IDLE_HOST])} + in syncs / blocking copies {us_text(split[IDLE_SYNC])} "
        f"= {us_text(t)}"
    )
    title = f"The device waits for the host {t / total:.0%} of the time (nothing launched yet)"
    return Finding("idle", title, [], facts, t, text, bound_us=t, formula=formula)


def _waited(ctx: Context, split: dict, facts: dict, total: float) -> Finding:
    event, sync, copy = split[IDLE_EVENT], split[IDLE_WAIT_SYNC], split[IDLE_WAIT_COPY]
    t = event + sync + copy
    named = [
        (v, name)
        for v, name in (
            (
                event,
                "a wait for an event (cudaStreamWaitEvent / hipStreamWaitEvent) "
                "before the launch on its stream",
            ),
            (sync, "a stream / device / event sync the host sat in"),
            (copy, "a blocking copy the host sat in (cudaMemcpy / hipMemcpyWithStream)"),
        )
        if v >= 0.05  # shown to 0.1 µs
    ]
    parts = "; ".join(f"{us_text(v)} on {name}" for v, name in sorted(named, reverse=True))
    if facts.get("event_wait_host_blocked_us", 0.0) >= 0.05:
        parts += (
            f" (the host meanwhile sat {us_text(facts['event_wait_host_blocked_us'])} in a "
            "sync or blocking copy)"
        )
    text = (
        f"The work was launched and queued, and the device still waited: {parts}. This is a "
        f"dependency, not input loading. {_sentence(_advise(ctx, 'idle_wait'))}"
    )
    formula = (
        f"Σ over idle gaps of the time after the next activity's launch (and its "
        f"{us_text(LAUNCH_LATENCY_PS / 1e6)} launch latency) = event wait {us_text(event)} + sync "
        f"{us_text(sync)} + blocking copy {us_text(copy)} = {us_text(t)}"
    )
    title = (
        f"The device waits on a dependency {t / total:.0%} of the time, with the next work "
        "already launched"
    )
    return Finding("idle_wait", title, [], facts, t, text, bound_us=t, formula=formula)


def _launch_latency(ctx: Context, split: dict, facts: dict, total: float) -> Finding:
    t = split[IDLE_LAUNCH]
    text = (
        "The device waited for launches in progress: from each launch call to its kernel's "
        f"start ({us_text(LAUNCH_LATENCY_PS / 1e6)} at most, or the whole call when it lasts "
        "longer). "
        f"{_sentence(ctx.advise('launch_latency'))}"
    )
    formula = (
        f"Σ over idle gaps of the time from the next activity's launch call to "
        f"max(its return, call + {us_text(LAUNCH_LATENCY_PS / 1e6)}) = {us_text(t)}"
    )
    title = f"The device waits for kernel launches {t / total:.0%} of the time"
    return Finding("launch_latency", title, [], facts, t, text, bound_us=t, formula=formula)


def _undetermined(ctx: Context, split: dict, facts: dict, total: float) -> Finding:
    queued, none = split[IDLE_QUEUED], split[IDLE_NO_LAUNCH]
    t = queued + none
    text = "The trace cannot tell why the device was idle here:"
    if queued > 0:
        text += (
            f" for {us_text(queued)} the next work had been launched, no wait for an event, "
            "sync or blocking copy was recorded, and it still did not run (work outside "
            "this trace: another process on the device, kernels launched before the profiler "
            "started, or dependencies inside a replayed graph);"
        )
    if none > 0:
        text += (
            f" for {us_text(none)} the next work has no launch call in the trace (no "
            "runtime event with its correlation id: record CPU and runtime activity too), or "
            "one recorded after the work started (host and device clocks disagree);"
        )
    text = text.rstrip(";") + ". The saving is the idle time, whatever its cause."
    formula = (
        f"Σ over idle gaps of the time after the launch (+ latency) with no wait recorded "
        f"{us_text(queued)} + gaps whose next activity has no launch {us_text(none)} = "
        f"{us_text(t)}"
    )
    title = f"The device is idle {t / total:.0%} of the time for a cause the trace does not show"
    return Finding("idle_undetermined", title, [], facts, t, text, bound_us=t, formula=formula)
