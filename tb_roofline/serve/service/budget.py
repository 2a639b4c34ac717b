"""The conversion budget (`TB_ROOFLINE_MEMORY_BUDGET_MB`): what a conversion may take at its
peak, estimated before it starts (`estimate_bytes`: the inflated size of a local .gz found by
inflating every member and counting, else the file size, times what a reader keeps per byte),
and the bytes the conversions in flight take together (`ConversionBudget`). A request's share
grows as its reader counts what it will build (`readers/meter.py`, `_Grant`); small
conversions may use a reserve that big ones leave free.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
import zlib

from tb_roofline import errors, settings, storage
from tb_roofline.allocator import release_free_memory
from tb_roofline.readers import meter

# What a reader keeps in memory per byte of (inflated) profile, at its peak: measured on
# traces with long distinct names (80 MB of JSON: 445 MB peak RSS;
# tests/serve/service/test_hardening.py).
MEMORY_PER_BYTE = {"kineto": 5.0, "xplane": 2.0}
SMALL_SHARE = 1 / 16  # a conversion this small may use the reserve
RESERVE_SHARE = 1 / 8  # of the budget, kept for small conversions (counted all the same)
GROW_WAIT_S = 10.0  # how long a growing conversion waits for the others to leave it room


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
