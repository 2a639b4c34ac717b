"""Sampled GPU counters of a PyTorch trace: PM sampling and environment counters.

Both kinds are counter events (`"ph": "C"`) of a process named `GPU N Counters` (a string pid),
one event per metric per sample, the value under the empty key (`"args": {"": v}`), `ts` the
sample's start in µs; the sample's end is not written, so a series' interval is the spacing of
its samples. Kineto's own writer (`libkineto/src/output_json.cpp`, `handleCounterEvent`) adds
`"cat": "hardware_counters"` and keeps the CUPTI metric name; PyTorch's Python exporter
(`torch/profiler`, `_build_chrome_counters`) writes no category and names known metrics by a
label ("HBM BW (%)", "SM Active (%)", ...), and writes the environment counters ("Power (W)",
"Temperature (C)", "SM Clock (MHz)", "Memory Clock (MHz)") the same way. docs/pytorch_traces.md
has the names read and the quantity each becomes.
"""

from __future__ import annotations

import array
import math
import re

import numpy as np

from tb_roofline.devices.gpu_peaks import kineto_device_peaks
from tb_roofline.readers.kineto.event_fields import MAX_DEVICE, BadEvent, ts_ns
from tb_roofline.readers.metrics.cupti import cupti_quantity
from tb_roofline.table.counter_series import CounterSeries, build_series

COUNTER_PROCESS = re.compile(r"^GPU (\d+) Counters$")
# PyTorch's labels of "% of peak" rollups.
PCT_LABELS = {"hbm bw": "dram_pct", "dram bw": "dram_pct", "sm active": "sm_active_pct"}
# Environment counters: (words in the lower-case label, quantity, unit scales to the quantity's).
ENV = (
    (("sm", "clock"), "sm_clock_mhz", {"mhz": 1.0, "ghz": 1e3, "khz": 1e-3, "": 1.0}),
    (("clocks.sm",), "sm_clock_mhz", {"mhz": 1.0, "ghz": 1e3, "khz": 1e-3, "": 1.0}),
    (("memory", "clock"), "mem_clock_mhz", {"mhz": 1.0, "ghz": 1e3, "khz": 1e-3, "": 1.0}),
    (("power",), "power_w", {"w": 1.0, "mw": 1e-3, "": 1.0}),
    (("temperature",), "temperature_c", {"c": 1.0, "": 1.0}),
)
UNIT = re.compile(r"\(([^)]*)\)\s*$")
MAX_VALUE = 1e18


def quantity_of(name: str) -> tuple[str, float]:
    """(the quantity a counter's name measures, the factor to its unit); ("", 1) when unused."""
    quantity = cupti_quantity(name)
    if quantity:
        return quantity, 1.0
    low = name.strip().lower()
    unit_m = UNIT.search(low)
    unit = unit_m.group(1).strip() if unit_m else ""
    label = low[: unit_m.start()].strip() if unit_m else low
    if unit == "%" and label in PCT_LABELS:
        return PCT_LABELS[label], 1.0
    for words, quantity, scales in ENV:
        if all(w in label for w in words) and unit in scales:
            return quantity, scales[unit]
    return "", 1.0


class PmCollector:
    """Counter events of `GPU N Counters` processes as columns: series (device, name) interned."""

    def __init__(self):
        self.keys: dict[tuple[int, str], int] = {}
        self.series = array.array("q")
        self.ts = array.array("q")  # ns
        self.value = array.array("d")

    def add(self, ev: dict) -> None:
        """One counter event; other processes' counters are not device samples (left out)."""
        pid = ev.get("pid")
        m = COUNTER_PROCESS.match(pid) if type(pid) is str else None
        if m is None:
            return
        device = int(m.group(1)) if len(m.group(1)) < 8 else MAX_DEVICE
        name, args = ev.get("name"), ev.get("args")
        if type(name) is not str or type(args) is not dict or device >= MAX_DEVICE:
            raise BadEvent
        v = args.get("") if "" in args or len(args) != 1 else next(iter(args.values()))
        # a counter counts, and no sampled counter reaches 1e18 in one sample (bytes, SASS
        # instructions, %, MHz, W): larger values are corrupt and would overflow sums
        if not isinstance(v, (int, float)) or type(v) is bool:
            raise BadEvent
        if not math.isfinite(v) or not 0 <= v <= MAX_VALUE:
            raise BadEvent
        ts = ts_ns(ev.get("ts"))
        key = (device, name[:256])
        idx = self.keys.setdefault(key, len(self.keys))
        self.series.append(idx)
        self.ts.append(ts)
        self.value.append(float(v))

    def build(self, base_ns: int, rated_clock_mhz: float | None) -> CounterSeries | None:
        """The series on the op table's time base (ps after `base_ns`); None without samples."""
        if not len(self.series):
            return None
        keys = [key for key, _ in sorted(self.keys.items(), key=lambda kv: kv[1])]
        quantities, factors = zip(*(quantity_of(name) for _, name in keys))
        series = np.frombuffer(self.series, np.int64)
        value = np.frombuffer(self.value, np.float64) * np.asarray(factors)[series]
        ts_ps = (np.frombuffer(self.ts, np.int64) - base_ns).astype(np.float64) * 1e3
        return build_series(keys, list(quantities), series, ts_ps, value, rated_clock_mhz)


def rated_clock_mhz(props: list, spans) -> float | None:
    """The data sheet's boost clock of the GPU that ran (the device `device.device_info` picks);
    None when the data sheet gives no clock or the GPU is not in it."""
    used = {s.core for s in spans}
    prop = next((p for p in props if p.get("id") in used), props[0] if props else None)
    if prop is None:
        return None
    peaks = kineto_device_peaks(prop)
    return peaks.spec.clock_mhz if peaks.spec is not None else None
