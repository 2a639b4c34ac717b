"""The service behind the HTTP API, the CLI and the report: resolve runs and hosts, analyse
them, and serve encoded answers, each cached by the identities of the files behind it.

- Run and host lookup: `resolve_run`, `resolve_files` (public: the report uses them too).
- Reading and caching the profile files: `serve/service/hosts.py` (memory and disk caches,
  per-file locks) under the conversion budget (`serve/service/budget.py`).
- Analyses (`serve/service/analyses.py`: a device file's peaks applied, kept by file identity,
  those too large for their cache held for the runs in use).
- Answers, as plain Python (`answer`, `device`, `ops`, ...: what the CLI and MCP read) and
  encoded (`encoded`: the same answers as JSON, gzipped for browsers, what the HTTP routes
  serve), cached per run, host and parameters in byte-bounded memory caches
  (`serve/caches/memory.py`); the answers a page load asks for also go to the disk cache
  (`serve/caches/disk.py`), so a restart answers at once.
- Answer shapes, filters and paging: `serve/service/answers.py`; comparisons, the guidance and
  the report: plain functions of analyses (`compare.py`, `report.py`) this service hands its
  lookups to; exports: `serve/service/export.py`.
Nothing is ever written into the logdir.
"""

from __future__ import annotations

import gzip
import json
import weakref
from typing import TYPE_CHECKING

from tb_roofline import errors, settings
from tb_roofline.serve.caches import disk as disk_cache
from tb_roofline.serve.caches.disk import DiskCache
from tb_roofline.serve.caches.memory import ByteLRU, CompareCache, memory_budget_bytes, sized
from tb_roofline.serve.service import export as export_module
from tb_roofline.serve.service.analyses import Analyses, Inputs
from tb_roofline.serve.service.discovery import ALL_HOSTS, Run, RunIndex
from tb_roofline.serve.service.hosts import HostReader, KeyLocks, SingleFlight, max_file_bytes

if TYPE_CHECKING:
    from tb_roofline.model.records.roofline import Analysis
    from tb_roofline.table.op_table import ProfileData

# The model, the device data sheets, numpy and the comparison are imported by the methods
# that use them, when they first run: listing runs, the plugin's is_active and a cached answer
# import none of them, and a command starts in what it needs (docs/benchmarks.md, start-up).

GZIP_LEVEL = 1  # 0.2 s for 30 MB of JSON, 11% larger than level 6 (0.9 s)
GZIP_MIN_BYTES = 1024
DISK_PLAIN_MAX_BYTES = 1 << 20  # larger answers go to disk only gzipped (what browsers ask)


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
        engine_metrics_file: str | None = None,
        model_config_file: str | None = None,
    ):
        self.logdir = logdir
        self.engine_metrics_file = engine_metrics_file  # overrides engine_metrics.prom
        self.device_file = device_file  # overrides the roofline_device.json lookup (CLI flag)
        self.workload_file = workload_file  # overrides the roofline_workload.json lookup
        self.index = RunIndex(logdir) if logdir else None
        if self.index:
            self.index.has_any()  # start the first scan now, so is_active() knows by page load
        self.max_file_bytes = max_file_bytes(max_file_mb)
        self.disk_cache = DiskCache.from_env(logdir)
        self.hosts_reader = HostReader(
            self.max_file_bytes,
            self.disk_cache,
            progress,
            logdir=logdir,
            model_config_file=model_config_file,  # overrides model_config.json
        )
        # One lock per answer and per analysis being made (answers take an analysis lock,
        # analyses the host locks, never the reverse).
        self._locks = KeyLocks()
        self._flights = SingleFlight()  # derived answers being made, shared by their askers
        self.analyses = Analyses(logdir, self.index, device_file, self.hosts_reader, self._locks)
        # Memory caches bounded by bytes (a long-running TensorBoard must not grow without
        # bound, and twenty small runs must not push each other out):
        # (kind, run, host, parameters, gzip) -> (signatures, encoded JSON, gzipped)
        self._answer_cache = ByteLRU(memory_budget_bytes("answers"))
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
        return self.index is not None and bool(self.index) and self.index.has_any()

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
        tab shows while its requests wait; the hosts its last answers left out (with why);
        and whether a Dask cluster's conversions are done here instead (it is down). Cheap:
        the scan's index and lookups."""
        r = self.resolve_run(run)
        return {
            "run": r.run,
            **self.hosts_reader.reads.of(r.run),
            "hosts_not_read": self.hosts_not_read(r.run).get(r.run, {}),
            "cluster": _cluster_state(),
        }

    def hosts_not_read(self, run: str | None = None) -> dict:
        """{run: {host: why}}: the hosts the last answers of a run (all runs, or `run`) left
        out, each with its error (damaged, too large, gone, unreadable)."""
        return self.analyses.hosts_not_read(run)

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

    # --- reading and analysis -------------------------------------------------------------
    def read_host(self, run: Run, hostfile) -> ProfileData:
        """One host file's read profile (cached), as the reader gave it."""
        return self.hosts_reader.read(run, [hostfile])[0].result()

    def analysis(self, run_name: str, host: str) -> Analysis:
        return self.analyses.entry(self._inputs(run_name, host))[0]

    def _inputs(self, run_name: str, host: str) -> Inputs:
        """What an analysis of (run, host) is made from, with the identity of each file."""
        run = self.resolve_run(run_name)
        return self.analyses.inputs(run, self.resolve_files(run, host))

    # --- API answers: plain Python (`answer`) or JSON (`encoded`), made by one function each -
    def answer(self, kind: str, run: str, host: str, capped: bool = False, **params) -> dict:
        """The answer of `device`, `program`, `ops`, `diagnostics` or `comm` as plain Python:
        exactly what `encoded` serves as JSON (`capped`: cut at TB_ROOFLINE_MAX_ANSWER_MB as
        the HTTP route's is; otherwise every row)."""
        return _answer_of(
            kind, self.analysis(run, host), run, host, _with_cap(kind, params, capped)
        )

    def device(self, run: str, host: str) -> dict:
        return self.answer("device", run, host)

    def program(
        self,
        run: str,
        host: str,
        include_infeed_outfeed: bool = True,
        offset: int = 0,
        limit: int | None = None,
    ) -> dict:
        return self.answer(
            "program",
            run,
            host,
            include_infeed_outfeed=include_infeed_outfeed,
            offset=offset,
            limit=limit,
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
        precisions=(),
        caveats=(),
    ) -> dict:
        return self.answer(
            "ops",
            run,
            host,
            include_infeed_outfeed=include_infeed_outfeed,
            categories=categories,
            bound_by=bound_by,
            name=name,
            offset=offset,
            limit=limit,
            view=view,
            rows=rows,
            precisions=precisions,
            caveats=caveats,
        )

    def diagnostics(self, run: str, host: str) -> dict:
        return self.answer("diagnostics", run, host)

    def comm(self, run: str, host: str, include_infeed_outfeed: bool = True) -> dict:
        """The communication roofline: one point per collective (model/records/comm.py)."""
        return self.answer("comm", run, host, include_infeed_outfeed=include_infeed_outfeed)

    def encoded(
        self, kind: str, run: str, host: str, accept_gzip: bool = False, **params
    ) -> tuple[bytes, bool]:
        """The JSON answer of `device`, `program`, `ops`, `diagnostics` or `comm` as bytes
        (gzip-compressed when the client takes it and it is worth it): (body, gzipped).

        Kept per (run, host, parameters) while the files behind it are unchanged, so a warm
        request costs a stat per file and a lookup, not rows and JSON for every op. The
        answers a page load asks for (no filters) also go to the disk cache: after a restart
        they are served without reading the profile or redoing the analysis."""
        inputs = self._inputs(run, host)
        params = _with_cap(kind, params, True)
        key = ("answer", kind, run, host or ALL_HOSTS, _hashable(params), bool(accept_gzip))
        hit = self._answer_cache.get(key)
        if hit is not None and hit[0] == inputs.signatures:
            return hit[1], hit[2]
        with self._locks.hold(key):
            hit = self._answer_cache.get(key)
            if hit is not None and hit[0] == inputs.signatures:
                return hit[1], hit[2]
            disk_key = self._answer_disk_key(key, inputs, params)
            disk = self.disk_cache if disk_key else None  # a key only where there is a cache
            stored = disk.get(disk_key) if disk is not None and disk_key else None
            if isinstance(stored, tuple) and len(stored) == 2 and isinstance(stored[0], bytes):
                body, zipped = stored
            else:  # the whole conversion (read, analysis, answer) within the memory budget
                with self.hosts_reader.budget.admit(
                    self.hosts_reader.pending_bytes(inputs.run, inputs.files)
                ):
                    a, complete = self.analyses.entry(inputs)
                    body = json.dumps(
                        _answer_of(kind, a, run, host, params),
                        allow_nan=False,
                        separators=(",", ":"),
                    ).encode()
                    del a
                zipped = bool(accept_gzip) and len(body) >= GZIP_MIN_BYTES
                if zipped:
                    body = gzip.compress(body, GZIP_LEVEL, mtime=0)
                plain_fits = zipped or len(body) <= DISK_PLAIN_MAX_BYTES
                if disk is not None and disk_key and complete and plain_fits:
                    disk.put(disk_key, (body, zipped))
            self._answer_cache.put(key, (inputs.signatures, body, zipped), len(body))
            return body, zipped

    def _answer_disk_key(self, key, inputs: Inputs, params: dict) -> str | None:
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
        cached one: keyed by the analysis object, so a re-read profile makes it anew. Made
        once however many requests ask at the same time: the others wait for it and take the
        one made, kept or not (each making its own would multiply the memory)."""
        full_key = (id(analysis),) + tuple(key)
        hit = self.derived.get(full_key)
        if hit is not None and hit[0]() is analysis:
            return hit[1]

        def made():
            value = make()  # held by a weak reference: the analysis cache decides its lifetime
            self.derived.put(full_key, (weakref.ref(analysis), value), *sized(value))
            return value

        return self._flights.run(full_key, made)

    def comparison(
        self,
        base: str,
        run: str,
        base_host: str = "",
        host: str = "",
        base_step=None,
        step=None,
        include_infeed_outfeed: bool = True,
        view: str = "op",
        base_service: RooflineService | None = None,
    ):
        """(Comparison, base side info, candidate side info) of two runs, hosts or steps
        (serve/service/compare.py). `base_service`: where the base run lives when not in this
        logdir (the CLI comparing two logdirs)."""
        from tb_roofline.serve.service import compare as compare_api

        base_service = base_service or self
        a_base = base_service.analysis(base, base_host)
        a_cand = self.analysis(run, host)
        return compare_api.comparison(
            compare_api.SideInput(base, base_host, base_service.hosts(base)["format"], a_base),
            compare_api.SideInput(run, host, self.hosts(run)["format"], a_cand),
            base_step,
            step,
            include_infeed_outfeed,
            view,
            cache=self.compare_cache,
        )

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
        base_service: RooflineService | None = None,
    ) -> dict:
        """Two runs (hosts, steps) on one roofline, the `/compare` answer (docs/compare.md)."""
        from tb_roofline.serve.service import compare as compare_api

        compare_api.check_arguments(base, level)
        cmp, base_info, cand_info = self.comparison(
            base,
            run,
            base_host,
            host,
            base_step,
            step,
            include_infeed_outfeed,
            view,
            base_service=base_service,
        )
        return compare_api.compare_answer(
            cmp,
            base_info,
            cand_info,
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
        """Findings, time per class and throughput (model/guidance/findings.py, docs/guidance.md),
        kept for the analysis it came from."""
        from tb_roofline.model.guidance.findings import guidance
        from tb_roofline.model.serving.engine_figures import engine_comparison
        from tb_roofline.serve.service import report
        from tb_roofline.serve.service.guidance import guidance_answer

        a = self.analysis(run, host)
        r = self.resolve_run(run)
        files = self.resolve_files(r, host)
        wl = report.workload_for(self.workload_file, files, self.logdir, workload)
        devices = report.devices_in_view(a, len(r.files), len(files))
        key = ("guidance", include_infeed_outfeed, repr(wl), devices)
        answer = self.derived_answer(
            a, key, lambda: guidance_answer(guidance(a, include_infeed_outfeed, wl, devices))
        )
        engine = report.engine_for(self.engine_metrics_file, files, self.logdir)
        return dict(
            answer,
            run=run,
            host=host or ALL_HOSTS,
            engine_figures=engine_comparison(engine, a.serving or []),
        )

    def encoded_guidance(self, run: str, host: str, include_infeed_outfeed: bool = True) -> bytes:
        """`guidance` as the HTTP route sends it (JSON bytes), encoded once per analysis and
        question however many requests ask at the same time, as the answer itself is."""
        a = self.analysis(run, host)
        key = ("guidance-json", run, host or ALL_HOSTS, include_infeed_outfeed)
        return self.derived_answer(
            a,
            key,
            lambda: json.dumps(
                self.guidance(run, host, include_infeed_outfeed), allow_nan=False
            ).encode(),
        )

    def report(
        self,
        run: str,
        host: str,
        include_infeed_outfeed: bool = True,
        top: int = 20,
        workload: dict | None = None,
    ) -> dict:
        """Everything in one answer, for scripts and agents (serve/service/report.py)."""
        from tb_roofline.serve.service import report

        a = self.analysis(run, host)
        guide = self.guidance(run, host, include_infeed_outfeed, workload)
        files = self.resolve_files(self.resolve_run(run), host)
        return report.full_report(a, guide, run, host, include_infeed_outfeed, top, files)

    def export(
        self, run: str, host: str, include_infeed_outfeed: bool = True, level="op", fmt="csv", **f
    ):
        """(text, content type, file name): see serve/service/export.py; `f`: the op filters,
        paging and view of `ops`."""
        chunks, content_type, filename = self.export_stream(
            run, host, include_infeed_outfeed, level, fmt, **f
        )
        return "".join(chunks), content_type, filename

    def export_stream(
        self, run: str, host: str, include_infeed_outfeed: bool = True, level="op", fmt="csv", **f
    ):
        """(the text's pieces, content type, file name): every row the filters keep, never
        capped; the analysis is made (and any error raised) before the first piece."""
        export_module.check(level, fmt)
        return export_module.export_chunks(
            self.analysis(run, host), run, host, include_infeed_outfeed, level, fmt, **f
        )


def _cluster_state() -> dict | None:
    """The Dask cluster's state for `/progress` (`execute/cluster.py` `local_fallback`): None
    when no conversion has asked for a cluster yet (its module is not even imported)."""
    import sys

    cluster = sys.modules.get("tb_roofline.execute.cluster")
    return cluster.local_fallback() if cluster is not None else None


def _with_cap(kind: str, params: dict, capped: bool) -> dict:
    """The parameters of an answer cut at TB_ROOFLINE_MAX_ANSWER_MB (the first page that
    fits, serve/service/answers.py), for the kinds with rows."""
    from tb_roofline.serve.service import answers

    if capped and kind in answers.CAPPED_KINDS:
        return {**params, "max_bytes": settings.mb(settings.MAX_ANSWER_MB)}
    return params


def _answer_of(kind: str, a, run: str, host: str, params: dict) -> dict:
    from tb_roofline.serve.service import answers

    return answers.ANSWERS[kind](a, run, host, **params)


def _hashable(params: dict) -> tuple:
    return tuple(
        sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items())
    )
