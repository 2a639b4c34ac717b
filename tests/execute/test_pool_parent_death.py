"""Reader-pool workers die with the process that serves (execute/pool.py): a TensorBoard
killed with SIGKILL leaves no worker behind, even one deep in a C call that holds the GIL
(where the parent-watch thread cannot run): the kernel's parent-death signal (Linux)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from testpaths import TESTS

REPO = os.path.dirname(TESTS)

PARENT = r"""
import json, re, sys, threading, time
from tb_roofline.execute import pool
if sys.argv[1] == "forkserver":  # another thread, as TensorBoard has: a fork server's workers
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
workers = pool._get_pool(2)
# Catastrophic backtracking: the C regex engine holds the GIL for ever.
futures = [workers.submit(re.match, r"(a+)+$", "a" * 64 + "b") for _ in range(2)]
time.sleep(1.5)
print(json.dumps({"method": workers._mp_context.get_start_method(),
                  "pids": sorted(workers._processes)}), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(line for line in f if line.startswith("State:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return False
    return "Z" not in state.split()[1]  # a zombie has died (PID 1 may never reap it)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
@pytest.mark.parametrize("method", ["forkserver", "fork"])
def test_workers_busy_in_c_die_when_the_server_is_killed(method):
    env = dict(
        os.environ,
        TB_ROOFLINE_WORKERS="2",
        PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT, method], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        line = proc.stdout.readline()
        info = json.loads(line)
        assert info["method"] == method and len(info["pids"]) == 2, info
        assert all(_alive(p) for p in info["pids"])
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        end = time.monotonic() + 5
        while time.monotonic() < end and any(_alive(p) for p in info["pids"]):
            time.sleep(0.1)
        left = [p for p in info["pids"] if _alive(p)]
        assert not left, f"workers outlived their server: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in info["pids"] if "info" in dir() else []:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
