"""The XLA GPU/CPU reader as a composition of its stages (see the package docstring)."""

from __future__ import annotations

import collections

import numpy as np

from tb_roofline.costs.hlo.module import METADATA_PLANE, HloIndex
from tb_roofline.devices.gpu_peaks import derive_gpu_peaks
from tb_roofline.devices.precision_ceilings import apply_ceilings
from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers.common import copy_only_note, corrupt_value_notes, program_devices
from tb_roofline.readers.xspace.xla_gpu_cpu.costing import UNATTRIBUTED, Costing
from tb_roofline.readers.xspace.xla_gpu_cpu.counters import counter_series
from tb_roofline.readers.xspace.xla_gpu_cpu.events import (
    HOST_PLANE,
    check_times,
    gpu_planes,
    op_lines,
)
from tb_roofline.readers.xspace.xla_gpu_cpu.notes import program_notes
from tb_roofline.readers.xspace.xla_gpu_cpu.rows import add_rows, group_events, lanes
from tb_roofline.readers.xspace.xla_gpu_cpu.steps import (
    assign_steps,
    device_steps,
    host_steps,
    step_spans,
)
from tb_roofline.readers.xspace.xplane import PlaneStats
from tb_roofline.table.op_table import CONTAINER_CATEGORIES, OpTableBuilder, ProfileData
from tb_roofline.table.spans import CoreSpan
from tb_roofline.table.timeline import is_communication, is_fusible
from tb_roofline.table.timeline_builder import TimelineBuilder


class _Read:
    """What the cores of one XSpace add up to."""

    def __init__(self):
        self.builder = OpTableBuilder()
        self.steps: list = []
        self.spans: list = []
        self.timeline = TimelineBuilder()
        self.shapes: dict = {}
        self.unattributed_ps = 0.0
        self.all_ps = 0.0
        self.ran: list[int] = []  # the cores that ran the program


def read_gpu_cpu_xspace(space, host: str, progress=None) -> ProfileData:
    """Op table for an XSpace of XLA on GPU (`/device:GPU:N` streams) or CPU (`/host:CPU`)."""
    index = HloIndex.from_space(space)
    gpus = gpu_planes(space)
    is_gpu = bool(gpus)
    costing = Costing(index, gpu=is_gpu)
    fixes: collections.Counter = collections.Counter()
    host_spans = host_steps(space, fixes)
    cores = _cores(space, gpus)
    # Program work: a kernel, or any event of an HLO instruction (an XLA copy is the program's).
    ran, copy_only = program_devices(
        [c for c, _, lines in cores for evs in lines for _ in evs],
        [not e.copy or bool(e.hlo_op) for _, _, lines in cores for evs in lines for e in evs],
    )
    listed = len(gpus) if is_gpu else len(cores)  # the devices a collective without groups spans
    out = _Read()
    for done, (core, plane, per_line) in enumerate(cores):
        if progress:
            progress(done, len(cores))
        program = core in ran
        _read_core(out, host, core, plane, per_line, program, host_spans, costing, fixes, listed)
    if progress:
        progress(len(cores), len(cores))
    device, diagnostics, rated_mhz = _device(space, gpus, is_gpu, out.ran)
    counters, counter_notes = counter_series(gpus, rated_mhz)
    diagnostics += counter_notes
    diagnostics += copy_only_note(copy_only)
    diagnostics += corrupt_value_notes(fixes)
    diagnostics += program_notes(space, index, costing, out.unattributed_ps, out.all_ps, listed)
    ops = out.builder.build()
    apply_ceilings(ops, device, allow_tf32=True)  # XLA runs f32 dots on TF32 by default
    if not len(ops):
        diagnostics.append(
            Diagnostic(
                "warning", "no_xla_ops", "no XLA op executions found on GPU streams or CPU threads"
            )
        )
    return ProfileData(
        device=device,
        ops=ops,
        steps=out.steps,
        core_spans=out.spans,
        diagnostics=diagnostics,
        timeline=out.timeline.build(),
        op_shapes=out.shapes,
        counter_series=counters,
    )


def _cores(space, gpus) -> list[tuple[int, object, list]]:
    """(core, plane, its op events per line) of every core with op events. GPU: a core per
    `/device:GPU:N` plane. CPU: a core per XLA device of the host (the events' `device_ordinal`:
    one thread pool runs every device's ops, so a device's events are spread over threads)."""
    if gpus:
        cores = [(core, plane, op_lines(plane, True)) for core, plane in gpus]
        return [c for c in cores if c[2]]
    out = []
    for plane in [p for p in space.planes if p.name == HOST_PLANE][:1]:
        per_line = op_lines(plane, False)
        for d in sorted({e.device for evs in per_line for e in evs}):
            lines = [[e for e in evs if e.device == d] for evs in per_line]
            out.append((d, plane, [evs for evs in lines if evs]))
    return out


def _read_core(out: _Read, host, core, plane, per_line, program, host_spans, costing, fixes, n):
    """One core's op rows; a core that ran the program (`program_devices`) also gets its steps,
    span and timeline, one that only copied has none (no device time, no idle of its own).
    `n`: the devices listed (those a collective naming no replica groups spans)."""
    flat = [e for evs in per_line for e in evs]
    check_times(flat, plane.name, fixes)
    is_gpu = costing.gpu
    dev_steps = device_steps(plane, fixes) if is_gpu else {}
    assign_steps(flat, host_spans)
    lane = lanes(per_line)
    groups, event_group = group_events(flat, lane, costing)
    labels = add_rows(out.builder, groups, host, core, costing, out.shapes, n)
    for g in groups:
        out.all_ps += g.total_ps
        if g.key[0] == UNATTRIBUTED:
            out.unattributed_ps += g.total_ps
    if not program:
        return
    out.ran.append(core)
    core_steps = step_spans(host, core, flat, dev_steps, host_spans)
    out.steps += core_steps
    lo = min([e.begin for e in flat] + [s.start_ps for s in core_steps])
    hi = max([e.begin + e.dur for e in flat] + [s.start_ps + s.duration_ps for s in core_steps])
    out.spans.append(CoreSpan(host, core, int(lo), int(hi)))
    _add_core_timeline(
        out.timeline,
        core,
        (lo, hi),
        [(s.step, s.start_ps, s.duration_ps) for s in core_steps],
        lane,
        flat,
        event_group,
        labels,
    )


def _device(space, gpus, is_gpu, ran) -> tuple[DeviceInfo, list, float | None]:
    """(device, notes, the data sheet's boost clock in MHz or None). GPU: peaks derived from
    the device-capability stats, checked against the data sheets; the device counts the GPUs
    that ran the program (a host lists all its GPUs, one process may use one; a GPU that only
    copied ran none). CPU: the profile has no peaks (the service applies a device file when
    there is one); a core per XLA device that ran ops."""
    if is_gpu:
        ps = PlaneStats(gpus[0][1])
        peaks = derive_gpu_peaks(ps.as_dict(gpus[0][1].stats), max(len(ran), 1))
        notes = list(peaks.diagnostics)
        if ran and len(ran) < len(gpus):
            notes.append(
                Diagnostic(
                    "info",
                    "idle_gpus",
                    f"{len(gpus)} GPUs are listed, {len(ran)} ran the program: per-core "
                    f"figures count {len(ran)}",
                )
            )
        return peaks.device, notes, peaks.spec.clock_mhz if peaks.spec is not None else None
    cpu = ""
    for p in space.planes:
        if p.name == METADATA_PLANE:
            cpu = str(PlaneStats(p).as_dict(p.stats).get("cpu_version") or "")
    device = DeviceInfo(type=cpu or "CPU", kind="cpu", num_cores=max(len(ran), 1), compute=[])
    return device, [], None


def _add_core_timeline(
    timeline: TimelineBuilder, core, span, core_steps, lane, flat, event_group, labels
):
    """Hand one core's events (lanes = streams or threads) to the timeline summary."""
    begin = np.fromiter((e.begin for e in flat), np.int64, len(flat))
    end = begin + np.fromiter((e.dur for e in flat), np.int64, len(flat))
    facts = np.array(
        [
            (
                timeline.label_id(label),
                is_communication(category),
                is_fusible(category),
                category not in CONTAINER_CATEGORIES,
            )
            for label, category in labels
        ],
        np.int64,
    ).reshape(-1, 4)
    f = facts[event_group]
    timeline.add_core(
        core, span, core_steps, lane, begin, end, f[:, 0], f[:, 1] > 0, f[:, 2] > 0, f[:, 3] > 0
    )
