"""Peaks in doubt: when a profile's own ops run faster than a peak derived from that profile, the
peak is wrong, not the ops (profiles may report base clocks or half bandwidths: see
docs/guidance.md, "Peaks the profile's own ops beat").

Such a peak is replaced by its sourced data-sheet figure when the device layer kept one beside
it and the ops stay under that, else by the fastest op's own rate (a measured lower bound on the
true peak), whether or not the compute peaks are known; the device panel says so and a
diagnostic keeps the profile's figure.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.precision_ceilings import roof_precisions
from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.model.records.records import ABOVE_ROOF, compute_roof, div

MIN_TIME_PS = 1e6  # ops shorter than 1 µs in total are too coarse to judge a peak by
# A memory peak the profile and the data sheet agree on within this is confirmed: an op above
# it moved fewer bytes through that memory than its cost says (on a GPU: operands still in L2
# from the kernel before), so the op is caveated `above_roof`, the peak kept.
CONFIRMED = 0.05


def settle(device: DeviceInfo, table, kernels, key_sums) -> tuple[DeviceInfo, list[Diagnostic]]:
    """(the device to judge this profile by, notes). `key_sums(table, device)` gives sums per
    key (the model's)."""
    doubtful = [p for p in device.compute + device.memories if p.source == "profile"]
    if not doubtful or not len(table):
        return device, []
    vals = key_sums(table, device)
    keys = table.keys
    time = vals["total_time_ps"]
    trusted = (
        (keys["caveat"] == "")
        & keys["flops_known"]
        & keys["bytes_known"]
        & ~keys["is_container"]
        & (time >= MIN_TIME_PS)
    )
    if not trusted.any():
        return device, []
    time_ns = time / 1000.0
    compute, memories = list(device.compute), list(device.memories)
    notes = []
    for i, peak in enumerate(compute):
        if peak not in doubtful or not peak.gflops > 0:
            continue
        # The rows judged against this ceiling (any precision whose roof it is).
        mine = compute_roof(device, roof_precisions(keys, device)) == peak.gflops
        rate = div(vals["flops"], time_ns)
        worst = _worst(rate, trusted & mine)
        if worst is not None and rate[worst] > peak.gflops * ABOVE_ROOF:
            compute[i], note = _replace(
                peak,
                peak.gflops,
                rate[worst],
                keys["operation"][worst],
                "GFLOP/s",
                f"{peak.precision} compute peak",
            )
            notes.append(note)
    for i, mem in enumerate(memories):
        col = f"{mem.id}_bytes"
        if mem not in doubtful or col not in vals or not mem.gbs > 0 or _confirmed(mem):
            continue
        rate = div(vals[col], time_ns)  # GB/s
        worst = _worst(rate, trusted)
        if worst is not None and rate[worst] > mem.gbs * ABOVE_ROOF:
            memories[i], note = _replace(
                mem,
                mem.gbs,
                rate[worst],
                keys["operation"][worst],
                "GB/s",
                f"{mem.name} bandwidth",
            )
            notes.append(note)
    if not notes:
        return device, []
    return dataclasses.replace(device, compute=compute, memories=memories), notes


def _confirmed(mem: MemoryPeak) -> bool:
    """Whether the data sheet's figure kept beside the profile's agrees with it."""
    fb = mem.fallback
    return fb is not None and fb.value > 0 and abs(mem.gbs - fb.value) <= CONFIRMED * fb.value


def _worst(rate, mask):
    if not mask.any():
        return None
    idx = np.flatnonzero(mask)
    return int(idx[np.argmax(rate[idx])])


def _replace(peak, value, rate, op_name, unit, what):
    fb = peak.fallback
    beaten = (
        f"the profile's {value:,.0f} {unit} is beaten by its own op {op_name} ({rate:,.0f} {unit})"
    )
    if fb is not None and fb.value >= rate:
        new_value, source = fb.value, "datasheet"
        note = f"{beaten}: the data sheet's {fb.value:,.0f} {unit} is used ({fb.source})"
    else:
        new_value, source = float(rate), "measured"
        why = (
            f"the data sheet's {fb.value:,.0f} {unit} is beaten too"
            if fb is not None
            else "no data-sheet figure is known"
        )
        note = (
            f"{beaten}, and {why}: that op's rate is used, a lower bound on the true peak "
            "(give the real one in a device file)"
        )
    new: ComputePeak | MemoryPeak
    if isinstance(peak, ComputePeak):
        new = dataclasses.replace(peak, gflops=new_value, source=source, note=note)
    else:
        assert isinstance(peak, MemoryPeak)
        new = dataclasses.replace(peak, gbs=new_value, source=source, note=note)
    return new, Diagnostic("warning", "peak_replaced", f"{what}: {note}")


ASYNC_CAVEATS = ("async_start", "async_wait")  # halves of an async op: no rate of their own


def run_compute_roofs(columns: dict, device: DeviceInfo) -> list[dict]:
    """The compute roofs the run's op records sit under, highest first: each distinct peak
    (GFLOP/s) with the precisions of the records under it and their self time. The first is
    the run's top roof, the one the device headline quotes and the op chart draws on top
    (a chip's faster precisions the run never used, fp8 or int8 on a bf16 run, are not it).
    A roof whose records name no precision (kernels of unknown type, judged under the
    device's default roof) is named by the device's precisions with that peak, `named_by`
    "device" (else "records")."""
    peak = np.asarray(columns["peak_flop_rate"], dtype=float)
    caveat = np.asarray(columns["caveat"], dtype=object)
    # named by the ceiling each record is judged under (a bf16 elementwise op: fp32)
    roof_names = columns.get("roof_precision")
    precision = np.asarray(
        roof_names if roof_names is not None else columns["precision"], dtype=object
    )
    time = np.asarray(columns["total_self_time_us"], dtype=float)
    used = np.isfinite(peak) & (peak > 0) & ~np.isin(caveat, ASYNC_CAVEATS)
    roofs: dict = {}
    for value, prec, t in zip(peak[used].tolist(), precision[used].tolist(), time[used].tolist()):
        roof = roofs.setdefault(value, {"peak_gflops": value, "precisions": [], "time_us": 0.0})
        if prec and prec != "mixed" and prec not in roof["precisions"]:
            roof["precisions"].append(prec)
        roof["time_us"] += t if np.isfinite(t) else 0.0
    for roof in roofs.values():
        roof["named_by"] = "records" if roof["precisions"] else "device"
        if not roof["precisions"]:
            roof["precisions"] = [
                c.precision
                for c in device.compute
                if abs(c.gflops / roof["peak_gflops"] - 1) < 1e-6
            ]
    return sorted(roofs.values(), key=lambda r: -r["peak_gflops"])
