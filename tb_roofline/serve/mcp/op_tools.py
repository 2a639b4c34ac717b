"""The MCP tools over op records: `top_ops` (filtered, ordered by self time or by the model's
ranking, paged), `get_op` (one op in full: records, findings, shapes, kernels) and `compare`
(two runs, hosts or steps). Plain functions over `RooflineService`, as in `tools.py`.
"""

from __future__ import annotations

from tb_roofline import errors
from tb_roofline.model.records import rankings
from tb_roofline.serve.mcp.envelope import choose, fit
from tb_roofline.serve.mcp.shaping import (
    CAVEATS,
    FINGERPRINTS,
    NO_VALUE,
    OP_COLUMNS,
    ORDERS,
    PAIR_COLUMNS,
    PROGRAM_PAIR_COLUMNS,
    answer_of,
    digits_of,
    io_flag,
    next_offset,
    paging,
    pick,
    records_of,
    shape,
    view_choice,
)


def _filters(service, run, host, io, view, category, bound_by, precision=(), caveat=()) -> dict:
    """The API's filter arguments (serve/service/answers.py `filter_mask`, the one rule), each
    value spelt as the run has it (`choose`): categories, bound-by and precisions among the
    view's facets (`none`: rows without a precision), caveats among the model's codes."""
    params = dict(include_infeed_outfeed=io, view=view, name="", categories=[], bound_by=[])
    params.update(precisions=[], caveats=[])
    if not (category or bound_by or precision or caveat):
        return params
    facets = answer_of(service, "ops", run, host, offset=0, limit=0, **params)["facets"]
    where = f"run {run!r}" + (f", host {host!r}" if host else "")
    precisions = [v for v in facets.get("precision", []) if v != NO_VALUE] + [NO_VALUE]
    for arg, field, wanted, valid in (
        ("categories", "category", category, facets["category"]),
        ("bound_by", "bound_by", bound_by, facets["bound_by"]),
        ("precisions", "precision", precision, precisions),
        ("caveats", "caveat", caveat, list(CAVEATS)),
    ):
        params[arg] = choose(field, wanted, valid, where)
    return params


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
    detail: str = "compact",
) -> dict:
    """Op records (`/ops`) filtered and paged. `order`: `self_time` (the API's rank order) or
    `time_saved` (the top opportunities, as `tb-roofline report`'s `top_ops` and the tab list
    them: the ops model/records/rankings.py ranks, by its `opportunity_rank`)."""
    offset, limit = paging(offset, limit)
    if order not in ORDERS:
        raise errors.InvalidArgumentError(
            f"order must be one of {', '.join(ORDERS)}, not {order!r}"
        )
    io, view = io_flag(infeed_outfeed), view_choice(view)
    params = _filters(service, run, host, io, view, category, bound_by, precision, caveat)
    params["name"] = name or ""
    a, rows, total, note = _page(service, run, host, order, offset, limit, params)
    records = _op_records(service, run, host, a, rows, columns, detail)
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
                "next_offset": next_offset(offset, len(rows), total),
                "facets": a["facets"],
                "ops": records,
                **({"note": note} if note else {}),
            },
            digits_of(significant_digits),
        ),
        "ops",
        offset,
        total,
    )


def _page(service, run, host, order, offset, limit, params):
    """(the ops answer, the page's rows, the count they are a page of, why none is ranked).
    `self_time` is the API's own order and paging; any other order is the model's ranking of
    every row the filters keep (model/records/rankings.py), paged here."""
    if order == "self_time":
        a = answer_of(service, "ops", run, host, offset=offset, limit=limit, **params)
        return a, a["rows"], a["total_count"], None
    a = answer_of(service, "ops", run, host, whole=True, offset=0, limit=None, **params)
    cols, rows = a["columns"], a["rows"]
    ranked = rankings.ranked_rows(cols, rows)
    # an empty page says why (model/records/rankings.py `none_ranked_reason`)
    note = None if ranked else _none_ranked(service, run, host, cols, rows)
    return a, ranked[offset : offset + limit], len(ranked), note


def _op_records(service, run, host, a, rows, columns, detail) -> list:
    """The page's rows as records of the asked columns, with their fingerprints in the op view
    (all of them in `full` detail, the first few in `compact`)."""
    cols = a["columns"]
    asked = [c for c in columns or () if c != FINGERPRINTS]
    records = records_of(cols, rows, pick(cols, asked, OP_COLUMNS))
    if a["view"] == "op" and (FINGERPRINTS in (columns or ()) or not columns):
        records = _with_fingerprints(service, run, host, cols, rows, records)
        if detail != "full":
            records = [_first(r, FINGERPRINTS) for r in records]
    return records


COMPACT_FINGERPRINTS = 3  # per op in a compact top_ops page
COMPACT_ITEMS = 10  # shapes and kernels in a compact get_op


def _first(record: dict, *keys: str, keep: int = COMPACT_FINGERPRINTS) -> dict:
    """`record` with each list under `keys` cut to its first `keep` items, and beside a cut
    one `<key>_count`: how many there are (detail=full gives them all)."""
    out = dict(record)
    for key in keys:
        items = out.get(key)
        if isinstance(items, list) and len(items) > keep:
            out[key] = items[:keep]
            out[f"{key}_count"] = len(items)
    return out


def _none_ranked(service, run, host, cols, rows) -> str | None:
    columns = {c: [r[cols.index(c)] for r in rows] for c in ("potential_time_saved_us", "caveat")}
    columns["potential_time_saved_us"] = [
        float("nan") if v is None else v for v in columns["potential_time_saved_us"]
    ]
    peaks_known = bool(answer_of(service, "device", run, host)["device"]["peaks_known"])
    return rankings.none_ranked_reason(columns, peaks_known)


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
    detail: str = "compact",
) -> dict:
    """One op in full: its records (every column; one per program, precision and host it
    ran in), the guidance findings that name it with their evidence, its shapes and the
    kernels it launched (PyTorch traces)."""
    if not operation:
        raise errors.InvalidArgumentError("missing parameter 'operation'")
    io = io_flag(infeed_outfeed)
    view = view_choice(view)
    a = answer_of(
        service, "ops", run, host, whole=True, include_infeed_outfeed=io, name=operation, view=view
    )
    records = _records_named(a, run, operation, host, program_id, precision, view)
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
    parts = {"shapes": shapes, "kernels": kernels}
    if detail != "full":  # the longest first, counted (`*_count`): detail=full has them all
        parts = _first(
            {"shapes": sorted(shapes, key=lambda u: -u["time_us"]), "kernels": kernels},
            "shapes",
            "kernels",
            keep=COMPACT_ITEMS,
        )
    answer = shape(
        {
            "run": a["run"],
            "host": a["host"],
            "view": a["view"],
            "operation": operation,
            "records": records,
            "findings": findings,
            **parts,
        },
        digits_of(significant_digits),
    )
    for key in ("findings", "records"):  # one per host it ran on: a pod's can be long
        answer = fit(answer, key, 0, len(answer[key]), paged=False)
    return answer


def _records_named(a, run, operation, host, program_id, precision, view) -> list:
    """The records of `operation` in an ops answer (narrowed by program and precision when
    given); none is a not-found error listing the names that contain it."""
    everything = [dict(zip(a["columns"], r)) for r in a["rows"]]
    records = [
        r
        for r in everything
        if r["operation"] == operation
        and (program_id is None or r["program_id"] == program_id)
        and (precision is None or r["precision"] == precision)
    ]
    if records:
        return records
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
    offset, limit = paging(offset, limit)
    io, view = io_flag(infeed_outfeed), view_choice(view)
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
    keep = pick(cols, columns, PAIR_COLUMNS if a["level"] == "op" else PROGRAM_PAIR_COLUMNS)
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
                "next_offset": next_offset(offset, n, total),
                "facets": a["facets"],
                "pairs": pairs,
            },
            digits_of(significant_digits),
        ),
        "pairs",
        offset,
        total,
    )
