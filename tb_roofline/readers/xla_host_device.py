"""XSpaces of XLA on GPU and CPU (no TPU TensorCore planes) → op table costed by the HLO model.

Facts used (REFERENCE.md §2-3, HLO.md §1.0):
- GPU: one plane `/device:GPU:N` per GPU, one line per CUDA stream (`Stream #N(...)`); kernel
  and memcpy events carry `hlo_op` (may be `a::b`), `hlo_module`, `program_id`, maybe `group_id`.
  Derived lines (`XLA Ops`, `TensorFlow Ops`, `Steps`...) repeat the kernels and are not read
  as ops; a `Steps` line gives step spans by `group_id`.
- CPU: op executions are events of the `/host:CPU` threads with `hlo_op`, `hlo_module` and
  `program_id` (one event per execution). JAX's `StepTraceAnnotation` writes a host event with
  a `step_num` stat spanning the step; ops are put in the step whose span holds their start.
- The programs' HLO is in `/host:metadata` (`Hlo Proto`, by `program_id`); FLOPs, bytes and
  precision come from `tb_roofline.hlo` (per execution) × executions.

Choices (docs/hlo_cost_model.md): an HLO that launches several kernels counts its FLOPs once per
execution: the executions of an op are the most launches of any one of its kernels. Kernels that
match no HLO instruction keep their time as rows of category "unattributed" (zero FLOPs) and are
reported in a diagnostic.
"""
from __future__ import annotations

import bisect
import collections
import re

import numpy as np

from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.devices.gpu_peaks import KERNEL_PREFIX, apply_ceilings, derive_gpu_peaks
from tb_roofline.hlo.cost_model import module_costs
from tb_roofline.hlo.fingerprint import instruction_fingerprint
from tb_roofline.hlo.module import METADATA_PLANE, HloIndex
from tb_roofline.hlo.shapes import largest_in_memory_space
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.errors import ProfileFormatError
from tb_roofline.model.op_table import (CONTAINER_CATEGORIES, HOST_TRANSFER, NO_STEP, CoreSpan,
                                        OpTableBuilder, ProfileData, StepSpan)
from tb_roofline.model.timeline import TimelineBuilder, add_shape_use, is_communication, is_fusible
from tb_roofline.readers import kernel_names
from tb_roofline.readers.shape_facts import hlo_shape
from tb_roofline.readers.tpu import corrupt_value_notes
from tb_roofline.readers.xline_fast import self_times
from tb_roofline.readers.xplane import PlaneStats

GPU_PLANE = re.compile(r"^/device:GPU:(\d+)$")
HOST_PLANE = "/host:CPU"
DERIVED_LINES = frozenset({"XLA Ops", "XLA Modules", "TensorFlow Ops", "TensorFlow Name Scope",
                           "Steps", "Launch Stats", "_counters_", "Source code", "XLA TraceMe",
                           "Framework Ops", "Framework Name Scope", "Async XLA Ops"})
UNATTRIBUTED = "unattributed"
_TIME_LIMIT_PS = 1 << 62  # times beyond this would overflow int64 sums


def _stat_int(value, plane, line, name: str) -> int:
    """An integer stat (`step_num`, `group_id`): int64 / uint64, or a double holding an integer;
    anything else (no value, text, NaN, out of int64) names the place of the corrupt stat."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 63:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and -2 ** 63 <= value < 2 ** 63:
        return value
    kind = "no value" if value is None else f"a {type(value).__name__}"
    raise ProfileFormatError(f"plane {plane.name[:100]!r}, line {line.name[:100]!r}: stat "
                             f"{name!r} holds {kind}, not an integer")


class _Event:
    __slots__ = ("name", "begin", "dur", "hlo_op", "program_id", "module", "group", "step")

    def __init__(self, name, begin, dur, hlo_op, program_id, module, group):
        self.name = name
        self.begin = begin
        self.dur = dur
        self.hlo_op = hlo_op
        self.program_id = program_id
        self.module = module
        self.group = group
        self.step = NO_STEP


def _events(plane, lines, ps: PlaneStats, require_hlo: bool):
    """Events of `lines` (per line, for self times) as `_Event`s."""
    ids = ps.ids
    want = {ids.get(k, -1): k for k in ("hlo_op", "program_id", "hlo_module", "group_id")}
    want.pop(-1, None)
    out = []
    for line in lines:
        base = line.timestamp_ns * 1000
        evs = []
        for ev in line.events:
            vals = {}
            for st in ev.stats:
                key = want.get(st.metadata_id)
                if key is not None:
                    vals[key] = ps.value(st)
            hlo_op = vals.get("hlo_op")
            if require_hlo and not hlo_op:
                continue
            md = plane.event_metadata.get(ev.metadata_id)
            name = (md.name or md.display_name) if md is not None else ""
            pid = vals.get("program_id")
            group = vals.get("group_id")
            evs.append(_Event(name, base + ev.offset_ps, ev.duration_ps,
                              str(hlo_op) if hlo_op else "",
                              "" if pid in (None, "") else str(pid),
                              str(vals.get("hlo_module") or ""),
                              NO_STEP if group is None else
                              _stat_int(group, plane, line, "group_id")))
        if evs:
            out.append(evs)
    return out


def _host_steps(space) -> list[tuple[int, int, int]]:
    """(step, begin ps, duration ps) from host events with a `step_num` stat (the longest wins)."""
    best: dict[int, tuple[int, int]] = {}
    for plane in space.planes:
        if plane.name != HOST_PLANE:
            continue
        ps = PlaneStats(plane)
        sid = ps.ids.get("step_num")
        if sid is None:
            continue
        for line in plane.lines:
            base = line.timestamp_ns * 1000
            for ev in line.events:
                for st in ev.stats:
                    if st.metadata_id == sid:
                        step = _stat_int(ps.value(st), plane, line, "step_num")
                        b, d = base + ev.offset_ps, ev.duration_ps
                        if step not in best or d > best[step][1]:
                            best[step] = (b, d)
    return sorted((s, b, d) for s, (b, d) in best.items())


def _device_steps(plane, ps: PlaneStats) -> dict[int, tuple[int, int]]:
    gid = ps.ids.get("group_id")
    out: dict[int, tuple[int, int]] = {}
    for line in plane.lines:
        if line.name != "Steps":
            continue
        base = line.timestamp_ns * 1000
        for ev in line.events:
            for st in ev.stats:
                if st.metadata_id == gid:
                    g = _stat_int(ps.value(st), plane, line, "group_id")
                    if g not in out or ev.duration_ps > out[g][1]:
                        out[g] = (base + ev.offset_ps, ev.duration_ps)
    return out


def _check_step_times(steps, plane_name: str):
    if any(not -_TIME_LIMIT_PS < b < _TIME_LIMIT_PS or d >= _TIME_LIMIT_PS for _, b, d in steps):
        raise ProfileFormatError(f"plane {plane_name[:100]!r}: step times or durations beyond "
                                 "2^62 ps (53 days): corrupt offsets or durations")


def _assign_by_time(events, steps):
    """Put each event in the host step whose span holds its start."""
    if not steps:
        return
    starts = [b for _, b, _ in steps]
    for ev in events:
        i = bisect.bisect_right(starts, ev.begin) - 1
        if i >= 0:
            step, b, d = steps[i]
            if ev.begin < b + d:
                ev.step = step


class _Costing:
    """Looks instructions up and costs them, once per program; tallies what does not match."""

    def __init__(self, index: HloIndex, gpu: bool):
        self.index = index
        self.gpu = gpu
        self.costs = {}
        self.fingerprints: dict = {}  # program id -> {op name: fingerprint}
        self._signatures: dict = {}  # computation signatures, shared by the programs
        self.unknown = collections.Counter()
        self.no_trip = 0
        self._name_to_pid = {}

    def program_id(self, ev: _Event) -> str:
        if ev.program_id:
            return ev.program_id
        if ev.module and ev.module not in self._name_to_pid:
            m = self.index.find(None, ev.module)
            self._name_to_pid[ev.module] = m.program_id if m is not None else ""
        return self._name_to_pid.get(ev.module, "")

    def fingerprint(self, pid: str, ins) -> str:
        by_name = self.fingerprints.setdefault(pid, {})
        fp = by_name.get(ins.name)
        if fp is None:
            fp = by_name[ins.name] = instruction_fingerprint(ins, self._signatures)
        return fp

    def module_costs(self, pid: str):
        if pid not in self.costs:
            module = self.index.get(pid) if pid else None
            mc = None
            if module is not None:
                mc = module_costs(module, gpu=self.gpu)
                self.unknown.update(mc.unknown)
                self.no_trip += sum(1 for c in module.computations for i in c.instructions
                                    if i.opcode == "while" and b"known_trip_count" not in
                                    bytes(i.proto.backend_config))
            self.costs[pid] = (module, mc)
        return self.costs[pid]


def read_gpu_cpu_xspace(space, host: str, progress=None) -> ProfileData:
    """Op table for an XSpace of XLA on GPU (`/device:GPU:N` streams) or CPU (`/host:CPU`)."""
    index = HloIndex.from_space(space)
    gpus = sorted(((int(m.group(1)), p) for p in space.planes
                   if (m := GPU_PLANE.match(p.name))), key=lambda c: c[0])
    is_gpu = bool(gpus)
    costing = _Costing(index, gpu=is_gpu)
    builder = OpTableBuilder()
    steps: list[StepSpan] = []
    spans: list[CoreSpan] = []
    diagnostics: list[Diagnostic] = []
    host_steps = _host_steps(space)
    fixes = collections.Counter()
    fixes["negative_durations"] += sum(1 for _, _, d in host_steps if d < 0)
    host_steps = [(s, b, max(d, 0)) for s, b, d in host_steps]
    _check_step_times(host_steps, HOST_PLANE)
    reasons = collections.Counter()
    unattributed_ps = 0
    all_ps = 0
    cores = gpus if is_gpu else [(0, p) for p in space.planes if p.name == HOST_PLANE][:1]
    timeline, shapes = TimelineBuilder(), {}
    for done, (core, plane) in enumerate(cores):
        if progress:
            progress(done, len(cores))
        ps = PlaneStats(plane)
        if is_gpu:
            lines = [l for l in plane.lines if l.name not in DERIVED_LINES]
            per_line = _events(plane, lines, ps, require_hlo=False)
        else:
            per_line = _events(plane, plane.lines, ps, require_hlo=True)
        flat = [e for evs in per_line for e in evs]
        if not flat:
            continue
        for e in flat:  # a negative duration counts as 0 (and is said); no time overflows int64
            if e.dur < 0:
                fixes["negative_durations"] += 1
                e.dur = 0
            if not -_TIME_LIMIT_PS < e.begin < _TIME_LIMIT_PS or e.dur >= _TIME_LIMIT_PS:
                raise ProfileFormatError(
                    f"plane {plane.name[:100]!r}: event times or durations beyond 2^62 ps "
                    "(53 days): corrupt offsets or durations")
        if sum(e.dur for e in flat) >= _TIME_LIMIT_PS:
            raise ProfileFormatError(f"plane {plane.name[:100]!r}: event durations sum to more "
                                     "than 2^62 ps (53 days): corrupt durations")
        dev_steps = _device_steps(plane, ps) if is_gpu else {}
        fixes["negative_durations"] += sum(1 for _, d in dev_steps.values() if d < 0)
        dev_steps = {g: (b, max(d, 0)) for g, (b, d) in dev_steps.items()}
        _check_step_times([(g, b, d) for g, (b, d) in dev_steps.items()], plane.name)
        if any(e.group != NO_STEP for e in flat):
            for e in flat:
                e.step = e.group
        else:
            _assign_by_time(flat, host_steps)
        # Self times per line (ops nest only on their own line: a while around its body).
        self_time = {}
        for evs in per_line:
            begin = np.fromiter((e.begin for e in evs), np.int64, len(evs))
            dur = np.fromiter((e.dur for e in evs), np.int64, len(evs))
            order, selft = self_times(begin, dur)
            for i, s in zip(order.tolist(), selft.tolist()):
                self_time[id(evs[i])] = s
        groups: dict[tuple, list] = {}
        event_keys = []
        for e in flat:
            pid = costing.program_id(e) if e.hlo_op else e.program_id
            module, mc = costing.module_costs(pid) if e.hlo_op else (None, None)
            ins = module.instruction(e.hlo_op) if module is not None else None
            if ins is None:
                reason = ("no hlo_op (command buffer, CUDA graph or non-XLA kernel)" if not e.hlo_op
                          else "program without HLO proto" if module is None
                          else "op not found in its program's HLO")
                reasons[reason] += 1
                key = (UNATTRIBUTED, pid, e.hlo_op or e.name, e.step)
            else:
                key = ("op", pid, ins.name, e.step)
            event_keys.append(key)
            g = groups.get(key)
            if g is None:
                g = groups[key] = [ins, module, mc, 0, 0, collections.Counter(), 0,
                                   collections.Counter()]
            g[3] += e.dur
            g[4] += self_time[id(e)]
            g[5][e.name] += 1
            g[6] += 1
            g[7][e.name] += e.dur
        lo = min(e.begin for e in flat)
        hi = max(e.begin + e.dur for e in flat)
        step_ids = sorted({e.step for e in flat if e.step != NO_STEP})
        for s in step_ids:
            if s in dev_steps:
                b, d = dev_steps[s]
            else:
                hs = [x for x in host_steps if x[0] == s]
                if hs and not dev_steps and not any(e.group != NO_STEP for e in flat):
                    b, d = hs[0][1], hs[0][2]
                else:
                    member = [e for e in flat if e.step == s]
                    b = min(e.begin for e in member)
                    d = max(e.begin + e.dur for e in member) - b
            steps.append(StepSpan(host, core, s, int(b), int(d)))
            lo, hi = min(lo, b), max(hi, b + d)
        spans.append(CoreSpan(host, core, int(lo), int(hi)))
        labels = {}  # group key -> (op label, category) for the timeline
        for (kind, pid, opname, step), (ins, module, mc, total, selft, kernels, n_events,
                                        kernel_time) in groups.items():
            all_ps += total
            program = index.module_name(pid) if pid else ""
            if kind == UNATTRIBUTED:
                unattributed_ps += total
                labels[(kind, pid, opname, step)] = ((pid, opname, ""), opname)
                builder.add(host=host, core=core, program_id=pid, program=program,
                            operation=opname, category=UNATTRIBUTED, step=step,
                            occurrences=n_events, total_time_ps=float(total),
                            self_time_ps=float(selft), flops_source="none",
                            flops_known=False, bytes_known=False)
                continue
            # One execution launches each of its kernels once: count the most-launched kernel.
            execs = max(kernels.values()) if is_gpu else n_events
            c = mc.get(opname)
            meta = ins.proto.metadata
            costed = _costed(ins, mc)
            host_moved = _host_bytes(ins)
            precision = _ran_at(kernel_time, c.precision) if is_gpu else c.precision
            labels[(kind, pid, opname, step)] = ((pid, opname, precision), c.category)
            _add_shape(shapes, (pid, opname, precision), ins, execs, total)
            builder.add(host=host, core=core, program_id=pid, program=program or module.name,
                        operation=opname, category=c.category, step=step,
                        occurrences=execs, total_time_ps=float(total), self_time_ps=float(selft),
                        flops=c.flops * execs, model_flops=c.flops * execs,
                        bytes=c.bytes * execs, hbm_bytes=0.0 if host_moved else c.bytes * execs,
                        host_bytes=host_moved * execs, caveat=HOST_TRANSFER if host_moved else "",
                        source=module.source_of(ins), tf_op=meta.op_name,
                        flops_source="cost_model" if costed else "none",
                        flops_known=costed, bytes_known=costed,
                        precision=precision,
                        fingerprint=costing.fingerprint(pid, ins),
                        is_container=c.category in CONTAINER_CATEGORIES)
        _add_core_timeline(timeline, core, (lo, hi), [(x.step, x.start_ps, x.duration_ps)
                                                      for x in steps if x.core == core],
                           per_line, event_keys, labels)
    if progress:
        progress(len(cores), len(cores))

    device, device_notes = _device(space, gpus, is_gpu)
    diagnostics.extend(device_notes)
    diagnostics.extend(corrupt_value_notes(fixes))
    if not any(p.name == METADATA_PLANE for p in space.planes) or not len(index):
        diagnostics.append(Diagnostic(
            "warning", "no_hlo_protos",
            "this profile holds no HLO programs (no `Hlo Proto` on /host:metadata), so no FLOPs "
            "or bytes can be computed; kernel time is shown as unattributed"))
    else:
        used = [pid for pid, (m, _) in costing.costs.items() if m is not None]
        diagnostics.append(Diagnostic(
            "info", "cost_model",
            f"FLOPs and bytes computed by tb-roofline's HLO cost model from {len(used)} of "
            f"{len(index)} programs' HLO (per execution, × executions); a while loop counts its "
            "body × the known trip count"))
    for err in index.errors:
        diagnostics.append(Diagnostic("warning", "hlo_decode_error", err))
    if reasons:
        share = 100.0 * unattributed_ps / all_ps if all_ps else 0.0
        what = "kernels" if is_gpu else "op events"
        diagnostics.append(Diagnostic(
            "warning", "unattributed_time",
            f"{sum(reasons.values())} {what} ({unattributed_ps / 1e6:.3f} µs, {share:.1f}% of op "
            "time) match no HLO instruction and are shown as category \"unattributed\" with no "
            "FLOPs: " + "; ".join(f"{n} {r}" for r, n in reasons.most_common())))
    if costing.unknown:
        diagnostics.append(Diagnostic(
            "warning", "unknown_opcodes",
            "HLO operations with no cost rule count 0 FLOPs: " + ", ".join(
                f"{name} ×{n}" for name, n in costing.unknown.most_common())))
    if costing.no_trip:
        diagnostics.append(Diagnostic(
            "info", "while_without_trip_count",
            f"{costing.no_trip} while loop(s) have no known trip count; their cost is one "
            "iteration (their body ops are still timed and costed per execution)"))
    ops = builder.build()
    apply_ceilings(ops, device, allow_tf32=True)  # XLA runs f32 dots on TF32 by default
    if not len(ops):
        diagnostics.append(Diagnostic("warning", "no_xla_ops",
                                      "no XLA op executions found on GPU streams or CPU threads"))
    return ProfileData(device=device, ops=ops, steps=steps, core_spans=spans,
                       diagnostics=diagnostics, timeline=timeline.build(), op_shapes=shapes)


def _host_bytes(ins) -> int:
    """Arrays in host memory (`S(5)`) among an instruction's result and operands make it a host
    transfer (JAX host offload on GPU/CPU): the size it moves over the host link, else 0. The
    `-done` half of an async copy moves nothing of its own."""
    if ins.opcode.endswith("-done"):
        return 0
    shapes = [ins.proto.shape] + [o.proto.shape for o in ins.operands]
    return max(largest_in_memory_space(s) for s in shapes)


def _costed(ins, mc) -> bool:
    """Whether the cost model has a rule for this instruction (unknown opcodes count 0)."""
    unknown = mc.unknown
    if ins.opcode in unknown:
        return False
    target = getattr(ins.proto, "custom_call_target", "")
    return not (ins.opcode == "custom-call" and f"custom-call {target}" in unknown)


def _ran_at(kernel_time, dtype: str) -> str:
    """What ran: the unit the op's longest GEMM/convolution kernel names (TF32 tensor cores,
    FP32 SIMT, ...), else the data type the HLO gives."""
    if kernel_time:
        name = max(kernel_time, key=kernel_time.get)
        unit = kernel_names.kernel_unit(name) if kernel_names.is_matmul_kernel(name) else ""
        if unit:
            return KERNEL_PREFIX + unit
    return dtype


def _device(space, gpus, is_gpu) -> tuple[DeviceInfo, list]:
    """GPU: peaks derived from the device-capability stats, checked against the data sheets.
    CPU: the profile has no peaks (the service applies a device file when there is one)."""
    if is_gpu:
        ps = PlaneStats(gpus[0][1])
        peaks = derive_gpu_peaks(ps.as_dict(gpus[0][1].stats), len(gpus))
        return peaks.device, peaks.diagnostics
    cpu = ""
    for p in space.planes:
        if p.name == METADATA_PLANE:
            cpu = str(PlaneStats(p).as_dict(p.stats).get("cpu_version") or "")
    return DeviceInfo(type=cpu or "CPU", kind="cpu", num_cores=1, compute=[]), []


def _add_core_timeline(timeline: TimelineBuilder, core, span, core_steps, per_line, event_keys,
                       labels):
    """Hand one core's events (lanes = streams or threads) to the timeline summary."""
    lane = np.repeat(np.arange(len(per_line)), [len(evs) for evs in per_line])
    begin = np.fromiter((e.begin for evs in per_line for e in evs), np.int64, len(lane))
    end = begin + np.fromiter((e.dur for evs in per_line for e in evs), np.int64, len(lane))
    facts = {}
    for key, (label, category) in labels.items():
        facts[key] = (timeline.label_id(label), is_communication(category),
                      is_fusible(category), category not in CONTAINER_CATEGORIES)
    f = np.array([facts[k] for k in event_keys], np.int64).reshape(-1, 4)
    timeline.add_core(core, span, core_steps, lane, begin, end, f[:, 0], f[:, 1] > 0,
                      f[:, 2] > 0, f[:, 3] > 0)


def _add_shape(shapes: dict, label, ins, calls, time_ps):
    shape = hlo_shape(ins)
    if shape is not None:
        add_shape_use(shapes, label, shape, calls, time_ps)
