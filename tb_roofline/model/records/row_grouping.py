"""How the op records of a view are grouped: the `/ops?rows=` choice (docs/frontend.md, "Backend
 requests"; to go into docs/http_api.md).

- `op` (default): one record per (program, op, precision), as `Analysis.ops`;
- `shapes`: one record per (program, op, precision, input shapes): the op table's `fingerprint`
  key column holds `shapes:<input dims>` for PyTorch ops (tb_roofline/costs/hlo/fingerprint.py),
  so the records are split by it; each record then carries a `shapes` column (the input dims as
  recorded, "" when the trace has none);
- `kernel`: the GPU-kernel records (`Analysis.views["kernel"]`), where the run has them.

Works on the op table's keys only (scoped_op_records with `split_by`); nothing here knows of
HTTP or of an answer's shape: the service's `/ops` answer (serve/service/answers.py) reads the
records, `extra_columns` and `available_rows`.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.costs.hlo.fingerprint import GRID, SHAPES
from tb_roofline.model.records import roofline
from tb_roofline.model.records.record_table import RecordTable

ROWS = ("op", "shapes", "kernel")
SHAPES_COLUMN = "shapes"


def available_rows(analysis: roofline.Analysis) -> list[str]:
    """The groupings this run offers: `op` always, `shapes` when its ops have recorded input
    shapes, `kernel` when it has GPU-kernel records."""
    out = ["op"]
    src = analysis.scope
    table = src.tables.get("op") if src is not None else None
    if table is not None and table.num_keys:
        fp = table.keys["fingerprint"]
        if any(str(f).startswith(SHAPES) for f in distinct_strings(fp)):
            out.append("shapes")
    if "kernel" in analysis.views:
        out.append("kernel")
    return out


def distinct_strings(values: np.ndarray) -> list:
    return list(dict.fromkeys(values.tolist()))


def grouped_records(analysis: roofline.Analysis, include_io: bool, rows: str) -> RecordTable:
    """The op records of `analysis` grouped as `rows` asks (see the module docstring);
    ValueError naming the choices for a grouping the run does not have."""
    if rows not in ROWS:
        raise ValueError(f"rows {rows!r} is not one of: {', '.join(ROWS)}")
    if rows not in available_rows(analysis):
        raise ValueError(
            f"rows {rows!r} is not available for this run; rows: "
            + ", ".join(available_rows(analysis))
        )
    if rows == "op":
        return analysis.ops[include_io]
    if rows == "kernel":
        return analysis.views["kernel"][include_io]
    rec = roofline.scoped_op_records(analysis, "Total", include_io, "op", split_by="fingerprint")
    if SHAPES_COLUMN not in rec.columns:
        rec.columns[SHAPES_COLUMN] = shapes_text(rec.columns["fingerprint"])
    return rec


def shapes_text(fingerprints: np.ndarray) -> np.ndarray:
    """The input dims of `shapes:` fingerprints (`[[8,3],[3]]`), the grid of `grid:` ones
    (`grid [128,1,1]`), "" for the others."""
    lookup = {}
    for f in distinct_strings(fingerprints):
        s = str(f)
        lookup[f] = (
            s[len(SHAPES) :]
            if s.startswith(SHAPES)
            else "grid " + s[len(GRID) :]
            if s.startswith(GRID)
            else ""
        )
    out = np.empty(len(fingerprints), dtype=object)
    out[:] = [lookup[f] for f in fingerprints.tolist()]
    return out


def extra_columns(table: RecordTable) -> list[str]:
    """Columns beyond RECORD_COLUMNS an answer carries for these records (`shapes`)."""
    return [SHAPES_COLUMN] if SHAPES_COLUMN in table.columns else []
