"""Profiles read on all cores: the readers cut a conversion into independent units of work
(`readers/units.py`: a TPU file's TensorCore planes, every other file whole), a pool of worker
processes runs them, and the readers make each file's result from its units' outcomes in
order, so the answer is the serial one. This module knows no format.

The pool is made on first use and reused; it is shut down after TB_ROOFLINE_POOL_IDLE_S
(60 s) without work and at exit. The CLI answers one command and exits: it sets 0, so the
workers leave as soon as their conversion is done and their memory (each ~20 MB of its own
on 8 TPU hosts: what it converted, and the parent's pages it wrote to) is gone before the
model runs in this process (docs/benchmarks.md). Workers are forked (cheap: they
inherit the imported modules) when no thread but ours runs, as in the CLI; beside other
threads (TensorBoard serves from threads) a fork could copy a lock another thread holds, so
workers then come from a fork server started once. One unit of work, one core,
`TB_ROOFLINE_WORKERS=1`, less than `TB_ROOFLINE_PARALLEL_MIN_MB` of profile, a remote logdir,
or a pool that cannot start: everything in the calling process.

With a Dask scheduler set (TB_ROOFLINE_SCHEDULER, the CLI's --scheduler) the same units run
on that cluster instead (`execute/cluster.py`); `_execute` is the one place that chooses.
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import logging
import os
import threading

from tb_roofline import settings, storage
from tb_roofline.allocator import release_free_memory
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.errors import ProfileFormatError
from tb_roofline.processes import context, watch_parent, workers
from tb_roofline.readers import units as units_module
from tb_roofline.table.op_table import ProfileData
from tb_roofline.table.shared_texts import sharer

MIN_PARALLEL_MB = 16.0  # less work than this is done faster than a worker starts (~20 ms)
_lock = threading.Lock()
_pool = None
_pool_size = 0
_timer = None
_busy = 0
_retiring: list = []  # threads stopping pools `_release` let go; joined before the next pool
log = logging.getLogger(__name__)


def _min_parallel_bytes() -> float:
    """TB_ROOFLINE_PARALLEL_MIN_MB (MB of profile below which one process reads), or 16."""
    return settings.number(settings.PARALLEL_MIN_MB) * 2**20


def _context():
    return context(["tb_roofline.execute.pool"])


def _get_pool(n: int):
    global _pool, _pool_size
    if _pool is None:
        # The last pool's threads first: still running, they would count as threads of the
        # caller's (`_context`: a fork server instead of a fork).
        _join_retiring()
        _pool_size = n
        import concurrent.futures

        ctx = _context()
        # A fork server's main thread starts its workers; else this thread does (it must be
        # the main one, or the workers would die with it).
        lasting = (
            ctx.get_start_method() == "forkserver"
            or threading.current_thread() is threading.main_thread()
        )
        _pool = concurrent.futures.ProcessPoolExecutor(
            n, mp_context=ctx, initializer=watch_parent, initargs=(lasting,)
        )
    return _pool


def pool_running() -> bool:
    return _pool is not None


def shutdown(only=None):
    """Stop the workers now (also at exit, and once idle: `_release`). `only`: a pool that
    failed, stopped alone (by now another batch may run on a new one)."""
    global _pool, _timer
    with _lock:
        pool = _pool if only is None else only
        if pool is not None and pool is _pool:
            _pool = None
            if _timer is not None:
                _timer.cancel()
                _timer = None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
    with _lock:
        _join_retiring()


def _join_retiring():
    """With `_lock` held: wait for the pools `_release` let go to be stopped (their workers
    are leaving already: milliseconds)."""
    while _retiring:
        _retiring.pop().join()


atexit.register(shutdown)


def _idle_shutdown():
    with _lock:
        if _busy:
            return
    shutdown()


def _release(pool) -> None:
    """After a batch, with `_lock` held and no other batch running: the workers of `pool` (the
    current one) leave now (TB_ROOFLINE_POOL_IDLE_S 0) or after that many idle seconds."""
    global _pool, _timer
    idle_s = settings.number(settings.POOL_IDLE_S)
    if idle_s <= 0:  # stopped in a thread of ours, whose end says the pool's threads are gone
        _pool = None
        stop = threading.Thread(
            target=pool.shutdown,
            kwargs={"cancel_futures": True},
            name="tb-roofline-pool-release",
            daemon=True,
        )
        stop.start()
        _retiring.append(stop)
        return
    _timer = threading.Timer(idle_s, _idle_shutdown)
    _timer.name = "tb-roofline-pool-idle"
    _timer.daemon = True
    _timer.start()


def _run_all(fn, args_list: list, progress=None, used: list | None = None, arrived=None) -> list:
    """fn(*args) for each, on all cores: workers take units from the front, this process
    takes the ones no worker has started yet, from the back. Each result, or the exception
    it raised; each result is given to `arrived` (when given) as it comes in, and what that
    returns kept. The pool it ran on is appended to `used`."""
    import concurrent.futures

    global _busy, _timer
    with _lock:
        pool = _get_pool(max(min(workers(), len(args_list)) - 1, 1))
        if used is not None:
            used.append(pool)
        _busy += 1
        if _timer is not None:
            _timer.cancel()
            _timer = None
    try:
        futures = [pool.submit(fn, *args) for args in args_list]
        outcomes: dict = {}
        # This process's share first (taken before a worker queues it), then, from the back,
        # whatever no worker has started once that is done.
        share = len(futures) // (_pool_size + 1)
        mine: list = []
        for k in reversed(range(len(futures))):
            if len(mine) >= share:
                break
            if futures[k].cancel():
                mine.append(k)
        steal = (k for k in reversed(range(len(futures))) if k not in mine and futures[k].cancel())
        for k in itertools.chain(mine, steal):
            outcomes[k] = _arrived(_run_here(fn, [args_list[k]])[0], arrived)
            if progress:
                progress(k)
        index = {f: k for k, f in enumerate(futures) if k not in outcomes}
        for f in concurrent.futures.as_completed(index):
            outcomes[index[f]] = _arrived(_outcome(f), arrived)
            if progress:
                progress(index[f])
        return [outcomes[k] for k in range(len(futures))]
    finally:
        with _lock:
            _busy -= 1
            if not _busy and _pool is not None:
                _release(_pool)


def _arrived(out, arrived):
    return out if arrived is None or isinstance(out, Exception) else arrived(out)


def _outcome(future):
    exc = future.exception()
    return exc if exc is not None else future.result()


def _run_here(fn, args_list: list, progress=None) -> list:
    out = []
    for i, args in enumerate(args_list):
        try:
            out.append(fn(*args))
        except Exception as exc:  # noqa: BLE001 (each unit's failure is its file's)
            out.append(exc)
        if progress:
            progress(i)
    return out


def read_files(jobs: list, progress=None) -> list:
    """jobs: (path, format, host, max_bytes) each; returns each file's ProfileData or the
    exception reading it raised. `progress(job index, done, total)` as units finish. The
    readers cut the work into units (`readers/units.py`); this module only runs them."""
    conversion = units_module.plan(jobs, workers())
    units = conversion.units
    results: list = [conversion.early.get(i) for i in range(len(jobs))]
    totals: dict = {}
    for unit in units:
        totals[unit.job] = totals.get(unit.job, 0) + 1
    finished: dict = {}

    def report(k):
        i = units[k].job
        finished[i] = finished.get(i, 0) + 1
        if progress:
            progress(i, finished[i], totals[i])

    arrived = sharer()  # the strings the hosts share, held once (`table/shared_texts.py`)
    try:
        outcomes, note = _execute(units, report, finished, arrived, conversion.one_unit_each)
    finally:  # (a strict cluster error too: the MCP server lives on after it)
        conversion.release()
    per_job: dict = {}
    notes: dict = {}
    for unit, out in zip(units, outcomes):
        if isinstance(out, ReadHere):
            notes.setdefault(unit.job, []).append(out.note)
            out = out.result
        per_job.setdefault(unit.job, []).append(out)
    outcomes = out = None  # (each file's parts are let go as soon as they are merged)
    for i in list(per_job):
        results[i] = conversion.finish(i, per_job.pop(i))
        if conversion.merged_here(i):  # merged here from its planes' parts, now freed:
            arrived(results[i])  # their pages given back before the next file's table is
            release_free_memory()  # made, else they stay resident (docs/cluster.md)
        extra = ([note] if note is not None else []) + notes.get(i, [])[:1]
        if extra and isinstance(results[i], ProfileData):
            results[i] = dataclasses.replace(results[i], diagnostics=results[i].diagnostics + extra)
    return results


def _execute(units: list, report, finished: dict, arrived=None, whole: bool = False):
    """The one choice of executor: (each unit's outcome, a diagnostic for the answers or
    None). A Dask scheduler when one is set (`execute/cluster.py`; if it fails, the CLI stops
    with its error and TensorBoard converts here, saying so); else the local pool when the
    work is worth it; else this process. `arrived(result)`: each result of a pool or a
    cluster, as it comes in (what it returns is kept). `whole`: each unit is a whole file,
    so on a cluster its result stays on the worker and what comes back is its summary, rows
    fetched when first used (`_held`)."""
    from tb_roofline.execute import cluster

    args = [(u.fn, u.args) for u in units]
    address = cluster.address()
    note = None
    if address and units:
        try:
            paths = [u.path for u in units]
            names = [os.path.basename(p) for p in paths]
            summarize = _summarize() if whole else None
            outcomes = cluster.run_units(
                address, _call, args, report, names, paths, arrived, summarize=summarize
            )
            return _read_here_what_no_worker_could(_held(outcomes), args, paths), None
        except cluster.ClusterError as exc:
            if cluster.strict():
                raise
            log.warning("tb-roofline: converting here, not on the cluster: %s", exc)
            note = Diagnostic(
                "warning",
                "cluster_unavailable",
                f"converted by this server, not on the Dask cluster: {exc}",
            )
            finished.clear()
    # Remote files stay in this process: their storage clients (and threads) are this one's.
    remote = any(storage.is_remote(u.path) for u in units)
    parallel = (
        len(units) > 1
        and workers() > 1
        and not remote
        and sum(u.work for u in units) >= _min_parallel_bytes()
    )
    if parallel:
        from concurrent.futures.process import BrokenProcessPool

        used: list = []
        try:
            outcomes = _run_all(_call, args, report, used, arrived)
            broken = [o for o in outcomes if isinstance(o, BrokenProcessPool)]
            if broken:
                raise broken[0]
            return outcomes, note
        except (OSError, RuntimeError, BrokenProcessPool) as exc:
            log.warning("tb-roofline: reading in one process (worker pool failed: %s)", exc)
            for pool in used:
                shutdown(only=pool)
            finished.clear()
    return _run_here(_call, args, report), note


def _summarize():
    from tb_roofline.table.host_summary import summarize

    return summarize


def _held(outcomes: list) -> list:
    """Each result kept on a worker as its summary, its rows fetched from there when first
    used (table/host_summary.py `attach`)."""
    from tb_roofline.execute.cluster_held import Held
    from tb_roofline.table.host_summary import attach

    return [attach(o.summary, o) if isinstance(o, Held) else o for o in outcomes]


def _call(fn, args):
    return fn(*args)


def _read_here_what_no_worker_could(outcomes: list, args: list, paths: list) -> list:
    """Units no worker could read (`cluster.WorkerFault`: credentials, path, package) read in
    this process. Read here, a unit's file answers with a diagnostic naming the worker; a
    file found damaged (or gone) here is that file's error, as ever. If this process cannot
    read it either, the command fails (CLI) naming the worker and its cause, unless partial
    answers are allowed (TensorBoard, `--allow-partial`): then the file is skipped with an
    error that names both."""
    from tb_roofline.execute import cluster

    faults = [k for k, o in enumerate(outcomes) if isinstance(o, cluster.WorkerFault)]
    if not faults:
        return outcomes
    out = list(outcomes)
    again = _run_here(_call, [args[k] for k in faults])
    here_ok = [k for k, here in zip(faults, again) if not isinstance(here, Exception)]
    if here_ok:  # one line, not one per unit
        log.warning(
            "tb-roofline: read %d unit(s) here that no Dask worker could (%s%s)",
            len(here_ok),
            outcomes[here_ok[0]],
            f"; and {len(here_ok) - 1} more" if len(here_ok) > 1 else "",
        )
    for k, here in zip(faults, again):
        fault = outcomes[k]
        if isinstance(here, Exception) and cluster.access_fault(here, paths[k]) is None:
            out[k] = here  # read here, the file itself is at fault (damaged, gone): its error
            continue
        if not isinstance(here, Exception):
            out[k] = ReadHere(
                here,
                Diagnostic("warning", "cluster_worker_fault", f"read by this process: {fault}"),
            )
            continue
        if cluster.strict() and not cluster.allow_partial():
            raise cluster.ClusterError(
                f"{fault}; reading it here failed too: {here} "
                "(give the workers access, or --allow-partial)"
            )
        out[k] = ProfileFormatError(f"{fault}; reading it here failed too: {here}")
    return out


@dataclasses.dataclass
class ReadHere:
    """A unit no worker could do, done by this process: its result and the note saying so."""

    result: object
    note: Diagnostic
