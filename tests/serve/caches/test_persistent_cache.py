"""The cache of converted profiles on disk: restarts answer from it, it never writes into the
logdir, two servers share it, bad entries are replaced, it stays under its cap."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest
from tb_server import get, tensorboard
from testpaths import TESTS

from tb_roofline.execute import pool
from tb_roofline.serve.caches import disk as disk_cache
from tb_roofline.serve.caches.disk import DiskCache
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.synthetic import SynthConfig, write_tpu_session

REPO = os.path.dirname(TESTS)
RUN = "2026_01_01_00_00_00"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(path))
    monkeypatch.delenv("TB_ROOFLINE_CACHE_MAX_MB", raising=False)
    return path


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "logdir"
    write_tpu_session(str(root), "", RUN, [SynthConfig(seed=1)])
    write_tpu_session(
        str(root),
        "b",
        RUN,
        [SynthConfig(seed=2, hostname="h0"), SynthConfig(seed=3, hostname="h1")],
    )
    _age_all(root)
    return root


def _age_all(root, seconds=60):
    past = time.time() - seconds
    for p in root.rglob("*.xplane.pb"):
        os.utime(p, (past, past))


def _tree(root) -> dict:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def _spoil_keeping_identity(path):
    """Garbage of the same size and mtime, as `cp -p` of another file leaves it."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(b"\xff" * st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _answers(service, runs):
    return {
        run: (
            service.program(run, "", True),
            service.ops(run, "", False),
            service.diagnostics(run, ""),
        )
        for run in runs
    }


def test_restart_answers_from_the_cache_and_never_writes_the_logdir(logdir, cache_dir, monkeypatch):
    before = _tree(logdir)
    first = RooflineService(str(logdir))
    runs = [r["run"] for r in first.list_runs()["runs"]]
    expected = _answers(first, runs)
    assert (
        len(list((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX))) == 3
    )  # one per host file
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert _tree(logdir) == before
    restarted = RooflineService(str(logdir))
    with monkeypatch.context() as m:  # no file is read: only the cache can answer
        m.setattr(pool, "read_files", lambda *a, **k: pytest.fail("read a cached file"))
        assert _answers(restarted, runs) == expected
    assert _tree(logdir) == before
    # A rewrite keeping size and mtime (cp -p) is a new version (its ctime moved): read, and
    # failing, with the cache on as with it off.
    for path in logdir.rglob("*.xplane.pb"):
        _spoil_keeping_identity(path)
    with pytest.raises(Exception, match="not a valid XSpace|damaged"):
        RooflineService(str(logdir)).program(RUN, "", True)
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    with pytest.raises(Exception, match="not a valid XSpace|damaged"):
        RooflineService(str(logdir)).program(RUN, "", True)


def test_changed_file_or_code_is_a_miss(logdir, cache_dir, monkeypatch):
    service = RooflineService(str(logdir))
    old = service.program(RUN, "", True)
    write_tpu_session(str(logdir), "", RUN, [SynthConfig(seed=7)])
    _age_all(logdir, 30)
    assert RooflineService(str(logdir)).program(RUN, "", True) != old
    entries = len(list((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX)))
    monkeypatch.setattr(disk_cache, "code_digest", lambda *paths: "other code")
    RooflineService(str(logdir)).program(RUN, "", True)
    assert (
        len(list((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX))) == entries + 1
    )


def test_code_digest_covers_the_reader_sources():
    digest = disk_cache.code_digest()
    assert len(digest) == 64 and digest == disk_cache.code_digest()
    assert {"readers", "table", "devices", "costs"} <= set(disk_cache.CODE_PATHS)
    root = os.path.dirname(disk_cache.tb_roofline.__file__)
    for path in disk_cache.ANSWER_CODE_PATHS:  # a moved module must not fall out of the digest
        assert os.path.exists(os.path.join(root, path)), path
    # every module a conversion runs is under one of them (the executors run, never produce)
    produced = {"readers", "table", "devices", "costs", "protos", "model"}
    assert {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))} - produced <= {
        "serve",
        "static",
        "execute",
        "__pycache__",
    }
    assert {"model", "serve/service/core.py"} <= set(disk_cache.ANSWER_CODE_PATHS)
    assert disk_cache.code_digest(disk_cache.ANSWER_CODE_PATHS) != digest


def test_page_load_answers_survive_a_restart_without_the_profile(logdir, cache_dir, monkeypatch):
    """Unfiltered answers are kept encoded on disk: a restart serves them without reading
    the profile or redoing the analysis; filtered ones are not kept."""
    from tb_roofline import errors
    from tb_roofline.table.op_table import ProfileData

    first = RooflineService(str(logdir))
    kinds = {
        "program": {"include_infeed_outfeed": True},
        "device": {},
        "diagnostics": {},
        "ops": {"include_infeed_outfeed": False},
    }
    expected = {
        kind: first.encoded(kind, RUN, "", True, **params) for kind, params in kinds.items()
    }
    assert all(zipped for body, zipped in expected.values() if len(body) > 1024)
    cache = first.disk_cache
    for entry in (cache_dir / disk_cache.ENTRIES_DIR).glob(
        "*" + disk_cache.SUFFIX
    ):  # drop the converted profiles, keep the answers
        if isinstance(cache.get(entry.stem), ProfileData):
            entry.unlink()
    restarted = RooflineService(str(logdir))
    monkeypatch.setattr(
        pool,
        "read_files",  # no file is read: only the cache answers
        lambda jobs, progress=None: [errors.ProfileFormatError("not read")] * len(jobs),
    )
    for kind, params in kinds.items():
        assert restarted.encoded(kind, RUN, "", True, **params) == expected[kind]
    with pytest.raises(errors.BadProfileError):
        restarted.encoded("ops", RUN, "", True, include_infeed_outfeed=False, name="fusion")


def test_corrupt_or_truncated_entries_are_replaced(logdir, cache_dir):
    expected = RooflineService(str(logdir)).program(RUN, "", True)
    entry = next((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX))
    good = entry.read_bytes()
    for bad in (good[: len(good) // 2], good[:-1] + bytes([good[-1] ^ 1]), b"", b"junk"):
        for p in (cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX):
            p.write_bytes(bad)
        assert RooflineService(str(logdir)).program(RUN, "", True) == expected
        cache = DiskCache(str(cache_dir), max_bytes=1 << 30)
        assert all(
            cache.get(p.stem) is not None
            for p in (cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX)
        )


def test_lru_eviction_keeps_the_cap(tmp_path):
    probe = DiskCache(str(tmp_path / "probe"), max_bytes=1 << 20)
    (tmp_path / "probe").mkdir(mode=0o700)
    assert probe.put("p", b"x" * 1000)
    entry = (
        (tmp_path / "probe" / disk_cache.ENTRIES_DIR / ("p" + disk_cache.SUFFIX)).stat().st_size
    )  # 1000 + framing
    cache = DiskCache(str(tmp_path / "c"), max_bytes=3 * entry + entry // 2)
    (tmp_path / "c").mkdir(mode=0o700)
    tmp_path = tmp_path / "c" / disk_cache.ENTRIES_DIR
    for name in "abc":
        assert cache.put(name, b"x" * 1000)
        time.sleep(0.02)
    assert cache.get("a") == b"x" * 1000  # used: now the most recent
    time.sleep(0.02)
    cache.put("d", b"x" * 1000)
    assert sorted(p.stem for p in tmp_path.glob("*" + disk_cache.SUFFIX)) == ["a", "c", "d"]
    assert not cache.put("huge", b"x" * 10_000)  # larger than the whole cache
    assert sum(p.stat().st_size for p in tmp_path.glob("*" + disk_cache.SUFFIX)) <= cache.max_bytes


def test_settings(tmp_path, logdir, monkeypatch):
    for off in ("off", "OFF", "none", "0"):
        monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", off)
        assert RooflineService(str(logdir)).disk_cache is None
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(logdir / "cache"))  # inside the logdir
    assert RooflineService(str(logdir)).disk_cache is None and not (logdir / "cache").exists()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)  # others could plant a pickle: refused
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(shared))
    assert RooflineService(str(logdir)).disk_cache is None
    monkeypatch.delenv("TB_ROOFLINE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TB_ROOFLINE_CACHE_MAX_MB", "lots")
    cache = RooflineService(str(logdir)).disk_cache
    assert cache.directory == str(tmp_path / "xdg" / "tb-roofline")
    assert cache.max_bytes == disk_cache.DEFAULT_MAX_MB << 20
    monkeypatch.setenv("TB_ROOFLINE_CACHE_MAX_MB", "0.5")
    assert RooflineService(str(logdir)).disk_cache.max_bytes == 1 << 19


def _two_entries_mb(cache_dir) -> str:
    """A cap that holds two of the three entries (eviction then races reads and writes);
    empties the directory."""
    sizes = sorted(
        p.stat().st_size for p in (cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX)
    )
    assert len(sizes) == 3
    shutil.rmtree(cache_dir)
    return str((sizes[-1] + sizes[-2] + sizes[0] // 2) / 2**20)


def test_two_services_share_the_directory(logdir, cache_dir, monkeypatch):
    """Threads of two services converting, hitting and evicting in one directory at once."""
    reference = RooflineService(str(logdir))
    runs = [r["run"] for r in reference.list_runs()["runs"]]
    expected = _answers(reference, runs)
    monkeypatch.setenv("TB_ROOFLINE_CACHE_MAX_MB", _two_entries_mb(cache_dir))
    services = [RooflineService(str(logdir)) for _ in range(2)]

    def work(i):
        service = RooflineService(str(logdir)) if i % 3 == 0 else services[i % 2]
        run = runs[i % len(runs)]
        return run, (
            service.program(run, "", True),
            service.ops(run, "", False),
            service.diagnostics(run, ""),
        )

    with concurrent.futures.ThreadPoolExecutor(6) as threads:
        for run, answer in threads.map(work, range(36)):
            assert answer == expected[run]
    assert not list(cache_dir.glob(".tmp-*"))
    assert len(list((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX))) == 2


WORKER = r"""
import json, sys
from tb_roofline.serve.service.core import RooflineService
out = {}
for _ in range(3):
    s = RooflineService(sys.argv[1])
    for r in s.list_runs()["runs"]:
        out[r["run"]] = s.program(r["run"], "", True)
print(json.dumps(out, sort_keys=True))
"""


def test_two_processes_share_the_directory(logdir, cache_dir):
    reference = RooflineService(str(logdir))
    expected = {
        r["run"]: reference.program(r["run"], "", True) for r in reference.list_runs()["runs"]
    }
    env = {
        **os.environ,
        "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "TB_ROOFLINE_CACHE_MAX_MB": _two_entries_mb(cache_dir),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(logdir)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outputs]
    for out, _ in outputs:
        assert json.loads(out) == json.loads(json.dumps(expected, sort_keys=True))
    assert (
        not list(cache_dir.glob(".tmp-*"))
        and len(list((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX))) == 2
    )


def test_tensorboard_restart_answers_from_the_cache(tmp_path, cache_dir):
    logdir = tmp_path / "tb_logdir"
    shutil.copytree(os.path.join(REPO, "testdata", "demo"), logdir)
    before = _tree(logdir)
    runs = ["v4_pod/2026_11_29_11_30_00", "v6e_train/2026_11_29_10_00_00"]
    api = "/data/plugin/roofline/program?run="
    with tensorboard(str(logdir)) as base:
        first = {run: get(base + api + run)[2] for run in runs}
    assert all(json.loads(body)["rows"] for body in first.values())
    assert len(list((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX))) >= 3
    assert _tree(logdir) == before
    entries = sorted((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX))
    past = time.time() - 3600
    for entry in entries:
        os.utime(entry, (past, past))
    with tensorboard(str(logdir)) as base:
        for run in runs:
            status, _, body = get(base + api + run)
            assert status == 200 and json.loads(body) == json.loads(first[run])
    # Answered from the entries (a hit marks its last use), none made anew.
    assert sorted((cache_dir / disk_cache.ENTRIES_DIR).glob("*" + disk_cache.SUFFIX)) == entries
    assert any(e.stat().st_mtime > past + 60 for e in entries)
