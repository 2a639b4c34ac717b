"""What runs on a Dask worker (`execute/cluster.py` sends it): one unit of work (`_unit`),
the check that the worker runs our code (`_probe`, `code_id`) and can read a batch's files
(`_can_read`), what the scheduler is asked with a deadline (`_scheduler_workers`), and the
`WorkerFault` a worker raises when it cannot read a unit's file for a reason of its own
(`access_fault`: credentials, a path it does not see, a package). Imports nothing of Dask at
module level: the workers import it, the caller only names it."""

from __future__ import annotations

import os


class WorkerFault(RuntimeError):
    """A worker cannot read a unit's file for a reason of its own (credentials, a path it does
    not see, a package): not the file's fault. Travels from the worker as its exception."""

    def __init__(self, worker: str, problem: str, name: str | None = None):
        super().__init__(worker, problem, name)
        self.worker, self.problem = worker, problem  # its address: where units are sent
        self.name = name or worker  # its Dask name (`--name`): what people call it

    def __str__(self):
        return f"Dask worker {self.name} {self.problem}"


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


def _probe() -> str:
    """Run on each worker (it imports this module, so tb-roofline is importable there)."""
    if not _CODE_ID:
        _CODE_ID.append(code_id())
    return _CODE_ID[0]


def _scheduler_workers(dask_scheduler=None) -> list[str]:
    """Run on the scheduler (`client.run_on_scheduler` gives it `dask_scheduler`): the
    addresses of the workers it knows."""
    return list(dask_scheduler.workers)


def _worker_name() -> tuple[str, str]:
    """(address, Dask name) of the worker running this."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not on a worker (a test calls _unit here)
        return "(this process)", "(this process)"
    return worker.address, str(worker.name)


def _can_read(path: str, dask_worker=None) -> tuple | None:
    """Run on each worker (`client.run` gives it `dask_worker`): None when it can read
    `path`, else (its Dask name, why not)."""
    problem = access_fault(RuntimeError(), path)
    name = str(getattr(dask_worker, "name", None) or "(this process)")
    return None if problem is None else (name, problem)


def _unit(fn, args, code: str | None = None, path: str | None = None):
    """One unit on a worker: its result, or the exception it raised as a value (a file's
    error is that file's answer, never a reason to retry). `code`: the caller's `code_id()`;
    a worker that joined after the probe (a restarted one has a new address) and runs other
    code fails the unit, which fails the conversion with its words. `path`: the unit's file;
    when the unit fails and this worker cannot even `stat` it, the worker is at fault
    (`WorkerFault`, raised: the caller sends the unit elsewhere)."""
    if code is not None and _probe() != code:  # the caller sends the unit elsewhere
        address, name = _worker_name()
        raise WorkerFault(
            address,
            f"runs tb-roofline {_probe()}, not {code}: install the same tb-roofline on every "
            "worker",
            name,
        )
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001
        fault = access_fault(exc, path)
        if fault is not None:
            address, name = _worker_name()
            raise WorkerFault(address, fault, name) from None
        import pickle

        try:  # travels, and the caller can import its class (not only this worker)
            if type(exc).__module__.partition(".")[0] not in ("builtins", "tb_roofline"):
                raise TypeError
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # noqa: BLE001 (an exception that cannot travel: its words do)
            return RuntimeError(f"{type(exc).__name__}: {exc}")


def _summary(summarize, result):
    """On the worker holding a unit's result: what `summarize` makes of it (a unit's error
    as it is)."""
    return result if isinstance(result, BaseException) else summarize(result)


def access_fault(exc: Exception, path: str | None) -> str | None:
    """Why this process (a worker, or the caller reading what no worker could), not the file,
    made the unit fail (None: the file's own error). A local directory it does not see (not
    shared), or a file it cannot `stat` (credentials, a storage package it lacks, a store it
    cannot reach) while the file is not simply gone."""
    from tb_roofline import storage

    name = str(exc.filename) if isinstance(exc, FileNotFoundError) and exc.filename else ""
    for p in filter(None, (name, path)):
        if not storage.is_remote(p) and not os.path.isdir(os.path.dirname(p)):
            return f"cannot read {p}: {os.strerror(2)} (is the logdir a path every worker shares?)"
    if path is None or name:
        return None
    try:
        storage.stat(path)
    except FileNotFoundError:
        return None  # gone since the listing: the file's
    except Exception as cause:  # noqa: BLE001 (credentials, a package, the store)
        return f"cannot read {path}: {getattr(cause, 'strerror', None) or cause}"
    return None
