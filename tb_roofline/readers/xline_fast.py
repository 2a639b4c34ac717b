"""Vectorised decoding of XLine events, self times and per-(op, step) sums (numpy only).

Exact equivalents of `xspace._line_events` and of the stack walk for self times, for TPU op lines parsed with
the token view of `xplane_view.proto` (`XLineTokens.event_tokens`: the events field read as packed
varints, so protobuf's C parser decodes every varint of every event at once).

An XEvent made of varints, with XStat sub-messages of varints, is a stream in which tags and
values alternate (a stat's header is a tag and a length, its content again tag/value pairs).
`decode_tokens` rebuilds the events from that stream: when all events share one tag sequence
(the usual case) the pairs form an events x fields table; otherwise events are found by their
metadata-id pair and checked against the event count. Anything it cannot prove well formed
(double, string or bytes stats, unknown fields, missing ids) comes back as None and the reader
decodes that line per event with the full schema, so the result is always `_line_events`'.

Protobuf semantics kept: of several matching stats of an event the last wins; a stat is matched
against group_id, device_offset_ps, device_duration_ps and dma_stall_duration_ps; a ref value
reads 0 as int64/uint64. uint64 values >= 2**63 wrap to int64 (the per-event path would raise
OverflowError there).
"""
from __future__ import annotations

import numpy as np


NO_STEP = -1  # tb_roofline.model.op_table.NO_STEP

_EVENT_TAGS = (0x08, 0x10, 0x18, 0x22, 0x28)   # XEvent: metadata_id, offset_ps, duration_ps, stats, num_occurrences
_EV_OK = np.zeros(256, bool)
_EV_OK[list(_EVENT_TAGS)] = True
def _empty(n=0):
    return (np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64),
            np.full(n, NO_STEP, np.int64), np.zeros(n, np.int64), np.ones(n, np.int64))



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
        for name, target in (("group_id", group), ("device_offset_ps", begin),
                             ("device_duration_ps", dur), ("dma_stall_duration_ps", stall)):
            sid = stat_ids.get(name)
            if sid is None:
                continue
            hit = np.flatnonzero(s_mid_i == sid)
            if len(hit):
                target[s_event[hit]] = s_value[hit]  # several: the last one wins
    return md, begin, dur, group, stall, occ


# ----------------------------------------------------------------------------------------------
# Self times

_MAX_PEEL_ROUNDS = 48


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
    return order, _self_times_stack(b, b + d, d)


def self_times(begin: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, self time), exactly as `self_times_by_stack`: events sorted by (begin, -duration)
    (stable); self = duration minus the durations of the direct children, the parent of an event
    being the nearest earlier event (in that order) that ends at or after it ends."""
    begin = np.asarray(begin, np.int64)
    dur = np.asarray(dur, np.int64)
    n = len(begin)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    db, dd = np.diff(begin), np.diff(dur)
    if ((db > 0) | ((db == 0) & (dd <= 0))).all():
        order = np.arange(n)   # already in (begin, -duration) order; lexsort is stable
        b, d = begin, dur
    else:
        order = np.lexsort((-dur, begin))
        b, d = begin[order], dur[order]
    e = b + d
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
    seg_ord = np.zeros(n, np.int64)     # ordinal of the segment (parent) each element is in
    parent = np.full(n, -1, np.int64)   # -1: top level
    width = int(dense[-1]) + 1
    rounds = 0
    while len(idx):
        rounds += 1
        if rounds > _MAX_PEEL_ROUNDS and len(idx) > 64:
            return order, _self_times_stack(b, e, d)
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
    return order, selft


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
    if (mhi - mlo + 1) * gw < 2 ** 62:
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
