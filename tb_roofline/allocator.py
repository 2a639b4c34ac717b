"""Giving freed heap memory back to the system (glibc's `malloc_trim`; a no-op elsewhere).

glibc keeps memory a process frees: large blocks freed between blocks still in use stay
resident as holes, and memory freed in one thread is kept for that thread's arena. Two places
free much at once and then allocate differently sized blocks, so the holes would add to the
peak (docs/benchmarks.md): a run's table made from its hosts' (`OpTable.concat` with
`share`: each host's column freed as the run's next one is allocated: 32 hosts peaked 50 MB
higher without it), and the end of a big conversion (`serve/service/budget.py`: four big
reads in four threads, one after another, held the peak of each). A call walks the heap once
(~2 ms for 150 MB); memory given back costs a page fault when used again.
"""

from __future__ import annotations

_TRIM: list = []  # [malloc_trim or None], found once


def _malloc_trim():
    try:
        import ctypes

        return getattr(ctypes.CDLL(None), "malloc_trim", None)  # this process's libc
    except (OSError, AttributeError, ImportError, TypeError):
        return None


def release_free_memory() -> None:
    """Return the free pages of the heap to the system now."""
    if not _TRIM:
        _TRIM.append(_malloc_trim())
    if _TRIM[0] is not None:
        _TRIM[0](0)
