"""TPU reader: the TensorCore planes of an XSpace → op table, step and core spans, peaks.

Facts used (REFERENCE.md §2-3, and XProf's conversion, which users compare us with):
- TensorCore planes are named `/device:TPU:N`; SparseCore planes (`... SparseCore K`) are skipped.
- Ops are the events of the `XLA Ops` line; an op is identified by its metadata (program id and
  name); `device_offset_ps`/`device_duration_ps` (absolute ps) override the event's own timing.
- Self time = duration minus the durations of the events directly nested in it on the line.
- Steps come from `group_id` stats on the `Steps` line (markers) and on the op events.
- A core's profiled span runs from the first to the last event on its `XLA Ops` and `Steps` lines.
- Op metadata values (FLOPs, bytes) are per execution; the table holds totals.
"""
from __future__ import annotations

import collections
import math
import re

import numpy as np
from google.protobuf.message import DecodeError

from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.errors import ProfileFormatError
from tb_roofline.hlo.fingerprint import text_fingerprint
from tb_roofline.hlo.text import async_role, parse_instruction
from tb_roofline.model.op_table import (ASYNC_START, ASYNC_WAIT, CONTAINER_CATEGORIES,
                                        HOST_TRANSFER, NO_STEP, CoreSpan, OpTableBuilder,
                                        ProfileData, StepSpan, is_infeed_outfeed_category)
from tb_roofline.protos import memory_access_pb2, xplane_pb2, xplane_view_pb2
from tb_roofline.model.timeline import TimelineBuilder, add_key_shapes
from tb_roofline.readers.shape_facts import tpu_text_shape
from tb_roofline.readers.tpu_timeline import add_core_events, event_facts
from tb_roofline.readers.xplane import PlaneStats
from tb_roofline.readers.xline_fast import decode_tokens, group_sums, self_times

TENSOR_CORE_PLANE = re.compile(r"^/device:TPU:(\d+)$")
SPARSE_CORE_PLANE = re.compile(r"^/device:TPU:\d+ SparseCore")
OPS_LINE, STEPS_LINE = "XLA Ops", "Steps"

HBM, CMEM, VMEM = 1, 2, 3
READ, WRITE = 1, 2
MAX_OCCURRENCES = 1 << 32  # more executions in one event is a corrupt count
_TIME_LIMIT_PS = 1 << 62   # times and sums of durations beyond this would overflow int64


class _FullPlane:
    """The plane's bytes, parsed with the full schema (or the event-count view) only if some
    line needs it. Shared by a `_TokenPlane` and its lines without pointing back at them (no
    reference cycle, so a plane's memory goes as soon as the reader moves on)."""

    def __init__(self, raw: bytes):
        self._raw = raw
        self._plane = None
        self._counts = None

    def get(self):
        if self._plane is None:
            self._plane = xplane_pb2.XPlane.FromString(self._raw)
        return self._plane

    def event_count(self, index: int) -> int:
        if self._counts is None:
            view = xplane_view_pb2.XPlaneView.FromString(self._raw)
            self._counts = [len(l.events) for l in view.lines]
        return self._counts[index]


class _TokenLine:
    """A line of a TPU plane read as a varint token stream (see xline_fast.decode_tokens)."""

    def __init__(self, full: _FullPlane, index: int, line):
        self._full, self._index = full, index
        self.name = line.name
        self.timestamp_ns = line.timestamp_ns
        self.tokens = line.event_tokens

    def n_events(self) -> int:
        return self._full.event_count(self._index)

    def full(self):
        return self._full.get().lines[self._index]


class _TokenPlane:
    """A TPU TensorCore plane parsed with the token view; the full parse happens only if a
    line needs the per-event path."""

    def __init__(self, raw: bytes):
        tok = xplane_view_pb2.XPlaneTokens.FromString(raw)
        full = _FullPlane(raw)
        self.id, self.name = tok.id, tok.name
        self.stats, self.event_metadata, self.stat_metadata = tok.stats, tok.event_metadata, tok.stat_metadata
        self.lines = [_TokenLine(full, i, l) for i, l in enumerate(tok.lines)]


class _LazyPlane:
    """A TensorCore plane not parsed yet: planes are parsed one at a time, so only one plane's
    decoded events are in memory at once."""

    def __init__(self, name: str, raw: bytes):
        self.name = name
        self._raw = raw

    def load(self):
        try:
            return _TokenPlane(self._raw)
        except (DecodeError, RuntimeError, ValueError):
            return xplane_pb2.XPlane.FromString(self._raw)


def fast_tpu_planes(data: bytes):
    """The TPU TensorCore planes through the token view, or None to use the full schema."""
    try:
        raw = xplane_view_pb2.XSpaceRaw.FromString(data)
        headers = [(xplane_view_pb2.XPlaneHeader.FromString(p), p) for p in raw.planes]
    except (DecodeError, RuntimeError, ValueError):
        return None
    planes, other = [], []
    for header, plane_bytes in headers:
        if TENSOR_CORE_PLANE.match(header.name):
            planes.append(_LazyPlane(header.name, plane_bytes))
        else:
            other.append(header)
    if not planes:
        return None
    return planes, other


def _events(line, stat_ids: dict):
    """`_line_events` for either kind of line, through the fast path when it can."""
    if isinstance(line, _TokenLine):
        decoded = decode_tokens(line.tokens, line.timestamp_ns, stat_ids, line.n_events)
        if decoded is not None:
            return decoded
        return _line_events(line.full(), stat_ids)
    return _line_events(line, stat_ids)

def _device_from_plane_stats(stats: dict, num_cores: int) -> DeviceInfo:
    def num(key):  # a missing, non-numeric or non-finite peak is an unknown one
        v = stats.get(key)
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else 0.0

    tflops = num("peak_teraflops_per_second")
    device = DeviceInfo(type=str(stats.get("device_type_string") or "TPU"), kind="tpu",
                        num_cores=num_cores, megacore=bool(num("has_megacore")),
                        has_merged_vmem=bool(num("has_merged_vmem")))
    device.has_cmem = num("peak_cmem_rd_bw_gigabytes_per_second") > 0 or \
        num("peak_cmem_wr_bw_gigabytes_per_second") > 0
    if tflops > 0:
        device.compute.append(ComputePeak("default", tflops * 1000.0, "profile"))
    device.memories.append(MemoryPeak("hbm", "HBM", num("peak_hbm_bw_gigabytes_per_second"), "profile"))
    for mid, name, key in (("cmem_read", "CMEM Read", "peak_cmem_rd_bw_gigabytes_per_second"),
                           ("cmem_write", "CMEM Write", "peak_cmem_wr_bw_gigabytes_per_second"),
                           ("vmem_read", "VMEM Read", "peak_vmem_rd_bw_gigabytes_per_second"),
                           ("vmem_write", "VMEM Write", "peak_vmem_wr_bw_gigabytes_per_second")):
        if num(key) > 0 and (mid.startswith("cmem") or device.has_merged_vmem):
            device.memories.append(MemoryPeak(mid, name, num(key), "profile"))
    return device


def _breakdown_bytes(raw: bytes | None, total: float) -> tuple:
    """(hbm, cmem_r, cmem_w, vmem_r, vmem_w) bytes per execution; no breakdown = all HBM."""
    if not raw:
        return (total, 0.0, 0.0, 0.0, 0.0)
    msg = memory_access_pb2.MemoryAccessBreakdown.FromString(raw)
    if not msg.memory_accessed:
        return (total, 0.0, 0.0, 0.0, 0.0)
    hbm = cr = cw = vr = vw = 0.0
    for m in msg.memory_accessed:
        if m.memory_space == HBM:
            hbm += m.bytes_accessed
        elif m.memory_space == CMEM:
            if m.operation_type == READ:
                cr += m.bytes_accessed
            elif m.operation_type == WRITE:
                cw += m.bytes_accessed
        elif m.memory_space == VMEM:
            if m.operation_type == READ:
                vr += m.bytes_accessed
            elif m.operation_type == WRITE:
                vw += m.bytes_accessed
    return (hbm, cr, cw, vr, vw)


def _int(v) -> int:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


def _checked(events, plane: str, line: str, fixes: collections.Counter):
    """`_events`' arrays made safe to sum, for either decoding path: negative durations and
    DMA stalls count as 0, an unset (0) num_occurrences as 1, and events with a negative or
    absurd num_occurrences are dropped (each counted in `fixes`, for a diagnostic). Times or
    durations that int64 sums could not hold are a corrupt file."""
    md, begin, dur, group, stall, occ = events
    if not len(md):
        return events
    for name, values in (("negative_durations", dur), ("negative_durations", stall)):
        negative = values < 0
        if negative.any():
            fixes[name] += int(negative.sum())
            values[negative] = 0
    occ[occ == 0] = 1
    bad = (occ < 0) | (occ > MAX_OCCURRENCES)
    if bad.any():
        fixes["bad_occurrences"] += int(bad.sum())
        keep = ~bad
        md, begin, dur, group, stall, occ = (a[keep] for a in (md, begin, dur, group, stall, occ))
    if len(md) and (int(begin.min()) <= -_TIME_LIMIT_PS or int(begin.max()) >= _TIME_LIMIT_PS or
                    float(dur.sum(dtype=np.float64)) >= _TIME_LIMIT_PS or
                    float(stall.sum(dtype=np.float64)) >= _TIME_LIMIT_PS):
        raise ProfileFormatError(f"plane {plane[:100]!r}, line {line[:100]!r}: event times or "
                                 "durations beyond 2^62 ps (53 days): corrupt offsets or durations")
    return md, begin, dur, group, stall, occ


OP_STATS = ("flops", "model_flops", "bytes_accessed", "hlo_category", "program_id",
            "memory_access_breakdown", "source", "tf_op", "shape_with_layout")


def _op_info(ps: PlaneStats, md) -> dict:
    wanted = ps.wanted(OP_STATS)
    s = {}
    for st in md.stats:
        name = wanted.get(st.metadata_id)
        if name is not None:
            s[name] = ps.value(st)
    flops = float(_int(s.get("flops")))
    model_flops = float(_int(s.get("model_flops"))) or flops
    total = float(_int(s.get("bytes_accessed")))
    negative = min(flops, model_flops, total) < 0  # a corrupt stat: counted as 0, and said
    flops, model_flops, total = max(flops, 0.0), max(model_flops, 0.0), max(total, 0.0)
    breakdown = s.get("memory_access_breakdown")
    if breakdown is not None and not isinstance(breakdown, bytes):
        raise ProfileFormatError(
            f"plane {ps.name[:100]!r}, op {md.name[:200]!r}: stat 'memory_access_breakdown' "
            f"holds a {type(breakdown).__name__}, not a serialized MemoryAccessBreakdown")
    try:
        mem = _breakdown_bytes(breakdown, total)
    except DecodeError:
        raise ProfileFormatError(
            f"plane {ps.name[:100]!r}, op {md.name[:200]!r}: stat 'memory_access_breakdown' "
            "does not decode") from None
    category = str(s.get("hlo_category") or "unknown")
    program_id = s.get("program_id")
    raw = breakdown
    # The HLO text in the metadata says where the arrays live and whether this is one half of
    # an asynchronous pair (REFERENCE.md §3).
    text = parse_instruction(md.name) or parse_instruction(
        f"x = {s.get('shape_with_layout') or ''} {category.replace(' ', '-')}()")
    role = async_role(text.opcode if text else "", category)
    host = float(text.host_bytes) if text else 0.0
    caveat = {"start": ASYNC_START, "done": ASYNC_WAIT}.get(role, "")
    if host and not _has_breakdown(raw):
        # Host halves of offload copies carry no breakdown: their bytes cross the host link,
        # not HBM. The transfer moves the host array once: on the half that completes it.
        mem = (0.0,) + mem[1:]
        caveat = caveat or HOST_TRANSFER
    host = 0.0 if role == "start" else host
    return {
        "operation": md.display_name or md.name,
        "program_id": "" if program_id is None else str(program_id),
        "category": category,
        "flops": flops, "model_flops": model_flops, "bytes": total,
        "mem": mem + (host,), "negative": negative,
        "source": str(s.get("source") or ""),
        "tf_op": str(s.get("tf_op") or ""),
        "is_infeed_outfeed": is_infeed_outfeed_category(category),
        "is_container": category in CONTAINER_CATEGORIES,
        "caveat": caveat, "role": role,
        "fingerprint": text_fingerprint(md.name),  # "" when the name is not the HLO text
        "start_name": text.operands[-1] if role == "done" and text and text.operands else "",
        "shape": tpu_text_shape(md.name, category),
    }


def _has_breakdown(raw) -> bool:
    return bool(raw) and bool(memory_access_pb2.MemoryAccessBreakdown.FromString(raw).memory_accessed)


def _program_names(ps: PlaneStats, plane) -> dict[str, str]:
    """program id -> module name, from the metadata of the `XLA Modules` line's events."""
    names = {}
    seen = set()
    for line in plane.lines:
        if line.name != "XLA Modules":
            continue
        for mid in np.unique(_events(line, ps.ids)[0]).tolist():
            if mid in seen:
                continue
            seen.add(mid)
            md = plane.event_metadata.get(mid)
            if md is None:
                continue
            pid = ps.as_dict(md.stats).get("program_id")
            name = md.display_name or re.sub(r"\(\d+\)$", "", md.name)
            if pid is not None:
                names[str(pid)] = name
    return names


def _async_spans(md: np.ndarray, begin: np.ndarray, dur: np.ndarray, infos: dict) -> np.ndarray:
    """Per event: for the `-done` half of an asynchronous pair, the time from its `-start`'s
    issue to its own end (the transfer's real interval); 0 for every other event.

    A done names its start as its operand; executions pair in order (the k-th done of a pair
    completes the k-th start), each start before its done."""
    out = np.zeros(len(md), np.int64)
    by_name = {i["operation"]: mid for mid, i in infos.items()
               if i is not None and i["role"] == "start"}
    for mid, info in infos.items():
        if info is None or info["role"] != "done" or info["start_name"] not in by_name:
            continue
        done = np.flatnonzero(md == mid)
        start = np.flatnonzero(md == by_name[info["start_name"]])
        if not len(done) or not len(start):
            continue
        done = done[np.argsort(begin[done], kind="stable")]
        start = start[np.argsort(begin[start], kind="stable")]
        k = min(len(done), len(start))
        done, start = done[:k], start[:k]
        end = begin[done] + dur[done]
        ok = begin[start] <= begin[done]
        out[done[ok]] = end[ok] - begin[start[ok]]
    return out


def _line_events(line, stat_ids: dict):
    """Arrays of (metadata id, begin ps, duration ps, group id, dma stall ps, occurrences)."""
    base = line.timestamp_ns * 1000
    gid, doff, ddur, dma = (stat_ids.get(k, -1) for k in (
        "group_id", "device_offset_ps", "device_duration_ps", "dma_stall_duration_ps"))
    n = len(line.events)
    md = np.empty(n, np.int64)
    begin = np.empty(n, np.int64)
    dur = np.empty(n, np.int64)
    group = np.full(n, NO_STEP, np.int64)
    stall = np.zeros(n, np.int64)
    occ = np.ones(n, np.int64)
    for i, ev in enumerate(line.events):
        md[i] = ev.metadata_id
        b = base + ev.offset_ps
        d = ev.duration_ps
        if ev.num_occurrences:
            occ[i] = ev.num_occurrences
        for st in ev.stats:
            sid = st.metadata_id
            if sid == gid:
                group[i] = st.int64_value or st.uint64_value
            elif sid == doff:
                b = st.int64_value or st.uint64_value
            elif sid == ddur:
                d = st.int64_value or st.uint64_value
            elif sid == dma:
                stall[i] = st.int64_value or st.uint64_value
        begin[i] = b
        dur[i] = d
    return md, begin, dur, group, stall, occ


def read_tpu_planes(planes: list, plane_names: list[str], host: str, progress=None) -> ProfileData:
    """TensorCore planes (full `XPlane`s or `_TokenPlane`s) → op table, spans, peaks."""
    builder = OpTableBuilder()
    steps: list[StepSpan] = []
    spans: list[CoreSpan] = []
    diagnostics: list[Diagnostic] = []
    cores = [(int(m.group(1)), p) for p in planes if (m := TENSOR_CORE_PLANE.match(p.name))]
    cores.sort(key=lambda c: c[0])
    sparse = [n for n in plane_names if SPARSE_CORE_PLANE.match(n)]
    if sparse:
        diagnostics.append(Diagnostic("info", "sparsecore_ignored",
                                      f"{len(sparse)} SparseCore plane(s) ignored: their ops are "
                                      "not part of the TensorCore roofline"))
    device = None
    dropped_ops = 0
    fixes: collections.Counter = collections.Counter()
    shared_infos: dict = {}
    stat_tables: dict = {}
    timeline, shapes = TimelineBuilder(), {}
    for done, (core, plane) in enumerate(cores):
        if progress:
            progress(done, len(cores))
        if isinstance(plane, _LazyPlane):
            plane = plane.load()
        ps = PlaneStats(plane)
        stat_table = stat_tables.setdefault(tuple(sorted(ps.names.items())), len(stat_tables))
        if device is None:
            device = _device_from_plane_stats(ps.as_dict(plane.stats), len(cores))
        ops_lines = [l for l in plane.lines if l.name == OPS_LINE]
        step_lines = [l for l in plane.lines if l.name == STEPS_LINE]
        lo, hi = None, None
        marker_steps: dict[int, list[int]] = {}
        for line in step_lines:
            md, begin, dur, group, _, _ = _checked(_events(line, ps.ids), plane.name, line.name,
                                                   fixes)
            if len(begin):
                lo = begin.min() if lo is None else min(lo, begin.min())
                hi = (begin + dur).max() if hi is None else max(hi, (begin + dur).max())
            for g, b, d in zip(group.tolist(), begin.tolist(), dur.tolist()):
                if g != NO_STEP:
                    entry = marker_steps.get(g)
                    if entry is None or d > entry[1]:  # XProf: the longest marker of the step
                        marker_steps[g] = [b, d]
        op_groups: set[int] = set()
        infos = {}
        programs = _program_names(ps, plane)
        core_events = []
        for line_index, line in enumerate(ops_lines):
            md, begin, dur, group, stall, occ = _checked(_events(line, ps.ids), plane.name,
                                                         line.name, fixes)
            if not len(md):
                continue
            lo = begin.min() if lo is None else min(lo, begin.min())
            hi = (begin + dur).max() if hi is None else max(hi, (begin + dur).max())
            for mid in np.unique(md).tolist():
                if mid not in infos:
                    meta = plane.event_metadata.get(mid)
                    if meta is None:
                        infos[mid] = None
                        continue
                    # Cores repeat the same op metadata: decode it once per stat table.
                    key = (stat_table, meta.SerializeToString())
                    info = shared_infos.get(key)
                    if info is None:
                        info = shared_infos[key] = _op_info(ps, meta)
                        info["program"] = programs.get(info["program_id"], "")
                    infos[mid] = info
            span = _async_spans(md, begin, dur, infos)
            core_events.append((line_index, md, begin, dur))
            order, selft = self_times(begin, dur)
            md, dur, group, stall, occ, span = (md[order], dur[order], group[order], stall[order],
                                                occ[order], span[order])
            op_groups.update(np.unique(group[group != NO_STEP]).tolist())
            # One row per (op, step): sum executions, times, stalls and async transfer spans.
            row_md, row_step, totals = group_sums(md, group, dur, selft, stall, occ, span)
            sums = {name: totals[i].astype(np.float64)
                    for i, name in enumerate(("time", "self", "stall", "occ", "span"))}
            known = np.fromiter((infos[m] is not None for m in row_md.tolist()), bool,
                                count=len(row_md))
            dropped_ops += int(sums["occ"][~known].sum())
            key_md, op_index = np.unique(row_md[known], return_inverse=True)
            rows = [infos[m] for m in key_md.tolist()]
            _add_shapes(shapes, rows, op_index.reshape(-1), sums["occ"][known],
                        sums["time"][known])
            fixes["negative_costs"] += sum(1 for i in rows if i["negative"])
            n = sums["occ"][known]
            per_exec = np.array([[i["flops"], i["model_flops"], i["bytes"], *i["mem"]]
                                 for i in rows], dtype=np.float64).reshape(-1, 9)
            totals_ = per_exec[op_index.reshape(-1)] * n[:, None]

            def texts(field, dtype=object):
                return np.array([i[field] for i in rows], dtype=dtype)

            builder.add_keyed(
                dict(host=host, program_id=texts("program_id"), program=texts("program"),
                     operation=texts("operation"), category=texts("category"),
                     source=texts("source"), tf_op=texts("tf_op"), caveat=texts("caveat"),
                     fingerprint=texts("fingerprint"),
                     flops_source="profile",
                     is_infeed_outfeed=texts("is_infeed_outfeed", bool),
                     is_container=texts("is_container", bool)),
                op_index.reshape(-1), core=core, step=row_step[known],
                occurrences=n.astype(np.int64), total_time_ps=sums["time"][known],
                self_time_ps=sums["self"][known], dma_stall_ps=sums["stall"][known],
                async_span_ps=sums["span"][known], flops=totals_[:, 0],
                model_flops=totals_[:, 1], bytes=totals_[:, 2], hbm_bytes=totals_[:, 3],
                cmem_read_bytes=totals_[:, 4], cmem_write_bytes=totals_[:, 5],
                vmem_read_bytes=totals_[:, 6], vmem_write_bytes=totals_[:, 7],
                host_bytes=totals_[:, 8])
        if lo is not None:
            spans.append(CoreSpan(host, core, int(lo), int(hi)))
        core_steps = [(g, int(marker_steps[g][0]), int(marker_steps[g][1]))
                      for g in sorted(set(marker_steps) & op_groups)]
        steps += [StepSpan(host, core, g, b, d) for g, b, d in core_steps]
        if lo is not None:
            _add_core_timeline(timeline, core, (lo, hi), core_steps, core_events, infos)
        # Let this plane's decoded events go before the next plane is parsed.
        plane = ps = ops_lines = step_lines = line = infos = meta = None
    if dropped_ops:
        diagnostics.append(Diagnostic("warning", "ops_without_metadata",
                                      f"{dropped_ops} op executions reference missing metadata"))
    diagnostics.extend(corrupt_value_notes(fixes))
    data = ProfileData(device=device, ops=builder.build(), steps=steps, core_spans=spans,
                       diagnostics=diagnostics, timeline=timeline.build(), op_shapes=shapes)
    return data


def _label(info) -> tuple:
    return (info["program_id"], info["operation"], "")


def _add_core_timeline(timeline: TimelineBuilder, core, span, core_steps, core_events, infos):
    """Hand one core's op events to the timeline summary (readers/tpu_timeline.py)."""
    facts = event_facts((m, i["program_id"], i["operation"], i["category"], i["caveat"],
                         i["is_container"]) for m, i in infos.items() if i is not None)
    add_core_events(timeline, core, span, core_steps, core_events, facts)


def _add_shapes(shapes: dict, rows: list, op_index, occurrences, time_ps):
    """Calls and time per (op, shape) for the ops whose HLO text gives one."""
    add_key_shapes(shapes, lambda k: _label(rows[k]), [r["shape"] for r in rows], op_index,
                   occurrences, time_ps)


def corrupt_value_notes(fixes: collections.Counter) -> list:
    """Diagnostics for the corrupt values a reader counted as 0 or skipped."""
    notes = []
    if fixes["negative_durations"]:
        notes.append(Diagnostic("warning", "negative_durations",
                                f"{fixes['negative_durations']} events have a negative duration "
                                "(or DMA stall); they count as 0"))
    if fixes["bad_occurrences"]:
        notes.append(Diagnostic("warning", "bad_occurrences",
                                f"{fixes['bad_occurrences']} events with a num_occurrences below "
                                f"0 or above 2^32 were skipped"))
    if fixes["negative_costs"]:
        notes.append(Diagnostic("warning", "negative_costs",
                                f"{fixes['negative_costs']} op rows have negative FLOPs or bytes "
                                "in their metadata; they count as 0"))
    return notes
