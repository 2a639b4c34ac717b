"""Stage 1 of the XLA GPU/CPU reader: a plane's op-execution events, checked.

GPU: one line per stream (`Stream #N(...)`); lines XProf derives from them (`XLA Ops`,
`Steps`, ...) repeat the kernels and are not read as ops. CPU: the `/host:CPU` threads' events
that carry an `hlo_op` (one event per execution). Every event keeps the stats the later stages
need: `hlo_op` (GPU may write `module::op`), `program_id`, `hlo_module`, `group_id`, and on
CPU `device_ordinal` (which of the host's XLA devices ran it: the threads are a pool every
device shares). A GPU event is a copy, not program work, when it carries `memcpy_details` or
`Memset_details` (XProf's stats for runtime copies and fills; `memset_details` read too), or is
one of the ROCm runtime's blit kernels (`__amd_rocclr_copyBuffer*`, `__amd_rocclr_fillBuffer*`)
that implement hipMemcpy / hipMemset as kernels.
"""

from __future__ import annotations

import collections
import re

from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers.common import TIME_LIMIT_PS  # noqa: F401 (steps.py takes it here)
from tb_roofline.readers.xspace.xplane import PlaneStats
from tb_roofline.table.op_table import NO_STEP

GPU_PLANE = re.compile(r"^/device:GPU:(\d+)$")
HOST_PLANE = "/host:CPU"
DERIVED_LINES = frozenset(
    {
        "XLA Ops",
        "XLA Modules",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
        "Steps",
        "Launch Stats",
        "_counters_",
        "Source code",
        "XLA TraceMe",
        "Framework Ops",
        "Framework Name Scope",
        "Async XLA Ops",
    }
)


def stat_int(value, plane, line, name: str) -> int:
    """An integer stat (`step_num`, `group_id`): int64 / uint64, or a double holding an integer;
    anything else (no value, text, NaN, out of int64) names the place of the corrupt stat."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    kind = "no value" if value is None else f"a {type(value).__name__}"
    raise ProfileFormatError(
        f"plane {plane.name[:100]!r}, line {line.name[:100]!r}: stat "
        f"{name!r} holds {kind}, not an integer"
    )


# Copies done by the ROCm runtime as kernels (hipMemcpy / hipMemset): copies, not program work.
_ROCCLR_BLIT = re.compile(r"^__amd_rocclr_(copy|fill)")
# XLA's profiler writes "memcpy_details" and "Memset_details" (capital M); both spellings read.
COPY_STATS = {"memcpy_details": "memcpy", "memset_details": "memset", "Memset_details": "memset"}


class Event:
    __slots__ = (
        "name",
        "begin",
        "dur",
        "hlo_op",
        "program_id",
        "module",
        "group",
        "step",
        "device",
        "copy",
    )

    def __init__(self, name, begin, dur, hlo_op, program_id, module, group, device=0, copy=""):
        self.name = name
        self.begin = begin
        self.dur = dur
        self.hlo_op = hlo_op
        self.program_id = program_id
        self.module = module
        self.group = group
        self.step = NO_STEP
        self.device = device  # CPU: the XLA device (`device_ordinal`); GPU: 0 (the plane's)
        self.copy = copy  # "memcpy" / "memset" for a runtime copy or fill, else ""


def copy_kind(name: str, vals: dict) -> str:
    """ "memcpy" / "memset" for a GPU event that copies or fills memory (its stats, or a ROCm
    runtime blit kernel's name), else "" (program work)."""
    for stat, kind in COPY_STATS.items():
        if stat in vals:
            return kind
    m = _ROCCLR_BLIT.match(name)
    if m:
        return "memcpy" if m.group(1) == "copy" else "memset"
    return ""


def gpu_planes(space) -> list[tuple[int, object]]:
    """(GPU number, plane) of every `/device:GPU:N` plane, by number."""
    return sorted(
        ((int(m.group(1)), p) for p in space.planes if (m := GPU_PLANE.match(p.name))),
        key=lambda c: c[0],
    )


def op_lines(plane, is_gpu: bool) -> list[list[Event]]:
    """The plane's op events, one list per line (a stream or a thread), empty lines left out."""
    ps = PlaneStats(plane)
    if is_gpu:
        return _events(plane, [l for l in plane.lines if l.name not in DERIVED_LINES], ps, False)
    return _events(plane, plane.lines, ps, True)


def _events(plane, lines, ps: PlaneStats, require_hlo: bool) -> list[list[Event]]:
    ids = ps.ids
    names = ("hlo_op", "program_id", "hlo_module", "group_id", "device_ordinal", *COPY_STATS)
    want = {ids.get(k, -1): k for k in names}
    want.pop(-1, None)
    out = []
    for line in lines:
        base = line.timestamp_ns * 1000
        evs = []
        for ev in line.events:
            vals = ps.values_of(ev.stats, want)
            hlo_op = vals.get("hlo_op")
            if require_hlo and not hlo_op:
                continue
            md = plane.event_metadata.get(ev.metadata_id)
            name = (md.name or md.display_name) if md is not None else ""
            pid = vals.get("program_id")
            group = vals.get("group_id")
            ordinal = vals.get("device_ordinal")
            evs.append(
                Event(
                    name,
                    base + ev.offset_ps,
                    ev.duration_ps,
                    str(hlo_op) if hlo_op else "",
                    "" if pid in (None, "") else str(pid),
                    str(vals.get("hlo_module") or ""),
                    NO_STEP if group is None else stat_int(group, plane, line, "group_id"),
                    0 if ordinal is None else stat_int(ordinal, plane, line, "device_ordinal"),
                    "" if require_hlo else copy_kind(name, vals),
                )
            )
        if evs:
            out.append(evs)
    return out


def check_times(flat: list[Event], plane_name: str, fixes: collections.Counter):
    """A negative duration counts as 0 (and is said); no time or sum of times may overflow."""
    for e in flat:
        if e.dur < 0:
            fixes["negative_durations"] += 1
            e.dur = 0
        if not -TIME_LIMIT_PS < e.begin < TIME_LIMIT_PS or e.dur >= TIME_LIMIT_PS:
            raise ProfileFormatError(
                f"plane {plane_name[:100]!r}: event times or durations beyond 2^62 ps "
                "(53 days): corrupt offsets or durations"
            )
    if sum(e.dur for e in flat) >= TIME_LIMIT_PS:
        raise ProfileFormatError(
            f"plane {plane_name[:100]!r}: event durations sum to more "
            "than 2^62 ps (53 days): corrupt durations"
        )
