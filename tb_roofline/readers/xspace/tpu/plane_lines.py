"""A TPU TensorCore plane's layout and its lines' events, decoded from the plane's bytes: the
wire decoder (readers/xspace/wire.py) window by window, and, for lines it does not take
(string, double or bytes stats, unusual field orders), protobuf objects event by event
(`protobuf_line_events`, the same columns). readers/xspace/tpu/plane.py reduces the events.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.xspace import wire as xwire
from tb_roofline.table.op_table import NO_STEP

MAX_RUNS = 16  # layouts per line before the whole line takes the protobuf path


# ----------------------------------------------------------------------------------------------
# Layout of a plane and its lines


def plane_header(src: xwire.Source, start: int, end: int) -> tuple[int, str, list, int]:
    """(id, name, [(line start, end)], where the rest of the plane begins): fields 1-3 walked
    in Python until the first other field (metadata and stats follow the lines in the order
    protobuf writes fields; lines written later are found in the rest's parse)."""
    pid, name, lines = 0, "", []
    for field, wire, value, at, _ in xwire.fields_at(src, start, end):
        if field == 1 and wire == 0:
            pid = xwire.signed(value)
        elif field == 2 and wire == 2:
            name = xwire.text_at(src, value)
        elif field == 3 and wire == 2:
            lines.append(value)
        else:
            return pid, name, lines, at
    return pid, name, lines, end


def line_header(src: xwire.Source, start: int, end: int):
    """(name, timestamp_ns, position of the first event or None)."""
    name, ts = "", 0
    for field, wire, value, at, _ in xwire.fields_at(src, start, end):
        if field == 4 and wire == 2:
            return name, ts, at
        if field == 2 and wire == 2:
            name = xwire.text_at(src, value)
        elif field == 3 and wire == 0:
            ts = xwire.signed(value)
    return name, ts, None


# ----------------------------------------------------------------------------------------------
# Decoding a line


def collect(src: xwire.Source, start, end, stat_ids, sink):
    """Send every event of the line at [start, end) to `sink` as it is decoded. Returns
    (name, timestamp), or None when the line must take the protobuf path (the sink's state is
    then to be dropped)."""
    name, ts, pos = line_header(src, start, end)
    if pos is None:
        return name, ts
    base = ts * 1000
    for _ in range(MAX_RUNS):
        pos = xwire.decode_events(src, pos, end, base, stat_ids, sink)
        if pos is None:
            return None
        # What follows the run: another event (a new layout) or the line's other fields.
        for field, wire, _, at, _ in xwire.fields_at(src, pos, end):
            if field == 4 and wire == 2:
                pos = at
                break
            if field in (2, 3):  # a name or timestamp after the events: not the usual order
                return None
        else:
            return name, ts
    return None


def protobuf_line_events(line, stat_ids: dict):
    """Columns (metadata id, begin ps, duration ps, group id, dma stall ps, occurrences) of
    an `XLine` object, event by event: for the lines the wire decoder does not take, and the
    definition the wire decoder is tested against (tests/readers/xspace/test_tpu_wire.py)."""
    base = line.timestamp_ns * 1000
    gid, doff, ddur, dma = (stat_ids.get(k, -1) for k in xwire.TARGETS)
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


def fallback_events(line_bytes: bytes, stat_ids: dict):
    """(name, columns) of a line the wire decoder does not take."""
    line = xplane_pb2.XLine.FromString(line_bytes)
    return line.name, protobuf_line_events(line, stat_ids)


def concat(chunks):
    if len(chunks) == 1:
        return chunks[0]
    return tuple(np.concatenate(cols) for cols in zip(*chunks))


def line(src: xwire.Source, span, stat_ids):
    """(name, columns) of a whole line (for the short Steps and XLA Modules lines)."""
    chunks = []
    got = collect(src, span[0], span[1], stat_ids, lambda *c: chunks.append(c))
    if got is None:
        return fallback_events(bytes(src.read(span[0], span[1] - span[0])), stat_ids)
    if not chunks:
        return got[0], tuple(np.zeros(0, np.int64) for _ in range(6))
    return got[0], concat(chunks)
