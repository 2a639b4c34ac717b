"""Workload files: what a profile cannot know about the model, for throughput and MFU.

`roofline_workload.json` (UTF-8 JSON), next to the profile or in a parent folder up to the
logdir (the nearest wins), like `roofline_device.json`; or the CLI's --workload-file and
--model-flops-per-step / --tokens-per-step / ... flags (which override the file's values):

    {
      "tb_roofline_workload_file": 1,     # optional format marker; if present, must be 1
      "model_flops_per_step": 3.1e15,     # FLOPs the model needs for one step, all devices
                                          # (e.g. 6 × parameters × tokens for a transformer
                                          # training step), no rematerialisation
      "tokens_per_step": 65536,           # optional: tokens processed per step
      "samples_per_step": 32,             # optional: samples (sequences, images) per step
      "precision": "bf16",                # optional: the precision the model FLOPs run in
      "num_devices": 8,                   # optional: devices one step runs on (default: all
                                          # cores of all hosts of the run)
      "notes": "free text"
    }
Every number must be positive and finite (JSON has no NaN or Infinity; an integer of more than
30 digits is refused by name), at most MAX_PER_STEP per step and MAX_DEVICES devices; at least
one of the three per-step numbers must be given.
"""

from __future__ import annotations

import os

from tb_roofline.devices.bounded_json import parse_json_file, read_small_text
from tb_roofline.devices.device_file import nearest_file  # the service's files are found alike
from tb_roofline.devices.precision import CEILING_PRECISIONS
from tb_roofline.model.records.throughput import Workload

FILE_NAME = "roofline_workload.json"
FORMAT_KEY = "tb_roofline_workload_file"
KEYS = (
    FORMAT_KEY,
    "model_flops_per_step",
    "tokens_per_step",
    "samples_per_step",
    "precision",
    "num_devices",
    "notes",
)
MAX_FILE_BYTES = 1 << 20
MAX_PER_STEP = 1e30  # FLOPs, tokens or samples of one step: far above any model
MAX_DEVICES = 1 << 24


class WorkloadFileError(ValueError):
    """A workload file that cannot be used; the message names the file and the field."""


def workload_from_dict(data, origin: str) -> Workload:
    if not isinstance(data, dict):
        raise WorkloadFileError(f"{origin}: the top level must be a JSON object")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise WorkloadFileError(
            f"{origin}: {len(unknown)} unknown key(s); allowed: {', '.join(KEYS)}"
        )
    if FORMAT_KEY in data and data[FORMAT_KEY] != 1:
        raise WorkloadFileError(f"{origin}: {FORMAT_KEY} must be 1")
    values = {}
    for key in ("model_flops_per_step", "tokens_per_step", "samples_per_step"):
        if data.get(key) is not None:
            values[key] = _positive(data[key], f"{origin}: {key}")
    if not values:
        raise WorkloadFileError(
            f"{origin}: give at least one of model_flops_per_step, "
            "tokens_per_step, samples_per_step"
        )
    precision = data.get("precision")
    if precision is not None and precision not in CEILING_PRECISIONS:
        raise WorkloadFileError(
            f"{origin}: precision must be one of {', '.join(CEILING_PRECISIONS)}"
        )
    devices = data.get("num_devices")
    if devices is not None and (
        isinstance(devices, bool) or not isinstance(devices, int) or not 1 <= devices <= MAX_DEVICES
    ):
        raise WorkloadFileError(f"{origin}: num_devices must be an integer from 1 to {MAX_DEVICES}")
    if "notes" in data and not isinstance(data["notes"], str):
        raise WorkloadFileError(f"{origin}: notes must be a string")
    return Workload(precision=precision, num_devices=devices, source=origin, **values)


def _positive(value, where: str) -> float:
    # Compared as numbers, never converted first: a huge integer does not fit a float.
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 < value <= MAX_PER_STEP
    ):
        raise WorkloadFileError(
            f"{where}: must be a positive finite number, at most {MAX_PER_STEP:.0e}"
        )
    return float(value)


def load_workload_file(path: str) -> Workload:
    name = os.path.basename(path)
    text = read_small_text(path, MAX_FILE_BYTES, WorkloadFileError, "a workload file")
    data = parse_json_file(text, name, WorkloadFileError, frozenset(KEYS))
    return workload_from_dict(data, name)


def find_workload_file(profile_path: str, logdir: str | None) -> str | None:
    """The nearest `roofline_workload.json` from the profile's folder up to the logdir."""
    return nearest_file(profile_path, logdir, FILE_NAME)


def merge(base: Workload | None, override: dict) -> Workload | None:
    """The file's workload with the command line's values on top (None values ignored)."""
    given = {k: v for k, v in override.items() if v is not None}
    if not given:
        return base
    out = (
        Workload(
            **{
                k: getattr(base, k)
                for k in (
                    "model_flops_per_step",
                    "tokens_per_step",
                    "samples_per_step",
                    "precision",
                    "num_devices",
                )
            }
        )
        if base
        else Workload()
    )
    for k, v in given.items():
        setattr(out, k, v)
    out.source = "command line" + (f" over {base.source}" if base and base.source else "")
    return out
