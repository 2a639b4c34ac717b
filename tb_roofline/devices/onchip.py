"""The L1 / shared-memory (NVIDIA) and LDS (AMD) roof of a GPU, per SM or CU and clock.

    L1/shared GB/s = SMs (CUs) × clock × bytes per clock per SM (CU)

NVIDIA: shared memory has 32 banks, each serving 4 bytes per clock, so an SM moves 128 B per
clock (CUDA C++ Programming Guide, "Shared Memory"; the same on Volta to Blackwell). AMD CDNA 1
to 3: the LDS serves 128 B per clock per CU (AMD CDNA 3 whitepaper, LDS); CDNA 4 doubles the
LDS read bandwidth (AMD CDNA 4 whitepaper: 160 KB LDS), provisional here. This is the peak of
the SMs' own memory (XProf's "L1/SharedMem" roof), not L2.
"""

from __future__ import annotations

import dataclasses

NVIDIA_SHARED = "CUDA C++ Programming Guide, Shared Memory: 32 banks x 4 bytes per clock per SM"
_CDNA = "AMD {} architecture whitepaper, LDS: {} bytes per clock per CU"


@dataclasses.dataclass(frozen=True)
class PerClock:
    bytes_per_clock: int
    source: str
    uncertain: bool = False


AMD_LDS = {
    "gfx908": PerClock(128, _CDNA.format("CDNA", 128), True),
    "gfx90a": PerClock(128, _CDNA.format("CDNA 2", 128), True),
    "gfx942": PerClock(128, _CDNA.format("CDNA 3", 128), True),
    "gfx950": PerClock(256, _CDNA.format("CDNA 4", 256) + " (read bandwidth doubled)", True),
}
for _g in ("gfx940", "gfx941"):
    AMD_LDS[_g] = AMD_LDS["gfx942"]
# The gfx name of the AMD entries of the data-sheet table.
AMD_ARCH_OF_SPEC = {
    "mi100": "gfx908",
    "mi210": "gfx90a",
    "mi250-gcd": "gfx90a",
    "mi250x-gcd": "gfx90a",
    "mi300x": "gfx942",
    "mi325x": "gfx942",
    "mi350x": "gfx950",
    "mi355x": "gfx950",
}


def per_clock(vendor: str, gfx: str = "") -> PerClock | None:
    """Bytes per clock per SM/CU of the L1/shared memory, None when unknown."""
    if vendor == "nvidia":
        return PerClock(128, NVIDIA_SHARED)
    return AMD_LDS.get(gfx)


def shared_gbs(units: int, clock_mhz: float, rate: PerClock) -> tuple[float, str]:
    """(GB/s, how it was derived) of the L1/shared roof."""
    gbs = units * clock_mhz * 1e6 * rate.bytes_per_clock / 1e9
    note = (
        f"{units} SMs x {clock_mhz:,.0f} MHz x {rate.bytes_per_clock} B per clock "
        f"({rate.source})" + ("; provisional" if rate.uncertain else "")
    )
    return gbs, note
