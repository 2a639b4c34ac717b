"""Data-sheet entries of the newest accelerators (Blackwell Ultra, H20, TPU7x), as the keyword
arguments of `datasheets.DeviceSpec` (that module builds them; this one imports only the
sources, so there is no import cycle). Same units and conventions as datasheets.py: TFLOP/s
dense (NVIDIA's 2:4-sparse headline figures halved, `basis="sparse_halved"`), GB/s, GiB.

Blackwell Ultra (B300, GB300; compute capability 10.3) trades FP64 and INT8 for FP4: its dense
FP4 rate is 1.5× B200's (NVIDIA gives it as "sparse | dense", so the dense figure is stored as
given), its INT8 and FP64 rates are a small fraction of B200's.
"""

from __future__ import annotations

from tb_roofline.devices.sources import B300_DS, GB300_DS, H20_DS, HGX_PAGE, TPU_DOC, Figure

_TPU7X = TPU_DOC.format(v="TPU7x, Ironwood")


def _f(value, source, basis="dense", uncertain=False, note=""):
    return Figure(float(value), source, basis, uncertain, note)


def _half(chip_value, source):
    return Figure(chip_value / 2.0, source, "derived", False, "half of the chip's figure")


def _sparse(value_sparse, source, uncertain=False):
    return Figure(value_sparse / 2.0, source, "sparse_halved", uncertain)


RECENT = (
    dict(
        key="b300",
        name="NVIDIA B300 (Blackwell Ultra)",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(1.25, B300_DS, note="board total 10 TFLOPS / 8"),
            "fp64_tc": _f(1.25, B300_DS, note="board total 10 TFLOPS / 8"),
            "fp32": _f(75, B300_DS, note="board total 600 TFLOPS / 8"),
            "tf32": _sparse(2250, B300_DS),
            "bf16": _sparse(4500, B300_DS),
            "fp16": _sparse(4500, B300_DS),
            "fp8": _sparse(9000, B300_DS),
            "fp6": _sparse(9000, B300_DS),
            "int8": _sparse(250, B300_DS),
            "fp4": _f(
                13500,
                B300_DS,
                uncertain=True,
                note="dense figure as given (board 108 PFLOPS / 8); other NVIDIA "
                "documents give 13 to 15 PFLOPS per GPU",
            ),
        },
        memory_bw=_f(8000, B300_DS),
        memory_type="HBM3e",
        memory_gib=268,
        compute_capability=(10, 3),
        patterns=(r"\bb300\b",),
        excludes=(r"gb300",),
        uncertain=True,
        notes="Blackwell Ultra; 288 GB HBM3e (268 GiB); SM count and clock are not on the "
        "data sheet",
    ),
    dict(
        key="gb300",
        name="NVIDIA GB300 (one GPU)",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(1.39, GB300_DS, note="rack total 100 TFLOPS / 72"),
            "fp64_tc": _f(1.39, GB300_DS, note="rack total 100 TFLOPS / 72"),
            "tf32": _sparse(2500, GB300_DS),
            "bf16": _sparse(5000, GB300_DS),
            "fp16": _sparse(5000, GB300_DS),
            "fp8": _sparse(10000, GB300_DS),
            "fp6": _sparse(10000, GB300_DS),
            "int8": _sparse(319.4, GB300_DS),
            "fp4": _f(15000, GB300_DS, note="dense figure as given: rack 1,080 PFLOPS / 72"),
        },
        memory_bw=_f(8000, GB300_DS, note="rack 576 TB/s / 72"),
        memory_type="HBM3e",
        memory_gib=268,
        compute_capability=(10, 3),
        patterns=(r"\bgb300\b",),
        uncertain=True,
        notes="the Grace-Blackwell Ultra superchip's GPUs; 288 GB HBM3e; FP32 vector peak "
        "not published on the rack's page",
    ),
    dict(
        key="h20",
        name="NVIDIA H20",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(1, H20_DS),
            "fp32": _f(44, H20_DS),
            "tf32": _f(74, H20_DS),
            "bf16": _f(148, H20_DS),
            "fp16": _f(148, H20_DS),
            "fp8": _f(296, H20_DS),
            "int8": _f(296, H20_DS),
        },
        memory_bw=_f(4000, H20_DS),
        memory_type="HBM3",
        memory_gib=96,
        compute_capability=(9, 0),
        sm_count=78,
        patterns=(r"\bh20\b",),
        uncertain=True,
        notes="export-limited Hopper (78 SMs); figures from the product brief OEMs publish",
    ),
    dict(
        key="tpu-v7x",
        name="TPU7x (Ironwood, one chiplet)",
        vendor="google",
        kind="tpu",
        per="device",
        compute={"bf16": _half(2307, _TPU7X), "fp8": _half(4614, _TPU7X)},
        memory_bw=_half(7380, _TPU7X),
        memory_gib=96,
        patterns=(r"tpu ?7x", r"tpu ?v7", r"ironwood"),
        notes="a TPU7x chip is two chiplets, each its own device to JAX (no megacore): each "
        "entry is half the chip's figure, as an MI250 GCD is half its package",
    ),
)

# B200's FP32 vector peak, since given on NVIDIA's HGX page (600 TFLOPS per 8-GPU board).
B200_FP32 = _f(75, HGX_PAGE, note="board total 600 TFLOPS / 8")
