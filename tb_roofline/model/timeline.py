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

from tb_roofline.model.op_table import ASYNC_START, ASYNC_WAIT, HOST_TRANSFER, NO_STEP, \
    PEER_TRANSFER

OpLabel = tuple  # (program_id, operation, precision as read)

MAX_PAIRS = 256
MAX_EXPOSED_OPS = 32
WINDOW_COLUMNS = ("core", "step", "span_ps", "busy_ps", "compute_ps", "exposed_ps")

_COMM_WORDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective",
               "send", "recv", "communication", "nccl", "rccl", "infeed", "outfeed")
_TRANSFER_CAVEATS = frozenset({ASYNC_START, ASYNC_WAIT, HOST_TRANSFER, PEER_TRANSFER})
# Elementwise and data-movement categories (XLA's and the PyTorch reader's): fusion candidates.
FUSIBLE_CATEGORIES = frozenset({
    "loop fusion", "input fusion", "non-fusion elementwise", "data formatting", "copy",
    "transpose", "broadcast", "reduce", "elementwise", "reduction", "normalization", "memset",
    "copy fusion", "transpose fusion"})
COPY_CATEGORIES = frozenset({"data formatting", "copy", "transpose", "copy fusion",
                             "transpose fusion"})


def is_communication(category: str, caveat: str = "") -> bool:
    """Collectives, sends/receives, infeed/outfeed and host/peer transfers: time that moves data
    between devices or to the host, hidden only when compute runs at the same time."""
    if caveat in _TRANSFER_CAVEATS:
        return True
    low = category.lower()
    return any(w in low for w in _COMM_WORDS)


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


@dataclasses.dataclass
class Timeline:
    windows: dict  # WINDOW_COLUMNS -> arrays
    pairs: list
    exposed_by_op: dict  # OpLabel -> exposed ps

    @staticmethod
    def merge(parts: list["Timeline"]) -> "Timeline | None":
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
                    pairs[k] = AdjacentPair(q.first, q.second, q.count + pr.count,
                                            q.gap_ps + pr.gap_ps, q.shorter_ps + pr.shorter_ps)
                else:
                    pairs[k] = pr
        exposed: dict = {}
        for p in parts:
            for k, v in p.exposed_by_op.items():
                exposed[k] = exposed.get(k, 0.0) + v
        return Timeline(windows, _top_pairs(list(pairs.values())), exposed)


def _top_pairs(pairs: list) -> list:
    return sorted(pairs, key=lambda p: (-p.shorter_ps, -p.count))[:MAX_PAIRS]


def _union(begin: np.ndarray, end: np.ndarray):
    """Disjoint segments (starts, ends) covering the intervals, sorted."""
    keep = end > begin
    begin, end = begin[keep], end[keep]
    if not len(begin):
        return np.zeros(0), np.zeros(0)
    order = np.argsort(begin, kind="stable")
    b, e = begin[order].astype(np.float64), end[order].astype(np.float64)
    reach = np.maximum.accumulate(e)
    new = np.r_[True, b[1:] > reach[:-1]]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(b) - 1]
    return b[first], reach[last]


def _covered(starts: np.ndarray, ends: np.ndarray, t) -> np.ndarray:
    """The measure of the segments' union up to each time in `t`."""
    t = np.asarray(t, np.float64)
    if not len(starts):
        return np.zeros(t.shape)
    length = ends - starts
    cum = np.r_[0.0, np.cumsum(length)]
    i = np.searchsorted(starts, t, side="right")  # segments starting at or before t
    j = np.maximum(i - 1, 0)
    part = np.where(i > 0, np.clip(t - starts[j], 0.0, length[j]), 0.0)
    return cum[j] + part


class TimelineBuilder:
    """Collects one profile's per-core summaries; `label_id` interns op labels."""

    def __init__(self):
        self._labels: dict = {}
        self._windows: list = []
        self._pairs: list = []  # per core: (pair codes, counts, gaps, shorter times)
        self._exposed: dict = {}

    def label_id(self, label: OpLabel) -> int:
        idx = self._labels.get(label)
        if idx is None:
            idx = self._labels[label] = len(self._labels)
        return idx

    def add_core(self, core: int, span: tuple, steps: list, lane, begin, end, op, comm, fusible,
                 leaf=None):
        """One core's op events (arrays of equal length; `op` holds label ids; `leaf` False for
        containers, which count as busy but take no part in adjacency). `span` = (start, end)
        ps of the core; `steps` = [(step, start ps, duration ps)] on this core."""
        begin = np.asarray(begin, np.float64)
        end = np.maximum(np.asarray(end, np.float64), begin)
        comm = np.asarray(comm, bool)
        fusible = np.asarray(fusible, bool)
        op = np.asarray(op, np.int64)
        lane = np.asarray(lane, np.int64)
        leaf = np.ones(len(begin), bool) if leaf is None else np.asarray(leaf, bool)
        all_s, all_e = _union(begin, end)
        cmp_s, cmp_e = _union(begin[~comm], end[~comm])
        lo, hi = float(span[0]), float(span[1])
        steps = sorted(steps, key=lambda s: s[1])
        sb = np.array([s[1] for s in steps], np.float64)
        se = sb + np.array([s[2] for s in steps], np.float64)
        busy = _covered(all_s, all_e, se) - _covered(all_s, all_e, sb)
        compute = _covered(cmp_s, cmp_e, se) - _covered(cmp_s, cmp_e, sb)
        busy_all = float(_covered(all_s, all_e, hi) - _covered(all_s, all_e, lo))
        compute_all = float(_covered(cmp_s, cmp_e, hi) - _covered(cmp_s, cmp_e, lo))
        out_span = max(0.0, (hi - lo) - float((se - sb).sum()))
        out_busy = max(0.0, busy_all - float(busy.sum()))
        out_compute = min(out_busy, max(0.0, compute_all - float(compute.sum())))
        n = len(steps)
        self._windows.append({
            "core": np.full(n + 1, core, np.int64),
            "step": np.array([s[0] for s in steps] + [NO_STEP], np.int64),
            "span_ps": np.r_[se - sb, out_span], "busy_ps": np.r_[busy, out_busy],
            "compute_ps": np.r_[compute, out_compute],
            "exposed_ps": np.r_[busy - compute, out_busy - out_compute]})
        self._add_exposed(begin, end, op, comm, cmp_s, cmp_e)
        self._add_pairs(lane[leaf], begin[leaf], end[leaf], op[leaf], fusible[leaf])

    def _add_exposed(self, begin, end, op, comm, cmp_s, cmp_e):
        idx = np.flatnonzero(comm)
        if not len(idx):
            return
        hidden = _covered(cmp_s, cmp_e, end[idx]) - _covered(cmp_s, cmp_e, begin[idx])
        alone = np.maximum((end[idx] - begin[idx]) - hidden, 0.0)
        ops, inv = np.unique(op[idx], return_inverse=True)
        sums = np.bincount(inv.reshape(-1), weights=alone, minlength=len(ops))
        for o, v in zip(ops.tolist(), sums.tolist()):
            self._exposed[o] = self._exposed.get(o, 0.0) + v

    def _add_pairs(self, lane, begin, end, op, fusible):
        if len(begin) < 2:
            return
        order = np.lexsort((begin, lane))
        lane, begin, end, op, fusible = lane[order], begin[order], end[order], op[order], \
            fusible[order]
        ok = (lane[1:] == lane[:-1]) & (begin[1:] >= end[:-1]) & fusible[1:] & fusible[:-1]
        a = np.flatnonzero(ok)
        if not len(a):
            return
        b = a + 1
        self._pairs.append((op[a] << 32 | op[b], np.ones(len(a)), begin[b] - end[a],
                            np.minimum(end[a] - begin[a], end[b] - begin[b])))

    def build(self) -> Timeline | None:
        if not self._windows:
            return None
        labels = list(self._labels)
        windows = {c: np.concatenate([w[c] for w in self._windows]) for c in WINDOW_COLUMNS}
        pairs = []
        if self._pairs:
            code, count, gap, shorter = (np.concatenate([p[i] for p in self._pairs])
                                         for i in range(4))
            uniq, inv = np.unique(code, return_inverse=True)
            inv = inv.reshape(-1)
            sums = [np.bincount(inv, weights=w, minlength=len(uniq))
                    for w in (count, gap, shorter)]
            top = np.argsort(-sums[2], kind="stable")[:MAX_PAIRS]
            pairs = [AdjacentPair(labels[int(u) >> 32], labels[int(u) & 0xFFFFFFFF], int(c), g,
                                  sh) for u, c, g, sh in zip(uniq[top].tolist(),
                                                             sums[0][top].tolist(),
                                                             sums[1][top].tolist(),
                                                             sums[2][top].tolist())]
        exposed = sorted(self._exposed.items(), key=lambda kv: -kv[1])[:MAX_EXPOSED_OPS]
        return Timeline(windows, _top_pairs(pairs),
                        {labels[o]: v for o, v in exposed if v > 0})


def merge_shapes(parts: list) -> dict | None:
    """Op shapes of several profiles: uses of one label and shape text add up."""
    parts = [p for p in parts if p]
    if not parts:
        return None
    out: dict = {}
    for p in parts:
        for label, uses in p.items():
            mine = {u.text: u for u in out.get(label, [])}
            for u in uses:
                if u.text in mine:
                    m = mine[u.text]
                    mine[u.text] = ShapeUse(m.kind, m.dims, m.text, m.calls + u.calls,
                                            m.time_ps + u.time_ps)
                else:
                    mine[u.text] = u
            out[label] = list(mine.values())
    return out
