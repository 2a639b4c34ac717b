"""Storage that misbehaves (tb_roofline/storage.py): an S3 endpoint that accepts connections and
never answers gives up within 30 s naming the store, without a tight retry loop; an S3 object
overwritten between a stat and a read, or mid-read, is "changed while it was read" (503), never
a mix of versions; a local rewrite that keeps size and mtime (`cp -p`) is a new version."""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import subprocess
import time

import pytest
from testpaths import TESTS

from tb_roofline import errors, storage

REPO = os.path.dirname(TESTS)
KINETO = os.path.join(REPO, "testdata", "kineto", "a100_80gb_shapes", "rank0.pt.trace.json.gz")


@pytest.fixture
def silent_endpoint(monkeypatch):
    """An "S3 endpoint": a socket whose kernel accepts every connection; nobody ever answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"
        for name, value in {
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "S3_ENDPOINT": endpoint,
            "AWS_ENDPOINT_URL": endpoint,
        }.items():
            monkeypatch.setenv(name, value)
        yield s, endpoint


def _accepted(s: socket.socket) -> int:
    """Connections the silent endpoint was sent (each a request attempt)."""
    s.setblocking(False)
    n = 0
    while True:
        try:
            conn, _ = s.accept()
        except BlockingIOError:
            return n
        conn.close()
        n += 1


def test_a_stalled_s3_endpoint_times_out_naming_the_store(silent_endpoint):
    pytest.importorskip("s3fs")
    s, endpoint = silent_endpoint
    url = "s3://stalled-bucket/logs/host0.xplane.pb"
    start = time.monotonic()
    with pytest.raises(storage.StorageTimeoutError) as info:
        storage.stat(url)  # defaults: 10 s read timeout, 2 attempts
    took = time.monotonic() - start
    assert took <= 30, took
    assert "s3://stalled-bucket" in str(info.value) and endpoint in str(info.value)
    assert 1 <= _accepted(s) <= 3  # a capped number of attempts, not a tight loop


def test_a_stalled_logdir_listing_is_a_storage_error_soon(silent_endpoint, monkeypatch):
    pytest.importorskip("s3fs")
    from tb_roofline.serve.service.core import RooflineService

    monkeypatch.setenv("TB_ROOFLINE_REMOTE_TIMEOUT_S", "2")
    start = time.monotonic()
    service = RooflineService("s3://stalled-bucket/logs")
    with pytest.raises(errors.StorageError) as info:
        while time.monotonic() - start < 20:  # "scanning" (an empty list) until it gives up
            assert service.list_runs()["scanning"]
            time.sleep(0.2)
    assert time.monotonic() - start < 20
    assert info.value.http_code == 502 and "did not answer in time" in str(info.value)
    assert "stalled-bucket" in str(info.value)


def test_a_profile_on_a_stalled_store_is_a_gateway_timeout_not_a_bad_file(
    silent_endpoint, monkeypatch
):
    """A file the store does not serve in time is a 504 naming the store (retried after a
    while), never a 422 that would call the profile damaged."""
    pytest.importorskip("s3fs")
    from tb_roofline.readers import read_profile_file
    from tb_roofline.readers.files import check_profile_file
    from tb_roofline.serve.service import hosts

    monkeypatch.setenv("TB_ROOFLINE_REMOTE_TIMEOUT_S", "1")
    _, endpoint = silent_endpoint
    url = "s3://stalled-bucket/run/plugins/profile/s/host0.xplane.pb"
    start = time.monotonic()
    for read in (lambda: check_profile_file(url), lambda: read_profile_file(url, "xplane", "h")):
        with pytest.raises(errors.ProfileStoreTimeoutError) as info:
            read()
        public = errors.to_public(info.value, "run 'r', host 'host0'")
        assert public.http_code == 504 and errors.error_code(public) == "storage_timeout"
        assert "stalled-bucket" in str(public) and "host0.xplane.pb" in str(public)
    assert time.monotonic() - start < 30
    assert hosts.REMOTE_ERROR_RETRY_S >= 30  # not retried in a tight loop


def test_storage_errors_survive_pickling():
    """Dask workers send a unit's error back pickled (execute/cluster.py)."""
    for exc in (
        storage.StorageError("s3://b/x: gone"),
        storage.StorageTimeoutError("the store s3://b did not answer in time"),
    ):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc) and back.errno == exc.errno


def test_cp_p_rewrite_of_the_same_size_is_a_new_version(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"x" * 1000)
    b.write_bytes(b"y" * 1000)
    before = storage.version(os.stat(a))
    st = os.stat(a)
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
    time.sleep(0.01)
    subprocess.run(["cp", "-p", str(b), str(a)], check=True)  # same size, same mtime
    after = os.stat(a)
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert storage.version(after) != before
    # rsync -t style: written elsewhere, renamed into place with the old mtime
    c = tmp_path / "c.bin"
    shutil.copy2(b, c)
    os.utime(c, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(c, a)
    assert storage.version(os.stat(a)) not in (before, storage.version(after))


@pytest.fixture(scope="module")
def s3():
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    from s3_server import moto_server

    with moto_server() as server, pytest.MonkeyPatch.context() as mp:
        for name, value in server.env().items():
            mp.setenv(name, value)
        mp.setenv("TB_ROOFLINE_CACHE_DIR", "off")
        server.client().create_bucket(Bucket="changing")
        yield server


def test_an_object_overwritten_after_stat_is_changed_not_mixed(s3):
    client = s3.client()
    client.put_object(Bucket="changing", Key="a.bin", Body=b"1" * 4096)
    url = "s3://changing/a.bin"
    st = storage.stat(url)
    client.put_object(Bucket="changing", Key="a.bin", Body=b"2" * 4096)  # same size
    with pytest.raises(errors.ProfileIncompleteError, match="changed while it was read"):
        with storage.open_binary(url, size=st.st_size) as f:
            f.read()
    storage.stat(url)  # a fresh stat: the new version reads whole
    with storage.open_binary(url, size=4096) as f:
        assert f.read() == b"2" * 4096


def test_a_profile_overwritten_mid_read_is_a_503(s3, monkeypatch):
    """A 1.4 MB PyTorch trace read in 1 MiB ranges; the object is replaced after the first
    (without the ETag condition the second range came from the new object: a broken gzip
    stream, answered 422 as if the file were corrupt)."""
    from tb_roofline.serve.service.core import RooflineService

    monkeypatch.setattr(storage, "READ_BLOCK_BYTES", 1 << 20)
    with open(KINETO, "rb") as f:
        body = f.read()
    client = s3.client()
    key = "logs/run/rank0.pt.trace.json.gz"
    client.put_object(Bucket="changing", Key=key, Body=body)
    service = RooflineService("s3://changing/logs")
    service.list_runs()
    real_read = storage._RemoteFile.read
    state = {"reads": 0}

    def read_then_overwrite(self, n=-1):
        data = real_read(self, n)
        state["reads"] += 1
        if state["reads"] == 1:  # another writer replaces the object now
            client.put_object(Bucket="changing", Key=key, Body=body[::-1])
        return data

    monkeypatch.setattr(storage._RemoteFile, "read", read_then_overwrite)
    with pytest.raises(errors.ProfileIncompletePublicError) as info:
        service.program("run", "", True)
    assert info.value.http_code == 503 and "changed while it was read" in str(info.value)


def test_one_host_timing_out_is_skipped_like_any_other_bad_host(tmp_path, monkeypatch):
    """A multi-host run where one host's store read times out: the others are analysed, the
    timed-out host is named in a diagnostic (as a damaged host is), no 504 for the run."""
    from tb_roofline import errors
    from tb_roofline.execute import pool
    from tb_roofline.serve.service.core import RooflineService
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    write_tpu_session(
        str(tmp_path),
        "run",
        "s",
        [SynthConfig(seed=1, hostname="h0"), SynthConfig(seed=1, hostname="h1")],
    )
    real = pool.read_files

    def h1_times_out(jobs, progress=None):
        got = real(jobs, progress)
        return [
            errors.ProfileStoreTimeoutError("h1.xplane.pb: the store did not answer")
            if job[2] == "h1"
            else r
            for job, r in zip(jobs, got)
        ]

    monkeypatch.setattr(pool, "read_files", h1_times_out)
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    assert service.device(run, "")["device"]
    notes = [
        d for d in service.diagnostics(run, "")["diagnostics"] if "'h1' skipped" in d["message"]
    ]
    assert notes and notes[0]["code"] == "storage_timeout"
    assert service.program(run, "")["rows"]  # the other host's records
