"""Sampled device counters (the op table's companion for PM sampling and environment counters).

A reader gives each series the quantity it measures (`QUANTITIES`), so the model integrates
them over its windows without knowing how a format names them. Samples are columns on the op
table's time base (ps); a sample covers [ts, ts + its series' interval).
"""

from __future__ import annotations

import dataclasses

import numpy as np

# What each quantity is: "amount" (a count per sample: summed over a window) or "level" (a value
# held over the sample: averaged over the window, weighted by time).
QUANTITIES = {
    "dram_read_bytes": "amount",
    "dram_write_bytes": "amount",
    "dram_bytes": "amount",
    "dram_pct": "level",  # DRAM throughput, % of peak
    "sm_active_pct": "level",
    # sm__cycles_active.avg: cycles an SM was active in the sample, averaged over the SMs
    "sm_active_cycles": "amount",
    "tensor_pipe_pct": "level",
    "sm_clock_mhz": "level",
    "mem_clock_mhz": "level",
    "power_w": "level",
    "temperature_c": "level",
    # SASS floating-point instruction counts, e.g. "sass_f32_fma" (add, mul, fma per precision)
    **{f"sass_{p}_{op}": "amount" for p in ("f64", "f32", "f16") for op in ("add", "mul", "fma")},
}


@dataclasses.dataclass
class CounterSeries:
    """The sampled counters of one trace: one series per (device, metric), samples as columns.

    `names`, `quantities`, `devices` and `interval_ps` are per series (`quantities[i]` is a key
    of QUANTITIES or "" when the metric is kept but not used); `series`, `ts_ps` and `value` per
    sample, sorted by (series, ts). `interval_ps` is the sampling period (the median spacing of
    the series' samples; NaN with one sample). `rated_clock_mhz`: the data sheet's boost clock of
    the device (None when the data sheet gives none)."""

    names: list
    quantities: list
    devices: np.ndarray
    interval_ps: np.ndarray
    series: np.ndarray
    ts_ps: np.ndarray
    value: np.ndarray
    rated_clock_mhz: float | None = None

    def __len__(self) -> int:
        return len(self.names)

    def of(self, quantity: str) -> list[int]:
        """The series measuring `quantity`."""
        return [i for i, q in enumerate(self.quantities) if q == quantity]

    def samples(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(start times in ps, values) of series i."""
        lo, hi = np.searchsorted(self.series, [i, i + 1])
        return self.ts_ps[lo:hi], self.value[lo:hi]


def build_series(keys: list, quantities: list, series, ts_ps, value, rated_clock_mhz=None):
    """CounterSeries from unsorted samples: `keys[i]` = (device, metric name) of series i,
    `quantities[i]` its quantity; `series`, `ts_ps` (float ps on the op table's time base) and
    `value` per sample."""
    series = np.asarray(series, np.int64)
    ts_ps = np.asarray(ts_ps, np.float64)
    order = np.lexsort((ts_ps, series))
    series, ts_ps = series[order], ts_ps[order]
    return CounterSeries(
        names=[name for _, name in keys],
        quantities=list(quantities),
        devices=np.array([d for d, _ in keys], np.int64).reshape(-1),
        interval_ps=intervals(series, ts_ps, len(keys)),
        series=series,
        ts_ps=ts_ps,
        value=np.asarray(value, np.float64)[order],
        rated_clock_mhz=rated_clock_mhz,
    )


def intervals(series: np.ndarray, ts_ps: np.ndarray, n: int) -> np.ndarray:
    """Each series' sampling period: the median spacing of its samples (NaN when fewer than
    two distinct times); `series` and `ts_ps` sorted by (series, ts)."""
    out = np.full(n, np.nan)
    bounds = np.searchsorted(series, np.arange(n + 1))
    for i in range(n):
        gaps = np.diff(ts_ps[bounds[i] : bounds[i + 1]])
        gaps = gaps[gaps > 0]
        if len(gaps):
            out[i] = float(np.median(gaps))
    return out
