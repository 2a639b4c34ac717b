"""Conversion units on a Dask `distributed` cluster (`pip install 'tb-roofline[dask]'`).

With `TB_ROOFLINE_SCHEDULER=tcp://host:8786` (TensorBoard) or `--scheduler` (the CLI),
`execute/pool.py` hands its units of work (one host's file, or one TensorCore plane of a
file on a path the workers share) to the cluster instead of the local pool: the same pure
functions, run by the workers, which read the files themselves (s3://, gs://, any fsspec URL,
or a shared path) with their own credentials. What travels: the unit's arguments (path, host,
offsets, the size limit) to the workers, the unit's result (the op-table columns of a host or
a plane, as the local pool returns them) back, or, asked so (`summarize`), a summary of it
made there while the result stays on the worker (execute/cluster_held.py). Nothing else is
sent: no credentials, no environment, no code (the workers import their own tb-roofline;
`_probe` checks it is the same code as ours, so the answer is the local one bit for bit).

Faults: a worker lost mid-conversion has its units rerun on another (the scheduler's own
rescheduling); a unit that killed workers repeatedly is that file's error (out of memory?).
A worker that cannot read a unit's file for a reason of its own (no credentials for the
bucket, a path it does not see, a storage package missing: it cannot even `stat` the file)
is a `WorkerFault`: the unit is sent again to the workers that have not failed it, and when
none is left its outcome is the fault, which `execute/pool.py` reads here instead (and
fails on unless allowed, never a silently partial answer). A scheduler that does not answer
within TB_ROOFLINE_CLUSTER_CONNECT_S (10 s), no worker, a worker that cannot import this
tb-roofline, every worker gone for that long, or no unit finishing for
TB_ROOFLINE_CLUSTER_STALL_S (60 s) is a `ClusterError` naming the scheduler or the worker.
distributed's own loggers are kept to CRITICAL: a lost cluster is told once, by us, not by
dozens of its reconnection tracebacks.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time

from tb_roofline import settings
from tb_roofline.execute.cluster_connect import ClusterError, connect
from tb_roofline.execute.cluster_held import Held
from tb_roofline.execute.cluster_worker import (
    WorkerFault,
    _can_read,
    _probe,
    _scheduler_workers,
    _summary,
    _unit,
    access_fault,
    code_id,
)

__all__ = [
    "ClusterError",
    "WorkerFault",
    "configure",
    "note_unavailable",
    "local_fallback",
    "address",
    "strict",
    "allow_partial",
    "get_client",
    "close_clients",
    "usable_workers",
    "run_units",
    "code_id",
    "access_fault",
]

# (socket, hashlib, queue and uuid are imported by the functions that use them: every read
# asks `address()`, and only a read with a scheduler set needs more.)

SCHEDULER_ENV = "TB_ROOFLINE_SCHEDULER"
RETRY_S = 60.0  # TensorBoard: after a failure, convert locally this long before trying again
log = logging.getLogger(__name__)

_lock = threading.Lock()
_clients: dict = {}
_setting: tuple | None = None  # (address, strict) given by the CLI
_failed: dict = {}  # address -> (monotonic time, ClusterError) of its last failure


def configure(address: str | None, strict: bool = True, allow_partial: bool = False):
    """The CLI's `--scheduler` (and `--allow-partial`: hosts no worker nor this process can
    read are skipped, each with its diagnostic, instead of failing the command). None goes
    back to TB_ROOFLINE_SCHEDULER (where a failure is not strict: the plugin converts
    locally, with a diagnostic)."""
    global _setting
    _setting = (address.strip(), strict, allow_partial) if address and address.strip() else None


def note_unavailable(addr: str, exc: ClusterError):
    """A server found the cluster down at its start: conversions go to this process (saying
    so) until RETRY_S has passed, as after a failure mid-run, rather than each request
    waiting for the connection to time out first."""
    _failed[addr] = (time.monotonic(), exc)


def local_fallback() -> dict | None:
    """What `/progress` says of the cluster: None without a scheduler; else its address and,
    while a failure has conversions done by this process instead, since when and why."""
    addr = address()
    if not addr:
        return None
    failed = _failed.get(addr)
    return {
        "scheduler": addr,
        "converting_here": failed is not None,
        "since_s": None if failed is None else round(time.monotonic() - failed[0], 1),
        "reason": None if failed is None else str(failed[1]),
    }


def address() -> str | None:
    """The scheduler to use, or None for local conversion."""
    if _setting is not None:
        return _setting[0]
    return settings.text(settings.SCHEDULER) or None


def strict() -> bool:
    """Whether a cluster failure stops the command (CLI) rather than converting locally."""
    return _setting is not None and _setting[1]


def allow_partial() -> bool:
    """Whether hosts nobody could read may be left out of a strict (CLI) answer."""
    return _setting is None or _setting[2]


def get_client(addr: str):
    """A connected `distributed.Client` for `addr` (one per address, kept)."""
    with _lock:
        client = _clients.get(addr)
        if client is not None and client.status == "running":
            return client
        _clients.pop(addr, None)
    client = connect(addr, settings.number(settings.CLUSTER_CONNECT_S))
    with _lock:
        old = _clients.get(addr)
        if old is not None and old.status == "running":
            client.close()
            return old
        _clients[addr] = client
    return client


def close_clients():
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        try:
            client.close(timeout=5)
        except Exception:  # noqa: BLE001 (closing: nothing to tell anyone)
            pass


atexit.register(close_clients)


_scheduler_ok: set = set()  # scheduler addresses found running our code
_excluded: dict = {}  # scheduler address -> the workers found running other code


def usable_workers(client, addr: str) -> list[str]:
    """The workers that run our tb-roofline (those that do not are left out, by name, in a
    warning and in `_excluded[addr]`); a ClusterError when none does."""
    timeout = settings.number(settings.CLUSTER_CONNECT_S)
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 (TimeoutError, a lost connection)
        raise ClusterError(
            f"the Dask cluster {addr} has no worker answering within "
            f"{timeout:g} s ({type(exc).__name__}: {exc})"
        ) from None
    try:
        answers = client.run(_probe, on_error="return", callback_timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        # A worker busy in a long conversion (another request's) may not answer in time: no
        # reason to give up the cluster. Each unit checks on its worker that the code is ours.
        log.info(
            "tb-roofline: not every Dask worker of %s answered the probe within %g s "
            "(%s): converting there anyway",
            addr,
            timeout,
            type(exc).__name__,
        )
        answers = {}
    ours = _probe()
    if addr not in _scheduler_ok:  # it unpickles the task graphs: our functions are in them
        try:
            theirs = client.run_on_scheduler(_probe, callback_timeout=timeout)
        except Exception as exc:  # noqa: BLE001 (ModuleNotFoundError, a deserialization error)
            raise ClusterError(
                f"the Dask scheduler {addr} cannot import tb-roofline "
                f"({type(exc).__name__}: {str(exc)[:200]}): run it from the "
                "same image as the workers"
            ) from None
        if theirs != ours:
            raise ClusterError(
                f"the Dask scheduler {addr} runs tb-roofline {theirs}, not this "
                f"process's {ours}: run it from the same image as the workers"
            )
        _scheduler_ok.add(addr)
    bad = {w: a for w, a in answers.items() if a != ours}
    _excluded[addr] = set(bad)
    if bad:
        worker, answer = sorted(bad.items())[0]
        why = (
            f"cannot import tb-roofline ({type(answer).__name__}: {answer})"
            if isinstance(answer, BaseException)
            else f"runs tb-roofline {answer}, not this process's {ours}"
        )
        words = (
            f"Dask worker {worker} of {addr} {why}"
            + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
            + ": install the same tb-roofline on every worker"
        )
        if len(bad) == len(answers):
            raise ClusterError(words)
        log.warning(
            "tb-roofline: %s; converting on the other %d worker(s) without %s",
            words,
            len(answers) - len(bad),
            ", ".join(sorted(bad)),
        )
    return sorted(w for w in answers if w not in bad)


def run_units(
    addr: str,
    fn,
    args_list: list,
    progress=None,
    names=None,
    paths=None,
    arrived=None,
    summarize=None,
) -> list:
    """fn(*args) for each, as tasks on the cluster at `addr`: each result, or the exception
    it raised (a `WorkerFault` when no worker could read the unit's file, `paths[k]`);
    `progress(k)` as unit k finishes, and a log line naming it (`names[k]`). `arrived(result)`
    is given each result the moment it is here, before the next is taken in (what it returns
    is kept): a caller folds each into what it holds while the others are still on their
    way. With `summarize`, each result stays on the worker that made it and what comes back
    is a `Held`: its future and `summarize(result)`, made there (execute/cluster_held.py), the
    summary given to `arrived`.
    ClusterError when the cluster cannot."""
    failed = _failed.get(addr)
    if failed is not None and not strict() and time.monotonic() - failed[0] < RETRY_S:
        raise ClusterError(
            f"{failed[1]} ({time.monotonic() - failed[0]:.0f} s ago; tried "
            f"again {RETRY_S:g} s after)"
        )
    try:
        batch = _Batch(addr, fn, args_list, progress, names, paths, arrived)
        batch.summarize = summarize
        outcomes = batch.run()
    except ClusterError as exc:
        _failed[addr] = (time.monotonic(), exc)
        _scheduler_ok.discard(addr)  # a scheduler restarted there is checked again
        _drop_client(addr)  # its reconnection attempts end now, not at exit
        raise
    _failed.pop(addr, None)
    return outcomes


def _drop_client(addr: str):
    with _lock:
        client = _clients.pop(addr, None)
    if client is not None:
        threading.Thread(
            target=_close_quietly, args=(client,), daemon=True, name="tb-roofline-dask-close"
        ).start()


def _close_quietly(client):
    try:
        client.close(timeout=2)
    except Exception:  # noqa: BLE001 (closing a client of a lost cluster: nothing to tell)
        pass


def _live_workers(client) -> set | None:
    """The addresses of the workers the scheduler knows now; None when it cannot say within
    TB_ROOFLINE_CLUSTER_CONNECT_S (`scheduler_info` takes no deadline: a scheduler that
    stopped answering, its connection still open, would hold the wait for ever)."""
    try:
        return set(
            client.run_on_scheduler(
                _scheduler_workers, callback_timeout=settings.number(settings.CLUSTER_CONNECT_S)
            )
        )
    except Exception:  # noqa: BLE001 (the scheduler is gone or silent: the stall decides)
        return None


def _processing(client) -> dict:
    """`client.processing()` (the keys each worker runs) within TB_ROOFLINE_CLUSTER_CONNECT_S
    (the method itself takes no deadline)."""
    return client.sync(
        client.scheduler.processing,
        workers=None,
        callback_timeout=settings.number(settings.CLUSTER_CONNECT_S),
    )


class _Batch:
    """One batch of units on the cluster: sent, collected as they finish, a unit whose worker
    cannot read its file sent again to the workers that have not failed it."""

    def __init__(self, addr, fn, args_list, progress, names, paths, arrived=None):
        import queue
        import uuid

        self.addr, self.fn, self.args_list = addr, fn, args_list
        self.progress, self.names, self.arrived = progress, names, arrived
        self.paths = paths or [None] * len(args_list)
        self.client = get_client(addr)
        self.workers = usable_workers(self.client, addr)
        self.batch = uuid.uuid4().hex[:12]
        # Any worker may run a unit, not only those probed: a worker the nanny restarted
        # (after an out-of-memory kill) comes back at a new address; `_unit` checks its code.
        self.code = _probe()
        self.done: queue.Queue = queue.Queue()
        self.index: dict = {}  # future key -> unit
        self.futures: dict = {}  # unit -> its future now
        self.faults: dict = {}  # unit -> [WorkerFault, ...]
        self.failing: dict = {}  # worker address -> [its first WorkerFault, units it failed]
        self.sent: dict = {}  # unit -> how many times it was sent
        self.summarize = None  # when set: results kept on the workers, summaries fetched
        self.kept: dict = {}  # unit -> the future of its result, kept on its worker

    def _submit(self, k: int, workers=None):
        if workers is None and _excluded.get(self.addr):  # not on workers of other code
            workers = self.workers
        self.sent[k] = self.sent.get(k, 0) + 1
        key = f"tb-roofline-{self.batch}-{k}-{self.sent[k]}"
        f = self.client.submit(
            _unit,
            self.fn,
            self.args_list[k],
            self.code,
            self.paths[k],
            key=key,
            pure=False,
            workers=workers,
            allow_other_workers=False,
        )
        if self.summarize is not None:  # the result stays there; its summary is what comes
            self.kept[k] = f
            f = self.client.submit(_summary, self.summarize, f, key=key + "-summary", pure=False)
        self.index[f.key] = k
        self.futures[k] = f
        f.add_done_callback(self.done.put)

    def run(self) -> list:
        n = len(self.args_list)
        good = self._workers_that_can_read()
        for k in range(n):
            self._submit(k, good)
        log.info(
            "tb-roofline: %d conversion units sent to the Dask cluster %s (%s)",
            n,
            self.addr,
            f"{len(self.workers)} workers"
            if self.workers
            else "its workers did not all answer the probe",
        )
        self.start = self.last = time.monotonic()
        self.outcomes: list = [None] * n
        self.pending = set(range(n))
        try:
            while self.pending:
                self._next()
            self._tell_failing()
        finally:
            # Unfinished units are released by dropping their futures (the client tells the
            # scheduler without waiting): a blocking cancel on a client closed meanwhile (at
            # exit, by close_clients) could hang or hide the error being raised.
            self.futures.clear()
            self.kept.clear()  # (each `Held` outcome keeps its own)
        return self.outcomes

    def _next(self):
        """Wait for the next unit to finish (or fail), checking every second that the workers
        are alive: losing them all is told TB_ROOFLINE_CLUSTER_CONNECT_S after it happened, not
        up to a polling interval later."""
        import queue

        stall = settings.number(settings.CLUSTER_STALL_S)
        grace = settings.number(settings.CLUSTER_CONNECT_S)
        try:
            f = self.done.get(timeout=min(stall, grace, 1.0))
        except queue.Empty:
            self._check_alive(stall, grace)
            return
        k = self.index.get(f.key)
        if k is None or self.futures.get(k) is not f:
            return  # an earlier try of a unit sent again
        self._collect(k, f, stall)

    def _check_alive(self, stall: float, grace: float):
        now = time.monotonic()
        left = f"{len(self.pending)} of {len(self.outcomes)} left"
        if now - self.last >= stall:
            left += ": " + self._pending_names()
            raise ClusterError(
                f"the Dask cluster {self.addr} finished no conversion in "
                f"{stall:g} s ({left}): are its workers alive?"
            )
        if self.client.status != "running" or _live_workers(self.client) == set():
            gone = getattr(self, "gone_since", None) or now
            self.gone_since = gone
            if now - gone >= grace:
                raise ClusterError(
                    f"the Dask cluster {self.addr} has no worker left (none "
                    f"for {now - gone:.0f} s; {left})"
                )
        else:
            self.gone_since = None

    def _pending_names(self, most: int = 3) -> str:
        """The units not finished, by name (the hosts' files), the first few."""
        pending = sorted(self.pending)
        names = [self.names[k] if self.names else f"unit {k}" for k in pending[:most]]
        more = len(pending) - most
        return ", ".join(names) + (f" and {more} more" if more > 0 else "")

    def _collect(self, k: int, f, stall: float):
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        from tb_roofline.errors import ProfileOutOfMemoryError

        try:
            result = self._result(f, stall)
            if self.arrived is not None:
                result = self.arrived(result)
            if self.summarize is not None and not isinstance(result, BaseException):
                result = Held(self.kept[k], result, self.names[k] if self.names else f"unit {k}")
            self.outcomes[k] = result
        except KilledWorker as exc:
            self.outcomes[k] = ProfileOutOfMemoryError(
                f"the Dask workers converting it died ({exc}): out of memory?"
            )
        except WorkerFault as fault:
            if self._again(k, fault):
                return
            self.outcomes[k] = fault  # no worker can: the caller reads it itself
        except (FutureCancelledError, TimeoutError, OSError) as exc:
            raise ClusterError(
                f"the Dask cluster {self.addr} lost a conversion: {type(exc).__name__}: {exc}"
            ) from None
        except Exception as exc:  # noqa: BLE001 (the task itself failed on a worker)
            raise ClusterError(
                f"a conversion failed on the Dask cluster {self.addr}: {type(exc).__name__}: {exc}"
            ) from None
        self.pending.discard(k)
        self.futures.pop(k, None)  # its result is here: the cluster may forget it now
        f.release()
        self.last = time.monotonic()
        log.info(
            "tb-roofline: converted %s on the cluster (%d of %d, %.1f s)",
            self.names[k] if self.names else f"unit {k}",
            len(self.outcomes) - len(self.pending),
            len(self.outcomes),
            self.last - self.start,
        )
        if self.progress:
            self.progress(k)

    def _result(self, f, stall: float):
        """A finished unit's result, fetched from its worker. Waited for in steps of
        TB_ROOFLINE_CLUSTER_CONNECT_S: a result lost with every worker (they all died after it
        finished) is "no worker left" within that time, not a timeout after the stall's."""
        grace = settings.number(settings.CLUSTER_CONNECT_S)
        deadline = time.monotonic() + stall
        while True:
            try:
                return f.result(timeout=max(0.1, min(grace, deadline - time.monotonic())))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
                if self.client.status != "running" or _live_workers(self.client) == set():
                    raise ClusterError(
                        f"the Dask cluster {self.addr} has no worker left (a finished unit's "
                        f"result was lost with its worker; {len(self.pending)} of "
                        f"{len(self.outcomes)} left)"
                    ) from None

    def _again(self, k: int, fault: WorkerFault) -> bool:
        """Send unit k to a worker that has not failed it; False when none is left. A worker's
        first fault (it cannot read: credentials, a path, a package) is told once, and it gets
        no more units: those not yet started go to the others at once (else a worker failing
        fast takes most of a batch, each unit failing there first)."""
        self.faults.setdefault(k, []).append(fault)
        first = fault.worker not in self.failing
        self.failing.setdefault(fault.worker, [fault, 0])[1] += 1
        avoid = set(self.failing) | _excluded.get(self.addr, set())
        tried = {x.worker for x in self.faults[k]} | avoid
        others = sorted((_live_workers(self.client) or set()) - tried)
        log.debug("tb-roofline: %s (unit %d; %d other worker(s) left)", fault, k, len(others))
        if first:
            log.warning(
                "tb-roofline: %s; no more units go to it%s",
                fault,
                f" ({len(others)} other worker(s) take them)" if others else "",
            )
            self._move_waiting(k, avoid)
        if not others:
            return False
        self._submit(k, others)
        return True

    def _workers_that_can_read(self) -> list | None:
        """The workers that can read the batch's first file, asked before anything is sent:
        one without the bucket's credentials (or the path, or a package) would otherwise take
        most units of a batch, failing each fast. Those that cannot are told once and get no
        unit; None (any worker) when all can, none can, or they cannot all say in time."""
        path = next((p for p in self.paths if p), None)
        if path is None:
            return None
        timeout = settings.number(settings.CLUSTER_CONNECT_S)
        try:
            answers = self.client.run(_can_read, path, on_error="return", callback_timeout=timeout)
        except Exception:  # noqa: BLE001 (a busy worker: each unit still checks for itself)
            return None
        bad = {w: a for w, a in answers.items() if isinstance(a, tuple)}
        good = sorted(w for w, a in answers.items() if a is None)
        if not bad or not good:
            return None
        for address, (name, problem) in sorted(bad.items()):
            fault = WorkerFault(address, problem, name)
            self.failing[address] = [fault, 0]
            log.warning(
                "tb-roofline: %s; no units go to it (%d other worker(s) take them)",
                fault,
                len(good),
            )
        return good

    def _move_waiting(self, k: int, avoid: set):
        """The pending units other than k that no good worker has started, sent again to
        the good workers only (dropping a future releases its task when nobody started it)."""
        good = sorted((_live_workers(self.client) or set()) - avoid)
        if not good:
            return
        try:
            processing = _processing(self.client)
        except Exception:  # noqa: BLE001 (the scheduler cannot say: leave the units as they are)
            return
        started = {key for w, keys in processing.items() if w not in avoid for key in keys}
        for j in sorted(self.pending - {k}):
            f = self.futures.get(j)
            if f is None or f.done():
                continue
            unit = self.kept.get(j, f)  # (kept results: the unit's own task, not its summary's)
            if unit.key not in started:
                self._submit(j, good)

    def _tell_failing(self):
        """One line per worker that could not read its units: how many, and why."""
        for fault, count in self.failing.values():
            if count:
                log.warning(
                    "tb-roofline: %s: %d unit(s) of %d failed there (each sent to another worker, "
                    "else read here)",
                    fault,
                    count,
                    len(self.outcomes),
                )
