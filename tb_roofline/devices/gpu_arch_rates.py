"""Dense FLOP per clock per SM (NVIDIA) or CU (AMD) of each GPU architecture, by compute
capability or gfx name: what `gpu_peaks.py` multiplies by a profile's SMs and clock."""

from __future__ import annotations

import dataclasses

from tb_roofline.devices.datasheet_entry import DeviceSpec
from tb_roofline.devices.onchip import AMD_ARCH_OF_SPEC
from tb_roofline.devices.sources import CDNA4_WP

SHARED_BYTES_PER_CLOCK = 128  # NVIDIA: 32 banks x 4 B per clock per SM (see onchip.py)


@dataclasses.dataclass(frozen=True)
class ArchRates:
    """Dense FLOP per clock per SM (NVIDIA) or CU (AMD) for each precision."""

    name: str
    rates: dict  # precision -> FLOP/clock/SM
    source: str
    shared_bytes_per_clock: int | None = SHARED_BYTES_PER_CLOCK
    uncertain: tuple = ()  # precisions whose rate is provisional
    shared_uncertain: bool = False  # the L1/shared (LDS) bytes per clock are provisional
    note: str = ""


_NV = "NVIDIA {} architecture whitepaper; rate = dense data-sheet peak / (SMs x boost clock)"
_AMD = "AMD {} architecture whitepaper and data sheets; rate = peak / (CUs x peak clock)"

# NVIDIA by compute capability. fp32/fp64 count an FMA as 2 FLOP per lane (CUDA cores);
# the others are tensor-core rates (FP16 with FP32 accumulate for the data-center parts).
NVIDIA_ARCHS: dict[tuple[int, ...], ArchRates] = {
    (7, 0): ArchRates("Volta", {"fp64": 64, "fp32": 128, "fp16": 1024}, _NV.format("Volta")),
    (7, 5): ArchRates(
        "Turing", {"fp64": 4, "fp32": 128, "fp16": 1024, "int8": 2048}, _NV.format("Turing")
    ),
    (8, 0): ArchRates(
        "Ampere GA100",
        {
            "fp64": 64,
            "fp64_tc": 128,
            "fp32": 128,
            "tf32": 1024,
            "bf16": 2048,
            "fp16": 2048,
            "int8": 4096,
        },
        _NV.format("Ampere GA100"),
    ),
    (8, 6): ArchRates(
        "Ampere GA10x",
        {"fp64": 4, "fp32": 256, "tf32": 512, "bf16": 1024, "fp16": 1024, "int8": 2048},
        _NV.format("Ampere GA102"),
        note="data-center parts (A10, A40); GeForce cards run FP16 with FP32 "
        "accumulate at half this rate",
    ),
    (8, 9): ArchRates(
        "Ada",
        {
            "fp64": 4,
            "fp32": 256,
            "tf32": 512,
            "bf16": 1024,
            "fp16": 1024,
            "fp8": 2048,
            "int8": 2048,
        },
        _NV.format("Ada Lovelace"),
        note="data-center parts (L4, L40S); GeForce cards differ",
    ),
    (9, 0): ArchRates(
        "Hopper",
        {
            "fp64": 128,
            "fp64_tc": 256,
            "fp32": 256,
            "tf32": 2048,
            "bf16": 4096,
            "fp16": 4096,
            "fp8": 8192,
            "int8": 8192,
        },
        _NV.format("Hopper"),
    ),
    (10, 0): ArchRates(
        "Blackwell",
        {
            "fp64": 128,
            "fp32": 256,
            "tf32": 4096,
            "bf16": 8192,
            "fp16": 8192,
            "fp8": 16384,
            "int8": 16384,
            "fp6": 16384,
            "fp4": 32768,
        },
        _NV.format("Blackwell"),
        uncertain=("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp6", "fp4"),
        note="Blackwell per-SM rates are provisional",
    ),
}

# AMD by gfx name. fp32/fp64: vector ALUs; *_tc: matrix cores.
AMD_ARCHS = {
    "gfx908": ArchRates(
        "CDNA (MI100)",
        {"fp64": 64, "fp32": 128, "fp32_tc": 256, "fp16": 1024, "bf16": 512, "int8": 1024},
        _AMD.format("CDNA"),
        shared_uncertain=True,
    ),
    "gfx90a": ArchRates(
        "CDNA2 (MI200)",
        {
            "fp64": 128,
            "fp64_tc": 256,
            "fp32": 128,
            "fp32_tc": 256,
            "fp16": 1024,
            "bf16": 1024,
            "int8": 1024,
        },
        _AMD.format("CDNA2"),
        shared_uncertain=True,
    ),
    "gfx942": ArchRates(
        "CDNA3 (MI300)",
        {
            "fp64": 128,
            "fp64_tc": 256,
            "fp32": 256,
            "fp32_tc": 256,
            "tf32": 1024,
            "fp16": 2048,
            "bf16": 2048,
            "fp8": 4096,
            "int8": 4096,
        },
        _AMD.format("CDNA3"),
        shared_uncertain=True,
    ),
}
# CDNA 4 (MI350X / MI355X): vector fp64/fp32 as CDNA 3, matrix cores twice as wide for 16- and
# 8-bit types, FP64 matrix at the vector rate, FP6/FP4 at twice FP8, no TF32 (XProf derives
# 256 CUs x 2.4 GHz x 4096 = 2,516,582 GFLOP/s bf16 for the MI355X from the same table).
AMD_ARCHS["gfx950"] = ArchRates(
    "CDNA4 (MI350)",
    {
        "fp64": 128,
        "fp64_tc": 128,
        "fp32": 256,
        "fp16": 4096,
        "bf16": 4096,
        "fp8": 8192,
        "int8": 8192,
        "fp6": 16384,
        "fp4": 16384,
    },
    CDNA4_WP,
    shared_bytes_per_clock=256,
    shared_uncertain=True,
)
AMD_ARCHS["gfx940"] = AMD_ARCHS["gfx941"] = AMD_ARCHS["gfx942"]


def gfx_of(name) -> str:
    name = str(name or "").strip().lower()
    return name.split(":")[0] if name.startswith("gfx") else ""


def arch_for(
    compute_capability=None,
    gfx_name: str | None = None,
    *,
    amd: bool = False,
    spec: DeviceSpec | None = None,
) -> ArchRates | None:
    """The per-SM rates of an architecture, or None when it is not known."""
    gfx = gfx_of(gfx_name)
    if gfx:
        return AMD_ARCHS.get(gfx)
    if amd:
        key = AMD_ARCH_OF_SPEC.get(spec.key) if spec is not None else None
        return AMD_ARCHS.get(key) if key else None
    if compute_capability is None:
        return None
    return NVIDIA_ARCHS.get(tuple(int(x) for x in compute_capability))
