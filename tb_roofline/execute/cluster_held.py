"""Results kept on the Dask workers that made them (`cluster.run_units(..., summarize=)`): the
caller holds each one's future and a summary made there, and asks the workers for more only
when it needs it. `fold_held` passes a value from one held result's worker to the next, in
order, each adding its result's part (a run's per-step sums: kilobytes travel, not rows);
`fetch_held` brings one result here (a drill-down into one host's rows).

Faults: a worker lost while it holds a result is the scheduler's to mend: the client still
holds the result's future, so the scheduler runs its unit again on another worker (the unit
reads its file again) before a fold or a fetch that needs it goes on. A fold or a fetch that
does not finish within TB_ROOFLINE_CLUSTER_STALL_S, or finds no worker left for
TB_ROOFLINE_CLUSTER_CONNECT_S, is a `ClusterError` naming the scheduler and the unit.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import Any

from tb_roofline import settings
from tb_roofline.errors import ProfileFormatError, RowsUnavailableError
from tb_roofline.execute.cluster_connect import ClusterError
from tb_roofline.execute.cluster_worker import WorkerFault, _scheduler_workers


@dataclasses.dataclass
class Held:
    """A unit's result kept on a worker: its future, what the worker summarized of it, and
    the unit's name (its file) for errors."""

    future: Any  # distributed.Future
    summary: Any  # what `summarize` made of the result there
    name: str

    def fetch(self):
        """The result, brought here (`table/held_rows.py` `RowHolder`)."""
        try:
            return fetch_held(self)
        except ClusterError as exc:
            raise _unavailable(exc) from None

    def fold(self, holders: list, step, start):
        """`fold_held` over `holders` (Held, this one among them)."""
        try:
            return fold_held(holders, step, start)
        except ClusterError as exc:
            raise _unavailable(exc) from None


def _unavailable(exc: ClusterError) -> RowsUnavailableError:
    return RowsUnavailableError(f"{exc}; its hosts are read again on the next request")


def fold_held(helds: list, step, start):
    """`step(value, k, result_k)` over the held results in order, each call on the worker that
    holds result k, `start` the first value: the last value, here. Consecutive results held
    by one worker are added in one task there (a task is a round trip through the scheduler:
    tens of milliseconds); the scheduler sends each task where its largest inputs are. `step`
    may change its value in place: each task adds onto its own copy."""
    if not helds:
        return start
    import uuid  # (here: every read imports this module, few fold; execute/cluster.py)

    client = helds[0].future.client
    fold = uuid.uuid4().hex[:12]
    value = start
    what = f"adding {len(helds)} results held on the workers"
    try:
        for first, results in _runs(client, helds):
            value = client.submit(
                _fold_steps,
                step,
                value,
                first,
                *results,
                key=f"tb-roofline-fold-{fold}-{first}",
                pure=False,
            )
    except Exception as exc:  # noqa: BLE001 (a client closed or cut off: nothing was sent)
        if not _lost(exc) and client.status == "running":
            raise  # the fold's own fault (a step that cannot be sent): no re-read mends it
        addr = getattr(client.scheduler, "address", "?")
        raise ClusterError(
            f"the Dask cluster {addr} could not take {what}: {type(exc).__name__}: {exc}"
        ) from None
    return _wait(value, client, what)


def _runs(client, helds: list) -> list:
    """(index of the first, their futures) of each run of consecutive results one worker holds
    now (each result alone when the scheduler cannot say within TB_ROOFLINE_CLUSTER_CONNECT_S:
    where a result is is only where its task is sent, never what it adds)."""
    futures = [h.future for h in helds]
    try:
        where = client.sync(
            client.scheduler.who_has,
            keys=[f.key for f in futures],
            callback_timeout=settings.number(settings.CLUSTER_CONNECT_S),
        )
    except Exception:  # noqa: BLE001 (a silent scheduler: one task per result; `_wait` decides)
        where = {}
    runs: list = []
    last = None
    for k, f in enumerate(futures):
        holder = tuple(sorted(where.get(f.key) or ())) or None
        if runs and holder is not None and holder == last:
            runs[-1][1].append(f)
        else:
            runs.append((k, [f]))
        last = holder
    return runs


def fetch_held(held: Held):
    """The held result itself, brought here from its worker."""
    return _wait(held.future, held.future.client, f"fetching {held.name} from its worker")


def _fold_steps(step, value, first: int, *results):
    value = copy.deepcopy(value)
    for k, result in enumerate(results, first):
        value = step(value, k, result)
    return value


def _wait(future, client, what: str):
    """The future's result within TB_ROOFLINE_CLUSTER_STALL_S; a ClusterError when it does not
    come, or no worker is left for TB_ROOFLINE_CLUSTER_CONNECT_S, or the task failed."""
    stall = settings.number(settings.CLUSTER_STALL_S)
    grace = settings.number(settings.CLUSTER_CONNECT_S)
    addr = getattr(client.scheduler, "address", "?")
    deadline, gone = time.monotonic() + stall, None
    while True:
        try:
            return future.result(timeout=max(0.1, min(grace, 1.0, deadline - time.monotonic())))
        except TimeoutError:
            now = time.monotonic()
            if now >= deadline:
                raise ClusterError(
                    f"the Dask cluster {addr} did not finish {what} within {stall:g} s"
                ) from None
            if _no_workers(client, grace):
                gone = gone or now
                if now - gone >= grace:
                    raise ClusterError(
                        f"the Dask cluster {addr} has no worker left ({what})"
                    ) from None
            else:
                gone = None
        except ClusterError:
            raise
        except Exception as exc:  # noqa: BLE001 (its result lost, or the task's own error)
            if not _lost(exc):
                raise  # a fault of the task itself: reading the hosts again would not mend it
            raise ClusterError(
                f"the Dask cluster {addr} failed {what}: {type(exc).__name__}: {exc}"
            ) from None


def _lost(exc: Exception) -> bool:
    """Whether a future failed because a held result (or the cluster) is gone, not because its
    own task raised: a worker killed while it ran it, the result released or cancelled, the
    connection to the scheduler closed, or a lost host read again on another worker and found
    changed, damaged or unreadable there (reading the hosts again answers for those)."""
    from concurrent.futures import CancelledError  # (distributed's FutureCancelledError too)

    from distributed.scheduler import KilledWorker

    return isinstance(exc, (KilledWorker, CancelledError, OSError, ProfileFormatError, WorkerFault))


def _no_workers(client, grace: float) -> bool:
    if client.status != "running":
        return True
    try:
        return not client.run_on_scheduler(_scheduler_workers, callback_timeout=grace)
    except Exception:  # noqa: BLE001 (a silent scheduler: the deadline decides)
        return False
