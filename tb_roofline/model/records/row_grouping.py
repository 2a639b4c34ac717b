"""How the op records of a view are grouped: the `/ops?rows=` choice (docs/frontend.md, "Backend
 requests"; to go into docs/http_api.md).

- `op` (default): one record per (program, op, precision), as `Analysis.ops`;
- `shapes`: one record per (program, op, precision, input shapes): split by the op table's
  `fingerprint` key (what the op computes: its input dims for PyTorch ops), each record carries
  its key's `input_dims` (the dims as data, table/op_table.py) and a `shapes` column, their
  text (`[[8,3],[3]]`; a kernel outside any op shows its launch grid; "" when unknown);
- `kernel`: the GPU-kernel records (`Analysis.views["kernel"]`), where the run has them.

Works on the op table's keys only (scoped_op_records with `split_by`); nothing here knows of
HTTP or of an answer's shape: the service's `/ops` answer (serve/service/answers.py) reads the
records, `extra_columns` and `available_rows`.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.costs.hlo.fingerprint import GRID, dims_text
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
        if any(d is not None for d in table.keys["input_dims"].tolist()):
            out.append("shapes")
    if "kernel" in analysis.views:
        out.append("kernel")
    return out


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
        columns = rec.columns
        columns[SHAPES_COLUMN] = shapes_text(columns["input_dims"], columns["fingerprint"])
    return rec


def shapes_text(dims: np.ndarray, fingerprints: np.ndarray) -> np.ndarray:
    """Per record the text of its input dims (`[[8,3],[3]]`); where it has none, the launch
    grid a kernel's `grid:` fingerprint names (`grid [128,1,1]`: kernels keep no grid as
    data); "" for the others."""
    out = np.empty(len(dims), dtype=object)
    out[:] = [
        dims_text(d)
        if d is not None
        else "grid " + f[len(GRID) :]
        if str(f).startswith(GRID)
        else ""
        for d, f in zip(dims.tolist(), fingerprints.tolist())
    ]
    return out


def extra_columns(table: RecordTable) -> list[str]:
    """Columns beyond RECORD_COLUMNS an answer carries for these records (`shapes`)."""
    return [SHAPES_COLUMN] if SHAPES_COLUMN in table.columns else []
