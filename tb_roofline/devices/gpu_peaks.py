"""GPU peaks: derived from the device capabilities a profile records, checked against data sheets.

XLA GPU profiles (JAX, TensorFlow) record per GPU plane `clock_rate` (kHz, SM clock),
`core_count` (SMs or CUs), `memory_bandwidth` (B/s), `memory_size`, `compute_cap_major/minor`
and, for AMD, `gpu_device_name` (the gfx name). From these:

    peak FLOP/s (precision p) = SMs x clock x FLOP per clock per SM for p on this architecture
    HBM GB/s                  = memory_bandwidth / 1e9
    L1/shared GB/s            = SMs x clock x bytes per clock per SM (`onchip.py`)

Each derived number is compared with the data-sheet table (`device_table`); both are kept
(`GpuPeaks.checks`) and a disagreement over 10% becomes a warning diagnostic.

PyTorch (Kineto) traces record no clock: `device_from_kineto_properties` takes the data sheet
via the table, and an unknown device gets no compute peaks (a "peaks unknown" state) rather
than a guess.

`ceiling_precision(dtype, is_matmul, device)` says which of a device's ceilings an op belongs
under (an f32 dot under TF32 where the device has it, bf16 under the bf16 tensor roof, ...).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tb_roofline.devices.datasheets import (
    DEFAULT_ORDER,
    PRECISIONS,
    DeviceSpec,
    lookup,
    memory_display_name,
)
from tb_roofline.devices.host_links import NAME as HOST_LINK_NAME
from tb_roofline.devices.host_links import host_link
from tb_roofline.devices.interconnect import interconnect, link_name
from tb_roofline.devices.onchip import AMD_ARCH_OF_SPEC, PerClock, per_clock, shared_gbs
from tb_roofline.devices.sources import CDNA4_WP
from tb_roofline.devices.spec import (
    KERNEL_PREFIX,
    ComputePeak,
    DeviceInfo,
    Fallback,
    MemoryPeak,
    plain_precision,
    split_kernel_type,
)
from tb_roofline.diagnostics import Diagnostic

MISMATCH_TOLERANCE = 0.10  # derived vs data sheet, relative
SHARED_BYTES_PER_CLOCK = 128  # NVIDIA: 32 banks x 4 B per clock per SM (see onchip.py)
PEAKS_UNKNOWN_HINT = (
    "write a device file (roofline_device.json next to the profile, or the "
    "path in TB_ROOFLINE_DEVICE_FILE) to give its peaks"
)


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
NVIDIA_ARCHS = {
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
_AMD_ARCH_OF_SPEC = AMD_ARCH_OF_SPEC


@dataclasses.dataclass
class PeakCheck:
    """A derived peak next to the data sheet's, for one precision or memory."""

    resource: str  # a precision, or a memory id (hbm, shared, l2)
    unit: str  # GFLOP/s | GB/s
    derived: float | None
    datasheet: float | None
    datasheet_source: str = ""

    @property
    def relative_difference(self) -> float | None:
        if not self.derived or not self.datasheet:
            return None
        return self.derived / self.datasheet - 1.0

    @property
    def agrees(self) -> bool | None:
        d = self.relative_difference
        return None if d is None else abs(d) <= MISMATCH_TOLERANCE

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"relative_difference": self.relative_difference}


@dataclasses.dataclass
class GpuPeaks:
    device: DeviceInfo
    spec: DeviceSpec | None = None
    arch: ArchRates | None = None
    checks: list = dataclasses.field(default_factory=list)  # PeakCheck
    diagnostics: list = dataclasses.field(default_factory=list)  # op_table.Diagnostic


def _num(stats: dict, key: str) -> float:
    v = stats.get(key)
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    return 0.0


def _capability(major, minor, types) -> tuple | None:
    """(major, minor) compute capability, or None when the profile's values are not numbers
    (a corrupt stat is an unknown capability, not a crash)."""
    if not isinstance(major, types) or not major:
        return None
    minor = minor if isinstance(minor, types) else 0
    try:
        return int(major), int(minor or 0)
    except (ValueError, OverflowError):  # NaN, infinity
        return None


def _gfx(name) -> str:
    name = str(name or "").strip().lower()
    return name.split(":")[0] if name.startswith("gfx") else ""


def _is_amd(vendor: str, name: str, gfx: str) -> bool:
    text = f"{vendor} {name}".lower()
    return (
        bool(gfx)
        or "amd" in text
        or "advanced micro" in text
        or "radeon" in text
        or "instinct" in text
    )


def arch_for(
    compute_capability=None,
    gfx_name: str | None = None,
    *,
    amd: bool = False,
    spec: DeviceSpec | None = None,
) -> ArchRates | None:
    """The per-SM rates of an architecture, or None when it is not known."""
    gfx = _gfx(gfx_name)
    if gfx:
        return AMD_ARCHS.get(gfx)
    if amd:
        key = _AMD_ARCH_OF_SPEC.get(spec.key) if spec is not None else None
        return AMD_ARCHS.get(key) if key else None
    if compute_capability is None:
        return None
    return NVIDIA_ARCHS.get(tuple(int(x) for x in compute_capability))


def order_compute(peaks: list[ComputePeak]) -> list[ComputePeak]:
    """Default ceiling first (the headline ML precision), then the others in PRECISIONS order."""
    by = {c.precision: c for c in peaks}
    default = next((p for p in DEFAULT_ORDER if p in by), None)
    rest = [by[p] for p in PRECISIONS if p in by and p != default]
    extra = [c for c in peaks if c.precision not in PRECISIONS and c.precision != default]
    return ([by[default]] if default else []) + rest + extra


def _compare(checks, diagnostics, resource, unit, derived, spec_value, source, what):
    check = PeakCheck(resource, unit, derived, spec_value, source)
    checks.append(check)
    if check.agrees is False:
        diagnostics.append(
            Diagnostic(
                "warning",
                "peak_datasheet_mismatch",
                f"{what} derived from the profile ({derived:,.0f} {unit}) differs from the data "
                f"sheet ({spec_value:,.0f} {unit}; {source}) by "
                f"{check.relative_difference * 100:+.1f}%; the profile's value is used unless the "
                "profile's own ops beat it",
            )
        )


@dataclasses.dataclass
class _Gpu:
    """What a GPU plane's stats say of the device, and the table rows they match."""

    name: str
    vendor: str
    gfx: str
    amd: bool
    cc: tuple | None
    sms: int
    clock_khz: float
    bandwidth: float  # B/s, 0 when the profile has none
    spec: DeviceSpec | None
    arch: object  # the architecture's per-SM rates (arch_for), or None

    @property
    def hz(self) -> float:
        return self.clock_khz * 1e3


def derive_gpu_peaks(stats: dict, num_gpus: int) -> GpuPeaks:
    """Peaks of one GPU plane (`PlaneStats.as_dict(plane.stats)`), with checks and notes."""
    gpu = _identify(stats)
    checks: list[PeakCheck] = []
    diags: list[Diagnostic] = []
    compute, derived = _compute_peaks(gpu, stats, checks, diags)
    memories = _memory_peaks(gpu, stats, checks, diags)
    label = _label(gpu)
    device = DeviceInfo(
        type=label, kind="gpu", num_cores=num_gpus, compute=compute, memories=memories
    )
    diags += _notes(gpu, bool(derived), bool(compute), label)
    return GpuPeaks(device, gpu.spec, gpu.arch, checks, diags)


def _identify(stats: dict) -> _Gpu:
    clock_khz = _num(stats, "clock_rate")
    sms = int(_num(stats, "core_count"))
    memory_bytes = _num(stats, "memory_size") or None
    cc = _capability(stats.get("compute_cap_major"), stats.get("compute_cap_minor"), (int, float))
    name = str(stats.get("gpu_device_name") or "")
    vendor = str(stats.get("device_vendor") or "")
    gfx = _gfx(name)
    amd = _is_amd(vendor, name, gfx)
    spec = lookup(
        name if not gfx else "", cc, memory_bytes, sm_count=sms or None, clock_khz=clock_khz or None
    )
    if spec is not None and (spec.vendor == "amd") != amd:
        spec = None  # a Hopper (9.0) must never match an AMD signature, nor the reverse
    if spec is None and gfx:
        spec = _amd_spec_by_gfx(gfx, sms, memory_bytes, clock_khz)
    arch = arch_for(cc, gfx, amd=amd, spec=spec)
    return _Gpu(
        name, vendor, gfx, amd, cc, sms, clock_khz, _num(stats, "memory_bandwidth"), spec, arch
    )


def _compute_peaks(gpu: _Gpu, stats: dict, checks: list, diags: list):
    """(compute ceilings, those derived from the clock and SMs by precision): the derived
    figure wins, the data sheet's is its fallback and its check."""
    spec, arch = gpu.spec, gpu.arch
    compute: list[ComputePeak] = []
    derived = {}
    if arch is not None and gpu.sms > 0 and gpu.hz > 0:
        derived = {p: gpu.sms * gpu.hz * r / 1e9 for p, r in arch.rates.items()}
    for p in PRECISIONS:
        sheet = spec.compute.get(p) if spec is not None else None
        if p in derived:
            compute.append(
                ComputePeak(
                    p,
                    derived[p],
                    "profile",
                    fallback=Fallback(sheet.value * 1000.0, sheet.source)
                    if sheet is not None
                    else None,
                )
            )
            if sheet is not None:
                _compare(
                    checks,
                    diags,
                    p,
                    "GFLOP/s",
                    derived[p],
                    sheet.value * 1000.0,
                    sheet.source,
                    f"{p} peak",
                )
        elif sheet is not None:
            compute.append(ComputePeak(p, sheet.value * 1000.0, "datasheet"))
    compute = order_compute(compute)
    override = _num(stats, "peak_teraflops_per_second")
    if override > 0:
        if compute:
            old = compute[0]
            compute[0] = ComputePeak(old.precision, override * 1000.0, "profile")
            diags.append(
                Diagnostic(
                    "info",
                    "peak_override",
                    f"the profile sets peak_teraflops_per_second={override:g}: "
                    f"used for the {old.precision} ceiling instead of "
                    f"{old.gflops / 1000:,.1f} TFLOP/s",
                )
            )
        else:
            compute = [ComputePeak("default", override * 1000.0, "profile")]
    return compute, derived


def _memory_peaks(gpu: _Gpu, stats: dict, checks: list, diags: list) -> list[MemoryPeak]:
    """HBM (the profile's, checked against the sheet), L1/shared, L2, host link, links."""
    spec, arch = gpu.spec, gpu.arch
    memories: list[MemoryPeak] = []
    mem_name = memory_display_name(spec.memory_type) if spec is not None else "HBM"
    if gpu.bandwidth > 0:
        memories.append(
            MemoryPeak(
                "hbm",
                mem_name,
                gpu.bandwidth / 1e9,
                "profile",
                fallback=Fallback(spec.memory_bw.value, spec.memory_bw.source)
                if spec is not None
                else None,
            )
        )
        if spec is not None:
            _compare(
                checks,
                diags,
                "hbm",
                "GB/s",
                gpu.bandwidth / 1e9,
                spec.memory_bw.value,
                spec.memory_bw.source,
                "memory bandwidth",
            )
    elif spec is not None:
        memories.append(MemoryPeak("hbm", mem_name, spec.memory_bw.value, "datasheet"))
    sram = _num(stats, "peak_sram_rd_bw_gigabytes_per_second")
    if sram > 0:
        memories.append(MemoryPeak("shared", "L1/Shared", sram, "profile"))
    elif arch is not None and arch.shared_bytes_per_clock and gpu.sms > 0 and gpu.hz > 0:
        rate = per_clock(
            "amd" if gpu.amd else "nvidia",
            gpu.gfx or _AMD_ARCH_OF_SPEC.get(spec.key if spec is not None else "", ""),
        ) or PerClock(arch.shared_bytes_per_clock, arch.source, arch.shared_uncertain)
        gbs, note = shared_gbs(gpu.sms, gpu.clock_khz / 1e3, rate)
        memories.append(MemoryPeak("shared", "L1/Shared", gbs, "profile", note=note))
    if spec is None:
        return memories
    if spec.l2_bw is not None:
        memories.append(MemoryPeak("l2", "L2", spec.l2_bw.value, "datasheet"))
    link = host_link(spec.key)
    if link is not None:
        memories.append(MemoryPeak("host", HOST_LINK_NAME, link.value, "datasheet", note=link.note))
    peer = interconnect(spec.key)
    if peer is not None:
        memories.append(
            MemoryPeak(
                "interconnect",
                link_name(spec.key),
                peer.value,
                "datasheet",
                note=f"{peer.source}; {peer.note}".rstrip("; "),
            )
        )
    return memories


def _label(gpu: _Gpu) -> str:
    if gpu.spec is not None:
        return gpu.spec.name
    label = gpu.name or gpu.vendor or "GPU"
    cc = gpu.cc
    bits = [
        f"compute capability {cc[0]}.{cc[1]}" if cc else "",
        f"{gpu.sms} SMs" if gpu.sms else "",
        f"{gpu.clock_khz / 1e3:.0f} MHz" if gpu.clock_khz else "",
    ]
    return label + (" (" + ", ".join(b for b in bits if b) + ")" if any(bits) else "")


def _notes(gpu: _Gpu, derived: bool, any_compute: bool, label: str) -> list[Diagnostic]:
    spec, arch = gpu.spec, gpu.arch
    diags = []
    if spec is not None and spec.match_note:
        diags.append(Diagnostic("info", "device_match", f"{spec.name}: {spec.match_note}"))
    if spec is not None and spec.uncertain:
        diags.append(
            Diagnostic(
                "info",
                "device_uncertain",
                f"the data-sheet entry for {spec.name} is provisional: {spec.notes}",
            )
        )
    if arch is not None and arch.uncertain and derived:
        diags.append(
            Diagnostic(
                "info",
                "arch_uncertain",
                f"{arch.name} per-SM rates are provisional"
                + (f" ({arch.note})" if arch.note else ""),
            )
        )
    if not any_compute:
        diags.append(
            Diagnostic(
                "warning",
                "peaks_unknown",
                f"compute peaks unknown for {label}: neither its architecture "
                f"nor the device is in the table; {PEAKS_UNKNOWN_HINT}",
            )
        )
    return diags


def _amd_spec_by_gfx(gfx: str, sms: int, memory_bytes, clock_khz=None) -> DeviceSpec | None:
    cc = {
        "gfx908": (9, 0),
        "gfx90a": (9, 0),
        "gfx940": (9, 4),
        "gfx941": (9, 4),
        "gfx942": (9, 4),
        "gfx950": (9, 5),
    }.get(gfx)
    if cc is None or not sms:
        return None
    return lookup("", cc, memory_bytes, sm_count=sms, clock_khz=clock_khz or None)


def gpu_device_from_plane_stats(stats: dict, num_gpus: int) -> DeviceInfo:
    """DeviceInfo of an XLA GPU profile (one plane's stats; all GPUs of a host are alike)."""
    return derive_gpu_peaks(stats, num_gpus).device


# ----------------------------------------------------------------------------- Kineto


def kineto_device_peaks(props: dict, num_cores: int = 1) -> GpuPeaks:
    """Data-sheet peaks for one Kineto `deviceProperties` entry (no clock: nothing to derive)."""
    name = str(props.get("name") or "")
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    cc = _capability(major, minor, (int,))
    sms = props.get("numSms") if isinstance(props.get("numSms"), int) else None
    memory = (
        props.get("totalGlobalMem")
        if isinstance(props.get("totalGlobalMem"), (int, float))
        else None
    )
    amd = _is_amd("", name, "") or props.get("warpSize") == 64
    spec = lookup(name, cc, memory, sm_count=sms)
    if spec is not None and (spec.vendor == "amd") != amd:
        spec = None
    diags: list[Diagnostic] = []
    if spec is None:
        bits = [
            f"compute capability {cc[0]}.{cc[1]}" if cc else "",
            f"{sms} {'CUs' if amd else 'SMs'}" if sms else "",
            f"{memory / 2**30:.0f} GiB" if memory else "",
        ]
        detail = ", ".join(b for b in bits if b)
        label = (name or "GPU") + (f" ({detail})" if detail else "")
        diags.append(
            Diagnostic(
                "warning",
                "peaks_unknown",
                f"peaks unknown for {label}: it is not in the data-sheet table and PyTorch traces "
                f"carry no clock to derive them from; {PEAKS_UNKNOWN_HINT}",
            )
        )
        return GpuPeaks(
            DeviceInfo(type=label, kind="gpu", num_cores=num_cores), None, None, [], diags
        )
    device = spec.to_device_info(num_cores)
    if spec.match_note:
        diags.append(Diagnostic("info", "device_match", f"{spec.name}: {spec.match_note}"))
    if spec.uncertain:
        diags.append(
            Diagnostic(
                "info",
                "device_uncertain",
                f"the data-sheet entry for {spec.name} is provisional: {spec.notes}",
            )
        )
    return GpuPeaks(device, spec, None, [], diags)


def device_from_kineto_properties(props: dict, num_cores: int = 1) -> DeviceInfo:
    """DeviceInfo for a Kineto `deviceProperties` entry; unknown devices get no compute peaks."""
    return kineto_device_peaks(props, num_cores).device


# ----------------------------------------------------------------------------- ceilings

_MATMUL_CHAINS = {
    "fp4": ("fp4", "fp6", "fp8", "fp16", "bf16"),  # no fp4 units: converted up
    "fp6": ("fp6", "fp8", "fp16", "bf16"),
    "fp64": ("fp64_tc", "fp64"),
    "fp32": ("tf32", "fp32_tc", "fp32"),
    "tf32": ("tf32", "fp32_tc", "fp32"),
    "bf16": ("bf16", "fp32_tc", "fp32"),  # no bf16 units (V100, T4): XLA computes in f32
    "fp16": ("fp16", "fp32_tc", "fp32"),
    "fp8": ("fp8", "fp16", "bf16"),  # no fp8 units: converted to 16-bit
    "int8": ("int8",),
}
_VECTOR_CHAINS = {
    "fp64": ("fp64",),
    "fp32": ("fp32",),
    "tf32": ("fp32",),
    # Elementwise 16-bit math runs on the vector units (packed, up to 2x the fp32 rate on some
    # parts); the fp32 roof is the closest ceiling the tables carry.
    "bf16": ("fp32",),
    "fp16": ("fp32",),
    "fp8": ("fp32",),
    "int8": ("fp32",),
    "fp6": ("fp32",),
    "fp4": ("fp32",),
}
_DTYPE = {
    "f64": "fp64",
    "float64": "fp64",
    "double": "fp64",
    "fp64": "fp64",
    "f32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "c10::bfloat16": "bf16",
    "f16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "c10::half": "fp16",
    "fp16": "fp16",
    "s8": "int8",
    "u8": "int8",
    "int8": "int8",
    "uint8": "int8",
    "signed char": "int8",
    "unsigned char": "int8",
    "fp8": "fp8",
    "fp6": "fp6",
    "fp4": "fp4",
}


def dtype_precision(dtype: str) -> str:
    """HLO (`f32`, `bf16`, `f8e4m3fn`), numpy and PyTorch (`c10::Half`) spellings -> precision."""
    key = str(dtype or "").strip().lower()
    if key.startswith(("f8", "float8", "c10::float8")):
        return "fp8"
    if key.startswith(("f6e", "float6_")):
        return "fp6"
    if key.startswith(("f4e", "float4_")):
        return "fp4"
    return _DTYPE.get(key, "")


# What a kernel name says ran (readers set `dtype` to "kernel:<this>"): the exact unit, so f32
# inputs on TF32 tensor cores go under the TF32 roof and SIMT sgemm under the FP32 one.
_KERNEL_CHAINS = {
    "tf32": ("tf32", "fp32_tc", "fp32"),
    "fp32": ("fp32",),
    "fp32_tc": ("fp32_tc", "fp32"),
    "fp16": ("fp16", "fp32_tc", "fp32"),
    "bf16": ("bf16", "fp16", "fp32_tc", "fp32"),
    "fp8": ("fp8", "fp16", "bf16"),
    "int8": ("int8",),
    "fp64": ("fp64",),
    "fp6": ("fp6", "fp8", "fp16", "bf16"),
    "fp4": ("fp4", "fp6", "fp8", "fp16", "bf16"),
    "fp64_tc": ("fp64_tc", "fp64"),
}


def ceiling_precision(
    dtype: str, is_matmul: bool, device: DeviceInfo, allow_tf32: bool = True
) -> str:
    """The precision of the ceiling an op belongs under on this device, '' for the default.

    is_matmul: dots and convolutions (tensor / matrix cores); everything else uses the vector
    units. allow_tf32: f32 dots whose kernels are not known may run on TF32 tensor cores (XLA's
    default on Ampere and later; PyTorch's only with `allow_tf32`). A `kernel:` dtype names the
    unit that ran and is taken as it is.
    """
    if dtype.startswith(KERNEL_PREFIX):
        chain = _KERNEL_CHAINS.get(split_kernel_type(dtype)[0], ())
    else:
        p = dtype_precision(dtype)
        if not p:
            return ""
        chain = (_MATMUL_CHAINS if is_matmul else _VECTOR_CHAINS).get(p, ())
        if not allow_tf32:
            chain = tuple(c for c in chain if c != "tf32")
    have = {c.precision for c in device.compute if c.gflops > 0}
    return next((c for c in chain if c in have), "")


_MATMUL_WORDS = ("conv", "dot", "matmul", "gemm", "attention", "einsum", "linear")


def apply_ceilings(table, device: DeviceInfo, allow_tf32: bool = True) -> None:
    """Set each op's `precision` (a key column of the op table) to the ceiling it belongs under
    on this device (tensor-core roofs for dots and convolutions, vector roofs for the rest, or
    exactly the unit its kernel names); ops whose precision has no ceiling of its own keep their
    data type and fall under the default roof. The data type itself stays in `dtype`, so a later
    device (a device file) can place the ops again."""
    keys = table.keys
    if not len(keys["precision"]):
        return
    dtypes = keys["dtype"]
    unset = np.flatnonzero(dtypes == "")  # first call: the reader's precision is the data type
    dtypes[unset] = keys["precision"][unset]
    if not device.compute:
        keys["precision"] = np.array([plain_precision(d) for d in dtypes.tolist()], dtype=object)
        return
    cache: dict = {}
    out = []
    for dtype, category in zip(dtypes.tolist(), keys["category"].tolist()):
        key = (dtype, category)
        if key not in cache:
            matmul = any(w in category.lower() for w in _MATMUL_WORDS)
            cache[key] = ceiling_precision(dtype, matmul, device, allow_tf32) or plain_precision(
                dtype
            )
        out.append(cache[key])
    out_arr = np.empty(len(out), dtype=object)
    out_arr[:] = out
    keys["precision"] = out_arr
