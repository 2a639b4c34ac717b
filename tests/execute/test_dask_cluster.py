"""Conversion on a real Dask cluster (execute/cluster.py): a scheduler and two worker processes
started with `distributed`'s own `dask scheduler` / `dask worker` commands on 127.0.0.1, reading
from the moto S3 server (tests/s3_server.py) as shared storage with their own credentials.
A 16-host TPU run and a multi-rank PyTorch run answer exactly as converted here (program
records with every step's, op records, device, diagnostics and guidance, and the drill-downs
that read the rows again: one step's and the average step's op records, row groupings); a worker
killed mid-run changes nothing; a scheduler that is not there, or does not answer, or a worker
without tb-roofline, is a clear error at once (CLI exit 2), and TensorBoard's service converts
locally saying so."""

from __future__ import annotations

import contextlib
import io
import logging
import operator
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from testpaths import TESTS

pytest.importorskip("distributed")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

from s3_server import moto_server  # noqa: E402
from tb_server import OUTPUT_DIR, free_port  # noqa: E402

from tb_roofline.execute import cluster  # noqa: E402
from tb_roofline.serve.cli.main import main  # noqa: E402
from tb_roofline.serve.service.core import RooflineService  # noqa: E402
from tb_roofline.synthetic import SynthConfig, write_tpu_session  # noqa: E402

REPO = os.path.dirname(TESTS)
BUCKET = "tb-roofline-dask"
TPU_RUN = "pod/2026_01_01_00_00_00"
KINETO_RUN = "ranks"
RANKS = [
    "a100_alexnet/worker0.1695835535",
    "a100_cupti_counters/worker0.1679055439",
    "a100_80gb_shapes/rank0",
    "a100_alexnet/worker0.1695835535",
]
WAIT_S = 90


def _die_with_us():
    """In each child: killed when the test process dies, even by SIGKILL (Linux prctl)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _env(extra: dict) -> dict:
    env = {**os.environ, **extra, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")  # this worktree's code
    return env


class Cluster:
    def __init__(self, address: str, procs: dict, logs: list):
        self.address, self.procs, self.logs = address, procs, logs

    def start_worker(self, name: str, env: dict, argv_head=None, nanny=False):
        log = open(
            os.path.join(OUTPUT_DIR, f"dask_{name}_{self.address.rsplit(':', 1)[1]}.log"), "w"
        )
        self.logs.append(log)
        head = argv_head or [sys.executable, "-m", "distributed.cli.dask_worker"]
        argv = head + [
            self.address,
            "--nthreads",
            "1",
            "--no-dashboard",
            "--name",
            name,
            "--host",
            "127.0.0.1",
            "--death-timeout",
            "60",
        ]
        if not nanny:
            argv.insert(len(head) + 3, "--no-nanny")
        self.procs[name] = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_us,
        )

    def wait_for(self, names: set):
        from distributed import Client

        deadline = time.monotonic() + WAIT_S
        with Client(self.address, timeout=30, set_as_default=False) as client:
            while True:
                have = {w["name"] for w in client.scheduler_info(n_workers=-1)["workers"].values()}
                if names <= have:
                    return
                for name in names | {"scheduler"}:
                    if self.procs[name].poll() is not None:
                        raise RuntimeError(f"{name} exited with {self.procs[name].returncode}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"workers {names - have} did not join")
                time.sleep(0.3)

    def kill(self, name: str):
        os.killpg(self.procs[name].pid, signal.SIGKILL)


@contextlib.contextmanager
def dask_cluster(worker_env: dict, workers=("w1", "w2"), scheduler_env=None, scheduler_head=None):
    os.makedirs(OUTPUT_DIR, exist_ok=True)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs: dict = {}
    logs = [open(os.path.join(OUTPUT_DIR, f"dask_scheduler_{port}.log"), "w")]
    head = scheduler_head or [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    procs["scheduler"] = subprocess.Popen(
        head + ["--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stdout=logs[0],
        stderr=subprocess.STDOUT,
        env=_env(scheduler_env or {}),
        start_new_session=True,
        preexec_fn=_die_with_us,
    )
    c = Cluster(address, procs, logs)
    try:
        for name in workers:
            c.start_worker(name, worker_env)
        c.wait_for(set(workers))
        yield c
    finally:
        cluster.close_clients()
        for proc in procs.values():  # workers first, then the scheduler (it was started first)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for log in logs:
            log.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(S3 server, the bucket's logdir URL, the local copy, a running two-worker cluster)."""
    local = tmp_path_factory.mktemp("pod_logdir")
    cfgs = [
        SynthConfig(
            seed=70 + h,
            num_cores=2,
            num_steps=10,
            ops_per_step=150,
            distinct_ops=60,
            hostname=f"tpu-host{h:02d}",
            program_seed=70,
        )
        for h in range(16)
    ]
    write_tpu_session(str(local), "pod", "2026_01_01_00_00_00", cfgs)
    ranks = local / KINETO_RUN
    ranks.mkdir()
    for r, name in enumerate(RANKS):
        shutil.copy(
            os.path.join(REPO, "testdata", "kineto", name + ".pt.trace.json.gz"),
            ranks / f"rank{r}.pt.trace.json.gz",
        )
    with moto_server() as server, pytest.MonkeyPatch.context() as mp:
        for name, value in server.env().items():
            mp.setenv(name, value)
        mp.setenv("TB_ROOFLINE_REMOTE_RESCAN_S", "300")
        mp.setenv("TB_ROOFLINE_CACHE_DIR", "off")
        server.client().create_bucket(Bucket=BUCKET)
        server.upload_tree(str(local), BUCKET, "logs/")
        with dask_cluster(_env(server.env())) as c:
            yield server, f"s3://{BUCKET}/logs", str(local), c


@pytest.fixture
def on_cluster(world):
    cluster.configure(world[3].address, strict=True)
    yield world
    cluster.configure(None)


def _answers(service: RooflineService, run: str, hosts: list) -> list:
    out = []
    for host in [""] + hosts:
        out.append(service.program(run, host, True))
        out.append(service.ops(run, host, True))
        out.append(service.device(run, host))
        out.append(service.diagnostics(run, host))
        out.append(service.guidance(run, host, True))  # the findings, from the same sums
        out += _drill_downs(service, run, host)
    return out


def _drill_downs(service: RooflineService, run: str, host: str) -> list:
    """What needs a host's rows again after the analysis: the average step's and two steps'
    op records (a comparison of two steps of the run) and every other row grouping offered
    (`shapes`: op × input shapes; `kernel`)."""
    program = service.program(run, host, True)
    kind, step = (program["columns"].index(c) for c in ("record_type", "step"))
    labels = [r[step] for r in program["rows"] if r[kind] == "step"]
    out = []
    if len(labels) >= 2:  # (a run of no complete steps has only its Total)
        out.append(service.compare(run, run, host, host, base_step="Average", step=labels[0]))
        out.append(service.compare(run, run, host, host, base_step=labels[0], step=labels[-1]))
    groupings = service.ops(run, host, True, limit=1)["row_groupings"]
    out += [service.ops(run, host, True, rows=g) for g in groupings if g != "op"]
    return out


def _local_answers(local: str, run: str, hosts: list, monkeypatch) -> list:
    monkeypatch.delenv(cluster.SCHEDULER_ENV, raising=False)
    saved = cluster._setting
    cluster.configure(None)
    try:
        return _answers(RooflineService(local), run, hosts)
    finally:
        cluster._setting = saved


def _converted(caplog) -> int:
    return sum("on the cluster (" in r.getMessage() for r in caplog.records)


def test_a_16_host_pod_on_s3_answers_as_converted_here(on_cluster, caplog, monkeypatch):
    _, url, local, _ = on_cluster
    hosts = [f"tpu-host{h:02d}" for h in range(16)]
    expected = _local_answers(local, TPU_RUN, hosts, monkeypatch)
    caplog.set_level(logging.INFO, logger="tb_roofline.execute.cluster")
    service = RooflineService(url)
    service.list_runs()
    assert _answers(service, TPU_RUN, hosts) == expected
    assert _converted(caplog) == 16  # one unit per host, each on a worker


def test_a_multi_rank_pytorch_run_answers_as_converted_here(on_cluster, caplog, monkeypatch):
    _, url, local, _ = on_cluster
    hosts = [f"rank{r}" for r in range(len(RANKS))]
    service = RooflineService(url)
    assert (
        sorted(next(r for r in service.list_runs()["runs"] if r["run"] == KINETO_RUN)["hosts"])
        == hosts
    )
    expected = _local_answers(local, KINETO_RUN, hosts, monkeypatch)
    caplog.set_level(logging.INFO, logger="tb_roofline.execute.cluster")
    assert _answers(service, KINETO_RUN, hosts) == expected
    assert _converted(caplog) == len(RANKS)


def test_planes_of_a_shared_path_are_units_too(on_cluster, tmp_path, caplog, monkeypatch):
    """A path the workers share (here: the same disk): one unit per TensorCore plane."""
    write_tpu_session(
        str(tmp_path),
        "one",
        "2026_01_01_00_00_00",
        [SynthConfig(seed=5, num_cores=4, num_steps=6, ops_per_step=80, hostname="solo")],
    )
    expected = _local_answers(str(tmp_path), "one/2026_01_01_00_00_00", ["solo"], monkeypatch)
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "8")  # fewer files than cores: plane units
    caplog.set_level(logging.INFO, logger="tb_roofline.execute.cluster")
    got = _answers(RooflineService(str(tmp_path)), "one/2026_01_01_00_00_00", ["solo"])
    assert got == expected
    assert _converted(caplog) == 4


def test_whole_files_of_a_shared_path_come_back_merged_sharing_strings(
    on_cluster, caplog, monkeypatch
):
    """A shared path with a file per worker or more: a unit per file, its planes merged on
    the worker; each host's strings, its own copies as they arrive, made the objects the
    hosts already here hold (as in local conversion), the answers unchanged."""
    _, _, local, _ = on_cluster
    hosts = [f"tpu-host{h:02d}" for h in range(16)]
    expected = _local_answers(local, TPU_RUN, hosts, monkeypatch)
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "1")  # more files than cores: whole files
    caplog.set_level(logging.INFO, logger="tb_roofline.execute.cluster")
    service = RooflineService(local)
    target = service.resolve_run(TPU_RUN)
    data = [
        e.result() for e in service.hosts_reader.read(target, service.resolve_files(target, ""))
    ]
    assert _converted(caplog) == 16  # one unit per host (2 planes each)
    names = [d.ops.keys["operation"] for d in data]
    pairs = [(x, y) for other in names[1:] for x, y in zip(names[0], other) if x == y]
    assert len(pairs) > 100 and all(x is y for x, y in pairs)
    labels = [dict(zip(d.op_shapes, d.op_shapes)) for d in data]
    same = [(k, labels[1][k]) for k in labels[0] if k in labels[1]]
    assert same and all(x is y for x, y in same)
    assert _answers(service, TPU_RUN, hosts) == expected


def test_the_cli_takes_scheduler_and_shows_progress(world, capsys, monkeypatch):
    _, url, local, c = world
    near, far = io.StringIO(), io.StringIO()
    args = ["export", "--run", TPU_RUN, "--level", "program", "--format", "json", "-o", "-"]
    assert main([args[0], local] + args[1:], out=near) == 0
    assert main([args[0], url] + args[1:] + ["--scheduler", c.address], out=far) == 0
    assert far.getvalue() == near.getvalue()
    assert cluster.address() is None  # the option lasts one command


def test_a_worker_killed_mid_run_changes_nothing(world, monkeypatch, caplog):
    server, url, local, c = world
    hosts = [f"tpu-host{h:02d}" for h in range(16)]
    expected = _local_answers(local, TPU_RUN, hosts, monkeypatch)
    cluster.configure(c.address, strict=True)
    killed = []
    real = cluster.run_units

    def kill_after_two(
        addr, fn, args_list, progress=None, names=None, paths=None, arrived=None, summarize=None
    ):
        def report(k):
            if progress:
                progress(k)
            done.append(k)
            if len(done) == 2 and not killed:
                assert c.procs["w2"].poll() is None  # alive and busy until now
                c.kill("w2")
                killed.append(len(done))

        done: list = []
        return real(addr, fn, args_list, report, names, paths, arrived, summarize)

    monkeypatch.setattr(cluster, "run_units", kill_after_two)
    caplog.set_level(logging.INFO, logger="tb_roofline.execute.cluster")
    try:
        service = RooflineService(url)
        service.list_runs()
        assert _answers(service, TPU_RUN, hosts) == expected
    finally:
        cluster.configure(None)
    assert killed == [2] and c.procs["w2"].wait(10) == -signal.SIGKILL
    assert _converted(caplog) == 16  # the other 14 hosts after the kill, on the live worker
    # Afterwards the cluster works on with the one worker left.
    c.start_worker("w3", _env(server.env()))
    c.wait_for({"w3"})


def test_unreachable_scheduler_is_a_clear_error_at_once(world, capsys, monkeypatch):
    _, url, local, _ = world
    dead = f"tcp://127.0.0.1:{free_port()}"
    start = time.monotonic()
    code = main(["report", local, "--run", TPU_RUN, "--scheduler", dead], out=io.StringIO())
    assert code == 2 and time.monotonic() - start < 10
    err = capsys.readouterr().err
    assert dead in err and "unreachable" in err and "Traceback" not in err
    # TensorBoard (the environment variable): converted here, saying so.
    monkeypatch.setenv(cluster.SCHEDULER_ENV, dead)
    service = RooflineService(local)
    codes = [d["code"] for d in service.diagnostics(TPU_RUN, "")["diagnostics"]]
    assert "cluster_unavailable" in codes
    monkeypatch.delenv(cluster.SCHEDULER_ENV)
    assert service.program(TPU_RUN, "tpu-host03", True) == RooflineService(local).program(
        TPU_RUN, "tpu-host03", True
    )


def test_a_scheduler_that_never_answers_times_out(world, capsys, monkeypatch):
    _, _, local, _ = world
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections (the kernel does), never says a word
        addr = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        monkeypatch.setenv("TB_ROOFLINE_CLUSTER_CONNECT_S", "2")
        start = time.monotonic()
        code = main(["report", local, "--run", TPU_RUN, "--scheduler", addr], out=io.StringIO())
        took = time.monotonic() - start
        err = capsys.readouterr().err
        assert code == 2 and took < 15
        assert addr in err and "did not answer" in err and "Traceback" not in err
        # TensorBoard: converted here after the timeout, and for a minute without trying again.
        monkeypatch.setenv(cluster.SCHEDULER_ENV, addr)
        cluster._failed.clear()
        start = time.monotonic()
        for host in ("tpu-host00", "tpu-host01"):
            notes = RooflineService(local).diagnostics(TPU_RUN, host)["diagnostics"]
            assert "cluster_unavailable" in [d["code"] for d in notes]
            if host == "tpu-host00":
                first = time.monotonic() - start
        again = time.monotonic() - start - first
    assert 2 <= first < 15 and again < 2, (first, again)


def test_a_worker_without_tb_roofline_is_named(world, capsys, monkeypatch):
    server, _, local, _ = world
    no_tb = [
        "-c",
        "import sys; sys.modules['tb_roofline'] = None; "
        "from distributed.cli.dask_worker import main; main()",
    ]
    with dask_cluster(_env(server.env()), workers=()) as c:
        c.start_worker("bare", _env(server.env()), [sys.executable] + no_tb)
        c.wait_for({"bare"})
        code = main(
            ["report", local, "--run", TPU_RUN, "--scheduler", c.address], out=io.StringIO()
        )
    err = capsys.readouterr().err
    assert code == 2 and "Dask worker" in err and "cannot import tb-roofline" in err, err


def test_a_unit_that_kills_its_workers_is_that_units_error(world, monkeypatch):
    """A unit whose worker dies every time it runs it (out of memory, in life; here the worker
    exits) is given up by the scheduler (KilledWorker) and is that unit's error; the units
    beside it answer, on the worker its nanny restarted (at a new address)."""
    from tb_roofline.errors import ProfileOutOfMemoryError

    server = world[0]
    monkeypatch.setenv("TB_ROOFLINE_CLUSTER_STALL_S", "60")
    with dask_cluster(
        _env(server.env()),
        workers=(),
        scheduler_env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"},
    ) as c:
        c.start_worker("mortal", _env(server.env()), nanny=True)  # the nanny restarts it
        c.wait_for({"mortal"})
        # operator.call(f, x) = f(x): functions the workers import by name, as ours are. The
        # first unit's result dies with the worker unless gathered: then it is run again, on
        # the worker the nanny restarted at a new address. The killer waits first: a unit still
        # running when its worker dies counts as killed by it too (with no failures allowed,
        # given up), and both start at once on the worker's threads.
        killer = "import os, time; time.sleep(1.0); os._exit(3)"
        out = cluster.run_units(
            c.address, operator.call, [(abs, -3), (exec, killer)], names=["a", "killer"]
        )
        after = cluster.run_units(c.address, operator.call, [(abs, -4), (abs, -5)])
    assert out[0] == 3 and after == [4, 5]
    assert isinstance(out[1], ProfileOutOfMemoryError) and "died" in str(out[1])


def test_the_scheduler_address_may_carry_spaces(world, capsys):
    """As TB_ROOFLINE_SCHEDULER is read (stripped), so is --scheduler."""
    _, _, local, c = world
    code = main(
        [
            "report",
            local,
            "--run",
            TPU_RUN,
            "--host",
            "tpu-host01",
            "--scheduler",
            f"  {c.address} ",
        ],
        out=io.StringIO(),
    )
    assert code == 0, capsys.readouterr().err


def test_a_worker_too_busy_to_answer_the_probe_does_not_stop_the_cluster(world, monkeypatch):
    """A worker inside a long conversion (another request's, holding the GIL) may not answer
    the probe in time: the units are sent anyway, and finish once it is back."""
    server = world[0]
    monkeypatch.setenv("TB_ROOFLINE_CLUSTER_CONNECT_S", "2")
    with dask_cluster(_env(server.env()), workers=("b1", "b2")) as c:
        os.killpg(c.procs["b2"].pid, signal.SIGSTOP)
        try:
            result: dict = {}

            def go():
                try:
                    result["out"] = cluster.run_units(
                        c.address, operator.call, [(abs, -k) for k in range(6)]
                    )
                except Exception as exc:  # noqa: BLE001 (the test reads it)
                    result["error"] = exc

            thread = threading.Thread(target=go)
            thread.start()
            thread.join(6)  # past the probe's 2 s: still running, not failed
            assert "error" not in result, result
        finally:
            os.killpg(c.procs["b2"].pid, signal.SIGCONT)
        thread.join(60)
    assert result.get("out") == list(range(6)), result


def test_a_path_the_workers_do_not_share_is_the_workers_fault(world):
    """A local path no worker can see is not that file's error (the file is there for the
    caller): each worker fails it with words naming itself and the path, the unit goes to
    the other, and then comes back as that fault for the caller to read itself."""
    c = world[3]
    missing = "/nonexistent-on-the-workers/host0.xplane.pb"
    out = cluster.run_units(c.address, operator.call, [(abs, -1), (open, missing)])
    assert out[0] == 1 and isinstance(out[1], cluster.WorkerFault)
    assert "nonexistent-on-the-workers" in str(out[1]) and "every worker shares" in str(out[1])
    # A file gone from a directory the workers see (deleted since the listing) is the file's.
    gone = os.path.join(world[2], "deleted-since-the-listing.xplane.pb")
    out = cluster.run_units(c.address, operator.call, [(abs, -1), (open, gone)])
    assert out[0] == 1 and isinstance(out[1], FileNotFoundError)


class _OnlyHere(Exception):
    pass


_OnlyHere.__module__ = "somewhere_else.errors"  # a class the caller could not import


def test_an_exception_the_caller_cannot_import_travels_as_words():
    def boom():
        raise _OnlyHere("disk on fire")

    out = cluster._unit(operator.call, (boom,))
    assert type(out) is RuntimeError and str(out) == "_OnlyHere: disk on fire"
    assert isinstance(cluster._unit(operator.call, (int, "x")), ValueError)  # builtins travel


def test_a_scheduler_without_tb_roofline_is_named(world, capsys):
    server, _, local, _ = world
    bare = [
        sys.executable,
        "-c",
        "import sys; sys.modules['tb_roofline'] = None; "
        "from distributed.cli.dask_scheduler import main; main()",
    ]
    with dask_cluster(_env(server.env()), workers=("s1",), scheduler_head=bare) as c:
        code = main(
            ["report", local, "--run", TPU_RUN, "--scheduler", c.address], out=io.StringIO()
        )
    err = capsys.readouterr().err
    assert code == 2 and "Dask scheduler" in err and "cannot import tb-roofline" in err, err
