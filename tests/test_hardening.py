"""Hostile cases of issue 17, each reproduced: a disk cache another user plants entries in,
forged entries, deep JSON in device and workload files, messages about outside files, NUL in
CSV cells, a names bomb under the memory budget, a too-large analysis and head-of-line
blocking."""
from __future__ import annotations

import gzip
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

from tb_roofline import errors
from tb_roofline.serve import cache_codec, disk_cache
from tb_roofline.serve.disk_cache import DiskCache, UnsafeDirectory, check_directory_chain
from tb_roofline.serve.service import RooflineService
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
    return (service.program(RUN, "", True), service.ops(RUN, "", False),
            service.device(RUN, ""), service.diagnostics(RUN, ""))


def _page_encoded(service):
    return [service.encoded(kind, RUN, "", True, **params) for kind, params in
            (("program", {"include_infeed_outfeed": True}), ("device", {}),
             ("diagnostics", {}), ("ops", {"include_infeed_outfeed": False}))]


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
    return b"TBRFCACHE1\n" + struct.pack(">32sQ", hashlib.sha256(payload).digest(),
                                         len(payload)) + payload


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
    for entry in (tmp_path / "cache").glob("*" + disk_cache.SUFFIX):
        data = entry.read_bytes()
        assert data.startswith(disk_cache.MAGIC) and b"\x80\x05" not in data[:64]
        with pytest.raises(Exception):
            pickle.loads(data[len(disk_cache.MAGIC) + disk_cache.MAC_BYTES:])
    restarted = RooflineService(str(logdir))
    for path in logdir.rglob("*.xplane.pb"):  # only the cache can answer now
        st = path.stat()
        path.write_bytes(b"\xff" * st.st_size)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _page(restarted) == expected
    value = {"t": (1, 2.5, float("nan")), 3: [None, b"\x00\xff"], ("k",): {1, 2}}
    back = cache_codec.decode(cache_codec.encode(value))
    assert back[3] == [None, b"\x00\xff"] and back[("k",)] == {1, 2}
    assert back["t"][:2] == (1, 2.5) and back["t"][2] != back["t"][2]


def test_a_planted_pickle_or_forged_entry_is_a_miss(logdir, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(cache_dir))
    expected = _page_encoded(RooflineService(str(logdir)))
    names = [p.name for p in cache_dir.glob("*" + disk_cache.SUFFIX)]
    assert len(names) == 5  # the profile and four answers
    marker = tmp_path / "ran"
    forged_answer = (b'{"forged":true}', False)
    for name in names:
        (cache_dir / name).write_bytes(
            _pickle_entry(marker) if name == names[0]
            else _forged_entry(name, forged_answer, b"k" * 32))
        (cache_dir / (name[: -len(disk_cache.SUFFIX)] + ".pkl")).write_bytes(
            _pickle_entry(marker))
    assert _page_encoded(RooflineService(str(logdir))) == expected
    assert not marker.exists()
    # A valid entry renamed to another key is a miss too (the name is under the MAC).
    good = RooflineService(str(logdir))
    _page_encoded(good)
    entries = sorted(cache_dir.glob("*" + disk_cache.SUFFIX))
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
    return subprocess.run(["setpriv", f"--reuid={ATTACKER_UID}", f"--regid={ATTACKER_UID}",
                           "--clear-groups", "sh", "-c", script], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to run the attacker's steps as another user")
def test_another_user_cannot_plant_entries(logdir, monkeypatch):
    """The attack of issue 17: the cache under a parent another user may write; they rename
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
        names = sorted(os.listdir(cache_dir))
        assert sum(n.endswith(disk_cache.SUFFIX) for n in names) == 5
        stage = os.path.join(area, "stage")
        os.mkdir(stage)
        marker = os.path.join(area, "ran")
        entry_names = [n for n in names if n.endswith(disk_cache.SUFFIX)]
        for name in entry_names:
            if True:
                with open(os.path.join(stage, name), "wb") as f:
                    f.write(_pickle_entry(marker) if name == entry_names[0] else
                            _forged_entry(name, (b'{"forged":1}', False), b"x" * 32))
                with open(os.path.join(stage, name[:-len(disk_cache.SUFFIX)] + ".pkl"),
                          "wb") as f:
                    f.write(_pickle_entry(marker))
        with open(os.path.join(stage, disk_cache.KEY_FILE), "wb") as f:
            f.write(b"x" * 32)  # the key the forged entries were made with
        os.chmod(stage, 0o755)
        for n in os.listdir(stage):
            os.chmod(os.path.join(stage, n), 0o644)
        # The team directory becomes writable by others (not sticky): the attack.
        os.chmod(parent, 0o777)
        done = _as_attacker(f"mv {cache_dir} {parent}/old && mkdir -m 700 {cache_dir} && "
                            f"cp {stage}/* {stage}/.key {cache_dir}/ && chmod 600 "
                            f"{cache_dir}/.key && ls -a {cache_dir}")
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
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUTES = ("/device", "/program", "/ops", "/diagnostics", "/guidance", "/report", "/export",
          "/compare")


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

    from tb_roofline.serve.plugin import RooflinePlugin
    apps = RooflinePlugin(base_plugin.TBContext(logdir=str(logdir))).get_plugin_apps()
    return wtest.Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)


def _query(route, run):
    return f"{route}?run={run}" + (f"&base={run}" if route == "/compare" else "")


@pytest.mark.parametrize("text", ["[" * 1000, '{"kind": "cpu", "notes": ' + "[" * 5000 + "]" * 5000
                                  + "}", "{" + '"a":{' * 900 + "1" + "}" * 901])
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
    from tb_roofline.serve.cli import main
    assert main(["report", str(logdir), "--run", run]) == 1
    err = capsys.readouterr().err
    assert "roofline_device.json" in err and "nested" in err and "Traceback" not in err


def test_deep_workload_json_is_a_422_and_a_clean_cli_error(tmp_path, capsys):
    logdir = _cpu_logdir(tmp_path)
    shutil.copy(os.path.join(REPO, "testdata", "guidance", "roofline_device.json"),
                logdir / "roofline_device.json")
    (logdir / "roofline_workload.json").write_text("[" * 1000)
    client = _client(logdir)
    run = client.get("/runs").json["runs"][0]["run"]
    for route in ("/guidance", "/report"):
        r = client.get(_query(route, run))
        assert r.status_code == 422, (route, r.data[:300])
        assert r.json["error"]["code"] == "bad_workload_file"
        assert "roofline_workload.json" in r.json["error"]["message"]
    assert client.get(_query("/program", run)).status_code == 200
    from tb_roofline.serve.cli import main
    assert main(["report", str(logdir), "--run", run]) == 1
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


@pytest.mark.parametrize("secret", [{"model_flops_per_step": "TOPSECRET-VALUE"},
                                    {"tokens_per_step": 1, "api_key": "TOPSECRET-VALUE"}])
def test_workload_errors_never_quote_a_symlinked_files_values(tmp_path, secret):
    from tb_roofline.serve.workload_file import WorkloadFileError, load_workload_file
    elsewhere = tmp_path / "secret.json"
    elsewhere.write_text(json.dumps(secret))
    os.symlink(elsewhere, tmp_path / "roofline_workload.json")
    with pytest.raises(WorkloadFileError) as err:
        load_workload_file(str(tmp_path / "roofline_workload.json"))
    assert "roofline_workload.json" in str(err.value)
    assert "TOPSECRET" not in str(err.value) and "api_key" not in str(err.value)


def test_a_csv_cell_starting_with_nul_is_escaped(tmp_path):
    from tb_roofline.serve.export import csv_cell, to_csv
    assert csv_cell("\x00=cmd|' /C calc'!A0") == "'\x00=cmd|' /C calc'!A0"
    assert csv_cell("\x00") == "'\x00"
    assert to_csv(["a"], [["\x00@SUM(1)"]]) == "a\n'\x00@SUM(1)\n"
