"""The XLA GPU/CPU reader (kept at this import path): the package `readers/xla_gpu_cpu/`."""

from tb_roofline.readers.xla_gpu_cpu import read_gpu_cpu_xspace
from tb_roofline.readers.xla_gpu_cpu.costing import UNATTRIBUTED
from tb_roofline.readers.xla_gpu_cpu.events import DERIVED_LINES, GPU_PLANE, HOST_PLANE

__all__ = ["read_gpu_cpu_xspace", "UNATTRIBUTED", "DERIVED_LINES", "GPU_PLANE", "HOST_PLANE"]
