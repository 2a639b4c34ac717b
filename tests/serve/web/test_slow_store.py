"""A store that keeps answering, too slowly: moto's S3 server behind a real TCP proxy on
localhost that drips its answers (a few bytes at a time, so no read timeout ever fires). Every
remote read and listing has a deadline (TB_ROOFLINE_READ_DEADLINE_S) and every request its own
(TB_ROOFLINE_REQUEST_DEADLINE_S): a dripping store is a 504 naming the store and the setting in
bounded time, never a request held for minutes; before the first listing has finished a run is
"listing in progress" (503), not "unknown run" (404).
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from testpaths import TESTS

from tb_roofline import errors, storage

REPO = os.path.dirname(TESTS)
TRACE = os.path.join(REPO, "testdata", "kineto", "a100_80gb_shapes", "rank0.pt.trace.json.gz")
DRIP_BYTES, DRIP_EVERY_S = 16, 0.25  # 64 B/s, as the attack's endpoint sent


class DrippingProxy:
    """A TCP proxy: requests pass at once; answers pass at once, or DRIP_BYTES every
    DRIP_EVERY_S while `slow` is set (checked per chunk, so it can change mid-answer)."""

    def __init__(self, upstream: str):
        host, port = upstream.rsplit("//", 1)[1].split(":")
        self.upstream = (host, int(port))
        self.slow = threading.Event()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.closed = False
        self.dripped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, src, dst, answers: bool):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while data:
                    if answers and self.slow.is_set():
                        part, data = data[:DRIP_BYTES], data[DRIP_BYTES:]
                        dst.sendall(part)
                        self.dripped += len(part)
                        time.sleep(DRIP_EVERY_S)
                    else:
                        dst.sendall(data)
                        data = b""
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self):
        self.closed = True
        self.listener.close()


@pytest.fixture(scope="module")
def moto():
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    from s3_server import moto_server

    with moto_server() as server:
        server.client().create_bucket(Bucket="slow")
        with open(TRACE, "rb") as f:
            server.client().put_object(
                Bucket="slow", Key="logs/run1/rank0.pt.trace.json.gz", Body=f.read()
            )
        yield server


@pytest.fixture
def proxy(moto, monkeypatch):
    p = DrippingProxy(moto.endpoint)
    for name, value in dict(
        moto.env(), AWS_ENDPOINT_URL=p.endpoint, S3_ENDPOINT=p.endpoint
    ).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    monkeypatch.setenv("TB_ROOFLINE_YOUNG_FILE_S", "0.001")
    yield p
    p.slow.clear()
    p.close()


URL = "s3://slow/logs/run1/rank0.pt.trace.json.gz"


def test_a_dripping_read_fails_at_the_read_deadline(proxy, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_READ_DEADLINE_S", "3")
    st = storage.stat(URL)  # fast: the store is not slow yet
    assert st.st_size == os.path.getsize(TRACE)
    proxy.slow.set()
    start = time.monotonic()
    with pytest.raises(storage.StorageDeadlineError) as info:
        with storage.open_binary(URL, size=st.st_size) as f:
            f.read()
    took = time.monotonic() - start
    assert 2.5 <= took < 8, took  # the deadline, not the size of the file at 64 B/s (~40 min)
    message = str(info.value)
    assert "TB_ROOFLINE_READ_DEADLINE_S" in message and "s3://slow" in message
    assert proxy.endpoint in message and "3 s" in message
    assert proxy.dripped > 0  # it did drip (the timeout was not a silent store's)
    # A stat (HEAD) dripping is cut the same way.
    start = time.monotonic()
    with pytest.raises(storage.StorageDeadlineError):
        storage.stat(URL)
    assert time.monotonic() - start < 8


def _client(logdir):
    from tensorboard.plugins import base_plugin
    from werkzeug import test as wtest
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.plugin import RooflinePlugin

    apps = RooflinePlugin(base_plugin.TBContext(logdir=logdir)).get_plugin_apps()
    return wtest.Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)


def _wait_listed(client, most_s=30):
    end = time.monotonic() + most_s
    while time.monotonic() < end:
        runs = client.get("/runs").json.get("runs") or []
        if runs:
            return [r["run"] for r in runs]
        time.sleep(0.2)
    raise AssertionError("never listed")


@pytest.mark.parametrize(
    "setting", ["TB_ROOFLINE_READ_DEADLINE_S", "TB_ROOFLINE_REQUEST_DEADLINE_S"]
)
def test_a_request_on_a_dripping_store_is_a_504_in_bounded_time(proxy, monkeypatch, setting):
    monkeypatch.setenv(setting, "3")
    client = _client("s3://slow/logs")
    assert _wait_listed(client) == ["run1"]
    proxy.slow.set()
    start = time.monotonic()
    r = client.get("/program?run=run1")
    took = time.monotonic() - start
    assert r.status_code == 504, (r.status_code, r.data[:400])
    error = r.json["error"]
    assert error["code"] == "storage_timeout" and setting in error["message"], error
    assert "s3://slow" in error["message"] and "rank0.pt.trace.json.gz" in error["message"]
    assert took < 10, took
    # Remembered for a while (errors.REMOTE_ERROR_RETRY_S): the next request answers at once.
    start = time.monotonic()
    assert client.get("/program?run=run1").status_code == 504
    assert time.monotonic() - start < 2


def test_a_run_before_the_first_listing_is_503_listing_in_progress(proxy, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_READ_DEADLINE_S", "4")
    proxy.slow.set()  # the listing drips
    client = _client("s3://slow/logs")
    start = time.monotonic()
    r = client.get("/program?run=run1")
    assert r.status_code == 503, (r.status_code, r.data[:400])
    assert r.json["error"]["code"] == "listing_in_progress"
    assert "listing in progress" in r.json["error"]["message"]
    assert time.monotonic() - start < 5
    # The dripping listing fails at its deadline: then the store's error, not a hang.
    end = time.monotonic() + 20
    while time.monotonic() < end:
        r = client.get("/runs")
        if r.status_code != 200 or not r.json.get("scanning"):
            break
        time.sleep(0.2)
    assert time.monotonic() - start < 12
    assert r.status_code == 502 and "TB_ROOFLINE_READ_DEADLINE_S" in r.json["error"]["message"]
    r = client.get("/program?run=run1")
    assert r.status_code == 502, (r.status_code, r.data[:300])


def test_the_deadlines_leave_a_healthy_store_alone(proxy, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_READ_DEADLINE_S", "30")
    client = _client("s3://slow/logs")
    assert _wait_listed(client) == ["run1"]
    r = client.get("/program?run=run1")
    assert r.status_code == 200 and r.json["rows"], r.data[:300]
    assert issubclass(storage.StorageDeadlineError, storage.StorageTimeoutError)
    assert errors.StorageTimeoutPublicError.http_code == 504
