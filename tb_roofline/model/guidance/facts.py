"""The readers' timeline facts of one analysis, merged over hosts and named like its op records.

Readers label ops as they gave them to the op table (program id, operation, precision as read);
the model may have placed them under another ceiling since (`precision`, with the data type
kept in `dtype`). Here every label becomes the identity of the op record it belongs to:
(program id, operation, precision), which is how findings link to ops.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.table.timeline import (  # noqa: F401
    MAX_KERNELS_PER_OP,
    AdjacentPair,
    KernelUse,
    Timeline,
    merge_shapes,
)
from tb_roofline.table.unspanned import unspanned_self_ps


@dataclasses.dataclass
class Facts:
    timeline: Timeline | None  # None when no reader gave one (then op times stand in)
    op_shapes: dict  # (program_id, operation, precision) -> [ShapeUse]
    host_step_ps: dict  # host -> its own time of each aligned step (ps), when several hosts
    hosts: list  # the hosts of this view
    op_kernels: dict = dataclasses.field(default_factory=dict)  # same keys -> [KernelUse]
    # same keys -> self time (ps) on devices that ran no program (readers.common
    # .program_devices: a GPU that only copied has no core span): in no device time or class
    off_program_self_ps: dict = dataclasses.field(default_factory=dict)


def merge_kernels(parts: list) -> dict:
    """The kernels of several profiles' ops: one name's launches and time add up; each op
    keeps its MAX_KERNELS_PER_OP kernels of most time."""
    out: dict = {}
    for p in parts:
        for label, uses in (p or {}).items():
            per = out.setdefault(label, {})
            for u in uses:
                n, t = per.get(u.name, (0, 0.0))
                per[u.name] = (n + int(u.launches), t + float(u.time_ps))
    return {
        label: sorted(
            (KernelUse(k, n, t) for k, (n, t) in per.items()), key=lambda u: (-u.time_ps, u.name)
        )[:MAX_KERNELS_PER_OP]
        for label, per in out.items()
    }


def collect(profiles, table, steps: list) -> Facts:
    """`steps`: the aligned steps (model.roofline._host_steps): [(host, step id), ...] each."""
    resolve = _resolver(table)
    timeline = Timeline.merge([p.timeline for p in profiles])
    if timeline is not None:
        timeline = Timeline(
            timeline.windows,
            [
                dataclasses.replace(p, first=resolve(p.first), second=resolve(p.second))
                for p in timeline.pairs
            ],
            _resolved_sums(timeline.exposed_by_op, resolve),
            timeline.idle_causes,
            timeline.cause_span_ps,
        )
    shapes = (
        merge_shapes([{resolve(k): v for k, v in (p.op_shapes or {}).items()} for p in profiles])
        or {}
    )
    kernels = merge_kernels(
        [
            {resolve(k): v for k, v in (getattr(p, "op_kernels", None) or {}).items()}
            for p in profiles
        ]
    )
    hosts = [p.core_spans[0].host for p in profiles if p.core_spans]
    wall = _own_step_time(profiles)
    host_step_ps = {}
    if len(hosts) > 1 and steps:
        for i, h in enumerate(hosts):
            host_step_ps[h] = np.array(
                [float(wall.get(members[i], 0)) if i < len(members) else 0.0 for members in steps]
            )
    return Facts(timeline, shapes, host_step_ps, hosts, kernels, _off_program_self(profiles))


def _off_program_self(profiles) -> dict:
    """(program_id, operation, precision) -> self time (ps) of its rows on devices that ran no
    program, summed over the profiles (table/unspanned.py)."""
    out: dict = {}
    for p in profiles:
        per_key = unspanned_self_ps(p)
        if per_key is None:
            continue
        keys = p.ops.keys
        for k in np.flatnonzero(per_key).tolist():
            label = (
                str(keys["program_id"][k]),
                str(keys["operation"][k]),
                str(keys["precision"][k]),
            )
            out[label] = out.get(label, 0.0) + float(per_key[k])
    return out


def _own_step_time(profiles) -> dict:
    """(host, step) -> the step's time on that host less the communication it waited in
    alone (the slowest core): in synchronous training every host's step lasts as long as the
    slowest one's, the others spend the difference waiting in collectives. Without a timeline,
    the step's wall time."""
    out: dict = {}
    for p in profiles:
        host = p.core_spans[0].host if p.core_spans else ""
        w = p.timeline.windows if p.timeline is not None else None
        if w is not None:
            own = w["span_ps"] - w["exposed_ps"]
            for step, t in zip(w["step"].tolist(), own.tolist()):
                out[(host, step)] = max(out.get((host, step), 0.0), t)
        else:
            for s in p.steps:
                out[(s.host, s.step)] = max(out.get((s.host, s.step), 0.0), s.duration_ps)
    return out


def _resolver(table):
    """label -> record identity, through the op table's keys."""
    keys = table.keys
    dtype = keys["dtype"].tolist()
    precision = keys["precision"].tolist()
    mapping: dict[tuple, str] = {}
    for pid, op, d, p in zip(
        keys["program_id"].tolist(), keys["operation"].tolist(), dtype, precision
    ):
        mapping.setdefault((pid, op, d or p), p)

    def resolve(label):
        pid, op, read = label
        return (pid, op, mapping.get((pid, op, read), read))

    return resolve


def _resolved_sums(values: dict, resolve) -> dict:
    out: dict = {}
    for k, v in values.items():
        r = resolve(k)
        out[r] = out.get(r, 0.0) + v
    return out
