"""Reading profile files for the service: each file's identity, the memory and disk caches of
read profiles, conversions under the budget (`serve/service/budget.py`), and per-key locks.

- A file's identity (`file_signature`) is (path, size, version) — mtime_ns locally, etag or
  generation remotely, from the last listing (no request). A cached read serves while the
  identity holds; failures are cached the same way (a corrupt file is parsed once), those
  that may pass (a file still being written, a remote error, out of memory) for a while only.
- Memory: read profiles sit in a byte-bounded LRU (`serve/caches/memory.py`); converted profiles
  also go to the disk cache (`serve/caches/disk.py`) when the file did not change while read.
- Budget (`TB_ROOFLINE_MEMORY_BUDGET_MB`): before a conversion, its memory is estimated from
  the file (`estimate_bytes`: the inflated size of a local .gz found by inflating every member
  and counting, else the file size, times what a reader keeps per byte). A file whose estimate
  exceeds the whole budget is refused at once (413 naming the budget, remembered for that file
  version); the reader is also told to stop at what the budget allows. As it reads, the reader
  counts what the request will build (events, distinct names, steps: `readers/meter.py`) and
  the request's share of the budget grows with it (`_Grant`); once read, a profile is counted
  by its op rows, distinct ops and steps before the model runs. Past the budget: a 413 naming
  it. Every conversion is counted: small ones (under a sixteenth) may use a reserve (an
  eighth) that big ones leave free, so they never wait behind a big one, but nothing runs
  outside the budget.
- Locks: one per file being read (`KeyLocks`), taken in one order; two requests for the same
  file convert it once, and requests for other files never wait on it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from typing import TYPE_CHECKING

from tb_roofline import errors, settings, storage
from tb_roofline.readers import meter
from tb_roofline.serve.caches.disk import DiskCache
from tb_roofline.serve.caches.memory import ByteLRU, memory_budget_bytes, sized
from tb_roofline.serve.service import model_config_file
from tb_roofline.serve.service.budget import MEMORY_PER_BYTE, ConversionBudget, estimate_bytes
from tb_roofline.serve.service.progress import ReadProgress

if TYPE_CHECKING:
    from tb_roofline.table.op_table import ProfileData

# How long a failure stays cached for an unchanged file: a file "still being written" is
# judged again once it is no longer young; a remote read error may have been the network.
INCOMPLETE_RETRY_S = 2.0
REMOTE_ERROR_RETRY_S = errors.REMOTE_ERROR_RETRY_S
MEMORY_RETRY_S = 60.0  # out of memory may have been the other requests' fault


@dataclasses.dataclass
class HostEntry:
    """A read profile, or the public error reading it gave, for one file signature."""

    signature: tuple
    data: ProfileData | None = None
    error: tuple | None = None  # (PublicError class, message): raised anew each time
    expires: float | None = None  # monotonic time; None = while the signature holds

    def valid_for(self, signature) -> bool:
        """Whether the entry answers for that file version (a profile whose rows a lost Dask
        worker kept does not: its host is read again, and reserved for)."""
        return (
            self.signature == signature
            and (self.expires is None or time.monotonic() < self.expires)
            and not _rows_lost(self.data)
        )

    def result(self) -> ProfileData:
        if self.error is not None:
            cls, message = self.error
            raise cls(message)
        assert self.data is not None, "an entry holds a profile or the error reading it gave"
        return self.data


def file_signature(hostfile) -> tuple:
    """(path, size, version). A remote file's comes from the last listing: no request."""
    if hostfile.stat is not None:
        return (hostfile.path,) + storage.version(hostfile.stat)
    try:
        st = storage.stat(hostfile.path)
    except storage.StorageTimeoutError as exc:  # the store, not the file: a 504
        raise errors.StorageTimeoutPublicError(
            f"{os.path.basename(hostfile.path)}: {exc}"
        ) from None
    except OSError as exc:
        raise errors.NotFoundError(
            f"profile file vanished: {os.path.basename(hostfile.path)} ({exc.strerror})"
        ) from None
    return (hostfile.path,) + storage.version(st)


def current_signature(hostfile) -> tuple | None:
    """The file's identity asked of the storage now (a HEAD request for a remote file)."""
    try:
        return (hostfile.path,) + storage.version(storage.stat(hostfile.path))
    except OSError:
        return None


def _same_version(current: tuple | None, sig: tuple) -> bool:
    """Whether the file's identity asked now is the one `sig` (file identity, then its model
    config's) was read from."""
    return current is not None and sig[: len(current)] == current


def max_file_bytes(max_file_mb: float | None = None) -> int:
    return int((max_file_mb or settings.number(settings.MAX_FILE_MB)) * (1 << 20))


def _tables_consistent(data) -> bool:
    """A disk entry's op tables hold a row per row in every column (a forged or damaged entry
    claiming a constant column of 2**40 rows is a miss, never an allocation)."""
    from tb_roofline.table.op_table import OpTable

    tables = [getattr(data, a, None) for a in ("ops", "kernels", "hw_ops")]
    return tables[0] is not None and all(
        t is None or (isinstance(t, OpTable) and t.consistent()) for t in tables
    )


def _rows_lost(data) -> bool:
    from tb_roofline.table.host_summary import rows_lost

    return data is not None and rows_lost(data)


def _kept_elsewhere(data) -> bool:
    from tb_roofline.table.host_summary import kept_elsewhere

    return kept_elsewhere(data)


class KeyLocks:
    """A lock per key, made when first asked for and dropped when nobody holds or waits on it
    (so a thousand runs do not keep a thousand locks, and two keys never share one)."""

    def __init__(self):
        self._guard = threading.Lock()
        self._locks: dict = {}  # key -> [lock, users]

    @contextlib.contextmanager
    def hold(self, *keys):
        ordered = sorted(set(keys), key=repr)  # one order: two holders never wait on each other
        taken = []
        try:
            for key in ordered:
                with self._guard:
                    item = self._locks.setdefault(key, [threading.Lock(), 0])
                    item[1] += 1
                taken.append(key)
                item[0].acquire()
            yield
        finally:
            for key in reversed(taken):
                with self._guard:
                    item = self._locks[key]
                    item[1] -= 1
                    if item[1] == 0:
                        del self._locks[key]
                item[0].release()

    def __len__(self):
        return len(self._locks)


class SingleFlight:
    """One computation per key at a time, its result (or error) handed to every caller that
    asked while it ran: eight concurrent requests for a run's guidance make it once, not
    eight times at once (whether or not a cache then keeps it)."""

    def __init__(self):
        self._guard = threading.Lock()
        self._running: dict = {}  # key -> Future of the computation under way
        self.made = 0  # computations run (each shared by whoever asked while it ran)

    def run(self, key, make):
        from concurrent.futures import Future

        with self._guard:
            future = self._running.get(key)
            owner = future is None
            if future is None:
                future = self._running[key] = Future()
        if not owner:
            return future.result()
        self.made += 1
        try:
            value = make()
        except BaseException as exc:
            future.set_exception(exc)
            raise
        else:
            future.set_result(value)
            return value
        finally:
            with self._guard:
                self._running.pop(key, None)

    def __len__(self):
        return len(self._running)


class HostReader:
    """Read profiles, cached in memory and on disk, converted under the budget."""

    def __init__(
        self,
        max_file_bytes_: int,
        disk_cache: DiskCache | None,
        progress=None,
        budget_bytes: int | None = None,
        logdir: str | None = None,
        model_config_file: str | None = None,
    ):
        self.max_file_bytes = max_file_bytes_
        self.logdir = logdir
        self.model_config_file = model_config_file  # overrides the model_config.json lookup
        self.disk_cache = disk_cache
        self.progress = progress  # callable(host, done, total, hosts_done, hosts_total)
        self.cache = ByteLRU(memory_budget_bytes("profiles"))  # path -> HostEntry
        self.budget = ConversionBudget(
            budget_bytes if budget_bytes is not None else settings.mb(settings.MEMORY_BUDGET_MB)
        )
        self.locks = KeyLocks()
        self.reads = ReadProgress()

    def _cached(self, run, hostfile, sig) -> HostEntry | None:
        """The memory cache's entry, else the disk cache's (then kept in memory too)."""
        cached = self.cache.get(hostfile.path)
        if cached is not None and cached.valid_for(sig):
            return cached
        if self.disk_cache is not None and sig[1] <= self.max_file_bytes:
            data = self.disk_cache.get(DiskCache.key(sig, run.format, hostfile.host))
            from tb_roofline.table.op_table import ProfileData

            if isinstance(data, ProfileData) and _tables_consistent(data):
                entry = HostEntry(sig, data)
                self.cache.put(hostfile.path, entry, *sized(data))
                return entry
        return None

    def config_of(self, run, hostfile) -> str | None:
        """The model config that applies to this profile (serve/service/model_config_file.py)."""
        return model_config_file.config_path(
            self.model_config_file, run, hostfile.path, self.logdir
        )

    def signature(self, run, hostfile) -> tuple:
        """What a read of this file depends on: the file's identity, then its model config's."""
        return file_signature(hostfile) + model_config_file.signature(self.config_of(run, hostfile))

    def remeasure(self, files: list):
        """Charge the cached reads of `files` again (an analysis made their op tables' rows
        views of the run's table: each now keeps that buffer alive, charged once among them)."""
        self.cache.recharge(
            [f.path for f in files],
            lambda entry: sized(entry.data) if entry.data is not None else (0, {}),
        )

    def pending_bytes(self, run, files: list) -> int:
        """The estimated memory of reading those of `files` not in the memory cache (what a
        request admits for its whole conversion: read, analysis and answer)."""
        total = 0
        for f in files:
            try:
                sig = self.signature(run, f)
            except errors.NotFoundError:
                continue
            cached = self.cache.get(f.path)
            if cached is None or not cached.valid_for(sig):
                need = estimate_bytes(f.path, run.format, sig[1], self.budget.total)
                guess = storage.is_remote(f.path) and f.path.endswith(".gz")
                total += need if need <= self.budget.total or guess else 0  # else refused
        return min(total, self.budget.total)

    def read(self, run, files: list) -> list:
        """A `HostEntry` per file (its ProfileData or the public error reading it gave). Files
        not cached are converted together, on all cores (`execute/pool.py`), each under its
        own lock, within the conversion budget."""
        entries: list = [None] * len(files)
        sigs = [self.signature(run, f) for f in files]
        missing = []
        for i, f in enumerate(files):
            entries[i] = self._cached(run, f, sigs[i])
            if entries[i] is None:
                missing.append(i)
        if not missing:
            return entries
        with self.locks.hold(*(("host", files[i].path) for i in missing)):
            todo = []
            for i in missing:  # converted by another request while we waited?
                entries[i] = self._cached(run, files[i], sigs[i])
                if entries[i] is None:
                    todo.append(i)
            need = {}
            for i in todo:
                need[i] = estimate_bytes(files[i].path, run.format, sigs[i][1], self.budget.total)
                # Can never fit: refused before it is read (a remote .gz's size is a guess:
                # admitted as the whole budget, and the reader's limit decides).
                if need[i] > self.budget.total and not (
                    storage.is_remote(files[i].path) and files[i].path.endswith(".gz")
                ):
                    entries[i] = self._store(
                        run,
                        files[i],
                        sigs[i],
                        errors.ProfileTooLargeError(
                            f"needs about {need[i] / 2**20:.0f} MB to read, over "
                            f"{self.budget.describe()}"
                        ),
                    )
            todo = [i for i in todo if entries[i] is None]
            if todo:
                with (
                    self.budget.admit(sum(need[i] for i in todo)),
                    self.reads.reading(run.run, len(files) - len(todo), len(files)) as seen,
                ):
                    results = self._convert(run, files, todo, seen)
                    results = [self._measured(files[i], r) for i, r in zip(todo, results)]
                for i, result in zip(todo, results):
                    entries[i] = self._store(run, files[i], sigs[i], result)
        return entries

    def _measured(self, hostfile, result):
        """A converted profile told to the budget by what the model will make of it (op rows,
        distinct ops, steps: an XSpace of 55,000 steps is 7 MB and ~270 MB to analyse), or
        the 413 saying it does not fit."""
        from tb_roofline.table.op_table import ProfileData

        grant = self.budget.grant()
        if grant is None or not isinstance(result, ProfileData):
            return result
        rows, steps = len(result.ops), len(result.steps)
        # Rows a Dask worker keeps take no memory here (their sums are per key and step).
        need = meter.estimate(0 if _kept_elsewhere(result) else rows, result.ops.num_keys, steps)
        try:
            grant.charge(
                need,
                f"{rows:,} op rows, {result.ops.num_keys:,} distinct ops, {steps:,} steps",
                key=hostfile.path,
            )
        except errors.ProfileTooLargeError as exc:
            return type(exc)(f"{os.path.basename(hostfile.path)} {exc}")
        return result

    def _convert(self, run, files, todo, seen=None) -> list:
        """Convert files[i] for i in `todo`; `seen(hosts_done)`: how many of `files` are read
        (those not in `todo` were already)."""
        from tb_roofline.execute.pool import read_files  # late: keeps is_active light

        finished: set = set()
        before = len(files) - len(todo)

        def report(j, done, total):  # and how many of these files are read
            if done >= total:
                finished.add(j)
            if seen is not None:
                seen(before + len(finished))
            if self.progress:
                self.progress(files[todo[j]].host, done, total, len(finished), len(todo))

        # The reader stops at what the budget allows, whatever a .gz trailer claimed.
        factor = MEMORY_PER_BYTE.get(run.format, 2.0)
        limit = min(self.max_file_bytes, int(self.budget.total / factor))
        jobs = [
            (
                files[i].path,
                run.format,
                files[i].host,
                limit,
                model_config_file.windows(self.config_of(run, files[i])),
            )
            for i in todo
        ]
        results = read_files(jobs, progress=report)
        if limit < self.max_file_bytes:  # a "too large" then means over the budget's share
            results = [
                errors.ProfileTooLargeError(
                    f"holds more than {limit / 2**20:.0f} MB of profile data, over "
                    f"{self.budget.describe()}"
                )
                if type(r) is errors.ProfileTooLargeError and settings.MAX_FILE_MB.name in str(r)
                else r
                for r in results
            ]
        return results

    def _store(self, run, hostfile, sig, result) -> HostEntry:
        """Keep a conversion's result (or its public error) in the caches."""
        if isinstance(result, errors.ProfileFormatError):
            public = errors.to_public(result, f"run {run.run!r}, host {hostfile.host!r}")
            retry = (
                INCOMPLETE_RETRY_S
                if isinstance(result, errors.ProfileIncompleteError)
                else MEMORY_RETRY_S
                if isinstance(result, errors.ProfileOutOfMemoryError)
                else REMOTE_ERROR_RETRY_S
                if storage.is_remote(hostfile.path)
                else None
            )
            entry = HostEntry(
                sig,
                error=(type(public), str(public)),
                expires=None if retry is None else time.monotonic() + retry,
            )
            self.cache.put(hostfile.path, entry, 0)
            return entry
        if isinstance(result, BaseException):
            raise result
        entry = HostEntry(sig, result)
        self.cache.put(hostfile.path, entry, *sized(result))
        # Keep on disk only what was read from the version the key names, rows and all (a
        # profile whose rows a Dask worker keeps is kept in memory only).
        if (
            self.disk_cache is not None
            and not _kept_elsewhere(result)
            and sig[1] <= self.max_file_bytes
            and _same_version(current_signature(hostfile), sig)
        ):
            self.disk_cache.put(DiskCache.key(sig, run.format, hostfile.host), result)
        return entry
