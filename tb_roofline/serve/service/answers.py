"""Answer shaping shared by the single-run routes (`/program`, `/ops`, ...) and `/compare`:
the op filters, paging, facets, and the columnar JSON of numpy columns (NaN as null).

One rule each:
- a filter keeps a row when its category, bound-by, precision and caveat are among those
  asked (either side of a pair: `base_*` or `cand_*`; `none` asks for rows without a precision
  or a caveat) and the name filter is a case-insensitive substring of its name (either
  side's);
- paging is `offset`, then at most `limit` rows, after filtering;
- a row answer (`/ops`, `/program`) is at most `TB_ROOFLINE_MAX_ANSWER_MB` of JSON: when its
  rows would make it longer it holds the first rows that fit (in its own order, at least one so
  that paging always moves on) and says so: `capped_by`, `returned_count`, `next_offset`. The
  rows are encoded a chunk at a time to measure them, never the whole answer first;
- numbers in JSON: NaN and ±inf are null (`model/records/record_table.json_columns`, the
  model's own rows use the same function), compare answers rounded to 6 significant digits.
"""

from __future__ import annotations

import json
import math

import numpy as np

from tb_roofline import errors
from tb_roofline.model.records import rankings, roofline, row_grouping
from tb_roofline.model.records.peaks import run_compute_roofs
from tb_roofline.model.records.record_table import RecordTable, json_columns
from tb_roofline.model.records.records import binding_roof_ids, measurements
from tb_roofline.serve.service.discovery import ALL_HOSTS

SIGNIFICANT_DIGITS = 6  # numbers in /compare answers (the CLI's JSON keeps full precision)
FILTER_PARAMS = ("categories", "bound_by", "precisions", "caveats", "name", "offset", "limit")
NO_VALUE = "none"  # the precision / caveat filter value of rows without one
# (filter argument, column, whether a row may have no value: then it reads NO_VALUE)
_VALUE_FILTERS = (
    ("categories", "category", False),
    ("bound_by", "bound_by", False),
    ("precisions", "precision", True),
    ("caveats", "caveat", True),
)
CAPPED_KINDS = ("program", "ops")  # the answers with rows, bounded by MAX_ANSWER_MB
CAP_SETTING = "TB_ROOFLINE_MAX_ANSWER_MB"
CHUNK_ROWS = 2048  # rows encoded at a time to measure an answer against its cap


def filter_mask(
    columns: dict,
    n: int,
    categories=(),
    bound_by=(),
    name="",
    prefixes=("",),
    precisions=(),
    caveats=(),
) -> np.ndarray:
    """Rows kept by the API's op filters. `prefixes`: the column sets a row has ("" for a
    record table; "base_", "cand_" for a comparison's pairs: either side may match)."""
    asked = {"categories": categories, "bound_by": bound_by}
    asked.update(precisions=precisions, caveats=caveats)
    mask = np.ones(n, bool)
    for arg, column, optional in _VALUE_FILTERS:
        if asked[arg]:
            wanted = set(asked[arg])
            hit = np.zeros(n, bool)
            for p in prefixes:
                values = columns[p + column].tolist()
                if optional:
                    values = [v or NO_VALUE for v in values]
                hit |= np.fromiter((v in wanted for v in values), bool, count=n)
            mask &= hit
    if name:
        needle = name.lower()
        sides = [columns[p + "operation"].tolist() for p in prefixes]
        mask &= np.fromiter(
            (any(o is not None and needle in str(o).lower() for o in row) for row in zip(*sides)),
            bool,
            count=n,
        )
    return mask


def filtered(table, categories=(), bound_by=(), name="", prefixes=("",), precisions=(), caveats=()):
    """The table with only the rows the filters keep (the same object when all are kept)."""
    mask = filter_mask(
        table.columns, len(table), categories, bound_by, name, prefixes, precisions, caveats
    )
    return table if mask.all() else table.select(mask)


def page(table, offset: int = 0, limit: int | None = None):
    """Rows `offset` .. `offset + limit` (all from `offset` when `limit` is None)."""
    if not offset and limit is None:
        return table
    end = len(table) if limit is None else offset + limit
    return table.select(slice(offset, end))


def facets(columns: dict, prefixes=("",)) -> dict:
    """The distinct values of each filtered column (either side), for the filter menus; a
    precision or caveat missing on some row reads NO_VALUE."""
    out = {}
    for _, column, optional in _VALUE_FILTERS:
        if not all(p + column in columns for p in prefixes):
            continue  # (a comparison's pairs have no caveat)
        values = set()
        for p in prefixes:
            values |= set(columns[p + column].tolist())
        if optional:
            values = {v or NO_VALUE for v in values}
        out[column] = sorted(v for v in values if v is not None)
    return out


def columnar(table, digits: int | None = SIGNIFICANT_DIGITS) -> dict:
    """`{"columns": names, "values": one array per column}`: numbers rounded to `digits`
    significant digits (None: as they are), NaN as null (the fastest JSON for 20,000 rows)."""
    cols = table.columns
    if digits is not None:
        cols = {
            k: (round_significant(v, digits) if v.dtype.kind == "f" else v)
            for k, v in cols.items()
            if k in table.names
        }
    return {"columns": list(table.names), "values": json_columns(cols, table.names)}


def round_significant(a: np.ndarray, digits: int) -> np.ndarray:
    """Each value rounded to `digits` significant digits (so that it prints short)."""
    out = np.array(a, dtype=np.float64)
    nz = np.isfinite(out) & (out != 0)
    v = out[nz]
    if not len(v):
        return out
    e = np.floor(np.log10(np.abs(v)))
    big = e >= digits - 1
    r = np.empty_like(v)
    p = 10.0 ** (e[big] - (digits - 1))  # exact powers of ten: the product prints short
    r[big] = np.round(v[big] / p) * p
    q = 10.0 ** ((digits - 1) - e[~big])
    r[~big] = np.round(v[~big] * q) / q
    out[nz] = r
    return out


def views_of(a) -> list:
    return ["op"] + sorted(a.views)


def op_table(a, include_io: bool, view: str = "op"):
    """The op records of a view of an analysis (a clear error for a view it does not have)."""
    if view == "op":
        return a.ops[include_io]
    if view in a.views:
        return a.views[view][include_io]
    raise errors.InvalidArgumentError(
        f"view {view!r} is not available for this run; views: " + ", ".join(views_of(a))
    )


# --- the single-run answers (what `RooflineService` serves and caches encoded) -------------
def device_json(a) -> dict:
    """The device and its roofs, and the compute roofs this run's ops sit under
    (`run_compute`, model/records/peaks.py `run_compute_roofs`: the headline's): THE device object
    of every answer that holds one (/device, the report, the comparison's sides)."""
    roofs = run_compute_roofs(a.ops[True].columns, a.device) if a.device.peaks_known else []
    return {**a.device.to_json(), "run_compute": roofs}


def device_answer(a, run, host) -> dict:
    return {"run": run, "host": host or ALL_HOSTS, "device": device_json(a)}


BINDING_COLUMN = "binding_roof_id"
MEASUREMENT_COLUMN = "measurement"
# Columns the model derives for an answer, beyond RECORD_COLUMNS (docs/http_api.md).
PROGRAM_DERIVED = (BINDING_COLUMN, MEASUREMENT_COLUMN)
OPS_DERIVED = (BINDING_COLUMN, MEASUREMENT_COLUMN, rankings.RANK_COLUMN)


def with_derived(a, table: RecordTable, ranked: bool) -> RecordTable:
    """The records with the model's derived columns: the binding roof's id
    (`records.binding_roof_ids`), whether the record is a roofline measurement
    (`records.measurements`) and, for op records, their place in the ranking
    (`rankings.opportunity_ranks`, over these records: filter and page after this)."""
    cols = dict(table.columns)
    cols[BINDING_COLUMN] = binding_roof_ids(cols["bound_by"], a.device)
    cols[MEASUREMENT_COLUMN] = measurements(
        cols["caveat"], cols["roofline_efficiency"], cols["bound_by"]
    )
    if ranked:
        ranks = rankings.opportunity_ranks(cols)
        out = np.empty(len(ranks), dtype=object)  # whole numbers in JSON, null unranked
        out[:] = [int(r) if r == r else None for r in ranks.tolist()]
        cols[rankings.RANK_COLUMN] = out
    return RecordTable(cols)


def program_answer(
    a,
    run,
    host,
    include_infeed_outfeed=True,
    offset: int = 0,
    limit: int | None = None,
    max_bytes: int | None = None,
) -> dict:
    table = with_derived(a, a.program[include_infeed_outfeed], ranked=False)
    total = len(table)
    derived = list(PROGRAM_DERIVED)
    answer = {
        "run": run,
        "host": host or ALL_HOSTS,
        "columns": list(roofline.RECORD_COLUMNS) + derived,
        "rows": [],
        "total_count": total,
        "offset": offset,
        "num_steps": a.num_steps,
        "has_hw_counters": a.has_hw_counters,
        "views": views_of(a),
        "serving_steps": _json_safe(getattr(a, "serving", None) or []),
    }
    return fill_rows(answer, page(table, offset, limit), derived, offset, total, max_bytes)


def _dumps(value) -> str:
    return json.dumps(value, allow_nan=False, separators=(",", ":"))


def rows_of(table, extra: list) -> list:
    """JSON-ready rows of `table` with the extra columns' values appended."""
    rows = table.rows()
    if extra:
        values = [table.columns[c].tolist() for c in extra]
        rows = [row + [v[i] for v in values] for i, row in enumerate(rows)]
    return rows


def row_pages(table, extra: list):
    """The rows of `table` (extra columns appended), CHUNK_ROWS at a time (for the exports)."""
    for start in range(0, len(table), CHUNK_ROWS):
        yield rows_of(table.select(slice(start, start + CHUNK_ROWS)), extra)


def capped_rows(table, extra: list, budget: int | None) -> tuple[list, bool]:
    """(the first rows of `table` whose JSON list takes at most `budget` bytes, at least one;
    whether rows were left out). Encoded CHUNK_ROWS at a time: what is left out is never
    made into Python rows."""
    if budget is None:
        return rows_of(table, extra), False
    out, used = [], 2  # the list's brackets
    for start in range(0, len(table), CHUNK_ROWS):
        rows = rows_of(table.select(slice(start, start + CHUNK_ROWS)), extra)
        size = len(_dumps(rows)) - 1  # its rows and commas, and the comma before them
        if used + size <= budget:
            out.extend(rows)
            used += size
            continue
        for row in rows:  # the chunk that does not fit whole: row by row
            size = len(_dumps(row)) + 1
            if used + size > budget and out:
                return out, True
            out.append(row)
            used += size
    return out, False


def fill_rows(
    answer: dict, table, extra: list, offset: int, total: int, max_bytes: int | None
) -> dict:
    """`answer` with the rows of `table` (the page asked for) that fit in `max_bytes` of JSON
    in all, and the counts saying how many it holds and where the next page starts."""
    # The counts at their longest while the header is measured (no count exceeds `total`).
    cap_mb = None if max_bytes is None else round(max_bytes / 2**20, 3)
    answer.update(
        returned_count=total, next_offset=total, capped_by=CAP_SETTING, max_answer_mb=cap_mb
    )
    budget = None if max_bytes is None else max_bytes - len(_dumps(answer))
    answer["rows"], cut = capped_rows(table, extra, budget)
    returned = len(answer["rows"])
    nxt = offset + returned
    answer["returned_count"] = returned
    answer["next_offset"] = nxt if nxt < total else None
    answer["capped_by"] = CAP_SETTING if cut else None
    if not cut:  # the cap in MB only where it cut (so a whole answer is the same either way)
        del answer["max_answer_mb"]
    return answer


def _json_safe(value):
    """Lists, dicts and numbers for JSON: tuples as lists, NaN and infinities as None."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def ops_answer(
    a,
    run,
    host,
    include_infeed_outfeed=True,
    categories=(),
    bound_by=(),
    name="",
    offset: int = 0,
    limit: int | None = None,
    view: str = "op",
    rows: str = "",
    max_bytes: int | None = None,
    precisions=(),
    caveats=(),
) -> dict:
    if rows:  # rows by op, op x input shapes or kernel (model/records/row_grouping.py)
        try:
            full = row_grouping.grouped_records(a, include_infeed_outfeed, rows)
        except ValueError as e:
            raise errors.InvalidArgumentError(str(e)) from None
    else:
        full = op_table(a, include_infeed_outfeed, view)
    full = with_derived(a, full, ranked=True)
    table = filtered(full, categories, bound_by, name, precisions=precisions, caveats=caveats)
    total = len(table)
    table = page(table, offset, limit)
    # The header first, then the rows that fit under the cap; the model's derived columns
    # follow RECORD_COLUMNS, then the grouping's own (model/records/row_grouping.py: `shapes`).
    derived = list(OPS_DERIVED)
    extra = row_grouping.extra_columns(table)
    answer = {
        "run": run,
        "host": host or ALL_HOSTS,
        "columns": list(roofline.RECORD_COLUMNS) + derived + extra,
        "rows": [],
        "total_count": total,
        "unfiltered_count": len(full),
        "offset": offset,
        "view": view,
        "views": views_of(a),
        "facets": facets(full.columns),
        "rows_grouping": rows or "op",
        "row_groupings": row_grouping.available_rows(a),
    }
    return fill_rows(answer, table, derived + extra, offset, total, max_bytes)


def diagnostics_answer(a, run, host) -> dict:
    return {
        "run": run,
        "host": host or ALL_HOSTS,
        "diagnostics": [d.to_json() for d in a.diagnostics],
    }


def comm_answer(a, run, host, include_infeed_outfeed=True) -> dict:
    """The communication roofline's points and link roofs (model/records/comm.py,
    docs/http_api.md)."""
    from tb_roofline.model.records.comm import comm_chart

    return {"run": run, "host": host or ALL_HOSTS, **comm_chart(a, include_infeed_outfeed)}


ANSWERS = {
    "device": device_answer,
    "program": program_answer,
    "ops": ops_answer,
    "diagnostics": diagnostics_answer,
    "comm": comm_answer,
}


def is_page_load(params: dict) -> bool:
    """An answer a page load asks for: no filter, no paging (the ones worth keeping on disk)."""
    return not any(params.get(name) for name in FILTER_PARAMS)
