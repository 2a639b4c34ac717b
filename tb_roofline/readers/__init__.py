"""Readers turn one profile file into `ProfileData` (an op table plus spans and peaks).

They know nothing of HTTP or of the roofline model; they raise `ProfileFormatError`s.
"""
from __future__ import annotations

import collections
import gc
import os
import threading
import time

from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.model.op_table import ProfileData

# Files known to fail, by (path, size, mtime, inode, limits): a corrupt or too large file is
# not read again until it changes. Several requests for one run (the tab asks for the device,
# program, ops and diagnostics at once) then cost one read, not one each: a file that takes a
# lot of memory to refuse must not hold the server at its memory limit request after request.
# Only the class and message are kept (no traceback, so none of the read's memory).
_FAILURES: "collections.OrderedDict[tuple, tuple]" = collections.OrderedDict()
_FAILURES_SIZE = 256
_FAILURES_LOCK = threading.Lock()
MEMORY_RETRY_S = 60.0  # out of memory may be the other requests' fault: retry after this


def _failure_key(path: str, fmt: str, max_bytes):
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (path, fmt, st.st_size, st.st_mtime_ns, st.st_ino, max_bytes,
            os.environ.get("TB_ROOFLINE_MAX_EVENTS"))


def _known_failure(key):
    if key is None:
        return None
    with _FAILURES_LOCK:
        entry = _FAILURES.get(key)
        if entry is not None and entry[2] is not None and time.monotonic() > entry[2]:
            del _FAILURES[key]
            entry = None
    return entry[0](entry[1]) if entry is not None else None


def _remember(key, cls, message, expires=None):
    if key is None:
        return
    with _FAILURES_LOCK:
        _FAILURES[key] = (cls, message, expires)
        while len(_FAILURES) > _FAILURES_SIZE:
            _FAILURES.popitem(last=False)


def read_profile_file(path: str, fmt: str, host: str, max_bytes: int | None = None,
                      progress=None) -> ProfileData:
    """`progress(done, total)`, when given, is called as the reader advances.

    Running out of memory is a `ProfileTooLargeError` (the server keeps serving the rest);
    a file that failed is not read again until it changes (see `_FAILURES`)."""
    key = _failure_key(path, fmt, max_bytes)
    known = _known_failure(key)
    if known is not None:
        raise known
    out_of_memory = False
    try:
        return _read(path, fmt, host, max_bytes, progress)
    except ProfileIncompleteError:
        raise  # still being written: the next request reads it again
    except ProfileFormatError as exc:
        _remember(key, type(exc), str(exc))
        raise
    except MemoryError:
        out_of_memory = True
    if out_of_memory:  # outside the except block: the read's frames and arrays are gone now
        gc.collect()
        message = (f"{os.path.basename(path)}: not enough memory to read it (the server ran "
                   "out of memory; lower the limits TB_ROOFLINE_MAX_FILE_MB or "
                   "TB_ROOFLINE_MAX_EVENTS, or give TensorBoard more memory)")
        _remember(key, ProfileTooLargeError, message, time.monotonic() + MEMORY_RETRY_S)
        raise ProfileTooLargeError(message)
    raise AssertionError("unreachable")


def _read(path, fmt, host, max_bytes, progress) -> ProfileData:
    if fmt == "xplane":
        from tb_roofline.readers.xspace import read_xspace_file
        return read_xspace_file(path, host, max_bytes=max_bytes, progress=progress)
    if fmt == "kineto":
        from tb_roofline.readers.kineto import read_kineto_file
        return read_kineto_file(path, host, max_bytes=max_bytes, progress=progress)
    raise ProfileFormatError(f"{fmt} profiles are not supported")
