"""CUPTI metric names and the quantity each measures (table/counter_series.py `QUANTITIES`).

PM sampling writes the same CUPTI metric names whichever profiler records it: Kineto's JSON
writer (a PyTorch trace's `GPU N Counters` process) and XLA's profiler (a GPU plane's
`_counters_` line). Both readers name their series here; docs/pytorch_traces.md lists them.
"""

from __future__ import annotations

import re

SASS = re.compile(r"^smsp__sass_thread_inst_executed_op_([dfh])(add|mul|fma)_pred_on\.sum$")
SASS_PRECISION = {"d": "f64", "f": "f32", "h": "f16"}
RAW_BYTES = {
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "dram__bytes.sum": "dram_bytes",
}
# "% of peak" rollups of these metric bases.
PCT_BASES = {
    "dram__throughput": "dram_pct",
    "gpu__dram_throughput": "dram_pct",
    "sm__cycles_active": "sm_active_pct",
}
# Cycle counts: `.avg` is the mean over the SMs of the cycles each was active in the sample.
CYCLES = {"sm__cycles_active.avg": "sm_active_cycles"}


def cupti_quantity(name: str) -> str:
    """The quantity a CUPTI metric measures; "" for a metric not used."""
    if name in RAW_BYTES:
        return RAW_BYTES[name]
    if name in CYCLES:
        return CYCLES[name]
    m = SASS.match(name)
    if m:
        return f"sass_{SASS_PRECISION[m.group(1)]}_{m.group(2)}"
    base, _, rollup = name.partition(".")
    if "pct_of_peak" in rollup:
        if base in PCT_BASES:
            return PCT_BASES[base]
        if base.startswith("sm__pipe_tensor"):
            return "tensor_pipe_pct"
    return ""
