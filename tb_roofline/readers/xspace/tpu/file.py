"""A TPU XSpace file read plane by plane: the file's layout from its top-level fields (a few
small reads), each TensorCore plane read and converted on its own (`tpu_plane.convert_plane`,
in this process or a worker), and the planes merged into the host's ProfileData.

Only one plane's bytes are in memory at a time per process, never the whole file. The file's
identity (size, modification time) is checked before and after: a file rewritten meanwhile is
"still being written", as for the whole-file readers.

The layout also tells a file cut short (docs/xspace_format.md, "Truncated files"): a top-level
field that runs past the end of the file. A file whose fields end exactly at its end is whole,
with or without the optional `hostnames` field (real profilers omit it). A file cut short
that grows is still being written (`ProfileIncompleteError`, `readers/files.py` `StillWritten`);
one that does not is read as far as its complete planes go, with a `truncated` diagnostic
naming what is missing.
"""

from __future__ import annotations

import collections
import dataclasses
import os

import numpy as np

from tb_roofline import storage
from tb_roofline.allocator import release_free_memory
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.readers.files import StillWritten, check_profile_file
from tb_roofline.readers.xspace import wire as xwire
from tb_roofline.readers.xspace.hlo_shapes import link_bus_bytes, link_collective
from tb_roofline.readers.xspace.tpu.plane import (
    KEY_TEXTS,
    TRIM_ROWS,
    PlaneResult,
    Sparse,
    clear_info_cache,
    convert_plane,
)
from tb_roofline.readers.xspace.tpu.rules import (
    MAX_CORE,
    TENSOR_CORE_PLANE,
    device_from_plane_stats,
    link_notes,
    plane_notes,
)
from tb_roofline.readers.xspace.xplane import DAMAGE
from tb_roofline.table.op_table import (
    CONTAINER_CATEGORIES,
    COST_COLUMNS,
    INT_COLUMNS,
    ProfileData,
    code_type,
    constant,
    is_constant,
    is_infeed_outfeed_category,
    keyed_table,
)
from tb_roofline.table.spans import CoreSpan, StepSpans
from tb_roofline.table.timeline import Timeline, add_key_shapes

HEAD_BYTES = 4096  # read to find a plane's id and name (fields 1 and 2 come first)
# A host has a few to a few dozen TensorCores. Each plane costs a fixed ~5 ms to convert
# whatever it holds (12,000 one-op planes: 17 MB, 70 s of CPU, 13x a normal file per MB), so
# a file of thousands is refused before any is converted.
MAX_TENSOR_CORE_PLANES = 1024
PLANES, HOSTNAMES = 1, 4  # XSpace's field numbers (errors and warnings are 2 and 3)


@dataclasses.dataclass
class FilePlan:
    """Where the planes of one file are, and the file's identity when it was planned."""

    path: str
    host: str
    size: int
    version: tuple
    young: StillWritten | bool  # asked when a parse fails: is the file growing?
    planes: list  # (start, end, name) of every complete plane
    cores: list  # (core number, start, end) of the complete TensorCore planes, by core
    buffer: bytes | None = None  # the whole file, when it was read at once (remote files)
    truncation: str = ""  # what the file's end says is missing ("" when it looks whole)
    complete_end: int = 0  # where the last complete top-level field ends
    cut_core: bool = False  # the file ends inside a TensorCore plane


def plan_file(
    path: str, host: str, max_bytes: int | None = None, check_truncation: bool = True
) -> FilePlan:
    """The layout of a local XSpace file from a few small reads (`cores` is empty when it has
    no complete TensorCore plane)."""
    st, young = check_profile_file(path, max_bytes)
    with storage.open_binary(path, size=st.st_size) as f:

        def read_at(pos, n):
            f.seek(pos)
            return f.read(n)

        return _plan(path, host, st.st_size, storage.version(st), young, read_at, check_truncation)


def plan_buffer(
    path: str,
    host: str,
    data: bytes,
    version: tuple,
    young: StillWritten | bool,
    check_truncation: bool = True,
) -> FilePlan:
    """The layout of an XSpace file already read whole."""
    plan = _plan(
        path, host, len(data), version, young, lambda pos, n: data[pos : pos + n], check_truncation
    )
    plan.buffer = data
    return plan


def _plan(path, host, size, version, young, read_at, check_truncation) -> FilePlan:
    name = os.path.basename(path)
    try:
        planes, complete_end, cut = _layout(read_at, size)
    except DAMAGE as exc:
        raise _from_layout(not_valid(name, exc, young)) from None
    cores = sorted(
        (int(m.group(1)), s, e) for s, e, plane in planes if (m := TENSOR_CORE_PLANE.match(plane))
    )
    if cores and cores[-1][0] >= MAX_CORE:
        raise ProfileFormatError(
            f"{name}: a TensorCore plane is numbered "
            f"{str(cores[-1][0])[:20]}..., beyond any real core number"
        )
    if len(cores) > MAX_TENSOR_CORE_PLANES:
        raise ProfileTooLargeError(
            f"{name} holds {len(cores):,} TensorCore planes, more than "
            f"any host has ({MAX_TENSOR_CORE_PLANES:,} at most)"
        )
    plan = FilePlan(path, host, size, version, young, planes, cores, complete_end=complete_end)
    if not check_truncation:
        return plan
    if cut is not None:
        plan.cut_core = bool(TENSOR_CORE_PLANE.match(cut[1]))
        plan.truncation = (
            f"the file ends inside {cut[0]} ({cut[2]:,} of its {cut[3]:,} bytes are there)"
        )
    if plan.truncation and young:
        raise _from_layout(
            ProfileIncompleteError(f"{name} is still being written: {plan.truncation}")
        )
    if plan.truncation and not planes:
        raise _from_layout(
            ProfileFormatError(
                f"{name} is not a valid XSpace (truncated or corrupt): {plan.truncation}, and no "
                "plane is complete"
            )
        )
    return plan


def _from_layout(exc: ProfileFormatError) -> ProfileFormatError:
    exc.from_layout = True  # (what the file's layout says: see `from_layout`)
    return exc


def from_layout(exc: Exception) -> bool:
    """Whether a reader error comes from the file's layout (damaged, or cut short)."""
    return getattr(exc, "from_layout", False)


def not_valid(name: str, exc, young) -> ProfileFormatError:
    """The error of a file whose bytes are not a well-formed XSpace."""
    if young:
        return ProfileIncompleteError(f"{name} does not parse yet")
    return ProfileFormatError(f"{name} is not a valid XSpace (truncated or corrupt): {exc}")


def truncation_notes(plan: FilePlan) -> list:
    """The `truncated` diagnostic of an old file cut short (none for a whole one)."""
    if not plan.truncation:
        return []
    n = len(plan.cores) if plan.cores else len(plan.planes)
    what = "TensorCore plane(s)" if plan.cores else "plane(s)"
    return [
        Diagnostic(
            "warning",
            "truncated",
            f"{os.path.basename(plan.path)} looks cut short: {plan.truncation}; the "
            f"answer covers its {n} complete {what} only",
        )
    ]


def _layout(read_at, size: int):
    """([(start, end, name) of every complete plane], where the last complete field ends, and
    (what, its name, bytes there, its length) of the field the file's end cuts, or None)."""
    planes: list = []
    pos = 0
    while pos < size:
        head = read_at(pos, min(20, size - pos))
        try:
            field, wire, start, end = _top_field(head)
        except xwire.WireError:
            if len(head) == 20:  # a whole head that is not a field: damage, not a cut
                raise
            return planes, pos, (f"field {len(planes) + 1}", "", size - pos, 0)
        start, end = pos + start, pos + end
        if end > size:
            name: str | None
            what, name = "the hostnames field" if field == HOSTNAMES else f"field {field}", ""
            if field == PLANES:
                name = _plane_name(read_at(start, min(HEAD_BYTES, size - start))) or ""
                what = f"plane {len(planes) + 1}" + (f" ({name!r})" if name else "")
            return planes, pos, (what, name, size - start, end - start)
        if field == PLANES and wire == 2:
            first = read_at(start, min(HEAD_BYTES, end - start))
            name = _plane_name(first, whole=len(first) == end - start)
            if name is None:  # the name comes late in the plane: read all of it
                name = _plane_name(read_at(start, end - start), whole=True) or ""
            planes.append((start, end, name))
        pos = end
    return planes, pos, None


def _top_field(head: bytes) -> tuple[int, int, int, int]:
    """(field number, wire type, start, end of its value) of the field `head` begins with;
    the value may reach past `head`."""
    tag, p = xwire.varint(head, 0)
    field, wire = tag >> 3, tag & 7
    if field == 0:
        raise xwire.WireError("field number 0")
    if wire == 0:
        _, q = xwire.varint(head, p)
        return field, wire, p, q
    if wire == 2:
        n, q = xwire.varint(head, p)
        return field, wire, q, q + n
    if wire in (1, 5):
        return field, wire, p, p + (8 if wire == 1 else 4)
    raise xwire.WireError(f"unsupported wire type {wire}")


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
        except ProfileFormatError:
            raise
        except DAMAGE as exc:
            st = os.fstat(f.fileno())
            if st.st_size != size:  # cut short while we read it
                raise ProfileIncompleteError(
                    f"{os.path.basename(path)} changed while it was read"
                ) from None
            raise damaged_plane(path, core, exc, StillWritten(path, st)) from None


def damaged_plane(path: str, core: int, exc, young) -> ProfileFormatError:
    """The error of a TensorCore plane whose bytes do not decode."""
    name = os.path.basename(path)
    if young:
        return ProfileIncompleteError(f"{name} does not parse yet")
    return ProfileFormatError(f"{name} holds a damaged record in TensorCore plane {core}: {exc}")


def check_unchanged(plan: FilePlan):
    st = storage.stat(plan.path)
    if storage.version(st) != plan.version or st.st_size != plan.size:
        raise ProfileIncompleteError(f"{os.path.basename(plan.path)} changed while it was read")


def merge_planes(plan: FilePlan, results: list[PlaneResult]) -> ProfileData:
    """The host's ProfileData from its TensorCore planes' results (in core order)."""
    host = plan.host
    results = sorted(results, key=lambda r: r.core)
    device = device_from_plane_stats(results[0].plane_stats, len(results)) if results else None
    spans = [
        CoreSpan(host, r.core, int(r.lo), int(r.hi))
        for r in results
        if r.lo is not None and r.hi is not None  # (both set, or neither: a plane with no ops)
    ]
    steps = StepSpans(
        host,
        np.concatenate([np.full(len(r.steps[0]), r.core) for r in results] or [np.zeros(0)]),
        *(np.concatenate([r.steps[i] for r in results] or [np.zeros(0)]) for i in range(3)),
    )
    fixes: collections.Counter = collections.Counter()
    for r in results:
        fixes.update(r.fixes)
    diagnostics = truncation_notes(plan) + plane_notes(
        [name for _, _, name in plan.planes], sum(r.dropped_ops for r in results), fixes
    )
    timeline = Timeline.merge([r.timeline for r in results if r.timeline is not None])
    table, shapes, link_notes = _table(host, results)
    return ProfileData(
        device=device,
        ops=table,
        steps=steps,
        core_spans=spans,
        diagnostics=diagnostics + link_notes,
        timeline=timeline,
        op_shapes=shapes,
    )


_TEXTS = KEY_TEXTS + ("program",)
# the shape goes to the guidance's op shapes, the link to the interconnect bytes (_link_bytes)
_MERGED = _TEXTS + ("shape", "link")
_LINK = COST_COLUMNS.index("interconnect_bytes")


def _merged_keys(results: list[PlaneResult]):
    """(key columns, unit costs, each plane's map from its key indices to the merged ones):
    cores running the same program share their keys (one string per op and host)."""
    if not results:
        return {f: [] for f in _MERGED}, np.zeros((0, len(COST_COLUMNS))), []
    first = results[0].keys
    cols = {f: list(first[f]) for f in _MERGED}
    maps = [np.arange(len(first["operation"]))]
    added, index = [], None
    for r in results[1:]:
        k = r.keys
        if all(k[f] == first[f] for f in _MERGED) and np.array_equal(
            k["per_exec"], first["per_exec"]
        ):
            maps.append(maps[0])  # the usual case: the same metadata on every core
            continue
        if index is None:
            index = {
                t: i
                for i, t in enumerate(
                    zip(*(cols[f] for f in _MERGED), map(tuple, first["per_exec"].tolist()))
                )
            }
        m = np.empty(len(k["operation"]), np.int64)
        for i, t in enumerate(zip(*(k[f] for f in _MERGED), map(tuple, k["per_exec"].tolist()))):
            at = index.get(t)
            if at is None:
                at = index[t] = len(cols["operation"])
                for f, v in zip(_MERGED, t):
                    cols[f].append(v)
                added.append(t[len(_MERGED) :])
            m[i] = at
        maps.append(m)
    unit = np.concatenate(
        [first["per_exec"], np.array(added, np.float64).reshape(-1, len(COST_COLUMNS))]
    )
    return cols, unit, maps


def _link_bytes(unit: np.ndarray, links: list, cores: int) -> int:
    """Fill the interconnect bytes of one execution of each collective key (nccl-tests' bus
    bytes, readers/xspace/hlo_shapes.py); its group is the host's `cores` where the HLO text names
    none. Returns how many collective keys had their group assumed."""
    assumed = 0
    for k, link in enumerate(links):
        if link is not None:
            unit[k, _LINK], guessed = link_bus_bytes(link, cores)
            assumed += guessed
    return assumed


def _table(host: str, results: list[PlaneResult]):
    cols, unit, maps = _merged_keys(results)
    assumed = _link_bytes(unit, cols["link"], len(results))

    def texts(values):
        out = np.empty(len(values), object)
        out[:] = values
        return out

    categories = cols["category"]
    keys = {f: texts(cols[f]) for f in _TEXTS}
    keys["collective"] = texts([link_collective(link, len(results)) for link in cols["link"]])
    keys.update(
        host=np.full(len(categories), host, object),
        flops_source="profile",
        is_infeed_outfeed=np.array(
            [is_infeed_outfeed_category(c) for c in categories], bool
        ).reshape(-1),
        is_container=np.array([c in CONTAINER_CATEGORIES for c in categories], bool).reshape(-1),
    )
    n = sum(len(r.rows["op"]) for r in results)
    rows = {c: np.empty(n, t) for c, t in _int_types(results, len(categories)).items()}
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
        for c, name in (
            ("total_time_ps", "time"),
            ("self_time_ps", "self"),
            ("dma_stall_ps", "stall"),
            ("async_span_ps", "span"),
        ):
            _put(rows[c][at:end], got, name, zeroed=c in ("dma_stall_ps", "async_span_ps"))
        # copied: the plane's arrays let go, and their pages given back (allocator.py: they
        # are heap blocks, the host's columns fresh mappings that could not reuse them)
        r.rows = got = {}
        if n >= TRIM_ROWS:
            release_free_memory()
        at = end
    shapes = _op_shapes(cols, rows["op"], rows["occurrences"], rows["total_time_ps"])
    table = keyed_table(keys, rows, unit)
    for c in INT_COLUMNS:  # one value throughout: int64, as `narrow_ints` leaves it
        if is_constant(table.rows[c]):
            table.rows[c] = constant(np.int64(table.rows[c][0]), n)
    return table, shapes, link_notes(assumed, len(results))


def _put(out: np.ndarray, got: dict, name: str, zeroed: bool) -> None:
    """A plane's row column `name` written into its rows of the host's column (`zeroed`: made
    by np.zeros, whose pages stay untouched where nothing is written)."""
    value = got[name]
    if value is None:
        if not zeroed:
            out[:] = 0
        return
    if not isinstance(value, Sparse):
        out[:] = value
        return
    if value.like is not None:
        out[:] = got[value.like]
    elif not zeroed:
        out[:] = 0
    out[value.at] = value.values


def _int_types(results: list[PlaneResult], num_keys: int) -> dict:
    """The host's integer row columns made at the types `op_table.narrow_ints` would give them
    (int32 where the values fit): written once, not made int64 and copied narrower, which held
    both (5.8 million rows: 94 MB)."""
    types = {"op": code_type(num_keys)}
    ranges = {
        "core": [(r.core, r.core) for r in results if len(r.rows["op"])],
        "step": [_range(r.rows["step"]) for r in results if len(r.rows["op"])],
        "occurrences": [_range(r.rows["occ"]) for r in results if len(r.rows["op"])],
    }
    for c, got in ranges.items():
        fits = not got or (min(lo for lo, _ in got) >= -(2**31) and max(h for _, h in got) < 2**31)
        types[c] = np.int32 if fits else np.int64
    return types


def _range(column: np.ndarray) -> tuple[int, int]:
    return int(column.min()), int(column.max())


def _op_shapes(cols: dict, op, occurrences, time_ps) -> dict:
    """The guidance's op shapes from the merged keys: once per distinct op, not per core."""
    shapes: dict = {}
    program_id, operation = cols["program_id"], cols["operation"]
    add_key_shapes(
        shapes, lambda k: (program_id[k], operation[k], ""), cols["shape"], op, occurrences, time_ps
    )
    return shapes


def convert_plan(plan: FilePlan, progress=None) -> ProfileData:
    """A planned TPU file's ProfileData, its planes converted in this process in turn."""
    results = []
    for done, (core, start, end) in enumerate(plan.cores):
        if progress:
            progress(done, len(plan.cores))
        if plan.buffer is not None:
            try:
                results.append(
                    convert_plane(
                        xwire.Source(plan.buffer), start, end, core, (plan.path, plan.size)
                    )
                )
            except ProfileFormatError:
                raise
            except DAMAGE as exc:
                raise damaged_plane(plan.path, core, exc, plan.young) from None
        else:
            results.append(convert_plane_at(plan.path, start, end, core, plan.size))
    clear_info_cache()
    if plan.buffer is None:
        check_unchanged(plan)
    return merge_planes(plan, results)
