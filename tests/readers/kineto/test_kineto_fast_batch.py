"""Batches appended as columns (readers/kineto/fast_batch.py) collect what the per-event path
collects: the same columns, ids in the same order, the same bad events, on crafted traces
whose ids are met in an interleaved order and on fuzzed real traces (fields deleted or of odd
types and values, which the compiled path refuses to the standard one or reads alike)."""

from __future__ import annotations

import json
import os
import random

import pytest
from test_kineto_fast_json import _both, _collected, _same
from test_kineto_fuzz import DOCS, _mutate_doc

from tb_roofline.readers.kineto import fast_json, load_kineto

pytest.importorskip("msgspec")

LONG = "k" * 1500  # cut to MAX_NAME_CHARS, counted per event


def _op(name, tid, ts, args=None):
    ev = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": 2}
    return ev if args is None else dict(ev, args=args)


def _crafted() -> list:
    """Ids met in an order no category alone gives: a thread first met by a collective's
    annotation, names first met by kernels, costs whose inputs are written differently."""
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 9,
         "ts": 1.5, "dur": 1, "args": {"correlation": 1, "External id": 4}},
        {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1, "tid": 7,
         "ts": 2, "dur": 5, "args": {"Input Dims": [[4]], "Input type": ["float"]}},
        {"ph": "X", "cat": "kernel", "name": LONG, "pid": 0, "tid": 3, "ts": 3, "dur": 1,
         "args": {"correlation": 1, "device": 0, "stream": 7, "grid": [2, 1, 1]}},
        {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 3, "ts": 4, "dur": 1,
         "args": {"correlation": 5, "device": 0, "stream": 7, "grid": [2,1,1]}},
        {"ph": "X", "cat": "gpu_memcpy", "pid": 0, "tid": 3, "ts": 4.25, "dur": 1,
         "args": {"correlation": 6, "device": 0, "stream": 7, "bytes": 4096}},
        _op("aten::mm", 8, 6, {"External id": 5, "Input Dims": [[2,3],[3,4]],
                               "Input type": ["float", "float"]}),
        _op("aten::mm", 7, 5, {"External id": 4, "Input Dims": [[2, 3], [3, 4]],
                               "Input type": ["float", "float"], "Sequence number": 1}),
        _op(LONG, 8, 7),
        _op("k2", 9, 8, {"External id": 6}),
        _op("triton_poi_fused_0", 9, 9, {"kernel_flop": 100, "kernel_num_gb": 0.5}),
        _op("triton_poi_fused_0", 9, 10, {"kernel_flop": 200, "kernel_num_gb": 0.5}),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1,
         "tid": 10, "ts": 11, "dur": 3, "args": {}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 9,
         "ts": 12, "dur": 1, "args": {"correlation": 8}},
        {"ph": "X", "cat": "cuda_runtime", "pid": 1, "tid": 9, "ts": 13, "dur": 1,
         "args": {"correlation": 9}},
        {"ph": "X", "cat": "kernel", "name": "k3", "ts": 14, "dur": 1,
         "args": {"correlation": 9, "device": 1, "grid": None}},
        {"ph": "X", "cat": "kernel", "name": "k3", "ts": 15, "dur": 1, "args": {"device": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 7,
         "ts": 1, "dur": 20},
        {"ph": "C", "name": "counter", "pid": 1, "ts": 16, "args": {"v": 1}},
        {"ph": "f", "cat": "ac2g", "id": 1, "bp": "e", "ts": 3},
    ]  # fmt: skip


def _write(path, events) -> str:
    path.write_text(json.dumps({"traceEvents": events + [{"ph": "M", "name": "end"}]}))
    return str(path)


def test_crafted_batches_are_columns_and_collect_alike(tmp_path, monkeypatch):
    path = _write(tmp_path / "w.pt.trace.json", _crafted() * 50)
    columns: list = []
    fast, plain, _ = _both(lambda: load_kineto(path), monkeypatch, columns)
    assert sum(columns) == len(_crafted()) * 50  # every event but the last, as columns
    _same(_collected(fast), _collected(plain), "collector")
    assert fast.long_names == 100 and list(fast.threads)[:2] == [(1, 9), (1, 7)]
    assert len(fast.op_ts) == 300 and fast.bad_events == 0


@pytest.mark.parametrize(
    "extra",
    [
        # record_param_comms adds its collective's fact among the annotations': per event
        _op("record_param_comms", 7, 3, {"Collective name": "allreduce", "dtype": "Float"}),
        # an engine label adds an op among the others: per event
        {"ph": "X", "cat": "user_annotation", "name": "wvSplitK 4x8x16", "pid": 1, "tid": 7,
         "ts": 3, "dur": 1},
    ],
)  # fmt: skip
def test_batches_with_ordered_effects_collect_alike(tmp_path, monkeypatch, extra):
    path = _write(tmp_path / "w.pt.trace.json", (_crafted() + [extra]) * 50)
    fast, plain, typed = _both(lambda: load_kineto(path), monkeypatch)
    assert sum(typed) > 0
    _same(_collected(fast), _collected(plain), "collector")


@pytest.mark.parametrize(
    "odd",
    [
        {"correlation": 2**63 + 1},  # beyond int64: the per-event path reads no correlation
        {"correlation": 3.0},  # an integral float: read as 3
        {"correlation": True},
        {"device": 2**31},
        {"bytes": -1},
        {"bytes": 1e300},
        {"stream": None},
        {"grid": [1.5, 1, 1]},
        {"External id": "4"},
    ],
)
def test_odd_values_collect_alike(tmp_path, monkeypatch, odd):
    events = _crafted() * 50
    for ev in events[::7]:
        if isinstance(ev.get("args"), dict) and ev.get("ph") == "X":
            ev["args"] = dict(ev["args"], **odd)
    path = _write(tmp_path / "w.pt.trace.json", events)
    fast, plain, _ = _both(lambda: load_kineto(path), monkeypatch)
    _same(_collected(fast), _collected(plain), "collector")


def test_a_cost_that_raises_registers_nothing_either_way(tmp_path, monkeypatch):
    """A cost whose inputs raise while it is worked out leaves nothing half-registered: every
    op with those inputs is a bad event, on both paths."""
    odd = _op("aten::conv2d", 7, 3, {"Input Dims": [[1], [2]], "Input type": [["a"]]})
    path = _write(tmp_path / "w.pt.trace.json", (_crafted() + [odd]) * 50)
    fast, plain, _ = _both(lambda: load_kineto(path), monkeypatch)
    _same(_collected(fast), _collected(plain), "collector")
    assert fast.bad_events == 50 and len(fast.costs) == len(fast.cost_shapes)


def _outcome(path: str):
    """The collector, or the error, a read gives."""
    try:
        return _collected(load_kineto(path))
    except Exception as exc:  # a damaged file: compared by its kind and message
        return (type(exc), str(exc))


@pytest.mark.slow
@pytest.mark.parametrize("trace", sorted(DOCS))
def test_fuzzed_traces_collect_alike(tmp_path, monkeypatch, trace):
    rnd = random.Random(trace)
    for i in range(4):
        path = tmp_path / f"w{i}.pt.trace.json"
        path.write_text(json.dumps(_mutate_doc(DOCS[trace], rnd)))
        os.utime(path, (1, 1))  # old: a bad file is judged, not reported as being written
        fast = _outcome(str(path))
        with monkeypatch.context() as m:
            m.setattr(fast_json, "_decoder", None)
            plain = _outcome(str(path))
        _same(fast, plain, f"{trace} case {i}")
