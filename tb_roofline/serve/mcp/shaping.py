"""What the MCP tools share: the columns an answer shows by default, field names with their
units (`unit_name`), numbers rounded (`shape`), paging and argument checks, and the service's
answers as plain Python (`answer_of`: the HTTP route's answer, never JSON decoded again).
"""

from __future__ import annotations

import numpy as np

from tb_roofline import errors
from tb_roofline.model.records.record_table import GBS_MEM_IDS
from tb_roofline.serve.mcp import envelope
from tb_roofline.serve.mcp.envelope import choose
from tb_roofline.serve.service.answers import NO_VALUE, SIGNIFICANT_DIGITS, round_significant

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
    "roof_precision",
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
FINGERPRINTS = "fingerprints"  # top_ops' own field: the op's fingerprints, as compare's
VIEWS = ("op", "kernel", "kernel_hw")  # the op table, PyTorch GPU kernels, kernels (HW)
# Caveat codes (model/records/records.py, model/records/roofline.py, table/op_table.py), and
# NO_VALUE.
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


GBS_FIELDS = frozenset(f"{m}_bw" for m in GBS_MEM_IDS)


def unit_name(name: str) -> str:
    """The field name an MCP answer uses: the HTTP API's, with its unit where it lacks one."""
    if name.endswith("flop_rate"):
        return name + "_gflops"  # GFLOP/s
    if name in GBS_FIELDS:
        return name + "_gbs"  # GB/s: the links (model/records/record_table.GBS_MEM_IDS)
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


def digits_of(significant_digits) -> int:
    if significant_digits is None:
        return SIGNIFICANT_DIGITS
    if not 0 <= significant_digits <= 17:
        raise errors.InvalidArgumentError(
            f"significant_digits must be between 0 and 17, not {significant_digits}"
        )
    return significant_digits


def paging(offset: int, limit: int | None):
    if offset < 0:
        raise errors.InvalidArgumentError("'offset' must not be negative")
    if limit is not None and not 0 <= limit <= MAX_LIMIT:
        raise errors.InvalidArgumentError(f"'limit' must be between 0 and {MAX_LIMIT}")
    return offset, DEFAULT_LIMIT if limit is None else limit


def next_offset(offset: int, returned: int, total: int):
    """The next page's offset; None on the last page and for `limit: 0` (counts only), so a
    loop over `next_offset` always ends."""
    nxt = offset + returned
    return nxt if returned and nxt < total else None


def view_choice(view: str) -> str:
    return choose("view", [view], VIEWS, "views")[0]


def pick(columns, wanted, default) -> list:
    """The columns an answer shows: `wanted` (HTTP names or MCP names), else `default`."""
    if not wanted:
        return [c for c in default if c in columns]
    by_name = {unit_name(c): c for c in columns} | {c: c for c in columns}
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        raise envelope.ChoiceError(
            f"unknown column(s) {', '.join(map(repr, unknown))}; columns: "
            + ", ".join(unit_name(c) for c in columns),
            "columns",
            [unit_name(c) for c in columns],
        )
    return [by_name[w] for w in wanted]


def records_of(columns, rows, keep) -> list:
    index = [columns.index(c) for c in keep]
    return [{c: r[i] for c, i in zip(keep, index)} for r in rows]


def io_flag(infeed_outfeed: str) -> bool:
    if infeed_outfeed not in ("include", "exclude"):
        raise errors.InvalidArgumentError(
            f"infeed_outfeed must be 'include' or 'exclude', not {infeed_outfeed!r}"
        )
    return infeed_outfeed == "include"


def answer_of(service, kind, run, host, whole: bool = False, **params) -> dict:
    """The service's answer of `kind` as plain Python: exactly the HTTP route's, cut at
    TB_ROOFLINE_MAX_ANSWER_MB as it is; `whole`: every row (a tool that filters, sorts or
    counts the rows itself; its own cap then pages them)."""
    return service.answer(kind, run, host or "", capped=not whole, **params)
