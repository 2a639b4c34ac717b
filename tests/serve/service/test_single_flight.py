"""Concurrent requests for one run's guidance share one computation: eight real HTTP requests
at once to `tb-roofline serve`'s app (a threaded werkzeug server, as `serve` runs it) make the
guidance once, so their peak memory is that of one request, not eight."""

from __future__ import annotations

import concurrent.futures
import gc
import http.client
import json
import os
import subprocess
import sys
import threading
import tracemalloc

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.web.standalone import StandaloneApp
from tb_roofline.synthetic import SynthConfig, write_tpu_session

RUN = "pod/2026_01_01_00_00_00"


@pytest.fixture(scope="module")
def pod(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("pod")
    write_tpu_session(
        str(logdir),
        "pod",
        "2026_01_01_00_00_00",
        [
            SynthConfig(seed=i, hostname=f"h{i}", num_steps=4, ops_per_step=400, distinct_ops=300)
            for i in range(8)
        ],
    )
    return str(logdir)


# Each connection's server-side end, by the client's port: set once the server handled it
# (werkzeug then reads what is left on the socket with a 10 MB buffer when the client has
# already closed it; closing only after the server is done keeps that out of the measure).
_DONE: dict = {}
_DONE_LOCK = threading.Lock()


def _done_event(port: int, new: bool = False) -> threading.Event:
    """The event of the connection from `port`: a new one for a client that just connected
    (a port is used again by later connections), the client's for the server's end."""
    with _DONE_LOCK:
        if new:
            _DONE[port] = threading.Event()
        return _DONE.setdefault(port, threading.Event())


def _serve(service):
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Handler(WSGIRequestHandler):
        def handle(self):
            try:
                super().handle()
            finally:
                _done_event(self.client_address[1]).set()

    server = make_server(
        "127.0.0.1", 0, StandaloneApp(service), threaded=True, request_handler=Handler
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def guidance_peak(logdir: str, n: int) -> tuple[int, list, int]:
    """(peak bytes allocated while `n` requests for /guidance run at once, their answers,
    the guidance computations they made)
    on a fresh server whose analysis is already made and guidance modules imported (what is
    measured is the guidance)."""
    service = RooflineService(logdir)
    server = _serve(service)

    def get(query=""):
        conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=120)
        try:
            conn.connect()
            done = _done_event(conn.sock.getsockname()[1], new=True)
            conn.request("GET", f"/guidance?run={RUN}{query}")
            r = conn.getresponse()
            answer = r.status, json.loads(r.read())
            assert done.wait(60)  # closed once the server is done with the connection
            return answer
        finally:
            conn.close()

    # What a first guidance request of this process makes once (the server's and the model's
    # modules, their lazy tables), made before measuring: the run's guidance without
    # infeed/outfeed, another question, so not the answer measured.
    assert get("&infeed_outfeed=exclude")[0] == 200
    made = service._flights.made
    barrier = threading.Barrier(n)

    def at_once(_):
        barrier.wait()
        return get()

    gc.collect()
    gc.disable()  # what a request allocates, not when the collector happens to run
    try:
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(at_once, range(n)))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        gc.enable()
        server.shutdown()
    return peak, answers, service._flights.made - made


HERE = os.path.dirname(os.path.abspath(__file__))


def _measured(logdir: str, n: int, rounds: int = 3) -> list:
    """`guidance_peak` `rounds` times, each on a fresh server, in a process of its own (no
    other test's threads allocate meanwhile)."""
    code = (
        "import json, os, sys; sys.path[:0] = sys.argv[1].split(os.pathsep); "
        "import test_single_flight as t; "
        "print(json.dumps([t.guidance_peak(sys.argv[2], int(sys.argv[3])) "
        "for _ in range(int(sys.argv[4]))]))"
    )
    env = dict(os.environ, TB_ROOFLINE_CACHE_DIR="off")
    done = subprocess.run(
        [sys.executable, "-c", code, os.pathsep.join([HERE, TESTS]), logdir, str(n), str(rounds)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_concurrent_guidance_requests_share_one_computation(pod):
    ones, eights = _measured(pod, 1), _measured(pod, 8)
    (single,) = ones[0][1]
    for _, answers, made in eights:  # eight requests at once: one computation, one answer
        # (two flights: the guidance, then its JSON, each made once for the eight)
        assert made == 2 and [a for a in answers] == [single] * 8
    # Their memory: what one request's is, not eight times it. The least of three rounds:
    # werkzeug drains each closed connection with a 10 MB read buffer, now and then
    # inside the measured window (the same for any route).
    one, eight = min(r[0] for r in ones), min(r[0] for r in eights)
    print("peak of one request", one, "of eight at once", eight)  # shown with pytest -s
    assert eight < one + 2 * 2**20, (eight, one)


def test_single_flight_shares_results_and_errors():
    """Callers that ask while a computation runs take its result (or its error); once it is
    done, the next caller computes anew."""
    from tb_roofline.serve.service.hosts import SingleFlight

    flight, started, release, made = SingleFlight(), threading.Event(), threading.Event(), []

    def make():
        made.append(1)
        started.set()
        release.wait(10)
        return object()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        first = pool.submit(flight.run, "k", make)
        started.wait(10)
        others = [pool.submit(flight.run, "k", make) for _ in range(3)]
        release.set()
        results = [first.result(10)] + [f.result(10) for f in others]
    assert len(made) == 1 and all(r is results[0] for r in results) and len(flight) == 0

    def fail():
        raise ValueError("bad run")

    with pytest.raises(ValueError, match="bad run"):
        flight.run("k", fail)
    assert flight.run("k", lambda: 5) == 5 and len(flight) == 0
