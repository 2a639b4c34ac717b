"""In-memory caches bounded by bytes, not by a count of entries: twenty small runs fit where
two huge ones would, and a long-running TensorBoard still never grows past its budget.

Budgets come from `TB_ROOFLINE_MEMORY_CACHE_MB` (default 2048), shared out as
`MEMORY_SHARES` says: read profiles, analyses, encoded answers.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import threading

from tb_roofline import settings

MEMORY_SHARES = {"profiles": 0.35, "analyses": 0.45, "answers": 0.20}
MIN_ENTRY_BYTES = 4096  # what an entry costs at least (keys, dicts, small objects)


def memory_budget_bytes(kind: str, environ=None) -> int:
    """This cache's share of TB_ROOFLINE_MEMORY_CACHE_MB (tb_roofline/settings.py)."""
    return int(settings.mb(settings.MEMORY_CACHE_MB, environ) * MEMORY_SHARES[kind])


class ByteLRU:
    """A thread-safe least-recently-used map holding at most `max_bytes` (by the size given
    with each entry). An entry larger than the whole budget is not kept.

    Entries may share buffers (`roots`: the arrays their views keep alive, from
    `approx_size(..., roots=)`): a buffer is charged once, while any entry holding it stays,
    so hosts whose rows are views of their run's table cost that table once, and the last of
    them left still costs all of it."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        # key -> (value, size, ids of roots); id -> [root array, entries holding it]
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._roots: dict = {}
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key, value, size: int, roots: dict | None = None) -> bool:
        """Keep `value` (False: larger than the whole budget, not kept); `roots` (id -> array)
        are buffers it shares with other entries, charged once among them."""
        with self._lock:
            return self._put(key, value, size, roots or {})

    def recharge(self, keys: list, measure):
        """Measure again the entries of `keys` (their arrays changed): `measure(value)` gives
        (size, roots). All of them at once, under the lock (a concurrent recharge cannot
        leave an older measurement), and evicting only after: entries that now share a
        buffer are not evicted one by one while the others still carry their old sizes."""
        with self._lock:
            held = [(k, self._items.get(k)) for k in dict.fromkeys(keys)]
            items = [(k, item[0]) + tuple(measure(item[0])) for k, item in held if item]
            for k, *_ in items:
                self._release(self._items[k])
            for k, value, size, roots in items:
                size = max(int(size), MIN_ENTRY_BYTES)
                if size + sum(r.nbytes for r in roots.values()) > self.max_bytes:
                    del self._items[k]  # could not stay even alone: it goes, not the others
                    continue
                self._hold(k, value, size, roots)
            self._evict()

    def _put(self, key, value, size, roots) -> bool:
        size = max(int(size), MIN_ENTRY_BYTES)
        old = self._items.pop(key, None)
        if old is not None:
            self._release(old)
        if size + sum(r.nbytes for r in roots.values()) > self.max_bytes:
            return False  # (alone: the other holders of its roots may all be evicted)
        self._hold(key, value, size, roots)
        self._evict()
        return key in self._items

    def _hold(self, key, value, size, roots):
        self._items[key] = (value, size, tuple(roots))
        self._items.move_to_end(key)
        for i, r in roots.items():
            held = self._roots.setdefault(i, [r, 0])
            if not held[1]:
                self.bytes += r.nbytes
            held[1] += 1
        self.bytes += size

    def _evict(self):
        while self.bytes > self.max_bytes and self._items:
            self._release(self._items.popitem(last=False)[1])

    def _release(self, item):
        self.bytes -= item[1]
        for i in item[2]:
            held = self._roots[i]
            held[1] -= 1
            if not held[1]:
                self.bytes -= held[0].nbytes
                del self._roots[i]

    def keys(self) -> list:
        with self._lock:
            return list(self._items)

    def pop(self, key):
        with self._lock:
            item = self._items.pop(key, None)
            if item is not None:
                self._release(item)

    def __len__(self):
        return len(self._items)


_SAMPLE_OVER, _SAMPLE = 48, 16  # containers longer than this are measured from a sample


def _root(a):
    """The array whose buffer a view keeps alive (None: `a` owns its memory, or the memory
    is not an array's, e.g. the bytes a decoder viewed)."""
    np = sys.modules["numpy"]
    root, base = None, a.base
    while isinstance(base, np.ndarray):
        root, base = base, base.base
    return root if root is not None and root.flags.owndata else None


_SCALARS = frozenset({str, bytes, int, float, bool, type(None)})


def approx_size(obj, _seen=None, _depth=0, roots: dict | None = None) -> int:
    """Bytes an object graph holds, roughly: numpy buffers exactly, object arrays (strings)
    from a sample, containers and dataclasses walked. Cheap enough to run once per entry.
    A view is charged the whole buffer it keeps alive (once); with `roots` given, those
    buffers are collected there (id -> array) instead, for `ByteLRU.put` to charge once
    among the entries that share them."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen or _depth > 12:
        return 0
    seen.add(id(obj))
    if type(obj) in _SCALARS:
        return sys.getsizeof(obj)
    np = sys.modules.get("numpy")  # no array exists before numpy is imported
    if np is not None and isinstance(obj, np.ndarray):
        return _array_size(obj, seen, roots)
    if isinstance(obj, (str, bytes, bytearray, int, float, bool)) or obj is None:
        return sys.getsizeof(obj)

    def size_of(v) -> int:
        return approx_size(v, seen, _depth + 1, roots)

    if isinstance(obj, dict):
        return sys.getsizeof(obj) + _sampled_sum(
            list(obj.items()), lambda kv: size_of(kv[0]) + size_of(kv[1])
        )
    if isinstance(obj, (list, tuple, set, frozenset)):
        seq = list(obj) if isinstance(obj, (set, frozenset)) else obj
        return sys.getsizeof(obj) + _sampled_sum(seq, size_of)
    if hasattr(obj, "held_here"):  # rows kept elsewhere (table/held_rows.py): what is here
        return sys.getsizeof(obj) + size_of(obj.held_here())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sys.getsizeof(obj) + sum(
            size_of(getattr(obj, f.name)) for f in dataclasses.fields(obj)
        )
    if hasattr(obj, "__dict__"):
        return sys.getsizeof(obj) + size_of(vars(obj))
    return sys.getsizeof(obj)


def _sampled_sum(seq, size_of) -> int:
    """Σ size_of over a sequence; over _SAMPLE_OVER items (big maps and long lists of similar
    records: op shapes per op), a sample's mean times the length."""
    if len(seq) <= _SAMPLE_OVER:
        return sum(size_of(v) for v in seq)
    sample = seq[:: len(seq) // _SAMPLE][:_SAMPLE]
    return int(sum(size_of(v) for v in sample) / len(sample) * len(seq))


def _array_size(obj, seen: set, roots: dict | None) -> int:
    if obj.base is None and obj.dtype != object:  # owns its buffer, no item repeated
        return obj.nbytes + 112
    size = obj.itemsize  # what it holds: a zero stride repeats one item (a constant column)
    for n, stride in zip(obj.shape, obj.strides):
        size *= n if stride else 1
    repeats = any(n > 1 and not stride for n, stride in zip(obj.shape, obj.strides))
    root = None if repeats else _root(obj)  # (a constant's base is its one value)
    if root is not None:
        if roots is not None:
            roots[id(root)] = root
            size = 0
        else:
            size = 0 if id(root) in seen else root.nbytes
            seen.add(id(root))
    if obj.dtype == object and obj.size:
        flat = obj.ravel()
        sample = flat[:: max(1, flat.size // 64)][:64]
        size += int(sum(sys.getsizeof(v) for v in sample) / len(sample) * flat.size)
    return size + 112


def sized(obj) -> tuple:
    """(size, roots) of an object for `ByteLRU.put`: its own bytes, and the buffers its views
    keep alive (charged once among the cache's entries)."""
    roots: dict = {}
    return approx_size(obj, roots=roots), roots


class HeldAnalyses:
    """Analyses too large for the analyses cache, kept for the runs in use: the last `keep`
    asked for (both sides of a compare, or two runs a user switches between), each while it
    is asked for again within `hold_s`, all together within `max_bytes` (the conversion
    budget). Without them two big runs taken in turns were analysed at every request."""

    def __init__(self, keep: int = 2, hold_s: float = 60.0):
        self.keep, self.hold_s = keep, hold_s
        self._items: collections.OrderedDict = collections.OrderedDict()  # key -> [value,
        self._lock = threading.Lock()  #  size, expires]

    def get(self, key, now: float):
        with self._lock:
            self._expire(now)
            item = self._items.get(key)
            if item is None:
                return None
            item[2] = now + self.hold_s  # in use: kept on
            self._items.move_to_end(key)
            return item[0]

    def put(self, key, value, size: int, max_bytes: int, now: float) -> bool:
        """Keep `value` (False: larger than `max_bytes` alone, not kept); the least recently
        used others go as needed."""
        with self._lock:
            self._expire(now)
            self._items.pop(key, None)
            if size > max_bytes:
                return False
            while self._items and (
                len(self._items) >= self.keep
                or sum(i[1] for i in self._items.values()) + size > max_bytes
            ):
                self._items.popitem(last=False)
            self._items[key] = [value, size, now + self.hold_s]
            return True

    def _expire(self, now: float):
        for k in [k for k, item in self._items.items() if item[2] < now]:
            del self._items[k]

    def __len__(self):
        return len(self._items)


COMPARE_CACHE_SIZE = 8


class CompareCache:
    """The last comparisons, each kept with the two analyses it was made from."""

    def __init__(self):
        self._items: list = []
        self._lock = threading.Lock()

    def get(self, key, base, cand):
        with self._lock:
            for k, b, c, value in self._items:
                if k == key and b is base and c is cand:
                    return value
        return None

    def put(self, key, base, cand, value):
        with self._lock:
            self._items = [x for x in self._items if x[0] != key][-(COMPARE_CACHE_SIZE - 1) :]
            self._items.append((key, base, cand, value))
