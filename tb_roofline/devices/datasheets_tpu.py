"""Data-sheet entries of Google TPUs, per chip as JAX sees it (conventions in
`datasheet_entry.py`)."""

from __future__ import annotations

from tb_roofline.devices.datasheet_entry import DeviceSpec, figure
from tb_roofline.devices.sources import TPU_DOC, Figure

_TPU7X = TPU_DOC.format(v="TPU7x, Ironwood")


def _half_chip(chip_value, source):
    """TPU7x: a chip is two chiplets, each its own device."""
    return Figure(chip_value / 2.0, source, "derived", False, "half of the chip's figure")


TPU: tuple[DeviceSpec, ...] = (
    # ---------------------------------------------------------------- Google TPU (per chip)
    DeviceSpec(
        key="tpu-v4",
        name="TPU v4",
        vendor="google",
        kind="tpu",
        per="chip",
        compute={
            "bf16": figure(275, TPU_DOC.format(v="v4")),
            "int8": figure(275, TPU_DOC.format(v="v4")),
        },
        memory_bw=figure(1200, TPU_DOC.format(v="v4")),
        memory_gib=32,
        patterns=(r"tpu ?v4\b",),
        notes="two TensorCores per chip act as one megacore device",
    ),
    DeviceSpec(
        key="tpu-v5e",
        name="TPU v5e",
        vendor="google",
        kind="tpu",
        per="chip",
        compute={
            "bf16": figure(197, TPU_DOC.format(v="v5e")),
            "int8": figure(394, TPU_DOC.format(v="v5e")),
        },
        memory_bw=figure(819, TPU_DOC.format(v="v5e")),
        memory_gib=16,
        patterns=(r"tpu ?v5 ?lite", r"tpu ?v5e", r"v5litepod"),
    ),
    DeviceSpec(
        key="tpu-v5p",
        name="TPU v5p",
        vendor="google",
        kind="tpu",
        per="chip",
        compute={
            "bf16": figure(459, TPU_DOC.format(v="v5p")),
            "fp8": figure(
                459,
                TPU_DOC.format(v="v5p"),
                note="the documentation's FP8 figure: no faster than bf16",
            ),
            "int8": figure(918, TPU_DOC.format(v="v5p")),
        },
        memory_bw=figure(2765, TPU_DOC.format(v="v5p")),
        memory_gib=95,
        patterns=(r"tpu ?v5p", r"tpu ?v5$"),
        notes="two TensorCores per chip act as one megacore device",
    ),
    DeviceSpec(
        key="tpu-v6e",
        name="TPU v6e (Trillium)",
        vendor="google",
        kind="tpu",
        per="chip",
        compute={
            "bf16": figure(918, TPU_DOC.format(v="v6e")),
            "fp8": figure(
                918,
                TPU_DOC.format(v="v6e"),
                note="the documentation's FP8 figure: no faster than bf16",
            ),
            "int8": figure(1836, TPU_DOC.format(v="v6e")),
        },
        memory_bw=figure(1640, TPU_DOC.format(v="v6e")),
        memory_gib=32,
        patterns=(r"tpu ?v6 ?lite", r"tpu ?v6e", r"trillium"),
    ),
    DeviceSpec(
        key="tpu-v7x",
        name="TPU7x (Ironwood, one chiplet)",
        vendor="google",
        kind="tpu",
        per="device",
        compute={"bf16": _half_chip(2307, _TPU7X), "fp8": _half_chip(4614, _TPU7X)},
        memory_bw=_half_chip(7380, _TPU7X),
        memory_gib=96,
        patterns=(r"tpu ?7x", r"tpu ?v7", r"ironwood"),
        notes="a TPU7x chip is two chiplets, each its own device to JAX (no megacore): each "
        "entry is half the chip's figure, as an MI250 GCD is half its package",
    ),
)
