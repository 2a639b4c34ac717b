"""The compiled path's batches as columns: what `Collector.on_events` does one event at a time,
done per batch with C-level iteration (attribute getters, `map`, `np.fromiter`) and numpy.

A batch (fast_json.Event items) is first prepared without touching the collector: every field
the collector reads is converted and checked here, and any value the per-event path would
judge otherwise (a missing time, a value out of range, an id beyond int64, JSON the standard
library reads differently...) refuses the batch, which the standard library then decodes: so
a damaged file gives the same events, counts and messages either way. Names, threads, costs
and launch grids are interned in the order the per-event path meets them (each registered at
its first event, threads first met by a serving step's or a collective's annotation
included), so the ids, and everything built on them, are the same. A batch holding events
whose effects interleave with the columns (an op or NCCL kernel naming its collective, an
engine label's op) is left to the per-event path (`prepare` returns None).
"""

from __future__ import annotations

import dataclasses
import operator
from itertools import chain, compress, repeat

import numpy as np

from tb_roofline.readers.kineto import batch_codes, fast_json
from tb_roofline.readers.kineto.event_fields import (
    MAX_DEVICE,
    MAX_DUR_NS,
    MAX_TS_NS,
    BadEvent,
    Ns,
    dur_ns,
    ts_ns,
)
from tb_roofline.readers.kineto.events import (
    ANNOTATION_COMM,
    ANNOTATION_LABEL,
    ANNOTATION_NONE,
    ANNOTATION_SERVING,
    HOST_CAUSE_CALLS,
    MAX_NAME_CHARS,
    RUNTIME_CATEGORIES,
    Collector,
    annotation_kind,
)

CPU, RUNTIME, KERNEL, MEMCPY, MEMSET, SIDE = 1, 2, 3, 4, 5, 6  # KERNEL + events.KIND_*
CATEGORY = {
    "cpu_op": CPU,
    **dict.fromkeys(RUNTIME_CATEGORIES, RUNTIME),
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "user_annotation": SIDE,
    "cuda_profiler_range": SIDE,
}
COMM_OP = "record_param_comms"
UNMET = -2  # no id: the ids of costs include -1 (an op the per-event path finds bad)
# An event's class by its `cat` alone: an unread phase's is None, that of counters and instants
# (the record window's end) MISSING, so only complete events have a category (fast_json.py).
_CLASS = {**CATEGORY, fast_json.MISSING: SIDE}
_CAT, _NAME = (operator.attrgetter(k) for k in ("cat", "name"))
_TS, _DUR, _ARGS = (operator.attrgetter(k) for k in ("ts", "dur", "args"))
_THREAD = operator.attrgetter("pid", "tid")  # an event's thread key
_EXT, _CORR, _COLL = (operator.attrgetter(k) for k in ("ext", "corr", "collective"))
_COST_KEY = tuple(operator.attrgetter(k) for k in ("dims", "types", "concrete", "flop", "gb"))
_GPU_FIELDS = {k: operator.attrgetter(k) for k in ("device", "stream", "grid", "nbytes")}


@dataclasses.dataclass
class Prepared:
    """One batch, converted and checked, ready to append (`commit`)."""

    n: int
    side: list  # events the per-event path reads (counters, steps, ranges) as dicts
    long_names: int
    threads: list  # (pid, tid) in the order they are first met
    names: list  # names (cut) in the order they are first met
    new_costs: list  # (cost key, name, args dict) of each key's first op in the batch
    new_grids: list  # (grid text, grid value) of each grid's first kernel in the batch
    cpu: dict
    rt: dict
    gpu: dict
    coded: bool = False  # its keys as codes into the lists above (batch_codes.py)

    def __len__(self) -> int:
        return self.n


def decoder(columns: bool = True):
    """The batch decoder (text -> Prepared, or the Events for `Collector.on_structs`;
    fast_json.DecodeError for what it refuses), or None without msgspec. Without `columns`
    (a collector that reads each event: Collector.COLUMNS), always the Events."""
    if fast_json._decoder is None:
        return None
    return decode_batch if columns else decode_structs


def decode_structs(text: str, seen: Collector | None = None) -> list:
    return fast_json.batch_structs(fast_json.decode(text))


def decode_batch(text: str, seen: Collector | None = None):
    batch = fast_json.decode(text)
    try:
        prepared = prepare(batch, seen)
    except (TypeError, ValueError, OverflowError, BadEvent):
        raise fast_json.Refused from None
    return fast_json.batch_structs(batch) if prepared is None else prepared


def prepare(batch: list, seen: Collector | None = None) -> Prepared | None:
    """The batch as columns (raises what refuses it; None: left to the per-event path).
    `seen`: the collector the batch goes to, read (not changed) for the threads, names and
    costs it has already met."""
    seen = seen or Collector()
    n = len(batch)
    code = np.fromiter(map(_CLASS.get, map(_CAT, batch), repeat(0)), np.int8, n)
    side_pos = np.flatnonzero(code == SIDE)
    side = _pick(batch, side_pos)
    kinds = list(map(_annotation_kind, side))
    if ANNOTATION_LABEL in kinds:
        return None
    side_keys, side_threads = _side_threads(side, kinds, side_pos.tolist())
    cpu, rt, gpu = (np.flatnonzero(c) for c in _category_masks(code))
    cpu_ev, rt_ev, gpu_ev = _pick(batch, cpu), _pick(batch, rt), _pick(batch, gpu)
    cpu_args = _args(cpu_ev, "cpu")
    gpu_args = _args(gpu_ev, "gpu")
    cpu_names, long_cpu = _names(cpu_ev, None)
    cpu_name_ids = _ids(seen.names, cpu_names)
    if _has_collective(cpu_args, cpu_names, cpu_name_ids, seen.names) or any(
        map(len, map(_COLL, gpu_args))
    ):
        return None
    gpu_names, long_gpu = _names(gpu_ev, "")
    c = _cpu(cpu_ev, cpu_args, cpu_names)
    r = _runtime(rt_ev)
    g = _gpu(gpu_ev, gpu_args, gpu_names, code[gpu] - KERNEL)
    rt_keys = list(compress(r["keys"], r["registers"].tolist()))
    rt_pos = rt[r["registers"]]
    c["thread_ids"], r["thread_ids"] = _ids(seen.threads, c["keys"]), _ids(seen.threads, rt_keys)
    c["name_ids"], g["name_ids"] = cpu_name_ids, _ids(seen.names, gpu_names)
    c["cost_ids"] = _ids(seen.raw_costs, c["cost_keys"], UNMET)
    return Prepared(
        n=n,
        side=list(map(fast_json.read_dict, side)),
        long_names=long_cpu + long_gpu,
        threads=_first_met(
            seen.threads,
            (c["keys"], cpu, c["thread_ids"]),
            (rt_keys, rt_pos, r["thread_ids"]),
            (side_keys, side_threads, _ids(seen.threads, side_keys)),
        ),
        names=_first_met(
            seen.names, (cpu_names, cpu, c["name_ids"]), (gpu_names, gpu, g["name_ids"])
        ),
        new_costs=_new_keys(c["cost_keys"], cpu_ev, cpu_names, seen.raw_costs, c["cost_ids"]),
        new_grids=[(k, fast_json._args(k) if k else None) for k in dict.fromkeys(g["grids"])],
        cpu=c,
        rt=r,
        gpu=g,
    )


def _category_masks(code):
    return code == CPU, code == RUNTIME, (code >= KERNEL) & (code <= MEMSET)


def _has_collective(args: list, names: list, ids, seen: dict) -> bool:
    """Whether an op names the collective it runs (`record_param_comms` with a "Collective
    name": the per-event path adds its fact in event order among the annotations'). `ids`:
    the names' ids in `seen` when it has them all (then compared as numbers)."""
    if ids is None:
        at = [i for i, x in enumerate(names) if x == COMM_OP] if COMM_OP in names else []
    else:
        comm = seen.get(COMM_OP)
        at = [] if comm is None else np.flatnonzero(ids == comm).tolist()
    return any(len(args[i].collective) for i in at)


def _annotation_kind(ev) -> int:
    """events.annotation_kind of a user annotation; ANNOTATION_NONE for other events."""
    if ev.ph != "X" or ev.cat != "user_annotation" or type(ev.name) is not str:
        return ANNOTATION_NONE
    return annotation_kind(ev.name)


def _side_threads(side: list, kinds: list, positions: list) -> tuple[list, np.ndarray]:
    """(pid, tid) and batch position of each annotation that registers its thread (a serving
    step's, a collective's run), where the per-event path registers it: after its times
    pass."""
    keys, pos = [], []
    for ev, kind, p in zip(side, kinds, positions):
        if kind in (ANNOTATION_SERVING, ANNOTATION_COMM):
            try:
                ts_ns(ev.ts), dur_ns(ev.dur)
            except (BadEvent, TypeError, ValueError, OverflowError):
                continue
            keys.append((ev.pid, ev.tid))
            pos.append(p)
    return keys, np.asarray(pos, np.int64)


def _pick(batch: list, idx) -> list:
    """batch[i] for i in idx, as a list (C-level)."""
    if len(idx) == 0:
        return []
    got = operator.itemgetter(*idx.tolist())(batch)
    return list(got) if len(idx) > 1 else [got]


def _args(events: list, kind: str) -> list:
    """The events' args decoded into the kind's typed struct (an event without args: all
    defaults, as the per-event path reads `{}`)."""
    raws = list(map(_ARGS, events))
    if any(map(operator.is_, raws, repeat(fast_json.NO_VALUE))):
        raws = [b"{}" if r is fast_json.NO_VALUE else r for r in raws]
    return list(map(fast_json.ARGS_DECODERS[kind], raws))


def _names(events: list, default, cut: bool = True) -> tuple[list, int]:
    """The events' names (the category's default for a missing one, None refuses), cut to
    MAX_NAME_CHARS as the collector cuts them (`cut`), and how many were cut."""
    names = list(map(_NAME, events))
    if fast_json.MISSING in names:
        if default is None:
            raise BadEvent
        names = [default if x is fast_json.MISSING else x for x in names]
    if not cut or not names or max(map(len, names)) <= MAX_NAME_CHARS:
        return names, 0
    long = [i for i, x in enumerate(names) if len(x) > MAX_NAME_CHARS]
    for i in long:
        names[i] = names[i][:MAX_NAME_CHARS] + "…"
    return names, len(long)


def _ns(values: list, limit: int) -> np.ndarray:
    """Times (µs ints, or ns already: event_fields.Ns) as int64 ns; any other value, or one
    out of range, refuses the batch (the per-event path would count a bad event)."""
    n = len(values)
    types = set(map(type, values))
    if not types <= {int, Ns}:
        raise BadEvent
    raw = np.fromiter(values, np.int64, n)
    if Ns not in types:  # µs only (ints)
        is_ns = np.zeros(n, bool)
    elif int not in types:  # ns only (the JSON had floats)
        is_ns = np.ones(n, bool)
    else:
        is_ns = np.fromiter(map(isinstance, values, repeat(Ns)), bool, n)
    if np.any(np.abs(raw[~is_ns]) >= 2**53):
        raise BadEvent
    ns = np.where(is_ns, raw, raw * 1000)
    if np.any(ns <= -limit) or np.any(ns >= limit):
        raise BadEvent
    return ns


def _ints(values, n: int) -> np.ndarray:
    return np.fromiter(values, np.int64, n)


def _times(events: list) -> tuple[np.ndarray, np.ndarray]:
    return _ns(list(map(_TS, events)), MAX_TS_NS), _ns(list(map(_DUR, events)), MAX_DUR_NS)


def _cpu(events: list, args: list, names: list) -> dict:
    ts, dur = _times(events)
    # an inductor kernel's cost also depends on its kernel_flop and kernel_num_gb
    inductor = any(x.startswith("triton_") for x in set(names))
    texts = [list(map(bytes, map(get, args))) for get in _COST_KEY[: 5 if inductor else 3]]
    return {
        "ts": ts,
        "dur": dur,
        "ext": _ints(map(_EXT, args), len(args)),
        "keys": list(map(_THREAD, events)),
        "names": names,
        "cost_keys": list(zip(names, *texts)),
    }


def _runtime(events: list) -> dict:
    names, _ = _names(events, "", cut=False)
    args = _args(events, "runtime")
    n = len(events)
    corr = _ints(map(_CORR, args), n)
    host = np.fromiter(map(HOST_CAUSE_CALLS.__contains__, names), bool, n)
    keep = corr >= 0
    ts, dur = _times(events)
    return {
        "names": names,
        "keys": list(map(_THREAD, events)),
        "registers": host | keep,
        "host": host,
        "keep": keep,
        "ts": ts,
        "dur": dur,
        "corr": corr,
        "ext": _ints(map(_EXT, args), n),
    }


def _gpu(events: list, args: list, names: list, kind) -> dict:
    n = len(events)
    dev = _ints(map(_GPU_FIELDS["device"], args), n)
    nbytes = np.fromiter(map(_GPU_FIELDS["nbytes"], args), np.float64, n)
    if np.any(np.abs(dev) >= MAX_DEVICE) or not np.all((nbytes >= 0) & (nbytes < 1e18)):
        raise BadEvent
    kernel = (kind == 0).tolist()
    grids = list(map(bytes, map(_GPU_FIELDS["grid"], compress(args, kernel))))
    ts, dur = _times(events)
    return {
        "kind": kind.astype(np.int8),
        "ts": ts,
        "dur": dur,
        "dev": dev,
        "corr": _ints(map(_CORR, args), n),
        "ext": _ints(map(_EXT, args), n),
        "names": names,
        "bytes": nbytes,
        "stream": _ints(map(_GPU_FIELDS["stream"], args), n),
        "kernel": np.asarray(kernel, bool),
        "grids": grids,
    }


def _ids(seen: dict, keys: list, unmet: int = -1) -> np.ndarray | None:
    """The ids `seen` gives the keys (the usual case after the first batches: commit then
    looks nothing up again), None when one is not there yet (`unmet`: an id no key has)."""
    ids = _ints(map(seen.get, keys, repeat(unmet)), len(keys))
    return None if np.any(ids == unmet) else ids


def _first_met(seen: dict, *sources) -> list:
    """The distinct keys of several (keys, event positions, their ids in `seen` or None)
    sources not `seen`, in the order of their first event in the batch."""
    if all(ids is not None for _, _, ids in sources):
        return []
    new = [k for k in dict.fromkeys(chain.from_iterable(k for k, _, _ in sources)) if k not in seen]
    first: dict = {}
    for keys, pos, _ in sources:
        for k, p in dict(zip(reversed(keys), reversed(pos.tolist()))).items():
            if p < first.get(k, p + 1):
                first[k] = p
    return sorted(new, key=first.__getitem__)


def _known(table: dict, keys: list, ids: np.ndarray | None) -> np.ndarray:
    """The ids of keys all registered in `table` (those prepare found, when it found all)."""
    return ids if ids is not None else _ints(map(table.__getitem__, keys), len(keys))


def _new_keys(keys: list, events: list, names: list, known: dict, ids) -> list:
    """(key, name, args dict) of the first op in the batch of each cost key not `known`
    (none when prepare found the `ids` of all)."""
    if ids is not None:
        return []
    new = [k for k in dict.fromkeys(keys) if k not in known]
    if not new:
        return []
    first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
    out = []
    for k in new:
        raw = events[first[k]].args
        args = {} if raw is fast_json.NO_VALUE else fast_json._args(raw)
        out.append((k, names[first[k]], args))
    return out


def commit(col: Collector, p: Prepared) -> None:
    """Append a prepared batch: what `Collector.on_events` appends for the same events."""
    register(col, p)
    if p.coded:
        batch_codes.decode_ids(col, p)
    _commit_cpu(col, p.cpu)
    _commit_runtime(col, p.rt)
    _commit_gpu(col, p.gpu)
    for ev in p.side:
        col._event(ev)


def register(col: Collector, p: Prepared) -> None:
    """The batch's counts, and its threads, names, costs and grids not met before, registered
    in the order the per-event path meets them."""
    col.n_events += p.n
    col.long_names += p.long_names
    for pid, tid in p.threads:
        col.thread_id(pid, tid)
    for name in p.names:
        col.name_id(name)
    costs, grids = col.raw_costs, col.raw_grids
    for key, name, args in p.new_costs:
        if key not in costs:
            costs[key] = _registered(lambda: col.cost_id(name, args))
    for key, value in p.new_grids:
        if key not in grids:
            grids[key] = _registered(lambda: col.grid_id(value))


def _registered(register) -> int:
    """An id registered now, or -1 where the per-event path finds the event bad."""
    try:
        return register()
    except (BadEvent, TypeError, ValueError, OverflowError):
        return -1


def _extend(column, values: np.ndarray) -> None:
    column.frombytes(values.astype(np.int8 if column.typecode == "b" else np.int64).tobytes())


def _commit_cpu(col: Collector, c: dict) -> None:
    n = len(c["ts"])
    cost = _known(col.raw_costs, c["cost_keys"], c["cost_ids"])
    ok = cost >= 0
    col.bad_events += int(n - ok.sum())
    _extend(col.op_thread, _known(col.threads, c["keys"], c["thread_ids"])[ok])
    _extend(col.op_ts, c["ts"][ok])
    _extend(col.op_dur, c["dur"][ok])
    _extend(col.op_name, _known(col.names, c["names"], c["name_ids"])[ok])
    _extend(col.op_ext, c["ext"][ok])
    _extend(col.op_cost, cost[ok])


def _commit_runtime(col: Collector, r: dict) -> None:
    reg = r["registers"]
    thread = np.full(len(reg), -1, np.int64)
    ids = r["thread_ids"]
    if ids is None:
        ids = _known(col.threads, list(compress(r["keys"], reg.tolist())), None)
    thread[reg] = ids
    names, ts, dur = r["names"], r["ts"], r["dur"]
    for i in np.flatnonzero(r["host"]).tolist():
        col.host_calls.append((names[i], int(thread[i]), int(ts[i]), int(dur[i])))
    keep = np.flatnonzero(r["keep"])
    kept = _pick(names, keep)
    distinct = dict.fromkeys(kept)
    launch = np.fromiter(map({x: "Launch" in x for x in distinct}.__getitem__, kept), bool)
    graph = _graph_launches(distinct)
    if graph:  # in the events' order, as the per-event path appends them
        for i in keep[np.fromiter(map(graph.__contains__, kept), bool, len(kept))].tolist():
            col.graph_launches.append((int(r["corr"][i]), int(thread[i]), int(ts[i]), int(dur[i])))
    _extend(col.rt_corr, r["corr"][keep])
    _extend(col.rt_ext, r["ext"][keep])
    _extend(col.rt_thread, thread[keep])
    _extend(col.rt_ts, ts[keep])
    _extend(col.rt_dur, dur[keep])
    _extend(col.rt_launch, launch)


def _graph_launches(names) -> frozenset:
    """Those of the names that launch a captured graph (kineto/capture.py)."""
    return frozenset(x for x in names if "GraphLaunch" in x)


def _commit_gpu(col: Collector, g: dict) -> None:
    n = len(g["ts"])
    grid = np.zeros(n, np.int64)
    kernel = g["kernel"]
    ids = g.get("grid_ids")
    if ids is None:
        ids = _ints(map(col.raw_grids.__getitem__, g["grids"]), int(kernel.sum()))
    grid[kernel] = ids
    ok = grid >= 0
    col.bad_events += int(n - ok.sum())
    _extend(col.gpu_kind, g["kind"][ok])
    for column, key in (
        (col.gpu_ts, "ts"),
        (col.gpu_dur, "dur"),
        (col.gpu_dev, "dev"),
        (col.gpu_corr, "corr"),
        (col.gpu_ext, "ext"),
        (col.gpu_stream, "stream"),
    ):
        _extend(column, g[key][ok])
    _extend(col.gpu_name, _known(col.names, g["names"], g["name_ids"])[ok])
    col.gpu_bytes.frombytes(g["bytes"][ok].astype(np.float64).tobytes())
    _extend(col.gpu_grid, grid[ok])
