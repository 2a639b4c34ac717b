"""The protobuf-object TPU reader, kept as a test oracle for the wire-format reader
(readers/xspace/tpu/file.py): whole planes parsed with protobuf (the token view of
`protos/xplane_view.proto` where the events are varints, else the full schema, event by event),
op lines reduced with a plain sort per (op, step), async pairs matched by name on the whole
line, steps from a dictionary of longest markers. It shares only the TPU rules
(readers/xspace/tpu/rules.py: op metadata, device peaks, value checks, diagnostics) and the
per-event protobuf decoding (`plane_lines.protobuf_line_events`) with the product, so
tests/readers/xspace/test_tpu_wire.py compares two independent decodings and reductions.

`decode_tokens` rebuilds a line's events from the packed-varint token stream: when all events
share one tag sequence the (tag, value) pairs form an events x fields table; otherwise events
are found by their metadata-id pair and checked against the event count. Anything it cannot
prove well formed (double, string or bytes stats, unknown fields, missing ids) comes back as
None and the per-event path decodes that line.
"""

from __future__ import annotations

import collections

import numpy as np
from google.protobuf.message import DecodeError

from tb_roofline.diagnostics import Diagnostic
from tb_roofline.protos import xplane_pb2, xplane_view_pb2
from tb_roofline.readers.self_time import self_times
from tb_roofline.readers.xspace.hlo_shapes import link_bus_bytes, link_collective
from tb_roofline.readers.xspace.tpu.plane_lines import protobuf_line_events as _line_events
from tb_roofline.readers.xspace.tpu.rules import (
    OPS_LINE,
    STEPS_LINE,
    TENSOR_CORE_PLANE,
    device_from_plane_stats,
    link_notes,
    module_program,
    plane_notes,
)
from tb_roofline.readers.xspace.tpu.rules import check_events as _checked
from tb_roofline.readers.xspace.tpu.rules import op_info as _op_info
from tb_roofline.readers.xspace.tpu.timeline import add_core_events, event_facts
from tb_roofline.readers.xspace.xplane import PlaneStats
from tb_roofline.table.op_table import COST_COLUMNS, NO_STEP, OpTableBuilder, ProfileData
from tb_roofline.table.spans import CoreSpan, StepSpan
from tb_roofline.table.timeline import add_key_shapes
from tb_roofline.table.timeline_builder import TimelineBuilder

_EVENT_TAGS = (
    0x08,
    0x10,
    0x18,
    0x22,
    0x28,
)  # XEvent: metadata_id, offset_ps, duration_ps, stats, num_occurrences
_EV_OK = np.zeros(256, bool)
_EV_OK[list(_EVENT_TAGS)] = True


def _empty(n=0):
    return (
        np.zeros(n, np.int64),
        np.zeros(n, np.int64),
        np.zeros(n, np.int64),
        np.full(n, NO_STEP, np.int64),
        np.zeros(n, np.int64),
        np.ones(n, np.int64),
    )


_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


def _varint_sizes(v: np.ndarray) -> np.ndarray:
    """Bytes of the minimal varint encoding of each uint64."""
    return np.searchsorted(_VARINT_LIMITS, v, side="right").astype(np.int64) + 1


_TARGET_STATS = ("group_id", "device_offset_ps", "device_duration_ps", "dma_stall_duration_ps")


def _first_event_pairs(tag: np.ndarray) -> int:
    """Pairs in the first event (its metadata-id pair up to the next event's), or 0."""
    i, n = 1, len(tag)
    limit = min(n, 4096)
    while i < limit:
        if tag[i] == 0x22:
            i += 3  # a stat: header, metadata id, value
        elif tag[i] == 0x08:
            return i
        else:
            i += 1
    return n if i >= n else 0


def _decode_uniform(tag, val, base, stat_ids, n_events):
    """Every event has the same sequence of tags (the usual case on op lines): the pairs form an
    events x fields table and each field is a column. None when the line is not like that."""
    k = _first_event_pairs(tag)
    if k <= 0 or len(tag) % k or (n_events is not None and len(tag) // k != n_events):
        return None
    m = len(tag) // k
    pattern = tag[:k]
    tags = tag.reshape(m, k)
    if not (tags == pattern).all():
        return None
    vals = val.reshape(m, k)
    vi = vals.view(np.int64)
    plist = pattern.tolist()
    j = 0
    fields, stats = {}, []
    while j < k:  # check the grammar once, on the pattern
        t = plist[j]
        if t == 0x22:
            if j + 2 >= k or plist[j + 1] != 0x08 or plist[j + 2] not in (0x18, 0x20, 0x38):
                return None
            stats.append(j)
            j += 3
            continue
        if t not in (0x08, 0x10, 0x18, 0x28) or t in fields or (fields and t < max(fields)):
            return None
        fields[t] = j
        j += 1
    if 0x08 not in fields or (0x10 in fields) == (0x28 in fields):
        return None
    for j in stats:
        size = 2 + _varint_sizes(vals[:, j + 1]) + _varint_sizes(vals[:, j + 2])
        if (vals[:, j] != size.astype(np.uint64)).any():
            return None
    md = vi[:, fields[0x08]].copy()
    dur = vi[:, fields[0x18]].copy() if 0x18 in fields else np.zeros(m, np.int64)
    if 0x10 in fields:
        begin = base + vi[:, fields[0x10]]
        occ = np.ones(m, np.int64)
    else:
        begin = np.full(m, base, np.int64)
        occ = vi[:, fields[0x28]].copy()
    group = np.full(m, NO_STEP, np.int64)
    stall = np.zeros(m, np.int64)
    targets = dict(zip(_TARGET_STATS, (group, begin, dur, stall)))
    for j in stats:  # in order: of several matching stats, the last one wins
        mids = vi[:, j + 1]
        value = vi[:, j + 2] if plist[j + 2] != 0x38 else np.zeros(m, np.int64)
        for name, target in targets.items():
            sid = stat_ids.get(name)
            if sid is None:
                continue
            hit = mids == sid
            if hit.all():
                target[:] = value
            elif hit.any():
                target[hit] = value[hit]
    return md, begin, dur, group, stall, occ


def decode_tokens(tokens, line_timestamp_ns: int, stat_ids: dict, n_events):
    """`_line_events` from an `XLineTokens.event_tokens` stream, or None when the stream is not
    a sequence of `n_events` events made of varints and 2-field varint stats in field order (the
    caller then decodes that line per event). `n_events` (from the `XPlaneView` parse; an int or
    a callable giving it, asked only when needed) guards against an event without a metadata
    id, which would otherwise merge into the one before. A line whose events all share one tag
    sequence needs no count: a missing id would break the shared sequence.

    The stream alternates tag and value (a stat's header is tag 0x22 and its byte length, its
    content two tag/value pairs). Events start at their metadata-id pair; every event must hold
    exactly one of offset_ps / num_occurrences, which also catches events merged by a missing id.
    """
    t = np.asarray(tokens, dtype=np.uint64)
    base = int(line_timestamp_ns) * 1000
    count = n_events if callable(n_events) else (lambda: n_events)
    if len(t) == 0:
        return _empty(0) if count() == 0 else None
    if len(t) % 2:
        return None
    tag = t[0::2]
    val = t[1::2]
    if int(tag.max()) > 0xFF:
        return None
    tag = tag.astype(np.int64)
    uniform = _decode_uniform(tag, val, base, stat_ids, None if callable(n_events) else n_events)
    if uniform is not None:
        return uniform
    n = len(tag)
    i22 = np.flatnonzero(tag == 0x22)
    if len(i22) and int(i22[-1]) + 2 >= n:
        return None
    stat_level = np.zeros(n, bool)
    stat_level[i22 + 1] = True
    stat_level[i22 + 2] = True
    if (stat_level[i22]).any():
        return None
    s_mid_tag, s_val_tag = tag[i22 + 1], tag[i22 + 2]
    if (s_mid_tag != 0x08).any() or not np.isin(s_val_tag, (0x18, 0x20, 0x38)).all():
        return None
    s_mid, s_val = val[i22 + 1], val[i22 + 2]
    if (val[i22] != (2 + _varint_sizes(s_mid) + _varint_sizes(s_val)).astype(np.uint64)).any():
        return None
    ev_tag = np.where(stat_level, -1, tag)
    if not _EV_OK[tag[~stat_level]].all():
        return None
    starts = ev_tag == 0x08
    if not starts[0]:
        return None
    event = np.cumsum(starts) - 1
    m = int(starts.sum())
    if m != count():
        return None
    vi = val.view(np.int64)

    def field(code, default):
        where = np.flatnonzero(ev_tag == code)
        out = np.full(m, default, np.int64)
        counts = np.bincount(event[where], minlength=m)
        if (counts > 1).any():
            return None, None
        out[event[where]] = vi[where]
        return out, counts

    md, _ = field(0x08, 0)
    offset, has_offset = field(0x10, 0)
    dur, _ = field(0x18, 0)
    occ_raw, has_occ = field(0x28, 0)
    if md is None or offset is None or dur is None or occ_raw is None:
        return None
    if ((has_offset + has_occ) != 1).any():
        return None
    begin = base + offset
    occ = np.where(has_occ > 0, occ_raw, 1).astype(np.int64)
    group = np.full(m, NO_STEP, np.int64)
    stall = np.zeros(m, np.int64)
    if len(i22):
        s_event = event[i22]
        s_value = np.where(s_val_tag == 0x38, 0, s_val.view(np.int64))
        s_mid_i = s_mid.view(np.int64)
        for name, target in (
            ("group_id", group),
            ("device_offset_ps", begin),
            ("device_duration_ps", dur),
            ("dma_stall_duration_ps", stall),
        ):
            sid = stat_ids.get(name)
            if sid is None:
                continue
            hit = np.flatnonzero(s_mid_i == sid)
            if len(hit):
                target[s_event[hit]] = s_value[hit]  # several: the last one wins
    return md, begin, dur, group, stall, occ


# ----------------------------------------------------------------------------------------------
# Sums per (metadata id, group)


def group_sums(md: np.ndarray, group: np.ndarray, *weights: np.ndarray):
    """Unique (md, group) pairs sorted as `np.unique(np.stack([md, group], 1), axis=0)` sorts
    them, and the exact int64 sums of each weight array per pair: (umd, ugroup, [sums...])."""
    md = np.asarray(md, np.int64)
    group = np.asarray(group, np.int64)
    if not len(md):
        return md[:0], group[:0], [np.zeros(0, np.int64) for _ in weights]
    mlo, mhi = int(md.min()), int(md.max())
    glo, ghi = int(group.min()), int(group.max())
    gw = ghi - glo + 1
    if (mhi - mlo + 1) * gw < 2**62:
        key = (md - mlo) * gw + (group - glo)
    else:  # ranges too wide for one int64 key: rank each column first
        um, mi = np.unique(md, return_inverse=True)
        ug, gi = np.unique(group, return_inverse=True)
        key = mi.reshape(-1).astype(np.int64) * len(ug) + gi.reshape(-1)
    perm = np.argsort(key, kind="stable")
    ks = key[perm]
    first = np.empty(len(ks), bool)
    first[0] = True
    first[1:] = ks[1:] != ks[:-1]
    starts = np.flatnonzero(first)
    rows = perm[starts]
    sums = [np.add.reduceat(np.asarray(w, np.int64)[perm], starts) for w in weights]
    return md[rows], group[rows], sums


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
    """A line of a TPU plane read as a varint token stream (see `decode_tokens` above)."""

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
        self.stats, self.event_metadata, self.stat_metadata = (
            tok.stats,
            tok.event_metadata,
            tok.stat_metadata,
        )
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
            got = None if md is None else module_program(ps, md)
            if got is not None:
                names[got[0]] = got[1]
    return names


def _async_spans(md: np.ndarray, begin: np.ndarray, dur: np.ndarray, infos: dict) -> np.ndarray:
    """Per event: for the `-done` half of an asynchronous pair, the time from its `-start`'s
    issue to its own end (the transfer's real interval); 0 for every other event.

    A done names its start as its operand; executions pair in order (the k-th done of a pair
    completes the k-th start), each start before its done."""
    out = np.zeros(len(md), np.int64)
    by_name = {
        i["operation"]: mid for mid, i in infos.items() if i is not None and i["role"] == "start"
    }
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


def read_tpu_planes(planes: list, plane_names: list[str], host: str, progress=None) -> ProfileData:
    """TensorCore planes (full `XPlane`s or `_TokenPlane`s) → op table, spans, peaks."""
    builder = OpTableBuilder()
    steps: list[StepSpan] = []
    spans: list[CoreSpan] = []
    diagnostics: list[Diagnostic] = []
    cores = [(int(m.group(1)), p) for p in planes if (m := TENSOR_CORE_PLANE.match(p.name))]
    cores.sort(key=lambda c: c[0])
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
            device = device_from_plane_stats(ps.as_dict(plane.stats), len(cores))
        ops_lines = [l for l in plane.lines if l.name == OPS_LINE]
        step_lines = [l for l in plane.lines if l.name == STEPS_LINE]
        lo, hi = None, None
        marker_steps: dict[int, list[int]] = {}
        for line in step_lines:
            md, begin, dur, group, _, _ = _checked(
                _events(line, ps.ids), plane.name, line.name, fixes
            )
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
            md, begin, dur, group, stall, occ = _checked(
                _events(line, ps.ids), plane.name, line.name, fixes
            )
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
            md, dur, group, stall, occ, span = (
                md[order],
                dur[order],
                group[order],
                stall[order],
                occ[order],
                span[order],
            )
            op_groups.update(np.unique(group[group != NO_STEP]).tolist())
            # One row per (op, step): sum executions, times, stalls and async transfer spans.
            row_md, row_step, totals = group_sums(md, group, dur, selft, stall, occ, span)
            sums = {
                name: totals[i].astype(np.float64)
                for i, name in enumerate(("time", "self", "stall", "occ", "span"))
            }
            known = np.fromiter(
                (infos[m] is not None for m in row_md.tolist()), bool, count=len(row_md)
            )
            dropped_ops += int(sums["occ"][~known].sum())
            key_md, op_index = np.unique(row_md[known], return_inverse=True)
            rows = [infos[m] for m in key_md.tolist()]
            _add_shapes(shapes, rows, op_index.reshape(-1), sums["occ"][known], sums["time"][known])
            fixes["negative_costs"] += sum(1 for i in rows if i["negative"])
            n = sums["occ"][known]
            per_exec = np.array(
                [
                    [
                        i["flops"],
                        i["model_flops"],
                        i["bytes"],
                        *i["mem"],
                        link_bus_bytes(i["link"], len(cores))[0],
                    ]
                    for i in rows
                ],
                dtype=np.float64,
            ).reshape(-1, len(COST_COLUMNS))
            totals_ = per_exec[op_index.reshape(-1)] * n[:, None]

            def texts(field, dtype=object):
                return np.array([i[field] for i in rows], dtype=dtype)

            builder.add_keyed(
                dict(
                    host=host,
                    program_id=texts("program_id"),
                    program=texts("program"),
                    operation=texts("operation"),
                    category=texts("category"),
                    source=texts("source"),
                    tf_op=texts("tf_op"),
                    caveat=texts("caveat"),
                    fingerprint=texts("fingerprint"),
                    collective=np.array(
                        [link_collective(i["link"], len(cores)) for i in rows], dtype=object
                    ),
                    flops_source="profile",
                    is_infeed_outfeed=texts("is_infeed_outfeed", bool),
                    is_container=texts("is_container", bool),
                ),
                op_index.reshape(-1),
                core=core,
                step=row_step[known],
                occurrences=n.astype(np.int64),
                total_time_ps=sums["time"][known],
                self_time_ps=sums["self"][known],
                dma_stall_ps=sums["stall"][known],
                async_span_ps=sums["span"][known],
                flops=totals_[:, 0],
                model_flops=totals_[:, 1],
                bytes=totals_[:, 2],
                hbm_bytes=totals_[:, 3],
                cmem_read_bytes=totals_[:, 4],
                cmem_write_bytes=totals_[:, 5],
                vmem_read_bytes=totals_[:, 6],
                vmem_write_bytes=totals_[:, 7],
                host_bytes=totals_[:, 8],
                interconnect_bytes=totals_[:, 9],
            )
        if lo is not None:
            spans.append(CoreSpan(host, core, int(lo), int(hi)))
        core_steps = [
            (g, int(marker_steps[g][0]), int(marker_steps[g][1]))
            for g in sorted(set(marker_steps) & op_groups)
        ]
        steps += [StepSpan(host, core, g, b, d) for g, b, d in core_steps]
        if lo is not None:
            _add_core_timeline(timeline, core, (lo, hi), core_steps, core_events, infos)
        # Let this plane's decoded events go before the next plane is parsed.
        plane = ps = ops_lines = step_lines = line = infos = meta = None
    diagnostics += plane_notes(plane_names, dropped_ops, fixes)
    diagnostics += link_notes(
        sum(1 for i in shared_infos.values() if i["link"] is not None and not i["link"][2]),
        len(cores),
    )
    data = ProfileData(
        device=device,
        ops=builder.build(),
        steps=steps,
        core_spans=spans,
        diagnostics=diagnostics,
        timeline=timeline.build(),
        op_shapes=shapes,
    )
    return data


def _label(info) -> tuple:
    return (info["program_id"], info["operation"], "")


def _add_core_timeline(timeline: TimelineBuilder, core, span, core_steps, core_events, infos):
    """Hand one core's op events to the timeline summary (readers/xspace/tpu/timeline.py)."""
    facts = event_facts(
        (m, i["program_id"], i["operation"], i["category"], i["caveat"], i["is_container"])
        for m, i in infos.items()
        if i is not None
    )
    add_core_events(timeline, core, span, core_steps, core_events, facts)


def _add_shapes(shapes: dict, rows: list, op_index, occurrences, time_ps):
    """Calls and time per (op, shape) for the ops whose HLO text gives one."""
    add_key_shapes(
        shapes,
        lambda k: _label(rows[k]),
        [r["shape"] for r in rows],
        op_index,
        occurrences,
        time_ps,
    )


def read_file(path: str, host: str) -> ProfileData:
    """A TPU file read whole by this oracle (the token view, else the full schema)."""
    with open(path, "rb") as f:
        raw = f.read()
    fast = fast_tpu_planes(raw)
    if fast is not None:
        planes, others = fast
        return read_tpu_planes(planes, [p.name for p in planes] + [h.name for h in others], host)
    space = xplane_pb2.XSpace.FromString(raw)
    return read_tpu_planes(list(space.planes), [p.name for p in space.planes], host)
