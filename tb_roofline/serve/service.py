"""Plain functions behind the HTTP API and the CLI: resolve runs, read, analyse, cache, filter.

Caches are keyed by each file's identity (path, size, mtime; for a remote file its etag or
generation from the last listing), so a rewritten profile is read again and an unchanged one
costs nothing. Failures are cached the same way (a corrupt file is parsed once, not once per
request). Answers are kept encoded (JSON, gzipped for browsers) per parameters. Memory caches
are bounded by bytes (`serve/caches.py`); converted profiles and the answers a page load asks
for also go to a cache on disk outside the logdir (`serve/disk_cache.py`), so a restart
answers at once. Nothing is ever written into the logdir.
"""
from __future__ import annotations

import dataclasses
import gzip
import logging
import json
import os
import threading
import time

import numpy as np

from tb_roofline import errors, storage
from tb_roofline.devices import device_file
from tb_roofline.model import roofline, row_grouping
from tb_roofline.serve.caches import ByteLRU, approx_size, memory_budget_bytes
from tb_roofline.serve.discovery import ALL_HOSTS, Run, RunIndex
from tb_roofline.serve import disk_cache
from tb_roofline.serve.disk_cache import DiskCache
from tb_roofline.devices.gpu_peaks import apply_ceilings
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.model.op_table import ProfileData
from tb_roofline.serve import compare_api

DEFAULT_MAX_FILE_MB = 4096
GZIP_LEVEL = 1  # 0.2 s for 30 MB of JSON, 11% larger than level 6 (0.9 s)
GZIP_MIN_BYTES = 1024
DISK_PLAIN_MAX_BYTES = 1 << 20  # larger answers go to disk only gzipped (what browsers ask)
# How long a failure stays cached for an unchanged file: a file "still being written" is
# judged again once it is no longer young; a remote read error may have been the network.
INCOMPLETE_RETRY_S = 2.0
REMOTE_ERROR_RETRY_S = 60.0
MEMORY_RETRY_S = 60.0  # out of memory may have been the other requests' fault


@dataclasses.dataclass
class _Inputs:
    run: Run
    files: list
    extra: list  # diagnostics about files left out (deleted since the last scan)
    signatures: tuple  # (path, size, version) of each file and device file


@dataclasses.dataclass
class _HostEntry:
    """A read profile, or the public error reading it gave, for one file signature."""
    signature: tuple
    data: ProfileData | None = None
    error: tuple | None = None  # (PublicError class, message): raised anew each time
    expires: float | None = None  # monotonic time; None = while the signature holds

    def valid_for(self, signature) -> bool:
        return self.signature == signature and (
            self.expires is None or time.monotonic() < self.expires)

    def result(self) -> ProfileData:
        if self.error is not None:
            cls, message = self.error
            raise cls(message)
        return self.data


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


def _file_signature(hostfile) -> tuple:
    """(path, size, version). A remote file's comes from the last listing: no request."""
    if hostfile.stat is not None:
        return (hostfile.path,) + storage.version(hostfile.stat)
    try:
        st = storage.stat(hostfile.path)
    except OSError as exc:
        raise errors.NotFoundError(f"profile file vanished: {os.path.basename(hostfile.path)} "
                                   f"({exc.strerror})")
    return (hostfile.path,) + storage.version(st)


def _current_signature(hostfile) -> tuple | None:
    """The file's identity asked of the storage now (a HEAD request for a remote file)."""
    try:
        return (hostfile.path,) + storage.version(storage.stat(hostfile.path))
    except OSError:
        return None


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
                 device_file: str | None = None, workload_file: str | None = None):
        self.logdir = logdir
        self.device_file = device_file  # overrides the roofline_device.json lookup (CLI flag)
        self.workload_file = workload_file  # overrides the roofline_workload.json lookup
        self.progress = progress  # callable(host, done, total) for long reads (the CLI's)
        self.index = RunIndex(logdir) if logdir else None
        if self.index:
            self.index.has_any()  # start the first scan now, so is_active() knows by page load
        self.max_file_bytes = int((max_file_mb or _env_file_limit_mb()) * (1 << 20))
        # Striped locks: one conversion per key at a time, with a bounded number of locks.
        # Answers take an analysis lock, analyses a host lock, never the reverse: separate
        # sets keep that order deadlock-free.
        self._stripes = {kind: [threading.Lock() for _ in range(32)]
                         for kind in ("answer", "analysis", "host")}
        # Memory caches bounded by bytes (a long-running TensorBoard must not grow without
        # bound, and twenty small runs must not push each other out):
        self._host_cache = ByteLRU(memory_budget_bytes("profiles"))  # path -> _HostEntry
        # (run, hosts) -> (signatures, Analysis, whether every host was read)
        self._analysis_cache = ByteLRU(memory_budget_bytes("analyses"))
        # (kind, run, host, parameters, gzip) -> (signatures, encoded JSON, gzipped)
        self._answer_cache = ByteLRU(memory_budget_bytes("answers"))
        self.disk_cache = DiskCache.from_env(logdir)
        self.compare_cache = compare_api.CompareCache()  # the last run comparisons

    # --- discovery ------------------------------------------------------------------------
    def has_profiles(self) -> bool:
        return bool(self.index) and self.index.has_any()

    def list_runs(self) -> dict:
        runs = self.index.refresh() if self.index else []
        if not runs:
            self._raise_storage_error()
        return {"runs": [r.to_json() for r in runs], "logdir": self.logdir,
                "scanning": bool(self.index and self.index.scanning)}

    def _raise_storage_error(self):
        if self.index and self.index.error:
            raise errors.StorageError(f"cannot list the logdir {self.logdir}: {self.index.error}")

    def _run(self, name: str) -> Run:
        _check_name("run", name)
        if not self.index:
            raise errors.NotFoundError("no logdir given")
        run = self.index.find(name)
        if run is None:
            known = [r.run for r in self.index.runs()]
            if not known:
                self._raise_storage_error()
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
        return self._read_hosts(run, [hostfile])[0].result()

    def _cached_host(self, run: Run, hostfile, sig) -> "_HostEntry | None":
        """The memory cache's entry, else the disk cache's (then kept in memory too)."""
        cached = self._host_cache.get(hostfile.path)
        if cached is not None and cached.valid_for(sig):
            return cached
        if self.disk_cache is not None and sig[1] <= self.max_file_bytes:
            data = self.disk_cache.get(DiskCache.key(sig, run.format, hostfile.host))
            if isinstance(data, ProfileData):
                entry = _HostEntry(sig, data)
                self._host_cache.put(hostfile.path, entry, approx_size(data))
                return entry
        return None

    def _read_hosts(self, run: Run, files: list) -> list:
        """A `_HostEntry` per file (its ProfileData or the public error reading it gave). Files
        not cached are converted together, on all cores (`readers/parallel.py`), each under its
        host lock (taken in one order, so two requests never wait on each other)."""
        entries: list = [None] * len(files)
        sigs = [_file_signature(f) for f in files]
        missing = []
        for i, f in enumerate(files):
            entries[i] = self._cached_host(run, f, sigs[i])
            if entries[i] is None:
                missing.append(i)
        if not missing:
            return entries
        stripes = self._stripes["host"]
        locks = sorted({hash(("host", files[i].path)) % len(stripes) for i in missing})
        for k in locks:
            stripes[k].acquire()
        try:
            todo = []
            for i in missing:  # converted by another request while we waited?
                entries[i] = self._cached_host(run, files[i], sigs[i])
                if entries[i] is None:
                    todo.append(i)
            if todo:
                from tb_roofline.readers.parallel import read_files  # late: keeps is_active light
                report = None
                if self.progress:
                    report = lambda j, done, total: self.progress(files[todo[j]].host, done, total)
                results = read_files([(files[i].path, run.format, files[i].host,
                                       self.max_file_bytes) for i in todo], progress=report)
                for i, result in zip(todo, results):
                    entries[i] = self._store_host(run, files[i], sigs[i], result)
        finally:
            for k in reversed(locks):
                stripes[k].release()
        return entries

    def _store_host(self, run: Run, hostfile, sig, result) -> "_HostEntry":
        """Keep a conversion's result (or its public error) in the caches."""
        if isinstance(result, errors.ProfileFormatError):
            public = errors.to_public(result, f"run {run.run!r}, host {hostfile.host!r}")
            retry = INCOMPLETE_RETRY_S if isinstance(result, errors.ProfileIncompleteError) \
                else MEMORY_RETRY_S if isinstance(result, errors.ProfileOutOfMemoryError) \
                else REMOTE_ERROR_RETRY_S if storage.is_remote(hostfile.path) else None
            entry = _HostEntry(sig, error=(type(public), str(public)),
                               expires=None if retry is None else time.monotonic() + retry)
            self._host_cache.put(hostfile.path, entry, 0)
            return entry
        if isinstance(result, BaseException):
            raise result
        entry = _HostEntry(sig, result)
        self._host_cache.put(hostfile.path, entry, approx_size(result))
        # Keep on disk only what was read from the version the key names.
        if self.disk_cache is not None and sig[1] <= self.max_file_bytes and \
                _current_signature(hostfile) == sig:
            self.disk_cache.put(DiskCache.key(sig, run.format, hostfile.host), result)
        return entry

    def _find_device_file(self, profile_path: str):
        if self.device_file:
            return self.device_file
        if storage.is_remote(profile_path):  # the listing knows the device files: no request
            known = self.index.device_files if self.index else {}
            return device_file.find_device_file(profile_path, self.logdir,
                                                isfile=known.__contains__)
        return device_file.find_device_file(profile_path, self.logdir)

    def _with_device_file(self, run: Run, hostfile, data: ProfileData) -> ProfileData:
        """Profiles without peaks (CPU, unknown GPUs) take them from a device file: the CLI's
        --device-file, else roofline_device.json next to the profile or above it up to the
        logdir, else TB_ROOFLINE_DEVICE_FILE. Without one they say how to get one."""
        if data.device is not None and data.device.peaks_known and not self.device_file:
            return data
        path = None
        try:
            path = self._find_device_file(hostfile.path)
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
        return self._analysis_entry(self._inputs(run_name, host))[0]

    def _inputs(self, run_name: str, host: str) -> _Inputs:
        """What an analysis of (run, host) is made from, with the identity of each file."""
        run = self._run(run_name)
        files = self._files(run, host)
        extra = []
        if len(files) > 1:  # a host file deleted since the last scan: the others still count
            present = [f for f in files if f.stat is not None or os.path.exists(f.path)]
            extra = [Diagnostic("warning", "host_missing", f"host {f.host!r} skipped: its file "
                                "is gone") for f in files if f not in present]
            files = present or files
        sigs = tuple(_file_signature(f) for f in files) + self._device_file_signatures(files)
        return _Inputs(run, files, extra, sigs)

    def _analysis_entry(self, inputs: _Inputs):
        """(Analysis, whether every host was read: only then may answers go to disk)."""
        run, files, sigs = inputs.run, inputs.files, inputs.signatures
        key = (run.run, tuple(f.host for f in files))
        cached = self._analysis_cache.get(key)
        if cached is not None and cached[0] == sigs:
            return cached[1], cached[2]
        with self._key_lock(("analysis",) + key):
            cached = self._analysis_cache.get(key)
            if cached is not None and cached[0] == sigs:
                return cached[1], cached[2]
            profiles, extra = [], list(inputs.extra)
            entries = self._read_hosts(run, files)
            for f, entry in zip(files, entries):
                try:
                    profiles.append(self._with_device_file(run, f, entry.result()))
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
            complete = not extra
            # Replaces an older version's; sized once, here.
            self._analysis_cache.put(key, (sigs, result, complete), approx_size(result))
            return result, complete

    def _device_file_signatures(self, files) -> tuple:
        """A new or edited device file must show at once: it is part of the cache key."""
        out = []
        for f in files:
            try:
                path = self._find_device_file(f.path)
            except device_file.DeviceFileError:
                path = None
            if not path:
                continue
            known = self.index.device_files.get(path) if self.index else None
            try:
                st = known if known is not None else storage.stat(path)
            except OSError:
                continue
            out.append((path,) + storage.version(st))
        return tuple(out)

    # --- API answers ----------------------------------------------------------------------
    def device(self, run: str, host: str) -> dict:
        return self._device_answer(self.analysis(run, host), run, host)

    def program(self, run: str, host: str, include_infeed_outfeed: bool = True) -> dict:
        return self._program_answer(self.analysis(run, host), run, host, include_infeed_outfeed)

    def ops(self, run: str, host: str, include_infeed_outfeed: bool = True, categories=(),
            bound_by=(), name="", offset: int = 0, limit: int | None = None,
            view: str = "op", rows: str = "") -> dict:
        return self._ops_answer(self.analysis(run, host), run, host, include_infeed_outfeed,
                                categories, bound_by, name, offset, limit, view, rows)

    def diagnostics(self, run: str, host: str) -> dict:
        return self._diagnostics_answer(self.analysis(run, host), run, host)

    def encoded(self, kind: str, run: str, host: str, accept_gzip: bool = False,
                **params) -> tuple[bytes, bool]:
        """The JSON answer of `device`, `program`, `ops` or `diagnostics` as bytes
        (gzip-compressed when the client takes it and it is worth it): (body, gzipped).

        Kept per (run, host, parameters) while the files behind it are unchanged, so a warm
        request costs a stat per file and a lookup, not rows and JSON for every op. The
        answers a page load asks for (no filters) also go to the disk cache: after a restart
        they are served without reading the profile or redoing the analysis."""
        answer_of = {"device": self._device_answer, "program": self._program_answer,
                     "ops": self._ops_answer, "diagnostics": self._diagnostics_answer}[kind]
        inputs = self._inputs(run, host)
        key = ("answer", kind, run, host or ALL_HOSTS, _hashable(params), bool(accept_gzip))
        hit = self._answer_cache.get(key)
        if hit is not None and hit[0] == inputs.signatures:
            return hit[1], hit[2]
        with self._key_lock(key):
            hit = self._answer_cache.get(key)
            if hit is not None and hit[0] == inputs.signatures:
                return hit[1], hit[2]
            disk_key = self._answer_disk_key(key, inputs, params)
            stored = self.disk_cache.get(disk_key) if disk_key else None
            if isinstance(stored, tuple) and len(stored) == 2 and isinstance(stored[0], bytes):
                body, zipped = stored
            else:
                a, complete = self._analysis_entry(inputs)
                body = json.dumps(answer_of(a, run, host, **params), allow_nan=False,
                                  separators=(",", ":")).encode()
                zipped = bool(accept_gzip) and len(body) >= GZIP_MIN_BYTES
                if zipped:
                    body = gzip.compress(body, GZIP_LEVEL, mtime=0)
                if disk_key and complete and (zipped or len(body) <= DISK_PLAIN_MAX_BYTES):
                    self.disk_cache.put(disk_key, (body, zipped))
            self._answer_cache.put(key, (inputs.signatures, body, zipped), len(body))
            return body, zipped

    def _answer_disk_key(self, key, inputs: _Inputs, params: dict) -> str | None:
        """Disk key of an answer a page load asks for; None for filtered or paged ones (each
        keystroke in a filter box would be a file)."""
        if self.disk_cache is None:
            return None
        if any(params.get(name) for name in ("categories", "bound_by", "name", "offset", "limit")):
            return None
        return DiskCache.key("answer", key, inputs.signatures, self.max_file_bytes,
                             disk_cache.code_digest(disk_cache.ANSWER_CODE_PATHS))

    @staticmethod
    def _device_answer(a, run, host) -> dict:
        return {"run": run, "host": host or ALL_HOSTS, "device": a.device.to_json()}

    @staticmethod
    def _program_answer(a, run, host, include_infeed_outfeed=True) -> dict:
        table = a.program[include_infeed_outfeed]
        return {"run": run, "host": host or ALL_HOSTS, "columns": list(roofline.RECORD_COLUMNS),
                "rows": table.rows(), "num_steps": a.num_steps,
                "has_hw_counters": a.has_hw_counters, "views": ["op"] + sorted(a.views)}

    @staticmethod
    def _filtered_ops(a, include_infeed_outfeed, categories=(), bound_by=(), name="",
                      view="op", rows=""):
        if rows:  # the `rows` grouping (model/row_grouping.py)
            try:
                table = row_grouping.grouped_records(a, include_infeed_outfeed, rows)
            except ValueError as e:
                raise errors.InvalidArgumentError(str(e)) from None
        elif view == "op":
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

    def _ops_answer(self, a, run, host, include_infeed_outfeed=True, categories=(),
                    bound_by=(), name="", offset: int = 0, limit: int | None = None,
                    view: str = "op", rows: str = "") -> dict:
        full, table = self._filtered_ops(a, include_infeed_outfeed, categories, bound_by, name,
                                         view, rows)
        total = len(table)
        if offset or limit is not None:
            end = total if limit is None else offset + limit
            table = table.select(slice(offset, end))
        return row_grouping.add_extra_columns(a, table, rows, {
                "run": run, "host": host or ALL_HOSTS, "columns": list(roofline.RECORD_COLUMNS),
                "rows": table.rows(), "total_count": total, "unfiltered_count": len(full),
                "offset": offset, "view": view, "views": ["op"] + sorted(a.views),
                "facets": {"category": sorted(set(full.columns["category"].tolist())),
                           "bound_by": sorted(set(full.columns["bound_by"].tolist()))}})

    def compare(self, base: str, run: str, base_host: str = "", host: str = "", base_step=None,
                step=None, level: str = "op", include_infeed_outfeed: bool = True,
                view: str = "op", categories=(), bound_by=(), name: str = "", offset: int = 0,
                limit: int | None = None) -> dict:
        """Two runs (hosts, steps) on one roofline: see serve/compare_api.py, docs/compare.md."""
        return compare_api.compare_answer(self, base, run, base_host, host, base_step, step,
                                          level, include_infeed_outfeed, view, categories,
                                          bound_by, name, offset, limit)

    def guidance(self, run: str, host: str, include_infeed_outfeed: bool = True,
                 workload: dict | None = None) -> dict:
        """Findings, time per class and throughput (serve/report.py, docs/guidance.md)."""
        from tb_roofline.serve.report import guidance_answer
        return guidance_answer(self, run, host, include_infeed_outfeed, workload)

    def report(self, run: str, host: str, include_infeed_outfeed: bool = True, top: int = 20,
               workload: dict | None = None) -> dict:
        """Everything in one answer, for scripts and agents (docs/guidance.md)."""
        from tb_roofline.serve.report import full_report
        return full_report(self, run, host, include_infeed_outfeed, top, workload)

    @staticmethod
    def _diagnostics_answer(a, run, host) -> dict:
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


def _hashable(params: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v)
                        for k, v in params.items()))


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
