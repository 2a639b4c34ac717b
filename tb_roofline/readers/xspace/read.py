"""XSpace files to `ProfileData`: TPU TensorCore planes through the wire-format TPU reader
(readers/xspace/tpu/file.py), everything else (XLA on GPU and CPU) through the HLO-costed reader.

`plane_plan` is the one place that works out a file's layout, once per read: readers/units.py
asks it to cut a conversion into units and hands the plan to the unit that reads the file, so
a file is read the same way in one process, on all cores and on a cluster.
"""

from __future__ import annotations

import os

from tb_roofline import storage
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError
from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.xspace.tpu import file as tpu_file
from tb_roofline.readers.xspace.xplane import DAMAGE, parse_xspace, read_profile_bytes
from tb_roofline.table.op_table import ProfileData


def plane_plan(path: str, fmt: str, host: str, max_bytes: int | None = None):
    """The layout of a local XSpace file (`tpu_file.FilePlan`: its TensorCore planes, in
    `cores`, are independent units of work; none for XLA on GPU and CPU). None for anything
    read whole by `readers.read_profile_file` without a plan: another format, a remote file
    (fetched in one request, then planned from its bytes), a damaged or cut layout (the whole
    read says what is wrong). Raises the errors of the file itself (missing, empty, too
    large)."""
    if fmt != "xplane" or storage.is_remote(path):
        return None
    try:
        return tpu_file.plan_file(path, host, max_bytes)
    except ProfileFormatError as exc:
        if tpu_file.from_layout(exc):
            return None
        raise


def read_xspace_file(
    path: str, host: str, max_bytes: int | None = None, progress=None, plan=None
) -> ProfileData:
    """`plan`: the file's `plane_plan`, when the caller has made it (a unit of work)."""
    if progress:
        progress(0, 1)
    if plan is None:
        plan = plane_plan(path, "xplane", host, max_bytes)
    if plan is None or not plan.cores:
        raw, young = read_profile_bytes(path, max_bytes)
        if plan is None or len(raw) != plan.size:  # no plan, or the file changed since
            plan = tpu_file.plan_buffer(path, host, raw, (), young)
        if not plan.cores:
            data = _read_gpu_cpu(plan, raw, progress)
            if progress:
                progress(1, 1)
            return data
    data = tpu_file.convert_plan(plan, progress)
    if progress:
        progress(1, 1)
    return data


def read_xspace(space: xplane_pb2.XSpace, host: str, progress=None) -> ProfileData:
    """An XSpace already parsed (whole by construction: no truncation check)."""
    raw = space.SerializeToString()
    plan = tpu_file.plan_buffer("xspace", host, raw, (), False, check_truncation=False)
    if not plan.cores:
        from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace

        return read_gpu_cpu_xspace(space, host, progress=progress)
    return tpu_file.convert_plan(plan, progress)


def _read_gpu_cpu(plan: tpu_file.FilePlan, raw: bytes, progress=None) -> ProfileData:
    """A file without TensorCore planes, parsed whole (only its complete fields when the file
    was cut short)."""
    name = os.path.basename(plan.path)
    if plan.cut_core:  # the only TensorCore plane is the cut one
        raise ProfileFormatError(
            f"{name} is not a valid XSpace (truncated or corrupt): {plan.truncation}"
        )
    if plan.truncation:
        raw = raw[: plan.complete_end]
    space = parse_xspace(raw, name, plan.young)
    try:
        from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace

        data = read_gpu_cpu_xspace(space, plan.host, progress=progress)
    except DAMAGE as exc:  # e.g. a corrupt nested message (an HLO proto), a bad instruction
        if plan.young:
            raise ProfileIncompleteError(f"{name} does not parse yet") from None
        raise ProfileFormatError(f"{name} holds a damaged record: {exc}") from None
    data.diagnostics[:0] = tpu_file.truncation_notes(plan)
    return data
