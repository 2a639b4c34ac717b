"""Where profiles live: a local path (plain `os`, nothing extra imported) or a URL such as
`s3://bucket/logs` or `gs://bucket/logs` (any scheme fsspec knows, read through fsspec).

Discovery, readers and device files go through these few functions, so a remote logdir works
like a local one: one recursive listing per scan (not one request per directory), ranged and
streamed reads, and a file identity (size and etag/generation, or mtime) for the caches.
S3 follows TensorBoard's own conventions: credentials and `AWS_ENDPOINT_URL` as boto3 reads
them, and `S3_ENDPOINT` (TensorBoard's variable) when set.
"""
from __future__ import annotations

import dataclasses
import datetime
import errno
import io
import os
import posixpath
import threading

READ_BLOCK_BYTES = 8 << 20  # ranged reads of this size (streamed readers keep one block)


class StorageError(OSError):
    """Remote storage is not usable (missing package, bad URL, unreachable service)."""

    def __init__(self, message: str):
        super().__init__(errno.EIO, message)

    def __str__(self):
        return self.strerror


@dataclasses.dataclass(frozen=True)
class RemoteStat:
    """What a remote listing or HEAD tells about a file, shaped like `os.stat_result`."""
    st_size: int
    st_mtime: float  # seconds since the epoch; 0.0 when the store does not say
    version: str  # generation, etag or modification time: changes when the file is rewritten

    @property
    def st_mtime_ns(self) -> int:
        return int(self.st_mtime * 1e9)


def is_remote(path: str) -> bool:
    """A URL with a scheme other than file:// (checked without importing anything)."""
    head, sep, _ = str(path).partition("://")
    return bool(sep) and head != "file" and "/" not in head


def local_path(path: str) -> str:
    return path[len("file://"):] if str(path).startswith("file://") else path


def version(st) -> tuple:
    """What identifies one version of a file: compare two stats of it with this."""
    if isinstance(st, RemoteStat):
        return (st.st_size, st.version)
    return (st.st_size, st.st_mtime_ns)


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
        raise StorageError(f"reading {protocol}:// needs fsspec: pip install "
                           "'tb-roofline[remote]' (or [s3], [gcs])") from None
    options = _options(protocol)
    key = (protocol, repr(sorted(options.items())))
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
        return (f"reading {protocol}:// needs the Python package {package}: "
                f"pip install 'tb-roofline[{extra}]' ({detail})")
    return f"reading {protocol}:// needs a package fsspec names: {detail}"


def _options(protocol: str) -> dict:
    # Listings change under us (new sessions): never answer from fsspec's listing cache.
    options = {"use_listings_cache": False}
    if protocol in ("s3", "s3a"):
        endpoint = os.environ.get("S3_ENDPOINT", "").strip()  # TensorBoard's own variable
        if endpoint:
            if "://" not in endpoint:
                https = os.environ.get("S3_USE_HTTPS", "1") not in ("0", "false")
                endpoint = ("https://" if https else "http://") + endpoint
            options["client_kwargs"] = {"endpoint_url": endpoint}
    return options


def _mtime(info: dict) -> float:
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


def _translate(exc: Exception, url: str) -> OSError:
    """An OSError with a readable `strerror`, as callers of `os` functions expect."""
    if isinstance(exc, OSError):
        if exc.strerror:
            return exc
        try:
            return type(exc)(exc.errno or errno.EIO, str(exc) or type(exc).__name__, url)
        except Exception:
            return StorageError(f"{url}: {exc}")
    return StorageError(f"{url}: {type(exc).__name__}: {exc}")


def stat(path: str):
    """`os.stat_result` for a local path, `RemoteStat` for a URL; OSError when missing."""
    if not is_remote(path):
        return os.stat(local_path(path))
    fs, p = _filesystem(path)
    try:
        info = fs.info(p)
    except Exception as exc:
        raise _translate(exc, path) from None
    if info.get("type") == "directory":
        raise IsADirectoryError(21, "Is a directory", path)
    return _stat_of(info)


def isdir(path: str) -> bool:
    if not is_remote(path):
        return os.path.isdir(local_path(path))
    fs, p = _filesystem(path)
    try:
        return bool(fs.isdir(p))
    except Exception as exc:
        raise _translate(exc, path) from None


def open_binary(path: str, size: int | None = None):
    """A binary file object: `open()` locally; remotely ranged reads of READ_BLOCK_BYTES with
    read-ahead (a streaming reader holds one block, a whole-file read is one request)."""
    if not is_remote(path):
        return open(local_path(path), "rb")
    fs, p = _filesystem(path)
    kwargs = {"size": size} if size is not None else {}
    try:
        f = fs.open(p, "rb", block_size=READ_BLOCK_BYTES, cache_type="readahead", **kwargs)
    except Exception as exc:
        raise _translate(exc, path) from None
    return _RemoteFile(f, path)


class _RemoteFile(io.RawIOBase):
    """Delegates to the fsspec file; a network failure surfaces as OSError, as a disk's would."""

    def __init__(self, f, url: str):
        super().__init__()
        self._f, self._url = f, url

    def readable(self):
        return True

    def seekable(self):
        return True

    def read(self, n=-1):
        try:
            return self._f.read(n if n is not None and n >= 0 else -1)
        except Exception as exc:
            raise _translate(exc, self._url) from None

    def readall(self):
        return self.read(-1)

    def readinto(self, buffer):
        data = self.read(len(buffer))
        buffer[:len(data)] = data
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
        found = fs.find(p, detail=True)
    except FileNotFoundError:
        return {}
    except Exception as exc:
        raise _translate(exc, root) from None
    prefix = p + "/" if p else ""
    out = {}
    for name, info in found.items():
        name = fs._strip_protocol(name)
        if info.get("type", "file") != "directory" and name.startswith(prefix):
            out[name[len(prefix):]] = _stat_of(info)
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
