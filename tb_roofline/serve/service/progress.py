"""Progress of the conversions under way: log lines for TensorBoard (`LoggedProgress`) and
what `/progress` answers per run (`ReadProgress`)."""

from __future__ import annotations

import contextlib
import threading
import time


class LoggedProgress:
    """A HostReader progress callback for TensorBoard: INFO lines "read k of N hosts" on the
    `tb_roofline.progress` logger, set to INFO so that they show at TensorBoard's default
    verbosity (WARNING for every other logger); the first after FIRST_S, then at most one per
    EVERY_S, and the last of a read."""

    FIRST_S, EVERY_S = 2.0, 5.0

    def __init__(self):
        import logging

        self.log = logging.getLogger("tb_roofline.progress")
        if self.log.level == logging.NOTSET:
            self.log.setLevel(logging.INFO)
        self.lock = threading.Lock()
        self.start: float | None = None
        self.last = 0.0

    def __call__(self, host, done, total, hosts_done=None, hosts_total=None):
        if not hosts_total:
            return
        now = time.monotonic()
        with self.lock:
            if self.start is None:  # a read begins
                self.start = now
            took = now - self.start
            finished = hosts_done == hosts_total and done >= total
            show = took >= self.FIRST_S and (finished or now - self.last >= self.EVERY_S)
            if show:
                self.last = now
            if finished:
                self.start = None
        if show:
            self.log.info(
                "tb-roofline: read %d of %d hosts (%s: %d of %d parts; %.1f s)",
                hosts_done,
                hosts_total,
                host,
                done,
                total,
                took,
            )


class ReadProgress:
    """The conversions under way, per run: how many of a request's hosts are read (the
    cached ones count as read) and since when. What `/progress` answers while the tab waits;
    a lookup under a lock, never a file access."""

    def __init__(self):
        self.lock = threading.Lock()
        self.runs: dict = {}  # run name -> {token: [hosts_done, hosts_total, started]}

    @contextlib.contextmanager
    def reading(self, run_name: str, done: int, total: int):
        """Count a conversion of `total` hosts (`done` of them read already) while it runs;
        yields `update(hosts_done)`."""
        token = object()
        state = [done, total, time.monotonic()]
        with self.lock:
            self.runs.setdefault(run_name, {})[token] = state

        def update(hosts_done: int):
            with self.lock:
                state[0] = hosts_done

        try:
            yield update
        finally:
            with self.lock:
                reads = self.runs.get(run_name, {})
                reads.pop(token, None)
                if not reads:
                    self.runs.pop(run_name, None)

    def of(self, run_name: str) -> dict:
        """`reading`, and where it is: hosts read and to read over the run's conversions
        under way (null when none), seconds since the first began."""
        with self.lock:
            states = [list(s) for s in self.runs.get(run_name, {}).values()]
        if not states:
            return {"reading": False, "hosts_done": None, "hosts_total": None, "elapsed_s": None}
        return {
            "reading": True,
            "hosts_done": sum(s[0] for s in states),
            "hosts_total": sum(s[1] for s in states),
            "elapsed_s": round(time.monotonic() - min(s[2] for s in states), 1),
        }
