"""Exports: the program or op records of a run as CSV or JSON files (`/export`,
`tb-roofline export`), the same rows the API serves: every row, never cut at the answer
cap (TB_ROOFLINE_MAX_ANSWER_MB), written a chunk of rows at a time (`text_chunks`), so the
HTTP route streams them and never holds the whole file or every row as Python lists.

CSV cells are written so that a spreadsheet opens them as data, never as a formula (OWASP's
rule, as `toCsv` in static/columns.js): a text starting with = + - @ or any control character
(a tab, CR, LF, NUL, ... DEL: a spreadsheet may drop it and read the formula after it) gets a
leading ' (a plain number such as -1.5 stays a number); a field holding a comma, a
quote, a CR or a LF is quoted, so a lone CR cannot split a row.
"""

from __future__ import annotations

import json

from tb_roofline import errors

LEVELS = ("op", "program")
FORMATS = ("csv", "json")
# Any control character first: some spreadsheets drop it, and the formula after it would run.
_FORMULA_START = ("=", "+", "-", "@", "\x7f") + tuple(chr(c) for c in range(0x20))
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
    """One CSV field that a spreadsheet opens as data (see the module's docstring)."""
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


def check(level: str, fmt: str):
    if level not in LEVELS:
        raise errors.InvalidArgumentError(f"level must be 'op' or 'program', not {level!r}")
    if fmt not in FORMATS:
        raise errors.InvalidArgumentError(f"format must be 'csv' or 'json', not {fmt!r}")


def file_name(run: str, host: str, level: str, fmt: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{run}_{host or 'all'}")
    return f"roofline_{level}_{safe}.{fmt}"


CONTENT_TYPES = {"json": "application/json", "csv": "text/csv; charset=utf-8"}


def text_chunks(columns, row_pages, fmt: str):
    """The export's text, a piece per page of rows (`row_pages` yields lists of rows): joined,
    exactly `json.dumps(rows as objects, indent=1)` or `to_csv(columns, rows)`."""
    if fmt == "csv":
        yield to_csv(columns, [])
        for rows in row_pages:
            yield "".join(",".join(csv_cell(v) for v in r) + "\n" for r in rows)
        return
    first = True
    for rows in row_pages:
        parts = []
        for r in rows:
            item = json.dumps(dict(zip(columns, r)), allow_nan=False, indent=1)
            parts.append(("[\n " if first else ",\n ") + item.replace("\n", "\n "))
            first = False
        yield "".join(parts)
    yield "[]" if first else "\n]"


def export(answer: dict, run: str, host: str, level: str, fmt: str) -> tuple[str, str, str]:
    """(text, content type, file name) of an answer's rows (`columns` + `rows`)."""
    text = "".join(text_chunks(answer["columns"], [answer["rows"]], fmt))
    return text, CONTENT_TYPES[fmt], file_name(run, host, level, fmt)


def export_chunks(
    a,
    run: str,
    host: str,
    include_io: bool = True,
    level="op",
    fmt="csv",
    categories=(),
    bound_by=(),
    name="",
    offset=0,
    limit=None,
    view="op",
    precisions=(),
    caveats=(),
):
    """(the text's pieces, content type, file name) of an analysis `a`: the answers' columns
    (the records, the model's derived columns, extras) for every row the filters keep."""
    from tb_roofline.model.records import roofline
    from tb_roofline.model.records.row_grouping import extra_columns
    from tb_roofline.serve.service import answers

    check(level, fmt)
    if level == "program":
        table = answers.with_derived(a, a.program[include_io], ranked=False)
        derived = list(answers.PROGRAM_DERIVED)
    else:
        full = answers.with_derived(a, answers.op_table(a, include_io, view), ranked=True)
        kept = answers.filtered(full, categories, bound_by, name, ("",), precisions, caveats)
        table = answers.page(kept, offset, limit)
        derived = list(answers.OPS_DERIVED)
    extra = derived + extra_columns(table)
    columns = list(roofline.RECORD_COLUMNS) + extra
    chunks = text_chunks(columns, answers.row_pages(table, extra), fmt)
    return chunks, CONTENT_TYPES[fmt], file_name(run, host, level, fmt)
