"""How readers make the timeline facts (table/timeline.py): they hand each core's op events
(begin, end, lane, op label) to a `TimelineBuilder`, which keeps only the per-core summaries
(windows, exposed time per op, back-to-back pairs, idle causes) and builds the `Timeline`.
Unions of intervals (busy, compute, the causes' spans) are measured by `_Segments`.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.table.op_table import NO_STEP
from tb_roofline.table.timeline import (
    IDLE_CAPTURE,
    IDLE_COPY,
    IDLE_EDGES,
    IDLE_EVENT,
    IDLE_EVENT_BLOCKED,
    IDLE_HOST,
    IDLE_LAUNCH,
    IDLE_NO_LAUNCH,
    IDLE_QUEUED,
    IDLE_SYNC,
    IDLE_WAIT_COPY,
    IDLE_WAIT_SYNC,
    LAUNCH_LATENCY_PS,
    MAX_EXPOSED_OPS,
    MAX_PAIRS,
    WINDOW_COLUMNS,
    AdjacentPair,
    OpLabel,
    Timeline,
    top_pairs,
)


def _ascending(x: np.ndarray) -> bool:
    return len(x) < 2 or bool((x[1:] >= x[:-1]).all())


class _Segments:
    """Disjoint sorted segments covering some intervals, with their running measure: how much
    of the union lies before any time, in one search. Holds three floats a segment (starts,
    ends, running measure); a segment's length is read off the first two when asked."""

    def __init__(self, begin: np.ndarray, end: np.ndarray):
        keep = end > begin
        if not keep.all():
            begin, end = begin[keep], end[keep]
        del keep
        if not _ascending(begin):  # events of one line come in order; several lines do not
            order = np.argsort(begin, kind="stable")
            begin, end = begin[order], end[order]
        n = len(begin)
        if n:
            reach = np.maximum.accumulate(end)
            new = np.empty(n, bool)  # an interval that starts after all before it ended
            new[0] = True
            np.greater(begin[1:], reach[:-1], out=new[1:])
            if new.all():  # disjoint already (back-to-back ops): the intervals themselves
                self.starts, self.ends = begin, reach
            else:
                last = np.empty(n, bool)  # the last interval of each segment
                last[:-1] = new[1:]
                last[-1] = True
                self.starts, self.ends = begin[new], reach[last]
            del reach, new
        else:
            self.starts = self.ends = np.zeros(0)
        self.cum = np.zeros(len(self.starts) + 1)
        np.subtract(self.ends, self.starts, out=self.cum[1:])
        np.cumsum(self.cum[1:], out=self.cum[1:])

    def total(self) -> float:
        """The measure of the union (summed as numpy sums, pairwise)."""
        return float((self.ends - self.starts).sum())

    def covered(self, t) -> np.ndarray:
        """The measure of the union up to each time in `t`."""
        t = np.asarray(t, np.float64)
        if not len(self.starts):
            return np.zeros(t.shape)
        i = np.searchsorted(self.starts, t, side="right")  # segments starting at or before t
        j = np.maximum(i - 1, 0)
        part = np.where(i > 0, np.clip(t - self.starts[j], 0.0, self.ends[j] - self.starts[j]), 0.0)
        return self.cum[j] + part

    def between(self, lo, hi) -> np.ndarray:
        return self.covered(hi) - self.covered(lo)


def unique_pairs(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, each row's index among them) of an (n, 2) int64 array, rows in
    lexicographic order: what `np.unique(codes, axis=0, return_inverse=True)` gives, without
    its structured-dtype sort, several times slower on the hundred thousand pairs of a long
    line of small ops."""
    order = np.lexsort((codes[:, 1], codes[:, 0]))
    ordered = codes[order]
    first = np.ones(len(ordered), bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inv = np.empty(len(ordered), np.intp)
    inv[order] = np.cumsum(first) - 1
    return ordered[first], inv


def loop_containers(lane, begin, end, leaf) -> np.ndarray:
    """Which events are containers (`leaf` False: XLA `while`, `conditional`, `call`, TPU
    megacore fusions) that enclose another op event on their lane. Events in (lane, begin,
    outer first) order: a container encloses something when the next event on its lane starts
    before it ends (events on one lane nest). A container that encloses nothing is the only
    record of what ran then, and stays work."""
    outer = ~leaf
    n = len(outer)
    if n < 2 or not outer.any():
        return np.zeros(n, bool)
    same = lane[1:] == lane[:-1]
    in_order = (lane[1:] > lane[:-1]) | (
        same & ((begin[1:] > begin[:-1]) | ((begin[1:] == begin[:-1]) & (end[1:] <= end[:-1])))
    )
    order = None
    if not in_order.all():
        order = np.lexsort((-end, begin, lane))
        lane, begin, end, outer = lane[order], begin[order], end[order], outer[order]
        same = lane[1:] == lane[:-1]
    encloses = np.zeros(n, bool)
    encloses[:-1] = same & (begin[1:] < end[:-1])
    encloses &= outer
    if order is None:
        return encloses
    out = np.zeros(n, bool)
    out[order] = encloses
    return out


def _work_segments(lane, begin, end, comm, leaf, sb, se, span):
    """(segments of the work, None or the (per step, whole core) measure of communication ∪
    work when loop containers are left out of it)."""
    keep = ~comm
    reach = None
    if leaf is not None and not np.all(leaf):
        outer = loop_containers(lane, begin, end, np.asarray(leaf, bool))
        if outer.any():
            keep &= ~outer
            seg = _Segments(begin[~outer], end[~outer])
            reach = (seg.between(sb, se), float(seg.between(float(span[0]), float(span[1]))))
            del seg
        del outer
    return _Segments(begin[keep], end[keep]), reach


def _edges(lo, hi, begin, end, step_b, step_e):
    """The profile's edges on a core: before its first op and after its last one, outside
    every step."""
    if len(begin):
        first, last = float(begin.min()), float(end.max())
        edges_b = np.array([lo, min(max(last, lo), hi)])
        edges_e = np.array([max(min(first, hi), lo), hi])
    else:
        edges_b, edges_e = np.array([lo], np.float64), np.array([hi], np.float64)
    if len(step_b):  # the edges less the steps: intersect with the gaps between steps
        st = _Segments(np.asarray(step_b, np.float64), np.asarray(step_e, np.float64))
        gaps_b, gaps_e = np.r_[lo, st.ends], np.r_[st.starts, hi]
        b = np.maximum(gaps_b[None, :], edges_b[:, None]).ravel()
        e = np.minimum(gaps_e[None, :], edges_e[:, None]).ravel()
        edges_b, edges_e = b[e > b], e[e > b]
    return edges_b, edges_e


def _gaps(lo, hi, busy: _Segments):
    """The idle gaps of a core, clipped to its span: before each busy segment (from the end of
    the one before, or `lo`), then from the last one's end to `hi`."""
    gb = np.clip(np.r_[lo, busy.ends], lo, hi)
    ge = np.clip(np.r_[busy.starts, hi], lo, hi)
    return gb, np.maximum(ge, gb)


class TimelineBuilder:
    """Collects one profile's per-core summaries; `label_id` interns op labels."""

    def __init__(self):
        self._labels: dict = {}
        self._shapes: dict = {None: 0}  # the tensors an op call recorded, interned (None unknown)
        self._windows: list = []
        self._pairs: list = []  # per core: (pair codes, counts, gaps, shorter times)
        self._exposed: dict = {}
        self._causes: dict = {}
        self._cause_spans: dict = {}

    def label_id(self, label: OpLabel) -> int:
        idx = self._labels.get(label)
        if idx is None:
            idx = self._labels[label] = len(self._labels)
        return idx

    def shape_ids(self, dims) -> np.ndarray:
        """Ids of the tensor shapes op calls recorded (their input dims as data, None unknown),
        for `add_core`'s `shape`: back-to-back pairs are told apart by them."""
        return np.fromiter((self._shapes.setdefault(d, len(self._shapes)) for d in dims), np.int64)

    def label_ids(self, labels: list) -> np.ndarray:
        """Ids of many labels at once (a fresh builder takes them in order)."""
        if not self._labels:
            self._labels = dict.fromkeys(labels)
            self._labels.update(zip(self._labels, range(len(self._labels))))
            if len(self._labels) == len(labels):
                return np.arange(len(labels))
        return np.fromiter((self.label_id(x) for x in labels), np.int64, len(labels))

    def add_core(
        self,
        core: int,
        span: tuple,
        steps: list,
        lane,
        begin,
        end,
        op,
        comm,
        fusible,
        leaf=None,
        causes=None,
        launch=None,
        shape=None,
    ):
        """One core's op events (arrays of equal length; `op` holds label ids; `leaf` False for
        containers, which count as busy but take no part in adjacency). `span` = (start, end)
        ps of the core; `steps` = [(step, start ps, duration ps)] on this core. `causes`:
        {IDLE_CAPTURE or IDLE_SYNC: (begin ps array, end ps array)} host spans that explain
        idle time on this core (graph_capture_spans, sync_spans). `shape`: per event, the id
        (`shape_ids`) of the tensors its op call recorded, where the reader knows them.

        Exposed time is the communication that no work ran beside: measure(comm ∪ work) −
        measure(work). A container that encloses other ops on its lane (an XLA `while`,
        `conditional` or `call` event: `loop_containers`) is not work: its time is its
        children's, and counted as work it would hide every collective inside the loop. It
        still counts as busy; its time outside its children and the communication counts as
        compute (the loop's own control).

        Memory: float64 `begin`/`end` and integer `op`/`lane` of any width are used as given
        (no copies); one set of segments at a time is held (busy, then with loop containers
        communication or work, then compute)."""
        begin = np.asarray(begin, np.float64)
        end = np.asarray(end, np.float64)
        if (end < begin).any():
            end = np.maximum(end, begin)
        comm = np.asarray(comm, bool)
        fusible = np.asarray(fusible, bool)
        op = np.asarray(op)
        lane = np.asarray(lane)
        lo, hi = float(span[0]), float(span[1])
        steps = sorted(steps, key=lambda s: s[1])
        sb = np.array([s[1] for s in steps], np.float64)
        se = sb + np.array([s[2] for s in steps], np.float64)
        busy_segments = _Segments(begin, end)
        busy = busy_segments.between(sb, se)
        busy_all = float(busy_segments.between(lo, hi))
        self._add_idle_causes(lo, hi, begin, end, busy_segments, causes or {}, sb, se, launch)
        has_comm = bool(comm.any())
        reach = (busy, busy_all)  # the union of communication and work
        if has_comm:
            del busy_segments
            compute_segments, loops_reach = _work_segments(
                lane, begin, end, comm, leaf, sb, se, span
            )
            reach = loops_reach or reach
        else:
            compute_segments = busy_segments
        self._add_window(core, steps, sb, se, span, (busy, busy_all), reach, compute_segments)
        if has_comm:
            self._add_exposed(begin, end, op, comm, compute_segments)
        del compute_segments
        shape = np.zeros(len(op), np.int64) if shape is None else np.asarray(shape, np.int64)
        if leaf is not None and not np.all(leaf):
            leaf = np.asarray(leaf, bool)
            lane, begin, end, op, fusible, shape = (
                lane[leaf],
                begin[leaf],
                end[leaf],
                op[leaf],
                fusible[leaf],
                shape[leaf],
            )
        self._add_pairs(lane, begin, end, op, fusible, shape)

    def _add_window(self, core, steps, sb, se, span, busy, reach, compute_segments):
        """One row per step and one for the time outside steps: `busy` and `reach` (the union
        of communication and work) are (per step, whole core) measures."""
        lo, hi = float(span[0]), float(span[1])
        (busy, busy_all), (reach, reach_all) = busy, reach
        compute = compute_segments.between(sb, se)
        compute_all = float(compute_segments.between(lo, hi))
        out_span = max(0.0, (hi - lo) - float((se - sb).sum()))
        out_busy = max(0.0, busy_all - float(busy.sum()))
        out_reach = max(0.0, reach_all - float(reach.sum()))
        out_compute = min(out_reach, max(0.0, compute_all - float(compute.sum())))
        n = len(steps)
        self._windows.append(
            {
                "core": np.full(n + 1, core, np.int64),
                "step": np.array([s[0] for s in steps] + [NO_STEP], np.int64),
                "span_ps": np.r_[se - sb, out_span],
                "busy_ps": np.r_[busy, out_busy],
                # the work, plus the loop containers' own time (none without loops: `compute`)
                "compute_ps": np.r_[compute + (busy - reach), out_compute + (out_busy - out_reach)],
                "exposed_ps": np.r_[reach - compute, out_reach - out_compute],
            }
        )

    def _add_exposed(self, begin, end, op, comm, compute_segments):
        """Exposed time per communication op, each exposed instant once (to the op whose
        interval reaches it first): the contributors add up to the core's exposed time (a
        union), however many lanes or threads ran communication at once."""
        idx = np.flatnonzero(comm)
        if not len(idx):
            return
        idx = idx[np.argsort(begin[idx], kind="stable")]
        b, e = begin[idx], end[idx]
        reach = np.maximum.accumulate(e)
        start = np.maximum(b, np.r_[-np.inf, reach[:-1]])  # past what earlier ones covered
        start = np.minimum(start, e)
        hidden = compute_segments.between(start, e)
        alone = np.maximum((e - start) - hidden, 0.0)
        ops, inv = np.unique(op[idx], return_inverse=True)
        sums = np.bincount(inv.reshape(-1), weights=alone, minlength=len(ops))
        for o, v in zip(ops.tolist(), sums.tolist()):
            self._exposed[o] = self._exposed.get(o, 0.0) + v

    def _add_idle_causes(self, lo, hi, begin, end, busy, causes, step_b, step_e, launch=None):
        """Idle time of the core by cause, each idle instant once: inside graph captures, then
        at the profile's edges, then by `launch` where the reader gives it (_add_launch_causes),
        else inside syncs and blocking copies (`sync`; the rest is left to the model as
        host-bound). Each is measure(union of the spans so far) less the busy time in it, less
        what the earlier causes took. The profile's edges are the time before the core's first
        op and after its last one, outside any step (idle in a step is the step's)."""
        spans = {IDLE_EDGES: _edges(lo, hi, begin, end, step_b, step_e)}
        for k in (IDLE_CAPTURE, IDLE_SYNC, IDLE_COPY):
            if k in causes:
                b = np.clip(np.asarray(causes[k][0], np.float64), lo, hi)
                e = np.clip(np.asarray(causes[k][1], np.float64), lo, hi)
                spans[k] = (b, e)
                seg = _Segments(b, e)
                self._cause_spans[k] = self._cause_spans.get(k, 0.0) + seg.total()
        acc_b, acc_e = np.zeros(0), np.zeros(0)
        taken = 0.0
        for key, group in (
            (IDLE_CAPTURE, (IDLE_CAPTURE,)),
            (IDLE_EDGES, (IDLE_EDGES,)),
            (IDLE_SYNC, (IDLE_SYNC, IDLE_COPY)),
        ):
            present = [k for k in group if k in spans]
            for k in present:
                acc_b, acc_e = np.r_[acc_b, spans[k][0]], np.r_[acc_e, spans[k][1]]
            seg = _Segments(acc_b, acc_e)
            if not present or (launch is not None and key == IDLE_SYNC):
                continue
            idle = seg.total() - float(busy.between(seg.starts, seg.ends).sum())
            self._causes[key] = self._causes.get(key, 0.0) + max(0.0, idle - taken)
            taken = max(taken, idle)
        if launch is not None:
            self._add_launch_causes(lo, hi, begin, busy, launch, spans)

    def _add_launch_causes(self, lo, hi, begin, busy, launch, spans):
        """Idle time after the captures and edges (`spans`: the host spans of each cause),
        split by when the activity that ends each gap was launched (`launch` = issue ps,
        return ps, waited: arrays along `begin`, NaN where no launch is known; `waited`: a
        wait-for-event call preceded the launch on its stream): before the issue the host had
        not launched it (`sync` inside syncs and blocking copies, else host-bound); from the
        issue to LAUNCH_LATENCY_PS after it, or the call's return if later, the launch itself;
        after that the stream waited (an event, else a sync or a blocking copy the host sat
        in, else nothing the trace shows). The idle after the core's last activity is the
        host's when any launch is known; without a launch (or with one recorded after its
        activity started) the cause is undetermined."""
        ce, ces, all_host = (
            _Segments(*(np.concatenate(x) for x in zip(*(spans[k] for k in keys if k in spans))))
            for keys in (
                (IDLE_CAPTURE, IDLE_EDGES),
                (IDLE_CAPTURE, IDLE_EDGES, IDLE_SYNC),
                (IDLE_CAPTURE, IDLE_EDGES, IDLE_SYNC, IDLE_COPY),
            )
        )
        issue, ret, waited = (np.asarray(x) for x in launch)
        gb, ge = _gaps(lo, hi, busy)
        order = np.argsort(begin, kind="stable")
        at = np.minimum(np.searchsorted(begin[order], busy.starts, "left"), len(order) - 1)
        nxt = order[at] if len(order) else np.zeros(0, np.int64)
        n = len(nxt)  # gaps before an activity; the last gap (to `hi`) has none
        l0 = np.r_[issue[nxt].astype(np.float64), np.nan]
        l1 = np.r_[np.fmax(ret[nxt].astype(np.float64), l0[:n] + LAUNCH_LATENCY_PS), np.nan]
        w = np.r_[np.asarray(waited, bool)[nxt], False]
        # A launch recorded after its activity started: the clocks disagree, nothing is known.
        known = ~np.isnan(l0) & (np.nan_to_num(l0) <= ge)
        if n and known[:n].any():  # nothing more is launched after the last activity
            known[n], l0[n], l1[n] = True, hi, hi
        a = np.where(known, np.clip(np.nan_to_num(l0), gb, ge), ge)
        c = np.where(known, np.clip(np.nan_to_num(l1), gb, ge), ge)
        before, latency, after = (np.where(known, gb, ge), a), (a, c), (c, ge)
        unknown = (np.where(known, ge, gb), ge)

        def free(x, seg=ce):  # idle in x outside the captures and edges (or `seg`)
            return float((x[1] - x[0]).sum() - seg.between(*x).sum())

        queued = (np.where(w, ge, after[0]), ge)
        waited_x = (np.where(w, after[0], ge), ge)
        in_host = free(before) - free(before, all_host)
        add = {
            IDLE_HOST: free(before, all_host),
            IDLE_SYNC: in_host,
            IDLE_LAUNCH: free(latency),
            IDLE_EVENT: free(waited_x),
            IDLE_EVENT_BLOCKED: free(waited_x) - free(waited_x, all_host),
            IDLE_WAIT_SYNC: free(queued) - free(queued, ces),
            IDLE_WAIT_COPY: free(queued, ces) - free(queued, all_host),
            IDLE_QUEUED: free(queued, all_host),
            IDLE_NO_LAUNCH: free(unknown),
        }
        for k, v in add.items():
            self._causes[k] = self._causes.get(k, 0.0) + max(0.0, v)

    def _add_pairs(self, lane, begin, end, op, fusible, shape):
        """Back-to-back pairs per (first op, second op, first call's shapes, second call's
        shapes): a pair of ops is only as fusible as the tensors its calls share."""
        if len(begin) < 2:
            return
        in_order = (lane[1:] > lane[:-1]) | ((lane[1:] == lane[:-1]) & (begin[1:] >= begin[:-1]))
        if not in_order.all():  # each lane's events usually come in order already
            order = np.lexsort((begin, lane))
            lane, begin, end, op, fusible, shape = (
                lane[order],
                begin[order],
                end[order],
                op[order],
                fusible[order],
                shape[order],
            )
        ok = lane[1:] == lane[:-1]
        ok &= begin[1:] >= end[:-1]
        ok &= fusible[1:]
        ok &= fusible[:-1]
        a = np.flatnonzero(ok)
        del ok
        if not len(a):
            return
        b = a + 1
        code = op[a].astype(np.int64) << 32 | op[b]
        # Summed per pair of ops here rather than kept per event until build(): the same sums
        # (exactly for whole-ps times, as XLA's are; to rounding for fractional Kineto times).
        if shape[a].any() or shape[b].any():
            codes = np.stack([code, shape[a] << 32 | shape[b]], axis=1)
            uniq, inv = unique_pairs(codes)
        else:  # no shapes (XLA: one instruction, one shape): the faster 1-D unique
            u1, inv = np.unique(code, return_inverse=True)
            uniq = np.stack([u1, np.zeros(len(u1), np.int64)], axis=1)
        del code
        inv = inv.reshape(-1)
        gap = np.bincount(inv, weights=begin[b] - end[a], minlength=len(uniq))
        shorter = np.bincount(
            inv, weights=np.minimum(end[a] - begin[a], end[b] - begin[b]), minlength=len(uniq)
        )
        count = np.bincount(inv, minlength=len(uniq)).astype(np.float64)
        self._pairs.append((uniq, count, gap, shorter))

    def build(self) -> Timeline | None:
        if not self._windows:
            return None
        labels = list(self._labels)
        windows = {c: np.concatenate([w[c] for w in self._windows]) for c in WINDOW_COLUMNS}
        pairs = []
        if self._pairs:
            code, count, gap, shorter = (
                np.concatenate([p[i] for p in self._pairs]) for i in range(4)
            )
            uniq, inv = unique_pairs(code)
            sums = [np.bincount(inv, weights=w, minlength=len(uniq)) for w in (count, gap, shorter)]
            top = np.argsort(-sums[2], kind="stable")[:MAX_PAIRS]
            shapes = list(self._shapes)
            pairs = [
                AdjacentPair(
                    labels[u >> 32],
                    labels[u & 0xFFFFFFFF],
                    int(c),
                    g,
                    sh,
                    shapes[s >> 32],
                    shapes[s & 0xFFFFFFFF],
                )
                for (u, s), c, g, sh in zip(
                    uniq[top].tolist(),
                    sums[0][top].tolist(),
                    sums[1][top].tolist(),
                    sums[2][top].tolist(),
                )
            ]
        exposed = sorted(self._exposed.items(), key=lambda kv: -kv[1])[:MAX_EXPOSED_OPS]
        return Timeline(
            windows,
            top_pairs(pairs),
            {labels[o]: v for o, v in exposed if v > 0},
            dict(self._causes),
            dict(self._cause_spans),
        )
