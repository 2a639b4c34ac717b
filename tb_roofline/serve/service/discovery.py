"""Find profiling sessions in a logdir, named the way XProf names them.

XLA profilers write `<logdir>/<tb_run...>/plugins/profile/<session>/<host>.xplane.pb`. XProf calls
the run `<session>` when the profile sits directly under the logdir, else `<tb_run>/<session>`;
hosts are the file names without the suffix. PyTorch traces (`*.pt.trace.json[.gz]`) are found
too so that later readers can serve them; each directory holding them is one run.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import posixpath
import threading
import time

from tb_roofline import settings, storage

XPLANE_SUFFIX = ".xplane.pb"
KINETO_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
PROFILE_DIR = "plugins/profile"
DEVICE_FILE_NAME = "roofline_device.json"  # devices.device_file.FILE_NAME
ALL_HOSTS = "*"
CAPTURE_DIRS = ("capture", "capture_traces")  # readers/kineto/capture.py CAPTURE_DIRS


@dataclasses.dataclass(frozen=True)
class HostFile:
    host: str
    path: str  # a local path, or a URL under a remote logdir
    stat: storage.RemoteStat | None = None  # remote: identity from the last listing


@dataclasses.dataclass(frozen=True)
class Run:
    run: str  # the name users see and pass back as `run=`
    tb_run: str
    session: str
    format: str  # "xplane" or "kineto"
    files: tuple[HostFile, ...]
    mtime: float

    @property
    def hosts(self) -> list[str]:
        return [f.host for f in self.files]

    def to_json(self) -> dict:
        return {
            "run": self.run,
            "tb_run": self.tb_run,
            "session": self.session,
            "format": self.format,
            "hosts": self.hosts,
            "mtime": self.mtime,
        }


def _kineto_host(name: str) -> str:
    for suffix in KINETO_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _runs_in_dir(rel: str, filenames, make_file) -> list[Run]:
    """The runs one directory holds. `rel` is its path under the logdir with `/` ("." for the
    logdir itself); `make_file(host, name)` builds a HostFile for a file in it."""
    runs = []
    parent, session = posixpath.split(rel)
    xplanes = sorted(f for f in filenames if f.endswith(XPLANE_SUFFIX))
    if xplanes and (parent == PROFILE_DIR or parent.endswith("/" + PROFILE_DIR)):
        tb_run = parent[: -len(PROFILE_DIR)].rstrip("/")
        files = tuple(make_file(f[: -len(XPLANE_SUFFIX)], f) for f in xplanes)
        name = f"{tb_run}/{session}" if tb_run else session
        runs.append(Run(name, tb_run, session, "xplane", files, _newest_mtime(files)))
    traces = sorted(f for f in filenames if f.endswith(KINETO_SUFFIXES))
    if traces:
        name = "." if rel == "." else rel
        files = tuple(make_file(_kineto_host(f), f) for f in traces)
        runs.append(Run(name, name, "", "kineto", files, _newest_mtime(files)))
    return runs


def scan_logdir(logdir: str, deadline: float | None = None) -> list[Run]:
    """Walk `logdir` once; newest session first. Stops early past `deadline` (see
    `scan_logdir_bounded` to know whether it did)."""
    return scan_logdir_bounded(logdir, deadline)[0]


def scan_logdir_bounded(logdir: str, deadline: float | None = None) -> tuple[list[Run], bool]:
    """(runs, whether the walk finished before `deadline`)."""
    if storage.is_remote(logdir):
        return scan_remote(logdir).runs, True
    runs: list[Run] = []
    complete = True
    logdir = os.path.abspath(storage.local_path(logdir))
    seen: set = set()  # (device, inode) of every directory walked: a symlink loop stops there
    for dirpath, dirnames, filenames in os.walk(logdir, followlinks=True):
        if deadline is not None and time.monotonic() > deadline:
            complete = False
            break
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirnames[:] = []  # reached again through a symlink: already listed
            continue
        seen.add((st.st_dev, st.st_ino))
        dirnames.sort()
        rel = os.path.relpath(dirpath, logdir).replace(os.sep, "/")
        runs.extend(
            _runs_in_dir(rel, filenames, lambda host, f: HostFile(host, os.path.join(dirpath, f)))
        )
    return _newest_first(runs), complete


@dataclasses.dataclass
class RemoteScan:
    runs: list[Run]
    device_files: dict  # URL of each roofline_device.json under the logdir -> RemoteStat


def scan_remote(logdir: str) -> RemoteScan:
    """One recursive listing of a remote logdir: its runs, and its device files (so that
    looking one up costs no request)."""
    root = logdir.rstrip("/")
    by_dir: dict[str, dict] = {}
    for rel, st in storage.list_files(root).items():
        folder, name = posixpath.split(rel)
        by_dir.setdefault(folder or ".", {})[name] = st
    runs, device_files = [], {}
    for rel in sorted(by_dir):
        entries = by_dir[rel]
        base = root if rel == "." else f"{root}/{rel}"
        runs.extend(
            _runs_in_dir(
                rel, list(entries), lambda host, f: HostFile(host, f"{base}/{f}", entries[f])
            )
        )
        if DEVICE_FILE_NAME in entries:
            device_files[f"{base}/{DEVICE_FILE_NAME}"] = entries[DEVICE_FILE_NAME]
    return RemoteScan(_newest_first(runs), device_files)


def _newest_first(runs: list[Run]) -> list[Run]:
    # Session names are timestamps (YYYY_MM_DD_HH_MM_SS): sort on them, then on mtime. A
    # serving engine's graph-capture traces (a capture/ folder beside its execution trace) come
    # after every run: they feed the execution trace's run and are not the workload's time.
    return sorted(runs, key=lambda r: (not _is_capture(r), r.session, r.mtime, r.run), reverse=True)


def _is_capture(run: Run) -> bool:
    return run.format == "kineto" and posixpath.basename(run.run) in CAPTURE_DIRS


def _newest_mtime(files) -> float:
    newest = 0.0
    for f in files:
        if f.stat is not None:
            newest = max(newest, f.stat.st_mtime)
            continue
        try:
            newest = max(newest, os.stat(f.path).st_mtime)
        except OSError:
            pass
    return newest


REMOTE_RESCAN_ENV = settings.REMOTE_RESCAN_S.name
REMOTE_RESCAN_S = settings.REMOTE_RESCAN_S.default


class RunIndex:
    """The logdir's runs, rescanned in the background so callers never wait on the disk.

    `runs()` answers from the last finished scan and starts a new one when it is older than
    `max_age_s`; `refresh()` scans in the caller's thread (bounded by `budget_s`).

    A remote logdir (a URL) is only ever listed in the background, at most once per
    `TB_ROOFLINE_REMOTE_RESCAN_S` (15 s) however many requests come: `refresh()` then starts a
    listing when the last one is that old and waits for it only while there is no answer yet.
    The listing also gives each file's identity (HostFile.stat) and the device files, so
    requests between listings send nothing to the store.
    """

    def __init__(self, logdir: str, max_age_s: float | None = None):
        self.logdir = logdir
        self.remote = storage.is_remote(logdir)
        if max_age_s is None:
            max_age_s = settings.number(settings.REMOTE_RESCAN_S) if self.remote else 5.0
        self.max_age_s = max_age_s
        self._runs: list[Run] = []
        self.device_files: dict = {}  # remote: URL -> RemoteStat, from the last listing
        self.error: str | None = None  # why the last scan failed (remote storage)
        self._scanned_at = 0.0
        self._ever_scanned = False
        self._lock = threading.Lock()
        self._scanning = False
        self._scan_done = threading.Event()

    @property
    def scanning(self) -> bool:
        return self._scanning

    @property
    def listed(self) -> bool:
        """Whether a listing has finished (failed or not) since this index began."""
        return self._ever_scanned

    def has_any(self) -> bool:
        """Instant: never touches the disk."""
        self._maybe_start_background()
        return bool(self._runs)

    def runs(self) -> list[Run]:
        self._maybe_start_background()
        return list(self._runs)

    def refresh(self, budget_s: float = 2.0) -> list[Run]:
        """Scan now (for `/runs`), bounded so a slow disk cannot hang a request. A scan cut
        short keeps the runs it did not reach and finishes in the background."""
        if self.remote:
            self._maybe_start_background()
            if not self._ever_scanned:
                self._scan_done.wait(budget_s)
            return list(self._runs)
        result, complete = scan_logdir_bounded(self.logdir, deadline=time.monotonic() + budget_s)
        with self._lock:
            if complete:
                self._runs, self._scanned_at = result, time.monotonic()
                self._ever_scanned = True
            else:
                seen = {r.run for r in result}
                self._runs = _newest_first(result + [r for r in self._runs if r.run not in seen])
                self._scanned_at = 0.0  # stale: the next call starts a full background scan
        if not complete:
            self._maybe_start_background()
        return list(self._runs)

    def find(self, name: str) -> Run | None:
        for run in self._runs:
            if run.run == name:
                return run
        # Maybe it appeared since the last scan.
        for run in self.refresh():
            if run.run == name:
                return run
        return None

    def _maybe_start_background(self):
        with self._lock:
            if (
                self._scanning
                or (self._ever_scanned or not self.remote)
                and time.monotonic() - self._scanned_at < self.max_age_s
            ):
                return
            self._scanning = True
            self._scan_done.clear()
        try:
            threading.Thread(
                target=self._background_scan, name="tb-roofline-scan", daemon=True
            ).start()
        except Exception:  # no thread (out of memory): the next call tries again
            with self._lock:
                self._scanning = False
            self._scan_done.set()

    def _background_scan(self):
        started = time.monotonic()
        try:
            if self.remote:
                scan = scan_remote(self.logdir)
                result, device_files = scan.runs, scan.device_files
            else:
                result, device_files = scan_logdir(self.logdir), {}
            with self._lock:
                self._runs, self.device_files, self.error = result, device_files, None
        except Exception as exc:  # unreachable storage, missing package: keep what we had
            logging.getLogger(__name__).warning("tb-roofline: cannot list %s: %s", self.logdir, exc)
            with self._lock:
                self.error = str(exc)
        finally:
            with self._lock:
                # A failed listing waits for the next interval too: no retry storm.
                self._scanned_at = started if self.remote else time.monotonic()
                self._ever_scanned = True
                self._scanning = False
            self._scan_done.set()
