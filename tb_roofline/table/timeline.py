"""Timeline facts: what sums per op cannot say, summarised per profile by the readers.

An op table says how long each op ran in total; it does not say when the device sat idle,
whether a collective ran alone or under compute, or which ops ran back to back on a stream.
Readers hand their op events (begin, end, lane, op label) to a `TimelineBuilder` one core at a
time; it keeps only small summaries (docs/guidance.md, "Timeline facts"):

- `windows`: per (core, step) — and per core for the time outside steps — the span, the time
  any op ran (`busy`), the time a non-communication op ran (`compute`) and the communication /
  host-transfer time not hidden under compute (`exposed = busy - compute`);
- `pairs`: ops that ran back to back on one lane (stream, op line, thread), both elementwise or
  data movement: how often, the gaps, and the shorter op's time in those pairs;
- `exposed_by_op`: exposed time per communication / transfer op (the largest few).

Ops are named by `OpLabel` = (program id, operation, precision as the reader gave it to the op
table), which the model maps to its records. Everything is computed with numpy per core.
`op_shapes` (`ShapeUse` per label) carries the GEMM dimensions of matmuls / convolutions and the
shapes of copies, which the op table does not keep either.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.table.op_table import (
    ASYNC_START,
    ASYNC_WAIT,
    HOST_TRANSFER,
    NO_STEP,
    PEER_TRANSFER,
)

OpLabel = tuple  # (program_id, operation, precision as read)

MAX_PAIRS = 256
MAX_EXPOSED_OPS = 32
WINDOW_COLUMNS = ("core", "step", "span_ps", "busy_ps", "compute_ps", "exposed_ps")

_COMM_WORDS = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective",
    "send",
    "recv",
    "communication",
    "nccl",
    "rccl",
    "infeed",
    "outfeed",
)
_TRANSFER_CAVEATS = frozenset({ASYNC_START, ASYNC_WAIT, HOST_TRANSFER, PEER_TRANSFER})
# Elementwise and data-movement categories (XLA's and the PyTorch reader's): fusion candidates.
FUSIBLE_CATEGORIES = frozenset(
    {
        "loop fusion",
        "input fusion",
        "non-fusion elementwise",
        "data formatting",
        "copy",
        "transpose",
        "broadcast",
        "reduce",
        "elementwise",
        "reduction",
        "normalization",
        "memset",
        "copy fusion",
        "transpose fusion",
    }
)
COPY_CATEGORIES = frozenset(
    {"data formatting", "copy", "transpose", "copy fusion", "transpose fusion"}
)


def is_communication(category: str, caveat: str = "") -> bool:
    """Collectives, sends/receives, infeed/outfeed and host/peer transfers: time that moves data
    between devices or to the host, hidden only when compute runs at the same time."""
    if caveat in _TRANSFER_CAVEATS:
        return True
    low = category.lower()
    return any(w in low for w in _COMM_WORDS)


_COLLECTIVE_WORDS = tuple(w for w in _COMM_WORDS if w not in ("infeed", "outfeed"))


def is_collective(category: str) -> bool:
    """Collectives and sends/receives between devices (not host transfers): communication,
    judged under the interconnect roof only."""
    low = category.lower()
    return any(w in low for w in _COLLECTIVE_WORDS)


def is_fusible(category: str) -> bool:
    return category.lower() in FUSIBLE_CATEGORIES


@dataclasses.dataclass
class AdjacentPair:
    first: OpLabel
    second: OpLabel
    count: int  # times `second` started right after `first` ended on the same lane
    gap_ps: float  # summed gaps between them
    shorter_ps: float  # summed time of the shorter op of each pair


@dataclasses.dataclass
class ShapeUse:
    """How an op ran with one shape: `kind` "gemm" (dims = M, N, K; for a convolution N is the
    output channels and K the input channels per group), "array" (dims of each array the op
    reads or writes, TPU: checked against the (8, 128) tile) or "copy" (dims = the copied
    array)."""

    kind: str
    dims: tuple
    text: str
    calls: int
    time_ps: float


# The kernels an op launched, most time first (readers cut each op's list to this many).
MAX_KERNELS_PER_OP = 20


@dataclasses.dataclass
class KernelUse:
    """One kernel an op launched: its name, launches and total time (ps) over the profile."""

    name: str
    launches: int
    time_ps: float


# Why a device sat idle, besides the host not feeding it (Timeline.idle_causes, in ps): spans the
# reader saw on the host (a graph capture: launches are recorded, not run; a device sync), and
# the profile's own start and end (before the first op and after the last one of a core).
IDLE_CAPTURE, IDLE_SYNC, IDLE_EDGES = "graph_capture", "sync", "profile_edges"
IDLE_CAUSES = (IDLE_CAPTURE, IDLE_SYNC, IDLE_EDGES)


@dataclasses.dataclass
class Timeline:
    windows: dict  # WINDOW_COLUMNS -> arrays
    pairs: list
    exposed_by_op: dict  # OpLabel -> exposed ps
    # Idle time (ps, summed over cores) inside the host spans of each cause, and at the
    # profile's edges; each idle instant counts once, in IDLE_CAUSES order.
    idle_causes: dict = dataclasses.field(default_factory=dict)
    # Host spans the reader saw, summed (ps): graph captures and syncs, whatever the device did.
    cause_span_ps: dict = dataclasses.field(default_factory=dict)

    @staticmethod
    def merge(parts: list[Timeline]) -> Timeline | None:
        parts = [p for p in parts if p is not None]
        if not parts:
            return None
        windows = {c: np.concatenate([p.windows[c] for p in parts]) for c in WINDOW_COLUMNS}
        pairs: dict = {}
        for p in parts:
            for pr in p.pairs:
                k = (pr.first, pr.second)
                if k in pairs:
                    q = pairs[k]
                    pairs[k] = AdjacentPair(
                        q.first,
                        q.second,
                        q.count + pr.count,
                        q.gap_ps + pr.gap_ps,
                        q.shorter_ps + pr.shorter_ps,
                    )
                else:
                    pairs[k] = pr
        exposed: dict = {}
        causes: dict = {}
        spans: dict = {}
        for p in parts:
            for k, v in p.exposed_by_op.items():
                exposed[k] = exposed.get(k, 0.0) + v
            for k, v in p.idle_causes.items():
                causes[k] = causes.get(k, 0.0) + v
            for k, v in p.cause_span_ps.items():
                spans[k] = spans.get(k, 0.0) + v
        return Timeline(windows, _top_pairs(list(pairs.values())), exposed, causes, spans)


def _top_pairs(pairs: list) -> list:
    return sorted(pairs, key=lambda p: (-p.shorter_ps, -p.count))[:MAX_PAIRS]


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


class TimelineBuilder:
    """Collects one profile's per-core summaries; `label_id` interns op labels."""

    def __init__(self):
        self._labels: dict = {}
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
    ):
        """One core's op events (arrays of equal length; `op` holds label ids; `leaf` False for
        containers, which count as busy but take no part in adjacency). `span` = (start, end)
        ps of the core; `steps` = [(step, start ps, duration ps)] on this core. `causes`:
        {IDLE_CAPTURE or IDLE_SYNC: (begin ps array, end ps array)} host spans that explain
        idle time on this core (graph_capture_spans, sync_spans).

        Memory: float64 `begin`/`end` and integer `op`/`lane` of any width are used as given
        (no copies); one set of segments at a time is held (busy, then compute)."""
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
        self._add_idle_causes(lo, hi, begin, end, busy_segments, causes or {}, sb, se)
        has_comm = bool(comm.any())
        if has_comm:
            del busy_segments
            keep = ~comm
            compute_segments = _Segments(begin[keep], end[keep])
            del keep
        else:
            compute_segments = busy_segments
        compute = compute_segments.between(sb, se)
        compute_all = float(compute_segments.between(lo, hi))
        out_span = max(0.0, (hi - lo) - float((se - sb).sum()))
        out_busy = max(0.0, busy_all - float(busy.sum()))
        out_compute = min(out_busy, max(0.0, compute_all - float(compute.sum())))
        n = len(steps)
        self._windows.append(
            {
                "core": np.full(n + 1, core, np.int64),
                "step": np.array([s[0] for s in steps] + [NO_STEP], np.int64),
                "span_ps": np.r_[se - sb, out_span],
                "busy_ps": np.r_[busy, out_busy],
                "compute_ps": np.r_[compute, out_compute],
                "exposed_ps": np.r_[busy - compute, out_busy - out_compute],
            }
        )
        if has_comm:
            self._add_exposed(begin, end, op, comm, compute_segments)
        del compute_segments
        if leaf is not None and not np.all(leaf):
            leaf = np.asarray(leaf, bool)
            lane, begin, end, op, fusible = (
                lane[leaf],
                begin[leaf],
                end[leaf],
                op[leaf],
                fusible[leaf],
            )
        self._add_pairs(lane, begin, end, op, fusible)

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

    def _add_idle_causes(self, lo, hi, begin, end, busy, causes, step_b, step_e):
        """Idle time of the core inside each cause's spans, in IDLE_CAUSES order (an idle
        instant counts for the first cause that covers it): measure(union of the spans so far)
        less the busy time in it, less what the earlier causes took. The profile's edges are
        the time before the core's first op and after its last one, outside any step (idle in
        a step is the step's)."""
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
        spans = {IDLE_EDGES: (edges_b, edges_e)}
        for k in (IDLE_CAPTURE, IDLE_SYNC):
            if k in causes:
                b = np.clip(np.asarray(causes[k][0], np.float64), lo, hi)
                e = np.clip(np.asarray(causes[k][1], np.float64), lo, hi)
                spans[k] = (b, e)
                seg = _Segments(b, e)
                self._cause_spans[k] = self._cause_spans.get(k, 0.0) + seg.total()
        acc_b, acc_e = np.zeros(0), np.zeros(0)
        taken = 0.0
        for k in IDLE_CAUSES:
            if k not in spans:
                continue
            acc_b, acc_e = np.r_[acc_b, spans[k][0]], np.r_[acc_e, spans[k][1]]
            seg = _Segments(acc_b, acc_e)
            idle = seg.total() - float(busy.between(seg.starts, seg.ends).sum())
            self._causes[k] = self._causes.get(k, 0.0) + max(0.0, idle - taken)
            taken = max(taken, idle)

    def _add_pairs(self, lane, begin, end, op, fusible):
        if len(begin) < 2:
            return
        in_order = (lane[1:] > lane[:-1]) | ((lane[1:] == lane[:-1]) & (begin[1:] >= begin[:-1]))
        if not in_order.all():  # each lane's events usually come in order already
            order = np.lexsort((begin, lane))
            lane, begin, end, op, fusible = (
                lane[order],
                begin[order],
                end[order],
                op[order],
                fusible[order],
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
        uniq, inv = np.unique(code, return_inverse=True)
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
            uniq, inv = np.unique(code, return_inverse=True)
            inv = inv.reshape(-1)
            sums = [np.bincount(inv, weights=w, minlength=len(uniq)) for w in (count, gap, shorter)]
            top = np.argsort(-sums[2], kind="stable")[:MAX_PAIRS]
            pairs = [
                AdjacentPair(labels[int(u) >> 32], labels[int(u) & 0xFFFFFFFF], int(c), g, sh)
                for u, c, g, sh in zip(
                    uniq[top].tolist(),
                    sums[0][top].tolist(),
                    sums[1][top].tolist(),
                    sums[2][top].tolist(),
                )
            ]
        exposed = sorted(self._exposed.items(), key=lambda kv: -kv[1])[:MAX_EXPOSED_OPS]
        return Timeline(
            windows,
            _top_pairs(pairs),
            {labels[o]: v for o, v in exposed if v > 0},
            dict(self._causes),
            dict(self._cause_spans),
        )


def paired_spans(names, begin, end, thread, opens: tuple, closes: tuple):
    """(begin, end) arrays of host spans that open with a call named in `opens` and close with
    the next call named in `closes` on the same thread: cudaStreamBeginCapture /
    hipStreamBeginCapture .. EndCapture (GRAPH_CAPTURE_CALLS). Unclosed spans run to the last
    call's end; a thread's first close without an open (the capture began before the trace
    did: a trace inside one capture) runs from the first call's start."""
    names = np.asarray(names, dtype=object)
    begin = np.asarray(begin, np.float64)
    end = np.asarray(end, np.float64)
    thread = np.asarray(thread)
    is_open = np.isin(names, list(opens))
    is_close = np.isin(names, list(closes))
    idx = np.flatnonzero(is_open | is_close)
    out_b, out_e = [], []
    last = float(end.max()) if len(end) else 0.0
    first = float(begin.min()) if len(begin) else 0.0
    for t in np.unique(thread[idx]).tolist() if len(idx) else []:
        mine = idx[thread[idx] == t]
        mine = mine[np.argsort(begin[mine], kind="stable")]
        start = None
        seen = False
        for i in mine.tolist():
            if is_open[i] and start is None:
                start = begin[i]
            elif is_close[i] and (start is not None or not seen):
                out_b.append(first if start is None else start)
                out_e.append(end[i])
                start = None
            seen = True
        if start is not None:
            out_b.append(start)
            out_e.append(last)
    return np.array(out_b, np.float64), np.array(out_e, np.float64)


GRAPH_CAPTURE_CALLS = (
    ("cudaStreamBeginCapture", "hipStreamBeginCapture"),
    ("cudaStreamEndCapture", "hipStreamEndCapture"),
)
SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
    }
)


def add_shape_use(shapes: dict, label: OpLabel, shape: tuple, calls, time_ps):
    """Count `calls` and `time_ps` to `label`'s use of `shape` (kind, dims, text)."""
    kind, dims, text = shape
    uses = shapes.setdefault(label, [])
    for i, u in enumerate(uses):
        if u.text == text:
            uses[i] = ShapeUse(kind, dims, text, u.calls + int(calls), u.time_ps + float(time_ps))
            return
    uses.append(ShapeUse(kind, dims, text, int(calls), float(time_ps)))


def add_key_shapes(shapes: dict, label_of, shape_of: list, op, occurrences, time_ps):
    """Calls and time per (op label, shape) from rows of keyed ops: `shape_of[k]` is key k's
    shape (None: none known), `label_of(k)` its label; one step per key, not per row."""
    n = len(shape_of)
    has = np.fromiter((x is not None for x in shape_of), bool, n)
    if not has.any() or not len(op):
        return
    occ = np.bincount(op, weights=occurrences, minlength=n)
    time = np.bincount(op, weights=time_ps, minlength=n)
    for k in np.flatnonzero(has & (occ > 0)).tolist():
        add_shape_use(shapes, label_of(k), shape_of[k], occ[k], time[k])


def merge_shapes(parts: list) -> dict | None:
    """Op shapes of several profiles: uses of one label and shape text add up."""
    parts = [p for p in parts if p]
    if not parts:
        return None
    out: dict = {}
    for p in parts:
        for label, uses in p.items():
            for u in uses:
                add_shape_use(out, label, (u.kind, u.dims, u.text), u.calls, u.time_ps)
    return out
