"""A data-sheet entry (`DeviceSpec`) and the peaks it gives, each number with the document it
comes from.

Units: compute in TFLOP/s (TOP/s for int8), bandwidth in GB/s (1e9 B/s), memory size in GiB.
All compute numbers are *dense* throughput. Vendors headline 2:4-sparse tensor numbers (twice
the dense ones) for Ampere and later; where a data sheet only gives the sparse figure, the table
stores half of it and says so (`basis="sparse_halved"`). Numbers that are not on a data sheet
but follow from the architecture (rate per clock × units × clock) say `basis="derived"`.

Precision keys (`CEILING_PRECISIONS` of `devices/precision.py`, the one vocabulary):
`fp64` (vector/CUDA cores), `fp64_tc` (FP64 on tensor / matrix cores), `fp32` (vector/CUDA
cores), `fp32_tc` (FP32 on AMD matrix cores), `tf32`, `bf16`, `fp16` (tensor/matrix cores),
`fp8`, `int8` (tensor/matrix cores).

Peaks are per *device as the runtime sees it*: one GPU, one AMD GCD (an MI250/MI250X package is
two devices, so each entry holds half the package numbers), one TPU chip.
"""

from __future__ import annotations

import dataclasses

from tb_roofline.devices.host_links import NAME as HOST_LINK_NAME
from tb_roofline.devices.host_links import host_link
from tb_roofline.devices.interconnect import interconnect, link_name, topology
from tb_roofline.devices.onchip import AMD_ARCH_OF_SPEC, per_clock, shared_gbs
from tb_roofline.devices.precision import CEILING_PRECISIONS
from tb_roofline.devices.sources import Figure
from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak

# The precision whose roof is the default (first) ceiling of a device: the headline ML roof.
DEFAULT_ORDER = (
    "bf16",
    "fp16",
    "tf32",
    "fp32_tc",
    "fp32",
    "fp64_tc",
    "fp64",
    "int8",
    "fp8",
    "fp6",
    "fp4",
)

GIB = 1 << 30


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    key: str
    name: str  # shown to users
    vendor: str  # nvidia | amd | google
    kind: str  # gpu | tpu
    compute: dict  # precision -> Figure (TFLOP/s, dense)
    memory_bw: Figure  # GB/s of the main memory (HBM or GDDR)
    memory_type: str = "HBM"
    memory_gib: float | None = None  # nominal size per device
    compute_capability: tuple | None = None  # (major, minor) as the runtime reports it
    sm_count: int | None = None  # SMs (NVIDIA), CUs (AMD) per device
    clock_mhz: float | None = None  # the boost clock the data sheet's numbers use
    l2_bw: Figure | None = None  # GB/s
    per: str = "device"  # device | gcd (half an MI250/MI250X package) | chip (TPU)
    patterns: tuple = ()  # regexes searched in the normalised name
    excludes: tuple = ()  # regexes that veto a name match
    uncertain: bool = False  # the whole entry is provisional
    notes: str = ""
    match_note: str = ""  # filled in by lookup() when the match was not unique or by signature

    def tflops(self, precision: str) -> float | None:
        fig = self.compute.get(precision)
        return fig.value if fig else None

    def default_precision(self) -> str | None:
        for p in DEFAULT_ORDER:
            if p in self.compute:
                return p
        return None

    def uncertain_figures(self) -> list[str]:
        out = [f"{p}: {f.note or 'uncertain'}" for p, f in self.compute.items() if f.uncertain]
        if self.memory_bw.uncertain:
            out.append(f"memory: {self.memory_bw.note or 'uncertain'}")
        if self.l2_bw is not None and self.l2_bw.uncertain:
            out.append(f"l2: {self.l2_bw.note or 'uncertain'}")
        return out

    def to_device_info(self, num_cores: int = 1) -> DeviceInfo:
        """Data-sheet peaks as a DeviceInfo (GFLOP/s, GB/s), default precision first."""
        return DeviceInfo(
            type=self.name,
            kind=self.kind,
            num_cores=num_cores,
            compute=datasheet_compute(self),
            memories=datasheet_memories(self),
        )

    def to_json(self) -> dict:
        def fig(f):
            return None if f is None else dataclasses.asdict(f)

        return {
            "key": self.key,
            "name": self.name,
            "vendor": self.vendor,
            "kind": self.kind,
            "per": self.per,
            "compute_tflops": {p: fig(f) for p, f in self.compute.items()},
            "memory_bw_gbs": fig(self.memory_bw),
            "memory_type": self.memory_type,
            "memory_gib": self.memory_gib,
            "l2_bw_gbs": fig(self.l2_bw),
            "compute_capability": list(self.compute_capability)
            if self.compute_capability
            else None,
            "sm_count": self.sm_count,
            "clock_mhz": self.clock_mhz,
            "uncertain": self.uncertain,
            "notes": self.notes,
            "match_note": self.match_note,
        }


def datasheet_compute(spec: DeviceSpec) -> list[ComputePeak]:
    default = spec.default_precision()
    order = ([default] if default else []) + [p for p in CEILING_PRECISIONS if p != default]
    return [
        ComputePeak(p, spec.compute[p].value * 1000.0, "datasheet")
        for p in order
        if p in spec.compute
    ]


def datasheet_memories(spec: DeviceSpec) -> list[MemoryPeak]:
    """HBM, the L1/shared roof (SMs x clock x bytes per clock, `onchip.py`), L2, the host link
    and the device-to-device link, each where its figures are known."""
    out = [
        MemoryPeak("hbm", memory_display_name(spec.memory_type), spec.memory_bw.value, "datasheet")
    ]
    rate = (
        per_clock(spec.vendor, AMD_ARCH_OF_SPEC.get(spec.key, "")) if spec.kind == "gpu" else None
    )
    if rate is not None and spec.sm_count and spec.clock_mhz:
        gbs, note = shared_gbs(spec.sm_count, spec.clock_mhz, rate)
        out.append(MemoryPeak("shared", "L1/Shared", gbs, "datasheet", note=note))
    if spec.l2_bw is not None:
        out.append(MemoryPeak("l2", "L2", spec.l2_bw.value, "datasheet"))
    link = host_link(spec.key)
    if link is not None:
        out.append(MemoryPeak("host", HOST_LINK_NAME, link.value, "datasheet", note=link.note))
    peer = interconnect(spec.key)
    if peer is not None:
        out.append(
            MemoryPeak(
                "interconnect",
                link_name(spec.key),
                peer.value,
                "datasheet",
                note=f"{peer.source}; {peer.note}",
                topology=topology(spec.key),
            )
        )
    return out


def memory_display_name(memory_type: str) -> str:
    """The main-memory roof keeps the id `hbm` (the model's); its name says what it is."""
    return "HBM" if memory_type.upper().startswith("HBM") else f"DRAM ({memory_type})"


def figure(value, source, basis="dense", uncertain=False, note=""):
    return Figure(float(value), source, basis, uncertain, note)


def sparse_halved(value_sparse, source, uncertain=False):
    """NVIDIA headlines 2:4-sparse tensor rates: the dense rate is half of them."""
    return Figure(value_sparse / 2.0, source, "sparse_halved", uncertain)
