"""Deadlines of remote calls (storage.py): a store that keeps sending, slowly, never trips a
read timeout, so every remote stat, listing and read has a deadline: the earlier of
TB_ROOFLINE_READ_DEADLINE_S from the start of that read or listing and the request's own
(TB_ROOFLINE_REQUEST_DEADLINE_S from the request's start, `request_deadline`). Past it the call
is cancelled where fsspec can (an asynchronous file system: the request's coroutine, and its
connection, go) and a `storage_errors.StorageDeadlineError` names the store and the setting.
"""

from __future__ import annotations

import contextlib
import contextvars
import time

from tb_roofline.storage_errors import StorageDeadlineError, store_name

# (monotonic time, seconds, setting name) of the deadline of the request this context serves.
_request_deadline: contextvars.ContextVar = contextvars.ContextVar(
    "tb_roofline_request_deadline", default=None
)


@contextlib.contextmanager
def request_deadline(seconds: float | None = None):
    """Remote calls made in this context give up when `seconds` (default
    TB_ROOFLINE_REQUEST_DEADLINE_S) have passed since entering; an outer, earlier deadline
    stays. A file opened inside keeps the deadline wherever it is read."""
    from tb_roofline import settings

    if seconds is None:
        seconds = settings.number(settings.REQUEST_DEADLINE_S)
    at = (time.monotonic() + seconds, seconds, settings.REQUEST_DEADLINE_S.name)
    outer = _request_deadline.get()
    token = _request_deadline.set(at if outer is None or at[0] < outer[0] else outer)
    try:
        yield
    finally:
        _request_deadline.reset(token)


class Deadline:
    """When one remote read or listing must be done: TB_ROOFLINE_READ_DEADLINE_S from now, or
    the request's deadline when that comes first."""

    def __init__(self, url: str, what: str = "reading"):
        from tb_roofline import settings

        seconds = settings.number(settings.READ_DEADLINE_S)
        self.url, self.what = url, what
        self.at, self.seconds, self.setting = (
            time.monotonic() + seconds,
            seconds,
            settings.READ_DEADLINE_S.name,
        )
        outer = _request_deadline.get()
        if outer is not None and outer[0] < self.at:
            self.at, self.seconds, self.setting = outer

    def remaining(self) -> float:
        """Seconds left; StorageDeadlineError when none."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise self.error()
        return left

    def passed(self) -> bool:
        return time.monotonic() >= self.at

    def error(self):
        return StorageDeadlineError(
            f"the store {store_name(self.url)} is too slow: {self.what} {self.url} was not done "
            f"within {self.seconds:g} s ({self.setting})"
        )

    def call(self, fs, method: str, *args, **kwargs):
        """`fs.<method>(*args)` cancelled at the deadline where the file system is fsspec's
        asynchronous kind (s3fs, gcsfs: `timeout=` cancels the request's coroutine);
        otherwise checked before the call."""
        left = self.remaining()
        if is_async(fs):
            kwargs["timeout"] = left
        try:
            return getattr(fs, method)(*args, **kwargs)
        except Exception:
            if self.passed():
                raise self.error() from None
            raise


def is_async(fs) -> bool:
    try:
        from fsspec.asyn import AsyncFileSystem
    except ImportError:
        return False
    return isinstance(fs, AsyncFileSystem)


def fetch_with_deadline(f, fs, p: str, deadline: Deadline) -> None:
    """Make the file's ranged reads (its cache's fetcher) cancellable at `deadline`: s3fs's
    own fetch (with the file's If-Match), else the file system's ranged `cat_file`."""
    cache = getattr(f, "cache", None)
    if cache is None or not hasattr(cache, "fetcher") or not is_async(fs):
        return
    import fsspec.asyn

    inner = _s3_ranged_fetch() if type(f).__name__ == "S3File" else None

    def fetch(start, end):
        if start >= end:
            return b""
        left = deadline.remaining()
        try:
            if inner is not None:
                # `f.details` would ask the store (a HEAD without deadline) when not known.
                details = getattr(f, "_details", None) or {}
                return fsspec.asyn.sync(
                    fs.loop,
                    inner,
                    fs,
                    f.bucket,
                    f.key,
                    f.version_id,
                    start,
                    end,
                    f.read_kw,
                    details,
                    timeout=left,
                )
            return fsspec.asyn.sync(fs.loop, fs._cat_file, p, start=start, end=end, timeout=left)
        except Exception:
            if deadline.passed():
                raise deadline.error() from None
            raise

    cache.fetcher = fetch


def _s3_ranged_fetch():
    """s3fs's ranged GET that takes the file's ETag (If-Match), or None without s3fs."""
    try:
        from s3fs.core import _inner_fetch
    except ImportError:
        return None
    return _inner_fetch
