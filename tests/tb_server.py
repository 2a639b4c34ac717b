"""Start a real `tensorboard` process on a free localhost port, for tests."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 60):
    """(status, headers, body) without raising on HTTP errors."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@contextlib.contextmanager
def tensorboard(logdir: str, extra_args=()):
    port = free_port()
    log_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "test-output")
    os.makedirs(log_dir, exist_ok=True)
    log = open(os.path.join(log_dir, f"tensorboard_{port}.log"), "w")
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", logdir,
                             "--host", "127.0.0.1", "--port", str(port), *extra_args],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"tensorboard exited with {proc.returncode}; see {log.name}")
            try:
                status, _, body = get(base + "/data/plugins_listing", timeout=5)
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"tensorboard did not answer in time; see {log.name}")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def get_json(url: str):
    status, _, body = get(url)
    return status, json.loads(body)
