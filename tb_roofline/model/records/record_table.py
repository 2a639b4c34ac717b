"""The records' shape: their columns in the API's order (`RECORD_COLUMNS`), what op-table rows
sum into them (`SUM_COLUMNS`), the table they are held in (`RecordTable`, numpy columns), the
scopes they are made for (Total, Average, one step) and the one NaN-to-null rule of every
answer (`json_columns`). The numbers in them are derived in model/records/records.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.table.key_sums import ROW_SUM_COLUMNS
from tb_roofline.table.op_table import MEMORY_COLUMNS

# The memory traffic columns of the op table, and their memories' ids.
MEM_BYTES = tuple(c for c, *_ in MEMORY_COLUMNS)
MEM_IDS = tuple(mid for _, _, mid, _ in MEMORY_COLUMNS)
# Links between devices: their `<id>_bw` is in GB/s (1e9 B/s), like the link data sheets and
# the communication roofline (`/comm`); every memory's is in GiB/s, as XProf writes them.
GBS_MEM_IDS = ("interconnect",)

# Output columns, in API order (docs/http_api.md).
RECORD_COLUMNS = (
    (
        "record_type",
        "step",
        "rank",
        "category",
        "operation",
        "program",
        "program_id",
        "occurrences",
        "total_time_us",
        "avg_time_us",
        "total_self_time_us",
        "avg_self_time_us",
        "self_time_percent",
        "cumulative_self_time_percent",
        "dma_stall_percent",
        "flops",
        "model_flops",
        "bytes",
    )
    + MEM_BYTES
    + ("flop_rate", "model_flop_rate", "memory_bw")
    + tuple(f"{m}_bw" for m in MEM_IDS)
    + ("operational_intensity",)
    + tuple(f"{m}_operational_intensity" for m in MEM_IDS)
    + (
        "bottleneck_operational_intensity",
        "bound_by",
        "total_time_per_core_us",
        "time_fraction",
        "optimal_flop_rate",
        "roofline_efficiency",
        "compute_efficiency",
        "max_mem_bw_utilization",
        "potential_time_saved_us",
        "roof_time_us",
        "mixed_regimes",
        "caveat",
        "flop_coverage",
        "bytes_coverage",
        "transfer_time_us",
        "transfer_bw",
        "link_roof_gbs",
        "link_assumption",
        "peak_flop_rate",
        "precision",
        "roof_precision",
        "dtype",
        "include_infeed_outfeed",
        "is_infeed_outfeed",
        "source",
        "tf_op",
        "flops_source",
        "host",
    )
)

# What each row sums (besides the op table's own columns): the time its FLOPs would take on
# their own precision's roof (ns), the op time whose FLOPs / bytes are known, the time its
# calls would take on their roofs (`floor_time`, ns: max(F/P, B/BW) of each distinct op, whose
# calls share one shape, summed) and the proven gap to it (`gap_ps`: program records).
# Sums derived from the rows with the device's roofs or the op's cost flags (row_sums.row_column),
# not read off a row column.
DERIVED_SUM_COLUMNS = (
    "roof_time",
    "flops_known_ps",
    "bytes_known_ps",
    "op_time_ps",
    "floor_time",
    "gap_ps",
    # interconnect bytes ÷ the share of the link figure their group can use
    # (model/records/link_roofs.py `link_share`)
    "link_roof_bytes",
)
SUM_COLUMNS = ROW_SUM_COLUMNS + DERIVED_SUM_COLUMNS


@dataclasses.dataclass
class RecordTable:
    """Records as numpy columns in `RECORD_COLUMNS` order."""

    columns: dict[str, np.ndarray]
    # The record of each key of the table the records were made from (-1: left out), op records
    key_record: np.ndarray | None = None

    def __len__(self):
        return len(self.columns["operation"])

    def select(self, mask) -> RecordTable:
        return RecordTable({k: v[mask] for k, v in self.columns.items()})

    def rows(self) -> list[list]:
        """JSON-ready rows: numpy scalars become Python values, NaN/inf and "" caveats None."""
        return json_rows(self.columns, RECORD_COLUMNS)

    def row_dicts(self) -> list[dict]:
        return [dict(zip(RECORD_COLUMNS, r)) for r in self.rows()]


TOTAL, AVERAGE = "Total", "Average"  # the scopes that are not one step's label
SCOPE_RECORD_TYPES = {TOTAL: "total", AVERAGE: "average"}


def scope_record_type(scope: str) -> str:
    """The program record type of a scope: `Total` -> total, `Average` -> average, a step's
    label -> step (the one mapping from scope names to records)."""
    if scope.startswith(AVERAGE + " · "):  # one phase's average step (serving traces)
        return "average"
    return SCOPE_RECORD_TYPES.get(scope, "step")


def json_rows(columns: dict, names) -> list[list]:
    """Rows of the named numpy columns for JSON (see `json_columns`)."""
    cols = json_columns(columns, names)
    return [list(r) for r in zip(*cols)] if cols and len(cols[0]) else []


def json_columns(columns: dict, names) -> list[list]:
    """The named numpy columns as lists for JSON: Python values, NaN/inf as None, and "" as
    None in caveat columns (`caveat`, `base_caveat`, ...) and `dtype`. The one NaN-to-null
    rule of every answer (record rows here, the columnar answers of serve/service/answers.py)."""
    cols = []
    for name in names:
        arr = columns[name]
        if arr.dtype.kind == "f":
            finite = np.isfinite(arr)
            if finite.all():
                cols.append(arr.tolist())
            else:
                values = arr.astype(object)
                values[~finite] = None
                cols.append(values.tolist())
        elif name.endswith("caveat") or name in (
            "dtype",
            "roof_precision",
        ):  # "" = none / not known
            cols.append([v or None for v in arr.tolist()])
        else:
            cols.append(arr.tolist())
    return cols
