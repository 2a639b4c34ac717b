"""The MCP server's tools as plain functions over `RooflineService` (docs/mcp.md).

Each tool takes the service and its arguments and returns a dict. The numbers come from the
service's plain answers, the ones the HTTP routes encode (`list_runs`, `hosts`, `answer`,
`guidance`, `compare`; never JSON decoded again), so a tool's answer holds the HTTP API's
values, shaped for an agent:

- small by default: the top `limit` rows, the columns that matter (`columns` asks for others),
  numbers rounded to `significant_digits` (6, as `/compare`; 0 keeps full precision);
- records as objects (`{"operation": ..., ...}`) instead of the API's column arrays;
- a unit in every field name: the HTTP API's name, with the unit appended where the name
  lacks one (`unit_name`): `flop_rate` -> `flop_rate_gflops`, `hbm_bw` -> `hbm_bw_gibs`,
  `interconnect_bw` -> `interconnect_bw_gbs` (links in GB/s),
  `operational_intensity` -> `operational_intensity_flop_per_byte`.

Filter values are matched without regard to case against the values the run has (a value
it has not is an error naming them: `envelope.choose`); pages are cut to the byte cap
(`envelope.fit`). Errors are the service's public errors (same classes and messages as the
HTTP answers); `serve/mcp/calls.py` turns them into tool results with `isError`, with the
valid values of the argument at fault (`valid_values`). Nothing here writes anything.

The tools over op records (`top_ops`, `get_op`, `compare`) are in `op_tools.py`; what they all
share (columns, units, rounding, paging) in `shaping.py`.
"""

from __future__ import annotations

from tb_roofline.serve.mcp import envelope
from tb_roofline.serve.mcp.envelope import choose, fit
from tb_roofline.serve.mcp.op_tools import compare, get_op, top_ops
from tb_roofline.serve.mcp.shaping import (
    PROGRAM_COLUMNS,
    answer_of,
    digits_of,
    io_flag,
    next_offset,
    paging,
    pick,
    records_of,
    shape,
)


def list_runs(service, offset: int = 0, limit: int | None = 50) -> dict:
    """Runs in the logdir, newest first, each with its hosts and format (`/runs`)."""
    offset, limit = paging(offset, limit)
    answer = service.list_runs()
    runs = answer["runs"]
    page = [{k: r[k] for k in ("run", "format", "hosts")} for r in runs[offset : offset + limit]]
    return fit(
        {
            "runs": page,
            "total_count": len(runs),
            "offset": offset,
            "next_offset": next_offset(offset, len(page), len(runs)),
            "scanning": answer["scanning"],
        },
        "runs",
        offset,
        len(runs),
    )


def list_hosts(service, run: str) -> dict:
    """The hosts of one run (`/hosts`); host "" or "*" means all of them aggregated."""
    return service.hosts(run)


def get_device(service, run: str, host: str = "", significant_digits: int | None = None) -> dict:
    """The device and its roofs, each peak with its source (`/device`)."""
    return shape(answer_of(service, "device", run, host), digits_of(significant_digits))


def get_program(
    service,
    run: str,
    host: str = "",
    infeed_outfeed: str = "include",
    offset: int = 0,
    limit: int | None = None,
    columns: list | None = None,
    significant_digits: int | None = None,
) -> dict:
    """Program records (`/program`): Total, Total (HW), one per host, Average, each step."""
    offset, limit = paging(offset, limit)
    a = answer_of(
        service, "program", run, host, whole=True, include_infeed_outfeed=io_flag(infeed_outfeed)
    )
    keep = pick(a["columns"], columns, PROGRAM_COLUMNS)
    rows = a["rows"]
    page = rows[offset : offset + limit]
    return fit(
        shape(
            {
                "run": a["run"],
                "host": a["host"],
                "num_steps": a["num_steps"],
                "has_hw_counters": a["has_hw_counters"],
                "views": a["views"],
                "total_count": len(rows),
                "offset": offset,
                "next_offset": next_offset(offset, len(page), len(rows)),
                "records": records_of(a["columns"], page, keep),
            },
            digits_of(significant_digits),
        ),
        "records",
        offset,
        len(rows),
    )


SUMMARY_TOP = 5  # findings and ops in a run summary
# What a run summary says of each top op (top_ops gives every column)
SUMMARY_OP_COLUMNS = (
    "operation",
    "category",
    "precision",
    "total_self_time_us",
    "bound_by",
    "roofline_efficiency",
    "potential_time_saved_us",
)


def get_summary(service, run: str, host: str = "", significant_digits: int | None = None) -> dict:
    """The first question in one call: the device's roofs, the Total program record, where
    the step time goes (classes), the top findings and top ops by time saved, and how many
    diagnostics of each severity; each part is the first rows of the tool that gives it in
    full (get_device, get_program, get_guidance, top_ops order=time_saved, get_diagnostics)."""
    from tb_roofline.serve.mcp import op_tools

    device = answer_of(service, "device", run, host)["device"]
    program = get_program(service, run, host, limit=1, significant_digits=0)
    guidance = get_guidance(service, run, host, limit=SUMMARY_TOP, significant_digits=0)
    ops = op_tools.top_ops(
        service,
        run,
        host,
        order="time_saved",
        limit=SUMMARY_TOP,
        significant_digits=0,
        columns=list(SUMMARY_OP_COLUMNS),
    )
    diags = answer_of(service, "diagnostics", run, host)["diagnostics"]
    severities = {s: sum(d["severity"] == s for d in diags) for s in SEVERITIES}
    answer = {
        "run": program["run"],
        "host": program["host"],
        "device": {
            k: device.get(k) for k in ("type", "kind", "num_cores", "num_hosts", "peaks_known")
        }
        | {
            "compute": [
                {"precision": c["precision"], "peak_gflops": c["peak_gflops"]}
                for c in device.get("compute", [])
            ],
            "memories": [
                {"name": m["name"], "peak_gbs": m["peak_gbs"]} for m in device.get("memories", [])
            ],
        },
        "num_steps": program["num_steps"],
        "total": program["records"][0] if program["records"] else None,
        "classes": guidance.get("classes"),
        "total_time_saved_us": guidance.get("total_time_saved_us"),
        "findings_count": guidance["findings_count"],
        "top_findings": [
            {k: f.get(k) for k in ("id", "rule", "title", "time_saved_us", "percent_of_step")}
            for f in guidance["findings"]
        ],
        "ranked_ops_count": ops["total_count"],
        "top_ops": ops["ops"],
        **({"top_ops_note": ops["note"]} if "note" in ops else {}),
        "diagnostics_by_severity": severities,
    }
    return shape(answer, digits_of(significant_digits))


def get_guidance(
    service,
    run: str,
    host: str = "",
    infeed_outfeed: str = "include",
    offset: int = 0,
    limit: int | None = None,
    significant_digits: int | None = None,
    detail: str = "compact",
) -> dict:
    """Guidance (`/guidance`): the findings (rule, ops, evidence, time saved, suggestion),
    time by class and throughput. `detail` compact (default): each finding's evidence without
    its ops' records (get_op has them) nor the formula said twice; full: as `/guidance`."""
    offset, limit = paging(offset, limit)
    g = service.guidance(run, host or "", io_flag(infeed_outfeed))
    findings = g["findings"]
    answer = {k: v for k, v in g.items() if k != "findings"}
    page = findings[offset : offset + limit]
    if detail != "full":
        page = [_compact_finding(f) for f in page]
    answer.update(
        findings_count=len(findings),
        offset=offset,
        next_offset=next_offset(offset, len(page), len(findings)),
        findings=page,
    )
    return fit(shape(answer, digits_of(significant_digits)), "findings", offset, len(findings))


def get_comm(
    service,
    run: str,
    host: str = "",
    infeed_outfeed: str = "include",
    kind: list | None = None,
    offset: int = 0,
    limit: int | None = None,
    significant_digits: int | None = None,
) -> dict:
    """The communication roofline (`/comm`): the device's link roofs and one point per
    collective and message size, longest first as the HTTP answer orders them, filtered by
    collective kind (matched as `choose` matches), paged."""
    offset, limit = paging(offset, limit)
    a = answer_of(service, "comm", run, host, include_infeed_outfeed=io_flag(infeed_outfeed))
    points = a["points"]
    if kind:
        where = f"run {run!r}" + (f", host {host!r}" if host else "")
        kept = choose("kind", kind, a["kinds"], where)
        points = [p for p in points if p["kind"] in kept]
    page = points[offset : offset + limit]
    return fit(
        shape(
            {
                "run": a["run"],
                "host": a["host"],
                "links": a["links"],
                "latency_note": a["latency_note"],
                "kinds": a["kinds"],
                "total_count": len(points),
                "unfiltered_count": len(a["points"]),
                "offset": offset,
                "next_offset": next_offset(offset, len(page), len(points)),
                "points": page,
            },
            digits_of(significant_digits),
        ),
        "points",
        offset,
        len(points),
    )


def _compact_finding(f: dict) -> dict:
    """A finding without the records of its ops in its evidence (`records_count` says how
    many; get_op gives them) and without the evidence's copy of `bound_formula`."""
    ev = f.get("evidence")
    if not isinstance(ev, dict):
        return f
    slim = {k: v for k, v in ev.items() if k != "records" and k != "bound_formula"}
    if "records" in ev:
        slim["records_count"] = len(ev["records"] or [])
    return {**f, "evidence": slim}


SEVERITIES = ("info", "warning", "error")


def get_diagnostics(
    service,
    run: str,
    host: str = "",
    severity: list | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> dict:
    """What the profile lacks or what was skipped (`/diagnostics`), one entry per message
    the hosts share (`count`, the first `hosts`), paged."""
    bad = [s for s in severity or [] if s not in SEVERITIES]
    if bad:
        raise envelope.ChoiceError(
            f"severity must be among {', '.join(SEVERITIES)}, not {', '.join(map(repr, bad))}",
            "severity",
            SEVERITIES,
        )
    offset, limit = paging(offset, limit)
    a = answer_of(service, "diagnostics", run, host)
    diags = a["diagnostics"]
    if severity:
        diags = [d for d in diags if d["severity"] in severity]
    hosts = service.hosts(run)["hosts"]
    grouped = envelope.group_diagnostics(diags, hosts)
    page = grouped[offset : offset + limit]
    return fit(
        {
            "run": a["run"],
            "host": a["host"],
            "total_count": len(grouped),
            "diagnostics_count": len(diags),
            "offset": offset,
            "next_offset": next_offset(offset, len(page), len(grouped)),
            "diagnostics": page,
        },
        "diagnostics",
        offset,
        len(grouped),
    )


def valid_values(service, exc, kwargs: dict) -> dict | None:
    """The argument at fault in a failed call and the values it may take (`field`,
    `valid_values`), where they can be told: a value that is not among its choices, an
    unknown run or host, a view the run has not. None otherwise (a damaged profile, ...)."""
    if getattr(exc, "field", None) is not None:
        return {"field": exc.field, "valid_values": list(exc.valid)}
    try:
        return _valid_names(service, str(exc), kwargs)
    except Exception:  # noqa: BLE001 (telling what is valid must not hide the error itself)
        return None


def _valid_names(service, message: str, kwargs: dict) -> dict | None:
    index = service.index
    for field in ("base", "run"):
        name = kwargs.get(field)
        if name and index is not None and index.find(name) is None:
            runs = [r.run for r in index.runs()]
            return {"field": field, "valid_values": runs[:100]}
    for field, of in (("base_host", "base"), ("host", "run")):
        host, run = kwargs.get(field), kwargs.get(of)
        if host not in (None, "", "*") and run:
            hosts = service.hosts(run)["hosts"]
            if host not in hosts:
                return {"field": field, "valid_values": hosts}
    if "views:" in message and kwargs.get("run"):
        from tb_roofline.serve.service.answers import views_of

        return {
            "field": "view",
            "valid_values": views_of(service.analysis(kwargs["run"], kwargs.get("host") or "")),
        }
    return None


TOOLS = (
    list_runs,
    list_hosts,
    get_device,
    get_program,
    top_ops,
    get_op,
    get_guidance,
    compare,
    get_diagnostics,
    get_comm,
)
