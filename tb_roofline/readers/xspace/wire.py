"""The XSpace wire format read directly: a few fields walked in Python (planes, lines), the
events of a line decoded as numpy columns straight from the file's bytes, window by window.

Why: protobuf builds an object per event (or, through the token view, a uint64 per varint plus
a numpy copy), 10-25x the bytes on disk; here memory stays at one window (`WINDOW` bytes) and
each event costs a few vectorised passes over its bytes.

An XEvent holding only varints and varint-only stats (what TPU op, step and module lines hold)
is a run of varints in which tags and values alternate. `decode_events` takes the first event's
layout (walked in Python, field by field), checks that the following events repeat it exactly
(every tag a single byte with the expected value, every length equal to the bytes it covers),
and decodes the wanted columns. The run ends at the first event that differs; the caller then
looks at what follows (another layout, or the line's remaining fields). Anything this module
cannot prove well formed is reported (`None`: the caller decodes that line through protobuf
objects, `plane_lines.protobuf_line_events`; `WireError`: damaged bytes), and the semantics are
protobuf's (docs/xspace_format.md): the last of repeated scalar fields wins, a
`oneof` keeps its last member, stats are matched in order (the last match wins), a ref value
reads 0 as an integer, uint64 values at or above 2**63 wrap to int64.
"""

from __future__ import annotations

import os

import numpy as np
from google.protobuf.message import DecodeError

from tb_roofline.table.op_table import NO_STEP

WINDOW = 1 << 17  # bytes; a window's arrays stay in the CPU caches (1.5x as fast as 512 KiB)
TARGETS = ("group_id", "device_offset_ps", "device_duration_ps", "dma_stall_duration_ps")


class WireError(DecodeError):
    """Bytes that are not a well-formed message (truncated, bad varint, bad wire type)."""


def varint(buf, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result, shift = b & 0x7F, 7
        while True:
            pos += 1
            b = buf[pos]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result & 0xFFFFFFFFFFFFFFFF, pos + 1
            shift += 7
            if shift >= 70:
                raise WireError("varint longer than 10 bytes")
    except IndexError:
        raise WireError("truncated varint") from None


def fields(buf, pos: int, end: int):
    """(field number, wire type, value, start, position after) of each field in buf[pos:end];
    the value of a length-delimited field is its (start, end)."""
    value: int | tuple[int, int]
    while pos < end:
        start = pos
        tag, pos = varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 2:
            n, pos = varint(buf, pos)
            value = (pos, pos + n)
            pos += n
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise WireError(f"unsupported wire type {wire}")
        if pos > end or field == 0:
            raise WireError("field runs past its message")
        yield field, wire, value, start, pos


def signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def text(buf, span) -> str:
    try:
        return bytes(buf[span[0] : span[1]]).decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("string field is not UTF-8") from None


class Source:
    """Random access to bytes: a buffer in memory, or a file read piece by piece (os.pread), so
    a plane's events need never be in memory all at once."""

    def __init__(self, buf=None, fd: int | None = None):
        self.buf = memoryview(buf) if buf is not None else None
        self.fd = fd

    def read(self, pos: int, n: int, scratch: dict | None = None):
        """n bytes at `pos`; from a file, into `scratch["read"]` when given (a buffer reused
        read after read: valid until the next read with it)."""
        if self.buf is not None:
            return self.buf[pos : pos + n]
        if self.fd is None:
            raise WireError("a source with neither bytes nor a file")
        data: bytes | memoryview
        if scratch is None or not hasattr(os, "preadv"):  # (preadv: not on every system)
            data = os.pread(self.fd, n, pos)
            got = len(data)
        else:
            have = scratch.get("read")
            if have is None or len(have) < n:
                have = scratch["read"] = bytearray(n)
            data = memoryview(have)[:n]
            got = os.preadv(self.fd, [data], pos)
        if got != n:
            raise WireError("file ended early")
        return data


def fields_at(src: Source, pos: int, end: int):
    """`fields` over a Source: one small read per field (for the few fields of a plane's or
    a line's head and tail); values of length-delimited fields are (start, end) spans."""
    value: int | tuple[int, int]
    while pos < end:
        head = src.read(pos, min(20, end - pos))
        tag, p = varint(head, 0)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, p = varint(head, p)
            after = pos + p
        elif wire == 2:
            n, p = varint(head, p)
            after = pos + p + n
            value = (pos + p, after)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if len(head) < p + width:
                raise WireError("truncated field")
            value, after = int.from_bytes(head[p : p + width], "little"), pos + p + width
        else:
            raise WireError(f"unsupported wire type {wire}")
        if after > end or field == 0:
            raise WireError("field runs past its message")
        yield field, wire, value, pos, after
        pos = after


def text_at(src: Source, span) -> str:
    return text(src.read(span[0], span[1] - span[0]), (0, span[1] - span[0]))


# ----------------------------------------------------------------------------------------------
# Event runs


class _Layout:
    """Where each field sits among the varints of one event (framing tag and length included)."""

    def __init__(self) -> None:
        self.k = 2  # varints per event
        self.tags = [(0, 0x22)]  # (position, tag byte)
        # (position of a length, position of the last varint it covers): the event's own
        # length first, whose end is known once the event is read whole
        self.lengths: list[tuple[int, int]] = [(1, 1)]
        self.md: int | None = None
        self.offset: int | None = None
        self.occ: int | None = None
        self.dur: int | None = None
        self.stats: list[tuple[int | None, int | None]] = []  # (metadata id, value) positions
        # Once the event is read whole (_layout): the tag bytes and where each length sits
        # and ends, as the batch decoder compares them.
        self.tag_row = np.zeros(0, np.uint8)
        self.length_at: list[int] = []
        self.length_covered: list[int] = []

    def tag_pattern(self, n: int) -> np.ndarray:
        """The tag bytes of `n` events one after the other (made once per length asked)."""
        have = getattr(self, "_pattern", None)
        if have is None or len(have) < n * len(self.tag_row):
            have = self._pattern = np.tile(self.tag_row, max(n, 1024))
        return have[: n * len(self.tag_row)]

    def add(self, tag: int) -> int:
        self.tags.append((self.k, tag))
        self.k += 2
        return self.k - 1


def _layout(buf, pos: int, end: int):
    """The layout of the event at `pos`, or None when it is not made of varints and
    varint-only stats (or is not an event)."""
    tag, p = varint(buf, pos)
    if tag != 0x22:
        return None
    size, p = varint(buf, p)
    stop = p + size
    if stop > end:
        raise WireError("event runs past its line")
    lay = _Layout()
    oneof = None
    while p < stop:
        tag, q = varint(buf, p)
        if tag in (0x08, 0x10, 0x18, 0x28):
            value_pos = lay.add(tag)
            _, p = varint(buf, q)
            if tag == 0x08:
                lay.md = value_pos
            elif tag == 0x18:
                lay.dur = value_pos
            else:  # offset_ps / num_occurrences: a oneof, the last one set wins
                oneof = (tag, value_pos)
        elif tag == 0x22:
            n, q2 = varint(buf, q)
            len_pos = lay.add(0x22)
            s_end = q2 + n
            if s_end > stop:
                raise WireError("stat runs past its event")
            sid = val = None
            while q2 < s_end:
                stag, q3 = varint(buf, q2)
                if stag not in (0x08, 0x18, 0x20, 0x38):
                    return None  # double, string or bytes value: not this path's
                vpos = lay.add(stag)
                _, q2 = varint(buf, q3)
                if stag == 0x08:
                    sid = vpos
                else:
                    val = vpos if stag != 0x38 else None  # a ref value reads 0
            if q2 != s_end:
                raise WireError("stat runs past its length")
            if lay.k - 1 == len_pos:  # an empty stat: nothing to cover, nothing to check
                return None
            lay.lengths.append((len_pos, lay.k - 1))
            lay.stats.append((sid, val))
            p = q2
        else:
            return None
    if p != stop or lay.k == 2:
        return None
    lay.lengths[0] = (1, lay.k - 1)
    lay.tag_row = np.array([t for _, t in lay.tags], np.uint8)  # at positions 0, 2, 4, ...
    lay.length_at = [j for j, _ in lay.lengths]
    lay.length_covered = [c for _, c in lay.lengths]
    if oneof is not None:
        if oneof[0] == 0x10:
            lay.offset = oneof[1]
        else:
            lay.occ = oneof[1]
    return lay


_SHIFTS = np.arange(0, 70, 7, dtype=np.uint64)
_KEEP = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], np.uint64)
_M = [
    np.uint64(v)
    for v in (
        0x7F7F7F7F7F7F7F7F,
        0x007F007F007F007F,
        0x7F007F007F007F00,
        0x00003FFF00003FFF,
        0x3FFF00003FFF0000,
        0x000000000FFFFFFF,
        0x0FFFFFFF00000000,
    )
]
_ONE, _TWO, _FOUR = np.uint64(1), np.uint64(2), np.uint64(4)
_KEEP7 = _KEEP & _M[0]  # a varint's bytes, and each byte's 7 bits of value
# (longest varint the round is needed beyond, low groups, high groups, shift)
_ROUNDS = ((1, _M[1], _M[2], _ONE), (2, _M[3], _M[4], _TWO), (4, _M[5], _M[6], _FOUR))


def _words(b: np.ndarray) -> np.ndarray:
    """words[i] = the 8 bytes b[i:i+8] as a little-endian uint64 (a view, no copy)."""
    return np.ndarray((max(len(b) - 7, 0),), dtype="<u8", buffer=b, strides=(1,))


def _column(b: np.ndarray, last: np.ndarray, size: np.ndarray, words=None) -> np.ndarray:
    """Values (uint64) of the varints ending at `last` that are `size` bytes long (<= 10)."""
    width = int(size.max()) if len(size) else 1
    if width == 1:
        return b[last].astype(np.uint64)
    start = last - (size - 1)
    if width <= 8 and words is not None and int(start[-1]) < len(words):
        # Eight bytes at once; then the 7-bit groups packed together, pairs, quads, halves
        # (in place, one temporary; a round is skipped where no varint is that long: its
        # groups are already packed and the round would change nothing).
        x = words[start]
        x &= _KEEP7[size]
        for more_than, low, high, shift in _ROUNDS:
            if width <= more_than:
                break
            t = x & high
            t >>= shift
            x &= low
            x |= t
        return x
    at = start[:, None] + np.arange(width)
    np.minimum(at, len(b) - 1, out=at)
    g = b[at] & 0x7F
    g[np.arange(width) >= size[:, None]] = 0  # bytes past each varint belong to the next one
    return (g.astype(np.uint64) << _SHIFTS[:width]).sum(axis=1, dtype=np.uint64)


class _Window:
    """The complete events at the start of a window that follow the layout exactly: `rows`
    of them, out of `complete` events' worth of varints; ends[i, j] is the byte where varint j
    of event i ends, sizes[i, j] its length."""

    def __init__(self, b: np.ndarray, lay: _Layout, scratch: dict | None = None):
        self.b, self.rows, self.complete = b, 0, 0
        last = np.flatnonzero(np.less(b, 0x80, out=_scratch(scratch, "ends", len(b), bool)))
        k = lay.k
        m = len(last) // k
        if not m:
            return
        last = last[: m * k]
        sizes = _scratch(scratch, "sizes", len(last), np.int64)
        sizes[0] = last[0] + 1
        np.subtract(last[1:], last[:-1], out=sizes[1:])
        limit = m
        if int(sizes.max()) > 10:  # not a varint: only the events before it can be right
            limit = int(np.argmax(sizes > 10)) // k
        ends = last.reshape(m, k)[:limit]
        sizes = sizes.reshape(m, k)[:limit]
        rows = min(limit, _tags_hold(b, last[: limit * k], sizes.reshape(-1), lay))
        self.words = _words(b)
        # Each length equals the bytes it covers (a length under 128 is its one byte).
        for j, c in lay.lengths:
            if not rows:
                break
            at, size = ends[:rows, j], sizes[:rows, j]
            covered = ends[:rows, c] - at
            if int(size.max()) == 1:
                same = b[at] == covered
            else:
                same = _column(b, at, size, self.words) == covered.astype(np.uint64)
            if not same.all():
                rows = int(np.argmin(same))
        self.rows, self.complete = rows, m
        self.ends, self.sizes = ends[:rows], sizes[:rows]

    def col(self, j) -> np.ndarray:
        return _column(self.b, self.ends[:, j], self.sizes[:, j], self.words).view(np.int64)


def _tags_hold(b: np.ndarray, last: np.ndarray, sizes: np.ndarray, lay: _Layout) -> int:
    """How many whole events at the start hold the layout's tags: every field is a tag and a
    value, the tags the single-byte varints at even places (flat arrays of the events'
    varints; one gather and two comparisons over every tag at once)."""
    n = len(last) // lay.k
    ok = b[last[0::2]] == lay.tag_pattern(n)
    if n and int(sizes[0::2].max()) > 1:  # (a maximum is quicker than a comparison)
        ok &= sizes[0::2] == 1
    if ok.all():
        return n
    return int(np.argmin(ok)) // (lay.k // 2)


def _scratch(scratch: dict | None, name: str, n: int, dtype) -> np.ndarray:
    """n items of the array `scratch[name]` (grown when short; no scratch: a fresh array).
    What a window's checks write goes there, window after window of a run: a fresh megabyte
    each window cost its page faults every time (the allocator gave the pages back in
    between), more than the work written into it. A view of it is valid until the next
    window of the run is read."""
    if scratch is None:
        return np.empty(n, dtype)
    have = scratch.get(name)
    if have is None or len(have) < n:
        have = scratch[name] = np.empty(n, dtype)
    return have[:n]


def decode_events(
    src: Source, pos: int, end: int, base_ps: int, stat_ids: dict, sink, window: int | None = None
):
    """Decode the run of events that share the layout of the event at `pos`, window by window (one
    read of `window` bytes each); `sink(md, begin, dur, group, stall, occ)` gets each window's int64
    columns (those of `plane_lines.protobuf_line_events`). Returns the position after the run, or
    None when the event at `pos` is not one this path decodes (nothing was sent)."""
    head = src.read(pos, min(20, end - pos))
    tag, p = varint(head, 0)
    size, p = varint(head, p)
    if tag != 0x22 or pos + p + size > end:
        return None if tag != 0x22 else _raise("event runs past its line")
    lay = _layout(src.read(pos, p + size), 0, p + size)
    if lay is None:
        return None
    targets = [stat_ids.get(name) for name in TARGETS]
    window = window or WINDOW
    scratch: dict = {}  # (reused by each window: `_scratch`)
    while pos < end:
        b = np.frombuffer(src.read(pos, min(window, end - pos), scratch), np.uint8)
        w = _Window(b, lay, scratch)
        if not w.rows:
            if not w.complete and pos + window < end:  # an event larger than the window
                window *= 2
                continue
            break
        sink(*_columns(w, lay, base_ps, targets))
        pos += int(w.ends[-1, -1]) + 1
        if w.rows < w.complete:
            break  # the next event differs from the layout
        del w, b  # (else this window's arrays live on while the next one is decoded)
    return pos


def _raise(message):
    raise WireError(message)


def _columns(w: _Window, lay: _Layout, base_ps: int, targets):
    m = w.rows
    hits = [_hits(w, j, targets) for j, _ in lay.stats]
    # A column every event overrides with a stat (device offset and duration on TPU op lines)
    # needs no decoding of its own, nor a default to be written over.
    overridden = {i for h in hits for i, hit in enumerate(h) if hit is True}
    md = w.col(lay.md) if lay.md is not None else np.zeros(m, np.int64)
    occ = np.ones(m, np.int64)
    if lay.occ is not None and lay.offset is None:
        occ = w.col(lay.occ)
        occ[occ == 0] = 1  # protobuf: 0 reads as "not set"
    # group, begin, duration, stall: made when first written (`_default`)
    outputs: list = [None] * 4
    for stat_hits, (_, val_pos) in zip(hits, lay.stats):  # in order: the last match wins
        val = None
        for i, hit in enumerate(stat_hits):
            if hit is None:
                continue
            if val is None:
                val = w.col(val_pos) if val_pos is not None else np.zeros(m, np.int64)
            if hit is True:  # the column itself (a copy if it went to another output already)
                outputs[i] = val if not any(o is val for o in outputs) else val.copy()
            else:
                if outputs[i] is None:
                    outputs[i] = _default(w, lay, base_ps, i, overridden)
                outputs[i][hit] = val[hit]
    for i, out in enumerate(outputs):
        if out is None:
            outputs[i] = _default(w, lay, base_ps, i, overridden)
    group, begin, dur, stall = outputs
    return md, begin, dur, group, stall, occ


def _default(w: _Window, lay: _Layout, base_ps: int, i: int, overridden: set) -> np.ndarray:
    """Output `i` (group, begin, duration, stall) before any stat writes it: the event's own
    field, or protobuf's default."""
    m = w.rows
    if i == 0:
        return np.full(m, NO_STEP, np.int64)
    if i == 1:
        if lay.offset is None or 1 in overridden:
            return np.full(m, base_ps, np.int64)
        begin = w.col(lay.offset)
        begin += base_ps
        return begin
    if i == 2 and lay.dur is not None and 2 not in overridden:
        return w.col(lay.dur)
    return np.zeros(m, np.int64)


def _hits(w: _Window, j: int | None, targets) -> list:
    """Per target: None where no event's stat at varint `j` names it, True where every event's
    does, else the events' mask. Metadata ids of one byte each (the usual stat table) are
    compared as the bytes themselves, not decoded; one id on every event (the usual case) is
    compared once."""
    if j is None:
        return [None if t != 0 else True for t in targets]  # (no metadata id: protobuf reads 0)
    if int(w.sizes[:, j].max(initial=1)) == 1:
        sid = w.b[w.ends[:, j]]  # a one-byte varint is its value
    else:
        sid = w.col(j)
    first = int(sid[0])
    if (sid == sid[0]).all():
        return [True if t == first else None for t in targets]
    out: list = []
    for target in targets:
        if target is None or (sid.dtype == np.uint8 and not 0 <= target < 0x80):
            out.append(None)
            continue
        hit = sid == target
        out.append(None if not hit.any() else True if hit.all() else hit)
    return out
