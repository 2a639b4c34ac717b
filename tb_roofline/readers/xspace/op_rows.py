"""An op line's events reduced to rows (metadata id, step) as they arrive: self times, and
exact sums of time, self time, DMA stalls, executions and async transfer spans per row.

Events come window by window (readers/xspace/wire.py). The line is cut where no earlier event can
contain a later one (self times never cross a cut) and reduced a segment at a time: only the
clusters of nested events go through the nesting computation. Segments' rows are merged one
column at a time, so a line of one row per event (every op once per step) needs little more
than its rows. Self times are `self_time.self_times`'; async transfer spans pair each `-done`
with its `-start` in order (docs/xspace_format.md, "Asynchronous pairs"); tests/tpu_oracle.py
is the plain reduction this one is tested against.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.readers.self_time import self_times
from tb_roofline.table.op_table import distinct

SEGMENT_EVENTS = 1 << 15  # events reduced at a time (at the last cut before this many)
SUMS = ("time", "self", "stall", "occ", "span")


class Grouping:
    """Rows of (md, group) pairs, ascending, and exact int64 sums per row: by counting into a
    dense table when the ranges are small and a sum stays exact in float64 (below 2**53),
    else by sorting (the order and values of a plain sort by (md, group)). Pieces already
    sorted (`runs`: the segments' rows merged) go by sorting: a stable sort merges the runs
    at little cost, where the dense table of a whole line is mostly empty."""

    def __init__(self, md: np.ndarray, group: np.ndarray, runs: bool = False):
        self.n = n = len(md)
        # The dense table's key per event, or the sort's rows: whichever way was taken
        self.key: np.ndarray | None = None
        self.first: np.ndarray | None = None
        if not n:
            self.md, self.group = md[:0], group[:0]
            return
        mlo, glo = int(md.min()), int(group.min())
        self.width = width = int(group.max()) - glo + 1
        self.size = size = (int(md.max()) - mlo + 1) * width
        if size <= max(4 * n, 1 << 16) and not runs:
            self.key = (md - mlo) * width + (group - glo)
            self.present = np.flatnonzero(np.bincount(self.key, minlength=size))
            self.md, self.group = self.present // width + mlo, self.present % width + glo
            return
        self._sort(md, group)

    def _sort(self, md, group):
        """Each row's first event (`first`), and the events after the first of a row (`more`,
        `more_row` their rows): a row's sum is its first event's value plus the others' (none
        where every pair is one event's, as when each op runs once a step)."""
        key = _pair_key(md, group)
        if key is not None and _ascending(key):  # already in order, every pair once
            self.first = np.arange(len(key))
            self.more = self.more_row = self.first[:0]
            self.md, self.group = md, group
            return
        if key is None:
            order = np.lexsort((group, md))
            m, g = md[order], group[order]
            new = np.concatenate(([True], (m[1:] != m[:-1]) | (g[1:] != g[:-1])))
            del m, g
        else:  # one stable sort of one key: the same order, faster, one array less held
            order = np.argsort(key, kind="stable")
            k = key[order]
            del key
            new = np.concatenate(([True], k[1:] != k[:-1]))
            del k
        self.first = order[new]
        if len(self.first) == len(order):
            self.more = self.more_row = order[:0]
        else:
            again = ~new
            self.more_row = (np.cumsum(new) - 1)[again]
            self.more = order[again]
        self.md, self.group = md[self.first], group[self.first]

    def sum(self, w: np.ndarray | None) -> np.ndarray | None:
        """Per-row sums of w (None for an all-zero column, kept None)."""
        if w is None or not self.n:
            return None if w is None else w[:0]
        if self.key is not None and max(-int(w.min()), int(w.max())) * self.n < 2**53:
            return np.bincount(self.key, weights=w, minlength=self.size)[self.present].astype(
                np.int64
            )
        if self.first is None and self.key is not None:  # a sum too large for float64: sort
            md = self.md[np.searchsorted(self.present, self.key)]
            self._sort(md, self.group[np.searchsorted(self.present, self.key)])
        assert self.first is not None
        w = np.asarray(w, np.int64)
        out = w[self.first]
        if len(self.more):  # (int64 sums are exact in any order)
            np.add.at(out, self.more_row, w[self.more])
        return out


def _ascending(key: np.ndarray) -> bool:
    """Whether the keys strictly ascend (one comparison pass, no sort)."""
    return len(key) < 2 or bool((key[1:] > key[:-1]).all())


def _pair_key(md: np.ndarray, group: np.ndarray) -> np.ndarray | None:
    """One int64 per (md, group) pair that orders as the pairs do, or None when their ranges
    are too wide for one."""
    mlo, glo = int(md.min()), int(group.min())
    width = int(group.max()) - glo + 1
    if (int(md.max()) - mlo + 1) * width >= 2**62:
        return None
    key = md - mlo
    key *= width
    key += group
    key -= glo
    return key


def _rows(md, group, **sums) -> list:
    """[md, group, [sum per SUMS name or None]] of one segment."""
    g = Grouping(md, group)
    return [g.md, g.group, [g.sum(sums.get(name)) for name in SUMS]]


def _merge(parts: list) -> list:
    """Several segments' rows summed per (md, group), a column at a time (each column's
    pieces dropped once merged)."""
    if len(parts) == 1:
        return parts[0]
    lengths = [len(p[0]) for p in parts]
    md = np.concatenate([p[0] for p in parts])
    group = np.concatenate([p[1] for p in parts])
    for p in parts:
        p[0] = p[1] = None
    g = Grouping(md, group, runs=True)
    del md, group
    sums: list = []
    for i in range(len(SUMS)):
        pieces = [p[2][i] for p in parts]
        for p in parts:
            p[2][i] = None
        if all(x is None for x in pieces):
            sums.append(None)
            continue
        w = np.concatenate(
            [x if x is not None else np.zeros(n, np.int64) for x, n in zip(pieces, lengths)]
        )
        del pieces
        sums.append(g.sum(w))
    return [g.md, g.group, sums]


def _concat(chunks):
    if len(chunks) == 1:
        return chunks[0]
    return tuple(np.concatenate(cols) for cols in zip(*chunks))


class OpLine:
    """Reduces an `XLA Ops` line to rows (op, step) as its events arrive. A line whose events
    are not in (begin, -duration) order is kept whole and reduced at the end (self times need
    the order)."""

    def __init__(self, role_of):
        self.role_of = role_of  # md ids -> 0 none, 1 async start, 2 async done
        self.pending = []
        self.n_pending = 0
        self.partials = []
        self.asyncs = []
        self.count = 0  # events seen (global index of the next one)
        self.max_end = None  # largest end of the events already reduced
        self.last = None  # (begin, duration) of the last event seen
        self.ordered = True
        self.lo = self.hi = None

    def add(self, md, begin, dur, group, stall, occ):
        if not len(md):
            return
        end = begin + dur
        lo, hi = int(begin.min()), int(end.max())
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        if self.ordered:
            db, dd = np.diff(begin), np.diff(dur)
            ok = bool(((db > 0) | ((db == 0) & (dd <= 0))).all())
            if ok and self.last is not None:
                b0, d0 = self.last
                ok = begin[0] > b0 or (begin[0] == b0 and dur[0] <= d0)
            self.ordered = ok
        self.last = (int(begin[-1]), int(dur[-1]))
        roles = self.role_of(md)
        if roles.any():
            sel = np.flatnonzero(roles)
            self.asyncs.append(
                (md[sel], begin[sel], dur[sel], group[sel], sel + self.count, roles[sel])
            )
        self.count += len(md)
        self.pending.append((md, begin, dur, group, stall, occ))
        self.n_pending += len(md)
        if self.ordered and self.n_pending >= SEGMENT_EVENTS:
            self._reduce(final=False)

    def _reduce(self, final: bool):
        md, begin, dur, group, stall, occ = _concat(self.pending)
        self.pending, self.n_pending = [], 0
        if not self.ordered:  # only at the end: everything at once, sorted
            order, selft = self_times(begin, dur)
            md, group, stall, occ, dur = (
                md[order],
                group[order],
                stall[order],
                occ[order],
                dur[order],
            )
            self.partials.append(
                _rows(
                    md, group, time=dur, self=selft, occ=occ, stall=stall if stall.any() else None
                )
            )
            return
        end = begin + dur
        running = np.maximum.accumulate(end)
        prev = np.empty_like(running)
        prev[0] = self.max_end if self.max_end is not None else np.iinfo(np.int64).min
        np.maximum(running[:-1], prev[0], out=prev[1:])
        cut = (prev < begin) | ((prev == begin) & (dur > 0))
        cut[0] = True  # the previous segment ended at a cut
        if final:
            stop = len(md)
        else:
            stop = int(np.flatnonzero(cut)[-1])
            if stop == 0:  # no cut yet: keep everything for the next window
                self.pending, self.n_pending = [(md, begin, dur, group, stall, occ)], len(md)
                return
            rest = (md[stop:], begin[stop:], dur[stop:], group[stop:], stall[stop:], occ[stop:])
            self.pending, self.n_pending = [rest], len(rest[0])
            md, begin, dur, group, stall, occ = (
                c[:stop] for c in (md, begin, dur, group, stall, occ)
            )
            cut = cut[:stop]
        self.max_end = (
            int(running[stop - 1])
            if self.max_end is None
            else max(self.max_end, int(running[stop - 1]))
        )
        selft = dur.copy()
        cluster = np.cumsum(cut)
        nested = np.flatnonzero(np.bincount(cluster)[cluster] > 1)
        if len(nested):
            order, sub = self_times(begin[nested], dur[nested])
            selft[nested[order]] = sub
        self.partials.append(
            _rows(md, group, time=dur, self=selft, occ=occ, stall=stall if stall.any() else None)
        )

    def finish(self, start_of) -> list | None:
        """Rows [md, step, [sum per SUMS name, None for all-zero columns]] of the whole line;
        `start_of` maps the metadata id of an async `-done` to its `-start`'s."""
        if self.n_pending:
            self._reduce(final=True)
        if self.asyncs:
            span_rows = _async_rows(_concat(self.asyncs), start_of)
            if span_rows is not None:
                self.partials.append(span_rows)
        parts, self.partials = self.partials, []
        return _merge(parts) if parts else None


def _async_rows(events, start_of):
    """Rows carrying the transfer span of each `-done` event: from its `-start`'s issue to
    its own end; executions pair in order."""
    md, begin, dur, group, idx, roles = events
    out_md, out_group, out_span = [], [], []
    for mid in distinct(md[roles == 2]).tolist():
        start_mid = start_of.get(mid)
        if start_mid is None:
            continue
        done = np.flatnonzero(md == mid)
        start = np.flatnonzero(md == start_mid)
        if not len(start):
            continue
        done = done[np.lexsort((idx[done], begin[done]))]
        start = start[np.lexsort((idx[start], begin[start]))]
        k = min(len(done), len(start))
        done, start = done[:k], start[:k]
        ok = begin[start] <= begin[done]
        done, start = done[ok], start[ok]
        out_md.append(md[done])
        out_group.append(group[done])
        out_span.append(begin[done] + dur[done] - begin[start])
    if not out_md:
        return None
    md, group, span = (np.concatenate(x) for x in (out_md, out_group, out_span))
    return _rows(md, group, span=span)
