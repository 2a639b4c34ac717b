"""Device peaks, each with the place it came from.

Peaks are per core (a TPU TensorCore, a GPU, a CPU) because rates are per core too. Units are
the ones the UI shows: GFLOP/s for compute, GB/s (1e9 B/s) stored and GiB/s (2^30 B/s) derived.
"""

from __future__ import annotations

import dataclasses
import math

from tb_roofline.devices.precision import normalize_precision

GIB_PER_GB = 1e9 / (1 << 30)  # 1 GB/s = 0.931... GiB/s (XProf divides GB/s by 1.073741824)


def _finite(value):
    """JSON has no NaN or infinity: an unusable number is an unknown one."""
    return value if value is not None and math.isfinite(value) else None


@dataclasses.dataclass(frozen=True)
class Fallback:
    """A data-sheet value (GFLOP/s or GB/s) and where it comes from."""

    value: float
    source: str


@dataclasses.dataclass
class ComputePeak:
    precision: str  # "default" when the profile gives one figure for all precisions
    gflops: float
    source: str  # profile | datasheet | measured | user
    # A sourced data-sheet figure kept beside a profile-derived one: the model takes it when the
    # profile's own ops beat the profile's figure (then that figure is the one in doubt).
    fallback: Fallback | None = None
    note: str = ""  # why this figure is the one used, when it is not the obvious one


@dataclasses.dataclass
class MemoryPeak:
    id: str  # hbm, cmem_read, cmem_write, vmem_read, vmem_write, host, shared, l2, interconnect
    name: str
    gbs: float
    source: str
    fallback: Fallback | None = None
    note: str = ""
    # Links between devices: how they reach a group's peers (devices/interconnect.LinkTopology).
    topology: object = None

    @property
    def gibs(self) -> float:
        return self.gbs * GIB_PER_GB


# A megacore chip (TPU v4, v5p) is two TensorCores acting as one device.
TENSOR_CORES_PER_MEGACORE_CHIP = 2


@dataclasses.dataclass
class DeviceInfo:
    type: str = "Unknown"
    kind: str = "unknown"  # tpu | gpu | cpu | unknown
    num_cores: int = 0
    num_hosts: int = 1
    megacore: bool = False
    has_cmem: bool = False
    has_merged_vmem: bool = False
    time_scale_multiplier: float | None = None
    compute: list[ComputePeak] = dataclasses.field(default_factory=list)
    memories: list[MemoryPeak] = dataclasses.field(default_factory=list)

    @property
    def peak_gflops(self) -> float:
        """The compute roof used for bound-by and efficiency (the default precision's)."""
        return self.compute[0].gflops if self.compute else 0.0

    def peak_for(self, precision: str) -> float:
        """The compute roof for work of this precision: its own ceiling when the device has one,
        else the default (first) ceiling. 0 when no compute peak is known."""
        wanted = normalize_precision(precision)
        if wanted:
            for c in self.compute:
                if normalize_precision(c.precision) == wanted:
                    return c.gflops
        return self.peak_gflops

    @property
    def peaks_known(self) -> bool:
        return self.peak_gflops > 0

    def memory(self, memory_id: str) -> MemoryPeak | None:
        for m in self.memories:
            if m.id == memory_id:
                return m
        return None

    @property
    def unit(self) -> str:
        """What one core of the per-core figures is: a GPU, a TPU TensorCore (one
        `/device:TPU:N` plane, whose peaks the profile states, megacore or not), else a core."""
        return {"gpu": "GPU", "tpu": "TensorCore"}.get(self.kind, "core")

    def per_chip(self) -> dict | None:
        """A megacore TPU's figures per chip: its two TensorCores run one program as one JAX
        device, the profile keeps a plane and peaks per TensorCore, and the data sheet gives
        the chip's compute and HBM bandwidth, twice those (v4: 2 x 137.5 = 275 TFLOP/s, 2 x 600
        = 1,200 GB/s). Other memories (CMEM, VMEM) are not summed: no document gives them per
        chip. None for any other device."""
        if self.kind != "tpu" or not self.megacore:
            return None
        n = TENSOR_CORES_PER_MEGACORE_CHIP
        hbm = self.memory("hbm")
        return {
            "tensor_cores": n,
            "compute": [
                {"precision": c.precision, "peak_gflops": _finite(n * c.gflops)}
                for c in self.compute
            ],
            "hbm_gbs": _finite(n * hbm.gbs) if hbm is not None and hbm.gbs > 0 else None,
        }

    def to_json(self) -> dict:
        return {
            "type": self.type,
            "kind": self.kind,
            "unit": self.unit,
            "num_cores": self.num_cores,
            "num_hosts": self.num_hosts,
            "megacore": self.megacore,
            "per_chip": self.per_chip(),
            "has_cmem": self.has_cmem,
            "has_merged_vmem": self.has_merged_vmem,
            "time_scale_multiplier": self.time_scale_multiplier,
            "compute": [
                {
                    "precision": c.precision,
                    "peak_gflops": _finite(c.gflops),
                    "source": c.source,
                    "note": c.note,
                }
                for c in self.compute
            ],
            "memories": [
                {
                    "id": m.id,
                    "name": m.name,
                    "peak_gbs": _finite(m.gbs),
                    "peak_gibs": _finite(m.gibs),
                    "ridge_point": _finite(self.peak_gflops / m.gbs) if m.gbs > 0 else None,
                    "source": m.source,
                    "note": m.note,
                }
                for m in self.memories
            ],
            "peaks_known": self.peaks_known,
        }

    @staticmethod
    def merge(devices: list[DeviceInfo]) -> DeviceInfo:
        """Combine the hosts of one session: cores add up, flags are kept (XProf drops them)."""
        devices = [d for d in devices if d is not None]
        if not devices:
            return DeviceInfo()
        first = devices[0]
        merged = dataclasses.replace(
            first, num_cores=sum(d.num_cores for d in devices), num_hosts=len(devices)
        )
        merged.megacore = any(d.megacore for d in devices)
        merged.has_cmem = any(d.has_cmem for d in devices)
        merged.has_merged_vmem = any(d.has_merged_vmem for d in devices)
        return merged
