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


OUTPUT_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test-output"
)


@contextlib.contextmanager
def server_process(
    name: str, argv: list, port: int, probe_path: str, wait_s: float, env: dict | None = None
):
    """Run `argv` (a server on `port`) with its output in test-output/<name>_<port>.log, until
    GET `probe_path` answers 200; yields (base URL, log path); stops it afterwards."""
    os.makedirs(OUTPUT_DIR, exist_ok=True)
    log_path = os.path.join(OUTPUT_DIR, f"{name}_{port}.log")
    log = open(log_path, "w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {log_path}")
            try:
                if get(base + probe_path, timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not answer in time; see {log_path}")
            time.sleep(0.3)
        yield base, log_path
    finally:
        stop(proc)
        log.close()


def stop(proc: subprocess.Popen, timeout: float = 15):
    """End a server process: terminate, then kill if it does not go in `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def tensorboard(logdir: str, extra_args=()):
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        logdir,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra_args,
    ]
    with server_process("tensorboard", argv, port, "/data/plugins_listing", 90) as (base, _):
        yield base


def get_json(url: str):
    status, _, body = get(url)
    return status, json.loads(body)
