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
  devices, HLO cost model; for answers also the roofline model and the answer code): any
  change there is a miss.
- Entries are data only (`serve/caches/codec.py`: JSON and a numpy .npz read with
  allow_pickle=False): loading one runs no code from it. Each carries an HMAC-SHA256 under a
  per-user key (`.key`, 32 random bytes, 0600, in the cache directory) over its name and
  content, so an entry someone else wrote, or one renamed, is a miss.
- The directory is checked at every open, from `/` down (serve/caches/path.py): no component a
  symlink (each opened relative to its parent with O_NOFOLLOW; the one exception, links of the
  user's own home layout, is documented there), each owned by this user or root, none
  writable by group or others unless sticky (like /tmp); the cache directory itself owned by
  this user and writable by nobody else. The configured path is walked before anything
  resolves it, and missing directories are made (0700 whatever the umask) only under parents
  that passed. Entries are opened relative to the checked directory's descriptor (O_NOFOLLOW),
  so a directory renamed or swapped after the check is never used. A failed check is a miss
  (logged once), never an error.
- Entries live in the cache's own subfolder (`entries/`, 0700) and start with its header
  (MAGIC); eviction counts and removes only regular files there owned by this user that start
  with the header: a file the cache did not write is never evicted.
- Entries are written to a temporary file and renamed, so two TensorBoard servers can share
  the directory; an entry that is truncated, corrupt, forged or unreadable is ignored and
  replaced, never an error.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import logging
import os
import stat
import sys
import time

import tb_roofline
from tb_roofline import settings
from tb_roofline.serve.caches import path as cache_path
from tb_roofline.serve.caches.path import UnsafeDirectory, check_directory_chain, open_subdir

DIR_ENV = settings.CACHE_DIR
MAX_MB_ENV = settings.CACHE_MAX_MB.name
DEFAULT_MAX_MB = settings.CACHE_MAX_MB.default
OFF_VALUES = ("off", "none", "0", "false", "no", "disabled")
MAGIC = b"TBRFCACHE2\n"
MAC_BYTES = 32
SUFFIX = ".entry"
KEY_FILE = ".key"
KEY_BYTES = 32
TMP_PREFIX = ".tmp-"
STALE_TMP_S = 3600.0  # a temporary file this old was left by a crashed writer
# Code whose output the cache holds (relative to the package): a change invalidates entries.
CODE_PATHS = (
    "readers",
    "table",
    "devices",
    "costs",
    "protos",
    "diagnostics.py",
    "serve/caches/codec.py",
)
# Encoded answers also depend on the roofline model and on how the service builds answers.
ANSWER_CODE_PATHS = CODE_PATHS + (
    "model",
    "serve/service/core.py",
    "serve/service/analyses.py",
    "serve/service/answers.py",
)
_FILE_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
logger = logging.getLogger(__name__)


ENTRIES_DIR = "entries"


@functools.lru_cache(maxsize=4)
def code_digest(paths: tuple = CODE_PATHS) -> str:
    """SHA-256 over the source of `paths` (once per process, ~1 ms)."""
    root = os.path.dirname(os.path.abspath(tb_roofline.__file__))
    digest = hashlib.sha256()
    for rel in paths:
        path = os.path.join(root, rel)
        files = (
            [path]
            if os.path.isfile(path)
            else sorted(
                os.path.join(d, f)
                for d, _, names in os.walk(path)
                for f in names
                if f.endswith((".py", ".proto"))
            )
        )
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
    """Whether the link-free cache path `path` lies in the logdir `root` (resolved: the logdir
    is the user's to name, links included)."""
    root = os.path.realpath(root)
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


class DiskCache:
    def __init__(self, directory: str, max_bytes: int):
        # Never realpath: a link in the path is refused by the walk, not followed.
        self.directory = os.path.abspath(directory)
        self.max_bytes = max_bytes
        self._warned: set = set()

    @classmethod
    def from_env(cls, logdir: str | None = None, environ=None) -> DiskCache | None:
        """The cache the environment asks for, or None (off, or not safe to use)."""
        environ = os.environ if environ is None else environ
        value = environ.get(DIR_ENV, "").strip()
        if value.lower() in OFF_VALUES:
            return None
        directory = os.path.abspath(os.path.expanduser(value or default_dir(environ)))
        max_bytes = settings.mb(settings.CACHE_MAX_MB, environ)
        if max_bytes == 0 or not hasattr(os, "getuid"):
            return None
        try:
            # The home layout's links followed (checked), nothing else resolved or made yet.
            directory = cache_path.resolve(directory, os.path.expanduser("~"))
            if logdir and "://" not in logdir and _inside(directory, logdir):
                logger.warning(
                    "tb-roofline: cache directory %s is inside the logdir; cache "
                    "off (nothing is written into a logdir)",
                    directory,
                )
                return None
            directory = cache_path.prepare(directory, None)
        except OSError as exc:
            logger.warning(
                "tb-roofline: cannot use cache directory %s (%s); cache off",
                directory,
                exc.strerror or exc,
            )
            return None
        return cls(directory, max_bytes)

    # --- keys and entries -------------------------------------------------------------------
    @staticmethod
    def key(*identity) -> str:
        """Entry name for a file identity (path, size, version, format, host, ...)."""
        import numpy as np  # the entries hold its arrays: a key asks for them (imported then)

        parts = (
            identity,
            tb_roofline.__version__,
            code_digest(),
            sys.version_info[:2],
            np.__version__,
        )
        return hashlib.sha256(repr(parts).encode("utf-8", "backslashreplace")).hexdigest()

    def _warn(self, exc: OSError) -> None:
        reason = str(exc) if isinstance(exc, UnsafeDirectory) else (exc.strerror or str(exc))
        if reason not in self._warned:
            self._warned.add(reason)
            logger.warning("tb-roofline: cache directory %s not used: %s", self.directory, reason)

    @contextlib.contextmanager
    def _entry_dir(self, keyed: bool):
        """(the checked entries/ subfolder's descriptor, this user's HMAC key when `keyed`),
        or (None, None) when the directory or the key is not safe to use (a miss, logged
        once)."""
        try:
            top = check_directory_chain(self.directory)
        except OSError as exc:
            self._warn(exc)
            yield None, None
            return
        try:
            secret = self._key(top) if keyed else None
            sub = None
            if secret is not None or not keyed:
                try:
                    sub = open_subdir(top, ENTRIES_DIR)
                except OSError as exc:
                    self._warn(exc)
            try:
                yield (sub, secret) if sub is not None else (None, None)
            finally:
                if sub is not None:
                    os.close(sub)
        finally:
            os.close(top)

    def _keyed(self):
        return self._entry_dir(keyed=True)

    def _key(self, dir_fd: int) -> bytes | None:
        """This user's HMAC key (made on first use), or None when it is not safe."""
        try:
            fd = os.open(KEY_FILE, os.O_RDONLY | _FILE_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return self._new_key(dir_fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_uid != os.getuid()
                or st.st_mode & 0o077
                or st.st_size != KEY_BYTES
            ):
                return None
            key = os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)
        return key if len(key) == KEY_BYTES else None

    def _new_key(self, dir_fd: int) -> bytes | None:
        tmp = f"{TMP_PREFIX}key-{os.getpid()}-{os.urandom(6).hex()}"
        try:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS, 0o600, dir_fd=dir_fd
            )
            try:
                os.write(fd, os.urandom(KEY_BYTES))
                os.fchmod(fd, 0o600)
            finally:
                os.close(fd)
            try:
                os.link(tmp, KEY_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileExistsError:  # another process made it first: use theirs
                pass
            finally:
                os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            return None
        return self._key(dir_fd) if self._key_exists(dir_fd) else None

    @staticmethod
    def _key_exists(dir_fd: int) -> bool:
        try:
            os.stat(KEY_FILE, dir_fd=dir_fd, follow_symlinks=False)
            return True
        except OSError:
            return False

    @staticmethod
    def _mac(key: bytes, name: str, body) -> bytes:
        mac = hmac.new(key, name.encode() + b"\0", hashlib.sha256)
        mac.update(body)
        return mac.digest()

    def get(self, key: str):
        """The cached object, or None (missing, corrupt, forged, unsafe: all just a miss)."""
        name = key + SUFFIX
        with self._keyed() as (dir_fd, secret):
            if dir_fd is None:
                return None
            try:
                fd = os.open(name, os.O_RDONLY | _FILE_FLAGS, dir_fd=dir_fd)
            except OSError:
                return None
            try:
                st = os.fstat(fd)
                if (
                    not stat.S_ISREG(st.st_mode)
                    or st.st_uid != os.getuid()
                    or st.st_size > self.max_bytes
                ):
                    return None
                with os.fdopen(os.dup(fd), "rb") as f:
                    data = f.read()
                value = self._decode(data, secret, name)
                if value is None:
                    self._discard(dir_fd, name, st.st_ino)
                    return None
                try:
                    os.utime(fd)  # last use, for the LRU eviction
                except OSError:
                    pass
                return value
            except OSError:
                return None
            finally:
                os.close(fd)

    @classmethod
    def _decode(cls, data: bytes, secret: bytes, name: str):
        start = len(MAGIC) + MAC_BYTES
        if len(data) < start or not data.startswith(MAGIC):
            return None
        body = memoryview(data)[start:]
        from tb_roofline.serve.caches import codec as cache_codec

        if not hmac.compare_digest(data[len(MAGIC) : start], cls._mac(secret, name, body)):
            return None
        try:
            return cache_codec.decode(bytes(body))
        except cache_codec.CodecError:  # written by other code (a field renamed, a class moved)
            return None

    @staticmethod
    def _discard(dir_fd: int, name: str, ino: int):
        """Remove a bad entry, unless another process has replaced it meanwhile."""
        try:
            if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_ino == ino:
                os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass

    def put(self, key: str, value) -> bool:
        """Store atomically (temporary file + rename); False when it could not be stored."""
        from tb_roofline.serve.caches import codec as cache_codec

        try:
            body = cache_codec.encode(value)
        except (cache_codec.CodecError, ValueError, TypeError) as exc:
            logger.warning("tb-roofline: cannot cache a %s: %s", type(value).__name__, exc)
            return False
        size = len(MAGIC) + MAC_BYTES + len(body)
        if size > self.max_bytes:
            return False
        name = key + SUFFIX
        with self._keyed() as (dir_fd, secret):
            if dir_fd is None:
                return False
            tmp = f"{TMP_PREFIX}{os.getpid()}-{os.urandom(8).hex()}.part"
            placed = False
            try:
                fd = os.open(
                    tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS, 0o600, dir_fd=dir_fd
                )
                with os.fdopen(fd, "wb") as f:
                    f.write(MAGIC)
                    f.write(self._mac(secret, name, body))
                    f.write(body)
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                placed = True
            except OSError as exc:
                logger.warning(
                    "tb-roofline: cannot write to the cache %s: %s",
                    self.directory,
                    exc.strerror or exc,
                )
                return False
            finally:
                if not placed:
                    try:
                        os.unlink(tmp, dir_fd=dir_fd)
                    except OSError:
                        pass
            self._evict(dir_fd)
        return True

    @staticmethod
    def _entries(dir_fd: int) -> list[tuple[float, int, str]]:
        """(last use, size, name) of every entry this user's cache may have written (a
        regular file of its own with the entry suffix), oldest first."""
        out = []
        uid = os.getuid()
        try:
            with os.scandir(dir_fd) as it:
                for entry in it:
                    if not entry.name.endswith(SUFFIX):
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:  # evicted by another process meanwhile
                        continue
                    if stat.S_ISREG(st.st_mode) and st.st_uid == uid:
                        out.append((st.st_mtime, st.st_size, entry.name))
        except OSError:
            return []
        out.sort()
        return out

    def entries(self) -> list[tuple[float, int, str]]:
        """(last use, size, path) of every entry, oldest first."""
        with self._entry_dir(keyed=False) as (dir_fd, _):
            if dir_fd is None:
                return []
            folder = os.path.join(self.directory, ENTRIES_DIR)
            return [(t, n, os.path.join(folder, name)) for t, n, name in self._entries(dir_fd)]

    def evict(self):
        with self._entry_dir(keyed=False) as (dir_fd, _):
            if dir_fd is not None:
                self._evict(dir_fd)

    @staticmethod
    def _remove_own(dir_fd: int, name: str, prefix: bytes = MAGIC) -> bool:
        """Remove `name` if it is a regular file of this user's that starts with `prefix`
        (the cache's header): True when it was one, removed or not."""
        try:
            fd = os.open(name, os.O_RDONLY | _FILE_FLAGS, dir_fd=dir_fd)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_uid != os.getuid()
                or os.pread(fd, len(prefix), 0) != prefix
            ):
                return False
        except OSError:
            return False
        finally:
            os.close(fd)
        DiskCache._discard(dir_fd, name, st.st_ino)  # unless replaced meanwhile
        return True

    def _evict(self, dir_fd: int):
        """Drop least recently used entries until the total is under the cap (and temporary
        files that crashed writers left behind). A file without the cache's header is
        neither removed nor counted."""
        entries = self._entries(dir_fd)
        total = sum(size for _, size, _ in entries)
        for _, size, name in entries:
            if total <= self.max_bytes:
                break
            self._remove_own(dir_fd, name)  # a reader that has it open keeps reading it
            total -= size
        now = time.time()
        uid = os.getuid()
        try:
            with os.scandir(dir_fd) as it:
                for entry in it:
                    if entry.name.startswith(TMP_PREFIX) and entry.name.endswith(".part"):
                        try:
                            st = entry.stat(follow_symlinks=False)
                            if (
                                stat.S_ISREG(st.st_mode)
                                and st.st_uid == uid
                                and now - st.st_mtime > STALE_TMP_S
                            ):
                                os.unlink(entry.name, dir_fd=dir_fd)
                        except OSError:
                            pass
        except OSError:
            pass
