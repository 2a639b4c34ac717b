"""The MCP server's tools as plain functions over `RooflineService` (docs/mcp.md).

Each tool takes the service and its arguments and returns a dict. The numbers come from the
same service calls the HTTP routes make (`serve/web/plugin.py`: `list_runs`, `hosts`, `encoded`,
`guidance`, `compare`), so a tool's answer holds the HTTP API's values, shaped for an agent:

- small by default: the top `limit` rows, the columns that matter (`columns` asks for others),
  numbers rounded to `significant_digits` (6, as `/compare`; 0 keeps full precision);
- records as objects (`{"operation": ..., ...}`) instead of the API's column arrays;
- a unit in every field name: the HTTP API's name, with the unit appended where the name
  lacks one (`unit_name`): `flop_rate` -> `flop_rate_gflops`, `hbm_bw` -> `hbm_bw_gibs`,
  `operational_intensity` -> `operational_intensity_flop_per_byte`.

Filter values are matched without regard to case against the values the run has (a value
it has not is an error naming them: `mcp_answers.choose`); pages are cut to the byte cap
(`mcp_answers.fit`). Errors are the service's public errors (same classes and messages as the
HTTP answers); `serve/mcp/server.py` turns them into tool results with `isError`, with the
valid values of the argument at fault (`valid_values`). Nothing here writes anything.
"""

from __future__ import annotations

import json

import numpy as np

from tb_roofline import errors
from tb_roofline.model import rankings
from tb_roofline.serve.mcp import answers as mcp_answers
from tb_roofline.serve.mcp.answers import choose, fit
from tb_roofline.serve.service.compare import SIGNIFICANT_DIGITS, round_significant

DEFAULT_LIMIT = 10
MAX_LIMIT = 1000

OP_COLUMNS = (
    "rank",
    "operation",
    "category",
    "precision",
    "program",
    "program_id",
    "host",
    "occurrences",
    "total_self_time_us",
    "self_time_percent",
    "flops",
    "bytes",
    "flop_rate",
    "memory_bw",
    "bottleneck_operational_intensity",
    "bound_by",
    "peak_flop_rate",
    "roofline_efficiency",
    "potential_time_saved_us",
    "caveat",
    "measurement",
    "flops_source",
)
PROGRAM_COLUMNS = (
    "record_type",
    "step",
    "host",
    "total_time_per_core_us",
    "flops",
    "bytes",
    "flop_rate",
    "hbm_bw",
    "operational_intensity",
    "bound_by",
    "peak_flop_rate",
    "roofline_efficiency",
    "flop_coverage",
    "bytes_coverage",
    "caveat",
    "measurement",
)
PAIR_COLUMNS = (
    "status",
    "match_rule",
    "change",
    "program",
    "base_operation",
    "cand_operation",
    "base_precision",
    "cand_precision",
    "delta_time_us",
    "delta_time_percent",
    "speedup",
    "share_of_change",
    "base_total_self_time_us",
    "cand_total_self_time_us",
    "base_bound_by",
    "cand_bound_by",
    "base_roofline_efficiency",
    "cand_roofline_efficiency",
    "delta_flop_rate",
    "delta_operational_intensity",
    "bound_by_changed",
    "roof_changed",
)
PROGRAM_PAIR_COLUMNS = (
    "status",
    "change",
    "base_record_type",
    "base_step",
    "base_host",
    "cand_record_type",
    "cand_step",
    "cand_host",
    "delta_time_us",
    "delta_time_percent",
    "speedup",
    "base_total_time_per_core_us",
    "cand_total_time_per_core_us",
    "base_bound_by",
    "cand_bound_by",
    "base_roofline_efficiency",
    "cand_roofline_efficiency",
    "delta_flop_rate",
    "delta_operational_intensity",
)
ORDERS = ("self_time", "time_saved")
NO_VALUE = "none"  # the precision / caveat filter value for rows without one
FINGERPRINTS = "fingerprints"  # top_ops' own field: the op's fingerprints, as compare's
VIEWS = ("op", "kernel", "kernel_hw")  # the op table, PyTorch GPU kernels, kernels (HW)
# Caveat codes (model/records.py, model/roofline.py, table/op_table.py), and NO_VALUE.
CAVEATS = (
    "async_start",
    "async_wait",
    "host_transfer",
    "peer_transfer",
    "no_cost",
    "above_roof",
    "container",
    NO_VALUE,
)


# --- shaping --------------------------------------------------------------------------------


def unit_name(name: str) -> str:
    """The field name an MCP answer uses: the HTTP API's, with its unit where it lacks one."""
    if name.endswith("flop_rate"):
        return name + "_gflops"  # GFLOP/s
    if name.endswith("_bw"):
        return name + "_gibs"  # GiB/s
    if name.endswith("operational_intensity") or name == "ridge_point":
        return name + "_flop_per_byte"
    return name


def shape(value, digits: int):
    """Field names with units and floats rounded to `digits` significant digits (0: as is),
    all through the structure."""
    if isinstance(value, dict):
        return {unit_name(k): shape(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [shape(v, digits) for v in value]
    if isinstance(value, float) and digits:
        return float(round_significant(np.array([value]), digits)[0])
    return value


def _digits(significant_digits) -> int:
    if significant_digits is None:
        return SIGNIFICANT_DIGITS
    if not 0 <= significant_digits <= 17:
        raise errors.InvalidArgumentError(
            f"significant_digits must be between 0 and 17, not {significant_digits}"
        )
    return significant_digits


def _page(offset: int, limit: int | None):
    if offset < 0:
        raise errors.InvalidArgumentError("'offset' must not be negative")
    if limit is not None and not 0 <= limit <= MAX_LIMIT:
        raise errors.InvalidArgumentError(f"'limit' must be between 0 and {MAX_LIMIT}")
    return offset, DEFAULT_LIMIT if limit is None else limit


def _next(offset: int, returned: int, total: int):
    """The next page's offset; None on the last page and for `limit: 0` (counts only), so a
    loop over `next_offset` always ends."""
    nxt = offset + returned
    return nxt if returned and nxt < total else None


def _view(view: str) -> str:
    return choose("view", [view], VIEWS, "views")[0]


def _pick(columns, wanted, default) -> list:
    """The columns an answer shows: `wanted` (HTTP names or MCP names), else `default`."""
    if not wanted:
        return [c for c in default if c in columns]
    by_name = {unit_name(c): c for c in columns} | {c: c for c in columns}
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        raise mcp_answers.ChoiceError(
            f"unknown column(s) {', '.join(map(repr, unknown))}; columns: "
            + ", ".join(unit_name(c) for c in columns),
            "columns",
            [unit_name(c) for c in columns],
        )
    return [by_name[w] for w in wanted]


def _records(columns, rows, keep) -> list:
    index = [columns.index(c) for c in keep]
    return [{c: r[i] for c, i in zip(keep, index)} for r in rows]


def _io(infeed_outfeed: str) -> bool:
    if infeed_outfeed not in ("include", "exclude"):
        raise errors.InvalidArgumentError(
            f"infeed_outfeed must be 'include' or 'exclude', not {infeed_outfeed!r}"
        )
    return infeed_outfeed == "include"


def _encoded(service, kind, run, host, whole: bool = False, **params) -> dict:
    """An answer exactly as the HTTP route serves it (the plugin's `_encoded`), decoded;
    `whole`: every row even where the route's answer is cut at TB_ROOFLINE_MAX_ANSWER_MB (a
    tool that filters, sorts or counts the rows itself; its own cap then pages them)."""
    body, _ = service.encoded(kind, run, host or "", False, **params)
    answer = json.loads(body)
    if whole and answer.get("capped_by"):
        answer = getattr(service, kind)(run, host or "", **params)
    return answer


# --- the tools ------------------------------------------------------------------------------


def list_runs(service, offset: int = 0, limit: int | None = 50) -> dict:
    """Runs in the logdir, newest first, each with its hosts and format (`/runs`)."""
    offset, limit = _page(offset, limit)
    answer = service.list_runs()
    runs = answer["runs"]
    page = [{k: r[k] for k in ("run", "format", "hosts")} for r in runs[offset : offset + limit]]
    return fit(
        {
            "runs": page,
            "total_count": len(runs),
            "offset": offset,
            "next_offset": _next(offset, len(page), len(runs)),
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
    return shape(_encoded(service, "device", run, host), _digits(significant_digits))


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
    offset, limit = _page(offset, limit)
    a = _encoded(
        service, "program", run, host, whole=True, include_infeed_outfeed=_io(infeed_outfeed)
    )
    keep = _pick(a["columns"], columns, PROGRAM_COLUMNS)
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
                "next_offset": _next(offset, len(page), len(rows)),
                "records": _records(a["columns"], page, keep),
            },
            _digits(significant_digits),
        ),
        "records",
        offset,
        len(rows),
    )


def _value_mask(values, wanted) -> np.ndarray:
    """Rows whose value is one of `wanted`; NO_VALUE stands for a row without one."""
    wanted = set(wanted)
    return np.fromiter(((v or NO_VALUE) in wanted for v in values), bool, count=len(values))


def _filters(service, run, host, io, view, category, bound_by, facets=None) -> dict:
    """The API's filter arguments, each value spelt as the run has it (`choose`)."""
    params = dict(include_infeed_outfeed=io, view=view, name="", categories=[], bound_by=[])
    if category or bound_by:
        if facets is None:
            facets = _encoded(service, "ops", run, host, offset=0, limit=0, **params)["facets"]
        where = f"run {run!r}" + (f", host {host!r}" if host else "")
        params["categories"] = choose("category", category, facets["category"], where)
        params["bound_by"] = choose("bound_by", bound_by, facets["bound_by"], where)
    return params


def _local_filter(cols, rows, precision, caveat) -> list:
    """Rows kept by the filters the HTTP API has not (precision, caveat)."""
    mask = np.ones(len(rows), bool)
    for values, column, valid in ((precision, "precision", None), (caveat, "caveat", CAVEATS)):
        if values:
            i = cols.index(column)
            if valid is None:
                valid = sorted({r[i] for r in rows if r[i]}) + [NO_VALUE]
            mask &= _value_mask([r[i] for r in rows], choose(column, values, valid))
    return [r for r, keep in zip(rows, mask.tolist()) if keep]


def top_ops(
    service,
    run: str,
    host: str = "",
    infeed_outfeed: str = "include",
    view: str = "op",
    category: list | None = None,
    bound_by: list | None = None,
    name: str = "",
    precision: list | None = None,
    caveat: list | None = None,
    order: str = "self_time",
    offset: int = 0,
    limit: int | None = None,
    columns: list | None = None,
    significant_digits: int | None = None,
) -> dict:
    """Op records (`/ops`) filtered and paged. `order`: `self_time` (the API's rank order) or
    `time_saved` (the top opportunities, as `tb-roofline report`'s `top_ops` and the tab list
    them: the ops model/rankings.py ranks, by its `opportunity_rank`)."""
    offset, limit = _page(offset, limit)
    if order not in ORDERS:
        raise errors.InvalidArgumentError(
            f"order must be one of {', '.join(ORDERS)}, not {order!r}"
        )
    params = _filters(service, run, host, _io(infeed_outfeed), _view(view), category, bound_by)
    params["name"] = name or ""
    local = bool(precision or caveat) or order != "self_time"
    if local:  # filters the API has not, or another order: all rows, then filter and page
        a = _encoded(service, "ops", run, host, whole=True, offset=0, limit=None, **params)
    else:  # the API pages itself: exactly its answer
        a = _encoded(service, "ops", run, host, offset=offset, limit=limit, **params)
    cols, rows = a["columns"], a["rows"]
    total = a["total_count"]
    if local:
        rows = _local_filter(cols, rows, precision, caveat)
        if order == "time_saved":  # the one ranking (model/rankings.py): ranked ops only
            i = cols.index(rankings.RANK_COLUMN)
            rows = sorted((r for r in rows if r[i] is not None), key=lambda r: r[i])
        total = len(rows)
        rows = rows[offset : offset + limit]
    asked = [c for c in columns or () if c != FINGERPRINTS]
    keep = _pick(cols, asked, OP_COLUMNS)
    records = _records(cols, rows, keep)
    if a["view"] == "op" and (FINGERPRINTS in (columns or ()) or not columns):
        records = _with_fingerprints(service, run, host, cols, rows, records)
    return fit(
        shape(
            {
                "run": a["run"],
                "host": a["host"],
                "view": a["view"],
                "order": order,
                "total_count": total,
                "unfiltered_count": a["unfiltered_count"],
                "offset": offset,
                "next_offset": _next(offset, len(rows), total),
                "facets": a["facets"],
                "ops": records,
            },
            _digits(significant_digits),
        ),
        "ops",
        offset,
        total,
    )


def _with_fingerprints(service, run, host, cols, rows, records) -> list:
    """Each record with `fingerprints`: what its op computes as `compare` names it (each
    pair's `base_fingerprint` / `cand_fingerprint`), one per input shape of a PyTorch op;
    null where the reader knows none."""
    keys = service.analysis(run, host or "").scope.tables["op"].keys
    known: dict = {}
    for pid, op, fp in zip(
        keys["program_id"].tolist(), keys["operation"].tolist(), keys["fingerprint"].tolist()
    ):
        if fp:
            known.setdefault((pid, op), set()).add(fp)
    p, o = cols.index("program_id"), cols.index("operation")
    return [
        dict(rec, **{FINGERPRINTS: sorted(known[(r[p], r[o])]) if (r[p], r[o]) in known else None})
        for rec, r in zip(records, rows)
    ]


def _op_key(r: dict) -> tuple:
    return (r["program_id"], r["operation"], r["precision"], r["host"])


def get_op(
    service,
    run: str,
    operation: str,
    host: str = "",
    program_id: str | None = None,
    precision: str | None = None,
    view: str = "op",
    infeed_outfeed: str = "include",
    significant_digits: int | None = None,
) -> dict:
    """One op in full: its records (every column; one per program, precision and host it
    ran in), the guidance findings that name it with their evidence, its shapes and the
    kernels it launched (PyTorch traces)."""
    if not operation:
        raise errors.InvalidArgumentError("missing parameter 'operation'")
    io = _io(infeed_outfeed)
    view = _view(view)
    a = _encoded(
        service, "ops", run, host, whole=True, include_infeed_outfeed=io, name=operation, view=view
    )
    cols = a["columns"]
    everything = [dict(zip(cols, r)) for r in a["rows"]]
    records = [
        r
        for r in everything
        if r["operation"] == operation
        and (program_id is None or r["program_id"] == program_id)
        and (precision is None or r["precision"] == precision)
    ]
    if not records:
        exc = errors.NotFoundError(
            f"no op {operation!r} in run {run!r}"
            + (f", host {host!r}" if host else "")
            + (f", program_id {program_id!r}" if program_id is not None else "")
            + (f", precision {precision!r}" if precision is not None else "")
            + (f", view {view!r}" if view != "op" else "")
            + "; top_ops with name= finds the exact names"
        )
        exc.field = "operation"  # the ops whose names contain it, as candidates
        exc.valid = sorted({r["operation"] for r in everything})[:20]
        raise exc
    keys = {_op_key(r) for r in records}
    g = service.guidance(run, host or "", io)
    findings = [
        f
        for f in g["findings"]
        if any(
            (o["program_id"], o["operation"], o["precision"], o["host"]) in keys for o in f["ops"]
        )
    ]
    shapes = _shapes(service, run, host, records) if view == "op" else []
    kernels = _kernels(service, run, host, records) if view == "op" else []
    answer = shape(
        {
            "run": a["run"],
            "host": a["host"],
            "view": a["view"],
            "operation": operation,
            "records": records,
            "findings": findings,
            "shapes": shapes,
            "kernels": kernels,
        },
        _digits(significant_digits),
    )
    for key in ("findings", "records"):  # one per host it ran on: a pod's can be long
        answer = fit(answer, key, 0, len(answer[key]), paged=False)
    return answer


def _per_record(service, run, host, records, facts_name: str, row) -> list:
    """`row(record, use)` for each use the analysis facts `facts_name` (op_kernels,
    op_shapes: keyed by program, op and precision) hold for each record's op."""
    uses = getattr(service.analysis(run, host or "").facts, facts_name, None) or {}
    return [
        row(r, u)
        for r in records
        for u in uses.get((r["program_id"], r["operation"], r["precision"]), [])
    ]


def _kernels(service, run, host, records) -> list:
    """The kernels each record's op launched, most time first (the reader keeps the top
    table.timeline.MAX_KERNELS_PER_OP per op): name, launches, total and mean time."""
    return _per_record(
        service,
        run,
        host,
        records,
        "op_kernels",
        lambda r, u: {
            "program_id": r["program_id"],
            "precision": r["precision"],
            "kernel": u.name,
            "launches": u.launches,
            "time_us": u.time_ps / 1e6,
            "mean_time_us": u.time_ps / 1e6 / u.launches if u.launches else None,
        },
    )


def _shapes(service, run, host, records) -> list:
    """The shapes each record's op ran with (the timeline facts the guidance rules read):
    kind (`gemm`: M, N, K; `array`, `tensor`: each array's dims; `copy`; `custom_call`: its
    output arrays, then its operands'), calls and time."""
    return _per_record(
        service,
        run,
        host,
        records,
        "op_shapes",
        lambda r, u: {
            "program_id": r["program_id"],
            "precision": r["precision"],
            "kind": u.kind,
            "shape": u.text,
            "dims": [list(d) if isinstance(d, (list, tuple)) else d for d in u.dims],
            "calls": u.calls,
            "time_us": u.time_ps / 1e6,
        },
    )


def get_guidance(
    service,
    run: str,
    host: str = "",
    infeed_outfeed: str = "include",
    offset: int = 0,
    limit: int | None = None,
    significant_digits: int | None = None,
) -> dict:
    """Guidance (`/guidance`): the findings (rule, ops, evidence, time saved, suggestion),
    time by class and throughput."""
    offset, limit = _page(offset, limit)
    g = service.guidance(run, host or "", _io(infeed_outfeed))
    findings = g["findings"]
    answer = {k: v for k, v in g.items() if k != "findings"}
    page = findings[offset : offset + limit]
    answer.update(
        findings_count=len(findings),
        offset=offset,
        next_offset=_next(offset, len(page), len(findings)),
        findings=page,
    )
    return fit(shape(answer, _digits(significant_digits)), "findings", offset, len(findings))


def compare(
    service,
    base: str,
    run: str,
    base_host: str = "",
    host: str = "",
    base_step: str | None = None,
    step: str | None = None,
    level: str = "op",
    infeed_outfeed: str = "include",
    view: str = "op",
    category: list | None = None,
    bound_by: list | None = None,
    name: str = "",
    offset: int = 0,
    limit: int | None = None,
    columns: list | None = None,
    significant_digits: int | None = None,
) -> dict:
    """Two runs, hosts or steps (`/compare`): both sides, the summary and notes first, then
    one page of pairs (ops, or program records with level=program) as objects."""
    offset, limit = _page(offset, limit)
    io, view = _io(infeed_outfeed), _view(view)
    args = (base, run, base_host or "", host or "", base_step, step, level, io, view)
    if category or bound_by:  # spelt as either run has them
        facets = service.compare(*args, [], [], "", 0, 0)["facets"]
        where = f"runs {base!r} and {run!r}"
        category = choose("category", category, facets.get("category", []), where)
        bound_by = choose("bound_by", bound_by, facets.get("bound_by", []), where)
    a = service.compare(
        *args, list(category or []), list(bound_by or []), name or "", offset, limit
    )
    cols = a["columns"]
    keep = _pick(cols, columns, PAIR_COLUMNS if a["level"] == "op" else PROGRAM_PAIR_COLUMNS)
    index = [cols.index(c) for c in keep]
    n = len(a["values"][0]) if a["values"] else 0
    pairs = [{c: a["values"][i][j] for c, i in zip(keep, index)} for j in range(n)]
    sides = {
        side: {k: v for k, v in a[side].items() if k != "device"}
        | {"device_type": a[side]["device"]["type"]}
        for side in ("base", "cand")
    }
    total = a["total_count"]
    return fit(
        shape(
            {
                **sides,
                "level": a["level"],
                "view": a["view"],
                "infeed_outfeed": a["infeed_outfeed"],
                "summary": a["summary"],
                "notes": a["notes"],
                "total_count": total,
                "unfiltered_count": a["unfiltered_count"],
                "offset": offset,
                "next_offset": _next(offset, n, total),
                "facets": a["facets"],
                "pairs": pairs,
            },
            _digits(significant_digits),
        ),
        "pairs",
        offset,
        total,
    )


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
    offset, limit = _page(offset, limit)
    a = _encoded(service, "comm", run, host, include_infeed_outfeed=_io(infeed_outfeed))
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
                "next_offset": _next(offset, len(page), len(points)),
                "points": page,
            },
            _digits(significant_digits),
        ),
        "points",
        offset,
        len(points),
    )


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
        raise mcp_answers.ChoiceError(
            f"severity must be among {', '.join(SEVERITIES)}, not {', '.join(map(repr, bad))}",
            "severity",
            SEVERITIES,
        )
    offset, limit = _page(offset, limit)
    a = _encoded(service, "diagnostics", run, host)
    diags = a["diagnostics"]
    if severity:
        diags = [d for d in diags if d["severity"] in severity]
    hosts = service.hosts(run)["hosts"]
    grouped = mcp_answers.group_diagnostics(diags, hosts)
    page = grouped[offset : offset + limit]
    return fit(
        {
            "run": a["run"],
            "host": a["host"],
            "total_count": len(grouped),
            "diagnostics_count": len(diags),
            "offset": offset,
            "next_offset": _next(offset, len(page), len(grouped)),
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
