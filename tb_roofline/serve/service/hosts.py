"""Reading profile files for the service: each file's identity, the memory and disk caches of
read profiles, the conversion budget, and per-key locks.

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

import collections
import contextlib
import dataclasses
import os
import threading
import time
import zlib
from typing import TYPE_CHECKING

from tb_roofline import errors, settings, storage
from tb_roofline.allocator import release_free_memory
from tb_roofline.readers import meter
from tb_roofline.serve.caches.disk import DiskCache
from tb_roofline.serve.caches.memory import ByteLRU, memory_budget_bytes, sized

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
SMALL_SHARE = 1 / 16  # a conversion this small may use the reserve
RESERVE_SHARE = 1 / 8  # of the budget, kept for small conversions (counted all the same)
GROW_WAIT_S = 10.0  # how long a growing conversion waits for the others to leave it room


@dataclasses.dataclass
class HostEntry:
    """A read profile, or the public error reading it gave, for one file signature."""

    signature: tuple
    data: ProfileData | None = None
    error: tuple | None = None  # (PublicError class, message): raised anew each time
    expires: float | None = None  # monotonic time; None = while the signature holds

    def valid_for(self, signature) -> bool:
        return self.signature == signature and (
            self.expires is None or time.monotonic() < self.expires
        )

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


INFLATE_CHUNK = 1 << 20
_inflated_sizes: collections.OrderedDict = collections.OrderedDict()  # (path, size, mtime)
_inflated_lock = threading.Lock()


def _gzip_inflated_size(path: str, size: int, cap: int | None = None) -> int | None:
    """A local .gz file's inflated size, found by inflating it (output counted, not kept):
    every member, as bgzip and pigz write several and the last one's trailer gives only its
    own size. Stops once past `cap` (the size is then "more than cap"); None when the file
    cannot be read or is not gzip (the reader judges it). Remembered per file version."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_size, st.st_mtime_ns)
    with _inflated_lock:
        known = _inflated_sizes.get(key)
    if known is not None and (known[1] or cap is None or known[0] <= cap):
        return known[0]
    total, complete = _inflate_count(path, cap)
    if total is None:
        return None
    with _inflated_lock:
        _inflated_sizes[key] = (total, complete)
        while len(_inflated_sizes) > 256:
            _inflated_sizes.popitem(last=False)
    return total


def _inflate_count(path: str, cap: int | None) -> tuple:
    """(bytes the members inflate to, whether counted to the end) or (None, False)."""
    total = 0
    try:
        with open(path, "rb") as f:
            z = zlib.decompressobj(31)
            while True:
                data = f.read(INFLATE_CHUNK)
                if not data:
                    return total, True
                while data:
                    out = z.decompress(data, INFLATE_CHUNK)
                    total += len(out)
                    data = z.unconsumed_tail
                    if z.eof:  # the next member, if any (all the input left is there)
                        data = z.unused_data
                        z = zlib.decompressobj(31)
                        if not data.strip(b"\0"):
                            data = b""
                    if cap is not None and total > cap:
                        return total, False
    except (OSError, zlib.error):
        return (total or None), False


def estimate_bytes(path: str, fmt: str, size: int, cap: int | None = None) -> int:
    """Memory a conversion of this file may take at its peak (an estimate, made before); a
    .gz is inflated (counted) up to `cap` bytes of estimate, past which the exact figure
    does not matter."""
    if cap is not None:
        cap = int(cap / MEMORY_PER_BYTE.get(fmt, 2.0)) + 1
    data_bytes = size
    if path.endswith(".gz") and not storage.is_remote(path):
        inflated = _gzip_inflated_size(path, size, cap)
        if inflated is not None:
            data_bytes = max(size, inflated)
    elif path.endswith(".gz"):
        data_bytes = size * 8  # a remote trailer costs a request: a typical trace ratio
    return int(data_bytes * MEMORY_PER_BYTE.get(fmt, 2.0))


class _Grant:
    """One request's share of the budget: what it was admitted with, grown as its
    conversions tell what they build (`readers/meter.py`), one estimate per file."""

    def __init__(self, budget: ConversionBudget, need: int):
        self.budget, self.bytes, self.admitted = budget, need, need
        self.files: dict = {}  # key (a file) -> its largest estimate so far
        self.waiting = False

    def charge(self, need: int, what: str, key=None) -> None:
        self.files[key] = max(self.files.get(key, 0), need)
        self.budget.grow(self, max(self.admitted, sum(self.files.values())), what)


class ConversionBudget:
    """Bytes that conversions in flight may take together, every conversion counted. `admit(n)`
    waits until `n` fits (a conversion alone always fits); a share of the budget
    (`RESERVE_SHARE`) is kept for small ones (under `SMALL_SHARE` each), so they never wait
    behind a big one, and they are counted like any other. A conversion grows its share as it
    learns what it builds (`grow`): past the whole budget it stops (413 naming the budget);
    when the others in flight hold the rest, it waits for them, or stops with a retry-later
    413 when they are all waiting too. Re-entrant: a thread already admitted (for a whole
    request) is not counted again."""

    def __init__(self, total_bytes: int):
        self.total = total_bytes
        self.small = int(total_bytes * SMALL_SHARE)
        self.reserve = int(total_bytes * RESERVE_SHARE)
        self.used = 0
        self.big_used = 0
        self._grants: list = []
        self._cond = threading.Condition()
        self._mine = threading.local()

    def describe(self) -> str:
        return (
            f"the memory budget of {self.total / 2**20:.0f} MB ({settings.MEMORY_BUDGET_MB.name})"
        )

    def grant(self) -> _Grant | None:
        """This thread's admission, if it holds one."""
        return getattr(self._mine, "grant", None)

    def _fits(self, need: int, small: bool) -> bool:
        if not self.used:
            return True
        if small:
            return self.used + need <= self.total
        return self.used + need <= self.total and (
            not self.big_used or self.big_used + need <= self.total - self.reserve
        )

    @contextlib.contextmanager
    def admit(self, need: int):
        if self.grant() is not None:
            yield
            return
        small = need <= self.small
        need = min(need, self.total if small else self.total - self.reserve)
        grant = _Grant(self, need)
        with self._cond:
            while not self._fits(need, small):
                self._cond.wait()
            self.used += need
            self.big_used += 0 if small else need
            self._grants.append(grant)
        self._mine.grant = grant
        try:
            with meter.admitted(grant.charge):
                yield
        finally:
            self._mine.grant = None
            with self._cond:
                self.used -= grant.bytes
                self.big_used -= 0 if small else grant.admitted
                self._grants.remove(grant)
                self._cond.notify_all()
            release_free_memory()

    def grow(self, grant: _Grant, need: int, what: str) -> None:
        """Raise `grant` to `need` bytes (ProfileTooLargeError when it cannot be had)."""
        if need <= grant.bytes:
            return
        if need > self.total:
            raise meter.over_budget(need, self.total, what)
        give_up = time.monotonic() + GROW_WAIT_S
        with self._cond:
            while self.used + need - grant.bytes > self.total:
                others = [g for g in self._grants if g is not grant]
                # (bounded: another request may hold its share while it waits on a lock
                # this conversion holds)
                if not others or all(g.waiting for g in others) or time.monotonic() > give_up:
                    raise errors.ProfileOutOfMemoryError(
                        f"{meter.over_budget(need, self.total, what)}, with the other "
                        "conversions in flight (tried again in a while)"
                    )
                grant.waiting = True
                self._cond.wait(1.0)
                grant.waiting = False
            self.used += need - grant.bytes
            grant.bytes = need


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


class HostReader:
    """Read profiles, cached in memory and on disk, converted under the budget."""

    def __init__(
        self,
        max_file_bytes_: int,
        disk_cache: DiskCache | None,
        progress=None,
        budget_bytes: int | None = None,
    ):
        self.max_file_bytes = max_file_bytes_
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
                sig = file_signature(f)
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
        need = meter.estimate(rows, result.ops.num_keys, steps)
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
        results = read_files(
            [(files[i].path, run.format, files[i].host, limit) for i in todo], progress=report
        )
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
        # Keep on disk only what was read from the version the key names.
        if (
            self.disk_cache is not None
            and sig[1] <= self.max_file_bytes
            and current_signature(hostfile) == sig
        ):
            self.disk_cache.put(DiskCache.key(sig, run.format, hostfile.host), result)
        return entry
