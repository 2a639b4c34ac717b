"""The disk cache's path (serve/caches/path.py): walked with O_NOFOLLOW before anything resolves
it, links refused (but for the user's own home layout), directories made 0700 whatever the
umask and only under parents that passed the checks, and eviction that never removes a file
the cache did not write. The attacks run as a second local user where the test runs as root
(setpriv, as test_hardening.py's), else they are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest
from testpaths import TESTS

from tb_roofline.serve.caches import disk as disk_cache
from tb_roofline.serve.caches import path as cache_path
from tb_roofline.serve.caches.disk import DiskCache

REPO = os.path.dirname(TESTS)
ATTACKER_UID = 54321
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("setpriv")


def _env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TB_ROOFLINE_CACHE_DIR", "XDG_CACHE_HOME", "TB_ROOFLINE_CACHE_MAX_MB")
    }
    env.update(extra)
    return env


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _victims_files(folder) -> dict:
    """A folder of the victim's own files, some with the cache's entry suffix."""
    os.makedirs(folder, exist_ok=True)
    files = {
        "notes.entry": b"my own notes" * 100,
        "a" * 64 + disk_cache.SUFFIX: b"x" * 5000,
        "thesis.tex": b"\\documentclass{article}",
    }
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return files


def _unchanged(folder, files) -> bool:
    names = set(os.listdir(folder))
    return names == set(files) and all(
        open(os.path.join(folder, n), "rb").read() == data for n, data in files.items()
    )


FROM_ENV = """
import json, os, sys
from tb_roofline.serve.caches.disk import DiskCache
cache = DiskCache.from_env()
ok = bool(cache and cache.put("k", b"v" * 100) and cache.get("k") == b"v" * 100)
print(json.dumps({"directory": cache.directory if cache else None, "ok": ok}))
"""


def _from_env_in(env, umask: int = 0o022) -> dict:
    """DiskCache.from_env() in a fresh process under `umask`: (its directory, put/get ok)."""
    done = subprocess.run(
        [sys.executable, "-c", f"import os; os.umask({umask}); " + FROM_ENV],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env, PYTHONPATH=REPO),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("umask", [0o002, 0o000, 0o077, 0o777])
def test_directories_are_made_0700_under_any_umask(tmp_path, umask):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    result = _from_env_in(_env(HOME=str(home)), umask)
    assert result == {"directory": str(home / ".cache" / "tb-roofline"), "ok": True}
    for made in (
        home / ".cache",
        home / ".cache" / "tb-roofline",
        home / ".cache" / "tb-roofline" / disk_cache.ENTRIES_DIR,
    ):
        assert _mode(made) == 0o700, (made, oct(_mode(made)))
    # The same under a configured path several levels deep.
    deep = tmp_path / "cfg" / "a" / "b"
    result = _from_env_in(_env(HOME=str(home), TB_ROOFLINE_CACHE_DIR=str(deep)), umask)
    assert result == {"directory": str(deep), "ok": True}
    assert all(_mode(p) == 0o700 for p in (tmp_path / "cfg", tmp_path / "cfg" / "a", deep))


def test_nothing_is_made_under_a_parent_others_may_write(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # writable by all, not sticky: checked before creating
    target = shared / "mine" / "cache"
    result = _from_env_in(_env(HOME=str(tmp_path), TB_ROOFLINE_CACHE_DIR=str(target)))
    assert result == {"directory": None, "ok": False}
    assert os.listdir(shared) == []
    os.chmod(shared, 0o1777)  # sticky, like /tmp: others cannot rename what is ours
    result = _from_env_in(_env(HOME=str(tmp_path), TB_ROOFLINE_CACHE_DIR=str(target)))
    assert result == {"directory": str(target), "ok": True}


@pytest.mark.parametrize("where", ["leaf", "middle", "parent-of-home-path"])
def test_a_symlink_anywhere_in_the_path_is_refused(tmp_path, where):
    victim = tmp_path / "victim"
    files = _victims_files(victim)
    area = tmp_path / "area"
    area.mkdir(mode=0o755)
    os.symlink(victim, area / "link")
    configured = {
        "leaf": area / "link",
        "middle": area / "link" / "sub",
        "parent-of-home-path": area / "link" / ".." / "link",
    }[where]
    env = _env(
        HOME=str(tmp_path / "nohome"),
        TB_ROOFLINE_CACHE_DIR=str(configured),
        TB_ROOFLINE_CACHE_MAX_MB="0.001",
    )
    assert _from_env_in(env) == {"directory": None, "ok": False}
    assert _unchanged(victim, files)
    # A cache object made directly on such a path uses nothing behind the link either.
    cache = DiskCache(str(area / "link"), max_bytes=100)
    assert not cache.put("k", b"v" * 10) and cache.get("k") is None and cache.entries() == []
    cache.evict()
    assert _unchanged(victim, files)


def test_the_users_own_home_layout_may_be_a_link(tmp_path):
    """A home directory moved to another disk and linked back (the link in a folder only the
    user or root may write): followed, documented in serve/caches/path.py."""
    real = tmp_path / "disk2" / "me"
    real.mkdir(parents=True)
    homes = tmp_path / "homes"
    homes.mkdir(mode=0o755)
    os.symlink(real, homes / "me")
    result = _from_env_in(_env(HOME=str(homes / "me")))
    assert result == {"directory": str(real / ".cache" / "tb-roofline"), "ok": True}
    # A link below the home is not part of the home's layout: refused.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, real / "cachelink")
    result = _from_env_in(
        _env(HOME=str(homes / "me"), TB_ROOFLINE_CACHE_DIR=str(homes / "me" / "cachelink"))
    )
    assert result == {"directory": None, "ok": False} and os.listdir(elsewhere) == []
    # The home's link in a folder others may write: refused too.
    os.chmod(homes, 0o777)
    assert _from_env_in(_env(HOME=str(homes / "me"))) == {"directory": None, "ok": False}


def test_eviction_never_removes_a_file_the_cache_did_not_write(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    cache = DiskCache(str(folder), max_bytes=4000)
    assert cache.put("mine", b"m" * 100)
    entries = folder / disk_cache.ENTRIES_DIR
    assert _mode(entries) == 0o700
    # Files the cache did not write: without its header, beside the cache's own directory
    # or inside it, named like entries and older than every entry.
    foreign = {
        entries / ("f" * 64 + disk_cache.SUFFIX): b"x" * 3000,
        entries / "old.entry": b"NOT-A-CACHE-FILE" * 10,
        folder / ("e" * 64 + disk_cache.SUFFIX): b"y" * 3000,
    }
    for path, data in foreign.items():
        path.write_bytes(data)
        os.utime(path, (1, 1))
    for i in range(20):  # far more than the cap: our own entries are evicted, oldest first
        assert cache.put(f"k{i}", bytes([i]) * 1000)
    for path, data in foreign.items():
        assert path.read_bytes() == data, path
    own = [
        p
        for p in entries.glob("*" + disk_cache.SUFFIX)
        if p.read_bytes().startswith(disk_cache.MAGIC)
    ]
    assert 1 <= len(own) <= 4 and sum(p.stat().st_size for p in own) <= cache.max_bytes
    assert cache.get("k19") == bytes([19]) * 1000


@pytest.mark.skipif(not AS_ROOT, reason="needs root and setpriv to act as a second local user")
def test_a_link_planted_by_another_user_in_a_shared_sticky_folder(tmp_path):
    """Another local user plants `shared/cache -> the victim's folder` in a sticky shared
    folder (like /tmp) before the victim's first run: the victim's cache is off, nothing is
    made, read or evicted behind the link, even at a tiny size limit."""
    area = tempfile.mkdtemp(prefix="tb_roofline_shared_", dir="/tmp")
    try:
        os.chmod(area, 0o1777)
        victim = os.path.join(area, "victim-home", "work")
        files = _victims_files(victim)
        os.chmod(os.path.dirname(victim), 0o700)
        os.chmod(victim, 0o700)
        link = os.path.join(area, "cache")
        done = subprocess.run(
            [
                "setpriv",
                f"--reuid={ATTACKER_UID}",
                f"--regid={ATTACKER_UID}",
                "--clear-groups",
                "ln",
                "-s",
                victim,
                link,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert os.lstat(link).st_uid == ATTACKER_UID
        for configured in (link, os.path.join(link, "tb-roofline")):
            env = _env(
                HOME=os.path.join(area, "victim-home"),
                TB_ROOFLINE_CACHE_DIR=configured,
                TB_ROOFLINE_CACHE_MAX_MB="0.001",
            )
            assert _from_env_in(env) == {"directory": None, "ok": False}
            assert _unchanged(victim, files)
        with pytest.raises(cache_path.UnsafeDirectory, match="symlink"):
            cache_path.prepare(os.path.join(link, "x"), None)
        assert _unchanged(victim, files)
    finally:
        shutil.rmtree(area, ignore_errors=True)


@pytest.mark.skipif(not AS_ROOT, reason="needs root and setpriv to act as a second local user")
def test_another_users_folder_in_the_path_is_refused_before_creating(tmp_path):
    """A folder owned by another user on the way to the configured path: refused, and
    nothing is created inside it."""
    area = tempfile.mkdtemp(prefix="tb_roofline_other_", dir="/tmp")
    try:
        os.chmod(area, 0o755)
        theirs = os.path.join(area, "theirs")
        os.mkdir(theirs, 0o755)
        os.chown(theirs, ATTACKER_UID, ATTACKER_UID)
        env = _env(HOME=area, TB_ROOFLINE_CACHE_DIR=os.path.join(theirs, "cache"))
        assert _from_env_in(env) == {"directory": None, "ok": False}
        assert os.listdir(theirs) == []
    finally:
        shutil.rmtree(area, ignore_errors=True)
