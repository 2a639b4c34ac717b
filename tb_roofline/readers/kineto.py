"""PyTorch profiler traces (Kineto JSON, `*.pt.trace.json[.gz]`) → op table, steps, core spans.

Facts used (REFERENCE.md §6; docs/pytorch_traces.md has the details and choices):
- A trace is one JSON object; `traceEvents` holds Chrome trace events (`ph: "X"`, `ts`/`dur`
  in µs). Other keys: `deviceProperties`, `distributedInfo` (`rank`, `world_size`), ...
- `cpu_op` events are aten ops; they nest on their thread by time. With `record_shapes` they
  carry `Input Dims`, `Input type` and `Concrete Inputs`, from which `torch_flops` derives FLOPs
  and bytes.
- GPU activity (`kernel`, `gpu_memcpy`, `gpu_memset`) carries `correlation`, matching the
  `cuda_runtime` launch on the CPU thread; the ops enclosing that launch launched it. Newer
  traces also give the launch the enclosing op's `External id`; older ones set it to the
  correlation id, so time nesting is the link that works for both, `External id` the fallback.
- `user_annotation` `ProfilerStep#N` spans mark training steps.
- `cuda_profiler_range` events (CUPTI range profiler) carry per-kernel SASS instruction counts;
  FLOPs per precision = add + mul + 2·fma. They come in launch order, with placeholder times.

Attribution (so nested ops never count their kernels twice): every op is charged to one "row
op": the outermost op around it that has a FLOP formula, else its outermost (top-level) op. All
kernels launched inside, and on CPU-only traces all CPU time spent inside (minus the time of
nested row ops), go to that row op. memcpy/memset are rows of their own with measured bytes.
"""
from __future__ import annotations

import array
import codecs
import dataclasses
import gzip
import json
import math
import os
import re
import zlib

import numpy as np

from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.devices import gpu_peaks
from tb_roofline.devices.gpu_peaks import apply_ceilings, kineto_device_peaks
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.hlo.fingerprint import grid_fingerprint, shapes_fingerprint
from tb_roofline.model.op_table import (HOST_TRANSFER, NO_STEP, PEER_TRANSFER, CoreSpan, OpTable,
                                        OpTableBuilder, ProfileData, StepSpan)
from tb_roofline.readers import kernel_names, torch_flops
from tb_roofline import storage
from tb_roofline.readers.files import check_profile_file, env_number
from tb_roofline.readers import kineto_timeline
from tb_roofline.readers.shape_facts import torch_shape

CHUNK_CHARS = 4 << 20
# Memory per trace grows with its events (the trace is streamed, its events kept as columns):
# a trace with more events is refused (413) before it can exhaust the server's memory.
MAX_EVENTS = 5_000_000
MAX_EVENTS_ENV = "TB_ROOFLINE_MAX_EVENTS"
MAX_WHITESPACE_RUN = 16 << 20  # no trace has this much whitespace in a row: a padded bomb
_NOT_WS = re.compile(r"[^ \t\r\n]")
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"})
KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 0, 1, 2
HW_PREFIX = "smsp__sass_thread_inst_executed_op_"
HW_PRECISIONS = {"d": "f64", "f": "f32", "h": "f16"}
HW_NOTE = ("CUPTI SASS instruction counters (add + mul + 2·fma per precision) count CUDA-core "
           "floating-point work only: tensor-core (HMMA/IMMA/DMMA) work is not counted, so "
           "GEMMs and convolutions on tensor cores show few or no hardware FLOPs; half-precision "
           "counts are instructions, and packed (×2) instructions count once.")


# ------------------------------------------------------------------------------------------
# Streaming JSON: top-level keys, and the traceEvents array in batches.

class _Truncated(Exception):
    pass


class _TextSource:
    """Decoded text of a (gzipped) file, read in chunks; counts the bytes it read."""

    def __init__(self, f, max_chars: int | None):
        self.f = f
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self.eof = False
        self.read_bytes = 0
        self.max_chars = max_chars

    def read(self) -> str:
        if self.eof:
            return ""
        data = self.f.read(CHUNK_CHARS)
        self.read_bytes += len(data)
        if self.max_chars is not None and self.read_bytes > self.max_chars:
            raise ProfileTooLargeError(
                f"holds more than {self.max_chars / 2**20:.0f} MiB of JSON, over the limit "
                "(set TB_ROOFLINE_MAX_FILE_MB to raise it)")
        if not data:
            self.eof = True
            return self.decoder.decode(b"", final=True)
        return self.decoder.decode(data)


class _JsonStream:
    """An incremental reader of `{ "key": value, ..., "traceEvents": [ {...}, ... ], ... }`.

    Values other than traceEvents are decoded whole (they are small); the events array is
    decoded in batches of complete elements with one `json.loads` per few MB (fast path: the
    text up to the last `},` that ends a top-level element), falling back to `raw_decode` one
    element at a time when a batch boundary is ambiguous. Only a few MB of text are held.
    """

    WS = " \t\r\n"

    def __init__(self, src: _TextSource):
        self.src = src
        self.buf = ""
        self.pos = 0
        self.decoder = json.JSONDecoder(parse_float=_parse_float)
        self.saw_events = False
        self.shifted = 0  # characters dropped from the front of buf so far

    def _more(self) -> bool:
        text = self.src.read()
        if not text and self.src.eof:
            return False
        self.shifted += self.pos
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        return True

    def _skip_ws(self):
        """The next character that is not whitespace (skipped in bulk, a bounded run)."""
        run = 0
        while True:
            m = _NOT_WS.search(self.buf, self.pos)
            if m is not None:
                self.pos = m.start()
                return self.buf[self.pos]
            run += len(self.buf) - self.pos
            self.pos = len(self.buf)
            if run > MAX_WHITESPACE_RUN:
                raise ProfileFormatError(f"more than {MAX_WHITESPACE_RUN >> 20} MiB of "
                                         "whitespace in a row in the JSON text")
            if not self._more():
                raise _Truncated("unexpected end of file")

    def _expect(self, ch):
        if self._skip_ws() != ch:  # never quote the text: the file may be anything
            raise ProfileFormatError(f"expected '{ch}' at offset {self.shifted + self.pos} of "
                                     "the JSON text")
        self.pos += 1

    def _value(self):
        self._skip_ws()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except ValueError as exc:
                if not isinstance(exc, json.JSONDecodeError):  # an integer of > 4300 digits
                    raise ProfileFormatError("invalid JSON: a number too long to convert "
                                             f"at offset {self.shifted + self.pos}") from None
                # The value may just continue in the next chunk: read on (bounded), then judge.
                if not self.src.eof and len(self.buf) - self.pos < max(4 * CHUNK_CHARS, 1 << 26):
                    if self._more():
                        continue
                if self.src.eof and (exc.msg.startswith("Unterminated string") or
                                     not self.buf[exc.pos:].strip()):
                    raise _Truncated(str(exc)) from None
                raise ProfileFormatError(f"invalid JSON: {exc.msg}") from None
            self.pos = end
            return value

    def parse(self, on_key, on_events):
        """Calls on_key(key, value) for plain keys and on_events(list) per batch of events."""
        self._expect("{")
        first = True
        while True:
            ch = self._skip_ws()
            if ch == "}":
                self.pos += 1
                return
            if not first:
                if ch != ",":
                    raise ProfileFormatError("expected ',' between top-level keys at offset "
                                             f"{self.shifted + self.pos}")
                self.pos += 1
                if self._skip_ws() == "}":  # tolerate a trailing comma
                    self.pos += 1
                    return
            first = False
            key = self._value()
            if not isinstance(key, str):
                raise ProfileFormatError("top-level keys must be strings")
            self._expect(":")
            if key == "traceEvents":
                self.saw_events = True
                self._expect("[")
                self._events(on_events)
            else:
                on_key(key, self._value())

    def _events(self, on_events):
        loads = json.JSONDecoder(parse_float=_parse_float).decode
        while True:
            ch = self._skip_ws()
            if ch == "]":
                self.pos += 1
                return
            if ch == ",":  # between elements (after a batch or a single element)
                self.pos += 1
                continue
            while len(self.buf) - self.pos < CHUNK_CHARS and not self.src.eof:
                if not self._more():
                    break
            batch = None
            buf, pos = self.buf, self.pos
            end = len(buf)
            for _ in range(4):
                cut = buf.rfind("},", pos, end)
                if cut < 0:
                    break
                try:
                    batch = loads("[" + buf[pos:cut + 1] + "]")
                except ValueError:
                    end = cut
                    continue
                self.pos = cut + 2
                break
            if batch is None:
                batch = self._slow_batch()
            on_events(batch)

    def _slow_batch(self) -> list:
        """Elements one by one (raw_decode) up to about one chunk; stops before the ']'.
        At least a chunk of text, so that the fast path's failed tries stay a bounded share of
        the work (a trace with '},' inside its strings must not cost many parses per event)."""
        out = []
        start = self.shifted + self.pos
        while True:
            out.append(self._value())
            ch = self._skip_ws()
            if ch != "," or self.shifted + self.pos - start >= CHUNK_CHARS:
                return out
            self.pos += 1
            ch = self._skip_ws()
            if ch == "]":
                return out


# ------------------------------------------------------------------------------------------
# Event collection: compact columns, one pass, no event dicts kept.

class _Collector:
    def __init__(self):
        self.meta: dict = {}
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
        # steps (cpu time) and hardware ranges
        self.steps: list[tuple[int, int, int]] = []  # (step, ts ns, dur ns)
        self.comm_spans: list = []  # (thread, ts ns, dur ns, name) of collective annotations
        self.hw: list[tuple[str, dict]] = []
        self.n_events = 0
        self.bad_events = 0

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
        if dims is None:  # no shapes recorded: the cost is unknown, the kind of op is not
            key = (name,)
            idx = self._cost_index.get(key)
            if idx is None:
                idx = self._cost_index[key] = len(self.costs)
                self.costs.append(torch_flops.OpCost(torch_flops.category_of(name), 0.0, 0.0,
                                                     "", "none"))
                self.cost_shapes.append(None)
                self.cost_fingerprints.append("")
            return idx
        types = args.get("Input type")
        concrete = args.get("Concrete Inputs")
        key = (name, repr(dims), repr(types), repr(concrete))
        idx = self._cost_index.get(key)
        if idx is None:
            try:
                cost = torch_flops.op_cost(name, dims, types, concrete)
            except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
                cost = None
            if cost is None:
                precision = torch_flops.precision_of(types)
                cost = torch_flops.OpCost(torch_flops.category_of(name), 0.0, 0.0, precision,
                                          "none")
            idx = self._cost_index[key] = len(self.costs)
            self.costs.append(cost)
            self.cost_shapes.append(torch_shape(name, dims))
            self.cost_fingerprints.append(shapes_fingerprint(dims))
        return idx

    def on_events(self, batch):
        """Add one batch of events. Each event is read and checked whole before anything is
        appended, so a malformed event (counted in `bad_events`) leaves the columns aligned."""
        self.n_events += len(batch)
        for ev in batch:
            if type(ev) is not dict or ev.get("ph") != "X":
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
                    elif torch_flops.COMMUNICATION.search(name) or name.startswith("gloo:"):
                        # A collective's run on its backend's thread (CPU timeline only).
                        ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
                        thread = self.thread_id(ev.get("pid"), ev.get("tid"))
                        self.comm_spans.append((thread, ts, dur, name))
                elif cat == "cuda_profiler_range":
                    name = ev.get("name", "")
                    if type(name) is not str:
                        raise _BadEvent
                    self.hw.append((name, _args(ev)))
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
        name_i = self.name_id(name)
        cost = self.cost_id(name, args)
        # All fields are valid: append them together.
        self.op_thread.append(thread)
        self.op_ts.append(ts)
        self.op_dur.append(dur)
        self.op_name.append(name_i)
        self.op_ext.append(ext)
        self.op_cost.append(cost)

    def _runtime(self, ev):
        args = _args(ev)
        corr = _int(args.get("correlation"), -1)
        if corr < 0:
            return
        name = ev.get("name", "")
        if type(name) is not str:
            raise _BadEvent
        ts, dur = _ts(ev.get("ts")), _dur(ev.get("dur", 0))
        ext = _int(args.get("External id"), -1)
        thread = self.thread_id(ev.get("pid"), ev.get("tid"))
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
        name_i = self.name_id(name)
        grid = grid_fingerprint(args.get("grid")) if kind == KIND_KERNEL else ""
        grid_i = self.grids.setdefault(grid, len(self.grids))
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
_MAX_TS_NS = 2 ** 62   # ~2116 in epoch ns
_MAX_DUR_NS = 10 ** 15  # ~11.6 days
_MAX_SPAN_NS = 2 ** 52  # ~52 days: exact in float64 ns, and int64 in ps
_MAX_STEP = 2 ** 62
_MAX_DEVICE = 2 ** 31


class _Exact(float):
    """A JSON number with more digits than a double keeps (epoch µs with ns fractions); its
    text gives the exact value (REFERENCE.md §6)."""


def _parse_float(text: str, _float=float):
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


_WRAPPER = re.compile(r"^(autograd::|torch::autograd::)|Backward\d*$|^CompiledFunction")


def _is_wrapper(name: str) -> bool:
    """Autograd engine frames and graph nodes: they only call other ops, so rows skip them."""
    return bool(_WRAPPER.search(name))


def _int(value, default):
    """An integer JSON value (int, or integral float) that fits in int64, else default."""
    if isinstance(value, bool):
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and -2 ** 63 <= value < 2 ** 63:
        return value
    return default


# ------------------------------------------------------------------------------------------
# Reading the file.

def load_kineto(path: str, max_bytes: int | None = None, progress=None) -> _Collector:
    base = os.path.basename(path)
    before, young = check_profile_file(path, max_bytes)
    col = _Collector()
    total = before.st_size

    max_events = int(env_number(MAX_EVENTS_ENV, MAX_EVENTS))

    def on_events(batch):
        if col.n_events + len(batch) > max_events:
            raise ProfileTooLargeError(
                f"holds more than {max_events:,} trace events, over the limit (set "
                f"{MAX_EVENTS_ENV} to raise it)")
        col.on_events(batch)
        if progress:
            progress(min(raw.tell(), total), total)

    def on_key(key, value):
        col.meta[key] = value

    try:
        with storage.open_binary(path, size=total) as raw:
            f = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
            # The JSON text a .gz inflates to is limited like a file: it is what costs time.
            src = _TextSource(f, max_bytes)
            stream = _JsonStream(src)
            stream.parse(on_key, on_events)
    except ProfileTooLargeError as exc:
        raise ProfileTooLargeError(f"{base} {exc}") from None
    except _Truncated as exc:
        _raise_incomplete(path, before, young, f"{base} ends early (truncated JSON: {exc})")
    except EOFError:
        _raise_incomplete(path, before, young, f"{base} ends early (truncated gzip stream)")
    except (gzip.BadGzipFile, zlib.error, OSError) as exc:
        what = str(exc)
        if what.startswith("Not a gzipped file"):  # it quotes the file's first bytes: do not
            what = "no gzip header"
        raise ProfileFormatError(f"{base} is not a readable gzip file: {what}") from None
    except UnicodeDecodeError:
        raise ProfileFormatError(f"{base} is not UTF-8 JSON text") from None
    except ProfileFormatError as exc:
        if _changed(path, before):
            raise ProfileIncompleteError(f"{base} changed while it was read") from None
        if young:
            raise ProfileIncompleteError(f"{base} does not parse yet") from None
        raise ProfileFormatError(f"{base}: {exc}") from None
    except RecursionError:
        raise ProfileFormatError(f"{base}: JSON nested too deeply") from None
    if _changed(path, before):
        raise ProfileIncompleteError(f"{base} changed while it was read")
    if not stream.saw_events:
        raise ProfileFormatError(f"{base} has no traceEvents: not a PyTorch profiler trace")
    return col


def _changed(path, before) -> bool:
    try:
        after = storage.stat(path)
    except OSError:
        return True
    return storage.version(after) != storage.version(before)


def _raise_incomplete(path, before, young, message):
    if young or _changed(path, before):
        raise ProfileIncompleteError(message) from None
    raise ProfileFormatError(message) from None


# ------------------------------------------------------------------------------------------
# From columns to the op table.

@dataclasses.dataclass
class HwCounters:
    """Hardware counters of a trace (CUPTI range profiler), for the "Total (HW)" record.

    `kernels` has one entry per profiled kernel, in launch order: name, metrics (raw sums),
    flops per precision, total flops, the row op that launched it (when the ranges could be
    matched to the launches) and its step. `flops` sums per precision; `metric_sums` sums each
    metric. `kernel_time_known` says whether the trace also timed the kernels (range-profiler
    traces do not: their range times are placeholders)."""
    kernels: list
    flops: dict
    total_flops: float
    metric_sums: dict
    matched_to_ops: bool
    kernel_time_known: bool
    note: str = HW_NOTE

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _num(value) -> float:
    """A finite JSON number as a float; 0 for anything else (strings, null, NaN, inf, bools)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            value = float(value)
        except OverflowError:
            return 0.0
        if math.isfinite(value):
            return value
    return 0.0


def hw_flops_from_metrics(metrics: dict) -> dict:
    """FLOPs per precision from SASS counters: add + mul + 2·fma (Nsight Compute's rule)."""
    out = {}
    if not isinstance(metrics, dict):
        return out
    for letter, precision in HW_PRECISIONS.items():
        keys = [f"{HW_PREFIX}{letter}{op}_pred_on.sum" for op in ("add", "mul", "fma")]
        if not any(k in metrics for k in keys):
            continue
        add, mul, fma = (_num(metrics.get(k)) for k in keys)
        total = add + mul + 2.0 * fma
        out[precision] = total if math.isfinite(total) else 0.0
    return out


def _ns_to_ps(ns: float, base: float) -> int:
    """A time in ns as integer ps after `base` (ns); also a duration: _ns_to_ps(end, start)."""
    return int(round((ns - base) * 1000))


def _op_tree(thread, ts, dur):
    """Per-op parent (-1 for top level) and the ops sorted by (thread, start, -duration)."""
    n = len(ts)
    order = np.lexsort((-dur, ts, thread))
    parent = np.full(n, -1, np.int64)
    t_l, b_l = thread[order].tolist(), ts[order].tolist()
    e_l = (ts[order] + dur[order]).tolist()
    o_l = order.tolist()
    stack: list[int] = []  # positions in sorted order
    cur_thread = None
    par = [-1] * n
    for i in range(n):
        th, b, e = t_l[i], b_l[i], e_l[i]
        if th != cur_thread:
            stack = []
            cur_thread = th
        while stack and not (b >= b_l[stack[-1]] and e <= e_l[stack[-1]]):
            stack.pop()
        if stack:
            par[o_l[i]] = o_l[stack[-1]]
        stack.append(i)
    parent[:] = par
    return order, parent


def _innermost_op(order, parent, thread_sorted, ts_sorted, end_all, q_thread, q_ts, q_end):
    """For each query (thread, ts, end): the innermost op on that thread enclosing it
    (op start <= ts and end <= op end), or -1.

    `order` sorts the ops by (thread, start, -duration); `thread_sorted`/`ts_sorted` are the
    threads and starts in that order. Each query is searched only within its own thread's
    slice, comparing times exactly (no combined thread/time key that could lose precision)."""
    n_q = len(q_ts)
    out = np.full(n_q, -1, np.int64)
    if not len(order) or not n_q:
        return out
    q_thread = np.asarray(q_thread, np.int64)
    q_ts = np.asarray(q_ts, np.float64)
    q_end = np.asarray(q_end, np.float64)
    # Candidate: the last op of the query's thread starting at or before the query.
    pos = np.full(n_q, -1, np.int64)
    lo_all = np.searchsorted(thread_sorted, q_thread, side="left")
    hi_all = np.searchsorted(thread_sorted, q_thread, side="right")
    q_order = np.argsort(q_thread, kind="stable")
    qt_sorted = q_thread[q_order]
    cuts = np.flatnonzero(np.r_[True, qt_sorted[1:] != qt_sorted[:-1], True])
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        qs = q_order[a:b]
        lo, hi = int(lo_all[qs[0]]), int(hi_all[qs[0]])
        if lo == hi:  # no ops on this thread
            continue
        p = np.searchsorted(ts_sorted[lo:hi], q_ts[qs], side="right") - 1
        pos[qs] = np.where(p >= 0, p + lo, -1)
    # Walk up from the candidate to the first op that encloses the query.
    par = parent.tolist()
    end_l = end_all.tolist()
    start_l = np.empty(len(order))
    start_l[order] = ts_sorted
    start_l = start_l.tolist()
    o = order.tolist()
    qs_l, qe_l = q_ts.tolist(), q_end.tolist()
    for i, p in enumerate(pos.tolist()):
        if p < 0:
            continue
        op = o[p]
        qs, qe = qs_l[i], qe_l[i]
        while op >= 0 and not (start_l[op] <= qs and qe <= end_l[op]):
            op = par[op]
        out[i] = op
    return out


def read_kineto(col: _Collector, host: str) -> ProfileData:
    diagnostics: list[Diagnostic] = []
    meta = col.meta
    names = np.empty(len(col.names), dtype=object)
    names[:] = list(col.names)

    # Times are exact integer ns (µs with ns fractions in the file); from here on they are ns
    # after the earliest event, as float64 (exact below 2**53 ns), so sums and nesting tests
    # are exact.
    ts_ns = {k: np.frombuffer(getattr(col, k), np.int64) if len(getattr(col, k))
             else np.zeros(0, np.int64) for k in ("op_ts", "op_dur", "gpu_ts", "gpu_dur",
                                                  "rt_ts", "rt_dur")}
    step_ts = np.array([s[1] for s in col.steps], np.int64)
    step_dur = np.maximum(np.array([s[2] for s in col.steps], np.int64), 0)
    starts = [int(a.min()) for a in (ts_ns["op_ts"], ts_ns["gpu_ts"], ts_ns["rt_ts"], step_ts)
              if len(a)]
    base_ns = min(starts) if starts else 0
    ends = [int((ts_ns[t] + np.maximum(ts_ns[d], 0)).max()) for t, d in (
        ("op_ts", "op_dur"), ("gpu_ts", "gpu_dur"), ("rt_ts", "rt_dur")) if len(ts_ns[t])]
    ends += [int((step_ts + step_dur).max())] if len(step_ts) else []
    if ends and max(ends) - base_ns > _MAX_SPAN_NS:
        raise ProfileFormatError(
            f"event times span {(max(ends) - base_ns) / 86400e9:.3g} days, more than the "
            f"{_MAX_SPAN_NS / 86400e9:.0f} days a trace can cover: a 'ts' or 'dur' is corrupt")

    def rel(key):
        return (ts_ns[key] - base_ns).astype(np.float64)

    def dur(key):
        return np.maximum(ts_ns[key], 0).astype(np.float64)

    base = 0.0
    op_thread = np.frombuffer(col.op_thread, np.int64) if len(col.op_thread) else np.zeros(0, np.int64)
    op_ts, op_dur = rel("op_ts"), dur("op_dur")
    op_name = np.asarray(col.op_name, np.int64)
    op_ext = np.asarray(col.op_ext, np.int64)
    op_cost = np.asarray(col.op_cost, np.int64)
    gpu_ts, gpu_dur = rel("gpu_ts"), dur("gpu_dur")
    gpu_kind = np.asarray(col.gpu_kind, np.int64)
    gpu_dev = np.asarray(col.gpu_dev, np.int64)
    gpu_corr = np.asarray(col.gpu_corr, np.int64)
    gpu_ext = np.asarray(col.gpu_ext, np.int64)
    gpu_name = np.asarray(col.gpu_name, np.int64)
    gpu_bytes = np.asarray(col.gpu_bytes, np.float64)
    rt_corr = np.asarray(col.rt_corr, np.int64)
    rt_ext = np.asarray(col.rt_ext, np.int64)
    rt_thread = np.asarray(col.rt_thread, np.int64)
    rt_ts, rt_dur = rel("rt_ts"), dur("rt_dur")
    rt_launch = np.asarray(col.rt_launch, bool)

    # Costs as arrays indexed by cost id (-1 → no args recorded: unknown).
    n_costs = len(col.costs)
    cost_flops = np.array([c.flops for c in col.costs] + [0.0])
    cost_bytes = np.array([c.bytes for c in col.costs] + [0.0])
    cost_formula = np.array([c.source == "formula" for c in col.costs] + [False])
    op_cost = np.where(op_cost < 0, n_costs, op_cost)  # the extra last entry
    cost_fp = np.array(col.cost_fingerprints + [""], dtype=object)
    grids = np.empty(len(col.grids), dtype=object)
    grids[:] = list(col.grids)
    gpu_fp = grids[np.asarray(col.gpu_grid, np.int64)]
    op_has_formula = cost_formula[op_cost]

    # Op tree per thread and each op's row op.
    n_ops = len(op_ts)
    order, parent = _op_tree(op_thread, op_ts, op_dur)
    row_op = np.arange(n_ops)
    par_l = parent.tolist()
    formula_l = op_has_formula.tolist()
    wrapper_names = np.array([_is_wrapper(x) for x in names.tolist()] + [False], bool)
    wrap_l = wrapper_names[op_name].tolist() if n_ops else []
    row_l = [0] * n_ops
    top_l = [0] * n_ops  # outermost non-wrapper op (else the op itself)
    fanc_l = [-1] * n_ops
    for i in order.tolist():  # parents come before their children in this order
        p = par_l[i]
        if p < 0:
            top_l[i] = i
            fanc_l[i] = i if formula_l[i] else -1
        else:
            top_l[i] = i if wrap_l[top_l[p]] else top_l[p]
            fanc_l[i] = fanc_l[p] if fanc_l[p] >= 0 else (i if formula_l[i] else -1)
        row_l[i] = fanc_l[i] if fanc_l[i] >= 0 else top_l[i]
    if n_ops:
        row_op = np.asarray(row_l, np.int64)

    # Steps: ProfilerStep#N spans in CPU time.
    step_ids = np.array([s[0] for s in col.steps], np.int64)
    step_b = (step_ts - base_ns).astype(np.float64)
    step_e = step_b + step_dur
    s_order = np.argsort(step_b, kind="stable")
    step_ids, step_b, step_e = step_ids[s_order], step_b[s_order], step_e[s_order]
    overlapping = int(np.count_nonzero(step_b[1:] < np.maximum.accumulate(step_e)[:-1]))
    if overlapping:
        diagnostics.append(Diagnostic(
            "warning", "steps_overlap",
            f"{overlapping} ProfilerStep spans start before an earlier step ends; each step is "
            "counted from the end of the previous one"))

    def step_of(t_ns: np.ndarray) -> np.ndarray:
        if not len(step_ids) or not len(t_ns):
            return np.full(len(t_ns), NO_STEP, np.int64)
        i = np.searchsorted(step_b, t_ns, side="right") - 1
        ok = (i >= 0) & (t_ns <= step_e[np.maximum(i, 0)])
        return np.where(ok, step_ids[np.maximum(i, 0)], NO_STEP)

    # GPU activity → launching runtime event → enclosing op → row op.
    has_gpu = len(gpu_ts) > 0
    rt_by_corr = {}
    if len(rt_corr):
        for i, c in enumerate(rt_corr.tolist()):
            rt_by_corr.setdefault(c, i)
    gpu_rt = np.fromiter((rt_by_corr.get(c, -1) for c in gpu_corr.tolist()), np.int64,
                         count=len(gpu_corr))
    thread_sorted = op_thread[order] if n_ops else np.zeros(0, np.int64)
    ts_sorted = (op_ts[order] - base) if n_ops else np.zeros(0)
    end_all = (op_ts + op_dur - base) if n_ops else np.zeros(0)
    linked = gpu_rt >= 0
    gpu_op = np.full(len(gpu_ts), -1, np.int64)
    if linked.any():
        r = gpu_rt[linked]
        gpu_op[linked] = _innermost_op(order, parent, thread_sorted, ts_sorted, end_all,
                                       rt_thread[r], rt_ts[r] - base,
                                       rt_ts[r] + rt_dur[r] - base)
    # External id fallback, only where launches carry op ids (not their correlation ids).
    new_style = len(rt_ext) and bool(np.any((rt_ext != rt_corr) & (rt_ext >= 0)))
    if new_style and n_ops:
        ext_to_op = {e: i for i, e in enumerate(op_ext.tolist()) if e >= 0}
        miss = np.flatnonzero((gpu_op < 0) & (gpu_ext >= 0))
        for i in miss.tolist():
            gpu_op[i] = ext_to_op.get(int(gpu_ext[i]), -1)
    gpu_row = np.where(gpu_op >= 0, row_op[np.maximum(gpu_op, 0)] if n_ops else -1, -1)
    launch_t = np.where(linked, rt_ts[np.maximum(gpu_rt, 0)] if len(rt_ts) else gpu_ts, gpu_ts)
    gpu_step = step_of(launch_t)

    builder = OpTableBuilder()
    kernels = OpTableBuilder()
    timeline, shapes = None, {}
    steps: list[StepSpan] = []
    spans: list[CoreSpan] = []
    costs = col.costs + [torch_flops.OpCost("other", 0.0, 0.0, "", "none")]
    op_step = step_of(op_ts)

    unattributed = 0
    name_units = _kernel_units(names) if has_gpu else np.full(len(names), "", dtype=object)
    if has_gpu:
        # Kernels: time summed per (row op invocation, device); FLOPs/bytes once per invocation.
        is_k = gpu_kind == KIND_KERNEL
        k_idx = np.flatnonzero(is_k)
        att = k_idx[gpu_row[k_idx] >= 0]
        unatt = k_idx[gpu_row[k_idx] < 0]
        unattributed = len(unatt)
        if len(att):
            inv = gpu_row[att]
            dev = gpu_dev[att]
            # One group per (invocation, device); device ids may be any int32 (even negative).
            d0 = dev - int(dev.min())
            key = inv * (int(d0.max()) + 1) + d0
            uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            t_ps = np.bincount(inverse, weights=gpu_dur[att] * 1e3, minlength=len(uniq))
            inv_u, dev_u = inv[first], dev[first]
            # FLOPs go to one device per invocation: the first in key order.
            _, first_dev = np.unique(inv_u, return_index=True)
            owner = np.zeros(len(uniq), bool)
            owner[first_dev] = True
            c_ids = op_cost[inv_u]
            # What ran: the unit the invocation's longest kernel names, else the data type.
            o = np.lexsort((-gpu_dur[att], inv))
            main = att[o][np.r_[True, inv[o][1:] != inv[o][:-1]]]
            unit_of_inv = dict(zip(gpu_row[main].tolist(), name_units[gpu_name[main]].tolist()))
            precs = np.array([unit_of_inv.get(i) or costs[c].precision
                              for i, c in zip(inv_u.tolist(), c_ids.tolist())], dtype=object)
            shapes = kineto_timeline.op_shapes(
                inv_u, t_ps, list(zip([""] * len(inv_u), names[op_name[inv_u]].tolist(),
                                      precs.tolist())), col.cost_shapes, op_cost)
            _add_grouped(builder, host, dev_u, names[op_name[inv_u]],
                         np.array([costs[c].category for c in c_ids.tolist()], dtype=object),
                         precs, np.array([costs[c].source for c in c_ids.tolist()], dtype=object),
                         op_step[inv_u], t_ps, np.where(owner, cost_flops[c_ids], 0.0),
                         np.where(owner, cost_bytes[c_ids], 0.0), owner.astype(np.int64),
                         fingerprint=cost_fp[c_ids])
        if len(unatt):
            nm = names[gpu_name[unatt]]
            cats = np.array([torch_flops.category_of(x) if torch_flops.COMMUNICATION.search(x)
                             else kernel_names.kernel_category(x) or "other"
                             for x in nm.tolist()], dtype=object)
            _add_grouped(builder, host, gpu_dev[unatt], nm, cats, name_units[gpu_name[unatt]],
                         np.full(len(unatt), "none", object), gpu_step[unatt],
                         gpu_dur[unatt] * 1e3, np.zeros(len(unatt)), np.zeros(len(unatt)),
                         np.ones(len(unatt), np.int64), fingerprint=gpu_fp[unatt])
        # memcpy / memset: measured bytes, own rows.
        m_idx = np.flatnonzero(~is_k)
        if len(m_idx):
            cats = np.where(gpu_kind[m_idx] == KIND_MEMCPY, "memcpy", "memset").astype(object)
            b = gpu_bytes[m_idx]
            hbm, host_b, caveat = _transfers(gpu_kind[m_idx], names[gpu_name[m_idx]], b)
            _add_grouped(builder, host, gpu_dev[m_idx], names[gpu_name[m_idx]], cats,
                         np.full(len(m_idx), "", object), np.full(len(m_idx), "measured", object),
                         gpu_step[m_idx], gpu_dur[m_idx] * 1e3, np.zeros(len(m_idx)), b,
                         np.ones(len(m_idx), np.int64), hbm=hbm, host_bytes=host_b,
                         caveat=caveat)
        _kernel_view(kernels, host, gpu_kind, gpu_dev, gpu_name, names, gpu_row, gpu_dur,
                     gpu_bytes, gpu_step, op_cost, cost_flops, cost_bytes, costs, name_units,
                     gpu_fp)
        devices = sorted(set(gpu_dev.tolist()))
        g_end = gpu_ts + gpu_dur
        for d in devices:
            m = gpu_dev == d
            lo, hi = float(gpu_ts[m].min()), float(g_end[m].max())
            # Steps on the device: from the CPU step start (nothing launches earlier) to the end
            # of the last activity launched in it, never before the CPU step ends; steps do not
            # overlap (a step starts when the previous one has ended on the device).
            prev_end = -np.inf
            for sid, sb, se in zip(step_ids.tolist(), step_b.tolist(), step_e.tolist()):
                mm = m & (gpu_step == sid)
                end = max(se, float(g_end[mm].max())) if mm.any() else se
                start = max(sb, prev_end)
                end = max(end, start)  # overlapping markers: never a negative duration
                prev_end = end
                steps.append(StepSpan(host, d, sid, _ns_to_ps(start, base),
                                      _ns_to_ps(end, start)))
                lo, hi = min(lo, start), max(hi, end)
            spans.append(CoreSpan(host, d, _ns_to_ps(lo, base), _ns_to_ps(hi, base)))
        stream = np.asarray(col.gpu_stream, np.int64)
        timeline = kineto_timeline.gpu_timeline(
            spans, steps, gpu_kind, gpu_dev, stream * (1 << 20) + gpu_dev, gpu_ts, gpu_dur,
            gpu_row, gpu_name, names, op_name, op_cost, costs, name_units,
            lambda kind, nm: _transfers(kind, nm, np.zeros(len(kind)))[2])
        cpu_only_formula = int(np.count_nonzero(
            (row_op == np.arange(n_ops)) & op_has_formula & ~np.isin(np.arange(n_ops), gpu_row)))
        if cpu_only_formula:
            diagnostics.append(Diagnostic(
                "info", "cpu_ops_skipped",
                f"{cpu_only_formula} op calls with FLOP formulas launched no GPU work (CPU-side "
                "ops); GPU traces show device time only, so they are not in the table"))
    elif n_ops:
        # CPU-only: each op's self time goes to its row op; row ops count one occurrence.
        child_sum = np.bincount(parent[parent >= 0], weights=op_dur[parent >= 0], minlength=n_ops)
        self_ps = np.maximum(op_dur - child_sum, 0) * 1e3
        t_ps = np.bincount(row_op, weights=self_ps, minlength=n_ops)
        rows = np.flatnonzero(row_op == np.arange(n_ops))
        c_ids = op_cost[rows]
        _add_rows(builder, host, np.zeros(len(rows), np.int64), names[op_name[rows]], c_ids, costs,
                  op_step[rows], t_ps[rows], cost_flops[c_ids], cost_bytes[c_ids],
                  occurrences=np.ones(len(rows), np.int64), fingerprint=cost_fp[c_ids])
        lo = float(op_ts.min())
        hi = float((op_ts + op_dur).max())
        prev_end = -np.inf
        for sid, sb, se in zip(step_ids.tolist(), step_b.tolist(), step_e.tolist()):
            start = max(sb, prev_end)
            end = max(se, start)  # overlapping markers: never a negative duration
            prev_end = end
            steps.append(StepSpan(host, 0, sid, _ns_to_ps(start, base), _ns_to_ps(end, start)))
            lo, hi = min(lo, start), max(hi, end)
        spans.append(CoreSpan(host, 0, _ns_to_ps(lo, base), _ns_to_ps(hi, base)))
        timeline = kineto_timeline.cpu_timeline(spans, steps, op_thread, op_ts, op_dur, parent,
                                                names, op_name, op_cost, costs,
                                                [(t, a - base_ns, d, n)
                                                 for t, a, d, n in col.comm_spans])
        shapes = kineto_timeline.op_shapes(
            rows, t_ps[rows], [("", str(names[op_name[r]]), costs[op_cost[r]].precision)
                               for r in rows.tolist()], col.cost_shapes, op_cost)

    hw = _hw_counters(col, rt_launch, rt_ts, rt_thread, rt_dur, base, order, parent,
                      thread_sorted, ts_sorted, end_all, row_op, names, op_name, step_of)

    props = meta.get("deviceProperties")
    props = [{k: v for k, v in p.items() if not isinstance(v, float) or math.isfinite(v)}
             for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    device, device_notes = _device_info(props, spans, has_gpu or bool(hw), col)
    diagnostics.extend(device_notes)
    if n_ops and not any(costs[c].source == "formula" for c in set(op_cost.tolist())) and \
            not meta.get("record_shapes"):
        diagnostics.append(Diagnostic(
            "warning", "no_shapes",
            "the trace was recorded without record_shapes=True: op FLOPs and bytes are unknown "
            "(profile with torch.profiler.profile(record_shapes=True))"))
    if unattributed:
        diagnostics.append(Diagnostic(
            "info", "kernels_without_op",
            f"{unattributed} kernels were launched outside any aten op; they are listed by "
            "kernel name without FLOPs"))
    if hw is not None and not hw.kernel_time_known:
        diagnostics.append(Diagnostic(
            "info", "hw_counters_without_timing",
            f"{len(hw.kernels)} kernels carry CUPTI hardware counters, but the range profiler "
            "does not time kernels: hardware FLOPs are shown without rates"))
    if not has_gpu and hw is not None:
        diagnostics.append(Diagnostic(
            "warning", "no_kernel_timing",
            "this GPU trace holds no kernel events (captured with the CUPTI range profiler), so "
            "op times on the device are unknown"))
    if col.bad_events:
        diagnostics.append(Diagnostic("warning", "bad_events",
                                      f"{col.bad_events} events were skipped: a required field "
                                      "was missing or malformed"))

    ops, kernel_table = builder.build(), kernels.build()
    for table in (ops, kernel_table):  # PyTorch runs f32 matmuls in full f32 unless told otherwise
        apply_ceilings(table, device, allow_tf32=False)
    dist = meta.get("distributedInfo") or {}
    return ProfileData(
        device=device, ops=ops, steps=steps, core_spans=spans, diagnostics=diagnostics,
        has_hw_counters=hw is not None, allow_tf32=False, kernels=kernel_table, hw_counters=hw,
        hw_ops=_hw_table(hw, host) if hw is not None else None,
        rank=_int(dist.get("rank"), None) if isinstance(dist, dict) else None,
        world_size=_int(dist.get("world_size"), None) if isinstance(dist, dict) else None,
        device_properties=props, timeline=timeline, op_shapes=shapes)


KNOWN_SOURCES = frozenset({"formula", "measured", "counter"})
_HOST_COPY = re.compile(r"htod|dtoh|htoh|hosttodevice|devicetohost|hosttohost", re.I)
_PEER_COPY = re.compile(r"ptop|peer", re.I)


def _transfers(kind: np.ndarray, names: np.ndarray, nbytes: np.ndarray):
    """(HBM bytes, host-link bytes, caveat) of memcpy/memset activity: a host copy crosses the
    host link (never HBM), a device copy reads and writes HBM, a memset writes it, a peer copy
    crosses the GPU link."""
    n = len(kind)
    hbm, host = np.zeros(n), np.zeros(n)
    caveat = np.full(n, "", dtype=object)
    for i, (k, name, b) in enumerate(zip(kind.tolist(), names.tolist(), nbytes.tolist())):
        if k == KIND_MEMSET:
            hbm[i] = b
        elif k == KIND_MEMCPY:
            if _HOST_COPY.search(name):
                host[i], caveat[i] = b, HOST_TRANSFER
            elif _PEER_COPY.search(name):
                caveat[i] = PEER_TRANSFER
            else:
                hbm[i] = 2 * b
    return hbm, host, caveat


def _add_grouped(builder, host, core, op, cat, prec, src, step, t_ps, flops, nbytes, occ,
                 hbm=None, host_bytes=None, caveat=None, fingerprint=None):
    """Sum rows sharing (core, op, category, precision, source, caveat, fingerprint, step) and
    add them. `hbm` defaults to all bytes; a cost source says whether FLOPs and bytes are
    known; `fingerprint`: input shapes (ops) or launch grid (kernels), "" when unknown."""
    if not len(op):
        return
    n_rows = len(op)
    hbm = nbytes if hbm is None else hbm
    host_bytes = np.zeros(n_rows) if host_bytes is None else host_bytes
    caveat = np.full(n_rows, "", dtype=object) if caveat is None else caveat
    fingerprint = np.full(n_rows, "", dtype=object) if fingerprint is None else fingerprint
    keys = list(zip(core.tolist(), op.tolist(), cat.tolist(), prec.tolist(), src.tolist(),
                    caveat.tolist(), fingerprint.tolist(), step.tolist()))
    index: dict = {}
    codes = np.fromiter((index.setdefault(k, len(index)) for k in keys), np.int64, count=n_rows)
    n = len(index)
    first = np.zeros(n, np.int64)
    first[codes[::-1]] = np.arange(n_rows)[::-1]

    def total(w):
        return np.bincount(codes, weights=w, minlength=n)

    t = total(t_ps)
    known = np.array([x in KNOWN_SOURCES for x in src[first].tolist()], bool)
    counted = src[first] == "counter"  # hardware counters: FLOPs, no memory traffic
    builder.add_columns(n, host=host, core=core[first], program_id="", program="",
                        operation=op[first], category=cat[first], precision=prec[first],
                        flops_source=src[first], caveat=caveat[first],
                        fingerprint=fingerprint[first], flops_known=known,
                        bytes_known=known & ~counted, step=step[first],
                        occurrences=total(occ).astype(np.int64), total_time_ps=t,
                        self_time_ps=t, flops=total(flops), bytes=total(nbytes),
                        hbm_bytes=total(hbm), host_bytes=total(host_bytes))


def _add_rows(builder, host, core, op_names, cost_ids, costs, step, t_ps, flops, nbytes,
              occurrences, fingerprint=None):
    cats = np.array([costs[c].category for c in cost_ids.tolist()], dtype=object)
    precs = np.array([costs[c].precision for c in cost_ids.tolist()], dtype=object)
    srcs = np.array([costs[c].source for c in cost_ids.tolist()], dtype=object)
    _add_grouped(builder, host, np.asarray(core, np.int64), op_names, cats, precs, srcs, step,
                 t_ps, flops, nbytes, occurrences, fingerprint=fingerprint)


def div_safe(a, b):
    out = np.zeros(np.broadcast(a, b).shape)
    np.divide(a, b, out=out, where=b != 0)
    return out


def _kernel_units(names: np.ndarray) -> np.ndarray:
    """Per kernel name: "kernel:<unit>" for GEMM/convolution/attention kernels whose name says
    which math unit and precision ran, else ""."""
    out = np.full(len(names), "", dtype=object)
    for i, name in enumerate(names.tolist()):
        if kernel_names.is_matmul_kernel(name):
            unit = kernel_names.kernel_unit(name)
            if unit:
                out[i] = gpu_peaks.KERNEL_PREFIX + unit
    return out


def _kernel_view(builder, host, kind, dev, name_ids, names, row, dur, gbytes, step, op_cost,
                 cost_flops, cost_bytes, costs, name_units, grid_fp):
    """Kernel-level rows: each op call's FLOPs and bytes go to its longest kernel (the GEMM or
    convolution main kernel; helpers such as offset or split-K reduction kernels get none).
    A kernel's precision is what its name says ran, else its op's data type; a kernel outside
    any known op is categorised by its name."""
    n = len(kind)
    if not n:
        return
    kernel_name = names[name_ids]
    flops = np.zeros(n)
    nbytes = np.where(kind != KIND_KERNEL, gbytes, 0.0)
    cats = np.array([kernel_names.kernel_category(x) or "other" for x in kernel_name.tolist()],
                    dtype=object)
    precs = name_units[name_ids].copy()
    srcs = np.full(n, "none", dtype=object)
    cats[kind == KIND_MEMCPY] = "memcpy"
    cats[kind == KIND_MEMSET] = "memset"
    srcs[kind != KIND_KERNEL] = "measured"
    k = np.flatnonzero((kind == KIND_KERNEL) & (row >= 0))
    if len(k):
        c_ids = op_cost[row[k]]
        for j, c in zip(k.tolist(), c_ids.tolist()):
            cost = costs[c]
            if cost.category not in ("other", ""):
                cats[j] = cost.category
            if not precs[j]:
                precs[j] = cost.precision
            srcs[j] = cost.source
        # A GEMM/convolution call: its longest kernel does the math (split-K reductions and
        # offset helpers get none). Any other call: its kernels share its cost by their time,
        # so each runs at the call's own rate.
        o = np.lexsort((-dur[k], row[k]))
        ks = k[o]
        firsts = ks[np.r_[True, row[ks][1:] != row[ks][:-1]]]
        calls, call_of = np.unique(row[k], return_inverse=True)
        call_time = np.bincount(call_of, weights=dur[k])
        main = dict(zip(row[firsts].tolist(), firsts.tolist()))
        gemm = np.array([name_units[name_ids[main[c]]] != "" or
                         kernel_names.is_matmul_kernel(kernel_name[main[c]])
                         for c in calls.tolist()], bool)
        share = np.where(call_time[call_of] > 0, div_safe(dur[k], call_time[call_of]), 0.0)
        is_first = np.zeros(n, bool)
        is_first[firsts] = True
        share = np.where(gemm[call_of] | (call_time[call_of] <= 0), is_first[k].astype(float),
                         share)
        c_of_k = op_cost[row[k]]
        flops[k] = cost_flops[c_of_k] * share
        nbytes[k] = cost_bytes[c_of_k] * share
    hbm, host_b, caveat = _transfers(kind, kernel_name, gbytes)
    hbm = np.where(kind == KIND_KERNEL, nbytes, hbm)
    _add_grouped(builder, host, dev, kernel_name, cats, precs, srcs, step, dur * 1e3,
                 flops, nbytes, np.ones(n, np.int64), hbm=hbm, host_bytes=host_b, caveat=caveat,
                 fingerprint=grid_fp)


def _hw_counters(col, rt_launch, rt_ts, rt_thread, rt_dur, base, order, parent, thread_sorted,
                 ts_sorted, end_all, row_op, names, op_name, step_of) -> HwCounters | None:
    if not col.hw:
        return None
    kernels = []
    totals: dict = {}
    metric_sums: dict = {}
    for name, metrics in col.hw:
        flops = hw_flops_from_metrics(metrics)
        for p, v in flops.items():
            totals[p] = totals.get(p, 0.0) + v
        # Only finite numbers are kept: the metrics go out as JSON.
        metrics = {k: v for k, v in metrics.items()
                   if isinstance(v, (str, bool)) or v is None or v == _num(v)}
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                metric_sums[k] = metric_sums.get(k, 0) + v
        kernels.append({"name": name, "metrics": metrics, "flops": flops,
                        "total_flops": sum(flops.values()), "op": None, "step": NO_STEP,
                        "time_ps": None})
    # Ranges come one per launched kernel, in launch order: match them to the launches.
    launches = np.flatnonzero(rt_launch)
    matched = len(launches) == len(kernels) and len(kernels) > 0
    if matched:
        launches = launches[np.argsort(rt_ts[launches], kind="stable")]
        ops = _innermost_op(order, parent, thread_sorted, ts_sorted, end_all, rt_thread[launches],
                            rt_ts[launches] - base, rt_ts[launches] + rt_dur[launches] - base)
        steps = step_of(rt_ts[launches])
        for kern, op, st in zip(kernels, ops.tolist(), steps.tolist()):
            if op >= 0:
                kern["op"] = str(names[op_name[row_op[op]]])
            kern["step"] = int(st)
    return HwCounters(kernels=kernels, flops=totals, total_flops=float(sum(totals.values())),
                      metric_sums=metric_sums, matched_to_ops=matched, kernel_time_known=False)


def _hw_table(hw: HwCounters, host: str) -> OpTable:
    """Per-kernel hardware-counter rows (flops_source "counter"), one per kernel name and step;
    precision is the one with the most counted FLOPs."""
    b = OpTableBuilder()
    n = len(hw.kernels)
    if not n:
        return b.build()
    op = np.array([k["name"] for k in hw.kernels], dtype=object)
    prec = np.array([max(k["flops"], key=k["flops"].get) if k["flops"] and k["total_flops"] > 0
                     else "" for k in hw.kernels], dtype=object)
    _add_grouped(b, host, np.zeros(n, np.int64), op, np.full(n, "kernel", object), prec,
                 np.full(n, "counter", object), np.array([k["step"] for k in hw.kernels], np.int64),
                 np.zeros(n), np.array([k["total_flops"] for k in hw.kernels]), np.zeros(n),
                 np.ones(n, np.int64))
    return b.build()


def _device_info(props, spans, gpu: bool, col) -> tuple[DeviceInfo, list]:
    """Data-sheet peaks for the GPU that ran the kernels (Kineto carries no clock); a CPU-only
    trace has no peaks (the service applies a device file when there is one)."""
    if gpu:
        used = {s.core for s in spans}
        prop = next((p for p in props if _int(p.get("id"), None) in used), None)
        if prop is None and props:
            prop = props[0]
        if prop is None:
            return DeviceInfo(type="GPU", kind="gpu", num_cores=max(len(used), 1)), []
        peaks = kineto_device_peaks(prop, num_cores=max(len(used), 1))
        if prop.get("name"):  # the name the trace gives, not the data sheet's spelling
            peaks.device.type = str(prop["name"])
        return peaks.device, peaks.diagnostics
    return DeviceInfo(type="CPU", kind="cpu", num_cores=1), []


def read_kineto_file(path: str, host: str, max_bytes: int | None = None,
                     progress=None) -> ProfileData:
    """Read one `*.pt.trace.json[.gz]` (one worker/rank, one profiling span).

    Besides the op table it fills the PyTorch fields of ProfileData: `kernels`, `hw_counters`,
    `hw_ops`, `rank`, `world_size` and `device_properties`. Malformed events are skipped (the
    `bad_events` diagnostic counts them); a malformed file raises ProfileFormatError.
    """
    if progress:
        progress(0, 1)
    col = load_kineto(path, max_bytes=max_bytes, progress=progress)
    negative = sum(int(np.count_nonzero(np.asarray(a) < 0))
                   for a in (col.op_dur, col.gpu_dur, col.rt_dur) if len(a))
    negative += sum(1 for s in col.steps if s[2] < 0)
    try:
        data = read_kineto(col, host)
    except ProfileFormatError as exc:
        raise ProfileFormatError(f"{os.path.basename(path)}: {exc}") from None
    if negative:
        data.diagnostics.append(Diagnostic(
            "warning", "negative_durations",
            f"{negative} events have a negative 'dur'; they count as 0 µs long"))
    if progress:
        progress(1, 1)
    return data
