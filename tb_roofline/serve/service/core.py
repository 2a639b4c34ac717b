"""The service behind the HTTP API, the CLI and the report: resolve runs and hosts, analyse
them, and serve encoded answers, each cached by the identities of the files behind it.

- Run and host lookup: `resolve_run`, `resolve_files` (public: the report uses them too).
- Reading and caching the profile files: `serve/service/hosts.py` (memory and disk caches, the
  conversion budget, per-file locks); a device file's peaks: `model/device_overrides.py`.
- Analyses and encoded answers (JSON, gzipped for browsers) are cached per run, host and
  parameters in byte-bounded memory caches (`serve/caches/memory.py`); the answers a page load asks
  for also go to the disk cache (`serve/caches/disk.py`), so a restart answers at once. Analyses
  too large for their cache are kept for the last two runs in use (`HELD_ANALYSES`, each while
  asked for within `OVERSIZE_HOLD_S`, together within the conversion budget), so a page load,
  a compare's two sides and two runs taken in turns convert once each; one over the budget
  alone says so in its diagnostics (`analysis_not_kept`).
- Answer shapes, filters and paging: `serve/service/answers.py`; exports: `serve/service/export.py`.
Nothing is ever written into the logdir.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import time
import weakref
from typing import TYPE_CHECKING

from tb_roofline import errors, settings, storage
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.serve.caches import disk as disk_cache
from tb_roofline.serve.caches.disk import DiskCache
from tb_roofline.serve.caches.memory import (
    ByteLRU,
    CompareCache,
    HeldAnalyses,
    memory_budget_bytes,
    sized,
)
from tb_roofline.serve.service import export as export_module
from tb_roofline.serve.service.discovery import ALL_HOSTS, Run, RunIndex
from tb_roofline.serve.service.hosts import HostReader, KeyLocks, file_signature, max_file_bytes

if TYPE_CHECKING:
    from tb_roofline.model.roofline import Analysis
    from tb_roofline.table.op_table import ProfileData

# The model, the device data sheets, numpy and the comparison are imported by the methods
# that use them, when they first run: listing runs, the plugin's is_active and a cached answer
# import none of them, and a command starts in what it needs (docs/benchmarks.md, start-up).

GZIP_LEVEL = 1  # 0.2 s for 30 MB of JSON, 11% larger than level 6 (0.9 s)
GZIP_MIN_BYTES = 1024
DISK_PLAIN_MAX_BYTES = 1 << 20  # larger answers go to disk only gzipped (what browsers ask)
OVERSIZE_HOLD_S = 60.0  # how long an analysis too large for its cache stays unused
HELD_ANALYSES = 2  # too large for their cache: the last runs asked for (a compare's two sides)


@dataclasses.dataclass
class _Inputs:
    run: Run
    files: list
    extra: list  # diagnostics about files left out (deleted since the last scan)
    signatures: tuple  # (path, size, version) of each file and device file


def _check_name(kind: str, value: str):
    """Reject path tricks early with a clear message (lookups below never join user paths)."""
    if value is None:
        raise errors.InvalidArgumentError(f"missing parameter '{kind}'")
    parts = value.replace("\\", "/").split("/")
    if (
        value.startswith(("/", "\\"))
        or ".." in parts
        or "\x00" in value
        or (len(value) > 1 and value[1] == ":")
    ):
        raise errors.InvalidArgumentError(
            f"{kind} {value!r} is not a valid name: absolute paths and '..' are not allowed"
        )


class RooflineService:
    def __init__(
        self,
        logdir: str,
        max_file_mb: float | None = None,
        progress=None,
        device_file: str | None = None,
        workload_file: str | None = None,
    ):
        self.logdir = logdir
        self.device_file = device_file  # overrides the roofline_device.json lookup (CLI flag)
        self.workload_file = workload_file  # overrides the roofline_workload.json lookup
        self.index = RunIndex(logdir) if logdir else None
        if self.index:
            self.index.has_any()  # start the first scan now, so is_active() knows by page load
        self.max_file_bytes = max_file_bytes(max_file_mb)
        self.disk_cache = DiskCache.from_env(logdir)
        self.hosts_reader = HostReader(self.max_file_bytes, self.disk_cache, progress)
        # One lock per answer and per analysis being made (answers take an analysis lock,
        # analyses the host locks, never the reverse).
        self._locks = KeyLocks()
        # Memory caches bounded by bytes (a long-running TensorBoard must not grow without
        # bound, and twenty small runs must not push each other out):
        # (run, hosts) -> (signatures, Analysis, whether every host was read)
        self._analysis_cache = ByteLRU(memory_budget_bytes("analyses"))
        # (kind, run, host, parameters, gzip) -> (signatures, encoded JSON, gzipped)
        self._answer_cache = ByteLRU(memory_budget_bytes("answers"))
        # Analyses too large for their cache, kept for the last two runs in use.
        self._held = HeldAnalyses(keep=HELD_ANALYSES, hold_s=OVERSIZE_HOLD_S)
        self.derived = ByteLRU(memory_budget_bytes("answers") // 4)  # guidance answers
        self.compare_cache = CompareCache()  # the last run comparisons

    @property
    def progress(self):
        return self.hosts_reader.progress

    @property
    def _host_cache(self):
        return self.hosts_reader.cache

    # --- discovery ------------------------------------------------------------------------
    def has_profiles(self) -> bool:
        return bool(self.index) and self.index.has_any()

    def list_runs(self) -> dict:
        runs = self.index.refresh() if self.index else []
        if not runs:
            self._raise_storage_error()
        return {
            "runs": [r.to_json() for r in runs],
            "logdir": self.logdir,
            "scanning": bool(self.index and self.index.scanning),
        }

    def _raise_storage_error(self):
        if self.index and self.index.error:
            raise errors.StorageError(f"cannot list the logdir {self.logdir}: {self.index.error}")

    def resolve_run(self, name: str) -> Run:
        """The run of this name (a clear 404 naming the known runs otherwise)."""
        _check_name("run", name)
        if not self.index:
            raise errors.NotFoundError("no logdir given")
        run = self.index.find(name)
        if run is None and not self.index.listed:
            raise errors.ListingInProgressError(
                f"listing in progress: the first listing of {self.logdir} has not finished, "
                "so no run is known yet; retry shortly"
            )
        if run is None:
            known = [r.run for r in self.index.runs()]
            if not known:
                self._raise_storage_error()
            hint = ", ".join(known[:10]) + (" ..." if len(known) > 10 else "") if known else "none"
            raise errors.NotFoundError(f"unknown run {name!r}; known runs: {hint}")
        return run

    def hosts(self, run: str) -> dict:
        r = self.resolve_run(run)
        return {"run": r.run, "hosts": r.hosts, "all_hosts": ALL_HOSTS, "format": r.format}

    def reading(self, run: str) -> dict:
        """Whether the run's hosts are being read now, and how far (`/progress`): what the
        tab shows while its requests wait. Cheap: the scan's index and a lookup."""
        r = self.resolve_run(run)
        return {"run": r.run, **self.hosts_reader.reads.of(r.run)}

    def resolve_files(self, run: Run, host: str) -> list:
        """The run's files for a host ("" or ALL_HOSTS: every host)."""
        if host in ("", ALL_HOSTS, None):
            return list(run.files)
        _check_name("host", host)
        for f in run.files:
            if f.host == host:
                return [f]
        raise errors.NotFoundError(
            f"unknown host {host!r} in run {run.run!r}; hosts: " + ", ".join(run.hosts)
        )

    _run = resolve_run  # the names tests and older callers know
    _files = resolve_files

    # --- reading and analysis -------------------------------------------------------------
    def read_host(self, run: Run, hostfile) -> ProfileData:
        """One host file's read profile (cached), as the reader gave it."""
        return self.hosts_reader.read(run, [hostfile])[0].result()

    _read_host = read_host

    def find_device_file(self, profile_path: str):
        from tb_roofline.devices import device_file

        if self.device_file:
            return self.device_file
        if storage.is_remote(profile_path):  # the listing knows the device files: no request
            known = self.index.device_files if self.index else {}
            return device_file.find_device_file(
                profile_path, self.logdir, isfile=known.__contains__
            )
        return device_file.find_device_file(profile_path, self.logdir)

    def _with_device_file(self, hostfile, data: ProfileData) -> ProfileData:
        """Profiles without peaks (CPU, unknown GPUs) take them from a device file: the CLI's
        --device-file, else roofline_device.json next to the profile or above it up to the
        logdir, else TB_ROOFLINE_DEVICE_FILE (model/device_overrides.py places the rows)."""
        from tb_roofline.devices import device_file
        from tb_roofline.model import device_overrides

        if not device_overrides.needs_device_file(data, forced=bool(self.device_file)):
            return data
        path = None
        try:
            path = self.find_device_file(hostfile.path)
            device = device_file.load_device_file(path) if path else None
        except device_file.DeviceFileError as exc:
            message = str(exc)  # name the file, but not where it lives on the server
            for full in filter(None, (path, self.device_file, settings.text(settings.DEVICE_FILE))):
                message = message.replace(full, os.path.basename(full))
            raise errors.BadDeviceFileError(f"device file: {message}") from None
        if device is None:
            return device_overrides.without_peaks(data)
        return device_overrides.with_device(data, device, os.path.basename(path))

    def analysis(self, run_name: str, host: str) -> Analysis:
        return self._analysis_entry(self._inputs(run_name, host))[0]

    def _inputs(self, run_name: str, host: str) -> _Inputs:
        """What an analysis of (run, host) is made from, with the identity of each file."""
        run = self.resolve_run(run_name)
        files = self.resolve_files(run, host)
        extra = []
        if len(files) > 1:  # a host file deleted since the last scan: the others still count
            present = [f for f in files if f.stat is not None or os.path.exists(f.path)]
            extra = [
                Diagnostic(
                    "warning",
                    "host_missing",
                    f"host {f.host!r} skipped: its file is gone",
                    skipped_host=f.host,
                    hosts_total=len(files),
                )
                for f in files
                if f not in present
            ]
            files = present or files
        sigs = tuple(file_signature(f) for f in files) + self._device_file_signatures(files)
        return _Inputs(run, files, extra, sigs)

    def _analysis_entry(self, inputs: _Inputs):
        """(Analysis, whether every host was read: only then may answers go to disk)."""
        run, files, sigs = inputs.run, inputs.files, inputs.signatures
        key = (run.run, tuple(f.host for f in files))
        cached = self._cached_analysis(key, sigs)
        if cached is not None:
            return cached
        # Memory before the lock (answer lock, budget, analysis lock, host locks: one order).
        with (
            self.hosts_reader.budget.admit(self.hosts_reader.pending_bytes(run, files)),
            self._locks.hold(("analysis",) + key),
        ):
            cached = self._cached_analysis(key, sigs)
            if cached is not None:
                return cached
            return self._analyse(inputs, key)

    def _analyse(self, inputs: _Inputs, key):
        """Read the files (cached), apply device files, run the model, keep the analysis."""
        from tb_roofline.model import roofline

        run, files, sigs = inputs.run, inputs.files, inputs.signatures
        profiles, extra = [], list(inputs.extra)
        hosts_total = len(files) + sum(1 for d in extra if d.skipped_host is not None)
        entries = self.hosts_reader.read(run, files)
        for f, entry in zip(files, entries):
            try:
                profiles.append(self._with_device_file(f, entry.result()))
            except (
                errors.BadProfileError,
                errors.ProfileIncompletePublicError,
                errors.TooLargeError,
                errors.StorageTimeoutPublicError,
            ) as exc:
                if len(files) == 1:
                    raise
                extra.append(
                    Diagnostic(
                        "error",
                        exc.code,
                        f"host {f.host!r} skipped: {exc}",
                        skipped_host=f.host,
                        hosts_total=hosts_total,
                    )
                )
        if not profiles:
            raise errors.BadProfileError(
                f"run {run.run!r}: no host could be read: " + "; ".join(d.message for d in extra)
            )
        try:
            result = roofline.analyze(
                profiles, host_label=files[0].host if len(files) == 1 else ALL_HOSTS
            )
        finally:  # their rows are views of the run's table now (if it failed, maybe): anew
            if len(files) > 1:
                try:
                    self.hosts_reader.remeasure(files)
                except Exception:  # noqa: BLE001 (never in place of the analysis's own error)
                    import logging

                    logging.getLogger(__name__).exception(
                        "tb-roofline: re-measuring the cached hosts failed"
                    )
        result.diagnostics = extra + result.diagnostics
        complete = not extra
        # Replaces an older version's; sized once, here. Too large to keep: held for the
        # runs in use, so a page load, a compare or two runs taken in turns convert once.
        size, roots = sized(result)
        if not self._analysis_cache.put(key, (sigs, result, complete), size, roots):
            full = size + sum(r.nbytes for r in roots.values())
            limit = self.hosts_reader.budget.total
            if not self._held.put(key, (sigs, result, complete), full, limit, time.monotonic()):
                result.diagnostics = result.diagnostics + [
                    Diagnostic(
                        "warning",
                        "analysis_not_kept",
                        f"this run's analysis takes about {full / 2**20:,.0f} MB, more than the "
                        f"memory for analyses ({settings.MEMORY_CACHE_MB.name}) and the memory "
                        f"budget ({settings.MEMORY_BUDGET_MB.name}): it is not kept, so each "
                        "request analyses it again; raise one of them to keep it",
                    )
                ]
        return result, complete

    def _cached_analysis(self, key, sigs):
        cached = self._analysis_cache.get(key)
        if cached is None:
            cached = self._held.get(key, time.monotonic())
        if cached is not None and cached[0] == sigs:
            return cached[1], cached[2]
        return None

    def _device_file_signatures(self, files) -> tuple:
        """A new or edited device file must show at once: it is part of the cache key."""
        from tb_roofline.devices import device_file

        out = []
        for f in files:
            try:
                path = self.find_device_file(f.path)
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
        from tb_roofline.serve.service import answers

        return answers.device_answer(self.analysis(run, host), run, host)

    def program(
        self,
        run: str,
        host: str,
        include_infeed_outfeed: bool = True,
        offset: int = 0,
        limit: int | None = None,
    ) -> dict:
        from tb_roofline.serve.service import answers

        return answers.program_answer(
            self.analysis(run, host), run, host, include_infeed_outfeed, offset, limit
        )

    def ops(
        self,
        run: str,
        host: str,
        include_infeed_outfeed: bool = True,
        categories=(),
        bound_by=(),
        name="",
        offset: int = 0,
        limit: int | None = None,
        view: str = "op",
        rows: str = "",
    ) -> dict:
        from tb_roofline.serve.service import answers

        return answers.ops_answer(
            self.analysis(run, host),
            run,
            host,
            include_infeed_outfeed,
            categories,
            bound_by,
            name,
            offset,
            limit,
            view,
            rows,
        )

    def diagnostics(self, run: str, host: str) -> dict:
        from tb_roofline.serve.service import answers

        return answers.diagnostics_answer(self.analysis(run, host), run, host)

    def comm(self, run: str, host: str, include_infeed_outfeed: bool = True) -> dict:
        """The communication roofline: one point per collective (model/comm.py)."""
        from tb_roofline.serve.service import answers

        return answers.comm_answer(self.analysis(run, host), run, host, include_infeed_outfeed)

    def encoded(
        self, kind: str, run: str, host: str, accept_gzip: bool = False, **params
    ) -> tuple[bytes, bool]:
        """The JSON answer of `device`, `program`, `ops` or `diagnostics` as bytes
        (gzip-compressed when the client takes it and it is worth it): (body, gzipped).

        Kept per (run, host, parameters) while the files behind it are unchanged, so a warm
        request costs a stat per file and a lookup, not rows and JSON for every op. The
        answers a page load asks for (no filters) also go to the disk cache: after a restart
        they are served without reading the profile or redoing the analysis."""
        from tb_roofline.serve.service import answers

        answer_of = answers.ANSWERS[kind]
        inputs = self._inputs(run, host)
        if kind in answers.CAPPED_KINDS:  # the first page that fits (serve/service/answers.py)
            params = {**params, "max_bytes": settings.mb(settings.MAX_ANSWER_MB)}
        key = ("answer", kind, run, host or ALL_HOSTS, _hashable(params), bool(accept_gzip))
        hit = self._answer_cache.get(key)
        if hit is not None and hit[0] == inputs.signatures:
            return hit[1], hit[2]
        with self._locks.hold(key):
            hit = self._answer_cache.get(key)
            if hit is not None and hit[0] == inputs.signatures:
                return hit[1], hit[2]
            disk_key = self._answer_disk_key(key, inputs, params)
            stored = self.disk_cache.get(disk_key) if disk_key else None
            if isinstance(stored, tuple) and len(stored) == 2 and isinstance(stored[0], bytes):
                body, zipped = stored
            else:  # the whole conversion (read, analysis, answer) within the memory budget
                with self.hosts_reader.budget.admit(
                    self.hosts_reader.pending_bytes(inputs.run, inputs.files)
                ):
                    a, complete = self._analysis_entry(inputs)
                    body = json.dumps(
                        answer_of(a, run, host, **params), allow_nan=False, separators=(",", ":")
                    ).encode()
                    del a
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
        from tb_roofline.serve.service import answers

        if self.disk_cache is None or not answers.is_page_load(params):
            return None
        return DiskCache.key(
            "answer",
            key,
            inputs.signatures,
            self.max_file_bytes,
            disk_cache.code_digest(disk_cache.ANSWER_CODE_PATHS),
        )

    def derived_answer(self, analysis, key, make):
        """An answer made from an analysis (the guidance), kept while that analysis is the
        cached one: keyed by the analysis object, so a re-read profile makes it anew."""
        full_key = (id(analysis),) + tuple(key)
        hit = self.derived.get(full_key)
        if hit is not None and hit[0]() is analysis:
            return hit[1]
        value = make()  # held by a weak reference: the analysis cache decides its lifetime
        self.derived.put(full_key, (weakref.ref(analysis), value), *sized(value))
        return value

    def compare(
        self,
        base: str,
        run: str,
        base_host: str = "",
        host: str = "",
        base_step=None,
        step=None,
        level: str = "op",
        include_infeed_outfeed: bool = True,
        view: str = "op",
        categories=(),
        bound_by=(),
        name: str = "",
        offset: int = 0,
        limit: int | None = None,
        change: str = "",
    ) -> dict:
        """Two runs (hosts, steps) on one roofline: serve/service/compare.py, docs/compare.md."""
        from tb_roofline.serve.service import compare as compare_api

        return compare_api.compare_answer(
            self,
            base,
            run,
            base_host,
            host,
            base_step,
            step,
            level,
            include_infeed_outfeed,
            view,
            categories,
            bound_by,
            name,
            offset,
            limit,
            change=change,
        )

    def guidance(
        self, run: str, host: str, include_infeed_outfeed: bool = True, workload: dict | None = None
    ) -> dict:
        """Findings, time per class and throughput (serve/service/report.py, docs/guidance.md)."""
        from tb_roofline.serve.service.report import guidance_answer

        return guidance_answer(self, run, host, include_infeed_outfeed, workload)

    def report(
        self,
        run: str,
        host: str,
        include_infeed_outfeed: bool = True,
        top: int = 20,
        workload: dict | None = None,
    ) -> dict:
        """Everything in one answer, for scripts and agents (docs/guidance.md)."""
        from tb_roofline.serve.service.report import full_report

        return full_report(self, run, host, include_infeed_outfeed, top, workload)

    def export(
        self,
        run: str,
        host: str,
        include_infeed_outfeed: bool = True,
        level="op",
        fmt="csv",
        categories=(),
        bound_by=(),
        name="",
        offset=0,
        limit=None,
        view="op",
    ):
        """(text, content type, file name): see serve/service/export.py."""
        chunks, content_type, filename = self.export_stream(
            run,
            host,
            include_infeed_outfeed,
            level,
            fmt,
            categories,
            bound_by,
            name,
            offset,
            limit,
            view,
        )
        return "".join(chunks), content_type, filename

    def export_stream(
        self,
        run: str,
        host: str,
        include_infeed_outfeed: bool = True,
        level="op",
        fmt="csv",
        categories=(),
        bound_by=(),
        name="",
        offset=0,
        limit=None,
        view="op",
    ):
        """(the text's pieces, content type, file name): every row the filters keep, never
        capped; the analysis is made (and any error raised) before the first piece."""
        from tb_roofline.model import roofline
        from tb_roofline.model.row_grouping import extra_columns
        from tb_roofline.serve.service import answers

        export_module.check(level, fmt)
        a = self.analysis(run, host)
        # The same columns as the answers: the records, the model's derived columns, extras.
        if level == "program":
            table = answers.with_derived(a, a.program[include_infeed_outfeed], ranked=False)
            derived = list(answers.PROGRAM_DERIVED)
        else:
            full = answers.with_derived(
                a, answers.op_table(a, include_infeed_outfeed, view), ranked=True
            )
            table = answers.page(answers.filtered(full, categories, bound_by, name), offset, limit)
            derived = list(answers.OPS_DERIVED)
        extra = derived + extra_columns(table)
        columns = list(roofline.RECORD_COLUMNS) + extra
        chunks = export_module.text_chunks(columns, answers.row_pages(table, extra), fmt)
        return (
            chunks,
            export_module.CONTENT_TYPES[fmt],
            export_module.file_name(run, host, level, fmt),
        )


def _hashable(params: dict) -> tuple:
    return tuple(
        sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items())
    )


csv_cell, to_csv = export_module.csv_cell, export_module.to_csv  # older imports
