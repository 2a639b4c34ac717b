"""A TPU XSpace file read plane by plane: the file's layout from its top-level fields (a few
small reads), each TensorCore plane read and converted on its own (`tpu_plane.convert_plane`,
in this process or a worker), and the planes merged into the host's ProfileData.

Only one plane's bytes are in memory at a time per process, never the whole file. The file's
identity (size, modification time) is checked before and after: a file rewritten meanwhile is
"still being written", as for the whole-file readers.
"""
from __future__ import annotations

import collections

import dataclasses
import os

import numpy as np

from tb_roofline import storage
from tb_roofline.errors import ProfileIncompleteError
from tb_roofline.model.op_table import (CONTAINER_CATEGORIES, CoreSpan, ProfileData, StepSpans,
                                        is_infeed_outfeed_category, keyed_table)
from tb_roofline.readers import xwire
from tb_roofline.readers.files import check_profile_file
from tb_roofline.readers.tpu_plane import KEY_TEXTS, PlaneResult, clear_info_cache, convert_plane

HEAD_BYTES = 4096  # read to find a plane's id and name (fields 1 and 2 come first)


@dataclasses.dataclass
class FilePlan:
    """Where the planes of one file are, and the file's identity when it was planned."""
    path: str
    host: str
    size: int
    version: tuple
    young: bool
    planes: list  # (start, end, name) of every plane
    cores: list   # (core number, start, end) of the TensorCore planes, by core
    buffer: bytes | None = None  # the whole file, when it was read at once (remote files)


def plan_file(path: str, host: str, max_bytes: int | None = None) -> FilePlan | None:
    """The layout of a local TPU file from a few small reads; None when it has no TensorCore
    plane (another reader's)."""
    st, young = check_profile_file(path, max_bytes)
    with storage.open_binary(path, size=st.st_size) as f:
        def read_at(pos, n):
            f.seek(pos)
            return f.read(n)
        planes = _layout(read_at, st.st_size)
    return _plan(path, host, st.st_size, storage.version(st), young, planes)


def plan_buffer(path: str, host: str, data: bytes, version: tuple, young: bool) -> FilePlan | None:
    """The layout of a TPU file already read whole."""
    planes = _layout(lambda pos, n: data[pos:pos + n], len(data))
    plan = _plan(path, host, len(data), version, young, planes)
    if plan is not None:
        plan.buffer = data
    return plan


def _plan(path, host, size, version, young, planes) -> FilePlan | None:
    from tb_roofline.readers.tpu import TENSOR_CORE_PLANE
    cores = sorted((int(m.group(1)), s, e) for s, e, name in planes
                   if (m := TENSOR_CORE_PLANE.match(name)))
    if cores and cores[-1][0] >= 1 << 31:
        from tb_roofline.errors import ProfileFormatError
        raise ProfileFormatError(f"{os.path.basename(path)}: a TensorCore plane is numbered "
                                 f"{str(cores[-1][0])[:20]}..., beyond any real core number")
    if not cores:
        return None
    return FilePlan(path, host, size, version, young, planes, cores)


def _layout(read_at, size: int) -> list:
    """(start, end, name) of every plane: the top-level fields walked with small reads."""
    planes = []
    pos = 0
    while pos < size:
        head = read_at(pos, min(20, size - pos))
        tag, p = xwire.varint(head, 0)
        if tag & 7 != 2:  # planes, hostnames, errors, warnings: all length-delimited
            raise xwire.WireError("unexpected top-level field")
        n, p = xwire.varint(head, p)
        start, end = pos + p, pos + p + n
        if end > size:
            raise xwire.WireError("field runs past the end of the file")
        if tag >> 3 == 1:
            first = read_at(start, min(HEAD_BYTES, n))
            name = _plane_name(first, whole=len(first) == n)
            if name is None:  # the name comes late in the plane: read all of it
                name = _plane_name(read_at(start, n), whole=True) or ""
            planes.append((start, end, name))
        pos = end
    return planes


def _plane_name(head: bytes, whole: bool = False) -> str | None:
    """The plane's name from its first bytes, or None when they do not reach it."""
    try:
        for field, wire, value, _, _ in xwire.fields(head, 0, len(head)):
            if field == 2 and wire == 2:
                return xwire.text(head, value)
            if field not in (1, 2):
                return "" if whole else None
    except xwire.WireError:
        if whole:
            raise
        return None  # the head ends inside a field
    return "" if whole else None


def convert_plane_at(path: str, start: int, end: int, core: int, size: int) -> PlaneResult:
    """Convert one plane of a local file, reading it piece by piece (the unit of work of a
    worker)."""
    with open(storage.local_path(path), "rb") as f:
        if os.fstat(f.fileno()).st_size != size:
            raise ProfileIncompleteError(f"{os.path.basename(path)} changed while it was read")
        try:
            return convert_plane(xwire.Source(fd=f.fileno()), start, end, core, (path, size))
        except xwire.WireError:
            if os.fstat(f.fileno()).st_size != size:  # cut short while we read it
                raise ProfileIncompleteError(
                    f"{os.path.basename(path)} changed while it was read") from None
            raise


def check_unchanged(plan: FilePlan):
    st = storage.stat(plan.path)
    if storage.version(st) != plan.version or st.st_size != plan.size:
        raise ProfileIncompleteError(f"{os.path.basename(plan.path)} changed while it was read")


def merge_planes(plan: FilePlan, results: list[PlaneResult]) -> ProfileData:
    """The host's ProfileData from its TensorCore planes' results (in core order)."""
    from tb_roofline.diagnostics import Diagnostic
    from tb_roofline.model.timeline import Timeline
    from tb_roofline.readers.tpu import (SPARSE_CORE_PLANE, _device_from_plane_stats,
                                         corrupt_value_notes)
    host = plan.host
    diagnostics = []
    sparse = [name for _, _, name in plan.planes if SPARSE_CORE_PLANE.match(name)]
    if sparse:
        diagnostics.append(Diagnostic("info", "sparsecore_ignored",
                                      f"{len(sparse)} SparseCore plane(s) ignored: their ops are "
                                      "not part of the TensorCore roofline"))
    results = sorted(results, key=lambda r: r.core)
    device = _device_from_plane_stats(results[0].plane_stats, len(results)) if results else None
    spans = [CoreSpan(host, r.core, int(r.lo), int(r.hi)) for r in results if r.lo is not None]
    steps = StepSpans(host, np.concatenate([np.full(len(r.steps[0]), r.core) for r in results]
                                           or [np.zeros(0)]),
                      *(np.concatenate([r.steps[i] for r in results] or [np.zeros(0)])
                        for i in range(3)))
    dropped = sum(r.dropped_ops for r in results)
    if dropped:
        diagnostics.append(Diagnostic("warning", "ops_without_metadata",
                                      f"{dropped} op executions reference missing metadata"))
    fixes = collections.Counter()
    for r in results:
        fixes.update(r.fixes)
    diagnostics.extend(corrupt_value_notes(fixes))
    timeline = Timeline.merge([r.timeline for r in results])
    table, shapes = _table(host, results)
    return ProfileData(device=device, ops=table, steps=steps, core_spans=spans,
                       diagnostics=diagnostics, timeline=timeline, op_shapes=shapes)


_TEXTS = KEY_TEXTS + ("program",)
_MERGED = _TEXTS + ("shape",)  # the shape goes to the guidance's op shapes, not the table


def _merged_keys(results: list[PlaneResult]):
    """(key columns, unit costs, each plane's map from its key indices to the merged ones):
    cores running the same program share their keys (one string per op and host)."""
    if not results:
        return {f: [] for f in _MERGED}, np.zeros((0, 9)), []
    first = results[0].keys
    cols = {f: list(first[f]) for f in _MERGED}
    maps = [np.arange(len(first["operation"]))]
    added, index = [], None
    for r in results[1:]:
        k = r.keys
        if all(k[f] == first[f] for f in _MERGED) and \
                np.array_equal(k["per_exec"], first["per_exec"]):
            maps.append(maps[0])  # the usual case: the same metadata on every core
            continue
        if index is None:
            index = {t: i for i, t in enumerate(zip(*(cols[f] for f in _MERGED),
                                                    map(tuple, first["per_exec"].tolist())))}
        m = np.empty(len(k["operation"]), np.int64)
        for i, t in enumerate(zip(*(k[f] for f in _MERGED), map(tuple, k["per_exec"].tolist()))):
            at = index.get(t)
            if at is None:
                at = index[t] = len(cols["operation"])
                for f, v in zip(_MERGED, t):
                    cols[f].append(v)
                added.append(t[len(_MERGED):])
            m[i] = at
        maps.append(m)
    unit = np.concatenate([first["per_exec"], np.array(added, np.float64).reshape(-1, 9)])
    return cols, unit, maps


def _table(host: str, results: list[PlaneResult]):
    cols, unit, maps = _merged_keys(results)

    def texts(values):
        out = np.empty(len(values), object)
        out[:] = values
        return out

    categories = cols["category"]
    keys = {f: texts(cols[f]) for f in _TEXTS}
    keys.update(host=np.full(len(categories), host, object), flops_source="profile",
                is_infeed_outfeed=np.array([is_infeed_outfeed_category(c) for c in categories],
                                           bool).reshape(-1),
                is_container=np.array([c in CONTAINER_CATEGORIES for c in categories],
                                      bool).reshape(-1))
    n = sum(len(r.rows["op"]) for r in results)
    rows = {"op": np.empty(n, np.int64), "core": np.empty(n, np.int64),
            "step": np.empty(n, np.int64), "occurrences": np.empty(n, np.int64)}
    rows.update({c: np.empty(n, np.float64) for c in ("total_time_ps", "self_time_ps")})
    rows.update({c: np.zeros(n, np.float64) for c in ("dma_stall_ps", "async_span_ps")})
    at = 0
    for r, m in zip(results, maps):
        got = r.rows
        end = at + len(got["op"])
        rows["op"][at:end] = m[got["op"]]
        rows["core"][at:end] = r.core
        rows["step"][at:end] = got["step"]
        rows["occurrences"][at:end] = got["occ"]
        for c, name in (("total_time_ps", "time"), ("self_time_ps", "self"),
                        ("dma_stall_ps", "stall"), ("async_span_ps", "span")):
            if got[name] is not None:
                rows[c][at:end] = got[name]
        r.rows = None  # copied: let the plane's arrays go before the next one's are copied
        at = end
    shapes = _op_shapes(cols, rows["op"], rows["occurrences"], rows["total_time_ps"])
    return keyed_table(keys, rows, unit), shapes


def _op_shapes(cols: dict, op, occurrences, time_ps) -> dict:
    """The guidance's op shapes from the merged keys: once per distinct op, not per core."""
    from tb_roofline.model.timeline import add_key_shapes
    shapes: dict = {}
    program_id, operation = cols["program_id"], cols["operation"]
    add_key_shapes(shapes, lambda k: (program_id[k], operation[k], ""), cols["shape"], op,
                   occurrences, time_ps)
    return shapes


def read_tpu_file(path: str, host: str, max_bytes: int | None = None,
                  progress=None) -> ProfileData | None:
    """In this process, plane after plane; None when the file is not a TPU one."""
    plan = plan_file(path, host, max_bytes)
    return None if plan is None else convert_plan(plan, progress)


def convert_plan(plan: FilePlan, progress=None) -> ProfileData:
    results = []
    for done, (core, start, end) in enumerate(plan.cores):
        if progress:
            progress(done, len(plan.cores))
        if plan.buffer is not None:
            results.append(convert_plane(xwire.Source(plan.buffer), start, end, core,
                                         (plan.path, plan.size)))
        else:
            results.append(convert_plane_at(plan.path, start, end, core, plan.size))
    clear_info_cache()
    if plan.buffer is None:
        check_unchanged(plan)
    return merge_planes(plan, results)
