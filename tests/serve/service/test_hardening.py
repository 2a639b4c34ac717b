"""Hostile cases, each reproduced: a disk cache another user plants entries in,
forged entries, deep JSON in device and workload files, messages about outside files, NUL in
CSV cells, a names bomb under the memory budget, a too-large analysis and head-of-line
blocking."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from testpaths import TESTS

from tb_roofline import errors
from tb_roofline.serve.caches import codec as cache_codec
from tb_roofline.serve.caches import disk as disk_cache
from tb_roofline.serve.caches.disk import DiskCache, UnsafeDirectory, check_directory_chain
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.synthetic import SynthConfig, write_tpu_session

RUN = "2026_01_01_00_00_00"
ATTACKER_UID = 54321  # no such user is needed: setpriv runs the attacker's steps as this uid


def _age_all(root, seconds=60):
    past = time.time() - seconds
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (past, past))


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "logdir"
    write_tpu_session(str(root), "", RUN, [SynthConfig(seed=1)])
    _age_all(root)
    return root


def _page(service):
    return (
        service.program(RUN, "", True),
        service.ops(RUN, "", False),
        service.device(RUN, ""),
        service.diagnostics(RUN, ""),
    )


def _page_encoded(service):
    return [
        service.encoded(kind, RUN, "", True, **params)
        for kind, params in (
            ("program", {"include_infeed_outfeed": True}),
            ("device", {}),
            ("diagnostics", {}),
            ("ops", {"include_infeed_outfeed": False}),
        )
    ]


class _Payload:
    """What an attacker would plant as a pickle: running it leaves a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _pickle_entry(marker) -> bytes:
    import hashlib
    import struct

    payload = pickle.dumps(_Payload(marker))
    return (
        b"TBRFCACHE1\n"
        + struct.pack(">32sQ", hashlib.sha256(payload).digest(), len(payload))
        + payload
    )


def _forged_entry(name: str, value, key: bytes) -> bytes:
    """A well-formed entry, authenticated under a key that is not the user's."""
    body = cache_codec.encode(value)
    return disk_cache.MAGIC + DiskCache._mac(key, name, body) + body


# --- the disk cache ---------------------------------------------------------------------------
def test_entries_round_trip_as_data_only(logdir, tmp_path, monkeypatch):
    """Every entry kind decodes to what was stored, and no entry is a pickle."""
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(tmp_path / "cache"))
    service = RooflineService(str(logdir))
    expected = _page(service)
    for entry in (tmp_path / "cache" / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX):
        data = entry.read_bytes()
        assert data.startswith(disk_cache.MAGIC) and b"\x80\x05" not in data[:64]
        with pytest.raises(Exception):
            pickle.loads(data[len(disk_cache.MAGIC) + disk_cache.MAC_BYTES :])
    restarted = RooflineService(str(logdir))
    from tb_roofline.execute import pool

    monkeypatch.setattr(
        pool,
        "read_files",  # no file is read: only the cache can answer
        lambda jobs, progress=None: [errors.ProfileFormatError("not read")] * len(jobs),
    )
    assert _page(restarted) == expected
    value = {"t": (1, 2.5, float("nan")), 3: [None, b"\x00\xff"], ("k",): {1, 2}}
    back = cache_codec.decode(cache_codec.encode(value))
    assert back[3] == [None, b"\x00\xff"] and back[("k",)] == {1, 2}
    assert back["t"][:2] == (1, 2.5) and back["t"][2] != back["t"][2]


def test_a_planted_pickle_or_forged_entry_is_a_miss(logdir, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(cache_dir))
    expected = _page_encoded(RooflineService(str(logdir)))
    names = [p.name for p in (cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX)]
    assert len(names) == 5  # the profile and four answers
    marker = tmp_path / "ran"
    forged_answer = (b'{"forged":true}', False)
    entries_dir = cache_dir / disk_cache.ENTRIES_DIR
    for name in names:
        (entries_dir / name).write_bytes(
            _pickle_entry(marker)
            if name == names[0]
            else _forged_entry(name, forged_answer, b"k" * 32)
        )
        (entries_dir / (name[: -len(disk_cache.SUFFIX)] + ".pkl")).write_bytes(
            _pickle_entry(marker)
        )
    assert _page_encoded(RooflineService(str(logdir))) == expected
    assert not marker.exists()
    # A valid entry renamed to another key is a miss too (the name is under the MAC).
    good = RooflineService(str(logdir))
    _page_encoded(good)
    entries = sorted((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX))
    a, b = entries[0].read_bytes(), entries[1].read_bytes()
    entries[0].write_bytes(b)
    entries[1].write_bytes(a)
    assert _page_encoded(RooflineService(str(logdir))) == expected


def test_an_unsafe_key_file_or_directory_chain_is_a_miss(tmp_path):
    base = tmp_path / "base"
    cache = DiskCache(str(base / "cache"), max_bytes=1 << 20)
    (base / "cache").mkdir(parents=True, mode=0o700)
    assert cache.put("a", b"value") and cache.get("a") == b"value"
    os.chmod(base / "cache" / disk_cache.KEY_FILE, 0o644)  # readable by others: not a secret
    assert cache.get("a") is None
    os.chmod(base / "cache" / disk_cache.KEY_FILE, 0o600)
    assert cache.get("a") == b"value"
    os.chmod(base, 0o777)  # a parent anyone may write (rename the cache away): refused
    with pytest.raises(UnsafeDirectory, match="writable by group or others"):
        os.close(check_directory_chain(cache.directory))
    assert cache.get("a") is None and not cache.put("b", b"x")
    os.chmod(base, 0o1777)  # sticky, like /tmp: others cannot rename what is ours
    assert cache.get("a") == b"value"
    os.chmod(base, 0o755)
    os.rename(base / "cache", base / "real")
    os.symlink(base / "real", base / "cache")  # a symlink in the chain: refused
    with pytest.raises(UnsafeDirectory, match="symlink"):
        os.close(check_directory_chain(cache.directory))
    assert cache.get("a") is None


def _as_attacker(script: str):
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={ATTACKER_UID}",
            f"--regid={ATTACKER_UID}",
            "--clear-groups",
            "sh",
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv to run the attacker's steps as another user",
)
def test_another_user_cannot_plant_entries(logdir, monkeypatch):
    """The attack: the cache under a parent another user may write; they rename
    the cache directory, make their own and plant entries under the computable names (a
    pickle payload and forged answers). The next cold requests answer from the profile."""
    area = tempfile.mkdtemp(prefix="tb_roofline_attack_", dir="/tmp")
    try:
        os.chmod(area, 0o755)
        parent = os.path.join(area, "team")
        os.mkdir(parent)
        cache_dir = os.path.join(parent, "cache")
        monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", cache_dir)
        expected = _page_encoded(RooflineService(str(logdir)))
        names = sorted(os.listdir(os.path.join(cache_dir, disk_cache.ENTRIES_DIR)))
        assert sum(n.endswith(disk_cache.SUFFIX) for n in names) == 5
        stage = os.path.join(area, "stage")
        os.mkdir(stage)
        marker = os.path.join(area, "ran")
        entry_names = [n for n in names if n.endswith(disk_cache.SUFFIX)]
        for name in entry_names:
            if True:
                with open(os.path.join(stage, name), "wb") as f:
                    f.write(
                        _pickle_entry(marker)
                        if name == entry_names[0]
                        else _forged_entry(name, (b'{"forged":1}', False), b"x" * 32)
                    )
                with open(os.path.join(stage, name[: -len(disk_cache.SUFFIX)] + ".pkl"), "wb") as f:
                    f.write(_pickle_entry(marker))
        with open(os.path.join(stage, disk_cache.KEY_FILE), "wb") as f:
            f.write(b"x" * 32)  # the key the forged entries were made with
        os.chmod(stage, 0o755)
        for n in os.listdir(stage):
            os.chmod(os.path.join(stage, n), 0o644)
        # The team directory becomes writable by others (not sticky): the attack.
        os.chmod(parent, 0o777)
        done = _as_attacker(
            f"mv {cache_dir} {parent}/old && mkdir -m 700 {cache_dir} && "
            f"mkdir -m 700 {cache_dir}/{disk_cache.ENTRIES_DIR} && "
            f"cp {stage}/*.* {cache_dir}/{disk_cache.ENTRIES_DIR}/ && "
            f"cp {stage}/.key {cache_dir}/ && chmod 600 "
            f"{cache_dir}/.key && ls -a {cache_dir}"
        )
        assert done.returncode == 0, done.stderr
        assert os.stat(cache_dir).st_uid == ATTACKER_UID
        assert _page_encoded(RooflineService(str(logdir))) == expected
        assert not os.path.exists(marker)
        # Even with the parent made safe again, the directory is the attacker's: refused.
        os.chmod(parent, 0o755)
        assert _page_encoded(RooflineService(str(logdir))) == expected
        assert not os.path.exists(marker)
        # And a sticky parent (like /tmp) stops the rename itself.
        shutil.rmtree(cache_dir)
        os.rename(os.path.join(parent, "old"), cache_dir)
        os.chmod(parent, 0o1777)
        assert _as_attacker(f"mv {cache_dir} {parent}/old2").returncode != 0
        assert _page_encoded(RooflineService(str(logdir))) == expected
    finally:
        shutil.rmtree(area, ignore_errors=True)


# --- device and workload files ------------------------------------------------------------------
REPO = os.path.dirname(TESTS)
ROUTES = (
    "/device",
    "/program",
    "/ops",
    "/diagnostics",
    "/guidance",
    "/report",
    "/export",
    "/compare",
)


def _cpu_logdir(tmp_path):
    """A CPU profile (no peaks of its own: the device file applies) as run `mlp`."""
    root = tmp_path / "logs"
    shutil.copytree(os.path.join(REPO, "testdata", "jax_cpu", "mlp"), root / "mlp")
    _age_all(root)
    return root


def _client(logdir):
    from tensorboard.plugins import base_plugin
    from werkzeug import test as wtest
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.plugin import RooflinePlugin

    apps = RooflinePlugin(base_plugin.TBContext(logdir=str(logdir))).get_plugin_apps()
    return wtest.Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)


def _query(route, run):
    return f"{route}?run={run}" + (f"&base={run}" if route == "/compare" else "")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 1000,
        '{"kind": "cpu", "notes": ' + "[" * 5000 + "]" * 5000 + "}",
        "{" + '"a":{' * 900 + "1" + "}" * 901,
    ],
    ids=["brackets", "deep-notes", "deep-objects"],
)
def test_deep_device_json_is_a_422_on_every_route_and_a_clean_cli_error(tmp_path, text, capsys):
    logdir = _cpu_logdir(tmp_path)
    (logdir / "roofline_device.json").write_text(text)
    client = _client(logdir)
    run = client.get("/runs").json["runs"][0]["run"]
    for route in ROUTES:
        r = client.get(_query(route, run))
        assert r.status_code == 422, (route, r.status_code, r.data[:300])
        error = r.json["error"]
        assert error["code"] == "bad_device_file"
        assert "roofline_device.json" in error["message"] and "nested" in error["message"]
        assert str(tmp_path) not in error["message"]
    from tb_roofline.serve.cli.main import main

    assert main(["report", str(logdir), "--run", run]) == 2
    err = capsys.readouterr().err
    assert "roofline_device.json" in err and "nested" in err and "Traceback" not in err


def test_deep_workload_json_is_a_422_and_a_clean_cli_error(tmp_path, capsys):
    logdir = _cpu_logdir(tmp_path)
    shutil.copy(
        os.path.join(REPO, "testdata", "guidance", "roofline_device.json"),
        logdir / "roofline_device.json",
    )
    (logdir / "roofline_workload.json").write_text("[" * 1000)
    client = _client(logdir)
    run = client.get("/runs").json["runs"][0]["run"]
    for route in ("/guidance", "/report"):
        r = client.get(_query(route, run))
        assert r.status_code == 422, (route, r.data[:300])
        assert r.json["error"]["code"] == "bad_workload_file"
        assert "roofline_workload.json" in r.json["error"]["message"]
    assert client.get(_query("/program", run)).status_code == 200
    from tb_roofline.serve.cli.main import main

    assert main(["report", str(logdir), "--run", run]) == 2
    err = capsys.readouterr().err
    assert "roofline_workload.json" in err and "Traceback" not in err


SECRET_FILES = [
    {"kind": "cpu", "api_key": "TOPSECRET-DEV-VALUE", "compute": {"fp32": 1}},
    {"kind": "TOPSECRET-DEV-VALUE", "compute": {"fp32": 1}},
    {"kind": "cpu", "compute": {"TOPSECRET_PRECISION": 1}},
    {"kind": "cpu", "compute": {"fp32": "TOPSECRET-DEV-VALUE"}},
    {"kind": "cpu", "compute": {"fp32": {"gflops": 1, "api_key": 2}}},
    {"kind": "cpu", "memories": {"hbm": 1, "topsecret_id": "TOPSECRET-DEV-VALUE"}},
    {"kind": "cpu", "compute": {"fp32": 1}, "default_precision": "TOPSECRET-DEV-VALUE"},
    {"kind": "cpu", "compute": {"fp32": 1}, "source": "TOPSECRET-DEV-VALUE"},
    {"kind": "cpu", "compute": {"fp32": 1}, "tb_roofline_device_file": "TOPSECRET-DEV-VALUE"},
    {"kind": "cpu", "num_cores": "TOPSECRET-DEV-VALUE", "compute": {"fp32": 1}},
]


@pytest.mark.parametrize("secret", SECRET_FILES)
def test_errors_never_quote_a_symlinked_files_values_or_keys(tmp_path, secret):
    logdir = _cpu_logdir(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "credentials.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps(secret))
    os.symlink(elsewhere, logdir / "roofline_device.json")
    client = _client(logdir)
    run = client.get("/runs").json["runs"][0]["run"]
    r = client.get(_query("/program", run))
    assert r.status_code == 422
    message = r.json["error"]["message"]
    assert "roofline_device.json" in message
    for leak in ("TOPSECRET", "topsecret", "api_key", "credentials", "elsewhere"):
        assert leak not in message, message


@pytest.mark.parametrize(
    "secret",
    [
        {"model_flops_per_step": "TOPSECRET-VALUE"},
        {"tokens_per_step": 1, "api_key": "TOPSECRET-VALUE"},
    ],
)
def test_workload_errors_never_quote_a_symlinked_files_values(tmp_path, secret):
    from tb_roofline.serve.service.workload_file import WorkloadFileError, load_workload_file

    elsewhere = tmp_path / "secret.json"
    elsewhere.write_text(json.dumps(secret))
    os.symlink(elsewhere, tmp_path / "roofline_workload.json")
    with pytest.raises(WorkloadFileError) as err:
        load_workload_file(str(tmp_path / "roofline_workload.json"))
    assert "roofline_workload.json" in str(err.value)
    assert "TOPSECRET" not in str(err.value) and "api_key" not in str(err.value)


def test_a_csv_cell_starting_with_nul_is_escaped(tmp_path):
    from tb_roofline.serve.service.export import csv_cell, to_csv

    assert csv_cell("\x00=cmd|' /C calc'!A0") == "'\x00=cmd|' /C calc'!A0"
    assert csv_cell("\x00") == "'\x00"
    assert to_csv(["a"], [["\x00@SUM(1)"]]) == "a\n'\x00@SUM(1)\n"


# --- memory: the conversion budget, analyses too large to keep, head-of-line blocking ----------
def _names_bomb(path, events: int, name_kb: int = 40, tail_member: bool = False) -> str:
    """A PyTorch trace of `events` ops with distinct names of `name_kb` KB each (what the
    reader must keep), gzipped to ~1/400 of its size. `tail_member`: the last event in a gzip
    member of its own, so the file's trailer claims a few bytes."""
    import zlib

    filler = b"n" * (name_kb * 1024)
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(z.compress(b'{"traceEvents": ['))
        for i in range(events):
            f.write(
                z.compress(
                    b'{"ph":"X","cat":"cpu_op","name":"op%d_%s","pid":1,"tid":1,'
                    b'"ts":%d,"dur":1},' % (i, filler, 2 * i)
                )
            )
        if tail_member:
            f.write(z.flush())
            z = zlib.compressobj(6, zlib.DEFLATED, 31)
        f.write(
            z.compress(b'{"ph":"X","cat":"cpu_op","name":"last","pid":1,"tid":1,"ts":0,"dur":1}]}')
        )
        f.write(z.flush())
    past = time.time() - 3600
    os.utime(path, (past, past))
    return str(path)


RSS_SCRIPT = r"""
import json, resource, sys, time
from tb_roofline import errors
from tb_roofline.serve.service.core import RooflineService
service = RooflineService(sys.argv[1])
service.list_runs()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = {}
for run in sys.argv[2:]:
    t = time.monotonic()
    try:
        out[run] = ["ok", len(service.program(run, "", True)["rows"])]
    except errors.TooLargeError as exc:
        out[run] = ["413", str(exc)]
    out[run].append(time.monotonic() - t)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"base": base, "peak": peak, "out": out}))
"""


def test_a_names_bomb_is_refused_under_the_memory_budget(tmp_path):
    """200 MB of JSON in a ~0.5 MB .gz: refused from its trailer before it is read; the same
    bomb whose trailer lies is stopped where the budget says. The process's peak RSS grows by
    less than the budget (unbounded, this bomb took ~1 GB)."""
    logdir = tmp_path / "logs"
    _names_bomb(logdir / "bomb" / "w.pt.trace.json.gz", 5000)
    _names_bomb(logdir / "liar" / "w.pt.trace.json.gz", 5000, tail_member=True)
    write_tpu_session(str(logdir / "small"), "", RUN, [SynthConfig(seed=1)])
    _age_all(logdir)
    assert os.path.getsize(logdir / "bomb" / "w.pt.trace.json.gz") < 2 << 20
    env = dict(
        os.environ,
        TB_ROOFLINE_MEMORY_BUDGET_MB="64",
        TB_ROOFLINE_CACHE_DIR="off",
        PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, str(logdir), "bomb", "liar", "small/" + RUN],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    out = result["out"]
    for run in ("bomb", "liar"):
        status, message, _ = out[run]
        assert status == "413" and "memory budget of 64 MB" in message
        assert "TB_ROOFLINE_MEMORY_BUDGET_MB" in message
    assert out["bomb"][2] < 2.0  # refused before reading
    assert out["small/" + RUN][0] == "ok"
    grown = (result["peak"] - result["base"]) / 2**20
    assert grown < 64 + 32, f"peak RSS grew by {grown:.0f} MB"


class _InFlight:
    """Counts the conversions running at once (wraps the real conversion)."""

    def __init__(self, reader):
        self.now = self.most = 0
        self.lock = threading.Lock()
        real = reader._convert

        def convert(*args):
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                return real(*args)
            finally:
                with self.lock:
                    self.now -= 1

        reader._convert = convert


def test_concurrent_big_reads_queue_under_the_budget(tmp_path, monkeypatch):
    logdir = tmp_path / "logs"
    for i in range(4):
        _names_bomb(logdir / f"big{i}" / "w.pt.trace.json.gz", 40 + i)  # ~1.6 MB each
    monkeypatch.setenv("TB_ROOFLINE_MEMORY_BUDGET_MB", "12")  # one at a time (est. ~8 MB)
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    service = RooflineService(str(logdir))
    service.list_runs()
    flight = _InFlight(service.hosts_reader)
    results = []
    threads = [
        threading.Thread(
            target=lambda r=r: results.append(len(service.program(r, "", True)["rows"]))
        )
        for r in ("big0", "big1", "big2", "big3")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 4 and all(results)
    assert flight.most == 1 and service.hosts_reader.budget.used == 0


def test_small_runs_never_wait_behind_a_slow_conversion(tmp_path, monkeypatch):
    logdir = tmp_path / "logs"
    _names_bomb(logdir / "slow" / "w.pt.trace.json.gz", 250)  # ~10 MB of names: seconds
    small = [f"small{i}" for i in range(12)]
    for i, name in enumerate(small):
        write_tpu_session(str(logdir / name), "", RUN, [SynthConfig(seed=i, num_steps=1)])
    _age_all(logdir)
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    # The slow one would take the whole budget (but 1 KB): the small ones pass in the reserve.
    from tb_roofline.serve.service.budget import estimate_bytes

    path = str(logdir / "slow" / "w.pt.trace.json.gz")
    need = estimate_bytes(path, "kineto", os.path.getsize(path))
    monkeypatch.setenv("TB_ROOFLINE_MEMORY_BUDGET_MB", f"{-(-need // 1024) / 1024:.6f}")
    # The reader no longer spends seconds on this bomb (names are cut at 1 KB): hold its
    # conversion until the small runs are done, so it is in flight all the while.
    from tb_roofline.execute import pool

    real_read, release = pool.read_files, threading.Event()

    def read(jobs, *a, **k):
        if any("slow" in job[0] for job in jobs):
            release.wait(120)
        return real_read(jobs, *a, **k)

    monkeypatch.setattr(pool, "read_files", read)
    service = RooflineService(str(logdir))
    service.list_runs()
    slow = threading.Thread(target=lambda: service.program("slow", "", True))
    slow.start()
    deadline = time.monotonic() + 30
    while service.hosts_reader.budget.used == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    budget = service.hosts_reader.budget
    # A big conversion takes at most the budget less the reserve small ones may use (they
    # are counted there like any other: no lane without a limit).
    assert (
        budget.used == min(need, budget.total - budget.reserve)
        and budget.total - budget.used == budget.reserve
    )
    waits = []
    for name in small:
        t = time.monotonic()
        assert service.program(f"{name}/{RUN}", "", True)["rows"]
        waits.append(time.monotonic() - t)
        assert slow.is_alive(), "the slow conversion ended first: the test proves nothing"
    release.set()
    slow.join(300)
    assert max(waits) < 3.0, waits


def test_an_analysis_too_large_to_keep_converts_once_per_page_load(logdir, monkeypatch):
    from tb_roofline.execute import pool
    from tb_roofline.model.records import roofline

    calls = {"read": 0, "analyze": 0}
    real_read, real_analyze = pool.read_files, roofline.analyze

    def read(jobs, *a, **k):
        calls["read"] += len(jobs)
        return real_read(jobs, *a, **k)

    def analyze(*a, **k):
        calls["analyze"] += 1
        return real_analyze(*a, **k)

    monkeypatch.setattr(pool, "read_files", read)
    monkeypatch.setattr(roofline, "analyze", analyze)
    monkeypatch.setenv("TB_ROOFLINE_MEMORY_CACHE_MB", "0.001")  # nothing fits
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    service = RooflineService(str(logdir))
    first = _page_encoded(service) + [service.encoded("ops", RUN, "", True, name="fusion")]
    assert calls == {"read": 1, "analyze": 1}
    assert _page_encoded(service) == first[:4]
    assert calls == {"read": 1, "analyze": 1}


def test_key_locks_are_per_key_and_go_away():
    from tb_roofline.serve.service.hosts import KeyLocks

    locks = KeyLocks()
    held, go = threading.Event(), threading.Event()

    def hold_a():
        with locks.hold(("host", "a")):
            held.set()
            go.wait(10)

    t = threading.Thread(target=hold_a)
    t.start()
    held.wait(10)
    started = time.monotonic()
    for i in range(100):  # any other key: no wait (stripes would share a lock among 100)
        with locks.hold(("host", f"b{i}")):
            pass
    assert time.monotonic() - started < 1.0
    go.set()
    t.join(10)
    assert len(locks) == 0


RSS_CONCURRENT_SCRIPT = r"""
import json, resource, sys, threading
from tb_roofline.serve.service.core import RooflineService
service = RooflineService(sys.argv[1])
service.list_runs()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
rows = []
threads = [threading.Thread(target=lambda r=r: rows.append(
    len(service.program(r, "", True)["rows"]))) for r in sys.argv[2:]]
for t in threads:
    t.start()
for t in threads:
    t.join()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"base": base, "peak": peak, "rows": rows}))
"""


def test_concurrent_bombs_take_the_memory_of_one(tmp_path):
    """Four names bombs of ~8 MB of JSON each, requested at once under a budget that admits one:
    the process's peak RSS grows by about one request's memory (~51 MB alone), not four
    (~190 MB with the budget at 8 GB). Measured with the memory caches off (what they keep is
    their own budget) and one malloc arena: glibc otherwise keeps what each request thread
    freed in that thread's arena, whatever the order requests ran in (docs/design.md)."""
    logdir = tmp_path / "logs"
    runs = [f"bomb{i}" for i in range(4)]
    for i, run in enumerate(runs):
        _names_bomb(logdir / run / "w.pt.trace.json.gz", 200 + i)
    env = dict(
        os.environ,
        TB_ROOFLINE_MEMORY_BUDGET_MB="60",
        TB_ROOFLINE_CACHE_DIR="off",
        TB_ROOFLINE_MEMORY_CACHE_MB="0",
        MALLOC_ARENA_MAX="1",
        PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, "-c", RSS_CONCURRENT_SCRIPT, str(logdir), *runs],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(result["rows"]) == 4 and all(result["rows"])
    grown = (result["peak"] - result["base"]) / 2**20
    assert grown < 120, f"peak RSS grew by {grown:.0f} MB"  # one at a time: ~75 MB


def test_through_a_real_tensorboard_forged_cache_and_deep_json(tmp_path, monkeypatch):
    """The held-out checks' way: a TensorBoard serving a run whose cache entries are forged
    (served from the profile) and a run whose device file nests 1,000 levels (a 422 JSON)."""
    from tb_server import get, tensorboard

    logdir = _cpu_logdir(tmp_path)
    (logdir / "mlp" / "roofline_device.json").write_text("[" * 1000)
    write_tpu_session(str(logdir / "tpu"), "", RUN, [SynthConfig(seed=1)])
    _age_all(logdir)
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(cache_dir))
    service = RooflineService(str(logdir))
    tpu_run = "tpu/" + RUN
    expected = service.program(tpu_run, "", True)
    for entry in (cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX):
        entry.write_bytes(_forged_entry(entry.name, (b'{"forged":1}', False), b"z" * 32))
    api = "/data/plugin/roofline"
    with tensorboard(str(logdir)) as base:
        status, _, body = get(f"{base}{api}/program?run={tpu_run}")
        assert status == 200 and json.loads(body) == expected
        mlp = next(
            r["run"]
            for r in json.loads(get(f"{base}{api}/runs")[2])["runs"]
            if r["run"].startswith("mlp")
        )
        for route in ("/program", "/ops", "/guidance", "/compare"):
            status, _, body = get(f"{base}{api}{_query(route, mlp)}")
            error = json.loads(body)["error"]
            assert status == 422 and error["code"] == "bad_device_file", (route, body[:300])
            assert "nested" in error["message"]
