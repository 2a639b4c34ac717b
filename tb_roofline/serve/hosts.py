"""Reading profile files for the service: each file's identity, the memory and disk caches of
read profiles, the conversion budget, and per-key locks.

- A file's identity (`file_signature`) is (path, size, version) — mtime_ns locally, etag or
  generation remotely, from the last listing (no request). A cached read serves while the
  identity holds; failures are cached the same way (a corrupt file is parsed once), those
  that may pass (a file still being written, a remote error, out of memory) for a while only.
- Memory: read profiles sit in a byte-bounded LRU (`serve/caches.py`); converted profiles also
  go to the disk cache (`serve/disk_cache.py`) when the file did not change while read.
- Budget (`TB_ROOFLINE_MEMORY_BUDGET_MB`): before a conversion, its memory is estimated from
  the file (`estimate_bytes`: the inflated size of a .gz from its trailer, else the file size,
  times what a reader keeps per byte). A file whose estimate exceeds the whole budget is refused
  at once (413 naming the budget, remembered for that file version); the reader is also told to
  stop at what the budget allows, so a trailer that lies still cannot take more. Conversions
  are admitted against the budget, so concurrent big reads queue instead of multiplying; small
  ones (under a sixteenth of the budget) have their own lane and never wait behind a big one.
- Locks: one per file being read (`KeyLocks`), taken in one order; two requests for the same
  file convert it once, and requests for other files never wait on it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import struct
import threading
import time

from tb_roofline import errors, settings, storage
from tb_roofline.allocator import release_free_memory
from typing import TYPE_CHECKING
from tb_roofline.serve.caches import ByteLRU, memory_budget_bytes, sized
from tb_roofline.serve.disk_cache import DiskCache

if TYPE_CHECKING:
    from tb_roofline.table.op_table import ProfileData

# How long a failure stays cached for an unchanged file: a file "still being written" is
# judged again once it is no longer young; a remote read error may have been the network.
INCOMPLETE_RETRY_S = 2.0
REMOTE_ERROR_RETRY_S = errors.REMOTE_ERROR_RETRY_S
MEMORY_RETRY_S = 60.0  # out of memory may have been the other requests' fault
# What a reader keeps in memory per byte of (inflated) profile, at its peak: measured on
# traces with long distinct names (80 MB of JSON: 445 MB peak RSS; tests/test_hardening.py).
MEMORY_PER_BYTE = {"kineto": 5.0, "xplane": 2.0}
SMALL_LANE_SHARE = 1 / 16


@dataclasses.dataclass
class HostEntry:
    """A read profile, or the public error reading it gave, for one file signature."""
    signature: tuple
    data: ProfileData | None = None
    error: tuple | None = None  # (PublicError class, message): raised anew each time
    expires: float | None = None  # monotonic time; None = while the signature holds

    def valid_for(self, signature) -> bool:
        return self.signature == signature and (
            self.expires is None or time.monotonic() < self.expires)

    def result(self) -> ProfileData:
        if self.error is not None:
            cls, message = self.error
            raise cls(message)
        return self.data


def file_signature(hostfile) -> tuple:
    """(path, size, version). A remote file's comes from the last listing: no request."""
    if hostfile.stat is not None:
        return (hostfile.path,) + storage.version(hostfile.stat)
    try:
        st = storage.stat(hostfile.path)
    except OSError as exc:
        raise errors.NotFoundError(f"profile file vanished: {os.path.basename(hostfile.path)} "
                                   f"({exc.strerror})")
    return (hostfile.path,) + storage.version(st)


def current_signature(hostfile) -> tuple | None:
    """The file's identity asked of the storage now (a HEAD request for a remote file)."""
    try:
        return (hostfile.path,) + storage.version(storage.stat(hostfile.path))
    except OSError:
        return None


def max_file_bytes(max_file_mb: float | None = None) -> int:
    return int((max_file_mb or settings.number(settings.MAX_FILE_MB)) * (1 << 20))


def _tables_consistent(data) -> bool:
    """A disk entry's op tables hold a row per row in every column (a forged or damaged entry
    claiming a constant column of 2**40 rows is a miss, never an allocation)."""
    from tb_roofline.table.op_table import OpTable
    tables = [getattr(data, a, None) for a in ("ops", "kernels", "hw_ops")]
    return tables[0] is not None and \
        all(t is None or (isinstance(t, OpTable) and t.consistent()) for t in tables)


class KeyLocks:
    """A lock per key, made when first asked for and dropped when nobody holds or waits on it
    (so a thousand runs do not keep a thousand locks, and two keys never share one)."""

    def __init__(self):
        self._guard = threading.Lock()
        self._locks: dict = {}  # key -> [lock, users]

    @contextlib.contextmanager
    def hold(self, *keys):
        keys = sorted(set(keys), key=repr)  # one order: two holders never wait on each other
        taken = []
        try:
            for key in keys:
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


MAX_DEFLATE_RATIO = 1032


def _gzip_inflated_size(path: str, size: int) -> int | None:
    """A local .gz file's inflated size from its trailer (ISIZE, modulo 4 GiB), or None."""
    try:
        with open(path, "rb") as f:
            f.seek(max(size - 4, 0))
            tail = f.read(4)
    except OSError:
        return None
    if len(tail) != 4:
        return None
    inflated = struct.unpack("<I", tail)[0]
    # Deflate never inflates more than ~1032x: a trailer claiming more is not a trailer (a cut
    # or damaged file ends in other bytes), so it says nothing and the reader judges the file.
    if inflated > MAX_DEFLATE_RATIO * size + 1024:
        return None
    return inflated


def estimate_bytes(path: str, fmt: str, size: int) -> int:
    """Memory a conversion of this file may take at its peak (an estimate, made before)."""
    data_bytes = size
    if path.endswith(".gz") and not storage.is_remote(path):
        inflated = _gzip_inflated_size(path, size)
        if inflated is not None:
            data_bytes = max(size, inflated)
    elif path.endswith(".gz"):
        data_bytes = size * 8  # a remote trailer costs a request: a typical trace ratio
    return int(data_bytes * MEMORY_PER_BYTE.get(fmt, 2.0))


class ConversionBudget:
    """Bytes that conversions in flight may take together. `admit(n)` waits until `n` fits
    (a conversion alone always fits); small conversions have a lane of their own. Re-entrant:
    a thread already admitted (for a whole request) is not counted again."""

    def __init__(self, total_bytes: int):
        self.total = total_bytes
        self.small = int(total_bytes * SMALL_LANE_SHARE)
        self.used = 0
        self._cond = threading.Condition()
        self._mine = threading.local()

    def describe(self) -> str:
        return (f"the memory budget of {self.total / 2**20:.0f} MB "
                f"({settings.MEMORY_BUDGET_MB.name})")

    @contextlib.contextmanager
    def admit(self, need: int):
        need = min(need, self.total)
        if getattr(self._mine, "held", False) or need <= self.small:
            yield
            return
        with self._cond:
            while self.used and self.used + need > self.total:
                self._cond.wait()
            self.used += need
        self._mine.held = True
        try:
            yield
        finally:
            self._mine.held = False
            with self._cond:
                self.used -= need
                self._cond.notify_all()
            release_free_memory()


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
            self.log.info("tb-roofline: read %d of %d hosts (%s: %d of %d parts; %.1f s)",
                          hosts_done, hosts_total, host, done, total, took)


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
            return {"reading": False, "hosts_done": None, "hosts_total": None,
                    "elapsed_s": None}
        return {"reading": True, "hosts_done": sum(s[0] for s in states),
                "hosts_total": sum(s[1] for s in states),
                "elapsed_s": round(time.monotonic() - min(s[2] for s in states), 1)}


class HostReader:
    """Read profiles, cached in memory and on disk, converted under the budget."""

    def __init__(self, max_file_bytes_: int, disk_cache: DiskCache | None, progress=None,
                 budget_bytes: int | None = None):
        self.max_file_bytes = max_file_bytes_
        self.disk_cache = disk_cache
        self.progress = progress  # callable(host, done, total, hosts_done, hosts_total)
        self.cache = ByteLRU(memory_budget_bytes("profiles"))  # path -> HostEntry
        self.budget = ConversionBudget(budget_bytes if budget_bytes is not None
                                       else settings.mb(settings.MEMORY_BUDGET_MB))
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

    def remeasure(self, files: list):
        """Charge the cached reads of `files` again (an analysis made their op tables' rows
        views of the run's table: each now keeps that buffer alive, charged once among them)."""
        self.cache.recharge([f.path for f in files],
                            lambda entry: sized(entry.data) if entry.data is not None else (0, {}))

    def pending_bytes(self, run, files: list) -> int:
        """The estimated memory of reading those of `files` not in the memory cache (what a
        request admits for its whole conversion: read, analysis and answer)."""
        total = 0
        for f in files:
            try:
                sig = file_signature(f)
            except errors.NotFoundError:
                continue
            cached = self.cache.get(f.path)
            if cached is None or not cached.valid_for(sig):
                need = estimate_bytes(f.path, run.format, sig[1])
                guess = storage.is_remote(f.path) and f.path.endswith(".gz")
                total += need if need <= self.budget.total or guess else 0  # else refused
        return min(total, self.budget.total)

    def read(self, run, files: list) -> list:
        """A `HostEntry` per file (its ProfileData or the public error reading it gave). Files
        not cached are converted together, on all cores (`readers/parallel.py`), each under its
        own lock, within the conversion budget."""
        entries: list = [None] * len(files)
        sigs = [file_signature(f) for f in files]
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
                need[i] = estimate_bytes(files[i].path, run.format, sigs[i][1])
                # Can never fit: refused before it is read (a remote .gz's size is a guess:
                # admitted as the whole budget, and the reader's limit decides).
                if need[i] > self.budget.total and not (storage.is_remote(files[i].path)
                                                        and files[i].path.endswith(".gz")):
                    entries[i] = self._store(run, files[i], sigs[i], errors.ProfileTooLargeError(
                        f"needs about {need[i] / 2**20:.0f} MB to read, over "
                        f"{self.budget.describe()}"))
            todo = [i for i in todo if entries[i] is None]
            if todo:
                with self.budget.admit(sum(need[i] for i in todo)), \
                        self.reads.reading(run.run, len(files) - len(todo), len(files)) as seen:
                    results = self._convert(run, files, todo, seen)
                for i, result in zip(todo, results):
                    entries[i] = self._store(run, files[i], sigs[i], result)
        return entries

    def _convert(self, run, files, todo, seen=None) -> list:
        """Convert files[i] for i in `todo`; `seen(hosts_done)`: how many of `files` are read
        (those not in `todo` were already)."""
        from tb_roofline.readers.parallel import read_files  # late: keeps is_active light
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
        results = read_files([(files[i].path, run.format, files[i].host, limit) for i in todo],
                             progress=report)
        if limit < self.max_file_bytes:  # a "too large" then means over the budget's share
            results = [errors.ProfileTooLargeError(
                f"holds more than {limit / 2**20:.0f} MB of profile data, over "
                f"{self.budget.describe()}")
                if type(r) is errors.ProfileTooLargeError and settings.MAX_FILE_MB.name in str(r)
                else r for r in results]
        return results

    def _store(self, run, hostfile, sig, result) -> HostEntry:
        """Keep a conversion's result (or its public error) in the caches."""
        if isinstance(result, errors.ProfileFormatError):
            public = errors.to_public(result, f"run {run.run!r}, host {hostfile.host!r}")
            retry = INCOMPLETE_RETRY_S if isinstance(result, errors.ProfileIncompleteError) \
                else MEMORY_RETRY_S if isinstance(result, errors.ProfileOutOfMemoryError) \
                else REMOTE_ERROR_RETRY_S if storage.is_remote(hostfile.path) else None
            entry = HostEntry(sig, error=(type(public), str(public)),
                              expires=None if retry is None else time.monotonic() + retry)
            self.cache.put(hostfile.path, entry, 0)
            return entry
        if isinstance(result, BaseException):
            raise result
        entry = HostEntry(sig, result)
        self.cache.put(hostfile.path, entry, *sized(result))
        # Keep on disk only what was read from the version the key names.
        if self.disk_cache is not None and sig[1] <= self.max_file_bytes and \
                current_signature(hostfile) == sig:
            self.disk_cache.put(DiskCache.key(sig, run.format, hostfile.host), result)
        return entry
