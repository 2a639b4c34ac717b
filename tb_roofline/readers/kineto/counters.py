"""Stage 5 of the Kineto reader: CUPTI hardware counters (the "Total (HW counters)" record).

`cuda_profiler_range` events (the CUPTI range profiler) carry per-kernel SASS instruction
counts; FLOPs per precision = add + mul + 2·fma (Nsight Compute's rule). They come in launch
order with placeholder times: when there is one range per launch they are matched to the
launches, and so to the op and step that launched them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers.kineto.attribution import Nesting, Steps
from tb_roofline.readers.kineto.columns import Columns
from tb_roofline.readers.kineto.events import Collector
from tb_roofline.readers.kineto.grouped_rows import add_grouped
from tb_roofline.table.op_table import NO_STEP, OpTable, OpTableBuilder

HW_PREFIX = "smsp__sass_thread_inst_executed_op_"
HW_PRECISIONS = {"d": "f64", "f": "f32", "h": "f16"}
HW_NOTE = (
    "CUPTI SASS instruction counters (add + mul + 2·fma per precision) count CUDA-core "
    "floating-point work only: tensor-core (HMMA/IMMA/DMMA) work is not counted, so "
    "GEMMs and convolutions on tensor cores show few or no hardware FLOPs; half-precision "
    "counts are instructions, and packed (×2) instructions count once."
)


@dataclasses.dataclass
class HwCounters:
    """Hardware counters of a trace (CUPTI range profiler), for the "Total (HW)" record.

    `kernels` has one entry per profiled kernel, in launch order: name, metrics (raw sums),
    flops per precision, total flops, the row op that launched it (when the ranges could be
    matched to the launches) and its step. `flops` sums per precision; `metric_sums` sums each
    metric. `kernel_time_known` says whether the trace also timed the kernels (range-profiler
    traces do not: their range times are placeholders)."""

    kernels: list
    flops: dict
    total_flops: float
    metric_sums: dict
    matched_to_ops: bool
    kernel_time_known: bool
    note: str = HW_NOTE

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _num(value) -> float:
    """A finite, non-negative JSON number as a float (counters count: a negative one is
    corrupt); 0 for anything else (strings, null, NaN, inf, bools, negatives)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            value = float(value)
        except OverflowError:
            return 0.0
        if math.isfinite(value) and value >= 0:
            return value
    return 0.0


def negative_counters(col: Collector) -> list:
    """A diagnostic for CUPTI counter values below 0 (dropped: they count as 0)."""
    n = sum(
        1
        for _, metrics in col.hw
        if isinstance(metrics, dict)
        for v in metrics.values()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0
    )
    if not n:
        return []
    return [
        Diagnostic(
            "warning",
            "negative_counters",
            f"{n} CUPTI counter values are negative (corrupt); they count as 0",
        )
    ]


def hw_flops_from_metrics(metrics: dict) -> dict:
    """FLOPs per precision from SASS counters: add + mul + 2·fma (Nsight Compute's rule)."""
    out = {}
    if not isinstance(metrics, dict):
        return out
    for letter, precision in HW_PRECISIONS.items():
        keys = [f"{HW_PREFIX}{letter}{op}_pred_on.sum" for op in ("add", "mul", "fma")]
        if not any(k in metrics for k in keys):
            continue
        add, mul, fma = (_num(metrics.get(k)) for k in keys)
        total = add + mul + 2.0 * fma
        out[precision] = total if math.isfinite(total) else 0.0
    return out


def hw_counters(col: Collector, c: Columns, tree: Nesting, step_spans: Steps) -> HwCounters | None:
    """The trace's CUPTI range-profiler kernels, matched to their launches (and so to their row
    op and step) when there is one range per launch; None when the trace has none."""
    if not col.hw:
        return None
    kernels = []
    totals: dict = {}
    metric_sums: dict = {}
    for name, metrics in col.hw:
        flops = hw_flops_from_metrics(metrics)
        for p, v in flops.items():
            totals[p] = totals.get(p, 0.0) + v
        # Only finite numbers are kept: the metrics go out as JSON.
        metrics = {
            k: v
            for k, v in metrics.items()
            if isinstance(v, (str, bool)) or v is None or v == _num(v)
        }
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                metric_sums[k] = metric_sums.get(k, 0) + v
        kernels.append(
            {
                "name": name,
                "metrics": metrics,
                "flops": flops,
                "total_flops": sum(flops.values()),
                "op": None,
                "step": NO_STEP,
                "time_ps": None,
            }
        )
    # Ranges come one per launched kernel, in launch order: match them to the launches.
    launches = np.flatnonzero(c.rt_launch)
    matched = len(launches) == len(kernels) and len(kernels) > 0
    if matched:
        launches = launches[np.argsort(c.rt_ts[launches], kind="stable")]
        ops = tree.enclosing(
            c, c.rt_thread[launches], c.rt_ts[launches], c.rt_ts[launches] + c.rt_dur[launches]
        )
        steps = step_spans.of(c.rt_ts[launches])
        for kern, op, st in zip(kernels, ops.tolist(), steps.tolist()):
            if op >= 0:
                kern["op"] = str(c.names[c.op_name[tree.row_op[op]]])
            kern["step"] = int(st)
    return HwCounters(
        kernels=kernels,
        flops=totals,
        total_flops=float(sum(totals.values())),
        metric_sums=metric_sums,
        matched_to_ops=matched,
        kernel_time_known=False,
    )


def hw_table(hw: HwCounters, host: str) -> OpTable:
    """Per-kernel hardware-counter rows (flops_source "counter"), one per kernel name and step;
    precision is the one with the most counted FLOPs."""
    b = OpTableBuilder()
    n = len(hw.kernels)
    if not n:
        return b.build()
    op = np.array([k["name"] for k in hw.kernels], dtype=object)
    prec = np.array(
        [
            max(k["flops"], key=k["flops"].get) if k["flops"] and k["total_flops"] > 0 else ""
            for k in hw.kernels
        ],
        dtype=object,
    )
    add_grouped(
        b,
        host,
        np.zeros(n, np.int64),
        op,
        np.full(n, "kernel", object),
        prec,
        np.full(n, "counter", object),
        np.array([k["step"] for k in hw.kernels], np.int64),
        np.zeros(n),
        np.array([k["total_flops"] for k in hw.kernels]),
        np.zeros(n),
        np.ones(n, np.int64),
    )
    return b.build()
