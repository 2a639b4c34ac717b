"""The memory budget (TB_ROOFLINE_MEMORY_BUDGET_MB) holds on bombs whose memory is not in their
bytes: real bombs generated here, served in a fresh process at a small budget, each either
answered with a peak RSS (above the imports) of at most 1.5x the budget or refused cleanly (a
413 naming the budget and the setting). What the conversion builds is counted as it grows
(readers/meter.py): events, distinct names, steps; an XSpace's steps once read; the real
inflated size of a multi-member gzip by inflating it (serve/service/budget.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib

import pytest
from testpaths import TESTS

from tb_roofline.synthetic import SynthConfig, write_tpu_session

REPO = os.path.dirname(TESTS)
SESSION = "2026_01_01_00_00_00"

RSS_SCRIPT = r"""
import json, resource, sys, threading, time
from tb_roofline import errors
from tb_roofline.serve.service.core import RooflineService
# What any request imports (the model, readers, answers), before the baseline.
import numpy, tb_roofline.model.records.roofline, tb_roofline.readers.kineto
import tb_roofline.readers.xspace.read
import tb_roofline.table.op_table, tb_roofline.serve.service.answers, tb_roofline.execute.pool
service = RooflineService(sys.argv[1])
service.list_runs()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = {}

def serve(run):
    t = time.monotonic()
    try:
        body = service.encoded("program", run, "", False, include_infeed_outfeed=True)[0]
        body += service.encoded("ops", run, "", False, include_infeed_outfeed=True, rows="",
                                categories=[], bound_by=[], name="", offset=0, limit=None,
                                view="op")[0]
        out[run] = ["ok", len(body)]
    except errors.TooLargeError as exc:
        out[run] = ["413", str(exc)]
    out[run].append(time.monotonic() - t)

threads = [threading.Thread(target=serve, args=(run,)) for run in sys.argv[2:]]
for t in threads:
    t.start()
for t in threads:
    t.join()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"base": base, "peak": peak, "out": out}))
"""


def _serve_fresh(logdir, runs, budget_mb: int) -> dict:
    env = dict(
        os.environ,
        TB_ROOFLINE_MEMORY_BUDGET_MB=str(budget_mb),
        TB_ROOFLINE_CACHE_DIR="off",
        TB_ROOFLINE_MEMORY_CACHE_MB="0",
        MALLOC_ARENA_MAX="1",
        PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, str(logdir), *runs],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["grown_mb"] = (result["peak"] - result["base"]) / 2**20
    return result


def _age(root):
    past = time.time() - 3600
    for folder, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(folder, name), (past, past))


def _trace(path, events, tail_member: bool = False) -> str:
    """A PyTorch trace .gz of the given event texts (bytes, each with %d for its index);
    `tail_member`: the last event in a gzip member of its own (bgzip's and pigz's layout),
    so the file's trailer gives that member's few bytes, not the whole."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(z.compress(b'{"traceEvents": ['))
        for _i, text in enumerate(events):
            f.write(z.compress(text + b","))
        if tail_member:
            f.write(z.flush())
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
        f.write(
            z.compress(b'{"ph":"X","cat":"cpu_op","name":"last","pid":1,"tid":1,"ts":0,"dur":1}]}')
        )
        f.write(z.flush())
    return path


def _steps_events(n):
    for i in range(n):
        yield (
            b'{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,'
            b'"ts":%d,"dur":10},{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,'
            b'"tid":1,"ts":%d,"dur":5}' % (i, 20 * i, 20 * i + 1)
        )


def _names_events(n):
    for i in range(n):
        yield b'{"ph":"X","cat":"cpu_op","name":"n%x","pid":1,"tid":1,"ts":%d,"dur":1}' % (i, 2 * i)


def _assert_held(result, budget_mb, runs):
    for run in runs:
        status, detail, _ = result["out"][run]
        if status == "413":  # a clean refusal names the budget and its setting
            assert f"memory budget of {budget_mb} MB" in detail, detail
            assert "TB_ROOFLINE_MEMORY_BUDGET_MB" in detail, detail
    assert result["grown_mb"] <= 1.5 * budget_mb, result


def test_steps_and_names_bombs_hold_the_budget(tmp_path):
    """A 1.6 MB .gz of 200,000 ProfilerSteps (unbounded: 918 MB peak at budget 256, a 61 MB
    /program answer) and a 2.3 MB .gz of 465,000 distinct names (1.9 GB, a 162 MB /ops
    answer): admitted by their bytes (13 and 30 MB of JSON), refused as the reader counts
    them, within 1.5x of the budget."""
    logdir = tmp_path / "logs"
    _trace(str(logdir / "steps" / "w.pt.trace.json.gz"), _steps_events(200_000))
    _trace(str(logdir / "names" / "w.pt.trace.json.gz"), _names_events(465_000))
    assert os.path.getsize(logdir / "names" / "w.pt.trace.json.gz") < 3 << 20
    _age(logdir)
    for run in ("steps", "names"):  # one fresh process each: each peak its own
        result = _serve_fresh(logdir, [run], 256)
        status, detail, took = result["out"][run]
        assert status == "413", result
        assert "convert and answer" in detail, detail  # counted, not refused by its bytes
        assert ("200,000 steps" not in detail) and "steps" in detail and "names" in detail
        _assert_held(result, 256, [run])
        assert took < 60, took  # stopped early, not after the whole conversion


def test_an_xspace_of_many_steps_is_measured_after_reading(tmp_path):
    """A 7 MB XSpace of 55,000 steps (unbounded: +274 MB at budget 64): its reading takes
    ~30 MB; the model's part is counted from the steps and rows before the analysis."""
    logdir = tmp_path / "logs"
    write_tpu_session(
        str(logdir / "xsteps"),
        "",
        SESSION,
        [
            SynthConfig(
                seed=1,
                num_cores=1,
                num_steps=55_000,
                ops_per_step=1,
                distinct_ops=2,
                with_sparse_core=False,
                with_while=False,
                with_infeed_outfeed=False,
            )
        ],
    )
    _age(logdir)
    run = "xsteps/" + SESSION
    result = _serve_fresh(logdir, [run], 64)
    assert result["out"][run][0] == "413" and "55,000 steps" in result["out"][run][1], result
    _assert_held(result, 64, [run])


def test_multi_member_gzip_is_measured_by_inflating(tmp_path):
    """Traces whose last gzip member is tiny (the trailer claims a few bytes): the estimate
    comes from inflating every member; four at once under a budget that fits one at a time
    hold it (unbounded: all four admitted at once, +736 MB at budget 256)."""
    from tb_roofline.serve.service.budget import MEMORY_PER_BYTE, estimate_bytes

    logdir = tmp_path / "logs"
    runs = [f"liar{i}" for i in range(4)]
    args = b',"args":{"Input Dims":[[' + b",".join([b"[64,64]"] * 40) + b"]]}"
    for i, run in enumerate(runs):
        events = (
            b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,'
            b'"dur":1' % (2 * k) + args + b"}"
            for k in range(32_000 + i)
        )
        _trace(str(logdir / run / "w.pt.trace.json.gz"), events, tail_member=True)
    _age(logdir)
    path = str(logdir / runs[0] / "w.pt.trace.json.gz")
    import gzip

    with gzip.open(path, "rb") as f:
        inflated = len(f.read())
    with open(path, "rb") as f:
        f.seek(-4, 2)
        trailer = int.from_bytes(f.read(4), "little")
    assert trailer < 200 and inflated > 5 << 20  # the trailer lies
    assert estimate_bytes(path, "kineto", os.path.getsize(path)) == int(
        inflated * MEMORY_PER_BYTE["kineto"]
    )
    # One fits a 128 MB budget (less the small conversions' reserve), two do not: they queue.
    need = estimate_bytes(path, "kineto", os.path.getsize(path))
    assert 64 << 20 < need < 112 << 20
    result = _serve_fresh(logdir, runs, 128)
    assert all(result["out"][r][0] == "ok" for r in runs), result
    _assert_held(result, 128, runs)


def _counting_analyses(monkeypatch) -> dict:
    from tb_roofline.model.records import roofline

    calls = {"analyze": 0}
    real = roofline.analyze

    def analyze(*a, **k):
        calls["analyze"] += 1
        return real(*a, **k)

    monkeypatch.setattr(roofline, "analyze", analyze)
    return calls


def _two_runs(tmp_path, monkeypatch):
    from tb_roofline.serve.service.core import RooflineService

    logdir = tmp_path / "logs"
    for i, run in enumerate(("a", "b")):
        write_tpu_session(str(logdir / run), "", SESSION, [SynthConfig(seed=i, num_steps=2)])
    _age(logdir)
    monkeypatch.setenv("TB_ROOFLINE_MEMORY_CACHE_MB", "0.001")  # no analysis or answer fits
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    return RooflineService(str(logdir)), f"a/{SESSION}", f"b/{SESSION}"


def test_two_big_runs_taken_in_turns_are_analysed_once_each(tmp_path, monkeypatch):
    """Analyses too large for their cache: the last two runs in use are kept (within the
    conversion budget), so A,B,A,B,A,B and repeated compares of A and B analyse twice in
    all (before: at every request, six analyses; a compare re-analysed both sides)."""
    calls = _counting_analyses(monkeypatch)
    service, a, b = _two_runs(tmp_path, monkeypatch)
    first = {}
    for run in (a, b, a, b, a, b):
        answer = service.program(run, "", True)
        assert first.setdefault(run, answer) == answer
    assert calls["analyze"] == 2
    for _ in range(3):
        assert service.compare(a, b, "", "", None, None, "op", True, "op", [], [], "", 0, None)
    assert calls["analyze"] == 2
    # A third run pushes the least recently used out (a), not the one in use (b).
    service.program(a, "", True)
    service.program(b, "", True)
    assert calls["analyze"] == 2
    write_tpu_session(str(tmp_path / "logs" / "c"), "", SESSION, [SynthConfig(seed=5)])
    _age(tmp_path / "logs" / "c")  # (a and b unchanged: their identities hold)
    service.program(f"c/{SESSION}", "", True)
    service.program(b, "", True)
    assert calls["analyze"] == 3


def test_held_analyses_keep_the_last_two_within_the_budget():
    from tb_roofline.serve.caches.memory import HeldAnalyses

    held = HeldAnalyses(keep=2, hold_s=60)
    assert held.put("a", "A", 40, 100, now=0) and held.put("b", "B", 40, 100, now=1)
    assert held.get("a", now=2) == "A"  # in use: kept on, now the most recent
    assert held.put("c", "C", 40, 100, now=3)  # two at most: b (least recent) goes
    assert held.get("b", now=4) is None and held.get("a", now=4) == "A"
    assert held.put("d", "D", 90, 100, now=5)  # within the budget together: a and c go
    assert len(held) == 1 and held.get("d", now=6) == "D"
    assert not held.put("e", "E", 101, 100, now=7)  # over the budget alone: not kept
    assert held.get("d", now=200) is None  # unused past hold_s: gone


def test_a_file_of_thousands_of_tiny_planes_is_refused_before_converting(tmp_path):
    """Each TensorCore plane costs a fixed ~5 ms whatever it holds (12,000 one-op planes: 17 MB,
    70 s of CPU): more planes than any host has is a 413 at once, the planes not converted."""
    from tb_roofline import errors
    from tb_roofline.execute import pool
    from tb_roofline.readers.xspace.tpu.file import MAX_TENSOR_CORE_PLANES
    from tb_roofline.serve.service.core import RooflineService

    logdir = tmp_path / "logs"
    config = dict(
        seed=1,
        num_steps=1,
        ops_per_step=1,
        distinct_ops=1,
        with_sparse_core=False,
        with_while=False,
        with_infeed_outfeed=False,
    )
    write_tpu_session(
        str(logdir / "many"),
        "",
        SESSION,
        [SynthConfig(num_cores=MAX_TENSOR_CORE_PLANES + 1, **config)],
    )
    write_tpu_session(str(logdir / "few"), "", SESSION, [SynthConfig(num_cores=8, **config)])
    _age(logdir)
    path = next((logdir / "many").rglob("*.xplane.pb"))
    t = time.monotonic()
    result = pool.read_files([(str(path), "xplane", "h", 1 << 32)])[0]
    assert isinstance(result, errors.ProfileTooLargeError), result
    assert f"{MAX_TENSOR_CORE_PLANES + 1:,} TensorCore planes" in str(result)
    assert time.monotonic() - t < 2.0
    service = RooflineService(str(logdir))
    with pytest.raises(errors.TooLargeError, match="TensorCore planes"):
        service.program(f"many/{SESSION}", "", True)
    assert service.program(f"few/{SESSION}", "", True)["rows"]
