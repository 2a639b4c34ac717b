"""Conversion units on a Dask `distributed` cluster (`pip install 'tb-roofline[dask]'`).

With `TB_ROOFLINE_SCHEDULER=tcp://host:8786` (TensorBoard) or `--scheduler` (the CLI),
`readers/parallel.py` hands its units of work (one host's file, or one TensorCore plane of a
file on a path the workers share) to the cluster instead of the local pool: the same pure
functions, run by the workers, which read the files themselves (s3://, gs://, any fsspec URL,
or a shared path) with their own credentials. What travels: the unit's arguments (path, host,
offsets, the size limit) to the workers, the unit's result (the op-table columns of a host or
a plane, as the local pool returns them) back. Nothing else is sent: no credentials, no
environment, no code (the workers import their own tb-roofline; `_probe` checks it is the
same code as ours, so the answer is the local one bit for bit).

Faults: a worker lost mid-conversion has its units rerun on another (the scheduler's own
rescheduling); a unit that killed workers repeatedly is that file's error (out of memory?);
a scheduler that does not answer within TB_ROOFLINE_CLUSTER_CONNECT_S (10 s), no worker,
a worker that cannot import this tb-roofline, or no unit finishing for
TB_ROOFLINE_CLUSTER_STALL_S (300 s) is a `ClusterError` naming the scheduler or the worker.
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
import time

from tb_roofline import settings

# (socket, hashlib, queue and uuid are imported by the functions that use them: every read
# asks `address()`, and only a read with a scheduler set needs more.)

SCHEDULER_ENV = "TB_ROOFLINE_SCHEDULER"
RETRY_S = 60.0  # TensorBoard: after a failure, convert locally this long before trying again
log = logging.getLogger(__name__)

_lock = threading.Lock()
_clients: dict = {}
_setting: tuple | None = None  # (address, strict) given by the CLI
_failed: dict = {}  # address -> (monotonic time, ClusterError) of its last failure


class ClusterError(RuntimeError):
    """The cluster cannot convert (scheduler unreachable, no usable worker, stalled)."""


def configure(address: str | None, strict: bool = True):
    """The CLI's `--scheduler`: None goes back to TB_ROOFLINE_SCHEDULER (where a failure is
    not strict: the plugin converts locally, with a diagnostic)."""
    global _setting
    _setting = (address.strip(), strict) if address and address.strip() else None


def address() -> str | None:
    """The scheduler to use, or None for local conversion."""
    if _setting is not None:
        return _setting[0]
    return settings.text(settings.SCHEDULER) or None


def strict() -> bool:
    """Whether a cluster failure stops the command (CLI) rather than converting locally."""
    return _setting is not None and _setting[1]


def _host_port(addr: str) -> tuple[str, int] | None:
    scheme, sep, rest = addr.partition("://")
    if not sep:
        scheme, rest = "tcp", addr
    if scheme != "tcp":
        return None  # tls://, ucx://, inproc://: Dask's own connection says what is wrong
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"Dask scheduler address {addr!r} is not tcp://HOST:PORT")
    return host.strip("[]"), int(port)


def _reachable(addr: str, timeout: float):
    """Fail at once on a refused connection (Dask itself retries until its timeout)."""
    hp = _host_port(addr)
    if hp is None:
        return
    import socket
    try:
        socket.create_connection(hp, timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"Dask scheduler {addr} is unreachable: "
                           f"{exc.strerror or type(exc).__name__}") from None


def get_client(addr: str):
    """A connected `distributed.Client` for `addr` (one per address, kept)."""
    with _lock:
        client = _clients.get(addr)
        if client is not None and client.status == "running":
            return client
        _clients.pop(addr, None)
    timeout = settings.number(settings.CLUSTER_CONNECT_S)
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(f"converting on the Dask cluster {addr} needs the Python package "
                           "distributed: pip install 'tb-roofline[dask]'") from None
    if not addr.startswith(("tcp://", "tls://", "ucx://", "inproc://", "ws://", "wss://")):
        addr_full = "tcp://" + addr
    else:
        addr_full = addr
    _reachable(addr_full, timeout)
    client = _connect(Client, addr_full, addr, timeout)
    with _lock:
        old = _clients.get(addr)
        if old is not None and old.status == "running":
            client.close()
            return old
        _clients[addr] = client
    return client


def _connect(Client, addr_full: str, addr: str, timeout: float):
    """Client(addr) within `timeout`: Dask's own timeout covers the TCP connection, not a
    peer that accepts and then never answers the handshake, so it runs on a thread we stop
    waiting for (a client it makes after that is closed at once)."""
    box: dict = {}
    given_up = threading.Event()

    def connect():
        try:
            client = Client(addr_full, timeout=timeout, set_as_default=False)
        except Exception as exc:  # noqa: BLE001 (OSError, TimeoutError, a version mismatch)
            box["error"] = exc
            return
        box["client"] = client
        if given_up.is_set():
            client.close()

    thread = threading.Thread(target=connect, name="tb-roofline-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout + 1)
    if thread.is_alive():
        given_up.set()
        raise ClusterError(f"the Dask scheduler {addr} did not answer within {timeout:g} s "
                           "(is a Dask scheduler listening there?)")
    if "error" in box:
        exc = box["error"]
        raise ClusterError(f"cannot connect to the Dask scheduler {addr}: "
                           f"{type(exc).__name__}: {exc}")
    return box["client"]


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


def code_id() -> str:
    """tb-roofline's version and a digest of its source (the workers must run ours)."""
    import hashlib
    import tb_roofline
    root = os.path.dirname(os.path.abspath(tb_roofline.__file__))
    digest = hashlib.sha256()
    for d, dirs, names in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(names):
            if name.endswith((".py", ".proto")):
                path = os.path.join(d, name)
                digest.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as f:
                    digest.update(f.read())
    return f"{tb_roofline.__version__}+{digest.hexdigest()[:16]}"


_CODE_ID: list = []
_scheduler_ok: set = set()  # scheduler addresses found running our code


def _probe() -> str:
    """Run on each worker (it imports this module, so tb-roofline is importable there)."""
    if not _CODE_ID:
        _CODE_ID.append(code_id())
    return _CODE_ID[0]


def usable_workers(client, addr: str) -> list[str]:
    """The workers that run our tb-roofline; a ClusterError naming any that does not."""
    timeout = settings.number(settings.CLUSTER_CONNECT_S)
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 (TimeoutError, a lost connection)
        raise ClusterError(f"the Dask cluster {addr} has no worker answering within "
                           f"{timeout:g} s ({type(exc).__name__}: {exc})") from None
    try:
        answers = client.run(_probe, on_error="return", callback_timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        # A worker busy in a long conversion (another request's) may not answer in time: no
        # reason to give up the cluster. Each unit checks on its worker that the code is ours.
        log.info("tb-roofline: not every Dask worker of %s answered the probe within %g s "
                 "(%s): converting there anyway", addr, timeout, type(exc).__name__)
        answers = {}
    ours = _probe()
    if addr not in _scheduler_ok:  # it unpickles the task graphs: our functions are in them
        try:
            theirs = client.run_on_scheduler(_probe)
        except Exception as exc:  # noqa: BLE001 (ModuleNotFoundError, a deserialization error)
            raise ClusterError(f"the Dask scheduler {addr} cannot import tb-roofline "
                               f"({type(exc).__name__}: {str(exc)[:200]}): run it from the "
                               "same image as the workers") from None
        if theirs != ours:
            raise ClusterError(f"the Dask scheduler {addr} runs tb-roofline {theirs}, not this "
                               f"process's {ours}: run it from the same image as the workers")
        _scheduler_ok.add(addr)
    bad = {w: a for w, a in answers.items() if a != ours}
    if bad:
        worker, answer = sorted(bad.items())[0]
        why = (f"cannot import tb-roofline ({type(answer).__name__}: {answer})"
               if isinstance(answer, BaseException) else
               f"runs tb-roofline {answer}, not this process's {ours}")
        raise ClusterError(f"Dask worker {worker} of {addr} {why}"
                           + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
                           + ": install the same tb-roofline on every worker")
    return sorted(answers)


def _unit(fn, args, code: str | None = None):
    """One unit on a worker: its result, or the exception it raised as a value (a file's
    error is that file's answer, never a reason to retry). `code`: the caller's `code_id()`;
    a worker that joined after the probe (a restarted one has a new address) and runs other
    code fails the unit, which fails the conversion with its words."""
    if code is not None and _probe() != code:
        from distributed import get_worker
        raise RuntimeError(f"Dask worker {get_worker().address} runs tb-roofline {_probe()}, "
                           f"not {code}: install the same tb-roofline on every worker")
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001
        from tb_roofline import storage
        name = str(exc.filename) if isinstance(exc, FileNotFoundError) else ""
        if name and not storage.is_remote(name) and not os.path.isdir(os.path.dirname(name)):
            # A directory this worker does not see (not shared): the cluster's fault, not the
            # file's (a file deleted since the listing, in a directory it sees, is the file's).
            from distributed import get_worker
            raise RuntimeError(f"Dask worker {get_worker().address} cannot read "
                               f"{exc.filename}: {exc.strerror} (is the logdir a path every "
                               "worker shares?)") from None
        import pickle
        try:  # travels, and the caller can import its class (not only this worker)
            if type(exc).__module__.partition(".")[0] not in ("builtins", "tb_roofline"):
                raise TypeError
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # noqa: BLE001 (an exception that cannot travel: its words do)
            return RuntimeError(f"{type(exc).__name__}: {exc}")


def run_units(addr: str, fn, args_list: list, progress=None, names=None) -> list:
    """fn(*args) for each, as tasks on the cluster at `addr`: each result, or the exception
    it raised; `progress(k)` as unit k finishes, and a log line naming it (`names[k]`).
    ClusterError when the cluster cannot."""
    failed = _failed.get(addr)
    if failed is not None and not strict() and time.monotonic() - failed[0] < RETRY_S:
        raise ClusterError(f"{failed[1]} ({time.monotonic() - failed[0]:.0f} s ago; tried "
                           f"again {RETRY_S:g} s after)")
    try:
        outcomes = _run_units(addr, fn, args_list, progress, names)
    except ClusterError as exc:
        _failed[addr] = (time.monotonic(), exc)
        _scheduler_ok.discard(addr)  # a scheduler restarted there is checked again
        raise
    _failed.pop(addr, None)
    return outcomes


def _run_units(addr: str, fn, args_list: list, progress, names) -> list:
    import queue
    import uuid
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker
    from tb_roofline.errors import ProfileOutOfMemoryError
    client = get_client(addr)
    workers = usable_workers(client, addr)
    stall = settings.number(settings.CLUSTER_STALL_S)
    batch = uuid.uuid4().hex[:12]
    # Any worker may run a unit, not only those probed: a worker the nanny restarted (after
    # an out-of-memory kill) comes back at a new address; `_unit` checks the code it runs.
    code = _probe()
    futures = [client.submit(_unit, fn, args, code, key=f"tb-roofline-{batch}-{k}", pure=False)
               for k, args in enumerate(args_list)]
    index = {f.key: k for k, f in enumerate(futures)}
    start, finished = time.monotonic(), 0
    log.info("tb-roofline: %d conversion units sent to the Dask cluster %s (%s)",
             len(futures), addr, f"{len(workers)} workers" if workers else
             "its workers did not all answer the probe")
    outcomes: list = [None] * len(futures)
    pending = set(range(len(futures)))
    done: queue.Queue = queue.Queue()
    for f in futures:
        f.add_done_callback(done.put)
    try:
        while pending:
            try:
                f = done.get(timeout=stall)
            except queue.Empty:
                raise ClusterError(f"the Dask cluster {addr} finished no conversion in "
                                   f"{stall:g} s ({len(pending)} of {len(futures)} left): "
                                   "are its workers alive?") from None
            k = index[f.key]
            try:
                outcomes[k] = f.result(timeout=stall)
            except KilledWorker as exc:
                outcomes[k] = ProfileOutOfMemoryError(
                    f"the Dask workers converting it died ({exc}): out of memory?")
            except (FutureCancelledError, TimeoutError, OSError) as exc:
                raise ClusterError(f"the Dask cluster {addr} lost a conversion: "
                                   f"{type(exc).__name__}: {exc}") from None
            except Exception as exc:  # noqa: BLE001 (the task itself failed on a worker)
                raise ClusterError(f"a conversion failed on the Dask cluster {addr}: "
                                   f"{type(exc).__name__}: {exc}") from None
            pending.discard(k)
            futures[k] = None  # its result is here: the cluster may forget it
            finished += 1
            log.info("tb-roofline: converted %s on the cluster (%d of %d, %.1f s)",
                     names[k] if names else f"unit {k}", finished, len(futures),
                     time.monotonic() - start)
            if progress:
                progress(k)
    finally:
        # Unfinished units are released by dropping their futures (the client tells the
        # scheduler without waiting): a blocking cancel on a client closed meanwhile (at
        # exit, by close_clients) could hang or hide the error being raised.
        futures.clear()
    return outcomes
