"""Faults on a real Dask cluster that must never give a silently partial answer, nor hang:
a worker without the bucket's credentials (moto S3, tests/s3_server.py), a file nobody can
read, every worker killed mid-run, a worker of other code, bad scheduler addresses, and a
scheduler speaking TLS. The cluster, the S3 server and the helpers are test_dask_cluster.py's."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("distributed")
pytest.importorskip("s3fs")
pytest.importorskip("moto")

from tb_server import OUTPUT_DIR, free_port  # noqa: E402
from test_dask_cluster import (  # noqa: E402,F401
    TPU_RUN,
    WAIT_S,
    _answers,
    _converted,
    _die_with_us,
    _env,
    _local_answers,
    dask_cluster,
    world,
)

from tb_roofline.errors import ProfileFormatError  # noqa: E402
from tb_roofline.execute import cluster, pool  # noqa: E402
from tb_roofline.serve.cli.main import main  # noqa: E402
from tb_roofline.serve.service.core import RooflineService  # noqa: E402
from tb_roofline.synthetic import SynthConfig, write_tpu_session  # noqa: E402


def _without_credentials(env: dict) -> dict:
    """A worker's (or a process's) environment without the bucket's credentials."""
    return {
        k: v
        for k, v in _env(env).items()
        if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }


def _faults(caplog) -> list:
    return [r.getMessage() for r in caplog.records if "cannot read" in r.getMessage()]


def test_a_worker_without_credentials_leaves_nothing_out(world, monkeypatch, caplog):
    """One of two workers lacks the bucket's credentials: each unit it fails goes to the
    other, and the answer is the whole one. With that worker alone, the hosts are read here
    (this process has credentials), each with a diagnostic naming the worker and why."""
    server, url, local, _ = world
    hosts = [f"tpu-host{h:02d}" for h in range(16)]
    expected = _local_answers(local, TPU_RUN, hosts, monkeypatch)
    bare = _without_credentials(server.env())
    caplog.set_level(logging.INFO, logger="tb_roofline")
    with dask_cluster(_env(server.env()), workers=()) as c:
        c.start_worker("bare", bare)
        c.start_worker("good", _env(server.env()))
        c.wait_for({"bare", "good"})
        cluster.configure(c.address, strict=True)
        try:
            service = RooflineService(url)
            service.list_runs()
            assert _answers(service, TPU_RUN, hosts) == expected
        finally:
            cluster.configure(None)
    faults = _faults(caplog)
    assert faults and all("Dask worker bare" in m and "s3://" in m for m in faults)
    # found before the units are sent (it gets none) and told once, never a line per unit;
    # named by its Dask name (its IP:port says nothing to whoever runs the cluster)
    assert len(faults) == 1 and "no units go to it" in faults[0], faults
    assert _converted(caplog) == 16  # every host on the cluster: the good worker

    caplog.clear()
    with dask_cluster(_env(server.env()), workers=()) as c:
        c.start_worker("bare", bare)
        c.wait_for({"bare"})
        cluster.configure(c.address, strict=True)
        try:
            service = RooflineService(url)
            service.list_runs()
            got = _answers(service, TPU_RUN, hosts[:3])
            notes = service.diagnostics(TPU_RUN, "")["diagnostics"]
        finally:
            cluster.configure(None)
    want = _local_answers(local, TPU_RUN, hosts[:3], monkeypatch)
    strip = [a for a in got if "diagnostics" not in a]
    assert strip == [a for a in want if "diagnostics" not in a]
    named = [d for d in notes if d["code"] == "cluster_worker_fault"]
    assert len(named) == 16 and all("cannot read s3://" in d["message"] for d in named)
    # every worker fails: a line when found, one summing its units up, one for those read here
    faults = _faults(caplog)
    assert len(faults) == 3 and all("Dask worker bare" in m for m in faults), faults
    assert "16 unit(s) of 16 failed there" in faults[1] and "read 16 unit(s) here" in faults[2]


READ_ONE = """
import sys
from tb_roofline.execute import cluster
from tb_roofline.execute import pool
cluster.configure(sys.argv[1], strict=True, allow_partial=sys.argv[3] == "partial")
try:
    (result,) = pool.read_files([(sys.argv[2], "xplane", "h", None)])
except cluster.ClusterError as exc:
    print("ClusterError:", exc)
    sys.exit(2)
print(type(result).__name__ + ":", result)
"""


def test_a_host_nobody_can_read_fails_the_conversion_by_name(world):
    """The only worker and this process both lack the bucket's credentials: a strict
    conversion (the CLI's) fails naming the worker, its cause and this process's error, and
    how to go on; with partial answers allowed (--allow-partial, TensorBoard) the file is
    that host's error, which says both. A file the worker cannot read but this process finds
    gone is that file's error, as ever."""
    server, url, _, _ = world
    path = f"{url}/{TPU_RUN}/tpu-host03.xplane.pb"
    bare = _without_credentials(server.env())
    with dask_cluster(_env(server.env()), workers=()) as c:
        c.start_worker("bare", bare)
        c.wait_for({"bare"})
        run = [
            subprocess.run(
                [sys.executable, "-c", READ_ONE, c.address, path, mode],
                env=bare,
                capture_output=True,
                text=True,
                timeout=180,
            )
            for mode in ("strict", "partial")
        ]
        cluster.configure(c.address, strict=True)
        try:  # this process has credentials: a file gone from the bucket is the file's
            (gone,) = pool.read_files([(path.replace("host03", "host99"), "xplane", "h", None)])
        finally:
            cluster.configure(None)
    strict, partial = run
    assert strict.returncode == 2, strict.stderr
    words = strict.stdout
    assert "ClusterError: Dask worker bare cannot read" in words  # by its Dask name
    assert words.count("NoCredentialsError") == 2  # the worker's, then this process's
    assert "reading it here failed too" in words and "--allow-partial" in words
    assert partial.returncode == 0 and partial.stdout.startswith(
        "ProfileFormatError: Dask worker"
    ), partial.stdout
    assert "Traceback" not in strict.stderr + partial.stderr
    assert isinstance(gone, ProfileFormatError) and "Dask worker" not in str(gone)


def test_losing_every_worker_is_one_clear_error_soon(world, tmp_path, monkeypatch):
    """Every worker killed while the CLI converts: exit 2 about TB_ROOFLINE_CLUSTER_CONNECT_S
    (its default, 10 s, as docs/cluster.md says) later, "no worker left" in one line on stderr,
    never a timeout nor a tornado traceback; TensorBoard's service then converts here with its
    diagnostic, as soon."""
    from distributed import Client

    server, url, local, _ = world
    env = _env({**server.env(), "TB_ROOFLINE_CACHE_DIR": "off"})
    env.pop("TB_ROOFLINE_CLUSTER_CONNECT_S", None)
    with dask_cluster(_env(server.env()), workers=("k1", "k2")) as c:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tb_roofline.serve.cli.main",
                "report",
                url,
                "--run",
                TPU_RUN,
                "--scheduler",
                c.address,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        with Client(c.address, timeout=30, set_as_default=False) as watcher:
            deadline = time.monotonic() + WAIT_S
            while not any(watcher.processing().values()):
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        c.kill("k1")
        c.kill("k2")
        killed = time.monotonic()
        err = proc.communicate(timeout=120)[1]
        took = time.monotonic() - killed
        print(
            f"every worker killed: exit {proc.returncode} after {took:.1f} s, "
            f"{len(err)} bytes of stderr: {err.strip()}"
        )  # shown with pytest -s
        assert proc.returncode == 2, err
        # typically 10-12 s; the bound is generous for a loaded CI machine
        assert 9 < took < 30 and len(err) < 500 and "Traceback" not in err, (took, err)
        assert f"the Dask cluster {c.address} has no worker left (none for 1" in err, err
        assert "Timeout" not in err and "timed out" not in err, err
        # TensorBoard: the scheduler is there, its workers are not: converted here
        monkeypatch.setenv(cluster.SCHEDULER_ENV, c.address)
        monkeypatch.setenv("TB_ROOFLINE_CLUSTER_CONNECT_S", "3")
        cluster._failed.clear()
        start = time.monotonic()
        notes = RooflineService(local).diagnostics(TPU_RUN, "tpu-host02")["diagnostics"]
        assert "cluster_unavailable" in [d["code"] for d in notes]
        assert time.monotonic() - start < 20


def test_a_scheduler_frozen_mid_batch_is_a_clear_error_within_the_deadline(world, monkeypatch):
    """The scheduler stops answering while units run (SIGSTOP: its connections stay open,
    nothing closes them): the batch ends with a ClusterError naming it within
    TB_ROOFLINE_CLUSTER_STALL_S and TB_ROOFLINE_CLUSTER_CONNECT_S, never a hang on a
    question to it (each asked with a deadline of its own: the workers it knows, the units
    they run); the error names the hosts it was waiting for."""
    from distributed import Client

    server = world[0]
    monkeypatch.setenv("TB_ROOFLINE_CLUSTER_CONNECT_S", "2")
    monkeypatch.setenv("TB_ROOFLINE_CLUSTER_STALL_S", "4")
    result: dict = {}
    with dask_cluster(_env(server.env()), workers=("z1",)) as c:

        def go():
            try:
                names = [f"host{k:02d}.xplane.pb" for k in range(8)]
                result["out"] = cluster.run_units(c.address, time.sleep, [(2.0,)] * 8, names=names)
            except Exception as exc:  # noqa: BLE001 (the test reads it)
                result["error"] = exc

        thread = threading.Thread(target=go, daemon=True)
        thread.start()
        with Client(c.address, timeout=30, set_as_default=False) as watcher:
            deadline = time.monotonic() + WAIT_S
            while not any(watcher.processing().values()):  # the first unit running
                assert thread.is_alive() and time.monotonic() < deadline, result
                time.sleep(0.05)
        os.killpg(c.procs["scheduler"].pid, signal.SIGSTOP)
        frozen = time.monotonic()
        try:
            thread.join(40)
            took = time.monotonic() - frozen
        finally:
            os.killpg(c.procs["scheduler"].pid, signal.SIGCONT)
        cluster._failed.pop(c.address, None)
    assert not thread.is_alive(), "the wait on a frozen scheduler never ended"
    error = result.get("error")
    assert isinstance(error, cluster.ClusterError) and c.address in str(error), result
    assert "host07.xplane.pb" not in str(error) and "host00.xplane.pb" in str(error), error
    assert "and 5 more" in str(error), error  # the hosts it waited for, the first few named
    # stall (4 s) after the last progress, plus at most one question's deadline (2 s)
    assert took < 4 + 2 + 5, (took, error)


def test_a_worker_of_other_code_is_left_out_by_name(world, caplog):
    """A worker that cannot import tb-roofline beside one that runs ours: the first is named
    in a warning and left out, the second converts everything."""
    server, _, local, _ = world
    no_tb = [
        "-c",
        "import sys; sys.modules['tb_roofline'] = None; "
        "from distributed.cli.dask_worker import main; main()",
    ]
    caplog.set_level(logging.INFO, logger="tb_roofline")
    with dask_cluster(_env(server.env()), workers=("ours",)) as c:
        c.start_worker("bare", _env(server.env()), [sys.executable] + no_tb)
        c.wait_for({"bare", "ours"})
        out = io.StringIO()
        code = main(
            ["report", local, "--run", TPU_RUN, "--scheduler", c.address, "--format", "json"],
            out=out,
        )
    assert code == 0
    left_out = [
        r.getMessage()
        for r in caplog.records
        if "left out" in r.getMessage() or "converting on the other" in r.getMessage()
    ]
    assert left_out and "cannot import tb-roofline" in left_out[0]
    assert _converted(caplog) == 16


@pytest.mark.parametrize(
    "addr,words",
    [
        ("http://127.0.0.1:8786", "http:// is not a Dask protocol"),
        ("tcp://127.0.0.1", "is not tcp://HOST:PORT"),
        ("tls://127.0.0.1:1", "DASK_DISTRIBUTED__COMM__TLS__CA_FILE"),
    ],
)
def test_bad_scheduler_addresses_are_told_at_once(world, capsys, addr, words):
    local = world[2]
    start = time.monotonic()
    code = main(["report", local, "--run", TPU_RUN, "--scheduler", addr], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - start < 5
    assert words in err and "Traceback" not in err and "tcp://http" not in err, err


def _certificates(folder) -> dict:
    """A CA and a certificate for 127.0.0.1 it signed (cryptography), as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("test-ca"))
        .issuer_name(name("test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(name("test-ca"))
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return {k: str(v) for k, v in files.items()}


def test_a_tls_scheduler_with_dask_s_tls_configuration(world, tmp_path):
    """A scheduler and a worker speaking TLS: the CLI connects with the certificates Dask's
    configuration names (here its environment variables) and answers as converted here."""
    pytest.importorskip("cryptography")
    server, _, local, _ = world
    pem = _certificates(tmp_path)
    tls = ["--tls-ca-file", pem["ca"], "--tls-cert", pem["cert"], "--tls-key", pem["key"]]
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    logs = [open(os.path.join(OUTPUT_DIR, f"dask_tls_{port}_{n}.log"), "w") for n in "sw"]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-dashboard",
                "--protocol",
                "tls",
            ]
            + tls,
            stdout=logs[0],
            stderr=subprocess.STDOUT,
            env=_env(server.env()),
            start_new_session=True,
            preexec_fn=_die_with_us,
        )
    ]
    procs.append(
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_worker",
                address,
                "--nthreads",
                "1",
                "--no-dashboard",
                "--no-nanny",
                "--host",
                "127.0.0.1",
            ]
            + tls,
            stdout=logs[1],
            stderr=subprocess.STDOUT,
            env=_env(server.env()),
            start_new_session=True,
            preexec_fn=_die_with_us,
        )
    )
    env = _env(
        {
            "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": pem["ca"],
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": pem["cert"],
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": pem["key"],
            "TB_ROOFLINE_CLUSTER_CONNECT_S": "30",
        }
    )
    argv = [
        sys.executable,
        "-m",
        "tb_roofline.serve.cli.main",
        "export",
        local,
        "--run",
        TPU_RUN,
        "--level",
        "program",
        "--format",
        "json",
        "-o",
        "-",
    ]
    try:
        near = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
        far = subprocess.run(
            argv + ["--scheduler", address], env=env, capture_output=True, text=True, timeout=180
        )
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for log in logs:
            log.close()
    assert far.returncode == 0, far.stderr
    assert near.returncode == 0 and far.stdout == near.stdout


def _start_serve(logdir: str, scheduler: str, env: dict):
    """`tb-roofline serve LOGDIR --scheduler S` on a free port: (process, its URL)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tb_roofline.serve.cli.main", "serve", logdir, "--port", "0"]
        + ["--scheduler", scheduler],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line or proc.poll() is None, "".join(lines)
        lines.append(line)
        if " at http://" in line:
            return proc, line.split(" at ", 1)[1].split("/ ", 1)[0], lines
    raise AssertionError("".join(lines))


def _get(url: str, path: str, **query) -> dict:
    import json
    import urllib.parse
    import urllib.request

    with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(query)}", timeout=120) as r:
        assert r.status == 200
        return json.loads(r.read())


def _stop(proc) -> str:
    proc.terminate()
    return proc.communicate(timeout=30)[1]


def test_servers_keep_answering_when_the_scheduler_is_down_or_dies(tmp_path, monkeypatch):
    """`tb-roofline serve --scheduler`: a scheduler down at its start, or dying while it
    serves, leaves it answering every run, converted here (the same answer), saying so in
    its log, the answer's diagnostics and `/progress`."""
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    for run in ("a", "b"):
        write_tpu_session(
            str(tmp_path), run, "2026_01_01_00_00_00", [SynthConfig(seed=5, hostname="h0")]
        )
    runs = ["a/2026_01_01_00_00_00", "b/2026_01_01_00_00_00"]
    local = [RooflineService(str(tmp_path)).program(r, "", True)["rows"] for r in runs]
    env = _env({"TB_ROOFLINE_CLUSTER_CONNECT_S": "3", "TB_ROOFLINE_CACHE_DIR": "off"})

    dead = f"tcp://127.0.0.1:{free_port()}"
    start = time.monotonic()
    proc, url, started = _start_serve(str(tmp_path), dead, env)
    try:
        assert _get(url, "/program", run=runs[0])["rows"] == local[0]
        notes = _get(url, "/diagnostics", run=runs[0])["diagnostics"]
        assert "cluster_unavailable" in [d["code"] for d in notes]
        state = _get(url, "/progress", run=runs[0])["cluster"]
        assert state["scheduler"] == dead and state["converting_here"] is True
        assert "unreachable" in state["reason"]
        assert time.monotonic() - start < 30
    finally:
        err = "".join(started) + _stop(proc)
    assert "tb-roofline serve: Dask scheduler" in err and dead in err
    assert "converting in this process instead" in err

    with dask_cluster(_env({}), workers=("s1",)) as c:
        proc, url, _ = _start_serve(str(tmp_path), c.address, env)
        try:
            assert _get(url, "/program", run=runs[0])["rows"] == local[0]  # on the cluster
            notes = _get(url, "/diagnostics", run=runs[0])["diagnostics"]
            assert "cluster_unavailable" not in [d["code"] for d in notes]
            assert _get(url, "/progress", run=runs[0])["cluster"]["converting_here"] is False
            c.kill("s1")
            c.kill("scheduler")
            died = time.monotonic()
            assert _get(url, "/program", run=runs[1])["rows"] == local[1]  # here, not a 500
            took = time.monotonic() - died
            notes = _get(url, "/diagnostics", run=runs[1])["diagnostics"]
            assert "cluster_unavailable" in [d["code"] for d in notes]
            assert _get(url, "/progress", run=runs[1])["cluster"]["converting_here"] is True
            print(f"scheduler killed: the next run answered in {took:.1f} s")  # pytest -s
            assert took < 30
        finally:
            err = _stop(proc)
        assert "converting here, not on the cluster" in err
