"""The optional compiled decoder (readers/kineto/fast_json.py, the `fast` extra) changes nothing
but the speed: every real trace gives the same collected events and the same profile (op table,
kernel table, steps, spans, timeline, diagnostics) with msgspec as with the standard library."""

from __future__ import annotations

import dataclasses
import glob
import gzip
import json
import os

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers.kineto import (
    Collector,
    fast_batch,
    fast_json,
    load_kineto,
    read_kineto_file,
)

pytest.importorskip("msgspec")

REPO = os.path.dirname(TESTS)
TRACES = sorted(
    {
        os.path.realpath(p)
        for root in (os.path.join(REPO, "testdata"), "/work/shared/testdata")
        for p in glob.glob(os.path.join(root, "kineto", "**", "*.pt.trace.json*"), recursive=True)
    }
)


def _same(a, b, where="") -> None:
    """Deep equality of what a reader returns (numpy arrays, dataclasses, plain objects)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, where
        if a.dtype.kind == "f":
            assert np.array_equal(a, b, equal_nan=True), where
        else:
            assert a.tolist() == b.tolist(), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, float) and a != a:
        assert isinstance(b, float) and b != b, where
    elif hasattr(a, "__dict__") and not callable(a):
        assert type(a) is type(b), where
        _same(vars(a), vars(b), where)
    else:
        assert type(a) is type(b) and a == b, f"{where}: {a!r} != {b!r}"


def _both(read, monkeypatch, columns=None):
    """read() with msgspec, then with the standard library alone; counts typed batches (both
    kinds; those appended as columns also in `columns`)."""
    typed = []
    columns = [] if columns is None else columns
    real = Collector.on_structs
    monkeypatch.setattr(Collector, "on_structs", lambda c, b: typed.append(len(b)) or real(c, b))
    commit = fast_batch.commit

    def counted(c, b):
        typed.append(len(b))
        columns.append(len(b))
        commit(c, b)

    monkeypatch.setattr(fast_batch, "commit", counted)
    fast = read()
    monkeypatch.setattr(fast_json, "_decoder", None)
    plain = read()
    return fast, plain, typed


def test_the_traces_are_found():
    assert len(TRACES) >= 15


@pytest.mark.slow
@pytest.mark.parametrize("path", TRACES, ids=lambda p: os.path.relpath(p, "/work"))
def test_same_profile_with_and_without_msgspec(path, monkeypatch):
    fast, plain, typed = _both(lambda: read_kineto_file(path, "h"), monkeypatch)
    assert sum(typed) > 0  # the compiled decoder did read the events
    _same(fast, plain, "profile")


@pytest.mark.slow
@pytest.mark.parametrize("path", TRACES, ids=lambda p: os.path.relpath(p, "/work"))
def test_same_collected_events_with_and_without_msgspec(path, monkeypatch):
    fast, plain, typed = _both(lambda: load_kineto(path), monkeypatch)
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        n = len(json.load(f)["traceEvents"])
    assert fast.n_events == plain.n_events == n
    assert n - 1 <= sum(typed) <= n  # all but the array's last event (no "}," after it)
    _same(_collected(fast), _collected(plain), "collector")


def _collected(col) -> dict:
    """What a collector collected, less the compiled path's own caches."""
    return {k: v for k, v in vars(col).items() if k not in ("raw_costs", "raw_grids")}


def test_exact_nanoseconds_and_odd_events_either_way(tmp_path, monkeypatch):
    """Epoch times keep their ns through msgspec's float hook; a batch with malformed fields
    (counted as bad events alike), events that are not objects, NaN or numbers beyond a
    double goes to the standard path; a clean batch is appended as columns."""
    clean = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2,
         "ts": "1712181098123456.789", "dur": 10.25, "args": {"External id": 3}},
        {"ph": "X", "cat": "cuda_runtime", "pid": 1, "tid": 2, "ts": 1712181098123457.5,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1712181098123458, "dur": 1,
         "args": {"correlation": 7, "device": 0, "stream": 7, "grid": [1, 1, 1]}},
        {"ph": "i", "name": "Record Window End", "ts": "1712181098123470.123", "s": "g"},
        {"ph": "f", "cat": "ac2g", "id": 7, "bp": "e", "ts": 1712181098123458},
    ]  # fmt: skip
    bad = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2,
         "ts": "1712181098123460.001", "dur": "x"},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1712181098123459, "dur": 1,
         "args": "not an object"},
    ]  # fmt: skip
    odd = ',\n[1, 2], 3, {"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": 1}'
    cases = ((clean, "", 0), (clean + bad, "", 600), (clean + bad, odd, 601))
    for i, (evs, tail, n_bad) in enumerate(cases):
        # json.dumps would round the epoch times to a double: their text is written as is
        body = ",\n".join(json.dumps(e) for e in evs * 300)
        for t in ("1712181098123456.789", "1712181098123460.001", "1712181098123470.123"):
            body = body.replace(f'"{t}"', t)
        path = tmp_path / f"w{i}.pt.trace.json"
        path.write_text('{"traceEvents": [' + body + tail + "]}")
        columns: list = []
        fast, plain, typed = _both(lambda p=path: load_kineto(str(p)), monkeypatch, columns)
        monkeypatch.undo()
        _same(_collected(fast), _collected(plain), "collector")
        assert fast.op_ts[0] == 1712181098123456789 and fast.window_end == 1712181098123470123
        assert fast.bad_events == n_bad  # dur "x", args not an object; the NaN time
        assert (sum(columns) == len(evs) * 300 - 1) == (i == 0)


def test_damaged_json_is_judged_by_the_standard_path(tmp_path, monkeypatch):
    path = tmp_path / "w.pt.trace.json"
    good = '{"ph": "X", "cat": "cpu_op"},' * 2000
    path.write_text('{"traceEvents": [' + good + '{"ph": tru},' + good + '{"ph": "X"}]}')
    os.utime(path, (1, 1))  # old: a parse error is the file's, not a write in progress
    messages = []
    for decoder in (fast_json._decoder, None):
        monkeypatch.setattr(fast_json, "_decoder", decoder)
        with pytest.raises(ProfileFormatError) as err:
            load_kineto(str(path))
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "invalid JSON" in messages[0]


def test_as_dict_gives_the_fields_the_event_has():
    (ev,) = fast_json.batch_structs(
        fast_json.decode('[{"ph": "X", "cat": "kernel", "args": {"a": [1]}, "id": 3}]')
    )
    assert fast_json.as_dict(ev) == {
        **{"ph": "X", "cat": "kernel", "args": {"a": [1]}},
        **{"pid": None, "tid": None, "ts": None, "dur": 0},  # what get() defaults them to
    }
