"""GPU peaks: derived from the device capabilities a profile records, checked against data sheets.

XLA GPU profiles (JAX, TensorFlow) record per GPU plane `clock_rate` (kHz, SM clock),
`core_count` (SMs or CUs), `memory_bandwidth` (B/s), `memory_size`, `compute_cap_major/minor`
and, for AMD, `gpu_device_name` (the gfx name). From these:

    peak FLOP/s (precision p) = SMs x clock x FLOP per clock per SM for p on this architecture
    HBM GB/s                  = memory_bandwidth / 1e9
    L1/shared GB/s            = SMs x clock x bytes per clock per SM (`onchip.py`)

The per-SM rates are in `gpu_arch_rates.py`. Each derived number is compared with the
data-sheet table (`datasheets.py`); both are kept (`GpuPeaks.checks`) and a disagreement over
10% becomes a warning diagnostic.

PyTorch (Kineto) traces record no clock: `device_from_kineto_properties` takes the data sheet
via the table, and an unknown device gets no compute peaks (a "peaks unknown" state) rather
than a guess.

Which of these ceilings an op belongs under is `precision_ceilings.py`'s.
"""

from __future__ import annotations

import dataclasses
import math

from tb_roofline.devices.datasheet_entry import (
    DEFAULT_ORDER,
    DeviceSpec,
    memory_display_name,
)
from tb_roofline.devices.datasheets import lookup
from tb_roofline.devices.gpu_arch_rates import ArchRates, arch_for, gfx_of
from tb_roofline.devices.host_links import NAME as HOST_LINK_NAME
from tb_roofline.devices.host_links import host_link
from tb_roofline.devices.interconnect import interconnect, link_name, topology
from tb_roofline.devices.onchip import AMD_ARCH_OF_SPEC, PerClock, per_clock, shared_gbs
from tb_roofline.devices.precision import CEILING_PRECISIONS
from tb_roofline.devices.spec import ComputePeak, DeviceInfo, Fallback, MemoryPeak
from tb_roofline.diagnostics import Diagnostic

MISMATCH_TOLERANCE = 0.10  # derived vs data sheet, relative
PEAKS_UNKNOWN_HINT = (
    "write a device file (roofline_device.json next to the profile, or the "
    "path in TB_ROOFLINE_DEVICE_FILE) to give its peaks"
)


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


def _is_amd(vendor: str, name: str, gfx: str) -> bool:
    text = f"{vendor} {name}".lower()
    return (
        bool(gfx)
        or "amd" in text
        or "advanced micro" in text
        or "radeon" in text
        or "instinct" in text
    )


def order_compute(peaks: list[ComputePeak]) -> list[ComputePeak]:
    """Default ceiling first (the headline ML precision), then the others in
    CEILING_PRECISIONS order."""
    by = {c.precision: c for c in peaks}
    default = next((p for p in DEFAULT_ORDER if p in by), None)
    rest = [by[p] for p in CEILING_PRECISIONS if p in by and p != default]
    extra = [c for c in peaks if c.precision not in CEILING_PRECISIONS and c.precision != default]
    return ([by[default]] if default else []) + rest + extra


def _compare(checks, diagnostics, resource, unit, derived, spec_value, source, what):
    check = PeakCheck(resource, unit, derived, spec_value, source)
    checks.append(check)
    difference = check.relative_difference
    if check.agrees is False and difference is not None:
        diagnostics.append(
            Diagnostic(
                "warning",
                "peak_datasheet_mismatch",
                f"{what} derived from the profile ({derived:,.0f} {unit}) differs from the data "
                f"sheet ({spec_value:,.0f} {unit}; {source}) by "
                f"{difference * 100:+.1f}%; the profile's value is used unless the "
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
    arch: ArchRates | None  # the architecture's per-SM rates (arch_for)

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
    gfx = gfx_of(name)
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
    for p in CEILING_PRECISIONS:
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
            gpu.gfx or AMD_ARCH_OF_SPEC.get(spec.key if spec is not None else "", ""),
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
                topology=topology(spec.key),
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
