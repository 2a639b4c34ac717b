"""The program-level guidance rules: idle time, exposed communication, a straggler host, a
throttled clock.

Each states the bound its model proves (docs/guidance.md, "Rules"): idle time by its cause
(model/guidance/idle_rules.py); overlap hides at most the exposed communication or the work that
could run beside it, whichever is less; a straggler's cost is the others' wait, already in their
idle / exposed time; a throttled clock's, at most Σ overlap × (1 − clock / rated) over the
samples below the rated clock.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.model.guidance.idle_rules import idle, idle_split  # noqa: F401
from tb_roofline.model.guidance.rule_context import (
    EXPOSED_SHARE,
    STRAGGLER_RATIO,
    Context,
    Finding,
    us_text,
)
from tb_roofline.model.records.counter_records import THROTTLE_RATIO, summary


def exposed_communication(ctx: Context, wall: dict) -> list:
    total = ctx.total_time_us
    exposed = wall["exposed"]
    if total <= 0 or exposed < EXPOSED_SHARE * total:
        return []
    work = max(wall["compute"], 0.0)
    saved = min(exposed, work)
    tl = ctx.facts.timeline if ctx.facts is not None else None
    top = sorted((tl.exposed_by_op if tl else {}).items(), key=lambda kv: -kv[1])[:5]
    facts = {
        "exposed_us": exposed,
        "exposed_share": exposed / total,
        "overlap_work_us": work,
        "contributors": [
            {"program_id": k[0], "operation": k[1], "precision": k[2], "exposed_us": v / 1e6}
            for k, v in top
        ],
    }
    advice = ctx.advise("exposed_communication")  # each runtime's text says how to overlap
    text = advice[:1].upper() + advice[1:] + "."
    if work < exposed:
        text += (
            f" Only {us_text(work)} of work exists to run beside {us_text(exposed)} of exposed "
            "transfers, so overlap hides at most that; the rest is the link itself: move "
            "fewer bytes (smaller data types, sharding or placement that transfers less, "
            "keeping data on the device) or use a faster link."
        )
    return [
        Finding(
            "exposed_communication",
            f"Communication and host transfers run alone {exposed / total:.0%} of the time",
            [],
            facts,
            saved,
            text,
            bound_us=saved,
            formula=f"min(exposed, work beside it) = min({us_text(exposed)}, {us_text(work)}) = "
            f"{us_text(saved)}",
        )
    ]


def straggler(ctx: Context) -> list:
    steps = ctx.facts.host_step_ps if ctx.facts is not None else {}
    if len(steps) < 2:
        return []
    hosts = list(steps)
    t = np.vstack([steps[h] for h in hosts])  # hosts × steps (ps)
    mean = t.mean(axis=1)
    slow = int(np.argmax(mean))
    others = np.median(np.delete(t, slow, axis=0), axis=0)
    ratio = float(mean[slow] / others.mean()) if others.mean() > 0 else 0.0
    if ratio < STRAGGLER_RATIO:
        return []
    wait_us = (
        float(np.maximum(t[slow] - np.delete(t, slow, axis=0), 0).sum())
        / 1e6
        * max(1, ctx.device.num_cores // len(hosts))
    )
    facts = {
        "host": hosts[slow],
        "ratio_to_median": ratio,
        "step_time_us": {h: float(m) / 1e6 for h, m in zip(hosts, mean)},
        "others_wait_us": wait_us,
    }
    return [
        Finding(
            "straggler",
            f"Host {hosts[slow]} is {ratio - 1:.0%} slower per step than the others",
            [],
            facts,
            wait_us,
            f"In synchronous training every host waits for {hosts[slow]}: compare its op times and "
            "idle time with the others (its input shard, clocks / thermal throttling, background "
            "processes, an uneven split of data or model). Its wait shows up as the others' idle "
            "or exposed-communication time, so it is not added to the total again.",
            bound_us=wait_us,
            formula=f"Σ over steps and hosts of (slowest − own step time) = "
            f"{us_text(wait_us)} (counted 0: already idle / exposed time)",
        )
    ]


def clock_throttled(ctx: Context) -> list:
    """Windows (steps, else the Total) whose sampled SM clock was below the rated clock: the
    share of the covered time throttled, and the bound Σ overlap × (1 − clock / rated) over
    the throttled samples (nothing runs faster than in proportion to the clock)."""
    rc = ctx.counters
    if rc is None or not rc.total.rated_clock_mhz:
        return []
    windows = [(lab, w) for lab, w in zip(rc.labels, rc.steps) if w is not None] or [
        ("Total", rc.total)
    ]
    hit = [(lab, w) for lab, w in windows if w.throttled_ps > 0]
    if not hit:
        return []
    lab, worst = max(hit, key=lambda lw: lw[1].throttled_share)
    bound_us = sum(w.clock_bound_ps for _, w in hit) / 1e6
    which = f"step {lab}" if lab != "Total" else "the profile"
    more = f" (and {len(hit) - 1} more steps)" if len(hit) > 1 else ""
    return [
        Finding(
            "clock_throttled",
            f"SM clock throttled {worst.throttled_share:.0%} of {which}{more}",
            [],
            {
                "rated_clock_mhz": worst.rated_clock_mhz,
                "windows": [summary(w, lb) for lb, w in hit],
            },
            bound_us,
            "The GPU ran below its rated SM clock (thermal or power limits, or clocks set low): "
            "check cooling, the power cap (nvidia-smi -q -d PERFORMANCE shows the throttle "
            "reasons) and application clocks. Its steps are judged under compute roofs scaled "
            "to the clock they ran at. Part of this time is already in the ops' gaps to their "
            "roofs, so it is not added to the total.",
            bound_us=bound_us,
            formula=f"Σ over samples below {THROTTLE_RATIO:.0%} of the rated "
            f"{worst.rated_clock_mhz:.0f} MHz of overlap × (1 − clock / rated) = "
            f"{us_text(bound_us)} (counted 0: within the ops' gaps)",
        )
    ]


def program_findings(ctx: Context, wall: dict) -> list:
    return (
        idle(ctx, wall) + exposed_communication(ctx, wall) + straggler(ctx) + clock_throttled(ctx)
    )
