"""Plain functions behind the HTTP API and the CLI: resolve runs, read, analyse, cache, filter.

Caches are keyed by each file's (path, size, mtime), so a rewritten profile is read again and an
unchanged one costs nothing. Nothing is ever written into the logdir.
"""
from __future__ import annotations

import collections
import csv
import dataclasses
import io
import logging
import json
import os
import threading

import numpy as np

from tb_roofline import errors
from tb_roofline.devices import device_file
from tb_roofline.model import roofline
from tb_roofline.serve.discovery import ALL_HOSTS, Run, RunIndex
from tb_roofline.devices.gpu_peaks import apply_ceilings
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.model.op_table import ProfileData

DEFAULT_MAX_FILE_MB = 4096


HOST_CACHE_SIZE = 32
ANALYSIS_CACHE_SIZE = 16


class _LRU:
    """A small thread-safe least-recently-used map."""

    def __init__(self, size: int):
        self.size = size
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key, value):
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self):
        return len(self._items)


def _env_file_limit_mb() -> float:
    """TB_ROOFLINE_MAX_FILE_MB, or the default when unset or not a positive number (a typo in
    an environment variable must not stop TensorBoard from loading the plugin)."""
    value = os.environ.get("TB_ROOFLINE_MAX_FILE_MB", "")
    try:
        limit = float(value)
    except ValueError:
        if value:
            logging.getLogger(__name__).warning(
                "TB_ROOFLINE_MAX_FILE_MB=%r is not a number; using %d", value, DEFAULT_MAX_FILE_MB)
        return DEFAULT_MAX_FILE_MB
    return limit if limit > 0 else DEFAULT_MAX_FILE_MB


def _file_signature(path: str):
    try:
        st = os.stat(path)
    except OSError as exc:
        raise errors.NotFoundError(f"profile file vanished: {os.path.basename(path)} ({exc.strerror})")
    return (path, st.st_size, st.st_mtime_ns)


def _check_name(kind: str, value: str):
    """Reject path tricks early with a clear message (lookups below never join user paths)."""
    if value is None:
        raise errors.InvalidArgumentError(f"missing parameter '{kind}'")
    parts = value.replace("\\", "/").split("/")
    if value.startswith(("/", "\\")) or ".." in parts or "\x00" in value or (
            len(value) > 1 and value[1] == ":"):
        raise errors.InvalidArgumentError(
            f"{kind} {value!r} is not a valid name: absolute paths and '..' are not allowed")


class RooflineService:
    def __init__(self, logdir: str, max_file_mb: float | None = None, progress=None,
                 device_file: str | None = None):
        self.logdir = logdir
        self.device_file = device_file  # overrides the roofline_device.json lookup (CLI flag)
        self.progress = progress  # callable(host, done, total) for long reads (the CLI's)
        self.index = RunIndex(logdir) if logdir else None
        if self.index:
            self.index.has_any()  # start the first scan now, so is_active() knows by page load
        self.max_file_bytes = int((max_file_mb or _env_file_limit_mb()) * (1 << 20))
        # Striped locks: one conversion per key at a time, with a bounded number of locks.
        # Analyses take a host lock while holding their own, never the reverse: two separate
        # sets keep that order deadlock-free.
        self._stripes = {kind: [threading.Lock() for _ in range(32)] for kind in ("analysis", "host")}
        # Small LRU caches (a long-running TensorBoard must not grow without bound):
        self._host_cache = _LRU(HOST_CACHE_SIZE)  # path -> (signature, ProfileData)
        self._analysis_cache = _LRU(ANALYSIS_CACHE_SIZE)  # (run, hosts) -> (signatures, Analysis)

    # --- discovery ------------------------------------------------------------------------
    def has_profiles(self) -> bool:
        return bool(self.index) and self.index.has_any()

    def list_runs(self) -> dict:
        runs = self.index.refresh() if self.index else []
        return {"runs": [r.to_json() for r in runs], "logdir": self.logdir,
                "scanning": bool(self.index and self.index.scanning)}

    def _run(self, name: str) -> Run:
        _check_name("run", name)
        if not self.index:
            raise errors.NotFoundError("no logdir given")
        run = self.index.find(name)
        if run is None:
            known = [r.run for r in self.index.runs()]
            hint = ", ".join(known[:10]) + (" ..." if len(known) > 10 else "") if known else "none"
            raise errors.NotFoundError(f"unknown run {name!r}; known runs: {hint}")
        return run

    def hosts(self, run: str) -> dict:
        r = self._run(run)
        return {"run": r.run, "hosts": r.hosts, "all_hosts": ALL_HOSTS, "format": r.format}

    def _files(self, run: Run, host: str):
        if host in ("", ALL_HOSTS, None):
            return list(run.files)
        _check_name("host", host)
        for f in run.files:
            if f.host == host:
                return [f]
        raise errors.NotFoundError(f"unknown host {host!r} in run {run.run!r}; hosts: "
                                   + ", ".join(run.hosts))

    # --- reading and analysis -------------------------------------------------------------
    def _key_lock(self, key):
        stripes = self._stripes[key[0]]
        return stripes[hash(key) % len(stripes)]

    def _read_host(self, run: Run, hostfile) -> ProfileData:
        from tb_roofline.readers import read_profile_file  # import late: keeps is_active light
        sig = _file_signature(hostfile.path)
        cached = self._host_cache.get(hostfile.path)
        if cached and cached[0] == sig:
            return cached[1]
        with self._key_lock(("host", hostfile.path)):
            cached = self._host_cache.get(hostfile.path)
            if cached and cached[0] == sig:
                return cached[1]
            try:
                report = (lambda done, total: self.progress(hostfile.host, done, total)) \
                    if self.progress else None
                data = read_profile_file(hostfile.path, run.format, hostfile.host,
                                         max_bytes=self.max_file_bytes, progress=report)
            except errors.ProfileFormatError as exc:
                raise errors.to_public(exc, f"run {run.run!r}, host {hostfile.host!r}") from None
            self._host_cache.put(hostfile.path, (sig, data))
            return data

    def _with_device_file(self, run: Run, hostfile, data: ProfileData) -> ProfileData:
        """Profiles without peaks (CPU, unknown GPUs) take them from a device file: the CLI's
        --device-file, else roofline_device.json next to the profile or above it up to the
        logdir, else TB_ROOFLINE_DEVICE_FILE. Without one they say how to get one."""
        if data.device is not None and data.device.peaks_known and not self.device_file:
            return data
        path = None
        try:
            path = self.device_file or device_file.find_device_file(hostfile.path, self.logdir)
            device = device_file.load_device_file(path) if path else None
        except device_file.DeviceFileError as exc:
            message = str(exc)  # name the file, but not where it lives on the server
            for full in filter(None, (path, self.device_file, os.environ.get(device_file.ENV_VAR))):
                message = message.replace(full, os.path.basename(full))
            raise errors.BadDeviceFileError(f"device file: {message}") from None
        if device is None:
            note = Diagnostic("warning", "peaks_unknown", device_file.PEAKS_UNKNOWN_MESSAGE)
            return dataclasses.replace(data, diagnostics=data.diagnostics + [note])
        device.num_cores = data.device.num_cores if data.device else device.num_cores
        note = Diagnostic("info", "device_file",
                          f"peaks from the device file {os.path.basename(path)} "
                          f"({device.type}, source: {', '.join(sorted({c.source for c in device.compute}))})")
        # Place every row under this device's ceilings (copies: the cached read stays as read).
        placed = {}
        for name in ("ops", "kernels"):
            table = getattr(data, name)
            if table is not None:
                table = table.copy()
                apply_ceilings(table, device, data.allow_tf32)
            placed[name] = table
        return dataclasses.replace(data, device=device, diagnostics=data.diagnostics + [note],
                                   **placed)

    def analysis(self, run_name: str, host: str) -> roofline.Analysis:
        run = self._run(run_name)
        files = self._files(run, host)
        extra = []
        if len(files) > 1:  # a host file deleted since the last scan: the others still count
            present = [f for f in files if os.path.exists(f.path)]
            extra = [Diagnostic("warning", "host_missing", f"host {f.host!r} skipped: its file "
                                "is gone") for f in files if f not in present]
            files = present or files
        sigs = tuple(_file_signature(f.path) for f in files) + self._device_file_signatures(files)
        key = (run.run, tuple(f.host for f in files))
        cached = self._analysis_cache.get(key)
        if cached is not None and cached[0] == sigs:
            return cached[1]
        with self._key_lock(("analysis",) + key):
            cached = self._analysis_cache.get(key)
            if cached is not None and cached[0] == sigs:
                return cached[1]
            profiles = []
            for f in files:
                try:
                    profiles.append(self._with_device_file(run, f, self._read_host(run, f)))
                except (errors.BadProfileError, errors.ProfileIncompletePublicError,
                        errors.TooLargeError) as exc:
                    if len(files) == 1:
                        raise
                    extra.append(Diagnostic("error", exc.code, f"host {f.host!r} skipped: {exc}"))
            if not profiles:
                raise errors.BadProfileError(
                    f"run {run.run!r}: no host could be read: " + "; ".join(d.message for d in extra))
            result = roofline.analyze(profiles, host_label=files[0].host if len(files) == 1 else ALL_HOSTS)
            result.diagnostics = extra + result.diagnostics
            self._analysis_cache.put(key, (sigs, result))  # replaces an older version's
            return result

    def _device_file_signatures(self, files) -> tuple:
        """A new or edited device file must show at once: it is part of the cache key."""
        out = []
        for f in files:
            try:
                path = self.device_file or device_file.find_device_file(f.path, self.logdir)
            except device_file.DeviceFileError:
                path = None
            if path:
                try:
                    st = os.stat(path)
                    out.append((path, st.st_size, st.st_mtime_ns))
                except OSError:
                    pass
        return tuple(out)

    # --- API answers ----------------------------------------------------------------------
    def device(self, run: str, host: str) -> dict:
        a = self.analysis(run, host)
        return {"run": run, "host": host or ALL_HOSTS, "device": a.device.to_json()}

    def program(self, run: str, host: str, include_infeed_outfeed: bool = True) -> dict:
        a = self.analysis(run, host)
        table = a.program[include_infeed_outfeed]
        return {"run": run, "host": host or ALL_HOSTS, "columns": list(roofline.RECORD_COLUMNS),
                "rows": table.rows(), "num_steps": a.num_steps,
                "has_hw_counters": a.has_hw_counters, "views": ["op"] + sorted(a.views)}

    def _filtered_ops(self, a, include_infeed_outfeed, categories=(), bound_by=(), name="",
                      view="op"):
        if view == "op":
            table = a.ops[include_infeed_outfeed]
        elif view in a.views:
            table = a.views[view][include_infeed_outfeed]
        else:
            raise errors.InvalidArgumentError(
                f"view {view!r} is not available for this run; views: "
                + ", ".join(["op"] + sorted(a.views)))
        mask = np.ones(len(table), dtype=bool)
        if categories:
            mask &= np.isin(table.columns["category"], list(categories))
        if bound_by:
            mask &= np.isin(table.columns["bound_by"], list(bound_by))
        if name:
            needle = name.lower()
            ops = table.columns["operation"]
            mask &= np.fromiter((needle in str(o).lower() for o in ops), dtype=bool, count=len(ops))
        return table, (table if mask.all() else table.select(mask))

    def ops(self, run: str, host: str, include_infeed_outfeed: bool = True, categories=(),
            bound_by=(), name="", offset: int = 0, limit: int | None = None,
            view: str = "op") -> dict:
        a = self.analysis(run, host)
        full, table = self._filtered_ops(a, include_infeed_outfeed, categories, bound_by, name,
                                         view)
        total = len(table)
        if offset or limit is not None:
            end = total if limit is None else offset + limit
            table = table.select(slice(offset, end))
        return {"run": run, "host": host or ALL_HOSTS, "columns": list(roofline.RECORD_COLUMNS),
                "rows": table.rows(), "total_count": total, "unfiltered_count": len(full),
                "offset": offset, "view": view, "views": ["op"] + sorted(a.views),
                "facets": {"category": sorted(set(full.columns["category"].tolist())),
                           "bound_by": sorted(set(full.columns["bound_by"].tolist()))}}

    def diagnostics(self, run: str, host: str) -> dict:
        a = self.analysis(run, host)
        return {"run": run, "host": host or ALL_HOSTS,
                "diagnostics": [d.to_json() for d in a.diagnostics]}

    def export(self, run: str, host: str, include_infeed_outfeed: bool = True, level="op",
               fmt="csv", categories=(), bound_by=(), name="", offset=0, limit=None, view="op"):
        if level not in ("op", "program"):
            raise errors.InvalidArgumentError(f"level must be 'op' or 'program', not {level!r}")
        if fmt not in ("csv", "json"):
            raise errors.InvalidArgumentError(f"format must be 'csv' or 'json', not {fmt!r}")
        if level == "program":
            answer = self.program(run, host, include_infeed_outfeed)
        else:
            answer = self.ops(run, host, include_infeed_outfeed, categories, bound_by, name,
                              offset, limit, view)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{run}_{host or 'all'}")
        filename = f"roofline_{level}_{safe}.{fmt}"
        if fmt == "json":
            rows = [dict(zip(answer["columns"], r)) for r in answer["rows"]]
            return json.dumps(rows, allow_nan=False, indent=1), "application/json", filename
        return to_csv(answer["columns"], answer["rows"]), "text/csv; charset=utf-8", filename


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER_CHARS = frozenset("0123456789+-.eE")


def _plain_number(text: str) -> bool:
    """-1.5, +2, 1e-3: a number a spreadsheet reads as such (not a formula)."""
    if not set(text) <= _NUMBER_CHARS:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def csv_cell(value) -> str:
    """One CSV field that a spreadsheet opens as data, never as a formula (OWASP's rule, the
    same as `toCsv` in static/columns.js): a text starting with = + - @, a tab or a CR gets a
    leading ' (a plain number such as -1.5 stays a number); a field holding a comma, a quote,
    a CR or a LF is quoted, so a lone CR cannot split a row."""
    if value is None:
        return ""
    text = str(value)
    if text.startswith(_FORMULA_START) and not _plain_number(text):
        text = "'" + text
    if any(c in text for c in ',"\r\n'):
        text = '"' + text.replace('"', '""') + '"'
    return text


def to_csv(columns, rows) -> str:
    return "".join(",".join(csv_cell(v) for v in r) + "\n" for r in [columns, *rows])
