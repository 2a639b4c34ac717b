"""Stage 2 of the XLA GPU/CPU reader: steps.

GPU: a `Steps` line gives each step's span by `group_id`, and kernels carry the `group_id` of
their step. CPU: JAX's `StepTraceAnnotation` writes a host event with a `step_num` stat
spanning the step; an op belongs to the step whose span holds its start. Several markers of one
step: the longest wins (`readers.common.longest_markers`).
"""

from __future__ import annotations

import bisect
import collections

from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers.common import longest_markers
from tb_roofline.readers.xspace.xla_gpu_cpu.events import HOST_PLANE, TIME_LIMIT_PS, stat_int
from tb_roofline.readers.xspace.xplane import PlaneStats
from tb_roofline.table.op_table import NO_STEP
from tb_roofline.table.spans import StepSpan


def _markers(plane, stat: str, line_name: str | None = None):
    """(step, begin ps, duration ps) of every event of `plane` carrying `stat`."""
    ps = PlaneStats(plane)
    sid = ps.ids.get(stat)
    out: list = []
    if sid is None:
        return out
    for line in plane.lines:
        if line_name is not None and line.name != line_name:
            continue
        base = line.timestamp_ns * 1000
        for ev in line.events:
            for st in ev.stats:
                if st.metadata_id == sid:
                    out.append(
                        (
                            stat_int(ps.value(st), plane, line, stat),
                            base + ev.offset_ps,
                            ev.duration_ps,
                        )
                    )
    return out


def _longest(markers, where: str, fixes: collections.Counter) -> list[tuple[int, int, int]]:
    if not markers:
        return []
    step, begin, dur = longest_markers(*zip(*markers))
    fixes["negative_durations"] += int((dur < 0).sum())
    out = [(s, b, max(d, 0)) for s, b, d in zip(step.tolist(), begin.tolist(), dur.tolist())]
    if any(not -TIME_LIMIT_PS < b < TIME_LIMIT_PS or d >= TIME_LIMIT_PS for _, b, d in out):
        raise ProfileFormatError(
            f"plane {where[:100]!r}: step times or durations beyond "
            "2^62 ps (53 days): corrupt offsets or durations"
        )
    return out


def host_steps(space, fixes: collections.Counter) -> list[tuple[int, int, int]]:
    """(step, begin ps, duration ps) from host events with a `step_num` stat."""
    markers = [m for p in space.planes if p.name == HOST_PLANE for m in _markers(p, "step_num")]
    return _longest(markers, HOST_PLANE, fixes)


def device_steps(plane, fixes: collections.Counter) -> dict[int, tuple[int, int]]:
    """{group id: (begin ps, duration ps)} from a GPU plane's `Steps` line."""
    return {
        g: (b, d) for g, b, d in _longest(_markers(plane, "group_id", "Steps"), plane.name, fixes)
    }


def assign_steps(flat, host_spans) -> None:
    """Each event's step: its `group_id` when the plane's events carry one, else the host step
    whose span holds its start."""
    if any(e.group != NO_STEP for e in flat):
        for e in flat:
            e.step = e.group
        return
    if not host_spans:
        return
    starts = [b for _, b, _ in host_spans]
    for ev in flat:
        i = bisect.bisect_right(starts, ev.begin) - 1
        if i >= 0:
            step, b, d = host_spans[i]
            if ev.begin < b + d:
                ev.step = step


def step_spans(host: str, core: int, flat, dev_steps: dict, host_spans) -> list[StepSpan]:
    """One span per step the core's events belong to: the `Steps` line's, else the host
    marker's (CPU), else the extent of the step's events."""
    by_group = any(e.group != NO_STEP for e in flat)
    out = []
    for s in sorted({e.step for e in flat if e.step != NO_STEP}):
        if s in dev_steps:
            b, d = dev_steps[s]
        else:
            hs = [x for x in host_spans if x[0] == s]
            if hs and not dev_steps and not by_group:
                b, d = hs[0][1], hs[0][2]
            else:
                member = [e for e in flat if e.step == s]
                b = min(e.begin for e in member)
                d = max(e.begin + e.dur for e in member) - b
        out.append(StepSpan(host, core, s, int(b), int(d)))
    return out
