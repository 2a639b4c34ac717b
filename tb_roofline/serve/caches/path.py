"""The disk cache's directory: walked from `/` one component at a time, never through a link
someone else could have made, and made (mode 0700, whatever the umask) only under parents
that passed the same checks.

The rules, for every component from `/` down (`check_directory_chain`, `prepare`):
- it is opened relative to its parent with O_NOFOLLOW: a symlink is refused, not followed;
- it is owned by this user or root, and not writable by group or others unless sticky (like
  /tmp: others cannot rename or remove what is ours there); the cache directory itself is
  owned by this user and writable by nobody else;
- a missing component is created only after its parent passed these checks, with mode 0700
  set explicitly (mkdir's mode is masked by the umask: under umask 002 `os.makedirs` makes
  0775 parents, which the check then refuses).

One exception, the user's own home layout: symlinks among the components of the home
directory itself (`/home -> /usr/home`, a home moved to another disk and linked back) are
followed when the link is owned by this user or root and sits in a directory that passed the
checks (so only this user or root could have made it). Nothing below the home directory, and
nothing in a path outside it (TB_ROOFLINE_CACHE_DIR=/tmp/..., XDG_CACHE_HOME elsewhere), may
be a symlink (where the system's own folders are links, as macOS's /tmp -> /private/tmp,
give the real path). The path is resolved by this walk, never by `os.path.realpath`, which
would follow a link planted anywhere in it.
"""

from __future__ import annotations

import errno
import os
import stat

_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
MAX_HOME_LINKS = 40  # as the kernel's own limit on links in one path
DIR_MODE = 0o700


class UnsafeDirectory(OSError):
    """The cache directory, or one above it, could let another user plant or swap entries."""


def _check(st, where: str, last: bool, uid: int, root_may_own: bool = False) -> None:
    if st.st_uid not in (uid, 0) or (last and st.st_uid != uid and not root_may_own):
        raise UnsafeDirectory(f"{where} is owned by another user (uid {st.st_uid})")
    if st.st_mode & 0o022 and (last or not st.st_mode & stat.S_ISVTX):
        raise UnsafeDirectory(
            f"{where} is writable by group or others and not sticky "
            f"(mode {stat.S_IMODE(st.st_mode):o})"
        )


def _open_child(fd: int, name: str, where: str, create: bool, uid: int) -> int:
    """`name` under the checked directory `fd`, made (0700) when missing and `create`."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeDirectory(f"{where} is a symlink or not a directory") from None
        raise
    try:
        os.mkdir(name, DIR_MODE, dir_fd=fd)
    except FileExistsError:  # made meanwhile by another process: checked as any other
        return _open_child(fd, name, where, False, uid)
    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    try:
        if os.fstat(child).st_uid == uid:
            os.fchmod(child, DIR_MODE)  # the umask took bits from mkdir's mode, or added none
    except BaseException:
        os.close(child)
        raise
    return child


def _walk(directory: str, create: bool, root_may_own: bool = False) -> int:
    uid = os.getuid()
    parts = [p for p in directory.split("/") if p]
    fd = os.open("/", _DIR_FLAGS)
    where = "/"
    try:
        for i in range(len(parts) + 1):
            last = i == len(parts)
            _check(os.fstat(fd), where, last, uid, root_may_own)
            if last:
                return fd
            where = os.path.join(where, parts[i])
            nfd = _open_child(fd, parts[i], where, create, uid)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_directory_chain(directory: str) -> int:
    """A descriptor of `directory` (absolute, without symlinks) opened component by component
    from `/`, each checked; raises UnsafeDirectory or OSError (a component missing)."""
    return _walk(directory, create=False)


def resolve(directory: str, home: str | None) -> str:
    """`directory` (absolute) with the links of the user's home layout followed (checked);
    every other component is kept as written (a link there is refused by the walk)."""
    directory = os.path.normpath(directory)
    if not home or not os.path.isabs(home):
        return directory
    home = os.path.normpath(home)
    if directory != home and not directory.startswith(home.rstrip("/") + "/"):
        return directory
    rest = directory[len(home) :].lstrip("/")
    real_home = _resolve_home(home)
    return os.path.join(real_home, rest) if rest else real_home


def _resolve_home(home: str) -> str:
    """The home directory's path without links, following only links this user or root made
    in directories that pass the checks; UnsafeDirectory for any other link."""
    uid = os.getuid()
    pending = [p for p in home.split("/") if p]
    done = "/"
    links = 0
    while pending:
        name = pending.pop(0)
        if name in (".", ""):
            continue
        if name == "..":
            done = os.path.dirname(done)
            continue
        where = os.path.join(done, name)
        try:
            st = os.lstat(where)
        except FileNotFoundError:  # the rest is made later, by the checked walk
            return os.path.join(where, *pending)
        if not stat.S_ISLNK(st.st_mode):
            done = where
            continue
        links += 1
        if links > MAX_HOME_LINKS or st.st_uid not in (uid, 0):
            raise UnsafeDirectory(f"{where} is a symlink this user or root did not make")
        # The link's folder, checked from `/`: owned by this user or root, writable by no
        # one else (so only they could have made the link).
        os.close(_walk(done, create=False, root_may_own=True))
        target = os.readlink(where)
        if target.startswith("/"):
            done = "/"
        pending = [p for p in target.split("/") if p] + pending
    return done


def prepare(directory: str, home: str | None) -> str:
    """The cache directory to use (its link-free absolute path), made with its missing parents
    (0700 each) after every existing component passed the checks; raises UnsafeDirectory or
    OSError."""
    path = resolve(directory, home)
    os.close(_walk(path, create=True))
    return path


def open_subdir(fd: int, name: str) -> int:
    """The cache's own subfolder `name` under the checked directory `fd` (made 0700 when
    missing): owned by this user, writable by nobody else, never a link."""
    uid = os.getuid()
    child = _open_child(fd, name, name, True, uid)
    try:
        _check(os.fstat(child), name, True, uid)
    except BaseException:
        os.close(child)
        raise
    return child
