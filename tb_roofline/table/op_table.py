"""The common op table every reader produces and the roofline model consumes.

Two levels, so that a profile with 2,000 ops × 1,000 steps carries 2,000 strings, not 2 million:
- `keys`: one entry per distinct op of one host (its names, category, precision, flags, the
  input dims it recorded as data);
- `rows`: one row per (op, core, step): the index of its key (`op`) and numbers summed over that
  group (executions, times; FLOPs and bytes as totals over those executions).
`table["category"]` gathers a key column per row when a caller wants it; the model groups on the
keys and never touches per-row strings. Readers know nothing of the model; the model knows
nothing of file formats.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from tb_roofline.allocator import release_free_memory
from tb_roofline.diagnostics import Diagnostic  # noqa: F401 (readers build ProfileData with it)
from tb_roofline.table.counter_series import CounterSeries
from tb_roofline.table.held_rows import HeldRows, is_held
from tb_roofline.table.spans import CoreSpan, StepSpan, StepSpans

# Memory traffic columns: (column, display name, memory id, direction). `host` is traffic
# between device and host memory (PCIe / the host link): never HBM.
MEMORY_COLUMNS = (
    ("hbm_bytes", "HBM", "hbm", "rw"),
    ("cmem_read_bytes", "CMEM Read", "cmem_read", "r"),
    ("cmem_write_bytes", "CMEM Write", "cmem_write", "w"),
    ("vmem_read_bytes", "VMEM Read", "vmem_read", "r"),
    ("vmem_write_bytes", "VMEM Write", "vmem_write", "w"),
    ("host_bytes", "Host link", "host", "rw"),
    ("interconnect_bytes", "Interconnect", "interconnect", "rw"),
)

# Per distinct op (and host).
# `fingerprint`: what the op computes, beyond its name (readers fill it; "" = unknown), so two
# runs can be compared op by op: `hlo:<hash>` for XLA ops (name-independent: survives renamed
# fusions), `shapes:<input dims>` for PyTorch ops, `grid:<grid>` for GPU kernels (both only
# meaningful together with the op name). See tb_roofline/costs/hlo/fingerprint.py.
# `collective`: what one execution of a collective moves (table/collective_info.py), "" else.
# `input_dims`: the dims a PyTorch op recorded (`Input Dims`), as data: a tuple per argument
# (a tuple of ints per tensor, nested for a list of tensors, () for a non-tensor), None when
# unknown (no shapes recorded; XLA ops, kernels). The model reads shapes here, never from the
# `fingerprint` text, which renders them (costs/hlo/fingerprint.py `shapes_fingerprint`).
KEY_STRINGS = (
    "host",
    "program_id",
    "program",
    "operation",
    "category",
    "source",
    "tf_op",
    "flops_source",
    "precision",
    "dtype",
    "caveat",
    "fingerprint",
    "collective",
)
KEY_DATA = ("input_dims",)  # Python values per key (hashable), None = unknown
KEY_FLAGS = ("is_infeed_outfeed", "is_container", "flops_known", "bytes_known")
KEY_COLUMNS = KEY_STRINGS + KEY_DATA + KEY_FLAGS
# Per row.
INT_COLUMNS = ("core", "step", "occurrences")
FLOAT_COLUMNS = (
    ("total_time_ps", "self_time_ps", "dma_stall_ps", "flops", "model_flops", "bytes")
    + tuple(c for c, *_ in MEMORY_COLUMNS)
    + ("async_span_ps",)
)
ROW_COLUMNS = INT_COLUMNS + FLOAT_COLUMNS
# FLOPs and bytes: what a table with `unit_costs` derives per row.
COST_COLUMNS = ("flops", "model_flops", "bytes") + tuple(c for c, *_ in MEMORY_COLUMNS)
ALL_COLUMNS = KEY_COLUMNS + ROW_COLUMNS

NO_STEP = -1
# Rows one temporary covers where a long table's derived columns are made a block at a time
# (model/records/steps.py, model/records/roofline.py): each whole-table temporary is 8 bytes a row.
ROW_BLOCK = 1 << 16

# Categories that only contain other ops; the Program record skips them (their children count).
CONTAINER_CATEGORIES = frozenset({"call", "conditional", "while", "megacore fusion"})

# Caveats a reader may set on an op (the model adds `no_cost` and `above_roof`); see
# docs/http_api.md. A caveated row is not a roofline measurement as it stands.
ASYNC_START, ASYNC_WAIT, HOST_TRANSFER = "async_start", "async_wait", "host_transfer"
PEER_TRANSFER = "peer_transfer"


def is_infeed_outfeed_category(category: str) -> bool:
    return "infeed" in category or "outfeed" in category


@dataclasses.dataclass
class OpTable:
    """Distinct ops (`keys`) and numeric rows pointing at them (`rows["op"]`).

    With `unit_costs` (one row of COST_COLUMNS per key: FLOPs and bytes of one execution), the
    rows hold no cost columns: a row's are its key's times its occurrences, computed when asked
    (`table["flops"]`), so a table of one row per execution stays small."""

    keys: dict[str, np.ndarray]
    rows: dict[str, np.ndarray] | HeldRows  # (HeldRows: kept where the table was read)
    unit_costs: np.ndarray | None = None
    # Row columns summed per key where the table was read (table/key_sums.py `with_row_sums`),
    # so an analysis need not pass over the rows for them; None: not made. Every new table
    # made from this one's rows starts without them.
    row_sums: dict | None = None

    def __len__(self) -> int:
        if isinstance(self.rows, HeldRows):  # (kept elsewhere: counted, not fetched)
            return self.rows.num_rows
        return len(self.rows["op"])

    @property
    def num_keys(self) -> int:
        return len(self.keys["operation"])

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.rows:
            return self.rows[name]
        if self.unit_costs is not None and name in COST_COLUMNS:
            j = COST_COLUMNS.index(name)
            if j >= self.unit_costs.shape[1]:  # a reader's costs without the newer columns
                return np.zeros(len(self.rows["op"]))
            # One column first, then a 1-D gather (numpy's fast path, twice as fast as a
            # gather of [rows, j]); a constant one execution a row multiplies by nothing.
            cost = self.unit_costs[:, j].copy()[self.rows["op"]]
            occ = self.rows["occurrences"]
            if is_constant(occ) and occ[0] == 1 and cost.dtype == np.float64:
                return cost
            return cost * occ
        return self.keys[name][self.rows["op"]]

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """Every column per row (key columns gathered): a copy, for inspection."""
        return {k: self[k] for k in ALL_COLUMNS}

    def copy(self) -> OpTable:
        return OpTable(
            {k: v.copy() for k, v in self.keys.items()},
            {k: v.copy() for k, v in self.rows.items()},
            None if self.unit_costs is None else self.unit_costs.copy(),
        )

    def with_keys(self, **columns) -> OpTable:
        """The same rows with some key columns replaced (the rows are shared, not copied)."""
        return OpTable(dict(self.keys, **columns), self.rows, self.unit_costs, self.row_sums)

    def select(self, mask) -> OpTable:
        op = self.rows["op"][mask]
        return OpTable(
            self.keys,
            {
                k: op if k == "op" else constant(v[0], len(op)) if is_constant(v) else v[mask]
                for k, v in self.rows.items()
            },
            self.unit_costs,
        )

    def consistent(self) -> bool:
        """Whether every row column has a row per `op`, each `op` names a key, and every key
        column and key sum has a value per key (what a table read back from the disk cache must show
        before it is used; a malformed one is not)."""
        try:
            op, m = self.rows["op"], self.num_keys
            n = len(op)
            return (
                not is_constant(op)
                and op.dtype.kind == "i"
                and (not n or (int(op.min()) >= 0 and int(op.max()) < m))
                and all(v.ndim == 1 and len(v) == n for v in self.rows.values())
                and all(v.ndim == 1 and len(v) == m for v in self.keys.values())
                and (self.unit_costs is None or len(self.unit_costs) == m)
                and (self.row_sums is None or all(len(v) == m for v in self.row_sums.values()))
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return False

    def __getstate__(self):
        """Pickled (to and from worker processes, a cluster) with constant row columns as
        their one value, so they travel as they are held: as nothing. Rows kept elsewhere
        travel as what stands for them (table/held_rows.py)."""
        rows = (
            self.rows
            if isinstance(self.rows, HeldRows)
            else {
                k: ("constant", v[:1].copy(), len(v)) if is_constant(v) else v
                for k, v in self.rows.items()
            }
        )
        return {
            "keys": self.keys,
            "rows": rows,
            "unit_costs": self.unit_costs,
            "row_sums": self.row_sums,
        }

    def __setstate__(self, state):
        self.keys, self.unit_costs = state["keys"], state["unit_costs"]
        self.row_sums = state.get("row_sums")
        if isinstance(state["rows"], HeldRows):
            self.rows = state["rows"]
            return
        self.rows = {
            k: constant(v[1][0], v[2]) if isinstance(v, tuple) else v
            for k, v in state["rows"].items()
        }

    def explicit(self) -> OpTable:
        """The same table with cost columns in its rows."""
        if self.unit_costs is None:
            return self
        return OpTable(self.keys, dict(self.rows, **{c: self[c] for c in COST_COLUMNS}))

    @staticmethod
    def concat(tables: list[OpTable], share: bool = False) -> OpTable:
        """One table of all the rows, keys offset per table. With `share`, each input's row
        columns (all but `op`, which the result offsets) become views of the result's, made
        column by column: the same values, one copy between a run's table and its hosts',
        each input's own column let go as soon as the result's exists, and the heap's freed
        pages given back before the next is made (`allocator.py`: else the freed columns stay
        resident as holes too small for the next one). A cache holding the inputs must then
        measure them again (`serve/caches/memory.py` charges a view its buffer)."""
        tables = [t for t in tables if t is not None]
        if not tables:
            return OpTableBuilder().build()
        if len(tables) == 1:  # (shared: its own dict of the same rows, which a later shared
            t = tables[0]  # concat of this input then re-points without touching it)
            rows = t.rows if isinstance(t.rows, HeldRows) else dict(t.rows)
            return OpTable(t.keys, rows, t.unit_costs, t.row_sums) if share else t
        if any(is_held(t.rows) for t in tables):
            return _held_concat(tables)
        unit = all(t.unit_costs is not None for t in tables)
        if not unit:
            tables = [t.explicit() for t in tables]
        offsets = np.cumsum([0] + [t.num_keys for t in tables[:-1]])
        keys = {k: np.concatenate([t.keys[k] for t in tables]) for k in KEY_COLUMNS}
        bounds = np.cumsum([0] + [len(t) for t in tables]).tolist()
        rows = {}
        for k in [k for k in tables[0].rows if k != "op"]:
            if share:  # what was freed (the inputs' last column, the reads): holes too small
                release_free_memory()
            rows[k] = _concat_rows([t.rows[k] for t in tables])
            if share and not is_constant(rows[k]):
                for t, lo, hi in zip(tables, bounds[:-1], bounds[1:]):
                    if not is_constant(t.rows[k]):  # (a constant holds less than a view)
                        t.rows[k] = rows[k][lo:hi]
        if share:
            release_free_memory()
        # Offset in place into the result: no copy of every input's codes beside it.
        op = rows["op"] = np.empty(bounds[-1], code_type(len(keys["operation"])))
        for t, off, lo, hi in zip(tables, offsets.tolist(), bounds[:-1], bounds[1:]):
            np.add(t.rows["op"], off, out=op[lo:hi], casting="unsafe")
        unit_costs = np.concatenate([t.unit_costs for t in tables]) if unit else None
        return OpTable(keys, rows, unit_costs, _concat_sums(tables, share))


class OpTableBuilder:
    """Collects rows (one at a time, many at once as arrays, or already keyed); `build()` makes
    the table. Rows given with their key columns are keyed by those values at build time."""

    def __init__(self):
        self._single: list[dict] = []
        self._chunks: list[tuple[dict, dict]] = []  # (keys, rows with "op")

    def add(self, **row):
        """Add one row; the flags follow from the category unless given."""
        self._single.append(row)

    def add_columns(self, n: int, **columns):
        """Add `n` rows at once: each value is an array of length n or a scalar for all rows."""
        if not n:
            return
        keys = {k: _column(k, n, columns.get(k, _DEFAULTS[k])) for k in KEY_COLUMNS}
        _default_flags(keys, columns)
        codes, first = _factorize_rows([keys[k] for k in KEY_COLUMNS])
        rows = {k: _column(k, n, columns.get(k, _DEFAULTS[k])) for k in ROW_COLUMNS}
        rows["op"] = codes
        self._chunks.append(({k: v[first] for k, v in keys.items()}, rows))

    def add_keyed(self, keys: dict, op: np.ndarray, **columns):
        """Add rows whose distinct ops are already known: `keys` (one entry per op; missing
        columns take their defaults) and `op`, each row's index into them."""
        m = next(len(v) for v in keys.values() if isinstance(v, np.ndarray))
        full = {k: _column(k, m, keys.get(k, _DEFAULTS[k])) for k in KEY_COLUMNS}
        _default_flags(full, keys)
        n = len(op)
        rows = {k: _column(k, n, columns.get(k, _DEFAULTS[k])) for k in ROW_COLUMNS}
        rows["op"] = np.asarray(op, np.int64)
        self._chunks.append((full, rows))

    def build(self) -> OpTable:
        chunks = list(self._chunks)
        if self._single:
            n = len(self._single)
            cols = {k: [r.get(k, _DEFAULTS[k]) for r in self._single] for k in ALL_COLUMNS}
            given = {k for r in self._single for k in r}
            arrays = {k: _column(k, n, v) for k, v in cols.items()}
            if "is_infeed_outfeed" not in given or "is_container" not in given:
                _default_flags(arrays, {k: None for k in given})
            codes, first = _factorize_rows([arrays[k] for k in KEY_COLUMNS])
            rows = {k: arrays[k] for k in ROW_COLUMNS}
            rows["op"] = codes
            chunks.insert(0, ({k: arrays[k][first] for k in KEY_COLUMNS}, rows))
        if not chunks:
            return OpTable(
                {k: _column(k, 0, _DEFAULTS[k]) for k in KEY_COLUMNS},
                dict(
                    {k: _column(k, 0, _DEFAULTS[k]) for k in ROW_COLUMNS}, op=np.zeros(0, np.int64)
                ),
            )
        table = OpTable.concat([OpTable(k, r) for k, r in chunks])
        assert isinstance(table.rows, dict)  # (made here from plain rows)
        compact_rows(table.rows)
        return table


def constant(value, n: int) -> np.ndarray:
    """A read-only column of `n` equal values that holds one (a zero stride); under two
    values, an ordinary array."""
    value = np.asarray(value)
    return np.broadcast_to(value, (n,)) if n > 1 else np.full(n, value, value.dtype)


def is_constant(column: np.ndarray) -> bool:
    """Whether a row column is one value repeated (made by `constant`)."""
    return column.ndim == 1 and len(column) > 1 and column.strides[0] == 0


def code_type(num_keys: int) -> type:
    """The integer type of a table's `op` codes: int32 while its keys fit (4 bytes a row less
    than int64, in every host's table and the run's), int64 beyond."""
    return np.int32 if num_keys < 2**31 else np.int64


def narrow_ints(table: OpTable) -> OpTable:
    """The table with its integer row columns (`op`, `core`, `step`, `occurrences`) as int32
    where they fit (`op`: `code_type` of its keys), in place; returns it. A host's rows are 40
    bytes, 24 of them these columns where they vary: what every host's table and the run's
    (its rows are views of the hosts') hold for a run, and what a worker sends back."""
    rows = table.rows
    for k in ("op",) + INT_COLUMNS:
        v = rows.get(k)
        if v is None or is_constant(v) or v.dtype.kind != "i" or v.dtype.itemsize <= 4:
            continue
        if k == "op":
            kind: type = code_type(table.num_keys)
        else:
            fits = not len(v) or (int(v.min()) >= -(2**31) and int(v.max()) < 2**31)
            kind = np.int32 if fits else np.int64
        if v.dtype != kind:
            rows[k] = v.astype(kind)
    return table


def compact_rows(rows: dict) -> dict:
    """The row columns with each that holds one value throughout (one core, one execution a
    row, no stall: most columns of most profiles) replaced by `constant`: a table of a
    million rows then holds what varies, not 8 MB a column of zeros. In place; returns it."""
    for k, v in rows.items():
        if k != "op" and len(v) > 1 and v.strides[0] and v[0] == v[-1] and not np.any(v != v[0]):
            rows[k] = constant(v[0], len(v))
    return rows


def _held_concat(tables: list) -> OpTable:
    """`OpTable.concat` of tables some of whose rows are kept elsewhere: the keys, unit costs,
    key sums and which keys have rows side by side now; the rows themselves made from the
    inputs' (fetched, for those kept elsewhere) when first asked for, as `concat` makes them."""
    unit = all(t.unit_costs is not None for t in tables)
    keys = {k: np.concatenate([t.keys[k] for t in tables]) for k in KEY_COLUMNS}
    key_rows = np.concatenate([keys_with_rows(t) for t in tables])

    def fetch() -> dict:
        parts = [
            OpTable(t.keys, t.rows.peek() if isinstance(t.rows, HeldRows) else t.rows, t.unit_costs)
            for t in tables
        ]
        return dict(OpTable.concat(parts).rows)

    parts = [t.rows for t in tables if isinstance(t.rows, HeldRows)]
    rows = HeldRows(sum(len(t) for t in tables), key_rows, parts[0].attr, fetch=fetch, parts=parts)
    unit_costs = np.concatenate([t.unit_costs for t in tables]) if unit else None
    # Tables of unit costs carry no cost columns' sums; beside a table without, the run's are
    # summed from its rows (fetched), as `concat` makes them explicit.
    uniform = unit or all(t.unit_costs is None for t in tables)
    return OpTable(keys, rows, unit_costs, _concat_sums(tables, False) if uniform else None)


def keys_with_rows(table: OpTable) -> np.ndarray:
    """Whether each key has a row, a block of rows at a time: numpy makes int64 indices of
    narrow codes, which over a whole run's column is a copy of 8 bytes a row. Rows kept
    elsewhere: as summarized where they are (table/held_rows.py)."""
    if is_held(table.rows):
        return table.rows.key_rows
    seen = np.zeros(table.num_keys, bool)
    op = table.rows["op"]
    for lo in range(0, len(op), ROW_BLOCK):
        seen[op[lo : lo + ROW_BLOCK]] = True
    return seen


def _concat_sums(tables: list, share: bool) -> dict | None:
    """The inputs' per-key row sums side by side (a run's keys are its inputs' in order, each
    key's sum its own input's), when every input carries them; with `share` each input's
    become views of the result's."""
    if any(t.row_sums is None for t in tables):
        return None
    out = {c: np.concatenate([t.row_sums[c] for t in tables]) for c in tables[0].row_sums}
    if share:
        bounds = np.cumsum([0] + [t.num_keys for t in tables]).tolist()
        for t, lo, hi in zip(tables, bounds[:-1], bounds[1:]):
            t.row_sums = {c: v[lo:hi] for c, v in out.items()}
    return out


def _concat_rows(parts: list) -> np.ndarray:
    """One row column of several tables' (constant when every part is the same constant)."""
    first = parts[0]
    if all(is_constant(p) or len(p) < 2 for p in parts):
        n = sum(len(p) for p in parts)
        nonempty = [p for p in parts if len(p)]
        if n > 1 and nonempty and all(p[0] == nonempty[0][0] for p in nonempty):
            return constant(nonempty[0][0], n)
    return np.concatenate(parts) if len(parts) > 1 else first


def keyed_table(keys: dict, rows: dict, unit_costs: np.ndarray | None = None) -> OpTable:
    """A table from per-key and per-row columns given as they are (not copied; integer row
    columns narrower than int64 kept so: `narrow_ints`' types); missing ones take their
    defaults (cost columns come from `unit_costs` when given)."""
    m = len(keys["operation"])
    full = {k: _column(k, m, keys.get(k, _DEFAULTS[k])) for k in KEY_COLUMNS}
    _default_flags(full, keys)
    n = len(rows["op"])
    wanted = [c for c in ROW_COLUMNS if unit_costs is None or c not in COST_COLUMNS]
    out = {k: _row_column(k, n, rows.get(k, _DEFAULTS[k])) for k in wanted}
    out["op"] = _row_column("op", n, rows["op"])
    return OpTable(full, compact_rows(out), unit_costs)


def _default_flags(keys: dict, given):
    """is_infeed_outfeed / is_container follow from the category unless given."""
    cats = keys["category"]
    if "is_infeed_outfeed" not in given:
        keys["is_infeed_outfeed"] = np.fromiter(
            (is_infeed_outfeed_category(c) for c in cats.tolist()), bool, len(cats)
        )
    if "is_container" not in given:
        keys["is_container"] = np.fromiter(
            (c in CONTAINER_CATEGORIES for c in cats.tolist()), bool, len(cats)
        )


def _dtype(key: str):
    if key in KEY_STRINGS or key in KEY_DATA:
        return object
    if key in INT_COLUMNS or key == "op":
        return np.int64
    if key in KEY_FLAGS:
        return bool
    return np.float64


def _row_column(key: str, n: int, value) -> np.ndarray:
    """A row column; an integer one given as int64 or int32 (`narrow_ints`' types) as it is."""
    narrow = isinstance(value, np.ndarray) and value.dtype in (np.int32, np.int64)
    return value if narrow and (key == "op" or key in INT_COLUMNS) else _column(key, n, value)


def _column(key: str, n: int, value) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value.astype(_dtype(key), copy=False)
    arr = np.empty(n, dtype=_dtype(key))
    if key in KEY_DATA:
        return _data_column(arr, value)
    if isinstance(value, (list, tuple)):
        arr[:] = list(value)
    else:
        arr[:] = value
    return arr


def _data_column(arr: np.ndarray, value) -> np.ndarray:
    """A KEY_DATA column: a list holds one value per row, anything else (a tuple, None) is
    every row's value; filled item by item, so that a tuple stays one value, not a row."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            arr[i] = v
    else:
        arr.fill(value)
    return arr


def _factorize_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row, first row of each code) for rows keyed by several columns."""
    index: dict = {}
    n = len(columns[0]) if columns else 0
    codes = np.fromiter(
        (index.setdefault(k, len(index)) for k in zip(*[c.tolist() for c in columns])),
        np.int64,
        count=n,
    )
    first = np.zeros(len(index), np.int64)
    first[codes[::-1]] = np.arange(n)[::-1]
    return codes, first


def factorize(values: np.ndarray) -> np.ndarray:
    """Integer codes for any values (object strings included), far faster than np.unique on
    object arrays; equal values get equal codes, in order of first appearance."""
    index: dict = {}
    return np.fromiter(
        (index.setdefault(v, len(index)) for v in values.tolist()),
        dtype=np.int64,
        count=len(values),
    )


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a numeric array: `np.unique` without its first-call import of
    numpy.ma (30 ms, numpy 2.x)."""
    values = np.sort(np.asarray(values).reshape(-1))
    if len(values) < 2:
        return values
    return values[np.concatenate(([True], values[1:] != values[:-1]))]


_DEFAULTS = {
    **{k: "" for k in KEY_STRINGS},
    **{k: 0 for k in INT_COLUMNS},
    **{k: 0.0 for k in FLOAT_COLUMNS},
    **{k: False for k in KEY_FLAGS},
    **{k: None for k in KEY_DATA},
}
_DEFAULTS["step"] = NO_STEP
_DEFAULTS["flops_source"] = "profile"
_DEFAULTS["flops_known"] = True
_DEFAULTS["bytes_known"] = True


class Device(Protocol):
    """What the model reads of a profile's device before placing it under its peaks. Readers
    give a tb_roofline/devices/spec.py `DeviceInfo`; the table sits below devices, so it names
    the shape it carries rather than the class."""

    num_cores: int

    @property
    def peaks_known(self) -> bool: ...


@dataclasses.dataclass
class ProfileData:
    """What a reader hands to the model for one host (or several, once merged)."""

    device: Device | None  # None until a reader knows the device
    ops: OpTable
    steps: list[StepSpan] | StepSpans
    core_spans: list[CoreSpan]
    diagnostics: list[Diagnostic]
    has_hw_counters: bool = False
    # Whether f32 matmuls may sit under a TF32 roof when no kernel says what ran (XLA's
    # default; PyTorch's only when asked).
    allow_tf32: bool = True
    # PyTorch traces: kernel-level rows (a second view), hardware counters (the "Total (HW)"
    # record and per-kernel counter rows), and the rank this file is.
    kernels: OpTable | None = None
    hw_counters: object | None = None
    hw_ops: OpTable | None = None
    rank: int | None = None
    world_size: int | None = None
    device_properties: list | None = None
    # Timeline facts the op table cannot hold (idle and exposed time per core and step, ops
    # run back to back) and the shapes matmuls and copies ran with: table/timeline.py.
    timeline: object | None = None  # tb_roofline.table.timeline.Timeline
    op_shapes: dict | None = None  # OpLabel -> [ShapeUse]
    # The kernels each op launched (PyTorch traces): OpLabel -> [table.timeline.KernelUse].
    op_kernels: dict | None = None
    # Serving engines' steps (readers/kineto/serving.py): per step its phase, batch, tokens,
    # per-phase sums of query and key lengths, time and tokens/s.
    serving_steps: list | None = None
    # Sampled device counters (PM sampling, clocks, power): table/counter_series.py.
    counter_series: CounterSeries | None = None
