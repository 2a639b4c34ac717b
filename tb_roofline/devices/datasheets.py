"""Data-sheet peaks of accelerators, each number with the document it comes from.

Units: compute in TFLOP/s (TOP/s for int8), bandwidth in GB/s (1e9 B/s), memory size in GiB.
All compute numbers are *dense* throughput. Vendors headline 2:4-sparse tensor numbers (twice
the dense ones) for Ampere and later; where a data sheet only gives the sparse figure, the table
stores half of it and says so (`basis="sparse_halved"`). Numbers that are not on a data sheet
but follow from the architecture (rate per clock × units × clock) say `basis="derived"`.

Precision keys (the same spellings as `tb_roofline.devices.spec.normalize_precision`):
`fp64` (vector/CUDA cores), `fp64_tc` (FP64 on tensor / matrix cores), `fp32` (vector/CUDA
cores), `fp32_tc` (FP32 on AMD matrix cores), `tf32`, `bf16`, `fp16` (tensor/matrix cores),
`fp8`, `int8` (tensor/matrix cores).

Peaks are per *device as the runtime sees it*: one GPU, one AMD GCD (an MI250/MI250X package is
two devices, so each entry holds half the package numbers), one TPU chip.

`lookup(name, compute_capability, memory_bytes, sm_count=..., clock_khz=...)` matches the name
a profile carries ("NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-16GB", "AMD Instinct MI250X / MI250",
"TPU v5 lite", ...); profiles that carry no useful name (TensorFlow's GPU planes, ROCm's
"AMD Radeon Graphics") are matched on their hardware signature (compute capability, SM/CU
count, memory size and clock) instead.
"""

from __future__ import annotations

import dataclasses
import re

from tb_roofline.devices.datasheets_recent import B200_FP32, RECENT
from tb_roofline.devices.host_links import NAME as HOST_LINK_NAME
from tb_roofline.devices.host_links import host_link
from tb_roofline.devices.interconnect import interconnect, link_name
from tb_roofline.devices.onchip import AMD_ARCH_OF_SPEC, per_clock, shared_gbs
from tb_roofline.devices.sources import (
    A10_DS,
    A100_DS,
    A100_L2,
    B200_DS,
    B200_FP4,
    GB200_DS,
    H100_NVL_DS,
    H100_PCIE_WP,
    H100_WP,
    H200_DS,
    H200_NVL_DS,
    L4_DS,
    L40S_DS,
    MI100_DS,
    MI210_DS,
    MI250_DS,
    MI250X_DS,
    MI300X_DS,
    MI325X_DS,
    MI350X_DS,
    MI355X_DS,
    T4_DS,
    TPU_DOC,
    V100_DS,
    V100_L2,
    Figure,
)
from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak

PRECISIONS = (
    "fp64",
    "fp64_tc",
    "fp32",
    "fp32_tc",
    "tf32",
    "bf16",
    "fp16",
    "fp8",
    "int8",
    "fp6",
    "fp4",
)
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
    order = ([default] if default else []) + [p for p in PRECISIONS if p != default]
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
            )
        )
    return out


def memory_display_name(memory_type: str) -> str:
    """The main-memory roof keeps the id `hbm` (the model's); its name says what it is."""
    return "HBM" if memory_type.upper().startswith("HBM") else f"DRAM ({memory_type})"


# ----------------------------------------------------------------------------------------------
# The table. Helper constructors keep each entry to one line per number.


def _f(value, source, basis="dense", uncertain=False, note=""):
    return Figure(float(value), source, basis, uncertain, note)


def _half(package_value, source, note="half of the two-GCD package figure"):
    """AMD MI250/MI250X: the data sheet gives the package; each GCD is its own device."""
    return Figure(package_value / 2.0, source, "dense", False, note)


def _nvidia_datasheet_sparse(value_sparse, source):
    return Figure(value_sparse / 2.0, source, "sparse_halved")


TABLE: tuple[DeviceSpec, ...] = (
    # ---------------------------------------------------------------- NVIDIA Volta (7.0)
    DeviceSpec(
        key="v100-sxm2-16gb",
        name="NVIDIA V100 SXM2 16GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(7.8, V100_DS),
            "fp32": _f(15.7, V100_DS),
            "fp16": _f(125, V100_DS, note="tensor cores, FP16 inputs"),
        },
        memory_bw=_f(900, V100_DS),
        memory_type="HBM2",
        memory_gib=16,
        compute_capability=(7, 0),
        sm_count=80,
        clock_mhz=1530,
        l2_bw=_f(
            2048 * 1.530, V100_L2, "derived", True, "L2 clock assumed equal to the SM boost clock"
        ),
        patterns=(r"v100-? ?sxm2",),
        excludes=(r"32\s*gb",),
    ),
    DeviceSpec(
        key="v100-sxm2-32gb",
        name="NVIDIA V100 SXM2 32GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(7.8, V100_DS),
            "fp32": _f(15.7, V100_DS),
            "fp16": _f(125, V100_DS, note="tensor cores, FP16 inputs"),
        },
        memory_bw=_f(900, V100_DS),
        memory_type="HBM2",
        memory_gib=32,
        compute_capability=(7, 0),
        sm_count=80,
        clock_mhz=1530,
        l2_bw=_f(
            2048 * 1.530, V100_L2, "derived", True, "L2 clock assumed equal to the SM boost clock"
        ),
        patterns=(r"v100-? ?sxm2",),
        excludes=(r"16\s*gb",),
    ),
    DeviceSpec(
        key="v100-pcie",
        name="NVIDIA V100 PCIe",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(7, V100_DS),
            "fp32": _f(14, V100_DS),
            "fp16": _f(112, V100_DS, note="tensor cores, FP16 inputs"),
        },
        memory_bw=_f(900, V100_DS),
        memory_type="HBM2",
        memory_gib=None,
        compute_capability=(7, 0),
        sm_count=80,
        clock_mhz=1380,
        patterns=(r"v100-pcie", r"v100 pcie"),
        excludes=(r"v100s",),
        notes="16GB and 32GB variants share the peaks",
    ),
    DeviceSpec(
        key="v100s-pcie",
        name="NVIDIA V100S PCIe 32GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(8.2, V100_DS),
            "fp32": _f(16.4, V100_DS),
            "fp16": _f(130, V100_DS, note="tensor cores, FP16 inputs"),
        },
        memory_bw=_f(1134, V100_DS),
        memory_type="HBM2",
        memory_gib=32,
        compute_capability=(7, 0),
        sm_count=80,
        clock_mhz=1597,
        patterns=(r"v100s",),
    ),
    # ---------------------------------------------------------------- NVIDIA Turing (7.5)
    DeviceSpec(
        key="t4",
        name="NVIDIA T4",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(
                40 * 1.59 * 4 / 1000,
                "derived: 40 SMs x 1590 MHz x 4 FLOP/clock/SM (Turing runs FP64 at 1/32 of FP32)",
                "derived",
                True,
                "not on the T4 datasheet",
            ),
            "fp32": _f(8.1, T4_DS),
            "fp16": _f(65, T4_DS, note="mixed precision FP16/FP32 on tensor cores"),
            "int8": _f(130, T4_DS),
        },
        memory_bw=_f(320, T4_DS),
        memory_type="GDDR6",
        memory_gib=16,
        compute_capability=(7, 5),
        sm_count=40,
        clock_mhz=1590,
        patterns=(r"\bt4\b",),
    ),
    # ---------------------------------------------------------------- NVIDIA Ampere (8.0)
    DeviceSpec(
        key="a100-sxm4-40gb",
        name="NVIDIA A100 SXM4 40GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(9.7, A100_DS),
            "fp64_tc": _f(19.5, A100_DS),
            "fp32": _f(19.5, A100_DS),
            "tf32": _f(156, A100_DS),
            "bf16": _f(312, A100_DS),
            "fp16": _f(312, A100_DS),
            "int8": _f(624, A100_DS),
        },
        memory_bw=_f(1555, A100_DS),
        memory_type="HBM2",
        memory_gib=40,
        compute_capability=(8, 0),
        sm_count=108,
        clock_mhz=1410,
        l2_bw=_f(
            5120 * 1.410, A100_L2, "derived", True, "L2 clock assumed equal to the SM boost clock"
        ),
        patterns=(r"a100.*sxm4", r"pg509-200", r"a100-sxm-"),
        excludes=(r"80\s*gb",),
        notes="PG509-200 is the board code of the 40GB SXM4 A100 (seen in Meta traces)",
    ),
    DeviceSpec(
        key="a100-sxm4-80gb",
        name="NVIDIA A100 SXM4 80GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(9.7, A100_DS),
            "fp64_tc": _f(19.5, A100_DS),
            "fp32": _f(19.5, A100_DS),
            "tf32": _f(156, A100_DS),
            "bf16": _f(312, A100_DS),
            "fp16": _f(312, A100_DS),
            "int8": _f(624, A100_DS),
        },
        memory_bw=_f(2039, A100_DS),
        memory_type="HBM2e",
        memory_gib=80,
        compute_capability=(8, 0),
        sm_count=108,
        clock_mhz=1410,
        l2_bw=_f(
            5120 * 1.410, A100_L2, "derived", True, "L2 clock assumed equal to the SM boost clock"
        ),
        patterns=(r"a100.*sxm4", r"a100.*80\s*gb.*sxm", r"a100-sxm-"),
        excludes=(r"40\s*gb", r"pg509"),
    ),
    DeviceSpec(
        key="a100-pcie-40gb",
        name="NVIDIA A100 PCIe 40GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(9.7, A100_DS),
            "fp64_tc": _f(19.5, A100_DS),
            "fp32": _f(19.5, A100_DS),
            "tf32": _f(156, A100_DS),
            "bf16": _f(312, A100_DS),
            "fp16": _f(312, A100_DS),
            "int8": _f(624, A100_DS),
        },
        memory_bw=_f(1555, A100_DS),
        memory_type="HBM2",
        memory_gib=40,
        compute_capability=(8, 0),
        sm_count=108,
        clock_mhz=1410,
        patterns=(r"a100.*pcie",),
        excludes=(r"80\s*gb",),
    ),
    DeviceSpec(
        key="a100-pcie-80gb",
        name="NVIDIA A100 PCIe 80GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(9.7, A100_DS),
            "fp64_tc": _f(19.5, A100_DS),
            "fp32": _f(19.5, A100_DS),
            "tf32": _f(156, A100_DS),
            "bf16": _f(312, A100_DS),
            "fp16": _f(312, A100_DS),
            "int8": _f(624, A100_DS),
        },
        memory_bw=_f(1935, A100_DS),
        memory_type="HBM2e",
        memory_gib=80,
        compute_capability=(8, 0),
        sm_count=108,
        clock_mhz=1410,
        patterns=(r"a100.*pcie",),
        excludes=(r"40\s*gb",),
    ),
    # ---------------------------------------------------------------- NVIDIA Ampere (8.6)
    DeviceSpec(
        key="a10",
        name="NVIDIA A10",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(
                72 * 1.695 * 4 / 1000,
                "derived: 72 SMs x 1695 MHz x 4 FLOP/clock/SM (GA10x runs FP64 at 1/64 of FP32)",
                "derived",
                True,
                "not on the A10 datasheet",
            ),
            "fp32": _f(31.2, A10_DS),
            "tf32": _f(62.5, A10_DS),
            "bf16": _f(125, A10_DS),
            "fp16": _f(125, A10_DS),
            "int8": _f(250, A10_DS),
        },
        memory_bw=_f(600, A10_DS),
        memory_type="GDDR6",
        memory_gib=24,
        compute_capability=(8, 6),
        sm_count=72,
        clock_mhz=1695,
        patterns=(r"\ba10\b",),
        excludes=(r"a10g",),
    ),
    # ---------------------------------------------------------------- NVIDIA Ada (8.9)
    DeviceSpec(
        key="l4",
        name="NVIDIA L4",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp32": _f(30.3, L4_DS),
            "tf32": _nvidia_datasheet_sparse(120, L4_DS),
            "bf16": _nvidia_datasheet_sparse(242, L4_DS),
            "fp16": _nvidia_datasheet_sparse(242, L4_DS),
            "fp8": _nvidia_datasheet_sparse(485, L4_DS),
            "int8": _nvidia_datasheet_sparse(485, L4_DS),
        },
        memory_bw=_f(300, L4_DS),
        memory_type="GDDR6",
        memory_gib=24,
        compute_capability=(8, 9),
        sm_count=58,
        clock_mhz=2040,
        patterns=(r"\bl4\b",),
    ),
    DeviceSpec(
        key="l40s",
        name="NVIDIA L40S",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp32": _f(91.6, L40S_DS),
            "tf32": _f(183, L40S_DS),
            "bf16": _f(362.05, L40S_DS),
            "fp16": _f(362.05, L40S_DS),
            "fp8": _f(733, L40S_DS),
            "int8": _f(733, L40S_DS),
        },
        memory_bw=_f(864, L40S_DS),
        memory_type="GDDR6",
        memory_gib=48,
        compute_capability=(8, 9),
        sm_count=142,
        clock_mhz=2520,
        patterns=(r"\bl40s\b",),
    ),
    # ---------------------------------------------------------------- NVIDIA Hopper (9.0)
    DeviceSpec(
        key="h100-sxm",
        name="NVIDIA H100 SXM5 80GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(33.5, H100_WP),
            "fp64_tc": _f(66.9, H100_WP),
            "fp32": _f(66.9, H100_WP),
            "tf32": _f(494.7, H100_WP),
            "bf16": _f(989.4, H100_WP),
            "fp16": _f(989.4, H100_WP),
            "fp8": _f(1978.9, H100_WP),
            "int8": _f(1978.9, H100_WP),
        },
        memory_bw=_f(3352, H100_WP),
        memory_type="HBM3",
        memory_gib=80,
        compute_capability=(9, 0),
        sm_count=132,
        clock_mhz=1980,
        patterns=(r"h100.*sxm", r"h100 80gb hbm3", r"h100-80gb-hbm3", r"^(nvidia )?h100$"),
        notes="the CUDA name of the SXM part is 'NVIDIA H100 80GB HBM3'. The whitepaper's "
        "vector FP32/FP64 figures use the 1980 MHz boost clock, its tensor figures "
        "imply about 1830 MHz, so peaks derived from the profile's clock come out ~8% "
        "above the tensor figures here",
    ),
    DeviceSpec(
        key="h100-pcie",
        name="NVIDIA H100 PCIe 80GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(25.6, H100_PCIE_WP),
            "fp64_tc": _f(51.2, H100_PCIE_WP),
            "fp32": _f(51.2, H100_PCIE_WP),
            "tf32": _f(378, H100_PCIE_WP),
            "bf16": _f(756, H100_PCIE_WP),
            "fp16": _f(756, H100_PCIE_WP),
            "fp8": _f(1513, H100_PCIE_WP),
            "int8": _f(1513, H100_PCIE_WP),
        },
        memory_bw=_f(2000, H100_PCIE_WP),
        memory_type="HBM2e",
        memory_gib=80,
        compute_capability=(9, 0),
        sm_count=114,
        clock_mhz=1755,
        patterns=(r"h100.*pcie",),
        notes="tensor figures imply a clock below the 1755 MHz boost (like the SXM part)",
    ),
    DeviceSpec(
        key="h100-nvl",
        name="NVIDIA H100 NVL 94GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(30, H100_NVL_DS),
            "fp64_tc": _f(60, H100_NVL_DS),
            "fp32": _f(60, H100_NVL_DS),
            "tf32": _nvidia_datasheet_sparse(835, H100_NVL_DS),
            "bf16": _nvidia_datasheet_sparse(1671, H100_NVL_DS),
            "fp16": _nvidia_datasheet_sparse(1671, H100_NVL_DS),
            "fp8": _nvidia_datasheet_sparse(3341, H100_NVL_DS),
            "int8": _nvidia_datasheet_sparse(3341, H100_NVL_DS),
        },
        memory_bw=_f(3900, H100_NVL_DS),
        memory_type="HBM3",
        memory_gib=94,
        compute_capability=(9, 0),
        sm_count=132,
        patterns=(r"h100.*nvl",),
        uncertain=True,
        notes="SM count and clock of the NVL part are not on its datasheet",
    ),
    DeviceSpec(
        key="h200-sxm",
        name="NVIDIA H200 SXM 141GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(34, H200_DS),
            "fp64_tc": _f(67, H200_DS),
            "fp32": _f(67, H200_DS),
            "tf32": _nvidia_datasheet_sparse(989, H200_DS),
            "bf16": _nvidia_datasheet_sparse(1979, H200_DS),
            "fp16": _nvidia_datasheet_sparse(1979, H200_DS),
            "fp8": _nvidia_datasheet_sparse(3958, H200_DS),
            "int8": _nvidia_datasheet_sparse(3958, H200_DS),
        },
        memory_bw=_f(4800, H200_DS),
        memory_type="HBM3e",
        memory_gib=141,
        compute_capability=(9, 0),
        sm_count=132,
        clock_mhz=1980,
        patterns=(r"\bh200\b",),
        excludes=(r"nvl",),
        notes="same GH100 compute as the H100 SXM; more and faster memory",
    ),
    DeviceSpec(
        key="h200-nvl",
        name="NVIDIA H200 NVL 141GB",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(30, H200_NVL_DS),
            "fp64_tc": _f(60, H200_NVL_DS),
            "fp32": _f(60, H200_NVL_DS),
            "tf32": _nvidia_datasheet_sparse(835, H200_NVL_DS),
            "bf16": _nvidia_datasheet_sparse(1671, H200_NVL_DS),
            "fp16": _nvidia_datasheet_sparse(1671, H200_NVL_DS),
            "fp8": _nvidia_datasheet_sparse(3341, H200_NVL_DS),
            "int8": _nvidia_datasheet_sparse(3341, H200_NVL_DS),
        },
        memory_bw=_f(4800, H200_NVL_DS),
        memory_type="HBM3e",
        memory_gib=141,
        compute_capability=(9, 0),
        sm_count=132,
        patterns=(r"h200.*nvl",),
    ),
    # ---------------------------------------------------------------- NVIDIA Blackwell (10.0)
    DeviceSpec(
        key="b200",
        name="NVIDIA B200",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(37, B200_DS, uncertain=True, note="board total / 8"),
            "fp32": B200_FP32,
            "tf32": _nvidia_datasheet_sparse(2250, B200_DS),
            "bf16": _nvidia_datasheet_sparse(4500, B200_DS),
            "fp16": _nvidia_datasheet_sparse(4500, B200_DS),
            "fp8": _nvidia_datasheet_sparse(9000, B200_DS),
            "int8": _nvidia_datasheet_sparse(9000, B200_DS),
            "fp6": _nvidia_datasheet_sparse(9000, B200_FP4),
            "fp4": _nvidia_datasheet_sparse(18000, B200_FP4),
        },
        memory_bw=_f(8000, B200_DS),
        memory_type="HBM3e",
        memory_gib=180,
        compute_capability=(10, 0),
        sm_count=148,
        patterns=(r"\bb200\b",),
        uncertain=True,
        notes="Blackwell figures vary between NVIDIA documents (board configurations, power "
        "limits); FP32 vector peak from NVIDIA's HGX page",
    ),
    DeviceSpec(
        key="gb200",
        name="NVIDIA GB200 (one GPU)",
        vendor="nvidia",
        kind="gpu",
        compute={
            "fp64": _f(45, GB200_DS, note="rack total / 72"),
            "fp64_tc": _f(45, GB200_DS, note="rack total / 72"),
            "tf32": _nvidia_datasheet_sparse(2500, GB200_DS),
            "bf16": _nvidia_datasheet_sparse(5000, GB200_DS),
            "fp16": _nvidia_datasheet_sparse(5000, GB200_DS),
            "fp8": _nvidia_datasheet_sparse(10000, GB200_DS),
            "int8": _nvidia_datasheet_sparse(10000, GB200_DS),
            "fp6": _nvidia_datasheet_sparse(10000, GB200_DS),
            "fp4": _nvidia_datasheet_sparse(20000, GB200_DS),
        },
        memory_bw=_f(8000, GB200_DS),
        memory_type="HBM3e",
        memory_gib=186,
        compute_capability=(10, 0),
        patterns=(r"\bgb200\b",),
        uncertain=True,
        notes="the Grace-Blackwell superchip's GPUs run at a higher power limit than the HGX "
        "B200; SM count and clock are not on the datasheet; FP32 vector peak not "
        "published there",
    ),
    # ---------------------------------------------------------------- AMD CDNA
    DeviceSpec(
        key="mi100",
        name="AMD Instinct MI100",
        vendor="amd",
        kind="gpu",
        compute={
            "fp64": _f(11.5, MI100_DS),
            "fp32": _f(23.1, MI100_DS),
            "fp32_tc": _f(46.1, MI100_DS, note="FP32 matrix cores"),
            "fp16": _f(184.6, MI100_DS),
            "bf16": _f(92.3, MI100_DS),
            "int8": _f(184.6, MI100_DS),
        },
        memory_bw=_f(1228.8, MI100_DS),
        memory_type="HBM2",
        memory_gib=32,
        compute_capability=(9, 0),
        sm_count=120,
        clock_mhz=1502,
        patterns=(r"mi100\b", r"\bgfx908\b"),
        uncertain=True,
        notes="compute capability 9.0 is what HIP reports for gfx908 (assumed)",
    ),
    DeviceSpec(
        key="mi250x-gcd",
        name="AMD Instinct MI250X (one GCD)",
        vendor="amd",
        kind="gpu",
        compute={
            "fp64": _half(47.9, MI250X_DS),
            "fp64_tc": _half(95.7, MI250X_DS),
            "fp32": _half(47.9, MI250X_DS),
            "fp32_tc": _half(95.7, MI250X_DS),
            "fp16": _half(383, MI250X_DS),
            "bf16": _half(383, MI250X_DS),
            "int8": _half(383, MI250X_DS),
        },
        memory_bw=_half(3276.8, MI250X_DS),
        memory_type="HBM2e",
        memory_gib=64,
        compute_capability=(9, 0),
        sm_count=110,
        clock_mhz=1700,
        per="gcd",
        patterns=(r"mi250x",),
        notes="an MI250X package is two GCDs, each its own device with 110 CUs and 64 GB; "
        "'AMD Instinct MI250X / MI250' names both products: the CU count decides",
    ),
    DeviceSpec(
        key="mi250-gcd",
        name="AMD Instinct MI250 (one GCD)",
        vendor="amd",
        kind="gpu",
        compute={
            "fp64": _half(45.3, MI250_DS),
            "fp64_tc": _half(90.5, MI250_DS),
            "fp32": _half(45.3, MI250_DS),
            "fp32_tc": _half(90.5, MI250_DS),
            "fp16": _half(362.1, MI250_DS),
            "bf16": _half(362.1, MI250_DS),
            "int8": _half(362.1, MI250_DS),
        },
        memory_bw=_half(3276.8, MI250_DS),
        memory_type="HBM2e",
        memory_gib=64,
        compute_capability=(9, 0),
        sm_count=104,
        clock_mhz=1700,
        per="gcd",
        patterns=(r"mi250(?!x)",),
        notes="an MI250 package is two GCDs, each its own device with 104 CUs and 64 GB",
    ),
    DeviceSpec(
        key="mi210",
        name="AMD Instinct MI210",
        vendor="amd",
        kind="gpu",
        compute={
            "fp64": _f(22.6, MI210_DS),
            "fp64_tc": _f(45.3, MI210_DS),
            "fp32": _f(22.6, MI210_DS),
            "fp32_tc": _f(45.3, MI210_DS),
            "fp16": _f(181.0, MI210_DS),
            "bf16": _f(181.0, MI210_DS),
            "int8": _f(181.0, MI210_DS),
        },
        memory_bw=_f(1638.4, MI210_DS),
        memory_type="HBM2e",
        memory_gib=64,
        compute_capability=(9, 0),
        sm_count=104,
        clock_mhz=1700,
        patterns=(r"mi210",),
        notes="same CU count, clock and memory as one MI250 GCD",
    ),
    DeviceSpec(
        key="mi300x",
        name="AMD Instinct MI300X",
        vendor="amd",
        kind="gpu",
        compute={
            "fp64": _f(81.7, MI300X_DS),
            "fp64_tc": _f(163.4, MI300X_DS),
            "fp32": _f(163.4, MI300X_DS),
            "fp32_tc": _f(163.4, MI300X_DS),
            "tf32": _f(653.7, MI300X_DS),
            "fp16": _f(1307.4, MI300X_DS),
            "bf16": _f(1307.4, MI300X_DS),
            "fp8": _f(2614.9, MI300X_DS),
            "int8": _f(2614.9, MI300X_DS),
        },
        memory_bw=_f(5300, MI300X_DS),
        memory_type="HBM3",
        memory_gib=192,
        compute_capability=(9, 4),
        sm_count=304,
        clock_mhz=2100,
        patterns=(r"mi300x",),
        uncertain=False,
        notes="one device in the default SPX partition mode; CPX mode splits it into 8",
    ),
    DeviceSpec(
        key="mi325x",
        name="AMD Instinct MI325X",
        vendor="amd",
        kind="gpu",
        compute={
            "fp64": _f(81.7, MI325X_DS),
            "fp64_tc": _f(163.4, MI325X_DS),
            "fp32": _f(163.4, MI325X_DS),
            "fp32_tc": _f(163.4, MI325X_DS),
            "tf32": _f(653.7, MI325X_DS),
            "fp16": _f(1307.4, MI325X_DS),
            "bf16": _f(1307.4, MI325X_DS),
            "fp8": _f(2614.9, MI325X_DS),
            "int8": _f(2614.9, MI325X_DS),
        },
        memory_bw=_f(6000, MI325X_DS),
        memory_type="HBM3e",
        memory_gib=256,
        compute_capability=(9, 4),
        sm_count=304,
        clock_mhz=2100,
        patterns=(r"mi325x",),
    ),
    DeviceSpec(
        key="mi350x",
        name="AMD Instinct MI350X",
        vendor="amd",
        kind="gpu",
        compute={
            "fp64": _f(72.1, MI350X_DS),
            "fp64_tc": _f(72.1, MI350X_DS),
            "fp32": _f(144.2, MI350X_DS),
            "fp16": _f(2306.9, MI350X_DS),
            "bf16": _f(2306.9, MI350X_DS),
            "fp8": _f(4613.7, MI350X_DS),
            "int8": _f(4613.7, MI350X_DS),
            "fp6": _f(9227.5, MI350X_DS),
            "fp4": _f(9227.5, MI350X_DS),
        },
        memory_bw=_f(8000, MI350X_DS),
        memory_type="HBM3e",
        memory_gib=288,
        compute_capability=(9, 5),
        sm_count=256,
        clock_mhz=2200,
        patterns=(r"mi350x",),
        notes="CDNA 4 (gfx950); the air-cooled part, same chip as the MI355X at a lower clock",
    ),
    DeviceSpec(
        key="mi355x",
        name="AMD Instinct MI355X",
        vendor="amd",
        kind="gpu",
        compute={
            "fp64": _f(78.6, MI355X_DS),
            "fp64_tc": _f(78.6, MI355X_DS),
            "fp32": _f(157.3, MI355X_DS),
            "fp16": _f(2516.6, MI355X_DS),
            "bf16": _f(2516.6, MI355X_DS),
            "fp8": _f(5033.2, MI355X_DS),
            "int8": _f(5033.2, MI355X_DS),
            "fp6": _f(10066.3, MI355X_DS),
            "fp4": _f(10066.3, MI355X_DS),
        },
        memory_bw=_f(8000, MI355X_DS),
        memory_type="HBM3e",
        memory_gib=288,
        compute_capability=(9, 5),
        sm_count=256,
        clock_mhz=2400,
        patterns=(r"mi355x",),
        notes="CDNA 4 (gfx950); the liquid-cooled part",
    ),
    # ---------------------------------------------------------------- Google TPU (per chip)
    DeviceSpec(
        key="tpu-v4",
        name="TPU v4",
        vendor="google",
        kind="tpu",
        per="chip",
        compute={"bf16": _f(275, TPU_DOC.format(v="v4")), "int8": _f(275, TPU_DOC.format(v="v4"))},
        memory_bw=_f(1200, TPU_DOC.format(v="v4")),
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
            "bf16": _f(197, TPU_DOC.format(v="v5e")),
            "int8": _f(394, TPU_DOC.format(v="v5e")),
        },
        memory_bw=_f(819, TPU_DOC.format(v="v5e")),
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
            "bf16": _f(459, TPU_DOC.format(v="v5p")),
            "fp8": _f(
                459,
                TPU_DOC.format(v="v5p"),
                note="the documentation's FP8 figure: no faster than bf16",
            ),
            "int8": _f(918, TPU_DOC.format(v="v5p")),
        },
        memory_bw=_f(2765, TPU_DOC.format(v="v5p")),
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
            "bf16": _f(918, TPU_DOC.format(v="v6e")),
            "fp8": _f(
                918,
                TPU_DOC.format(v="v6e"),
                note="the documentation's FP8 figure: no faster than bf16",
            ),
            "int8": _f(1836, TPU_DOC.format(v="v6e")),
        },
        memory_bw=_f(1640, TPU_DOC.format(v="v6e")),
        memory_gib=32,
        patterns=(r"tpu ?v6 ?lite", r"tpu ?v6e", r"trillium"),
    ),
)

TABLE = TABLE + tuple(DeviceSpec(**entry) for entry in RECENT)
BY_KEY = {s.key: s for s in TABLE}
_GENERIC = re.compile(
    r"^(amd radeon graphics|radeon graphics|gpu|graphics device|"
    r"nvidia graphics device|unknown|)$"
)


def normalize_name(name: str | None) -> str:
    """Lower case, single spaces, vendor prefixes kept (patterns do not depend on them)."""
    return re.sub(r"\s+", " ", str(name or "")).strip().lower()


def _name_candidates(norm: str) -> list[DeviceSpec]:
    out = []
    for spec in TABLE:
        if any(re.search(p, norm) for p in spec.patterns) and not any(
            re.search(x, norm) for x in spec.excludes
        ):
            out.append(spec)
    return out


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def _same_peaks(a: DeviceSpec, b: DeviceSpec, tol: float = 0.01) -> bool:
    if set(a.compute) != set(b.compute):
        return False
    return (
        all(_rel(a.compute[p].value, b.compute[p].value) <= tol for p in a.compute)
        and _rel(a.memory_bw.value, b.memory_bw.value) <= tol
    )


def _narrow(
    cands: list[DeviceSpec], compute_capability, memory_bytes, sm_count, clock_khz, strict: bool
) -> list[DeviceSpec]:
    """Keep the candidates that agree with what the runtime reported.

    strict: every reported quantity the entry has must agree (signature matching); otherwise a
    quantity only breaks ties (a name match with an odd memory size still stands). The clock
    only ever breaks ties.
    """

    def keep(pred):
        nonlocal cands
        kept = [s for s in cands if pred(s)]
        if kept or strict:
            cands = kept

    if compute_capability is not None:  # a hard fact: a contradicting entry is never right
        cc = tuple(int(x) for x in compute_capability)
        cands = [s for s in cands if s.compute_capability is None or s.compute_capability == cc]
    if sm_count:
        keep(lambda s: s.sm_count is None or s.sm_count == int(sm_count))
    if memory_bytes:
        gib = memory_bytes / GIB
        keep(lambda s: s.memory_gib is None or _rel(gib, s.memory_gib) < 0.12)
    if clock_khz and len(cands) > 1:  # clocks can be set lower or higher: a tie-breaker only
        mhz = clock_khz / 1000.0
        kept = [s for s in cands if s.clock_mhz is None or _rel(mhz, s.clock_mhz) < 0.03]
        cands = kept or cands
    return cands


def lookup(
    name: str | None,
    compute_capability=None,
    memory_bytes: float | None = None,
    *,
    sm_count: int | None = None,
    clock_khz: float | None = None,
) -> DeviceSpec | None:
    """The table entry for a device, or None when it is not in the table.

    name: what the profile calls the device; compute_capability: (major, minor);
    memory_bytes: device memory in bytes (tells 40 GB from 80 GB parts); sm_count: SMs or CUs
    (tells an MI250 GCD from an MI250X GCD); clock_khz: SM clock (tells V100 SXM2 from PCIe).
    When the name is generic or empty, the entry is found by hardware signature, which needs at
    least the compute capability and the SM count. The returned spec's `match_note` says when
    the match was by signature or left alternatives open. MIG slices ("... MIG 1g.10gb") are
    never matched: their peaks are a fraction of the table's.
    """
    norm = normalize_name(name)
    if re.search(r"\bmig\b", norm):
        return None  # a MIG slice has a fraction of the SMs and memory: not a table device
    by_signature = False
    cands = _name_candidates(norm) if not _GENERIC.match(norm) else []
    if cands:
        cands = _narrow(cands, compute_capability, memory_bytes, sm_count, clock_khz, False)
    elif compute_capability is not None and sm_count:
        by_signature = True
        cands = _narrow(
            [s for s in TABLE if s.kind == "gpu"],
            compute_capability,
            memory_bytes,
            sm_count,
            clock_khz,
            True,
        )
    if not cands:
        return None
    best = cands[0]
    notes = []
    if by_signature:
        notes.append(
            f"matched {name or 'an unnamed device'!r} by compute capability, "
            "SM count"
            + (", memory size" if memory_bytes else "")
            + (" and clock" if clock_khz else "")
        )
    if len(cands) > 1:
        others = ", ".join(s.name for s in cands[1:])
        same = all(_same_peaks(s, best) for s in cands[1:])
        notes.append(
            f"could also be {others}"
            + (" (same peaks)" if same else "; the peaks shown are the first one's")
        )
    if notes:
        best = dataclasses.replace(best, match_note="; ".join(notes))
    return best


def table_as_json() -> list[dict]:
    return [s.to_json() for s in TABLE]
