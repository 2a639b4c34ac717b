"""The TPU rules, in one place: which planes and lines hold what, an op's costs from its
metadata, the device's peaks, the checks on event values, program names, steps and the
diagnostics. The reading itself (the wire format, plane by plane) is in
readers/xspace/tpu/file.py, readers/xspace/tpu/plane.py, readers/xspace/wire.py and
readers/xspace/op_rows.py; the format and the rules are described in docs/xspace_format.md.

- TensorCore planes are named `/device:TPU:N`; SparseCore planes (`... SparseCore K`) are
  skipped (and said so).
- Ops are the events of the `XLA Ops` line; an op is identified by its metadata (program id and
  name); `device_offset_ps`/`device_duration_ps` (absolute ps) override the event's own timing.
- Steps come from `group_id` stats on the `Steps` line (markers; a step's longest marker is its
  span) and on the op events; a step counts only if ops ran in it.
- Programs are named by the `XLA Modules` line's events.
- Op metadata values (FLOPs, bytes) are per execution; the table holds totals.
"""

from __future__ import annotations

import math
import re

import numpy as np
from google.protobuf.message import DecodeError

from tb_roofline.costs.hlo.fingerprint import text_fingerprint
from tb_roofline.costs.hlo.text import async_role, parse_instruction
from tb_roofline.devices import datasheets
from tb_roofline.devices.interconnect import interconnect, link_name, topology
from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.errors import ProfileFormatError
from tb_roofline.protos import memory_access_pb2
from tb_roofline.readers.common import TIME_LIMIT_PS, corrupt_value_notes  # noqa: F401
from tb_roofline.readers.shape_facts import tpu_text_shape
from tb_roofline.readers.xspace.hlo_shapes import (
    text_custom_call_shape,
    text_link,
    text_tensor_shape,
)
from tb_roofline.table.op_table import (
    ASYNC_START,
    ASYNC_WAIT,
    CONTAINER_CATEGORIES,
    HOST_TRANSFER,
    NO_STEP,
    is_infeed_outfeed_category,
)

TENSOR_CORE_PLANE = re.compile(r"^/device:TPU:(\d+)$")
SPARSE_CORE_PLANE = re.compile(r"^/device:TPU:\d+ SparseCore")
OPS_LINE, STEPS_LINE, MODULES_LINE = "XLA Ops", "Steps", "XLA Modules"

HBM, CMEM, VMEM = 1, 2, 3
READ, WRITE = 1, 2
MAX_OCCURRENCES = 1 << 32  # more executions in one event is a corrupt count
MAX_CORE = 1 << 31  # a TensorCore numbered beyond this is a corrupt plane name


# ----------------------------------------------------------------------------------------------
# The device


def device_from_plane_stats(stats: dict, num_cores: int) -> DeviceInfo:
    """The device's peaks from a TensorCore plane's stats (the profile's own figures)."""

    def num(key):  # a missing, non-numeric or non-finite peak is an unknown one
        v = stats.get(key)
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else 0.0

    tflops = num("peak_teraflops_per_second")
    device = DeviceInfo(
        type=str(stats.get("device_type_string") or "TPU"),
        kind="tpu",
        num_cores=num_cores,
        megacore=bool(num("has_megacore")),
        has_merged_vmem=bool(num("has_merged_vmem")),
    )
    device.has_cmem = (
        num("peak_cmem_rd_bw_gigabytes_per_second") > 0
        or num("peak_cmem_wr_bw_gigabytes_per_second") > 0
    )
    if tflops > 0:
        device.compute.append(ComputePeak("default", tflops * 1000.0, "profile"))
    device.memories.append(
        MemoryPeak("hbm", "HBM", num("peak_hbm_bw_gigabytes_per_second"), "profile")
    )
    for mid, name, key in (
        ("cmem_read", "CMEM Read", "peak_cmem_rd_bw_gigabytes_per_second"),
        ("cmem_write", "CMEM Write", "peak_cmem_wr_bw_gigabytes_per_second"),
        ("vmem_read", "VMEM Read", "peak_vmem_rd_bw_gigabytes_per_second"),
        ("vmem_write", "VMEM Write", "peak_vmem_wr_bw_gigabytes_per_second"),
    ):
        if num(key) > 0 and (mid.startswith("cmem") or device.has_merged_vmem):
            device.memories.append(MemoryPeak(mid, name, num(key), "profile"))
    link = ici_peak(device.type)
    if link is not None:
        device.memories.append(link)
    return device


def ici_peak(device_type: str) -> MemoryPeak | None:
    """The chip's inter-chip interconnect (ICI) roof from its data sheet (the profile gives
    none): the roof of the collectives' bus bytes; None for chips not listed."""
    spec = datasheets.lookup(device_type)
    if spec is None or spec.kind != "tpu":
        return None
    peer = interconnect(spec.key)
    if peer is None:
        return None
    return MemoryPeak(
        "interconnect",
        link_name(spec.key),
        peer.value,
        "datasheet",
        note=f"{peer.source}; {peer.note}",
        topology=topology(spec.key),
    )


# ----------------------------------------------------------------------------------------------
# An op's metadata


def breakdown_bytes(raw: bytes | None, total: float) -> tuple:
    """(hbm, cmem_r, cmem_w, vmem_r, vmem_w) bytes per execution; no breakdown = all HBM."""
    if not raw:
        return (total, 0.0, 0.0, 0.0, 0.0)
    msg = memory_access_pb2.MemoryAccessBreakdown.FromString(raw)
    if not msg.memory_accessed:
        return (total, 0.0, 0.0, 0.0, 0.0)
    hbm = cr = cw = vr = vw = 0.0
    for m in msg.memory_accessed:
        if m.memory_space == HBM:
            hbm += m.bytes_accessed
        elif m.memory_space == CMEM:
            if m.operation_type == READ:
                cr += m.bytes_accessed
            elif m.operation_type == WRITE:
                cw += m.bytes_accessed
        elif m.memory_space == VMEM:
            if m.operation_type == READ:
                vr += m.bytes_accessed
            elif m.operation_type == WRITE:
                vw += m.bytes_accessed
    return (hbm, cr, cw, vr, vw)


def has_breakdown(raw) -> bool:
    return bool(raw) and bool(
        memory_access_pb2.MemoryAccessBreakdown.FromString(raw).memory_accessed
    )


def _int(v) -> int:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


OP_STATS = (
    "flops",
    "model_flops",
    "bytes_accessed",
    "hlo_category",
    "program_id",
    "memory_access_breakdown",
    "source",
    "tf_op",
    "shape_with_layout",
)


def op_info(ps, md) -> dict:
    """What the op table needs of one op, from its `XEventMetadata` (`ps`: the plane's
    `xplane.PlaneStats`): key texts, costs of one execution, async role, shape."""
    s = ps.values_of(md.stats, ps.wanted(OP_STATS))
    text_name = md.name  # (each read of a message's string field makes a new str)
    flops = float(_int(s.get("flops")))
    model_flops = float(_int(s.get("model_flops"))) or flops
    total = float(_int(s.get("bytes_accessed")))
    negative = min(flops, model_flops, total) < 0  # a corrupt stat: counted as 0, and said
    flops, model_flops, total = max(flops, 0.0), max(model_flops, 0.0), max(total, 0.0)
    breakdown = s.get("memory_access_breakdown")
    if breakdown is not None and not isinstance(breakdown, bytes):
        raise ProfileFormatError(
            f"plane {ps.name[:100]!r}, op {text_name[:200]!r}: stat 'memory_access_breakdown' "
            f"holds a {type(breakdown).__name__}, not a serialized MemoryAccessBreakdown"
        )
    try:
        mem = breakdown_bytes(breakdown, total)
    except DecodeError:
        raise ProfileFormatError(
            f"plane {ps.name[:100]!r}, op {text_name[:200]!r}: stat 'memory_access_breakdown' "
            "does not decode"
        ) from None
    category = str(s.get("hlo_category") or "unknown")
    program_id = s.get("program_id")
    # The HLO text in the metadata says where the arrays live and whether this is one half of
    # an asynchronous pair (docs/xspace_format.md, "Asynchronous pairs").
    fallback = f"x = {s.get('shape_with_layout') or ''} {category.replace(' ', '-')}()"
    text = parse_instruction(text_name) or parse_instruction(fallback)
    role = async_role(text.opcode if text else "", category)
    host = float(text.host_bytes) if text else 0.0
    caveat = {"start": ASYNC_START, "done": ASYNC_WAIT}.get(role, "")
    if host and not has_breakdown(breakdown):
        # Host halves of offload copies carry no breakdown: their bytes cross the host link,
        # not HBM. The transfer moves the host array once: on the half that completes it.
        mem = (0.0,) + mem[1:]
        caveat = caveat or HOST_TRANSFER
    host = 0.0 if role == "start" else host
    return {
        "operation": md.display_name or text_name,
        "program_id": "" if program_id is None else str(program_id),
        "category": category,
        "flops": flops,
        "model_flops": model_flops,
        "bytes": total,
        "mem": mem + (host,),
        "negative": negative,
        "source": str(s.get("source") or ""),
        "tf_op": str(s.get("tf_op") or ""),
        "is_infeed_outfeed": is_infeed_outfeed_category(category),
        "is_container": category in CONTAINER_CATEGORIES,
        "caveat": caveat,
        "role": role,
        "fingerprint": text_fingerprint(text_name),  # "" when the name is not the HLO text
        "start_name": text.operands[-1] if role == "done" and text and text.operands else "",
        "shape": text_custom_call_shape(text_name)
        or tpu_text_shape(text_name, category)
        or text_tensor_shape(text_name, category),
        # a collective's (kind, message bytes, group): its bus bytes once the cores are known
        "link": text_link(text_name) or text_link(fallback),
    }


_MODULE_ID = re.compile(r"\((\d+)\)$")


def module_program(ps, md) -> tuple[str, str] | None:
    """(program id, program name) of an `XLA Modules` event's metadata, or None when it names
    no program. Profilers name these events `<module name>(<program id>)` and usually add a
    `program_id` stat: the stat wins, the name's suffix is taken where the stat is missing."""
    pid = ps.as_dict(md.stats).get("program_id")
    suffix = _MODULE_ID.search(md.name)
    if pid is None and suffix is not None:
        pid = suffix.group(1)
    if pid is None or isinstance(pid, (bytes, float)):
        return None
    name = md.display_name or (md.name[: suffix.start()] if suffix else md.name)
    return str(pid), name


# ----------------------------------------------------------------------------------------------
# Checks on event values


def check_events(events, plane: str, line: str, fixes):
    """A line's event columns (metadata id, begin, duration, group, DMA stall, occurrences)
    made safe to sum: negative durations and DMA stalls count as 0, an unset (0)
    num_occurrences as 1, and events with a negative or absurd num_occurrences are dropped
    (each counted in `fixes`, a Counter, for a diagnostic). Times or durations that int64 sums
    could not hold are a corrupt file."""
    md, begin, dur, group, stall, occ = events
    if not len(md):
        return events
    for name, values in (("negative_durations", dur), ("negative_durations", stall)):
        negative = values < 0
        if negative.any():
            fixes[name] += int(negative.sum())
            values[negative] = 0
    occ[occ == 0] = 1
    bad = (occ < 0) | (occ > MAX_OCCURRENCES)
    if bad.any():
        fixes["bad_occurrences"] += int(bad.sum())
        keep = ~bad
        md, begin, dur, group, stall, occ = (a[keep] for a in (md, begin, dur, group, stall, occ))
    if len(md) and (
        int(begin.min()) <= -TIME_LIMIT_PS
        or int(begin.max()) >= TIME_LIMIT_PS
        or float(dur.sum(dtype=np.float64)) >= TIME_LIMIT_PS
        or float(stall.sum(dtype=np.float64)) >= TIME_LIMIT_PS
    ):
        raise durations_beyond_limit(plane, line)
    return md, begin, dur, group, stall, occ


def durations_beyond_limit(plane: str, line: str) -> ProfileFormatError:
    return ProfileFormatError(
        f"plane {plane[:100]!r}, line {line[:100]!r}: event times or "
        "durations beyond 2^62 ps (53 days): corrupt offsets or durations"
    )


# ----------------------------------------------------------------------------------------------
# Steps


def step_spans(marks: list, op_groups: np.ndarray) -> tuple:
    """(group, begin, duration) of each step with both a marker and ops, ascending; `marks`:
    (group, begin, duration) columns of the Steps lines. A step's marker is its longest one
    (the first of equal ones), as XProf takes it."""
    empty = tuple(np.zeros(0, np.int64) for _ in range(3))
    if not marks:
        return empty
    group, begin, dur = (np.concatenate(c) for c in zip(*marks))
    valid = np.flatnonzero(group != NO_STEP)
    if not len(valid):
        return empty
    g, b, d = group[valid], begin[valid], dur[valid]
    order = np.lexsort((np.arange(len(g)), -d, g))
    g, b, d = g[order], b[order], d[order]
    first = np.concatenate(([True], g[1:] != g[:-1]))
    g, b, d = g[first], b[first], d[first]
    keep = np.isin(g, op_groups)
    return g[keep], b[keep], d[keep]


# ----------------------------------------------------------------------------------------------
# Diagnostics


def link_notes(assumed: int, cores: int) -> list:
    """The diagnostic of collectives whose HLO text names no replica groups."""
    if not assumed:
        return []
    return [
        Diagnostic(
            "info",
            "collective_group_assumed",
            f"{assumed} collective op(s) name no replica groups in their HLO text: "
            f"their interconnect bytes assume a group of all {cores} TensorCore(s) "
            "of the host",
        )
    ]


def plane_notes(plane_names: list, dropped_ops: int, fixes) -> list:
    """The diagnostics of a host's TPU planes: SparseCore planes skipped, op executions whose
    metadata is missing, corrupt values counted as 0 or skipped."""
    notes = []
    sparse = [n for n in plane_names if SPARSE_CORE_PLANE.match(n)]
    if sparse:
        notes.append(
            Diagnostic(
                "info",
                "sparsecore_ignored",
                f"{len(sparse)} SparseCore plane(s) ignored: their ops are "
                "not part of the TensorCore roofline",
            )
        )
    if dropped_ops:
        notes.append(
            Diagnostic(
                "warning",
                "ops_without_metadata",
                f"{dropped_ops} op executions reference missing metadata",
            )
        )
    return notes + corrupt_value_notes(fixes)
