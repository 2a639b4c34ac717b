"""The guidance answer (`/guidance`) and the whole report (`/report`, `tb-roofline report
--format json`): device, program records, top ops, findings, throughput and diagnostics in one
documented schema (docs/guidance.md). Plain functions of an analysis: `RooflineService.guidance`
and `.report` look up the analysis, the run's files and its workload file and hand them here;
the service keeps the guidance for that analysis (`RooflineService.derived_answer`), so it
goes when the profile changes.
"""

from __future__ import annotations

import os

from tb_roofline import errors, settings
from tb_roofline.model.records import rankings
from tb_roofline.readers.metrics import engine as engine_metrics
from tb_roofline.serve.service import answers, workload_file
from tb_roofline.serve.service.discovery import ALL_HOSTS

REPORT_SCHEMA = "tb-roofline-report/1"


def workload_for(explicit_path: str | None, files: list, logdir: str, override: dict | None):
    """The workload of a run: `explicit_path` (the service's --workload-file), else the
    nearest roofline_workload.json of the run's first profile; the command line's values on
    top."""
    path = None
    try:
        path = explicit_path or (
            workload_file.find_workload_file(files[0].path, logdir) if files else None
        )
        base = workload_file.load_workload_file(path) if path else None
    except workload_file.WorkloadFileError as exc:
        raise errors.BadWorkloadFileError(f"workload file: {exc}") from None
    return workload_file.merge(base, override or {})


def engine_for(explicit_path: str | None, files: list, logdir: str) -> dict | None:
    """The engine's own FLOP and byte counters for a run (readers/metrics/engine.py):
    `explicit_path` (the service's --engine-metrics), else TB_ROOFLINE_ENGINE_METRICS, else
    the nearest engine_metrics.prom of the run's first profile; None when there is none."""
    path = explicit_path or settings.text(settings.ENGINE_METRICS) or None
    if path is None and files:
        path = workload_file.nearest_file(files[0].path, logdir, engine_metrics.FILE_NAME)
    if path is None:
        return None
    try:
        return engine_metrics.load(path).as_dict()
    except engine_metrics.EngineMetricsError as exc:
        raise errors.BadEngineMetricsFileError(f"engine metrics: {exc}") from None


def devices_in_view(a, run_hosts: int, view_hosts: int) -> int | None:
    """The devices the analysed hosts hold: the run's devices in the same share as its hosts."""
    return a.device.num_cores * run_hosts // max(view_hosts, 1) if a.device.num_cores else None


def full_report(
    a,
    guide: dict,
    run: str,
    host: str,
    include_io: bool = True,
    top: int = 20,
    files: list | tuple = (),
) -> dict:
    """The whole report of an analysis `a`, its guidance answer `guide` and its `files`."""
    prog = answers.program_answer(a, run, host, include_io)
    program = [dict(zip(prog["columns"], r)) for r in prog["rows"]]
    whole = answers.ops_answer(a, run, host, include_io)
    every = [dict(zip(whole["columns"], r)) for r in whole["rows"]]
    ops = rankings.ranked_dicts(every)  # the one ranking (model/records/rankings.py)
    unit = guide["unit"]  # the guidance's unit, so top ops and findings read alike
    total_us = guide["time"]["total_time_us"]
    for r in ops[: max(top, 0)]:
        saved = r["potential_time_saved_us"]
        r["potential_time_saved_per_unit_us"] = (
            None if saved is None or not total_us else saved * unit["time_us"] / total_us
        )
    return {
        "schema": REPORT_SCHEMA,
        "run": run,
        "host": host or ALL_HOSTS,
        "include_infeed_outfeed": include_io,
        "device": answers.device_json(a),
        "num_steps": a.num_steps,
        "columns": prog["columns"],
        "program": program,
        "top_ops": ops[: max(top, 0)],
        "top_ops_unit": unit,
        "op_count": len(every),
        "opportunity_count": len(ops),
        "guidance": {k: v for k, v in guide.items() if k not in ("run", "host")},
        "diagnostics": [d.to_json() for d in a.diagnostics],
        "files": [os.path.basename(f.path) for f in files],
    }
