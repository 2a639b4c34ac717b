"""Timeline facts: what sums per op cannot say, summarised per profile by the readers.

An op table says how long each op ran in total; it does not say when the device sat idle,
whether a collective ran alone or under compute, or which ops ran back to back on a stream.
Readers hand their op events (begin, end, lane, op label) to a `TimelineBuilder`
(table/timeline_builder.py) one core at a time; it keeps only small summaries
(docs/guidance.md, "Timeline facts"):

- `windows`: per (core, step) — and per core for the time outside steps — the span, the time
  any op ran (`busy`), the communication / host-transfer time no work ran beside (`exposed`:
  work is every other op but a loop container that encloses ops, whose time is its children's)
  and the rest of the busy time (`compute = busy - exposed`);
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
    PEER_TRANSFER,
    ROW_BLOCK,
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
    # The tensors each op's calls in these pairs recorded (PyTorch's `Input Dims` as data, the
    # op table's `input_dims`); None where the reader has none (XLA: one instruction has one
    # shape).
    first_dims: tuple | None = None
    second_dims: tuple | None = None


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


# Why a device sat idle (Timeline.idle_causes, in ps): spans the reader saw on the host (a graph
# capture: launches are recorded, not run; a device sync or blocking copy), and the profile's
# own start and end (before the first op and after the last one of a core).
IDLE_CAPTURE, IDLE_SYNC, IDLE_EDGES = "graph_capture", "sync", "profile_edges"
IDLE_CAUSES = (IDLE_CAPTURE, IDLE_EDGES, IDLE_SYNC)
# Host spans of blocking copies (cudaMemcpy, hipMemcpyWithStream...): a cause like a sync.
IDLE_COPY = "blocking_copy"
# Where the reader knows when the activity after each idle gap was launched (`launch` of
# TimelineBuilder.add_core), the gap splits by that launch (docs/guidance.md, "Idle time"):
# before it the host had not launched the work (host-bound, or `sync` when the host sat in a
# sync or blocking copy); from it, the launch's own latency; after that the work was queued and
# the device waited: on an event the stream was told to wait for, while the host blocked in a
# sync or a copy, or on nothing the trace shows. Without a launch for the next activity the
# cause is undetermined.
IDLE_HOST = "host_bound"
IDLE_LAUNCH = "launch_latency"
IDLE_EVENT = "event_wait"
IDLE_WAIT_SYNC = "sync_wait"
IDLE_WAIT_COPY = "memcpy_wait"
IDLE_QUEUED = "queued"
IDLE_NO_LAUNCH = "no_launch"
# Part of the event wait while the host sat in a sync or blocking copy (not a cause of its own).
IDLE_EVENT_BLOCKED = "event_wait_host_blocked"
LAUNCH_CAUSES = (
    IDLE_HOST,
    IDLE_LAUNCH,
    IDLE_EVENT,
    IDLE_WAIT_SYNC,
    IDLE_WAIT_COPY,
    IDLE_QUEUED,
    IDLE_NO_LAUNCH,
)
# A launch reaches an idle GPU 10-30 µs after the call starts in the project's traces
# (testdata/kineto/b200_eager: median 10 µs, 99th percentile 31 µs, over 711 gaps): a kernel
# starting later than this after its launch call (or after the call returned, if that is
# later) waited for something else.
LAUNCH_LATENCY_PS = 50e6


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
                k = (pr.first, pr.second, pr.first_dims, pr.second_dims)
                if k in pairs:
                    q = pairs[k]
                    pairs[k] = dataclasses.replace(
                        q,
                        count=q.count + pr.count,
                        gap_ps=q.gap_ps + pr.gap_ps,
                        shorter_ps=q.shorter_ps + pr.shorter_ps,
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
        return Timeline(windows, top_pairs(list(pairs.values())), exposed, causes, spans)


def top_pairs(pairs: list) -> list:
    return sorted(pairs, key=lambda p: (-p.shorter_ps, -p.count))[:MAX_PAIRS]


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
# Runtime calls that return only when a copy is done (the host blocks), and those that make a
# stream wait for an event recorded on another one (the stream they target is not recorded).
BLOCKING_COPY_CALLS = frozenset(
    {
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpyToSymbol",
        "cudaMemcpyFromSymbol",
        "cuMemcpyDtoH_v2",
        "cuMemcpyHtoD_v2",
        "cuMemcpy",
        "hipMemcpy",
        "hipMemcpyWithStream",
        "hipMemcpy2D",
        "hipMemcpyDtoH",
        "hipMemcpyHtoD",
        "hipMemcpyToSymbol",
        "hipMemcpyFromSymbol",
    }
)
WAIT_CALLS = frozenset({"cudaStreamWaitEvent", "hipStreamWaitEvent", "cuStreamWaitEvent"})


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
    occ, time = np.zeros(n), np.zeros(n)
    # A block of rows at a time, added in row order as one bincount would (the same sums, bit
    # for bit), without its whole-column float64 and index copies (94 MB for 5.8 million rows)
    for lo in range(0, len(op), ROW_BLOCK):
        part = op[lo : lo + ROW_BLOCK]
        # (as float64, what bincount adds: numpy's fast np.add.at wants the total's type)
        np.add.at(occ, part, np.asarray(occurrences[lo : lo + ROW_BLOCK], np.float64))
        np.add.at(time, part, np.asarray(time_ps[lo : lo + ROW_BLOCK], np.float64))
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
