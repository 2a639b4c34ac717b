"""Stage 2 of the Kineto reader: events into compact columns (one pass, no event dicts kept);
`columns.py` turns them into numpy arrays on one time base, `event_fields.py` checks each field.

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
import re

from tb_roofline.costs.hlo.fingerprint import grid_fingerprint, input_dims, shapes_fingerprint
from tb_roofline.costs.torch import custom_ops as torch_custom_ops
from tb_roofline.costs.torch import engine_labels, serving_ops
from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.readers import serving_steps
from tb_roofline.readers.kineto import fast_json, pm_samples
from tb_roofline.readers.kineto.event_fields import (
    MAX_DEVICE,
    MAX_STEP,
    BadEvent,
    args_dict,
    bounded_repr,
    dur_ns,
    event_args,
    finite,
    int_or,
    ts_ns,
)
from tb_roofline.readers.shape_facts import torch_shape
from tb_roofline.table.timeline import (
    BLOCKING_COPY_CALLS,
    GRAPH_CAPTURE_CALLS,
    SYNC_CALLS,
    WAIT_CALLS,
)

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
# The instant event Kineto writes where the profiler stopped recording: no step lasts past it.
RECORD_WINDOW_END = "Record Window End"
# the args an engine label's op carries: a key no trace writes, so only labels are costed so
ENGINE_LABEL = "tb_roofline engine label"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"})
# Runtime calls kept for the timeline's idle causes (graph capture begin/end, syncs, blocking
# copies, waits for events).
HOST_CAUSE_CALLS = (
    frozenset(GRAPH_CAPTURE_CALLS[0] + GRAPH_CAPTURE_CALLS[1])
    | SYNC_CALLS
    | BLOCKING_COPY_CALLS
    | WAIT_CALLS
)
KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 0, 1, 2
ANNOTATION_NONE, ANNOTATION_STEP, ANNOTATION_SERVING, ANNOTATION_LABEL, ANNOTATION_COMM = range(5)
# Longer names are cut (with a diagnostic): what a trace keeps per distinct name is bounded.
MAX_NAME_CHARS = 1024


class Collector:
    """The events of one trace as columns (array.array), names and costs interned."""

    # Batches may be appended whole as columns (fast_batch.py): False in a subclass that
    # reads each event in its own methods.
    COLUMNS = True

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
        self.cost_fingerprints: list[str] = []  # per cost id: its input dims' `shapes:` text
        self.cost_dims: list = []  # per cost id: its input dims as tuples, None unknown
        self._cost_index: dict = {}
        # the compiled path's keys (fast_batch.py): an op's name and cost inputs as JSON text,
        # a kernel's grid as JSON text -> the id the per-event path gives them (-1: bad event)
        self.raw_costs: dict = {}
        self.raw_grids: dict = {}
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
        self._grid_values: dict[tuple, int] = {}  # a grid of ints -> its id in `grids`
        # repr of recorded dims -> (the dims as tuples, their `shapes:` text)
        self._recorded_dims: dict[str, tuple] = {}
        # runtime (launch) events
        self.rt_corr = array.array("q")
        self.rt_ext = array.array("q")
        self.rt_thread = array.array("q")
        self.rt_ts = array.array("q")  # ns
        self.rt_dur = array.array("q")  # ns
        self.rt_launch = array.array("b")
        # host calls that explain device idle time: (name, thread, ts ns, dur ns) of graph
        # capture begin/end, device/stream/event syncs, blocking copies and waits for events
        # (table/timeline.py's lists)
        self.host_calls: list = []
        # correlation id of a replayed kernel's launch made up from its capture trace -> that
        # of the graph launch that really ran it (kineto/capture.py)
        self.launch_alias: dict = {}
        # steps (cpu time) and hardware ranges
        self.steps: list[tuple[int, int, int]] = []  # (step, ts ns, dur ns)
        self.comm_spans: list = []  # (thread, ts ns, dur ns, name) of collective annotations
        self.hw: list[tuple[str, dict]] = []
        self.pm = pm_samples.PmCollector()  # PM-sampling and environment counter events
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
            # no shapes recorded: the cost is unknown (unless an engine's scope name gives the
            # shapes), the kind of op is not
            key: tuple = (name,)
            idx = self._cost_index.get(key)
            if idx is None:
                idx = self._cost_index[key] = len(self.costs)
                label = engine_labels.label_cost(name) if args.get(ENGINE_LABEL) else None
                self.costs.append(
                    label or torch_flops.OpCost(torch_flops.category_of(name), 0.0, 0.0, "", "none")
                )
                self.cost_shapes.append(None)
                self.cost_fingerprints.append("")
                self.cost_dims.append(None)
                self.cost_negative.append(False)
            return idx
        types = args.get("Input type")
        concrete = args.get("Concrete Inputs")
        dims_key = bounded_repr(dims)
        key = (name, dims_key, bounded_repr(types), bounded_repr(concrete)) + (
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
            # all made before any is kept: what raises (a malformed event) registers nothing
            shape = None if negative else torch_shape(name, dims, types, concrete)
            dims_data, fingerprint = self.recorded_dims(dims, dims_key)
            idx = self._cost_index[key] = len(self.costs)
            self.costs.append(cost)
            self.cost_shapes.append(shape)
            self.cost_fingerprints.append(fingerprint)
            self.cost_dims.append(dims_data)
            self.cost_negative.append(negative)
            if not negative and cost.source == "none" and serving_ops.is_serving_attention(name):
                self.attention_calls[idx] = (name, args)
        return idx

    def recorded_dims(self, dims, dims_key: str) -> tuple:
        """(the dims as data, their `shapes:` text) of an op's recorded `Input Dims`, made once
        per distinct dims (`dims_key`: their repr, which tells apart what JSON does) and shared
        by every cost that has them; (None, "") when they hold no dims (not a list)."""
        made = self._recorded_dims.get(dims_key)
        if made is None:
            data = input_dims(dims)
            made = (data, shapes_fingerprint(data) if data is not None else "")
            self._recorded_dims[dims_key] = made
        return made

    def grid_id(self, grid) -> int:
        """The id of a kernel's launch grid in `grids`, looked up by its value: its text
        (`grid:[...]`) is made once per distinct grid, not once per kernel."""
        key = tuple(grid) if type(grid) is list and all(type(x) is int for x in grid) else None
        i = self._grid_values.get(key) if key is not None else None
        if i is None:
            i = self.grids.setdefault(grid_fingerprint(grid), len(self.grids))
            if key is not None:
                self._grid_values[key] = i
        return i

    def on_events(self, batch):
        """Add one batch of events (dicts). Each event is read and checked whole before anything
        is appended, so a malformed event (counted in `bad_events`) leaves the columns aligned."""
        self.n_events += len(batch)
        for ev in batch:
            self._event(ev)

    def on_structs(self, batch):
        """Add one batch of fast_json.Event: what `on_events` does with the same events as
        dicts, the frequent kinds read from the structs' fields, the others as dicts."""
        self.n_events += len(batch)
        missing = fast_json.MISSING
        for ev in batch:
            if ev.ph != "X":
                if ev.ph == "C" or ev.ph == "i":
                    self._event(fast_json.as_dict(ev))
                continue
            cat = ev.cat
            if type(cat) is not str:
                continue
            try:
                if cat == "cpu_op":
                    self._cpu_op(ev.name, ev.pid, ev.tid, ev.ts, ev.dur, ev.args)
                elif cat in RUNTIME_CATEGORIES:
                    name = "" if ev.name is missing else ev.name
                    self._runtime(name, ev.pid, ev.tid, ev.ts, ev.dur, ev.args)
                elif cat in GPU_CATEGORIES:
                    name = "" if ev.name is missing else ev.name
                    kind = GPU_CATEGORIES.index(cat)
                    self._gpu(name, ev.pid, ev.tid, ev.ts, ev.dur, ev.args, kind)
                elif cat == "user_annotation" or cat == "cuda_profiler_range":
                    self._event(fast_json.as_dict(ev))
            except (BadEvent, TypeError, ValueError, OverflowError):
                self.bad_events += 1

    def _event(self, ev):
        """One event as the standard library decodes it (anything JSON can be)."""
        if type(ev) is not dict or ev.get("ph") != "X":
            try:
                if type(ev) is dict and ev.get("ph") == "C":
                    self.pm.add(ev)
                elif (
                    type(ev) is dict and ev.get("ph") == "i" and ev.get("name") == RECORD_WINDOW_END
                ):
                    self.window_end = ts_ns(ev.get("ts"))
            except (BadEvent, TypeError, ValueError, OverflowError):
                self.bad_events += 1
            return
        cat = ev.get("cat")
        if type(cat) is not str:
            return
        try:
            if cat == "cpu_op":
                self._cpu_op(*_fields(ev, None))
            elif cat in RUNTIME_CATEGORIES:
                self._runtime(*_fields(ev, ""))
            elif cat in GPU_CATEGORIES:
                self._gpu(*_fields(ev, ""), GPU_CATEGORIES.index(cat))
            elif cat == "user_annotation":
                self._annotation(ev)
            elif cat == "cuda_profiler_range":
                name = ev.get("name", "")
                if type(name) is not str:
                    raise BadEvent
                self.hw.append((self.bounded(name), event_args(ev)))
        except (BadEvent, TypeError, ValueError, OverflowError):
            # TypeError: an unhashable pid/tid; ValueError: a step number of thousands of
            # digits. Nothing was appended for this event: the columns stay aligned.
            self.bad_events += 1

    def _annotation(self, ev):
        name = ev.get("name")
        if type(name) is not str:
            raise BadEvent
        kind = annotation_kind(name)
        if kind == ANNOTATION_STEP:
            step = int(STEP_NAME.match(name).group(1))  # type: ignore[union-attr]
            if step > MAX_STEP:
                raise BadEvent
            ts, dur = ts_ns(ev.get("ts")), dur_ns(ev.get("dur", 0))
            self.steps.append((step, ts, dur))
        elif kind == ANNOTATION_SERVING:
            ts, dur = ts_ns(ev.get("ts")), dur_ns(ev.get("dur", 0))
            thread = self.thread_id(ev.get("pid"), ev.get("tid"))
            self.serving.append((thread, ts, dur, serving_steps.parse(name)))
        elif kind == ANNOTATION_LABEL:
            # an engine's scope naming its GEMM's shapes: an op of its own, costed from the
            # label, the row of the kernels launched inside it
            ts, dur = ts_ns(ev.get("ts")), dur_ns(ev.get("dur", 0))
            thread = self.thread_id(ev.get("pid"), ev.get("tid"))
            self.add_op(thread, ts, dur, name, {ENGINE_LABEL: True}, -1)
        elif kind == ANNOTATION_COMM:
            # A collective's run on its backend's thread (CPU timeline only).
            ts, dur = ts_ns(ev.get("ts")), dur_ns(ev.get("dur", 0))
            thread = self.thread_id(ev.get("pid"), ev.get("tid"))
            fact = (
                torch_custom_ops.annotation_fact(name, event_args(ev))
                if name.startswith("nccl:")
                else None
            )
            self.comm_spans.append((thread, ts, dur, self.bounded(name)))
            self._comm_fact(thread, ts, dur, fact)

    def _cpu_op(self, name, pid, tid, ts, dur, args):
        args = args_dict(args)
        if type(name) is not str:
            raise BadEvent
        ts, dur = ts_ns(ts), dur_ns(dur)
        ext = int_or(args.get("External id"), -1)
        thread = self.thread_id(pid, tid)
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

    def _runtime(self, name, pid, tid, ts, dur, args):
        """A runtime call (a launch, a sync...): its fields as the event gives them."""
        args = args_dict(args)
        if type(name) is not str:
            raise BadEvent
        if name in HOST_CAUSE_CALLS:  # kept whether or not it has a correlation id
            t_ns, d_ns = ts_ns(ts), dur_ns(dur)
            self.host_calls.append((name, self.thread_id(pid, tid), t_ns, d_ns))
        corr = int_or(args.get("correlation"), -1)
        if corr < 0:
            return
        ts, dur = ts_ns(ts), dur_ns(dur)
        ext = int_or(args.get("External id"), -1)
        thread = self.thread_id(pid, tid)
        if "GraphLaunch" in name:  # its kernels replay a captured graph (kineto/capture.py)
            self.graph_launches.append((corr, thread, ts, dur))
        self.rt_corr.append(corr)
        self.rt_ext.append(ext)
        self.rt_thread.append(thread)
        self.rt_ts.append(ts)
        self.rt_dur.append(dur)
        self.rt_launch.append("Launch" in name)

    def _gpu(self, name, pid, tid, ts, dur, args, kind):
        """Device activity (kernel, memcpy, memset); pid and tid are not read."""
        args = args_dict(args)
        if type(name) is not str:
            raise BadEvent
        ts, dur = ts_ns(ts), dur_ns(dur)
        dev = args.get("device")
        dev = 0 if dev is None else int_or(dev, None)
        if dev is None or not -MAX_DEVICE < dev < MAX_DEVICE:
            raise BadEvent
        nbytes = args.get("bytes")
        nbytes = 0.0 if nbytes is None else finite(nbytes, 1e18)
        if nbytes < 0:
            raise BadEvent
        corr = int_or(args.get("correlation"), -1)
        ext = int_or(args.get("External id"), -1)
        name_i = self.name_id(self.bounded(name))
        grid_i = self.grid_id(args.get("grid")) if kind == KIND_KERNEL else 0
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
        self.gpu_stream.append(int_or(args.get("stream"), -1))
        self.gpu_grid.append(grid_i)


def annotation_kind(name: str) -> int:
    """What a `user_annotation` of this name adds: a step marker, a serving step, an engine
    label's op, a collective's run, or nothing (ANNOTATION_NONE)."""
    if STEP_NAME.match(name):
        return ANNOTATION_STEP
    if name.startswith(("step[", "execute_")):
        return ANNOTATION_NONE if serving_steps.parse(name) is None else ANNOTATION_SERVING
    if engine_labels.parse(name) is not None:
        return ANNOTATION_LABEL
    if torch_flops.COMMUNICATION.search(name) or name.startswith("gloo:"):
        return ANNOTATION_COMM
    return ANNOTATION_NONE


def _fields(ev: dict, name_default) -> tuple[object, object, object, object, object, object]:
    """(name, pid, tid, ts, dur, args) of an event dict, as the field handlers take them (JSON
    values, checked there)."""
    get = ev.get
    return (
        get("name", name_default),
        get("pid"),
        get("tid"),
        get("ts"),
        get("dur", 0),
        get("args"),
    )
