"""PM-sampling counters of XLA GPU profiles: each GPU plane's `_counters_` line.

XLA's CUPTI PM sampler (`jax.profiler.ProfileOptions().advanced_configuration =
{"gpu_pm_sample_counters": "metric,...", "gpu_pm_sample_interval_us": N}`) writes one event per
metric per sample on the line `_counters_` of the sampled GPU's plane: the event's metadata
name is the CUPTI metric name, its one stat (of the same name) the sample's value as a double,
its offset the sample's start, its duration 0. The samples become the op table's companion
`CounterSeries` (table/counter_series.py) on the reader's time base (absolute ps), never ops:
`events.DERIVED_LINES` keeps the line out of the op events.

The line is decoded as numpy columns straight from its serialized bytes (`_fast_columns`: the
layout XLA writes, checked field by field for every event at once); a line in any other layout
is read through protobuf objects (`_protobuf_columns`), with the same result.
"""

from __future__ import annotations

import math

import numpy as np

from tb_roofline.diagnostics import Diagnostic
from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.common import TIME_LIMIT_PS
from tb_roofline.readers.metrics.cupti import cupti_quantity
from tb_roofline.readers.xspace.wire import _column, _words
from tb_roofline.table.counter_series import CounterSeries, build_series

COUNTERS_LINE = "_counters_"
# No counter reaches this in one sample (cycles, bytes, %): larger values are corrupt.
MAX_VALUE = 1e18
_DROP_ROUNDS = 8  # rounds of the event-start filter (`_event_starts`)


def counter_series(gpus, rated_clock_mhz: float | None) -> tuple[CounterSeries | None, list]:
    """(the sampled counters of every GPU plane's `_counters_` line, or None; diagnostics).
    `gpus`: (GPU number, plane) pairs."""
    keys: dict = {}
    parts, dropped = [], 0
    for core, plane in gpus:
        for line in plane.lines:
            if line.name != COUNTERS_LINE:
                continue
            md, ts, value = _columns(line)
            keep = _kept(md, ts, value)
            dropped += int((~keep).sum())
            md, ts, value = md[keep], ts[keep], value[keep]
            uniq = np.unique(md)
            ids = [keys.setdefault((core, _metric_name(plane, m)), len(keys)) for m in uniq]
            series = np.asarray(ids, np.int64)[np.searchsorted(uniq, md)]
            parts.append((series, ts, value))
    if not keys:
        return None, _dropped_note(dropped)
    series, ts, value = (np.concatenate([p[i] for p in parts]) for i in range(3))
    names = list(keys)
    quantities = [cupti_quantity(name) for _, name in names]
    cs = build_series(names, quantities, series, ts, value, rated_clock_mhz)
    return cs, _dropped_note(dropped)


def _metric_name(plane, metadata_id: int) -> str:
    md = plane.event_metadata.get(metadata_id)
    return (md.name or md.display_name)[:256] if md is not None else f"metadata {metadata_id}"


def _kept(md, ts, value) -> np.ndarray:
    """Samples to keep: a finite value in [0, MAX_VALUE], a time within ±2^62 ps, and a start
    not before the previous sample of its metric (the last sample of each metric in the H200
    capture is stamped 420 ms before the first: it covers nothing the profile shows)."""
    keep = np.isfinite(value) & (value >= 0) & (value <= MAX_VALUE)
    keep &= np.abs(ts) < TIME_LIMIT_PS
    for m in np.unique(md).tolist():
        at = np.flatnonzero((md == m) & keep)  # (a corrupt time must not hide those after it)
        t = ts[at]
        behind = np.zeros(len(t), bool)
        behind[1:] = t[1:] < np.maximum.accumulate(t)[:-1]
        keep[at[behind]] = False
    return keep


def _dropped_note(n: int) -> list:
    if not n:
        return []
    return [
        Diagnostic(
            "info",
            "counter_samples_dropped",
            f"{n} PM-sampling counter sample(s) of the '{COUNTERS_LINE}' line were left out: "
            "a value that is not a finite count or percentage, or a sample stamped before the "
            "one it follows (XLA's sampler writes its last sample so)",
        )
    ]


def _columns(line) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(metadata id, start ps on the line's time base as float64, value) of each event of the
    line (float times: a corrupt offset cannot overflow; exact to the ps below 2^53 ps)."""
    cols = _fast_columns(line)
    return cols if cols is not None else _protobuf_columns(line)


def _protobuf_columns(line) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Event by event through protobuf objects: for layouts the fast path does not take, and
    the definition it is tested against. An event's value is its last stat's."""
    n = len(line.events)
    md = np.empty(n, np.int64)
    ts = np.empty(n, np.float64)
    value = np.full(n, math.nan)
    base = line.timestamp_ns * 1000
    for i, ev in enumerate(line.events):
        md[i] = ev.metadata_id
        ts[i] = float(base + ev.offset_ps)
        for st in ev.stats:
            kind = st.WhichOneof("value")
            if kind in ("double_value", "int64_value", "uint64_value"):
                value[i] = float(getattr(st, kind))
    return md, ts, value


def _events_region(line) -> tuple[np.ndarray, int] | None:
    """(the bytes of the line's events, the line's base ps), or None when the serialized line
    is not its head fields, its events, then its tail fields (as protobuf writes them)."""
    data = line.SerializeToString()
    head = xplane_pb2.XLine(id=line.id, name=line.name, timestamp_ns=line.timestamp_ns)
    tail = xplane_pb2.XLine(
        duration_ps=line.duration_ps, display_id=line.display_id, display_name=line.display_name
    )
    h, t = head.SerializeToString(), tail.SerializeToString()
    if not data.startswith(h) or not data.endswith(t) or len(h) + len(t) > len(data):
        return None
    b = np.frombuffer(data, np.uint8)[len(h) : len(data) - len(t)]
    return b, line.timestamp_ns * 1000


class _Bytes:
    """The events' bytes with the end of the varint that starts at each position."""

    def __init__(self, b: np.ndarray):
        self.b = b
        # pad so that reads past the end see a terminator and a double's 8 bytes exist
        self.padded = np.concatenate([b, np.zeros(16, np.uint8)])
        self.words = _words(self.padded)
        at = np.arange(len(self.padded), dtype=np.int64)
        at[self.padded >= 0x80] = len(self.padded) - 1  # (the padding ends in a terminator)
        self.term = np.minimum.accumulate(at[::-1])[::-1]

    def varint(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(values as int64, position after) of the varints at `pos`; None past 10 bytes."""
        last = self.term[pos]
        size = last - pos + 1
        if len(size) and int(size.max()) > 10:
            return None
        return _column(self.padded, last, size, self.words).view(np.int64), last + 1

    def tag(self, pos: np.ndarray, tag: int) -> bool:
        return bool((pos < len(self.b)).all() and (self.padded[pos] == tag).all())


def _fast_columns(line) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The counter events in the layout XLA writes, all at once: `{1: metadata id, 2: offset,
    4: {1: stat id, 2: double}}`; None for any other layout."""
    region = _events_region(line)
    if region is None:
        return None
    b, base = region
    if not len(b):
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    by = _Bytes(b)
    starts = _event_starts(by)
    if starts is None:
        return None
    return _event_fields(by, starts, base)


def _event_ends(by: _Bytes, pos: np.ndarray) -> np.ndarray | None:
    """Where the events that would start at `pos` end (tag 4, a length, its bytes)."""
    got = by.varint(pos + 1)
    if got is None:
        return None
    length, after = got
    return after + length


def _event_starts(by: _Bytes) -> np.ndarray | None:
    """The events' start positions: candidates are the bytes holding an event's tag; a
    candidate is kept while it is the first or where a kept one ends (false candidates inside
    values fall away in a few rounds), then the chain is proven: each event starts where the
    one before it ends and the last ends with the bytes. None when it cannot be proven."""
    n = len(by.b)
    cand = np.flatnonzero(by.b == 0x22)
    size = by.term[cand + 1] - cand
    cand = cand[(size <= 10) & (cand + 1 < n)]
    ends = _event_ends(by, cand)
    if ends is None or not len(cand) or cand[0] != 0:
        return None
    keep = np.ones(len(cand), bool)
    for _ in range(_DROP_ROUNDS):
        hit = np.zeros(n + 1, bool)
        hit[ends[keep & (ends >= 0) & (ends <= n)]] = True
        reached = hit[cand]
        reached[0] = True
        if np.array_equal(reached, keep):
            break
        keep = reached
    starts, stops = cand[keep], ends[keep]
    if not (np.array_equal(stops[:-1], starts[1:]) and stops[-1] == n):
        return None
    return starts


def _event_fields(by: _Bytes, starts: np.ndarray, base: int):
    """(metadata id, start ps, value) of events that each hold exactly: metadata id, offset
    and one stat of an id and a double; None when any differs."""
    got = by.varint(starts + 1)
    if got is None:
        return None
    length, p = got
    stop = p + length
    steps = []
    for tag in (0x08, 0x10):
        if not by.tag(p, tag):
            return None
        got = by.varint(p + 1)
        if got is None:
            return None
        value, p = got
        steps.append(value)
    md, offset = steps
    if not by.tag(p, 0x22):
        return None
    got = by.varint(p + 1)
    if got is None or not by.tag(got[1], 0x08):
        return None
    stat_len, q = got
    sid = by.varint(q + 1)
    if sid is None or not by.tag(sid[1], 0x11):
        return None
    at = sid[1] + 1
    if not (np.array_equal(at + 8, stop) and np.array_equal(q + stat_len, stop)):
        return None
    raw = by.padded[at[:, None] + np.arange(8)]
    value = raw.copy().view("<f8").reshape(-1)
    return md, float(base) + offset.astype(np.float64), value
