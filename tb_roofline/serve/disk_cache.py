"""Converted profiles kept on disk between restarts, in the user's cache directory (never in
the logdir), so a restarted TensorBoard answers at once for a profile it has seen.

- Where: `TB_ROOFLINE_CACHE_DIR`, else `$XDG_CACHE_HOME/tb-roofline`, else
  `~/.cache/tb-roofline`; `TB_ROOFLINE_CACHE_DIR=off` turns the cache off.
- How much: `TB_ROOFLINE_CACHE_MAX_MB` (default 2048); least recently used entries go first.
- What: each converted profile (what a reader returns), keyed by the file's identity (path or
  URL, size, mtime or etag/generation), its format and host; and the encoded answers a page
  load asks for (`/program`, `/ops` without filters, `/device`, `/diagnostics`), keyed by the
  identities of all files behind them. Every key also holds the tool version, the Python and
  numpy versions, and a digest of the code that produces the entry (readers, op table,
  devices, HLO cost model; for answers also the roofline model and the service): any change
  there is a miss.
- Entries are pickles (the object a reader returns, whatever its fields) behind a header with
  a SHA-256 of the payload. They are written to a temporary file and renamed, so two
  TensorBoard servers can share the directory; an entry that is truncated, corrupt or
  unreadable is ignored and replaced, never an error.
- Safety: unpickling runs code, so the directory is created 0700 and refused (cache off, with
  a warning) when another user owns it or others may write to it.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import stat
import struct
import sys
import tempfile
import time

import numpy as np

import tb_roofline
from tb_roofline import settings

DIR_ENV = settings.CACHE_DIR
MAX_MB_ENV = settings.CACHE_MAX_MB.name
DEFAULT_MAX_MB = settings.CACHE_MAX_MB.default
OFF_VALUES = ("off", "none", "0", "false", "no", "disabled")
MAGIC = b"TBRFCACHE1\n"
HEADER = struct.Struct(">32sQ")  # sha256 of the payload, payload length
SUFFIX = ".pkl"
TMP_PREFIX = ".tmp-"
STALE_TMP_S = 3600.0  # a temporary file this old was left by a crashed writer
# Code whose output the cache holds (relative to the package): a change invalidates entries.
CODE_PATHS = ("readers", "model/op_table.py", "devices", "hlo", "protos", "diagnostics.py")
# Encoded answers also depend on the roofline model and on how the service builds answers.
ANSWER_CODE_PATHS = CODE_PATHS + ("model", "serve/service.py")
logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4)
def code_digest(paths: tuple = CODE_PATHS) -> str:
    """SHA-256 over the source of `paths` (once per process, ~1 ms)."""
    root = os.path.dirname(os.path.abspath(tb_roofline.__file__))
    digest = hashlib.sha256()
    for rel in paths:
        path = os.path.join(root, rel)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(d, f) for d, _, names in os.walk(path) for f in names
            if f.endswith((".py", ".proto")))
        for name in files:
            digest.update(os.path.relpath(name, root).encode() + b"\0")
            with open(name, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def default_dir(environ=None) -> str:
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb-roofline")


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(root)]) == \
            os.path.realpath(root)
    except ValueError:
        return False


class DiskCache:
    def __init__(self, directory: str, max_bytes: int):
        self.directory = directory
        self.max_bytes = max_bytes

    @classmethod
    def from_env(cls, logdir: str | None = None, environ=None) -> "DiskCache | None":
        """The cache the environment asks for, or None (off, or not safe to use)."""
        environ = os.environ if environ is None else environ
        value = environ.get(DIR_ENV, "").strip()
        if value.lower() in OFF_VALUES:
            return None
        directory = os.path.abspath(os.path.expanduser(value or default_dir(environ)))
        max_bytes = settings.mb(settings.CACHE_MAX_MB, environ)
        if max_bytes == 0:
            return None
        if logdir and "://" not in logdir and _inside(directory, logdir):
            logger.warning("tb-roofline: cache directory %s is inside the logdir; cache off "
                           "(nothing is written into a logdir)", directory)
            return None
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            st = os.stat(directory)
        except OSError as exc:
            logger.warning("tb-roofline: cannot use cache directory %s (%s); cache off",
                           directory, exc.strerror)
            return None
        if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
            logger.warning("tb-roofline: cache directory %s is not private to this user "
                           "(owner %d, mode %o); cache off", directory, st.st_uid,
                           stat.S_IMODE(st.st_mode))
            return None
        return cls(directory, max_bytes)

    # --- keys and entries -------------------------------------------------------------------
    @staticmethod
    def key(*identity) -> str:
        """Entry name for a file identity (path, size, version, format, host, ...)."""
        parts = (identity, tb_roofline.__version__, code_digest(), sys.version_info[:2],
                 np.__version__, pickle.HIGHEST_PROTOCOL)
        return hashlib.sha256(repr(parts).encode("utf-8", "backslashreplace")).hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key + SUFFIX)

    def get(self, key: str):
        """The cached object, or None (missing, corrupt, unreadable: all just a miss)."""
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                ino = os.fstat(f.fileno()).st_ino
                data = f.read()
        except OSError:
            return None
        value = self._decode(data)
        if value is None:
            self._discard(path, ino)
            return None
        try:
            os.utime(path)  # last use, for the LRU eviction
        except OSError:
            pass
        return value

    @staticmethod
    def _decode(data: bytes):
        start = len(MAGIC) + HEADER.size
        if len(data) < start or not data.startswith(MAGIC):
            return None
        digest, length = HEADER.unpack_from(data, len(MAGIC))
        payload = memoryview(data)[start:]
        if len(payload) != length or hashlib.sha256(payload).digest() != digest:
            return None
        try:
            return pickle.loads(payload)
        except Exception:  # written by other code (a field renamed, a class moved)
            return None

    def _discard(self, path: str, ino: int):
        """Remove a bad entry, unless another process has replaced it meanwhile."""
        try:
            if os.stat(path).st_ino == ino:
                os.unlink(path)
        except OSError:
            pass

    def put(self, key: str, value) -> bool:
        """Store atomically (temporary file + rename); False when it could not be stored."""
        try:
            payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            logger.warning("tb-roofline: cannot cache a %s: %s", type(value).__name__, exc)
            return False
        size = len(MAGIC) + HEADER.size + len(payload)
        if size > self.max_bytes:
            return False
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".part", dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC)
                f.write(HEADER.pack(hashlib.sha256(payload).digest(), len(payload)))
                f.write(payload)
            os.replace(tmp, self._path(key))
            tmp = None
        except OSError as exc:
            logger.warning("tb-roofline: cannot write to the cache %s: %s", self.directory, exc)
            return False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        self.evict()
        return True

    def entries(self) -> list[tuple[float, int, str]]:
        """(last use, size, path) of every entry, oldest first."""
        out = []
        try:
            with os.scandir(self.directory) as it:
                for entry in it:
                    if not entry.name.endswith(SUFFIX):
                        continue
                    try:
                        st = entry.stat()
                    except OSError:  # evicted by another process meanwhile
                        continue
                    out.append((st.st_mtime, st.st_size, entry.path))
        except OSError:
            return []
        out.sort()
        return out

    def evict(self):
        """Drop least recently used entries until the total is under the cap (and temporary
        files that crashed writers left behind)."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= self.max_bytes:
                break
            try:
                os.unlink(path)  # a reader that has it open keeps reading it (POSIX)
            except OSError:
                pass
            total -= size
        now = time.time()
        try:
            with os.scandir(self.directory) as it:
                for entry in it:
                    if entry.name.startswith(TMP_PREFIX):
                        try:
                            if now - entry.stat().st_mtime > STALE_TMP_S:
                                os.unlink(entry.path)
                        except OSError:
                            pass
        except OSError:
            pass
