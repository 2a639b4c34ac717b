"""Where profiles live: a local path (plain `os`, nothing extra imported) or a URL such as
`s3://bucket/logs` or `gs://bucket/logs` (any scheme fsspec knows, read through fsspec).

Discovery, readers and device files go through these few functions, so a remote logdir works
like a local one: one recursive listing per scan (not one request per directory), ranged and
streamed reads, and a file identity (size and etag/generation, or mtime) for the caches.
S3 follows TensorBoard's own conventions: credentials and `AWS_ENDPOINT_URL` as boto3 reads
them, and `S3_ENDPOINT` (TensorBoard's variable) when set.

A store that stalls cannot hold a request: S3 requests have a connect timeout, a read timeout
(TB_ROOFLINE_REMOTE_TIMEOUT_S, 10 s) and at most TB_ROOFLINE_REMOTE_ATTEMPTS (2) attempts, so a call
gives up within ~25 s with a `StorageTimeoutError` naming the store. A store that keeps sending,
slowly (a few bytes a second), never trips a read timeout: every remote call also has a deadline
(`storage_deadline.Deadline`), the earlier of TB_ROOFLINE_READ_DEADLINE_S (300 s) from the start of
the file's read or listing and the request's own (TB_ROOFLINE_REQUEST_DEADLINE_S, 600 s, set by
`request_deadline`); past it the call is cancelled (its connection dropped) and a
`StorageDeadlineError` names the store and the setting. A remote file's ranged reads are conditional
on the ETag its last `stat` saw (S3 `If-Match`): an object overwritten between the stat and a read,
or between two reads, is a `ProfileIncompleteError` ("changed while it was read", a 503), never a
mix of two versions.
"""

from __future__ import annotations

import errno
import io
import os
import posixpath
import threading
from collections import OrderedDict

# The errors and deadlines live in modules of their own (storage_deadline raises the errors
# without importing this module); they are used as `storage.<name>`, and request_deadline by
# the plugin and MCP.
from tb_roofline.storage_deadline import (
    Deadline,  # noqa: F401
    fetch_with_deadline,
    request_deadline,  # noqa: F401
)
from tb_roofline.storage_deadline import is_async as _is_async
from tb_roofline.storage_errors import (
    StorageDeadlineError,  # noqa: F401
    StorageError,
    StorageTimeoutError,
    store_name,
)

READ_BLOCK_BYTES = 8 << 20  # ranged reads of this size (streamed readers keep one block)
CONNECT_TIMEOUT_S = 5.0


class RemoteStat(tuple):
    """What a remote listing or HEAD tells about a file, shaped like `os.stat_result`
    (a tuple: immutable, compared and hashed by value; no dataclasses import at start-up)."""

    __slots__ = ()

    def __new__(cls, st_size: int, st_mtime: float, version: str):
        return tuple.__new__(cls, (st_size, st_mtime, version))

    st_size = property(lambda self: self[0])
    st_mtime = property(lambda self: self[1])  # seconds since the epoch; 0.0 when not said
    version = property(lambda self: self[2])  # generation, etag or mtime: changes on rewrite

    @property
    def st_mtime_ns(self) -> int:
        return int(self.st_mtime * 1e9)

    def __repr__(self):
        return f"RemoteStat(st_size={self[0]!r}, st_mtime={self[1]!r}, version={self[2]!r})"

    def __getnewargs__(self):
        return tuple(self)


def is_remote(path: str) -> bool:
    """A URL with a scheme other than file:// (checked without importing anything)."""
    head, sep, _ = str(path).partition("://")
    return bool(sep) and head != "file" and "/" not in head


def local_path(path: str) -> str:
    return path[len("file://") :] if str(path).startswith("file://") else path


def version(st) -> tuple:
    """What identifies one version of a file: compare two stats of it with this. Locally the
    size, mtime, ctime and inode: a same-size rewrite that keeps the mtime (`cp -p`,
    `rsync -t`) still changes the ctime (no call sets it) and, renamed into place, the inode.
    Remotely the size and the store's version (etag or generation)."""
    if isinstance(st, RemoteStat):
        return (st.st_size, st.version)
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


# --- remote file systems ------------------------------------------------------------------

_fs_lock = threading.Lock()
_filesystems: dict = {}


def _filesystem(url: str):
    """(fsspec file system, path without the scheme) for a URL, one instance per scheme and
    settings."""
    protocol = url.split("://", 1)[0]
    try:
        import fsspec
    except ImportError:
        raise StorageError(
            f"reading {protocol}:// needs fsspec: pip install "
            "'tb-roofline[remote]' (or [s3], [gcs])"
        ) from None
    options = _options(protocol)
    key = (protocol, repr(sorted(options.items())), timeouts())
    with _fs_lock:
        fs = _filesystems.get(key)
        if fs is None:
            try:
                cls = fsspec.get_filesystem_class(protocol)
            except ImportError as exc:
                raise StorageError(_missing(protocol, str(exc))) from None
            except ValueError as exc:
                raise StorageError(f"{protocol}:// is not a storage fsspec knows: {exc}") from None
            try:
                fs = cls(**options)
                if protocol in ("s3", "s3a"):
                    fs.retries = timeouts()[2]  # s3fs's own retries of timeouts (5 by default)
            except ImportError as exc:
                raise StorageError(_missing(protocol, str(exc))) from None
            except Exception as exc:
                raise StorageError(f"cannot set up {protocol}:// storage: {exc}") from None
            _filesystems[key] = fs
    return fs, fs._strip_protocol(url).rstrip("/")


def _missing(protocol: str, detail: str) -> str:
    package = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}.get(protocol)
    if package:
        extra = "s3" if package == "s3fs" else "gcs"
        return (
            f"reading {protocol}:// needs the Python package {package}: "
            f"pip install 'tb-roofline[{extra}]' ({detail})"
        )
    return f"reading {protocol}:// needs a package fsspec names: {detail}"


def timeouts() -> tuple[float, float, int]:
    """(connect timeout s, read timeout s, attempts) of one remote request."""
    from tb_roofline import settings

    return (
        CONNECT_TIMEOUT_S,
        settings.number(settings.REMOTE_TIMEOUT_S),
        int(settings.number(settings.REMOTE_ATTEMPTS)),
    )


def _options(protocol: str) -> dict:
    # Listings change under us (new sessions): never answer from fsspec's listing cache.
    options: dict = {"use_listings_cache": False}
    if protocol in ("s3", "s3a"):
        endpoint = os.environ.get("S3_ENDPOINT", "").strip()  # TensorBoard's own variable
        if endpoint:
            if "://" not in endpoint:
                https = os.environ.get("S3_USE_HTTPS", "1") not in ("0", "false")
                endpoint = ("https://" if https else "http://") + endpoint
            options["client_kwargs"] = {"endpoint_url": endpoint}
        connect, read, _ = timeouts()
        # botocore: one attempt per call (s3fs retries it, `fs.retries`, set in _filesystem).
        options["config_kwargs"] = {
            "connect_timeout": connect,
            "read_timeout": read,
            "retries": {"total_max_attempts": 1},
        }
    return options


def _mtime(info: dict) -> float:
    import datetime

    for key in ("LastModified", "mtime", "updated", "last_modified", "created", "timeCreated"):
        value = info.get(key)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0


def _stat_of(info: dict) -> RemoteStat:
    mtime = _mtime(info)
    token = None
    for key in ("generation", "ETag", "etag", "md5Hash", "checksum"):
        if info.get(key) not in (None, ""):
            token = f"{key}={str(info[key]).strip(chr(34))}"
            break
    return RemoteStat(int(info.get("size") or 0), mtime, token or f"mtime={mtime!r}")


def _is_timeout(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 8:  # the error, or what caused it (s3fs wraps them)
        if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _translate(exc: Exception, url: str) -> OSError:
    """An OSError with a readable `strerror`, as callers of `os` functions expect; a store
    that did not answer in time is a StorageTimeoutError naming it."""
    if _is_timeout(exc):
        connect, read, attempts = timeouts()
        return StorageTimeoutError(
            f"the store {store_name(url)} did not answer in time (read timeout {read:g} s, "
            f"{attempts} attempt{'s' if attempts > 1 else ''}) reading {url}"
        )
    if isinstance(exc, OSError):
        if exc.strerror:
            return exc
        try:
            return type(exc)(exc.errno or errno.EIO, str(exc) or type(exc).__name__, url)
        except Exception:
            return StorageError(f"{url}: {exc}")
    return StorageError(f"{url}: {type(exc).__name__}: {exc}")


_SEEN_MAX = 4096
_seen_lock = threading.Lock()
_seen: OrderedDict = OrderedDict()  # URL -> (size, ETag) of its last stat, for If-Match


def stat(path: str):
    """`os.stat_result` for a local path, `RemoteStat` for a URL; OSError when missing."""
    if not is_remote(path):
        return os.stat(local_path(path))
    fs, p = _filesystem(path)
    try:
        info = Deadline(path, "asking about").call(fs, "info", p)
    except StorageDeadlineError:
        raise
    except Exception as exc:
        raise _translate(exc, path) from None
    if info.get("type") == "directory":
        raise IsADirectoryError(21, "Is a directory", path)
    st = _stat_of(info)
    if info.get("ETag"):
        with _seen_lock:
            _seen.pop(path, None)
            _seen[path] = (st.st_size, info["ETag"])
            while len(_seen) > _SEEN_MAX:
                _seen.popitem(last=False)
    return st


def isdir(path: str) -> bool:
    if not is_remote(path):
        return os.path.isdir(local_path(path))
    fs, p = _filesystem(path)
    try:
        return bool(Deadline(path, "asking about").call(fs, "isdir", p))
    except StorageDeadlineError:
        raise
    except Exception as exc:
        raise _translate(exc, path) from None


def directory_problem(path: str) -> str | None:
    """Why `path` cannot serve as a logdir (unreadable: remote storage unreachable or its
    package not installed; not a directory), or None: what each command says before it starts."""
    try:
        is_dir = isdir(path)
    except OSError as exc:
        return f"cannot read {path!r}: {exc.strerror or exc}"
    return None if is_dir else f"{path!r} is not a directory"


def open_binary(path: str, size: int | None = None):
    """A binary file object: `open()` locally; remotely ranged reads of READ_BLOCK_BYTES with
    read-ahead (a streaming reader holds one block, a whole-file read is one request)."""
    if not is_remote(path):
        return open(local_path(path), "rb")
    fs, p = _filesystem(path)
    deadline = Deadline(path)
    try:
        if size is None and _is_async(fs):  # else the file asks for it, without a deadline
            size = int(deadline.call(fs, "info", p).get("size") or 0)
        kwargs = {"size": size} if size is not None else {}
        f = fs.open(p, "rb", block_size=READ_BLOCK_BYTES, cache_type="readahead", **kwargs)
    except StorageDeadlineError:
        raise
    except Exception as exc:
        raise _translate(exc, path) from None
    fetch_with_deadline(f, fs, p, deadline)
    with _seen_lock:
        seen = _seen.get(path)
    if (
        seen is not None
        and seen[0] == getattr(f, "size", None)
        and isinstance(getattr(f, "read_kw", None), dict)
    ):
        # s3fs: every ranged GET only if the object is still the one stat saw.
        f.read_kw = {**{k: v for k, v in f.read_kw.items() if v is not None}, "IfMatch": seen[1]}
    return _RemoteFile(f, path, deadline)


def _changed_error(exc: BaseException | None) -> bool:
    """s3fs's FileExpired, or the 412 an If-Match GET gets for an overwritten object."""
    seen = 0
    while exc is not None and seen < 8:
        if (
            type(exc).__name__ == "FileExpired"
            or "PreconditionFailed" in str(exc)
            or (isinstance(exc, OSError) and "pre-condition" in str(exc).lower())
        ):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class _RemoteFile(io.RawIOBase):
    """Delegates to the fsspec file; a network failure surfaces as OSError, as a disk's would."""

    def __init__(self, f, url: str, deadline: Deadline | None = None):
        super().__init__()
        self._f, self._url, self._deadline = f, url, deadline

    def readable(self):
        return True

    def seekable(self):
        return True

    def read(self, n=-1):
        if self._deadline is not None:
            self._deadline.remaining()
        try:
            return self._f.read(n if n is not None and n >= 0 else -1)
        except StorageDeadlineError:
            raise
        except Exception as exc:
            if _changed_error(exc):
                from tb_roofline.errors import ProfileIncompleteError

                raise ProfileIncompleteError(
                    f"{posixpath.basename(self._url)} changed while it was read (the store "
                    "now holds another version)"
                ) from None
            raise _translate(exc, self._url) from None

    def readall(self):
        return self.read(-1)

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def tell(self):
        return self._f.tell()

    def seek(self, offset, whence=0):
        return self._f.seek(offset, whence)

    def close(self):
        if not self.closed:
            try:
                self._f.close()
            finally:
                super().close()


def read_bytes(path: str, limit: int | None = None) -> bytes:
    with open_binary(path) as f:
        return f.read() if limit is None else f.read(limit)


def list_files(root: str) -> dict:
    """{path relative to `root` (with /): RemoteStat} of every file under a remote `root`,
    from one recursive listing (paginated by the store, not one request per directory)."""
    fs, p = _filesystem(root)
    try:
        found = Deadline(root, "listing").call(fs, "find", p, detail=True)
    except FileNotFoundError:
        return {}
    except StorageDeadlineError:
        raise
    except Exception as exc:
        raise _translate(exc, root) from None
    prefix = p + "/" if p else ""
    out = {}
    for name, info in found.items():
        name = fs._strip_protocol(name)
        if info.get("type", "file") != "directory" and name.startswith(prefix):
            out[name[len(prefix) :]] = _stat_of(info)
    return out


def split_url(url: str) -> tuple[str, str]:
    """('s3://', 'bucket/a/b') for 's3://bucket/a/b': posixpath works on the second part."""
    scheme, _, rest = url.partition("://")
    return scheme + "://", rest


def join(base: str, *parts: str) -> str:
    if not is_remote(base):
        return os.path.join(base, *parts)
    return posixpath.join(base, *parts)


def dirname(path: str) -> str:
    if not is_remote(path):
        return os.path.dirname(path)
    scheme, rest = split_url(path)
    return scheme + posixpath.dirname(rest)
