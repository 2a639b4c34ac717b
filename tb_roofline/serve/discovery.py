"""Find profiling sessions in a logdir, named the way XProf names them.

XLA profilers write `<logdir>/<tb_run...>/plugins/profile/<session>/<host>.xplane.pb`. XProf calls
the run `<session>` when the profile sits directly under the logdir, else `<tb_run>/<session>`;
hosts are the file names without the suffix. PyTorch traces (`*.pt.trace.json[.gz]`) are found
too so that later readers can serve them; each directory holding them is one run.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time

XPLANE_SUFFIX = ".xplane.pb"
KINETO_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
PROFILE_DIR = os.path.join("plugins", "profile")
ALL_HOSTS = "*"


@dataclasses.dataclass(frozen=True)
class HostFile:
    host: str
    path: str


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
        return {"run": self.run, "tb_run": self.tb_run, "session": self.session,
                "format": self.format, "hosts": self.hosts, "mtime": self.mtime}


def _kineto_host(name: str) -> str:
    for suffix in KINETO_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def scan_logdir(logdir: str, deadline: float | None = None) -> list[Run]:
    """Walk `logdir` once; newest session first. Stops early past `deadline` (see
    `scan_logdir_bounded` to know whether it did)."""
    return scan_logdir_bounded(logdir, deadline)[0]


def scan_logdir_bounded(logdir: str, deadline: float | None = None) -> tuple[list[Run], bool]:
    """(runs, whether the walk finished before `deadline`)."""
    runs: list[Run] = []
    complete = True
    logdir = os.path.abspath(logdir)
    for dirpath, dirnames, filenames in os.walk(logdir, followlinks=False):
        if deadline is not None and time.monotonic() > deadline:
            complete = False
            break
        dirnames.sort()
        rel = os.path.relpath(dirpath, logdir)
        parent, session = os.path.split(rel)
        xplanes = sorted(f for f in filenames if f.endswith(XPLANE_SUFFIX))
        if xplanes and (parent == PROFILE_DIR or parent.endswith(os.sep + PROFILE_DIR)):
            tb_run = parent[: -len(PROFILE_DIR)].rstrip(os.sep).replace(os.sep, "/")
            files = tuple(HostFile(f[: -len(XPLANE_SUFFIX)], os.path.join(dirpath, f)) for f in xplanes)
            name = f"{tb_run}/{session}" if tb_run else session
            runs.append(Run(name, tb_run, session, "xplane", files, _newest_mtime(files)))
        traces = sorted(f for f in filenames if f.endswith(KINETO_SUFFIXES))
        if traces:
            name = "." if rel == "." else rel.replace(os.sep, "/")
            files = tuple(HostFile(_kineto_host(f), os.path.join(dirpath, f)) for f in traces)
            runs.append(Run(name, name, "", "kineto", files, _newest_mtime(files)))
    return _newest_first(runs), complete


def _newest_first(runs: list[Run]) -> list[Run]:
    # Session names are timestamps (YYYY_MM_DD_HH_MM_SS): sort on them, then on mtime.
    return sorted(runs, key=lambda r: (r.session, r.mtime, r.run), reverse=True)


def _newest_mtime(files) -> float:
    newest = 0.0
    for f in files:
        try:
            newest = max(newest, os.stat(f.path).st_mtime)
        except OSError:
            pass
    return newest


class RunIndex:
    """The logdir's runs, rescanned in the background so callers never wait on the disk.

    `runs()` answers from the last finished scan and starts a new one when it is older than
    `max_age_s`; `refresh()` scans in the caller's thread (bounded by `budget_s`).
    """

    def __init__(self, logdir: str, max_age_s: float = 5.0):
        self.logdir = logdir
        self.max_age_s = max_age_s
        self._runs: list[Run] = []
        self._scanned_at = 0.0
        self._lock = threading.Lock()
        self._scanning = False

    @property
    def scanning(self) -> bool:
        return self._scanning

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
        result, complete = scan_logdir_bounded(self.logdir, deadline=time.monotonic() + budget_s)
        with self._lock:
            if complete:
                self._runs, self._scanned_at = result, time.monotonic()
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
            if self._scanning or time.monotonic() - self._scanned_at < self.max_age_s:
                return
            self._scanning = True
        try:
            threading.Thread(target=self._background_scan, name="tb-roofline-scan",
                             daemon=True).start()
        except Exception:  # no thread (out of memory): the next call tries again
            self._scanning = False

    def _background_scan(self):
        try:
            result = scan_logdir(self.logdir)
            with self._lock:
                self._runs, self._scanned_at = result, time.monotonic()
        finally:
            self._scanning = False
