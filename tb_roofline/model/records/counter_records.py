"""Measured program records from sampled device counters (PM sampling) and the clocks they ran at.

The reader gives each counter series the quantity it measures (table/counter_series.py); here
the series are integrated over windows: the Total's (each device's profiled span) and each
complete step's. A sample covers [ts, ts + interval) (cut at the next sample's start) and is
taken as even over it, so a window gets each sample's share of overlap. What each window yields:

- DRAM bytes: the `dram_*_bytes` sums where sampled ("bytes counters"), else the mean DRAM
  throughput % × the device's HBM peak × the covered time ("% of peak × HBM peak");
- FLOPs per precision from SASS instruction counts (add + mul + 2·fma), when sampled;
- coverage: the share of the window that samples cover (bytes and FLOPs are over that part);
- SM activity: the share of the covered time the SMs were active, from an "SM active %" series
  (time-weighted mean) or from `sm__cycles_active.avg` (active cycles per SM, summed) ÷ (the
  rated clock × the covered time): a lower bound of the true share when the clock ran below
  the rated one (fewer cycles fit in the time);
- the SM clock (time-weighted mean) and the share of the covered time below the rated clock.

Samples (1 ms by default) are far longer than ops, so they are never attributed to ops.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tb_roofline.diagnostics import Diagnostic
from tb_roofline.model.records.record_table import SUM_COLUMNS
from tb_roofline.model.records.records import compute_roof, div

# A sample below this share of the rated clock counts as throttled (clocks step in ~15 MHz bins).
THROTTLE_RATIO = 0.99
PRECISIONS = ("f64", "f32", "f16")
COARSE_NOTE = (
    "PM samples cover {interval} each, longer than most ops: they are integrated over the "
    "Total's and each step's window only, never attributed to ops"
)


@dataclasses.dataclass
class WindowCounters:
    """What sampled counters say about one window (summed over its devices)."""

    window_ps: float = 0.0
    covered_ps: float = 0.0  # window time covered by the DRAM (else any) series' samples
    dram_bytes: float = math.nan
    bytes_source: str = ""  # "bytes counters", "% of peak × HBM peak" or ""
    flops: dict = dataclasses.field(default_factory=dict)  # precision -> FLOPs
    flops_covered_ps: float = 0.0
    clock_mhz: float = math.nan  # time-weighted mean SM clock
    clock_covered_ps: float = 0.0
    throttled_ps: float = 0.0  # covered time whose SM clock was below THROTTLE_RATIO × rated
    clock_bound_ps: float = 0.0  # Σ overlap × (1 − clock / rated) of throttled samples
    rated_clock_mhz: float | None = None
    sm_active_ps: float = 0.0  # Σ active share × covered time (of the SM activity series)
    sm_covered_ps: float = 0.0
    sm_source: str = ""  # "SM active %", "active cycles ÷ (rated clock × time)" or "mixed"
    tensor_ps: float = 0.0  # Σ tensor-pipe busy share × covered time
    tensor_covered_ps: float = 0.0

    @property
    def coverage(self) -> float:
        return self.covered_ps / self.window_ps if self.window_ps > 0 else math.nan

    @property
    def clock_scale(self) -> float:
        """Compute roofs scale with the SM clock: mean clock / rated (1 at or above it; NaN
        when unknown)."""
        if not self.rated_clock_mhz or not math.isfinite(self.clock_mhz):
            return math.nan
        return min(1.0, self.clock_mhz / self.rated_clock_mhz)

    @property
    def sm_active(self) -> float:
        """The share of the covered time the SMs were active (NaN when not sampled)."""
        return self.sm_active_ps / self.sm_covered_ps if self.sm_covered_ps > 0 else math.nan

    @property
    def tensor_active(self) -> float:
        """The tensor pipes' busy share of the covered time (NaN when not sampled)."""
        if self.tensor_covered_ps <= 0:
            return math.nan
        return self.tensor_ps / self.tensor_covered_ps

    @property
    def throttled_share(self) -> float:
        return self.throttled_ps / self.clock_covered_ps if self.clock_covered_ps > 0 else math.nan


def _overlap(ts, interval, lo, hi) -> np.ndarray:
    """Each sample's time in [lo, hi): a sample covers [ts, ts + interval), cut at the next
    sample's start (the spacing jitters by a few ns: samples never cover a time twice)."""
    end = np.minimum(ts + interval, np.append(ts[1:], np.inf))
    return np.clip(np.minimum(end, hi) - np.maximum(ts, lo), 0.0, None)


def _integral(cs, i: int, lo: float, hi: float) -> tuple[float, float, float]:
    """(Σ value × share of the sample in [lo, hi), Σ value × overlap, covered ps) of series i."""
    ts, v = cs.samples(i)
    iv = float(cs.interval_ps[i])
    if not math.isfinite(iv) or iv <= 0:
        return 0.0, 0.0, 0.0
    ov = _overlap(ts, iv, lo, hi)
    return float((v * ov).sum() / iv), float((v * ov).sum()), float(ov.sum())


def _series(cs, quantity: str, device: int) -> list[int]:
    return [i for i in cs.of(quantity) if int(cs.devices[i]) == device]


def _add_window(out: WindowCounters, cs, device: int, lo: float, hi: float, hbm_gbs: float):
    """Add one device's window [lo, hi) ps to `out`."""
    out.window_ps += hi - lo
    out.rated_clock_mhz = cs.rated_clock_mhz
    byte_series = [
        i for q in ("dram_read_bytes", "dram_write_bytes") for i in _series(cs, q, device)
    ] or _series(cs, "dram_bytes", device)
    pct = _series(cs, "dram_pct", device)
    if byte_series:
        parts = [_integral(cs, i, lo, hi) for i in byte_series]
        _add_bytes(out, sum(p[0] for p in parts), min(p[2] for p in parts), "bytes counters")
    elif pct and hbm_gbs > 0:
        _, weighted, covered = _integral(cs, pct[0], lo, hi)
        # % × GB/s × ps: (weighted / 100) × hbm_gbs × 1e9 B/s × 1e-12 s/ps
        _add_bytes(out, weighted / 100.0 * hbm_gbs * 1e-3, covered, "% of peak × HBM peak")
    _add_flops(out, cs, device, lo, hi)
    _add_clock(out, cs, device, lo, hi)
    _add_sm_active(out, cs, device, lo, hi)
    _add_tensor(out, cs, device, lo, hi)


def _add_bytes(out: WindowCounters, nbytes: float, covered: float, source: str):
    if covered <= 0:  # no sample in the window: its bytes stay unknown, not 0
        return
    out.dram_bytes = (0.0 if math.isnan(out.dram_bytes) else out.dram_bytes) + nbytes
    out.covered_ps += covered
    out.bytes_source = source if out.bytes_source in ("", source) else "mixed"


def _add_flops(out: WindowCounters, cs, device: int, lo: float, hi: float):
    """FLOPs per precision: add + mul + 2·fma of the SASS counts (Nsight Compute's rule)."""
    covered = []
    for p in PRECISIONS:
        total, seen = 0.0, False
        for op, weight in (("add", 1.0), ("mul", 1.0), ("fma", 2.0)):
            for i in _series(cs, f"sass_{p}_{op}", device):
                amount, _, cov = _integral(cs, i, lo, hi)
                total += weight * amount
                covered.append(cov)
                seen = True
        if seen:
            out.flops[p] = out.flops.get(p, 0.0) + total
    if covered:
        out.flops_covered_ps += min(covered)


def _add_clock(out: WindowCounters, cs, device: int, lo: float, hi: float):
    """The SM clock's time-weighted mean, and the throttled time and its bound."""
    series = _series(cs, "sm_clock_mhz", device)
    if not series:
        return
    ts, v = cs.samples(series[0])
    iv = float(cs.interval_ps[series[0]])
    if not math.isfinite(iv) or iv <= 0:
        return
    ov = _overlap(ts, iv, lo, hi)
    covered = float(ov.sum())
    if covered <= 0:
        return
    before = 0.0 if math.isnan(out.clock_mhz) else out.clock_mhz * out.clock_covered_ps
    out.clock_covered_ps += covered
    out.clock_mhz = (before + float((v * ov).sum())) / out.clock_covered_ps
    rated = cs.rated_clock_mhz
    if rated:
        slow = v < THROTTLE_RATIO * rated
        out.throttled_ps += float(ov[slow].sum())
        out.clock_bound_ps += float((ov * np.clip(1.0 - v / rated, 0.0, None))[slow].sum())


def _add_sm_active(out: WindowCounters, cs, device: int, lo: float, hi: float):
    """SM activity: a % series' time-weighted mean, else active cycles per SM over the cycles
    the rated clock fits in the covered time."""
    pct = _series(cs, "sm_active_pct", device)
    cycles = _series(cs, "sm_active_cycles", device)
    if pct:
        _, weighted, covered = _integral(cs, pct[0], lo, hi)
        active_ps, source = weighted / 100.0, "SM active %"
    elif cycles and cs.rated_clock_mhz:
        amount, _, covered = _integral(cs, cycles[0], lo, hi)
        # cycles ÷ (MHz × 1e6 /s) = s; × 1e12 ps/s
        active_ps, source = (
            amount / (cs.rated_clock_mhz * 1e6) * 1e12,
            ("active cycles ÷ (rated clock × time)"),
        )
    else:
        return
    if covered <= 0:
        return
    out.sm_active_ps += active_ps
    out.sm_covered_ps += covered
    out.sm_source = source if out.sm_source in ("", source) else "mixed"


def _add_tensor(out: WindowCounters, cs, device: int, lo: float, hi: float):
    """The tensor pipes' busy %: time-weighted mean (busy cycles, not FLOPs: the counter does
    not say which precision ran)."""
    series = _series(cs, "tensor_pipe_pct", device)
    if not series:
        return
    _, weighted, covered = _integral(cs, series[0], lo, hi)
    if covered > 0:
        out.tensor_ps += weighted / 100.0
        out.tensor_covered_ps += covered


def window_counters(profiles, windows, hbm_gbs: float) -> WindowCounters | None:
    """The counters of one window over profiles: `windows[j]` is profile j's list of (device,
    lo ps, hi ps). None when no profile has sampled counters."""
    out = WindowCounters()
    found = False
    for p, spans in zip(profiles, windows):
        cs = getattr(p, "counter_series", None)
        if cs is None:
            continue
        found = True
        for device, lo, hi in spans:
            _add_window(out, cs, device, lo, hi, hbm_gbs)
    return out if found else None


def total_windows(profiles) -> list:
    """Each profile's core spans as (device, lo ps, hi ps)."""
    return [[(s.core, float(s.start_ps), float(s.end_ps)) for s in p.core_spans] for p in profiles]


def step_windows(profiles, step_ids) -> list:
    """Each profile's windows of one aligned step: `step_ids[j]` is profile j's step id."""
    out = []
    for p, sid in zip(profiles, step_ids):
        spans = p.steps
        out.append(
            [
                (int(s.core), float(s.start_ps), float(s.start_ps + s.duration_ps))
                for s in spans
                if int(s.step) == int(sid)
            ]
        )
    return out


def counter_sums(w: WindowCounters, device, scale: float = 1.0) -> dict:
    """Record sums of a measured window: DRAM bytes as HBM bytes over the covered time, FLOPs
    under each precision's roof scaled by `scale` (the clock's, 1 at the rated clock)."""
    sums = {c: np.zeros(1) for c in SUM_COLUMNS}
    sums["occurrences"] = np.ones(1)
    sums["op_time_ps"] = np.array([w.window_ps])
    if not math.isnan(w.dram_bytes):
        sums["bytes"] = sums["hbm_bytes"] = np.array([w.dram_bytes])
        sums["bytes_known_ps"] = np.array([w.covered_ps])
    if w.flops:
        flops = sum(w.flops.values())
        sums["flops"] = sums["model_flops"] = np.array([flops])
        sums["flops_known_ps"] = np.array([w.flops_covered_ps])
        roof = sum(float(div(f, compute_roof(device, [p])[0] * scale)) for p, f in w.flops.items())
        sums["roof_time"] = np.array([roof])
    return sums


def summary(w: WindowCounters, label: str) -> dict:
    """A window's counters as plain facts (diagnostics, the clock finding); unknown is None."""
    facts = {
        "window": label,
        "window_us": w.window_ps / 1e6,
        "coverage": w.coverage,
        "dram_bytes": w.dram_bytes,
        "bytes_source": w.bytes_source,
        "flops": dict(w.flops),
        "clock_mhz": w.clock_mhz,
        "rated_clock_mhz": w.rated_clock_mhz,
        "clock_scale": w.clock_scale,
        "throttled_share": w.throttled_share,
        "throttled_us": w.throttled_ps / 1e6,
        "clock_bound_us": w.clock_bound_ps / 1e6,
        "sm_active": w.sm_active,
        "sm_active_source": w.sm_source,
        "tensor_active": w.tensor_active,
    }
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in facts.items()}


@dataclasses.dataclass
class RunCounters:
    """The sampled counters of a run: the Total's window and each complete step's (None where
    no sample falls), and the sampling intervals (ps) seen."""

    total: WindowCounters
    steps: list
    intervals_ps: list
    labels: list  # the steps' labels (their program records')

    @property
    def measured(self) -> bool:
        """Whether the counters measured DRAM traffic or FLOPs (a measured record)."""
        return not math.isnan(self.total.dram_bytes) or bool(self.total.flops)

    def step_scales(self) -> np.ndarray:
        """Each step's compute-roof scale (its clock / rated; 1 where unknown or not below)."""
        return np.array(
            [
                s.clock_scale if s is not None and math.isfinite(s.clock_scale) else 1.0
                for s in self.steps
            ]
        )


def run_counters(profiles, step_ids, labels, device) -> RunCounters | None:
    """The run's counters over its Total and each aligned step; `step_ids[j]` holds profile j's
    step id of each aligned step, `labels` each step's label. None when no profile has sampled
    counters."""
    series = [getattr(p, "counter_series", None) for p in profiles]
    if all(cs is None for cs in series):
        return None
    hbm = device.memory("hbm")
    gbs = hbm.gbs if hbm is not None else 0.0
    total = window_counters(profiles, total_windows(profiles), gbs)
    steps = [
        window_counters(profiles, step_windows(profiles, [ids[k] for ids in step_ids]), gbs)
        for k in range(len(step_ids[0]) if step_ids else 0)
    ]
    intervals = sorted(
        {float(v) for cs in series if cs is not None for v in cs.interval_ps if math.isfinite(v)}
    )
    return RunCounters(total or WindowCounters(), steps, intervals, list(labels))


def _interval_text(intervals_ps: list) -> str:
    if not intervals_ps:
        return "an unknown interval"
    return " / ".join(f"{v / 1e9:.3g} ms" for v in intervals_ps)


def counter_notes(rc: RunCounters, device, step_labels: list) -> list:
    """What the model says about sampled counters: the measured record's sampling, its
    coverage and bytes' source (the HBM peak a % of peak is taken of); SM activity; steps
    judged under clock-scaled roofs; clocks without a rated clock to compare with."""
    notes = []
    t = rc.total
    sm = _sm_text(rc, step_labels)
    if rc.measured:
        what = []
        if not math.isnan(t.dram_bytes):
            what.append(f"DRAM bytes from {t.bytes_source}{_peak_text(t, device)}")
        if t.flops:
            what.append("FLOPs from SASS counts (add + mul + 2·fma; tensor-core work uncounted)")
        notes.append(
            Diagnostic(
                "info",
                "pm_counters",
                f"Total (HW counters): PM sampling every {_interval_text(rc.intervals_ps)}, "
                f"samples cover {t.coverage:.1%} of the Total's time; {'; '.join(what)}; "
                "bytes and FLOPs are those of the covered time, over the whole window's time "
                "(a lower bound of the rate when coverage is below 100%). "
                + (f"{sm}. " if sm else "")
                + COARSE_NOTE.format(interval=_interval_text(rc.intervals_ps)),
            )
        )
    elif sm:
        notes.append(
            Diagnostic(
                "info",
                "pm_counters",
                f"PM sampling every {_interval_text(rc.intervals_ps)} measured no DRAM traffic "
                f"or FLOPs (no measured record); {sm}. "
                + COARSE_NOTE.format(interval=_interval_text(rc.intervals_ps)),
            )
        )
    notes += _clock_notes(rc, device, step_labels)
    return notes


def _peak_text(t: WindowCounters, device) -> str:
    """The HBM peak a "% of peak" is taken of, and where that figure comes from."""
    hbm = device.memory("hbm")
    if t.bytes_source != "% of peak × HBM peak" or hbm is None:
        return ""
    return f" ({hbm.gbs:,.1f} GB/s, source: {hbm.source})"


def _sm_text(rc: RunCounters, step_labels: list) -> str:
    """SM and tensor-pipe activity over the Total and each step, and how they were measured."""
    t = rc.total
    parts = []
    if not math.isnan(t.sm_active):
        how = t.sm_source
        if how.startswith("active cycles"):
            how = f"sm__cycles_active.avg ÷ ({t.rated_clock_mhz:.0f} MHz rated clock × time): "
            how += "a lower bound when the clock ran lower"
        parts.append(
            f"SMs active {t.sm_active:.1%} of the sampled time ({how})"
            + _per_step(rc, step_labels, "sm_active")
        )
    if not math.isnan(t.tensor_active):
        parts.append(
            f"tensor pipes busy {t.tensor_active:.1%} of the sampled time (busy cycles, not "
            "FLOPs: the counter does not say which precision ran)"
            + _per_step(rc, step_labels, "tensor_active")
        )
    return "; ".join(parts)


def _per_step(rc: RunCounters, step_labels: list, what: str) -> str:
    shares = [
        f"{label} {getattr(s, what):.1%}"
        for label, s in zip(step_labels, rc.steps)
        if s is not None and not math.isnan(getattr(s, what))
    ]
    return f"; per step: {', '.join(shares)}" if shares else ""


def _clock_notes(rc: RunCounters, device, step_labels: list) -> list:
    if math.isnan(rc.total.clock_mhz):
        return []
    if not rc.total.rated_clock_mhz:
        return [
            Diagnostic(
                "info",
                "clock_scaling_unknown",
                f"the trace samples the SM clock (mean {rc.total.clock_mhz:.0f} MHz) but the "
                f"data sheet of {device.type} gives no rated clock: roofs are not scaled to "
                "the clock the steps ran at",
            )
        ]
    scaled = [
        (label, s)
        for label, s in zip(step_labels, rc.steps)
        if s is not None and math.isfinite(s.clock_scale) and s.clock_scale < 1.0
    ]
    if not scaled:
        return []
    parts = ", ".join(
        f"step {label}: {s.clock_mhz:.0f} MHz → {s.clock_scale:.1%} "
        f"({device.peak_gflops / 1e3:.4g} → {device.peak_gflops * s.clock_scale / 1e3:.4g} "
        "TFLOP/s default roof)"
        for label, s in scaled
    )
    return [
        Diagnostic(
            "info",
            "clock_scaled_roofs",
            f"steps that ran below the rated {rc.total.rated_clock_mhz:.0f} MHz SM clock are "
            f"judged under compute roofs scaled by mean clock / rated (data-sheet roof → "
            f"scaled): {parts}; memory roofs are not scaled (HBM has its own clock)",
        )
    ]
