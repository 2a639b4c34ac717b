"""A device file's peaks applied to a read profile: the profile's rows placed under the file's
ceilings (a pure function over the model's inputs; the service finds and loads the file).

Profiles without peaks (CPUs, unknown GPUs) take them from a device file (`roofline_device.json`,
see devices/device_file.py); without one they carry a `peaks_unknown` warning saying how to get
one. The read profile is never changed: its tables are copied before the ceilings are applied,
so a cached read stays as read.
"""

from __future__ import annotations

import dataclasses

from tb_roofline.devices.device_file import PEAKS_UNKNOWN_MESSAGE
from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.table.op_table import ProfileData


def needs_device_file(data: ProfileData, forced: bool = False) -> bool:
    """Whether a device file applies: always when the user forces one (the CLI's
    --device-file), else only when the profile does not know its peaks."""
    return forced or data.device is None or not data.device.peaks_known


def without_peaks(data: ProfileData) -> ProfileData:
    """The profile with the warning that its peaks are unknown (no device file found)."""
    note = Diagnostic("warning", "peaks_unknown", PEAKS_UNKNOWN_MESSAGE)
    return dataclasses.replace(data, diagnostics=data.diagnostics + [note])


def with_device(data: ProfileData, device: DeviceInfo, file_name: str) -> ProfileData:
    """The profile under `device`'s peaks (from the device file `file_name`): every row of the
    op and kernel tables placed under its ceilings, on copies. `device` is not changed: the
    profile's core count is set on a copy."""
    num_cores = data.device.num_cores if data.device else device.num_cores
    device = dataclasses.replace(device, num_cores=num_cores)
    sources = ", ".join(sorted({c.source for c in device.compute}))
    note = Diagnostic(
        "info",
        "device_file",
        f"peaks from the device file {file_name} ({device.type}, source: {sources})",
    )
    placed = {}
    for name in ("ops", "kernels"):
        table = getattr(data, name)
        if table is not None:
            table = table.copy()
            from tb_roofline.devices.precision_ceilings import (
                apply_ceilings,  # only with a device file
            )

            apply_ceilings(table, device, data.allow_tf32)
        placed[name] = table
    return dataclasses.replace(data, device=device, diagnostics=data.diagnostics + [note], **placed)
