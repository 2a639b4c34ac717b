"""The worker pool (execute/pool.py): exactly the serial answers, used only where it pays,
and gone when it should be (idle, at shutdown, with its parent, inside TensorBoard)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from tb_server import get_json, tensorboard
from testpaths import TESTS

from tb_roofline.execute import pool
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.synthetic import SynthConfig, write_tpu_session
from tb_roofline.table.op_table import ALL_COLUMNS

REPO = os.path.dirname(TESTS)
RUN = "multi"
SESSION = RUN + "/2026_01_01_00_00_00"  # the run as the service names it


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("pool"))
    cfgs = [
        SynthConfig(
            seed=30 + h,
            num_cores=3,
            num_steps=5,
            ops_per_step=60,
            distinct_ops=25,
            hostname=f"h{h}",
            program_seed=30,
            host_offload_pairs=1,
        )
        for h in range(4)
    ]
    write_tpu_session(root, RUN, "2026_01_01_00_00_00", cfgs)
    return root


def _files(logdir):
    session = os.path.join(logdir, RUN, "plugins", "profile", "2026_01_01_00_00_00")
    return [os.path.join(session, f) for f in sorted(os.listdir(session))]


@pytest.fixture
def pooled(monkeypatch):
    """Every read with more than one unit of work goes through two workers."""
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "2")
    monkeypatch.setenv("TB_ROOFLINE_PARALLEL_MIN_MB", "0")
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    pool.shutdown()
    yield
    pool.shutdown()


def _answers(logdir) -> str:
    service = RooflineService(logdir)
    out = []
    for host in ("", "h0", "h3"):
        for io in (True, False):
            out.append(service.program(SESSION, host, io))
            out.append(service.ops(SESSION, host, io))
        out.append(service.diagnostics(SESSION, host))
        out.append(service.device(SESSION, host))
    return json.dumps(out, sort_keys=True)  # floats written exactly (repr)


def _serial(monkeypatch, fn):
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "1")
    try:
        return fn()
    finally:
        monkeypatch.setenv("TB_ROOFLINE_WORKERS", "2")


def _same_profiles(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for col in ALL_COLUMNS + ("op",):
            u, v = x.ops[col], y.ops[col]
            if u.dtype == object:
                assert u.tolist() == v.tolist(), col
            else:
                np.testing.assert_array_equal(u, v, err_msg=col)
        assert x.steps == y.steps and x.core_spans == y.core_spans
        assert x.device == y.device
        assert [d.to_json() for d in x.diagnostics] == [d.to_json() for d in y.diagnostics]


def test_pool_gives_exactly_the_serial_answers(logdir, pooled, monkeypatch):
    jobs = [(p, "xplane", f"h{i}", None) for i, p in enumerate(_files(logdir))]
    serial = _serial(monkeypatch, lambda: pool.read_files(jobs))
    assert not pool.pool_running()
    pooled_data = pool.read_files(jobs)
    assert pool.pool_running()
    _same_profiles(serial, pooled_data)
    expected = _serial(monkeypatch, lambda: _answers(logdir))
    assert _answers(logdir) == expected


def test_pool_only_where_it_pays(logdir, tmp_path, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    pool.shutdown()
    one_plane = str(tmp_path)
    path = write_tpu_session(one_plane, "", "s", [SynthConfig(seed=1, num_cores=1)])[0]
    monkeypatch.setenv("TB_ROOFLINE_PARALLEL_MIN_MB", "0")
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "2")
    pool.read_files([(path, "xplane", "h", None)])  # one unit of work
    assert not pool.pool_running()
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "1")  # one core
    pool.read_files([(p, "xplane", "h", None) for p in _files(logdir)])
    assert not pool.pool_running()
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "2")
    monkeypatch.delenv("TB_ROOFLINE_PARALLEL_MIN_MB")  # small files: not worth the workers
    pool.read_files([(p, "xplane", "h", None) for p in _files(logdir)])
    assert not pool.pool_running()
    assert not multiprocessing.active_children()


def test_shutdown_and_idle_stop_the_workers(logdir, pooled, monkeypatch):
    jobs = [(p, "xplane", "h", None) for p in _files(logdir)]
    pool.read_files(jobs)
    assert pool.pool_running() and multiprocessing.active_children()
    pool.shutdown()
    assert not pool.pool_running() and not multiprocessing.active_children()
    monkeypatch.setenv("TB_ROOFLINE_POOL_IDLE_S", "0.2")
    pool.read_files(jobs)
    assert pool.pool_running()
    deadline = time.monotonic() + 10
    while (
        pool.pool_running() or multiprocessing.active_children()
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pool.pool_running() and not multiprocessing.active_children()


def test_idle_zero_lets_the_workers_go_once_a_conversion_is_done(logdir, pooled, monkeypatch):
    """TB_ROOFLINE_POOL_IDLE_S=0 (what the CLI sets): the pool is gone when `read_files`
    returns and its processes leave without being waited for; the next read starts another,
    and the answers are the serial ones."""
    monkeypatch.setenv("TB_ROOFLINE_POOL_IDLE_S", "0")
    jobs = [(p, "xplane", f"h{i}", None) for i, p in enumerate(_files(logdir))]
    serial = _serial(monkeypatch, lambda: pool.read_files(jobs))
    for _ in range(2):
        got = pool.read_files(jobs)
        assert not pool.pool_running()
        _same_profiles(serial, got)
        deadline = time.monotonic() + 10
        while multiprocessing.active_children() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not multiprocessing.active_children()


def test_cli_command_in_process_keeps_no_workers_and_leaves_the_environment(
    logdir, pooled, monkeypatch, capsys
):
    """A command run in the caller's process (cli.main) lets its workers go at once (the
    variable unset or empty), keeps them when the caller set a time, and never writes the
    caller's environment."""
    from tb_roofline.serve.cli import main as cli

    for value in (None, ""):
        if value is None:
            monkeypatch.delenv("TB_ROOFLINE_POOL_IDLE_S", raising=False)
        else:
            monkeypatch.setenv("TB_ROOFLINE_POOL_IDLE_S", value)
        assert cli.main(["report", logdir, "--run", SESSION, "--no-progress"]) == 0
        assert not pool.pool_running()
        assert os.environ.get("TB_ROOFLINE_POOL_IDLE_S") == value
    monkeypatch.setenv("TB_ROOFLINE_POOL_IDLE_S", "30")
    assert cli.main(["report", logdir, "--run", SESSION, "--no-progress"]) == 0
    assert pool.pool_running()  # the caller asked for idle workers to wait
    assert os.environ["TB_ROOFLINE_POOL_IDLE_S"] == "30"
    assert capsys.readouterr().out


def test_a_calls_defaults_are_its_own_thread_s():
    """settings.run_with_defaults: the default holds inside the call, not in a thread it
    starts nor after it; a variable set in the environment still wins."""
    from tb_roofline import settings

    seen = {}

    def call():
        seen["inside"] = settings.number(settings.POOL_IDLE_S)
        t = threading.Thread(
            target=lambda: seen.update(thread=settings.number(settings.POOL_IDLE_S))
        )
        t.start()
        t.join()
        seen["env"] = settings.number(settings.POOL_IDLE_S, {"TB_ROOFLINE_POOL_IDLE_S": "5"})
        return 7

    old = os.environ.pop("TB_ROOFLINE_POOL_IDLE_S", None)
    try:
        assert settings.run_with_defaults({"TB_ROOFLINE_POOL_IDLE_S": "0"}, call) == 7
        assert seen == {"inside": 0.0, "thread": 60.0, "env": 5.0}
        assert settings.number(settings.POOL_IDLE_S) == 60.0
        os.environ["TB_ROOFLINE_POOL_IDLE_S"] = "9"
        assert (
            settings.run_with_defaults(
                {"TB_ROOFLINE_POOL_IDLE_S": "0"}, settings.number, settings.POOL_IDLE_S
            )
            == 9.0
        )
    finally:
        os.environ.pop("TB_ROOFLINE_POOL_IDLE_S", None)
        if old is not None:
            os.environ["TB_ROOFLINE_POOL_IDLE_S"] = old


def test_back_to_back_conversions_fork_each_new_pool(logdir, pooled, monkeypatch):
    """With idle 0 the pool let go is stopped before the next one starts: its threads
    still running would make the next pool come from a fork server, which would stay."""
    monkeypatch.setenv("TB_ROOFLINE_POOL_IDLE_S", "0")
    chosen = []
    context = pool._context

    def spy():
        ctx = context()
        chosen.append(ctx.get_start_method())
        return ctx

    monkeypatch.setattr(pool, "_context", spy)
    jobs = [(p, "xplane", "h", None) for p in _files(logdir)]
    for _ in range(3):
        pool.read_files(jobs)
    assert len(chosen) == 3 and len(set(chosen)) == 1, chosen


def test_a_failed_pool_stops_itself_not_the_next_one(logdir, pooled, monkeypatch):
    """A batch whose pool broke stops that pool only: with idle 0 another batch may already
    have made and be using a new one."""
    monkeypatch.setenv("TB_ROOFLINE_POOL_IDLE_S", "0")
    from concurrent.futures.process import BrokenProcessPool

    other = {}
    real_run_all = pool._run_all

    def broken_run_all(fn, args, progress=None, used=None, arrived=None):
        real_run_all(abs, [(-1,), (-2,)], None, used)  # a pool, used and let go
        other["pool"] = pool._get_pool(1)  # another batch's new pool, meanwhile
        raise BrokenProcessPool("a worker died")

    monkeypatch.setattr(pool, "_run_all", broken_run_all)
    jobs = [(p, "xplane", f"h{i}", None) for i, p in enumerate(_files(logdir))]
    got = pool.read_files(jobs)  # read here instead, as before
    assert pool._pool is other["pool"]
    assert other["pool"].submit(abs, -2).result(timeout=30) == 2  # still serving
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "1")
    _same_profiles(pool.read_files(jobs), got)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" in f.read()  # a zombie has exited
    except FileNotFoundError:
        return True


def test_workers_exit_with_their_parent(logdir):
    """A server killed without cleanup (SIGKILL, os._exit) leaves no worker behind."""
    script = (
        "import json, multiprocessing, os, sys\n"
        "from tb_roofline.execute import pool\n"
        "jobs = [(p, 'xplane', 'h', None) for p in sys.argv[1:]]\n"
        "pool.read_files(jobs)\n"
        "print(json.dumps([p.pid for p in multiprocessing.active_children()]), flush=True)\n"
        "os._exit(0)\n"
    )
    env = dict(
        os.environ, TB_ROOFLINE_WORKERS="2", TB_ROOFLINE_PARALLEL_MIN_MB="0", PYTHONPATH=REPO
    )
    out = subprocess.run(
        [sys.executable, "-c", script, *_files(logdir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    pids = json.loads(out.stdout.strip().splitlines()[-1])
    assert pids
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(p) for p in pids)


def test_fork_only_without_other_threads():
    foreign = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not t.name.startswith("tb-roofline")
    ]
    if not foreign:  # (an earlier test may have left a thread of its own running)
        assert pool._context().get_start_method() == "fork"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="someone-else")
    other.start()
    try:
        assert pool._context().get_start_method() == "forkserver"
    finally:
        stop.set()
        other.join()


def test_a_pool_that_cannot_start_reads_in_process(logdir, pooled, monkeypatch):
    jobs = [(p, "xplane", "h", None) for p in _files(logdir)]
    expected = _serial(monkeypatch, lambda: pool.read_files(jobs))

    def refuse(n):
        raise OSError("no semaphores here")

    monkeypatch.setattr(pool, "_get_pool", refuse)
    _same_profiles(expected, pool.read_files(jobs))


def test_damaged_host_in_the_pool_is_that_host_alone(tmp_path, pooled, monkeypatch):
    cfgs = [
        SynthConfig(seed=50 + h, num_cores=2, hostname=f"h{h}", program_seed=50) for h in range(3)
    ]
    paths = write_tpu_session(str(tmp_path), RUN, "2026_01_01_00_00_00", cfgs)
    data = bytearray(open(paths[1], "rb").read())
    data[len(data) // 3 : len(data) // 3 + 64] = b"\xff" * 64  # inside a plane
    open(paths[1], "wb").write(bytes(data))
    past = time.time() - 60
    os.utime(paths[1], (past, past))
    got = _answers_all(str(tmp_path))
    assert got == _serial(monkeypatch, lambda: _answers_all(str(tmp_path)))
    assert "h1" in got and "skipped" in got


def _answers_all(logdir) -> str:
    service = RooflineService(logdir)
    return json.dumps(
        [service.program(SESSION, "", True), service.diagnostics(SESSION, "")], sort_keys=True
    )


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = [int(c) for c in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            continue
    return out


def test_tensorboard_converts_with_workers_and_leaves_none(logdir, monkeypatch):
    """Inside TensorBoard (threads: workers from a fork server): the same answers, and the
    workers end with the server."""
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    expected = _serial(monkeypatch, lambda: RooflineService(logdir).program(SESSION, "", True))
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "2")
    monkeypatch.setenv("TB_ROOFLINE_PARALLEL_MIN_MB", "0")
    with tensorboard(logdir) as base:
        status, body = get_json(base + f"/data/plugin/roofline/program?run={SESSION}&host=")
        assert status == 200
        assert json.dumps(body, sort_keys=True) == json.dumps(expected, sort_keys=True)
        tb_pid = int(next(p for p in os.listdir("/proc") if p.isdigit() and _is_tb(p, base)))
        workers = _descendants(tb_pid)
        assert workers  # the fork server and its workers
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(p) for p in workers)


def _is_tb(pid: str, base: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        return False
    return b"tensorboard.main" in cmd and base.rsplit(":", 1)[1].encode() in cmd


def test_cli_with_workers_prints_the_serial_report_and_leaves_none(logdir):
    """The CLI (no other threads: workers are forked) answers as in one process, and exits
    with no worker left."""

    def cli(workers: str):
        env = dict(
            os.environ,
            TB_ROOFLINE_WORKERS=workers,
            TB_ROOFLINE_PARALLEL_MIN_MB="0",
            TB_ROOFLINE_CACHE_DIR="off",
            PYTHONPATH=REPO,
        )
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tb_roofline.serve.cli.main",
                "export",
                logdir,
                "--run",
                SESSION,
                "--format",
                "json",
                "-o",
                "-",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        return out, proc.pid

    serial, _ = cli("1")
    pooled, pid = cli("2")
    assert pooled == serial and json.loads(pooled)
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _parent_is(p, pid)]


def _parent_is(pid: str, parent: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1]) == parent
    except (OSError, ValueError, IndexError):
        return False


def _shared_across_hosts(results) -> tuple[int, int]:
    """(equal strings of the hosts' op keys and shape labels, how many of those are one object)."""
    equal = same = 0
    first = results[0]
    for other in results[1:]:
        for col, values in first.ops.keys.items():
            if values.dtype != object:
                continue
            for x, y in zip(values, other.ops.keys[col]):
                if isinstance(x, str) and x == y:
                    equal, same = equal + 1, same + (x is y)
        theirs = {k: k for k in other.op_shapes}
        for label in first.op_shapes:
            if label in theirs:
                equal, same = equal + 1, same + (theirs[label] is label)
    return equal, same


@pytest.mark.parametrize("workers", ["2", "5"])  # whole files in a unit; then plane by plane
def test_hosts_from_the_pool_share_their_strings(logdir, pooled, monkeypatch, workers):
    """A host converted by a worker process arrives with its own copy of every string; equal
    ones are made the objects the other hosts hold (as one process's hosts share them),
    values unchanged."""
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", workers)
    jobs = [(p, "xplane", f"h{i}", None) for i, p in enumerate(_files(logdir))]
    got = pool.read_files(jobs)
    assert pool.pool_running()
    equal, same = _shared_across_hosts(got)
    assert equal > 100 and same == equal
    _same_profiles(_serial(monkeypatch, lambda: pool.read_files(jobs)), got)
