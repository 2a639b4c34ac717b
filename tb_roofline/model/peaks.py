"""Peaks in doubt: when a profile's own ops run faster than a peak derived from that profile, the
peak is wrong, not the ops (REFERENCE.md §5: profiles report base clocks or half bandwidths).

Such a peak is replaced by its sourced data-sheet figure (kept beside it by the device layer);
the device panel says so and a diagnostic keeps the profile's figure.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.model.records import ABOVE_ROOF, compute_roof, div

MIN_TIME_PS = 1e6  # ops shorter than 1 µs in total are too coarse to judge a peak by


def settle(device: DeviceInfo, table, kernels, key_sums) -> tuple[DeviceInfo, list[Diagnostic]]:
    """(the device to judge this profile by, notes). `key_sums(table, device)` gives sums per
    key (the model's)."""
    doubtful = [p for p in device.compute + device.memories
                if p.source == "profile" and p.fallback is not None
                and p.fallback.value > (p.gflops if isinstance(p, ComputePeak) else p.gbs)]
    if not doubtful or not len(table):
        return device, []
    vals = key_sums(table, device)
    keys = table.keys
    time = vals["total_time_ps"]
    trusted = (keys["caveat"] == "") & keys["flops_known"] & keys["bytes_known"] & \
        ~keys["is_container"] & (time >= MIN_TIME_PS)
    if not trusted.any():
        return device, []
    time_ns = time / 1000.0
    compute, memories = list(device.compute), list(device.memories)
    notes = []
    for i, peak in enumerate(compute):
        if peak not in doubtful:
            continue
        # The rows judged against this ceiling (any precision whose roof it is).
        mine = compute_roof(device, keys["precision"]) == peak.gflops
        rate = div(vals["flops"], time_ns)
        worst = _worst(rate, trusted & mine)
        if worst is not None and rate[worst] > peak.gflops * ABOVE_ROOF:
            compute[i], note = _replace(peak, peak.gflops, rate[worst], keys["operation"][worst],
                                        "GFLOP/s", f"{peak.precision} compute peak")
            notes.append(note)
    for i, peak in enumerate(memories):
        col = f"{peak.id}_bytes"
        if peak not in doubtful or col not in vals:
            continue
        rate = div(vals[col], time_ns)  # GB/s
        worst = _worst(rate, trusted)
        if worst is not None and rate[worst] > peak.gbs * ABOVE_ROOF:
            memories[i], note = _replace(peak, peak.gbs, rate[worst], keys["operation"][worst],
                                         "GB/s", f"{peak.name} bandwidth")
            notes.append(note)
    if not notes:
        return device, []
    return dataclasses.replace(device, compute=compute, memories=memories), notes


def _worst(rate, mask):
    if not mask.any():
        return None
    idx = np.flatnonzero(mask)
    return int(idx[np.argmax(rate[idx])])


def _replace(peak, value, rate, op_name, unit, what):
    fb = peak.fallback
    note = (f"the profile's {value:,.0f} {unit} is beaten by its own op {op_name} "
            f"({rate:,.0f} {unit}): the data sheet's {fb.value:,.0f} {unit} is used ({fb.source})")
    if isinstance(peak, ComputePeak):
        new = dataclasses.replace(peak, gflops=fb.value, source="datasheet", note=note)
    else:
        assert isinstance(peak, MemoryPeak)
        new = dataclasses.replace(peak, gbs=fb.value, source="datasheet", note=note)
    return new, Diagnostic("warning", "peak_replaced", f"{what}: {note}")
