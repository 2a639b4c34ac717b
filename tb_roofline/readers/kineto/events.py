"""Stage 2 of the Kineto reader: events into compact columns (one pass, no event dicts kept),
then those columns as numpy arrays on one time base (`to_columns`).

Facts used (docs/pytorch_traces.md has the details):
- `cpu_op` events are aten ops; with `record_shapes` they carry `Input Dims`, `Input type` and
  `Concrete Inputs`, from which costs/torch/flops.py derives FLOPs and bytes (one cost per
  distinct (name, dims, types, values)).
- GPU activity (`kernel`, `gpu_memcpy`, `gpu_memset`) carries `correlation` (its launch on the
  CPU) and often `External id`; runtime events (`cuda_runtime`, ...) are the launches.
- `user_annotation` `ProfilerStep#N` spans mark steps; collective annotations their runs on
  the backend's thread; `cuda_profiler_range` events carry CUPTI counters.
- Times are µs with ns fractions: kept as exact integer ns (a double loses the ns of epoch
  times), then as float64 ns after the earliest event (exact below 2**53 ns).
"""

from __future__ import annotations

import array
import dataclasses
import hashlib
import re

import numpy as np

from tb_roofline.costs.hlo.fingerprint import grid_fingerprint, shapes_fingerprint
from tb_roofline.costs.torch import custom_ops as torch_custom_ops
from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.costs.torch import serving_ops
from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers import serving_steps
from tb_roofline.readers.common import kernel_unit_labels
from tb_roofline.readers.shape_facts import torch_shape
from tb_roofline.table.timeline import GRAPH_CAPTURE_CALLS, SYNC_CALLS

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
# The instant event Kineto writes where the profiler stopped recording: no step lasts past it.
RECORD_WINDOW_END = "Record Window End"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"})
# Runtime calls kept for the timeline's idle causes (graph capture begin/end, syncs).
HOST_CAUSE_CALLS = frozenset(GRAPH_CAPTURE_CALLS[0] + GRAPH_CAPTURE_CALLS[1]) | SYNC_CALLS
KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 0, 1, 2
# Longer names are cut (with a diagnostic): what a trace keeps per distinct name is bounded.
MAX_NAME_CHARS = 1024


class Collector:
    """The events of one trace as columns (array.array), names and costs interned."""

    def __init__(self):
        self.meta: dict = {}
        self.window_end: int | None = None  # ns, the "Record Window End" instant
        self.names: dict[str, int] = {}
        self.threads: dict = {}
        # cpu ops
        self.op_thread = array.array("q")
        self.op_ts = array.array("q")  # ns
        self.op_dur = array.array("q")  # ns
        self.op_name = array.array("q")
        self.op_ext = array.array("q")
        self.op_cost = array.array("q")
        self.costs: list = []
        self.cost_shapes: list = []  # per cost: shape_facts.torch_shape(...) or None
        self.cost_fingerprints: list[str] = []  # per cost id: the op's input shapes
        self._cost_index: dict = {}
        # gpu activity
        self.gpu_kind = array.array("b")
        self.gpu_ts = array.array("q")  # ns
        self.gpu_dur = array.array("q")  # ns
        self.gpu_dev = array.array("q")
        self.gpu_corr = array.array("q")
        self.gpu_ext = array.array("q")
        self.gpu_name = array.array("q")
        self.gpu_bytes = array.array("d")
        self.gpu_stream = array.array("q")
        self.gpu_grid = array.array("q")  # index into `grids`
        self.grids: dict[str, int] = {"": 0}
        # runtime (launch) events
        self.rt_corr = array.array("q")
        self.rt_ext = array.array("q")
        self.rt_thread = array.array("q")
        self.rt_ts = array.array("q")  # ns
        self.rt_dur = array.array("q")  # ns
        self.rt_launch = array.array("b")
        # host calls that explain device idle time: (name, thread, ts ns, dur ns) of graph
        # capture begin/end and device/stream/event syncs (table/timeline.py's lists)
        self.host_calls: list = []
        # steps (cpu time) and hardware ranges
        self.steps: list[tuple[int, int, int]] = []  # (step, ts ns, dur ns)
        self.comm_spans: list = []  # (thread, ts ns, dur ns, name) of collective annotations
        self.hw: list[tuple[str, dict]] = []
        # collectives' sizes: (thread, ts ns, dur ns, kind, in bytes, out bytes, ranks,
        # precision) from `record_param_comms` fields and `nccl:*` annotations
        self.comm_facts: list = []
        self.kernel_comm: dict = {}  # gpu event index -> the collective fact its args give
        self.cost_negative: list[bool] = []  # per cost id: its Input Dims had a negative dim
        # serving engines: step annotations (thread, ts ns, dur ns, serving_steps.StepFacts)
        # and the arguments of attention calls costed per step (cost id -> (name, args))
        self.serving: list = []
        self.notes: list = []  # Diagnostics found before the columns (graph capture)
        self.graph_launches: list = []  # (correlation, thread, ts ns, dur ns)
        self.attention_calls: dict = {}
        self.n_events = 0
        self.bad_events = 0
        self.long_names = 0  # names cut to MAX_NAME_CHARS

    def bounded(self, name: str) -> str:
        """A name cut to MAX_NAME_CHARS (counted): a trace of many distinct long names must
        not keep gigabytes of them."""
        if len(name) > MAX_NAME_CHARS:
            self.long_names += 1
            return name[:MAX_NAME_CHARS] + "…"
        return name

    def name_id(self, name: str) -> int:
        idx = self.names.get(name)
        if idx is None:
            idx = self.names[name] = len(self.names)
        return idx

    def thread_id(self, pid, tid) -> int:
        key = (pid, tid)
        idx = self.threads.get(key)
        if idx is None:
            idx = self.threads[key] = len(self.threads)
        return idx

    def cost_id(self, name, args) -> int:
        dims = args.get("Input Dims")
        inductor = name.startswith("triton_") and ("kernel_num_gb" in args or "kernel_flop" in args)
        if dims is None and not inductor:
            # no shapes recorded: the cost is unknown, the kind of op is not
            key = (name,)
            idx = self._cost_index.get(key)
            if idx is None:
                idx = self._cost_index[key] = len(self.costs)
                self.costs.append(
                    torch_flops.OpCost(torch_flops.category_of(name), 0.0, 0.0, "", "none")
                )
                self.cost_shapes.append(None)
                self.cost_fingerprints.append("")
                self.cost_negative.append(False)
            return idx
        types = args.get("Input type")
        concrete = args.get("Concrete Inputs")
        key = (name, _bounded_repr(dims), _bounded_repr(types), _bounded_repr(concrete)) + (
            (repr(args.get("kernel_flop")), repr(args.get("kernel_num_gb"))) if inductor else ()
        )
        idx = self._cost_index.get(key)
        if idx is None:
            negative = torch_flops.has_negative_dim(dims)
            cost = None
            if not negative:  # a negative dimension: a corrupt shape, no cost (said once)
                try:
                    cost = torch_custom_ops.op_cost(name, args)
                except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
                    cost = None
            if cost is None:
                precision = torch_flops.precision_of(types)
                cost = torch_flops.OpCost(
                    torch_flops.category_of(name), 0.0, 0.0, precision, "none"
                )
            if negative or cost.flops < 0 or cost.bytes < 0:
                cost = cost._replace(flops=0.0, bytes=0.0, source="none", comm=())
            cost = cost._replace(precision=torch_flops.precision_label(cost.precision))
            idx = self._cost_index[key] = len(self.costs)
            self.costs.append(cost)
            self.cost_shapes.append(None if negative else torch_shape(name, dims))
            self.cost_fingerprints.append(shapes_fingerprint(dims))
            self.cost_negative.append(negative)
            if not negative and cost.source == "none" and serving_ops.is_serving_attention(name):
                self.attention_calls[idx] = (name, args)
        return idx

    def on_events(self, batch):
        """Add one batch of events. Each event is read and checked whole before anything is
        appended, so a malformed event (counted in `bad_events`) leaves the columns aligned."""
        self.n_events += len(batch)
        for ev in batch:
            if type(ev) is not dict or ev.get("ph") != "X":
                if type(ev) is dict and ev.get("ph") == "i" and ev.get("name") == RECORD_WINDOW_END:
                    try:
                        self.window_end = _ts(ev.get("ts"))
                    except (_BadEvent, TypeError, ValueError, OverflowError):
                        self.bad_events += 1
                continue
            cat = ev.get("cat")
            if type(cat) is not str:
                continue
            try:
                if cat == "cpu_op":
                    self._cpu_op(ev)
                elif cat in RUNTIME_CATEGORIES:
                    self._runtime(ev)
                elif cat in GPU_CATEGORIES:
                    self._gpu(ev, GPU_CATEGORIES.index(cat))
                elif cat == "user_annotation":
                    name = ev.get("name")
                    if type(name) is not str:
                        raise _BadEvent
                    m = STEP_NAME.match(name)
                    if m:
                        step = int(m.group(1))
                        if step > _MAX_STEP:
                            raise _BadEvent
                        ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
                        self.steps.append((step, ts, dur))
                    elif name.startswith(("step[", "execute_")):
                        facts = serving_steps.parse(name)
                        if facts is not None:
                            ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
                            thread = self.thread_id(ev.get("pid"), ev.get("tid"))
                            self.serving.append((thread, ts, dur, facts))
                    elif torch_flops.COMMUNICATION.search(name) or name.startswith("gloo:"):
                        # A collective's run on its backend's thread (CPU timeline only).
                        ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
                        thread = self.thread_id(ev.get("pid"), ev.get("tid"))
                        fact = (
                            torch_custom_ops.annotation_fact(name, _args(ev))
                            if name.startswith("nccl:")
                            else None
                        )
                        self.comm_spans.append((thread, ts, dur, self.bounded(name)))
                        self._comm_fact(thread, ts, dur, fact)
                elif cat == "cuda_profiler_range":
                    name = ev.get("name", "")
                    if type(name) is not str:
                        raise _BadEvent
                    self.hw.append((self.bounded(name), _args(ev)))
            except (_BadEvent, TypeError, ValueError, OverflowError):
                # TypeError: an unhashable pid/tid; ValueError: a step number of thousands of
                # digits. Nothing was appended for this event: the columns stay aligned.
                self.bad_events += 1

    def _cpu_op(self, ev):
        args = _args(ev)
        name = ev.get("name")
        if type(name) is not str:
            raise _BadEvent
        ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
        ext = _int(args.get("External id"), -1)
        thread = self.thread_id(ev.get("pid"), ev.get("tid"))
        self.add_op(thread, ts, dur, name, args, ext)

    def add_op(self, thread: int, ts: int, dur: int, name: str, args: dict, ext: int):
        """One op call (times in ns): its name and cost interned, its columns appended."""
        name = self.bounded(name)
        name_i = self.name_id(name)
        cost = self.cost_id(name, args)
        if name == "record_param_comms" and "Collective name" in args:
            self._comm_fact(thread, ts, dur, torch_custom_ops.param_comms_fact(args))
        # All fields are valid: append them together.
        self.op_thread.append(thread)
        self.op_ts.append(ts)
        self.op_dur.append(dur)
        self.op_name.append(name_i)
        self.op_ext.append(ext)
        self.op_cost.append(cost)

    def _comm_fact(self, thread, ts, dur, fact):
        if fact is not None:
            self.comm_facts.append((thread, ts, dur) + fact)

    def _runtime(self, ev):
        args = _args(ev)
        name = ev.get("name", "")
        if type(name) is not str:
            raise _BadEvent
        if name in HOST_CAUSE_CALLS:  # kept whether or not it has a correlation id
            ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
            self.host_calls.append((name, self.thread_id(ev.get("pid"), ev.get("tid")), ts, dur))
        corr = _int(args.get("correlation"), -1)
        if corr < 0:
            return
        ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
        ext = _int(args.get("External id"), -1)
        thread = self.thread_id(ev.get("pid"), ev.get("tid"))
        if "GraphLaunch" in name:  # its kernels replay a captured graph (kineto/capture.py)
            self.graph_launches.append((corr, thread, ts, dur))
        self.rt_corr.append(corr)
        self.rt_ext.append(ext)
        self.rt_thread.append(thread)
        self.rt_ts.append(ts)
        self.rt_dur.append(dur)
        self.rt_launch.append("Launch" in name)

    def _gpu(self, ev, kind):
        args = _args(ev)
        name = ev.get("name", "")
        if type(name) is not str:
            raise _BadEvent
        ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
        dev = args.get("device")
        dev = 0 if dev is None else _int(dev, None)
        if dev is None or not -_MAX_DEVICE < dev < _MAX_DEVICE:
            raise _BadEvent
        nbytes = args.get("bytes")
        nbytes = 0.0 if nbytes is None else _finite(nbytes, 1e18)
        if nbytes < 0:
            raise _BadEvent
        corr = _int(args.get("correlation"), -1)
        ext = _int(args.get("External id"), -1)
        name_i = self.name_id(self.bounded(name))
        grid = grid_fingerprint(args.get("grid")) if kind == KIND_KERNEL else ""
        grid_i = self.grids.setdefault(grid, len(self.grids))
        if kind == KIND_KERNEL and "Collective name" in args:  # newer traces: NCCL kernels
            fact = torch_custom_ops.param_comms_fact(args)
            if fact is not None:
                self.kernel_comm[len(self.gpu_kind)] = fact
        self.gpu_kind.append(kind)
        self.gpu_ts.append(ts)
        self.gpu_dur.append(dur)
        self.gpu_dev.append(dev)
        self.gpu_corr.append(corr)
        self.gpu_ext.append(ext)
        self.gpu_name.append(name_i)
        self.gpu_bytes.append(nbytes)
        self.gpu_stream.append(_int(args.get("stream"), -1))
        self.gpu_grid.append(grid_i)


class _BadEvent(Exception):
    """An event with a missing or malformed field."""


# Limits on event fields: beyond these a value is corrupt (and would overflow int64 ps).
_MAX_TS_NS = 2**62  # ~2116 in epoch ns
_MAX_DUR_NS = 10**15  # ~11.6 days
_MAX_SPAN_NS = 2**52  # ~52 days: exact in float64 ns, and int64 in ps
_MAX_STEP = 2**62
_MAX_DEVICE = 2**31


class _Exact(float):
    """A JSON number with more digits than a double keeps (epoch µs with ns fractions); its
    text gives the exact value (docs/pytorch_traces.md, "Timestamps and type names")."""


def parse_float(text: str, _float=float):
    if len(text) < 16:
        return _float(text)
    value = _Exact(text)
    value.text = text
    return value


def _finite(value, limit: float) -> float:
    """A JSON number (not a bool) as a float with |value| < limit, else _BadEvent."""
    t = type(value)
    if t is float or t is _Exact:
        if -limit < value < limit:  # False for NaN and ±inf
            return float(value)
    elif t is int and -limit < value < limit:
        return float(value)
    raise _BadEvent


def _ns(value, limit: int) -> int:
    """A time in µs (JSON int or number, maybe with a ns fraction) as exact integer ns."""
    t = type(value)
    if t is int:
        ns = value * 1000
    elif t is _Exact:
        ns = _exact_ns(value.text)
    elif t is float:
        if value != value:
            raise _BadEvent
        ns = round(value * 1000) if -1e18 < value < 1e18 else limit
    else:
        raise _BadEvent
    if not -limit < ns < limit:
        raise _BadEvent
    return ns


def _exact_ns(text: str) -> int:
    """'1712181098123456.789' (µs) -> 1712181098123456789 (ns), digits beyond ns dropped."""
    if "e" in text or "E" in text:
        return round(float(text) * 1000)
    whole, _, frac = text.partition(".")
    neg = whole.startswith("-")
    ns = abs(int(whole or "0")) * 1000 + int((frac + "000")[:3])
    return -ns if neg else ns


def _ts(value) -> int:
    return _ns(value, _MAX_TS_NS)


def _dur(value) -> int:
    return _ns(value, _MAX_DUR_NS)


def _args(ev) -> dict:
    args = ev.get("args")
    if args is None:
        return {}
    if type(args) is not dict:
        raise _BadEvent
    return args


def _int(value, default):
    """An integer JSON value (int, or integral float) that fits in int64, else default."""
    if isinstance(value, bool):
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    return default


def _bounded_repr(value, limit: int = 1024) -> str:
    """repr(value) for a cache key, a digest when it is long (distinct stays distinct)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return "#" + hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()


@dataclasses.dataclass
class Columns:
    """The collected events as numpy arrays; times in float64 ns after `base_ns` (the earliest
    event), durations clipped at 0. Costs are indexed by cost id; an op without one points at
    the extra last entry (unknown cost)."""

    names: np.ndarray  # name id -> name
    base_ns: int
    op_thread: np.ndarray
    op_ts: np.ndarray
    op_dur: np.ndarray
    op_name: np.ndarray
    op_ext: np.ndarray
    op_cost: np.ndarray
    gpu_kind: np.ndarray
    gpu_ts: np.ndarray
    gpu_dur: np.ndarray
    gpu_dev: np.ndarray
    gpu_corr: np.ndarray
    gpu_ext: np.ndarray
    gpu_name: np.ndarray
    gpu_bytes: np.ndarray
    gpu_stream: np.ndarray
    gpu_fp: np.ndarray  # per activity: its launch-grid fingerprint
    rt_corr: np.ndarray
    rt_ext: np.ndarray
    rt_thread: np.ndarray
    rt_ts: np.ndarray
    rt_dur: np.ndarray
    rt_launch: np.ndarray
    step_ids: np.ndarray  # as recorded (not sorted)
    step_ts: np.ndarray  # relative ns
    step_dur: np.ndarray
    costs: list  # torch_flops.OpCost per cost id, plus the unknown one
    cost_flops: np.ndarray
    cost_bytes: np.ndarray
    cost_fp: np.ndarray
    op_has_formula: np.ndarray
    name_units: np.ndarray  # per name: the unit a GEMM-like kernel name says ran, else ""
    op_ic: np.ndarray = None  # per op: bytes over the GPU links (collectives; comms stage)
    world: int = 0  # ranks of the run (distributedInfo.world_size; 0: not said)
    steps_clipped: int = 0  # step markers cut at the record window's end
    steps_dropped: int = 0  # step markers starting after it

    @property
    def n_ops(self) -> int:
        return len(self.op_ts)


def _int64(a) -> np.ndarray:
    return np.frombuffer(a, np.int64) if len(a) else np.zeros(0, np.int64)


def _steps_in_window(col: Collector):
    """(ids, starts ns, durations ns, how many were clipped, how many dropped) of the step
    markers within the trace's record window: a step running past the "Record Window End"
    instant ends there (the profiler recorded nothing later), one starting after it is
    dropped."""
    ids = np.array([s[0] for s in col.steps], np.int64)
    ts = np.array([s[1] for s in col.steps], np.int64)
    dur = np.maximum(np.array([s[2] for s in col.steps], np.int64), 0)
    end = col.window_end
    if end is None or not len(ts):
        return ids, ts, dur, 0, 0
    keep = ts < end
    over = keep & (ts + dur > end)
    dur = np.where(over, end - ts, dur)
    return ids[keep], ts[keep], dur[keep], int(over.sum()), int((~keep).sum())


def to_columns(col: Collector) -> Columns:
    """The collector's columns as numpy arrays on one time base (ProfileFormatError when the
    times span more than a trace can: a corrupt 'ts' or 'dur')."""
    names = np.empty(len(col.names), dtype=object)
    names[:] = list(col.names)
    ts_ns = {
        k: _int64(getattr(col, k))
        for k in ("op_ts", "op_dur", "gpu_ts", "gpu_dur", "rt_ts", "rt_dur")
    }
    step_ids, step_ts, step_dur, clipped, dropped = _steps_in_window(col)
    starts = [
        int(a.min()) for a in (ts_ns["op_ts"], ts_ns["gpu_ts"], ts_ns["rt_ts"], step_ts) if len(a)
    ]
    base_ns = min(starts) if starts else 0
    ends = [
        int((ts_ns[t] + np.maximum(ts_ns[d], 0)).max())
        for t, d in (("op_ts", "op_dur"), ("gpu_ts", "gpu_dur"), ("rt_ts", "rt_dur"))
        if len(ts_ns[t])
    ]
    ends += [int((step_ts + step_dur).max())] if len(step_ts) else []
    if ends and max(ends) - base_ns > _MAX_SPAN_NS:
        raise ProfileFormatError(
            f"event times span {(max(ends) - base_ns) / 86400e9:.3g} days, more than the "
            f"{_MAX_SPAN_NS / 86400e9:.0f} days a trace can cover: a 'ts' or 'dur' is corrupt"
        )

    def rel(key):
        return (ts_ns[key] - base_ns).astype(np.float64)

    def dur(key):
        return np.maximum(ts_ns[key], 0).astype(np.float64)

    n_costs = len(col.costs)
    costs = col.costs + [torch_flops.OpCost("other", 0.0, 0.0, "", "none")]
    op_cost = np.asarray(col.op_cost, np.int64)
    op_cost = np.where(op_cost < 0, n_costs, op_cost)  # the extra last entry
    cost_formula = np.array([c.source in ("formula", "bytes") for c in col.costs] + [False])
    grids = np.empty(len(col.grids), dtype=object)
    grids[:] = list(col.grids)
    return Columns(
        names=names,
        base_ns=base_ns,
        op_thread=_int64(col.op_thread),
        op_ts=rel("op_ts"),
        op_dur=dur("op_dur"),
        op_name=np.asarray(col.op_name, np.int64),
        op_ext=np.asarray(col.op_ext, np.int64),
        op_cost=op_cost,
        gpu_kind=np.asarray(col.gpu_kind, np.int64),
        gpu_ts=rel("gpu_ts"),
        gpu_dur=dur("gpu_dur"),
        gpu_dev=np.asarray(col.gpu_dev, np.int64),
        gpu_corr=np.asarray(col.gpu_corr, np.int64),
        gpu_ext=np.asarray(col.gpu_ext, np.int64),
        gpu_name=np.asarray(col.gpu_name, np.int64),
        gpu_bytes=np.asarray(col.gpu_bytes, np.float64),
        gpu_stream=np.asarray(col.gpu_stream, np.int64),
        gpu_fp=grids[np.asarray(col.gpu_grid, np.int64)],
        rt_corr=np.asarray(col.rt_corr, np.int64),
        rt_ext=np.asarray(col.rt_ext, np.int64),
        rt_thread=np.asarray(col.rt_thread, np.int64),
        rt_ts=rel("rt_ts"),
        rt_dur=dur("rt_dur"),
        rt_launch=np.asarray(col.rt_launch, bool),
        step_ids=step_ids,
        steps_clipped=clipped,
        steps_dropped=dropped,
        step_ts=(step_ts - base_ns).astype(np.float64),
        step_dur=step_dur.astype(np.float64),
        costs=costs,
        cost_flops=np.array([c.flops for c in col.costs] + [0.0]),
        cost_bytes=np.array([c.bytes for c in col.costs] + [0.0]),
        cost_fp=np.array(col.cost_fingerprints + [""], dtype=object),
        op_has_formula=cost_formula[op_cost],
        name_units=kernel_unit_labels(names)
        if len(col.gpu_ts)
        else np.full(len(names), "", dtype=object),
    )
