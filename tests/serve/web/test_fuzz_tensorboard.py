"""A representative subset of the fuzz cases (fuzz_profiles.py) through a real `tensorboard`
process: no 500, no request that hangs, every other run still served after each bad one, and the
server's peak memory (VmHWM) bounded, bombs included. The bulk runs through the service in
test_fuzz_service.py."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.parse

from fuzz_profiles import (
    KINETO,
    KINETO_GZ,
    XPLANE,
    damaged_kineto,
    damaged_xspace,
    kineto_bomb,
    xspace_bases,
)
from tb_server import get, tensorboard
from test_fuzz_service import write_case

REQUEST_LIMIT_S = 30.0
ROUTES = ("program", "ops", "device", "diagnostics", "export")


def _server_pid(base: str) -> int | None:
    """The tensorboard process listening at `base` (found by its --port argument)."""
    port = base.rsplit(":", 1)[1]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"tensorboard.main" in b" ".join(args) and port.encode() in args:
            return int(pid)
    return None


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _cases():
    from test_kineto_fuzz import DOCS, _mutate_doc

    bases = xspace_bases()
    cases = [
        (f"x_{b}_{seed}", XPLANE, damaged_xspace(seed, b, bases[b]))
        for b in bases
        for seed in range(0, 48, 6)
    ]
    cases += [(f"k_{seed}", *damaged_kineto(seed, DOCS, _mutate_doc)) for seed in range(0, 60, 5)]
    cases += [
        ("bomb_events", KINETO_GZ, kineto_bomb("events", 256)),  # 256 MiB, 3.4 M events
        ("bomb_spaces", KINETO_GZ, kineto_bomb("whitespace", 1024)),  # 1 GiB of spaces
        ("bomb_braces", KINETO_GZ, kineto_bomb("braces", 16)),
        ("bomb_matmuls", KINETO_GZ, kineto_bomb("matmuls", 16)),
        ("deep", KINETO, b'{"traceEvents": [' + b"[" * 100000 + b"]" * 100000 + b"]}"),
        ("long_int", KINETO, b'{"traceEvents": [{"ts": ' + b"9" * 6000 + b"}]}"),
    ]
    return cases


def test_damaged_profiles_through_tensorboard(tmp_path, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_MAX_EVENTS", "1000000")  # the server's limit, lowered
    logdir = str(tmp_path)
    good = write_case(logdir, "good", XPLANE, xspace_bases()["tpu"])
    unicode_run = write_case(logdir, "训练-é", XPLANE, xspace_bases()["tpu"])
    runs = [write_case(logdir, name, suffix, data) for name, suffix, data in _cases()]
    with tensorboard(logdir) as base:
        api = base + "/data/plugin/roofline"
        pid = _server_pid(base)
        assert pid, "tensorboard process not found"

        def ask(route, run):
            t = time.monotonic()
            status, headers, body = get(
                f"{api}/{route}?run={urllib.parse.quote(run)}", timeout=2 * REQUEST_LIMIT_S
            )
            elapsed = time.monotonic() - t
            assert elapsed < REQUEST_LIMIT_S, f"{route} {run}: {elapsed:.1f} s"
            return status, headers, body

        assert ask("program", good)[0] == 200
        # An export named outside Latin-1 is answered (it never was).
        status, headers, _ = ask("export", unicode_run)
        assert status == 200 and "filename*=UTF-8''" in headers["Content-Disposition"]
        assert get(api + "/static/app.js%00x")[0] == 404
        baseline = _peak_rss_mb(pid)
        statuses = {}
        for run in runs:
            for route in ROUTES:
                status, _, body = ask(route, run)
                assert status in (200, 413, 422), f"{route} {run}: {status} {body[:300]!r}"
                if status != 200:
                    json.loads(body)["error"]["message"]
                statuses[status] = statuses.get(status, 0) + 1
            assert ask("program", good)[0] == 200, f"after {run}"
            assert ask("runs", "")[0] == 200
        assert statuses.get(200) and statuses.get(422) and statuses.get(413), statuses
        growth = _peak_rss_mb(pid) - baseline
        assert growth < 1024, f"the server's peak memory grew by {growth:.0f} MB"


def test_the_tab_asking_for_a_bomb_four_times_at_once(tmp_path, monkeypatch):
    """The tab asks for the device, program, ops and diagnostics of a run at once: a bomb is
    read once (the others get its answer), and another run is served meanwhile."""
    monkeypatch.setenv("TB_ROOFLINE_MAX_EVENTS", "1000000")
    logdir = str(tmp_path)
    good = write_case(logdir, "good", XPLANE, xspace_bases()["tpu"])
    bomb = write_case(logdir, "bomb", KINETO_GZ, kineto_bomb("events", 256))
    with tensorboard(logdir) as base:
        api = base + "/data/plugin/roofline"
        answers = {}

        def ask(route):
            t = time.monotonic()
            answers[route] = (
                get(f"{api}/{route}?run={bomb}", timeout=120)[0],
                time.monotonic() - t,
            )

        threads = [threading.Thread(target=ask, args=(r,)) for r in ROUTES[:4]]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        status, _, _ = get(f"{api}/program?run={urllib.parse.quote(good)}", timeout=60)
        assert status == 200
        for t in threads:
            t.join(120)
        total = time.monotonic() - t0
        assert {s for s, _ in answers.values()} == {413}, answers
        slowest = max(e for _, e in answers.values())
        # One read of the bomb, not four in a row (each waited for the one before).
        assert total < 2.2 * min(e for _, e in answers.values()) + 5, (answers, total)
        assert slowest < REQUEST_LIMIT_S
