"""One record per chip (`Chip`), gathered from the tables that hold its figures, and the check
that those tables agree on the chips' keys.

A chip's figures live where they are derived: compute by precision, main memory, L2 and how a
profile's device name finds it in its `DeviceSpec` (`datasheets_*.py`, keyed by `DeviceSpec.key`,
THE chip names); the host link in `host_links.py`; the device-to-device link in
`interconnect.py`; an AMD chip's architecture (gfx name) in `onchip.py`, which selects its
per-CU rates (`gpu_arch_rates.py`) and LDS bytes per clock; an NVIDIA chip's per-SM rates by
its compute capability (`gpu_arch_rates.py`); every document in `sources.py`. The side tables
are keyed by the spec's key, so a typo there would silently drop a roof: `unknown_keys()` lists
such keys and `missing_figures()` what a chip needs and no table gives
(tests/devices/test_chip_records.py keeps both empty).
"""

from __future__ import annotations

import dataclasses

from tb_roofline.devices.datasheet_entry import DeviceSpec
from tb_roofline.devices.datasheets import BY_KEY, TABLE
from tb_roofline.devices.gpu_arch_rates import AMD_ARCHS, NVIDIA_ARCHS, ArchRates
from tb_roofline.devices.host_links import HOST_LINKS
from tb_roofline.devices.interconnect import LINKS
from tb_roofline.devices.onchip import AMD_ARCH_OF_SPEC, AMD_LDS, PerClock, per_clock
from tb_roofline.devices.sources import Figure

# The tables keyed by a chip's key (`DeviceSpec.key`), by the name docs and errors use.
KEYED_TABLES: dict[str, dict] = {
    "host_links.HOST_LINKS": HOST_LINKS,
    "interconnect.LINKS": LINKS,
    "onchip.AMD_ARCH_OF_SPEC": AMD_ARCH_OF_SPEC,
}


@dataclasses.dataclass(frozen=True)
class Chip:
    """Everything the tables know of one chip."""

    spec: DeviceSpec  # compute by precision, main memory, L2, name patterns
    host_link: Figure | None  # GB/s per direction
    link: tuple[str, Figure] | None  # (technology, GB/s per direction) to its peers
    arch: ArchRates | None  # FLOP per clock per SM / CU (GPUs)
    gfx: str  # AMD's architecture name, "" for others
    shared: PerClock | None  # L1 / shared (LDS) bytes per clock per SM / CU (GPUs)

    @property
    def key(self) -> str:
        return self.spec.key

    def sources(self) -> set[str]:
        """Every document a figure of this chip cites."""
        figures = [*self.spec.compute.values(), self.spec.memory_bw, self.spec.l2_bw]
        figures += [self.host_link, self.link[1] if self.link else None]
        out = {f.source for f in figures if f is not None}
        out |= {r.source for r in (self.arch, self.shared) if r is not None}
        return out


def _arch(spec: DeviceSpec) -> tuple[str, ArchRates | None]:
    if spec.kind != "gpu":
        return "", None
    if spec.vendor == "amd":
        gfx = AMD_ARCH_OF_SPEC.get(spec.key, "")
        return gfx, AMD_ARCHS.get(gfx)
    cc = spec.compute_capability
    return "", NVIDIA_ARCHS.get(tuple(cc)) if cc else None


def chip_record(spec: DeviceSpec) -> Chip:
    gfx, arch = _arch(spec)
    shared = per_clock(spec.vendor, gfx) if spec.kind == "gpu" else None
    return Chip(spec, HOST_LINKS.get(spec.key), LINKS.get(spec.key), arch, gfx, shared)


CHIPS: dict[str, Chip] = {spec.key: chip_record(spec) for spec in TABLE}


def unknown_keys() -> list[str]:
    """'table: key' of every side-table key that names no chip (a typo, or a removed chip)."""
    return [
        f"{name}: {key}"
        for name, table in KEYED_TABLES.items()
        for key in table
        if key not in BY_KEY
    ]


def missing_figures(chip: Chip) -> list[str]:
    """What this chip needs and no table gives: a GPU needs its architecture's rates (SMs or
    CUs x clock peaks) and its L1 / shared bytes per clock; an AMD GPU its gfx name, whose LDS
    rate must be known."""
    out: list = []
    if chip.spec.kind != "gpu":
        return out
    if chip.spec.vendor == "amd":
        if not chip.gfx:
            out.append("onchip.AMD_ARCH_OF_SPEC")
        elif chip.gfx not in AMD_LDS:
            out.append(f"onchip.AMD_LDS[{chip.gfx}]")
    if chip.arch is None:
        out.append("gpu_arch_rates")
    if chip.shared is None:
        out.append("onchip.per_clock")
    return out
