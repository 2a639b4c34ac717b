"""Throughput per step: steps/s, tokens/s and samples/s, MFU and HFU.

- step time: the Average step record's time per core (its wall time, averaged over hosts);
- HFU (hardware FLOP utilisation): the FLOPs the profile counts per step (Average record) ÷
  (step time × peak × cores of this view);
- MFU (model FLOP utilisation, PaLM's definition): the user's model FLOPs per step ÷ (step
  time × peak × devices the step runs on). The user gives model FLOPs, tokens / samples per
  step (and optionally the precision and device count) in a workload file or on the CLI
  (serve/service/workload_file.py); without them only HFU is known.

The peak is per device (core) of the precision the FLOPs run in: the workload's `precision`,
else the precision with the most FLOPs among the op records, else (no op has counted FLOPs) the
device's first compute ceiling, the one `DeviceSpec.peak_for` falls back to (devices/spec.py), named
so that every consumer shows which roof it is.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.precision import normalize_precision

HOW_TO_MFU = (
    "MFU needs the model's FLOPs per step: write roofline_workload.json next to the "
    "profile (or in a parent folder up to the logdir) with "
    '{"model_flops_per_step": ..., "tokens_per_step": ...}, or pass '
    "--model-flops-per-step / --tokens-per-step to `tb-roofline report` "
    "(docs/guidance.md)"
)


@dataclasses.dataclass
class Workload:
    """What the profile cannot know about the model: per training/inference step, for all the
    devices the step runs on."""

    model_flops_per_step: float | None = None
    tokens_per_step: float | None = None
    samples_per_step: float | None = None
    precision: str | None = None  # the precision the model FLOPs run in (bf16, fp32, ...)
    num_devices: int | None = None  # devices one step runs on (default: all in the run)
    source: str = ""  # where it came from (file name or "command line")


def dominant_precision(ops) -> str:
    """The precision with the most FLOPs among op records ('' when none has FLOPs)."""
    c = ops.columns
    flops = np.nan_to_num(c["flops"].astype(float))
    best, most = "", 0.0
    for p in set(c["precision"].tolist()):
        f = float(flops[c["precision"] == p].sum())
        if f > most:
            best, most = p, f
    return best


def throughput_precision(device, workload_precision: str | None, ops) -> str:
    """The precision whose peak HFU and MFU divide by (see the module docstring)."""
    chosen = workload_precision or dominant_precision(ops)
    if not chosen and device.compute:
        chosen = device.compute[0].precision
    return chosen


def throughput(
    analysis, include_io: bool, workload: Workload | None, devices_in_run: int | None
) -> dict:
    program = analysis.program[include_io].row_dicts()
    avg = next((r for r in program if r["record_type"] == "average"), None)
    device = analysis.device
    cores = max(device.num_cores, 1)
    w = workload or Workload()
    precision = throughput_precision(device, w.precision, analysis.ops[include_io])
    peak = device.peak_for(precision) if device.peaks_known else None  # GFLOP/s per device
    num_devices = w.num_devices or devices_in_run or cores
    out = {
        "num_steps": analysis.num_steps,
        "step_time_us": None,
        "steps_per_second": None,
        "precision": normalize_precision(precision) or precision or None,
        "peak_gflops_per_device": peak,
        "view_devices": cores,
        "hfu": None,
        "hardware_flops_per_step": None,
        "model_flops_per_step": w.model_flops_per_step,
        "mfu": None,
        "num_devices": num_devices if w.model_flops_per_step else None,
        "tokens_per_step": w.tokens_per_step,
        "tokens_per_second": None,
        "samples_per_step": w.samples_per_step,
        "samples_per_second": None,
        "workload_source": w.source or None,
        "note": "",
    }
    if avg is None or not avg["total_time_per_core_us"]:
        out["note"] = (
            "no complete steps in this profile: annotate steps to get the step time, "
            "steps/s and MFU"
        )
        return out
    step_s = float(avg["total_time_per_core_us"]) / 1e6
    out["step_time_us"] = step_s * 1e6
    out["steps_per_second"] = 1.0 / step_s
    out["hardware_flops_per_step"] = avg["flops"]
    if peak and avg["flops"] is not None:
        out["hfu"] = float(avg["flops"]) / (step_s * peak * 1e9 * cores)
    if w.model_flops_per_step and peak:
        out["mfu"] = float(w.model_flops_per_step) / (step_s * peak * 1e9 * num_devices)
    if w.tokens_per_step:
        out["tokens_per_second"] = w.tokens_per_step / step_s
    if w.samples_per_step:
        out["samples_per_second"] = w.samples_per_step / step_s
    if not peak:
        out["note"] = "peaks unknown: no HFU or MFU (calibrate or give a device file)"
    elif not w.model_flops_per_step:
        out["note"] = HOW_TO_MFU
    return out
