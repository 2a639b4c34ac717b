"""The common op table every reader produces and the roofline model consumes.

One row per (host, core, program, op, step): executions and times summed over that group,
FLOPs and bytes as totals over those executions. Columns are numpy arrays so the model can
aggregate hundreds of thousands of rows without Python loops. Readers know nothing of the model;
the model knows nothing of file formats.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.diagnostics import Diagnostic  # noqa: F401 (readers build ProfileData with it)

# Memory traffic columns: (column, display name, memory id, direction).
MEMORY_COLUMNS = (
    ("hbm_bytes", "HBM", "hbm", "rw"),
    ("cmem_read_bytes", "CMEM Read", "cmem_read", "r"),
    ("cmem_write_bytes", "CMEM Write", "cmem_write", "w"),
    ("vmem_read_bytes", "VMEM Read", "vmem_read", "r"),
    ("vmem_write_bytes", "VMEM Write", "vmem_write", "w"),
)

STRING_COLUMNS = ("host", "program_id", "program", "operation", "category", "source", "tf_op",
                  "flops_source", "precision", "dtype")
INT_COLUMNS = ("core", "step", "occurrences")
FLOAT_COLUMNS = ("total_time_ps", "self_time_ps", "dma_stall_ps", "flops", "model_flops",
                 "bytes") + tuple(c for c, *_ in MEMORY_COLUMNS)
BOOL_COLUMNS = ("is_infeed_outfeed", "is_container")
ALL_COLUMNS = STRING_COLUMNS + INT_COLUMNS + FLOAT_COLUMNS + BOOL_COLUMNS

NO_STEP = -1

# Categories that only contain other ops; the Program record skips them (their children count).
CONTAINER_CATEGORIES = frozenset({"call", "conditional", "while", "megacore fusion"})


def is_infeed_outfeed_category(category: str) -> bool:
    return "infeed" in category or "outfeed" in category


@dataclasses.dataclass
class OpTable:
    """Columnar op rows. Strings are object arrays; numbers float64/int64; flags bool."""
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["operation"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def copy(self) -> "OpTable":
        return OpTable({k: v.copy() for k, v in self.columns.items()})

    def select(self, mask: np.ndarray) -> "OpTable":
        return OpTable({k: v[mask] for k, v in self.columns.items()})

    @staticmethod
    def concat(tables: list["OpTable"]) -> "OpTable":
        if not tables:
            return OpTableBuilder().build()
        return OpTable({k: np.concatenate([t.columns[k] for t in tables]) for k in ALL_COLUMNS})


class OpTableBuilder:
    """Collects rows (one at a time, or many at once as arrays); `build()` makes the columns."""

    def __init__(self):
        self._cols: dict[str, list] = {k: [] for k in ALL_COLUMNS}
        self._chunks: list[dict[str, np.ndarray]] = []

    def add(self, **row):
        """Add one row; the flags follow from the category unless given."""
        category = row.get("category", "")
        row.setdefault("is_infeed_outfeed", is_infeed_outfeed_category(category))
        row.setdefault("is_container", category in CONTAINER_CATEGORIES)
        for key in ALL_COLUMNS:
            self._cols[key].append(row.get(key, _DEFAULTS[key]))

    def add_columns(self, n: int, **columns):
        """Add `n` rows at once: each value is an array of length n or a scalar for all rows."""
        chunk = {}
        for key in ALL_COLUMNS:
            value = columns.get(key, _DEFAULTS[key])
            if isinstance(value, np.ndarray):
                chunk[key] = value.astype(_dtype(key), copy=False)
            else:
                chunk[key] = _full(key, n, value)
        self._chunks.append(chunk)

    def build(self) -> OpTable:
        parts = [self._convert(self._cols)] + self._chunks
        return OpTable({k: np.concatenate([p[k] for p in parts]) for k in ALL_COLUMNS})

    @staticmethod
    def _convert(cols: dict[str, list]) -> dict[str, np.ndarray]:
        out = {}
        for key, values in cols.items():
            if key in STRING_COLUMNS:
                arr = np.empty(len(values), dtype=object)
                arr[:] = values
            else:
                arr = np.asarray(values, dtype=_dtype(key))
            out[key] = arr
        return out


def _dtype(key: str):
    if key in STRING_COLUMNS:
        return object
    if key in INT_COLUMNS:
        return np.int64
    if key in BOOL_COLUMNS:
        return bool
    return np.float64


def _full(key: str, n: int, value) -> np.ndarray:
    arr = np.empty(n, dtype=_dtype(key))
    arr[:] = value
    return arr


def factorize(values: np.ndarray) -> np.ndarray:
    """Integer codes for any values (object strings included), far faster than np.unique on
    object arrays; equal values get equal codes, in order of first appearance."""
    index: dict = {}
    return np.fromiter((index.setdefault(v, len(index)) for v in values.tolist()),
                       dtype=np.int64, count=len(values))


_DEFAULTS = {**{k: "" for k in STRING_COLUMNS}, **{k: 0 for k in INT_COLUMNS},
             **{k: 0.0 for k in FLOAT_COLUMNS}, **{k: False for k in BOOL_COLUMNS}}
_DEFAULTS["step"] = NO_STEP
_DEFAULTS["flops_source"] = "profile"


@dataclasses.dataclass
class StepSpan:
    """One step on one core: where it starts and how long it lasts (ps)."""
    host: str
    core: int
    step: int
    start_ps: int
    duration_ps: int


@dataclasses.dataclass
class CoreSpan:
    """The profiled span of one core (first to last op or step), for the Program record."""
    host: str
    core: int
    start_ps: int
    end_ps: int

    @property
    def duration_ps(self) -> int:
        return max(0, self.end_ps - self.start_ps)


@dataclasses.dataclass
class ProfileData:
    """What a reader hands to the model for one host (or several, once merged)."""
    device: "object"  # tb_roofline.devices.spec.DeviceInfo
    ops: OpTable
    steps: list[StepSpan]
    core_spans: list[CoreSpan]
    diagnostics: list[Diagnostic]
    has_hw_counters: bool = False
    # PyTorch traces: kernel-level rows (a second view), hardware counters (the "Total (HW)"
    # record and per-kernel counter rows), and the rank this file is.
    # Whether f32 matmuls may sit under a TF32 roof (XLA's default; PyTorch's only when asked).
    allow_tf32: bool = True
    kernels: "OpTable | None" = None
    hw_counters: "object | None" = None
    hw_ops: "OpTable | None" = None
    rank: "int | None" = None
    world_size: "int | None" = None
    device_properties: "list | None" = None
