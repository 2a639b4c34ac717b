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
    with each entry). An entry larger than the whole budget is not kept."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: collections.OrderedDict = collections.OrderedDict()  # key -> (value, size)
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key, value, size: int) -> bool:
        """Keep `value` (False: larger than the whole budget, not kept)."""
        size = max(int(size), MIN_ENTRY_BYTES)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if size > self.max_bytes:
                return False
            self._items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._items.popitem(last=False)
                self.bytes -= dropped
            return True

    def pop(self, key):
        with self._lock:
            item = self._items.pop(key, None)
            if item is not None:
                self.bytes -= item[1]

    def __len__(self):
        return len(self._items)


_SAMPLE_OVER, _SAMPLE = 48, 16  # containers longer than this are measured from a sample


def approx_size(obj, _seen=None, _depth=0) -> int:
    """Bytes an object graph holds, roughly: numpy buffers exactly, object arrays (strings)
    from a sample, containers and dataclasses walked. Cheap enough to run once per entry."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen or _depth > 12:
        return 0
    seen.add(id(obj))
    np = sys.modules.get("numpy")  # no array exists before numpy is imported
    if np is not None and isinstance(obj, np.ndarray):
        size = obj.nbytes
        if obj.dtype == object and obj.size:
            flat = obj.ravel()
            sample = flat[:: max(1, flat.size // 64)][:64]
            size += int(sum(sys.getsizeof(v) for v in sample) / len(sample) * flat.size)
        return size + 112
    if isinstance(obj, (str, bytes, bytearray, int, float, bool)) or obj is None:
        return sys.getsizeof(obj)
    if isinstance(obj, dict):
        items = obj.items()
        if len(obj) > _SAMPLE_OVER:  # big maps of similar entries (op shapes per op): a sample
            items = list(items)
            sample = items[:: len(items) // _SAMPLE][:_SAMPLE]
            return sys.getsizeof(obj) + int(sum(approx_size(k, seen, _depth + 1) +
                                                approx_size(v, seen, _depth + 1)
                                                for k, v in sample) / len(sample) * len(items))
        return sys.getsizeof(obj) + sum(approx_size(k, seen, _depth + 1) +
                                        approx_size(v, seen, _depth + 1) for k, v in items)
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj) if isinstance(obj, (set, frozenset)) else obj
        if len(items) > _SAMPLE_OVER:  # long lists of similar records: measure a sample
            sample = items[:: len(items) // _SAMPLE][:_SAMPLE]
            return sys.getsizeof(obj) + int(sum(approx_size(v, seen, _depth + 1) for v in sample)
                                            / len(sample) * len(items))
        return sys.getsizeof(obj) + sum(approx_size(v, seen, _depth + 1) for v in items)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sys.getsizeof(obj) + sum(approx_size(getattr(obj, f.name), seen, _depth + 1)
                                        for f in dataclasses.fields(obj))
    if hasattr(obj, "__dict__"):
        return sys.getsizeof(obj) + approx_size(vars(obj), seen, _depth + 1)
    return sys.getsizeof(obj)


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
            self._items = [x for x in self._items if x[0] != key][-(COMPARE_CACHE_SIZE - 1):]
            self._items.append((key, base, cand, value))
