"""XSpace files to `ProfileData`: TPU TensorCore planes through the TPU reader, everything else
(XLA on GPU and CPU) through the HLO-costed reader."""
from __future__ import annotations

import os

from tb_roofline import storage
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError
from tb_roofline.model.op_table import ProfileData
from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.tpu import TENSOR_CORE_PLANE, fast_tpu_planes, read_tpu_planes
from tb_roofline.readers.tpu_file import convert_plan, plan_buffer, read_tpu_file
from tb_roofline.readers.xla_host_device import read_gpu_cpu_xspace
from tb_roofline.readers.xplane import DAMAGE, parse_xspace, read_profile_bytes


def read_xspace(space: xplane_pb2.XSpace, host: str, progress=None) -> ProfileData:
    if not any(TENSOR_CORE_PLANE.match(p.name) for p in space.planes):
        return read_gpu_cpu_xspace(space, host, progress=progress)
    return read_tpu_planes(list(space.planes), [p.name for p in space.planes], host, progress)


def read_xspace_file(path: str, host: str, max_bytes: int | None = None,
                     progress=None) -> ProfileData:
    if progress:
        progress(0, 1)
    raw = young = None
    data = None
    try:  # TPU files plane by plane from the wire format (readers/tpu_file.py)
        if storage.is_remote(path):  # one request: the whole file, then its planes
            raw, young = read_profile_bytes(path, max_bytes)
            plan = plan_buffer(path, host, raw, (), young)
            data = None if plan is None else convert_plan(plan, progress)
        else:
            data = read_tpu_file(path, host, max_bytes, progress)
    except ProfileFormatError:
        raise
    except DAMAGE:  # damage somewhere: the full parse below says what it is
        data = None
    if data is None:
        return read_xspace_whole(path, host, max_bytes, progress, raw, young)
    if progress:
        progress(1, 1)
    return data


def read_xspace_whole(path: str, host: str, max_bytes: int | None = None,
                      progress=None, raw: bytes | None = None, young=None) -> ProfileData:
    """The whole file parsed at once: GPU and CPU files, and TPU files the plane-by-plane path
    does not take (`raw`: the file's bytes when they were read already)."""
    if raw is None:
        raw, young = read_profile_bytes(path, max_bytes)
    name = os.path.basename(path)
    data = None
    fast = fast_tpu_planes(raw)
    if fast is not None:
        planes, others = fast
        try:
            data = read_tpu_planes(planes, [p.name for p in planes] + [h.name for h in others],
                                    host, progress)
        except DAMAGE:  # damage inside a plane: the full parse below says what it is
            data = None
    if data is None:
        space = parse_xspace(raw, name, young)
        try:
            data = read_xspace(space, host, progress)
        except DAMAGE as exc:  # e.g. a corrupt nested message (memory breakdown, HLO)
            if young:
                raise ProfileIncompleteError(f"{name} does not parse yet") from None
            raise ProfileFormatError(f"{name} holds a damaged record: {exc}") from None
    if progress:
        progress(1, 1)
    return data
