"""Self times of nested events, vectorised (numpy only): an event's self time is its duration
minus the durations of the events directly nested in it (docs/xspace_format.md, "Self time").

`self_times` peels the nesting level by level; `self_times_by_stack` is the plain stack walk it
is tested against and falls back to for very deep nesting; `parents` gives the direct parents
by the same peeling. Used by the TPU op rows (readers/xspace/op_rows.py) and, through
readers/common.py `op_nesting`, by the Kineto and XLA GPU/CPU readers.
"""

from __future__ import annotations

import numpy as np

_MAX_PEEL_ROUNDS = 48


def self_time(dur: np.ndarray, children: np.ndarray) -> np.ndarray:
    """THE self time of events (every reader's): the duration less the summed durations of
    the events directly nested in it, never below 0 (direct children that overlap each other
    would otherwise count their overlap twice and leave a negative time)."""
    return np.maximum(dur - children, 0)


def _self_times_stack(b, e, d):
    """The definition, one event at a time (events already in (begin, -duration) order): each
    event's parent is the innermost open event that contains it."""
    bl, el = b.tolist(), e.tolist()
    out = d.astype(np.int64).tolist()
    stack: list[int] = []
    for i in range(len(bl)):
        while stack and not (bl[i] >= bl[stack[-1]] and el[i] <= el[stack[-1]]):
            stack.pop()
        if stack:
            out[stack[-1]] -= el[i] - bl[i]
        stack.append(i)
    return np.asarray(out, dtype=np.int64)


def self_times_by_stack(begin: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`self_times` by the plain stack walk: the reference the vectorised version is tested
    against, and its fallback for very deep nesting."""
    begin = np.asarray(begin, np.int64)
    dur = np.asarray(dur, np.int64)
    order = np.lexsort((-dur, begin))
    b, d = begin[order], dur[order]
    return order, self_time(d, d - _self_times_stack(b, b + d, d))


def self_times(begin: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, self time), exactly as `self_times_by_stack`: events sorted by (begin, -duration)
    (stable); `self_time` of each, the parent of an event being the nearest earlier event (in
    that order) that ends at or after it ends."""
    begin = np.asarray(begin, np.int64)
    dur = np.asarray(dur, np.int64)
    n = len(begin)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order, b, d = _sorted(begin, dur)
    got = _peel(b, b + d, d)
    less = got[0] if got is not None else _self_times_stack(b, b + d, d)  # d - children
    return order, self_time(d, d - less)


def parents(begin: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each event's direct parent (its index, -1 at top level) for events already in
    (begin, -duration) order, as the stack walk nests them (the innermost open event that
    contains it): the peeling of `self_times`, with the stack walk for very deep nesting."""
    b = np.asarray(begin, np.int64)
    d = np.asarray(dur, np.int64)
    if not len(b):
        return np.zeros(0, np.int64)
    got = _peel(b, b + d, d)
    return got[1] if got is not None else _parents_stack(b, b + d)


def _parents_stack(b, e):
    bl, el = b.tolist(), e.tolist()
    out = [-1] * len(bl)
    stack: list[int] = []
    for i in range(len(bl)):
        while stack and not (bl[i] >= bl[stack[-1]] and el[i] <= el[stack[-1]]):
            stack.pop()
        if stack:
            out[i] = stack[-1]
        stack.append(i)
    return np.asarray(out, np.int64)


def _sorted(begin, dur):
    n = len(begin)
    db, dd = np.diff(begin), np.diff(dur)
    if ((db > 0) | ((db == 0) & (dd <= 0))).all():
        return np.arange(n), begin, dur  # already in (begin, -duration) order (lexsort is stable)
    order = np.lexsort((-dur, begin))
    return order, begin[order], dur[order]


def _peel(b, e, d):
    """(self times, parents) of sorted events by peeling levels, or None past
    _MAX_PEEL_ROUNDS rounds (very deep nesting: the caller walks the stack)."""
    n = len(b)
    selft = d.copy()
    # Parent = previous element with end >= own end (stack semantics, since begins ascend).
    # Peel level by level: within the segment of elements following a parent (its subtree),
    # the direct children are the strict running-maximum records of the end.
    # Dense rank of the end (equal ends compare equal).
    eo = np.argsort(e)
    es = e[eo]
    dense = np.concatenate(([0], np.cumsum(es[1:] != es[:-1])))
    rank_e = np.empty(n, np.int64)
    rank_e[eo] = dense
    idx = np.arange(n)
    seg_ord = np.zeros(n, np.int64)  # ordinal of the segment (parent) each element is in
    parent = np.full(n, -1, np.int64)  # -1: top level
    width = int(dense[-1]) + 1
    rounds = 0
    while len(idx):
        rounds += 1
        if rounds > _MAX_PEEL_ROUNDS and len(idx) > 64:
            return None
        key = seg_ord * width + rank_e[idx]
        rec = np.empty(len(idx), bool)
        rec[0] = True
        if len(idx) > 1:
            rec[1:] = key[1:] > np.maximum.accumulate(key)[:-1]
        r = idx[rec]
        pr = parent[r]
        has = pr >= 0
        if has.any():
            rc, pc = r[has], pr[has]
            starts = np.flatnonzero(np.concatenate(([True], pc[1:] != pc[:-1])))
            selft[pc[starts]] -= np.add.reduceat(d[rc], starts)
        rest = ~rec
        if not rest.any():
            break
        last_rec = np.maximum.accumulate(np.where(rec, idx, -1))
        newpar = last_rec[rest]
        idx = idx[rest]
        parent[idx] = newpar
        chg = np.empty(len(idx), bool)
        chg[0] = True
        chg[1:] = newpar[1:] != newpar[:-1]
        seg_ord = np.cumsum(chg)
    return selft, parent
