"""The Kineto reader's batches decoded and prepared on all cores.

One process cannot decode and prepare a big trace's events much faster than the standard
library parses it (every pass over an event's fields costs tens of ns in CPython), but the
batches are independent until they are committed: worker processes decode and prepare them
(`prepare_apart`: msgspec's decode and fast_batch.prepare, each event's keys sent as codes,
batch_codes.py) while the reading process cuts the text and commits the results in file
order (stream._JsonStream._ascii_batches_apart). A batch a worker does not prepare (refused,
or left to the per-event path) is done by the reading process as before, so the events,
ids, errors and messages are those of one process.

Only where it pays (`worker_count`): msgspec installed, a collector that takes columns, at
least TB_ROOFLINE_PARALLEL_MIN_MB (16) of file, more than one process allowed
(TB_ROOFLINE_WORKERS, else the cores no other job keeps busy: `idle_cores`), and not
already in a worker process (the file pool of execute/pool.py reads several files at once
there). The reading process counts as one of them: it prepares a share of the batches
itself while the workers are busy. The workers live for one file: stopped when it is read,
or fails.
"""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import threading
from typing import Any

from tb_roofline import processes, settings
from tb_roofline.readers.kineto import batch_codes, fast_batch, fast_json

IN_FLIGHT_PER_WORKER = 2  # batches sent and not committed yet: the text kept is bounded
# A batch takes a worker milliseconds; one stopped or stuck for this long has its batch done
# by the reading process instead, so a read never waits on a worker without end.
BATCH_DEADLINE_S = 60.0


def worker_count(size: int, columns: bool) -> int:
    """How many worker processes read a file of `size` bytes (0: this process alone)."""
    if fast_json._decoder is None or not columns or multiprocessing.parent_process() is not None:
        return 0
    if size < settings.number(settings.PARALLEL_MIN_MB) * 2**20:
        return 0
    n = processes.workers() if settings.number(settings.WORKERS) >= 1 else idle_cores()
    return n - 1 if n >= 2 else 0  # this process prepares batches too, while workers are busy


def idle_cores() -> int:
    """The cores this process may run on less the load average (a worker on a core that
    other jobs keep busy only adds the cost of sending batches to it): TB_ROOFLINE_WORKERS
    unset, the cores the reader's workers may use."""
    cores = processes.workers()
    try:
        load = os.getloadavg()[0]
    except OSError:
        return cores
    return max(min(cores, round(cores - load)), 1)


class Workers:
    """A pool of `n` worker processes for one file's batches, started at the first batch.
    `path`: a local file whose bytes are its text (not compressed), which the workers read
    themselves (the reading process then sends them offsets, not MBs through a pipe)."""

    def __init__(self, n: int, path: str | None = None):
        self.n, self.path = n, path
        self.window = IN_FLIGHT_PER_WORKER * n  # batches in flight before this process waits
        self._pool: Any = None
        self._batches = self._here = 0
        self._broken = False  # the pool could not start or lost a worker: all done here

    def submit(self, data: bytearray, lo: int, hi: int, at: int, in_flight):
        """The future of the batch `data[lo:hi]`, at offset `at` of the file's text (ASCII
        so far: its bytes' offset): prepared here at once when the workers have all
        the batches in flight they take and the first is not done (this process would
        wait), and this process has prepared less than its share (it also cuts the text and
        commits every batch: a share as large as a worker's would keep the workers
        waiting), else by a worker."""
        self._batches += 1
        share = self._here * (self.n + 2) < self._batches
        if not (share and len(in_flight) >= self.window and not in_flight[0][0].done()):
            try:
                if not self._broken:
                    return self._sent(data, lo, hi, at)
            except (OSError, RuntimeError):  # (BrokenProcessPool is one)
                self._broken = True
        self._here += 1
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result(prepare_apart(data[lo:hi]))
        return done

    def _sent(self, data: bytearray, lo: int, hi: int, at: int):
        if self._pool is None:
            self._pool = _start(self.n)
        if self.path is not None:
            return self._pool.submit(prepare_read, self.path, at, hi - lo)
        return self._pool.submit(prepare_apart, data[lo:hi])

    def abandon(self) -> None:
        """Stop workers that kept a batch past BATCH_DEADLINE_S (stopped or stuck: waiting for
        them would never end) without waiting; every later batch is done here."""
        self._broken = True
        if self._pool is not None:
            for proc in list(getattr(self._pool, "_processes", {}).values()):
                proc.kill()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        """Stop the workers (waits for the batch each is on: milliseconds)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _start(n: int):
    ctx = processes.context(["tb_roofline.readers.kineto.batch_workers"])
    lasting = (
        ctx.get_start_method() == "forkserver"
        or threading.current_thread() is threading.main_thread()
    )
    return concurrent.futures.ProcessPoolExecutor(
        n, mp_context=ctx, initializer=_worker_start, initargs=(lasting,)
    )


def _worker_start(lasting: bool) -> None:
    """In each worker, first: the objects it inherits are left out of its garbage collections
    (a collection writes to every object it visits: each page of the parent's it would copy),
    and it ends with its parent."""
    gc.freeze()
    processes.watch_parent(lasting)


def prepare_read(path: str, at: int, length: int):
    """`prepare_apart` of the `length` bytes at offset `at` of the file (None where they are
    not all there: the file changed, which the reading process then reports)."""
    with open(path, "rb") as f:
        text = bytearray(os.pread(f.fileno(), length, at))
    return prepare_apart(text) if len(text) == length else None


def prepare_apart(text: bytearray):
    """In a worker: the batch of elements `text` holds between its first and last bytes (the
    separators around them, made its brackets here), decoded and prepared with its keys as
    codes; None for a batch the reading process must do itself (whatever refuses it there
    is judged there: the errors and messages are its own)."""
    text[0], text[-1] = 0x5B, 0x5D  # "[", "]"
    try:
        prepared = fast_batch.prepare(fast_json.decode(text), None)
        return None if prepared is None else batch_codes.coded(prepared)
    except Exception:  # noqa: BLE001 (judged again by the reading process)
        return None
