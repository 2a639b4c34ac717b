"""The Kineto reader's batches decoded and prepared by worker processes
(readers/kineto/batch_workers.py, stream._JsonStream._ascii_batches_apart) give what one
process gives: the same collected columns and profile for every real trace, and, for a
trace damaged in the middle (cut short, text turning non-ASCII, a bad event, a batch cut
inside a string, malformed JSON), the same events or the same error; no worker outlives the
read."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import multiprocessing as mp
import os
import time

import pytest
from test_kineto_ascii_batches import _events
from test_kineto_fast_json import TRACES, _collected, _same

from tb_roofline.readers.kineto import (
    Collector,
    batch_codes,
    batch_workers,
    fast_batch,
    fast_json,
    load_kineto,
    read_kineto_file,
    stream,
)

pytest.importorskip("msgspec")

CHUNK = 8192  # many batches from a small trace


@pytest.fixture
def apart(monkeypatch):
    """read() in one process, then with two workers on every file; (one, apart, batches the
    workers prepared), each result or the exception it raised."""
    monkeypatch.setattr(stream, "CHUNK_CHARS", CHUNK)
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "2")
    coded = []
    real = batch_codes.decode_ids
    monkeypatch.setattr(batch_codes, "decode_ids", lambda c, p: coded.append(1) or real(c, p))

    def both(read):
        out = []
        for min_mb in ("1000000", "0"):
            monkeypatch.setenv("TB_ROOFLINE_PARALLEL_MIN_MB", min_mb)
            try:
                out.append(read())
            except Exception as exc:  # noqa: BLE001 (compared below)
                out.append(exc)
            assert multiprocessing.active_children() == []  # no worker outlives the read
        return out[0], out[1], len(coded)

    return both


def _alike(one, other) -> None:
    """The same collected events, or the same error."""
    if isinstance(one, Exception) or isinstance(other, Exception):
        assert type(one) is type(other) and str(one) == str(other)
    else:
        _same(_collected(one), _collected(other), "collector")


@pytest.mark.parametrize("path", TRACES, ids=lambda p: os.path.relpath(p, "/work"))
def test_every_trace_collects_alike(path, apart):
    one, other, coded = apart(lambda: load_kineto(path))
    _alike(one, other)
    _same(one.raw_costs, other.raw_costs, "raw_costs")
    _same(one.raw_grids, other.raw_grids, "raw_grids")
    if one.n_events > 2000:
        assert coded > 0  # the workers did prepare batches


@pytest.mark.parametrize("path", TRACES[:1] + [p for p in TRACES if "h200_block" in p][:1])
def test_the_same_profile(path, apart):
    one, other, coded = apart(lambda: read_kineto_file(path, "h"))
    assert coded > 0
    _same(one, other, "profile")


def test_an_uncompressed_trace_the_workers_read_themselves(tmp_path, apart, monkeypatch):
    """A plain local file: the workers read their batches' bytes from it (offsets sent)."""
    with gzip.open(TRACES[0], "rb") as f:
        (tmp_path / "w.pt.trace.json").write_bytes(f.read())
    paths = []
    real = batch_workers.Workers.__init__
    monkeypatch.setattr(
        batch_workers.Workers, "__init__", lambda w, n, p=None: paths.append(p) or real(w, n, p)
    )
    path = str(tmp_path / "w.pt.trace.json")
    one, other, coded = apart(lambda: read_kineto_file(path, "h"))
    assert paths == [path] and coded > 0
    _same(one, other, "profile")


def _die(lasting: bool) -> None:
    os._exit(1)


def test_workers_that_die_leave_the_batches_to_the_reader(apart, monkeypatch):
    """A pool whose workers die at once (killed, out of memory): every batch is done by the
    reading process, with the same events, and the read does not fail."""
    monkeypatch.setattr(batch_workers.processes, "context", lambda preload: mp.get_context("fork"))
    monkeypatch.setattr(batch_workers, "_worker_start", _die)
    one, other, coded = apart(lambda: load_kineto(TRACES[0]))
    _alike(one, other)
    assert coded > 0


def _stuck(lasting: bool) -> None:
    time.sleep(3600)


def test_workers_that_hang_leave_the_batches_to_the_reader(apart, monkeypatch):
    """Workers that never answer (stopped, stuck): past the deadline they are stopped, every
    batch is done by the reading process, with the same events, and the read ends."""
    monkeypatch.setattr(batch_workers.processes, "context", lambda preload: mp.get_context("fork"))
    monkeypatch.setattr(batch_workers, "_worker_start", _stuck)
    monkeypatch.setattr(batch_workers, "BATCH_DEADLINE_S", 0.5)
    t = time.monotonic()
    one, other, _ = apart(lambda: load_kineto(TRACES[0]))
    assert time.monotonic() - t < 60
    _alike(one, other)


def _write(tmp_path, text: str | bytes):
    path = tmp_path / "w.pt.trace.json"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    os.utime(path, (1, 1))  # old: a parse error is the file's
    return str(path)


def _trace(middle: list | str) -> str:
    """Events, then `middle` (events, or JSON text put in as it is), then events."""
    body = json.dumps(_events(400), indent=1)[:-1] + ","
    mid = middle if isinstance(middle, str) else json.dumps(middle)[1:-1]
    return '{"traceEvents": ' + body + mid + "," + json.dumps(_events(400))[1:] + ', "x": 1}'


DAMAGED = {
    "non-ASCII name": _trace(_events(50, "aten::ñ")),
    "a bad time": _trace([{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "x", "dur": 1}]),
    "an unknown phase": _trace([{"ph": "Q", "cat": "cpu_op", "name": "a", "ts": 1}]),
    "args not an object": _trace([{"ph": "X", "cat": "kernel", "ts": 1, "args": "no"}]),
    "a collective": _trace(
        [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "record_param_comms",
                "ts": 1,
                "dur": 2,
                "pid": 1,
                "tid": 2,
                "args": {"Collective name": "allreduce", "In msg nelems": 4},
            }
        ]
    ),  # fmt: skip
    "cuts inside strings": _trace(_events(100, "n" + "},{" * 200)),
    "a cut inside a string": _trace(_events(300, "n},{x")),
    "NaN": _trace('{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": 1}'),
    "malformed JSON": _trace('{"ph": "X", "cat": "kernel" "name": "k"}'),
    "a stray bracket": _trace('{"ph": "X"}]'),
}


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_damage_in_the_middle_reads_alike(tmp_path, apart, damage):
    path = _write(tmp_path, DAMAGED[damage])
    one, other, coded = apart(lambda: load_kineto(path))
    _alike(one, other)
    assert coded > 0


def test_a_file_cut_short_fails_alike(tmp_path, apart):
    text = _trace(_events(10))
    path = _write(tmp_path, text[: len(text) * 2 // 3])
    one, other, _ = apart(lambda: load_kineto(path))
    assert isinstance(one, Exception) and "ends early" in str(one)
    _alike(one, other)


def test_bytes_that_are_not_utf8_fail_alike(tmp_path, apart):
    text = _trace(_events(10)).encode()
    at = len(text) * 3 // 4
    path = _write(tmp_path, text[:at] + b"\xff" + text[at:])
    one, other, _ = apart(lambda: load_kineto(path))
    assert isinstance(one, Exception) and "not UTF-8" in str(one)
    _alike(one, other)


def test_too_many_events_fails_alike(tmp_path, apart, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_MAX_EVENTS", "1500")
    path = _write(tmp_path, _trace(_events(10)))
    one, other, _ = apart(lambda: load_kineto(path))
    assert isinstance(one, Exception) and "1,500 trace events" in str(one)
    _alike(one, other)


def test_workers_only_where_they_pay(monkeypatch):
    """The reading process is one of the processes allowed: two allowed, one worker."""
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "2")
    monkeypatch.setenv("TB_ROOFLINE_PARALLEL_MIN_MB", "16")
    big = 16 << 20
    assert batch_workers.worker_count(big, True) == 1
    assert batch_workers.worker_count(big - 1, True) == 0  # small: one process
    assert batch_workers.worker_count(big, False) == 0  # a collector that reads each event
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "1")
    assert batch_workers.worker_count(big, True) == 0
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "2")
    monkeypatch.setattr(fast_json, "_decoder", None)
    assert batch_workers.worker_count(big, True) == 0  # no msgspec


@pytest.mark.parametrize("load, workers", [(0.2, 3), (1.2, 2), (2.6, 0), (9.0, 0)])
def test_unset_the_cores_other_jobs_leave_idle(monkeypatch, load, workers):
    monkeypatch.delenv("TB_ROOFLINE_WORKERS", raising=False)
    monkeypatch.setenv("TB_ROOFLINE_PARALLEL_MIN_MB", "0")
    monkeypatch.setattr(batch_workers.processes, "workers", lambda: 4)
    monkeypatch.setattr(batch_workers.os, "getloadavg", lambda: (load, 0.0, 0.0))
    assert batch_workers.worker_count(1, True) == workers


def test_a_worker_prepares_nothing_it_would_refuse():
    """A batch the worker does not prepare is None: the reading process judges it; one it
    prepares commits as one process commits it."""
    assert batch_workers.prepare_apart(bytearray(b'[{"ph": "X", "ts": NaN},')) is None
    assert batch_workers.prepare_apart(bytearray(b'[{"ph": "X", "ts": "1"')) is None
    text = b"[" + json.dumps(_events(3))[1:-1].encode() + b","
    prepared = batch_workers.prepare_apart(bytearray(text))
    assert prepared is not None and prepared.coded
    col, one = Collector(), Collector()
    fast_batch.commit(col, prepared)
    one.on_events(_events(3))
    _same(_collected(col), _collected(one), "collector")
