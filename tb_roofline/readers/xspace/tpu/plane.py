"""One TPU TensorCore plane, from its bytes to op-table pieces.

`convert_plane` is a pure function of the plane's bytes (no shared state but a cache of decoded
op metadata), so the planes of a file and the files of a run can be converted in any order, in
any process (`execute/pool.py`), and merged into exactly the serial answer
(`tpu_file.merge_planes`). Events are decoded window by window (`xwire.decode_events`) and reduced
to one row per (op, step) as they come, so memory follows the window and the rows, not the
events: a line is cut where no earlier event can contain a later one (self times never cross a
cut), and only the clusters of nested events go through the nesting computation.

The rules (op metadata, value checks, steps, program names) are
readers/xspace/tpu/rules.py's; the plane's layout and its lines' events are decoded by
readers/xspace/tpu/plane_lines.py.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import struct
from typing import NamedTuple

import numpy as np

from tb_roofline.allocator import release_free_memory
from tb_roofline.errors import ProfileFormatError
from tb_roofline.protos import xplane_pb2, xplane_view_pb2
from tb_roofline.readers.xspace import wire as xwire
from tb_roofline.readers.xspace.op_rows import OpLine
from tb_roofline.readers.xspace.tpu.plane_lines import (
    collect,
    concat,
    fallback_events,
    line,
    line_header,
    plane_header,
)
from tb_roofline.readers.xspace.tpu.rules import (
    MODULES_LINE,
    OPS_LINE,
    STEPS_LINE,
    TIME_LIMIT_PS,
    check_events,
    module_program,
    op_info,
    step_spans,
)
from tb_roofline.readers.xspace.tpu.timeline import add_core_events, event_facts
from tb_roofline.readers.xspace.xplane import PlaneStats
from tb_roofline.table.op_table import COST_COLUMNS, NO_STEP, distinct
from tb_roofline.table.timeline import Timeline
from tb_roofline.table.timeline_builder import TimelineBuilder

# A plane of this many rows or more gives its freed heap pages back when converted (its
# events' arrays leave holes of tens of MB); below, the page faults of reusing pages given
# back cost more than the holes (8 small hosts: 15% more CPU when every plane gave back).
TRIM_ROWS = 1 << 20
BATCH_EVENTS = 1 << 14  # events of an op line checked and reduced at a time (`_Batches`)
KEY_TEXTS = ("program_id", "operation", "category", "source", "tf_op", "caveat", "fingerprint")


@dataclasses.dataclass
class PlaneResult:
    """What one TensorCore plane contributes to its host's ProfileData (picklable, compact:
    columns, not a dictionary per op)."""

    core: int
    plane_stats: dict
    lo: int | None
    hi: int | None
    steps: tuple  # (group ids, begins, durations) of the steps of this core, ascending
    keys: dict  # per distinct op: KEY_TEXTS, "program", "link" (lists), "per_exec" (ops x costs)
    # op (index into keys), step, occ (int32 where they fit), time, self, stall, span (int64;
    # self, stall and span may be `Sparse`)
    rows: dict
    dropped_ops: int = 0
    fixes: dict = dataclasses.field(default_factory=dict)  # corrupt values (tpu.check_events)
    timeline: Timeline | None = None  # this core's timeline facts (the guidance's)


# ----------------------------------------------------------------------------------------------
# A plane

_INFO_CACHE: collections.OrderedDict = collections.OrderedDict()  # file -> {metadata: info}
_CACHED_FILES = 2
_TABLES: dict = {}  # stat table -> small id (part of the cache key)


class Info(NamedTuple):
    """What a plane keeps of each op's metadata (tpu.op_info): its key texts (KEY_TEXTS), async
    role, the name of its `-start` (a `-done`'s), FLOPs and bytes of one
    execution (COST_COLUMNS float64, as bytes; interconnect bytes 0 until the file's cores are
    known: `link` holds a collective's message, tpu_file fills them)."""

    program_id: str
    operation: str
    category: str
    source: str
    tf_op: str
    caveat: str
    fingerprint: str
    role: str  # "start", "done" or ""
    start_name: str
    per_exec: bytes
    negative: bool
    shape: tuple | None
    is_container: bool
    link: tuple | None  # a collective's (kind, message bytes, group)


def _infos(ps: PlaneStats, metadata, mids, cache: dict):
    """The Info of each metadata id (None when the plane has no such metadata); `metadata`:
    id -> serialized XEventMetadata. Cores repeat the same metadata, and so do the hosts of one
    program: decoded once per (stat table, metadata bytes) among the files kept (info_cache;
    the key holds everything op_info reads, so a hit from another file is the same Info)."""
    table = _TABLES.setdefault(tuple(sorted(ps.names.items())), len(_TABLES))
    others = [c for c in tuple(_INFO_CACHE.values()) if c is not cache]  # (a snapshot: other
    out: list = []  # requests' threads edit it)
    for mid in mids:
        raw = metadata.get(mid)
        if raw is None:
            out.append(None)
            continue
        key = (table, hashlib.blake2b(raw, digest_size=16).digest())
        info = cache.get(key)
        if info is None and others:  # the hosts of a pod run one program: another file's may
            info = next((c[key] for c in others if key in c), None)
            if info is not None:
                cache[key] = info
        if info is None:
            i = op_info(ps, xplane_pb2.XEventMetadata.FromString(raw))
            info = cache[key] = Info(
                program_id=i["program_id"],
                operation=i["operation"],
                category=i["category"],
                source=i["source"],
                tf_op=i["tf_op"],
                caveat=i["caveat"],
                fingerprint=i["fingerprint"],
                role=i["role"],
                start_name=i["start_name"],
                per_exec=_PER_EXEC.pack(i["flops"], i["model_flops"], i["bytes"], *i["mem"], 0.0),
                negative=i["negative"],
                shape=i["shape"],
                is_container=i["is_container"],
                link=i["link"],
            )
        out.append(info)
    return out


# FLOPs, model FLOPs, bytes, the memory breakdown and host bytes, interconnect bytes (0 here):
# COST_COLUMNS as float64 in this machine's order (what `np.frombuffer` reads back).
_PER_EXEC = struct.Struct(f"={len(COST_COLUMNS)}d")


def info_cache(file_key) -> dict:
    """The op-metadata cache of one file (the planes of a file share their metadata); the
    last few files' are kept, so a worker converting a file's planes in turn reuses it."""
    if file_key is None:
        return {}
    cache = _INFO_CACHE.pop(file_key, None)
    _INFO_CACHE[file_key] = cache = {} if cache is None else cache
    while len(_INFO_CACHE) > _CACHED_FILES:
        _INFO_CACHE.popitem(last=False)
    return cache


def clear_info_cache():
    _INFO_CACHE.clear()


def convert_plane(src, start: int, end: int, core: int, file_key=None) -> PlaneResult:
    """The TensorCore plane at [start, end) of `src` (an xwire.Source, or bytes); `file_key`
    names the file for the op-metadata cache (None: no cache)."""
    if not isinstance(src, xwire.Source):
        src = xwire.Source(src)
    cache = info_cache(file_key)
    _, plane_name, line_spans, rest = plane_header(src, start, end)
    fixes: collections.Counter[str] = collections.Counter()
    meta_bytes = src.read(rest, end - rest)
    meta = xplane_view_pb2.XPlaneMetaView.FromString(meta_bytes)
    # Cores of one program repeat the same metadata, byte for byte: a plane whose metadata
    # another plane of the file had starts from that plane's decoded ops.
    same_as = ("plane", hashlib.blake2b(meta_bytes, digest_size=16).digest())
    del meta_bytes
    ps = PlaneStats(meta, plane_name)
    lines = _lines_by_name(src, line_spans, meta)
    programs = _programs(ps, meta.event_metadata, lines[MODULES_LINE])
    lo, hi, marks = _step_marks(lines[STEPS_LINE], ps.ids, plane_name, fixes)
    roles = _Roles(ps, meta.event_metadata, cache.setdefault(same_as, {}), cache)
    line_rows, core_events, span = _op_lines(lines[OPS_LINE], ps.ids, plane_name, fixes, roles)
    if span[0] is not None:
        lo = span[0] if lo is None else min(lo, span[0])
        hi = span[1] if hi is None else max(hi, span[1])
    info_of = roles.info_of
    result = _plane_result(core, ps, meta, programs, marks, line_rows, info_of, lo, hi)
    result.fixes = dict(fixes)
    negative = len([i for i in info_of.values() if i is not None and i.negative])
    result.fixes["negative_costs"] = result.fixes.get("negative_costs", 0) + negative
    if lo is not None and core_events:
        result.timeline = _timeline(
            core, (lo, hi), result.steps, core_events, info_of, cache, same_as
        )
    if len(result.rows["op"]) >= TRIM_ROWS:
        release_free_memory()
    return result


def _lines_by_name(src: xwire.Source, line_spans, meta) -> dict:
    """The plane's op, step and module lines, each as (source, start, end) places."""
    lines: dict = {OPS_LINE: [], STEPS_LINE: [], MODULES_LINE: []}
    located = [(src, a, b) for a, b in line_spans]
    # lines written after the metadata (unusual)
    located += [(xwire.Source(x), 0, len(x)) for x in meta.lines]
    for where in located:
        name = line_header(*where)[0]
        if name in lines:
            lines[name].append(where)
    return lines


def _programs(ps: PlaneStats, metadata, module_lines) -> dict[str, str]:
    """Program id -> name, from the XLA Modules line's events' metadata."""
    programs: dict[str, str] = {}
    for b, a, z in module_lines:
        for mid in distinct(line(b, (a, z), ps.ids)[1][0]).tolist():
            raw = metadata.get(mid)
            if raw is None:
                continue
            got = module_program(ps, xplane_pb2.XEventMetadata.FromString(raw))
            if got is not None:
                programs[got[0]] = got[1]
    return programs


def _step_marks(step_lines, stat_ids, plane_name: str, fixes):
    """(first begin, last end, [(group, begins, durations)]) of the step lines."""
    lo = hi = None
    marks = []
    for b, a, z in step_lines:
        _, begin, dur, group, _, _ = check_events(
            line(b, (a, z), stat_ids)[1], plane_name, STEPS_LINE, fixes
        )
        if len(begin):
            lo = int(begin.min()) if lo is None else min(lo, int(begin.min()))
            hi = int((begin + dur).max()) if hi is None else max(hi, int((begin + dur).max()))
        marks.append((group, begin, dur))
    return lo, hi, marks


class _Roles:
    """Op metadata per distinct id, decoded the first time the id shows up, and each id's async
    role (0 plain, 1 start, 2 done) looked up in a table indexed by id (ids are small and dense
    in real and generated profiles)."""

    def __init__(self, ps: PlaneStats, metadata, info_of: dict, cache: dict):
        self.ps, self.metadata, self.cache = ps, metadata, cache
        self.info_of: dict[int, Info | None] = info_of
        ids = np.fromiter(metadata.keys(), np.int64, len(metadata))
        dense = len(ids) and int(ids.min()) >= 0 and int(ids.max()) < 4 * len(ids) + 4096
        self.table = np.zeros(int(ids.max()) + 2 if dense else 0, np.int64)  # role+1; 0 unseen
        self.roles = {m: _role(i) for m, i in info_of.items()}
        if self.roles and len(self.table):
            known = np.fromiter(self.roles.keys(), np.int64, len(self.roles))
            inside = (known >= 0) & (known < len(self.table))
            values = np.fromiter(self.roles.values(), np.int64, len(self.roles))
            self.table[known[inside]] = values[inside] + 1
        self.seen_starts: set = set()  # async starts on this plane's op lines so far

    def learn(self, mids):
        new = [m for m in mids if m not in self.info_of]
        for m, info in zip(new, _infos(self.ps, self.metadata, new, self.cache)):
            self.info_of[m] = info
            self.roles[m] = _role(info)
            if 0 <= m < len(self.table):
                self.table[m] = self.roles[m] + 1

    def __call__(self, md):
        table = self.table
        if len(table) and int(md.min()) >= 0 and int(md.max()) < len(table):
            got = table[md]
            if got.all():
                return got - 1
            self.learn(distinct(md[got == 0]).tolist())
            return table[md] - 1
        u, inv = np.unique(md, return_inverse=True)
        ul = u.tolist()
        self.learn(ul)
        return np.array([self.roles[m] for m in ul], np.int64)[inv.reshape(-1)]

    def start_of(self, acc) -> dict:
        """done id -> its start's id, among the starts this plane's lines ran so far."""
        for md, *_, role in acc.asyncs:
            self.seen_starts.update(distinct(md[role == 1]).tolist())
        by_name = {}
        for m in sorted(self.seen_starts):
            info = self.info_of[m]
            if info is not None:  # a start has metadata (its role came from it)
                by_name[info.operation] = m
        return {
            m: by_name.get(i.start_name)
            for m, i in self.info_of.items()
            if i is not None and i.role == "done"
        }


def _role(info) -> int:
    return 0 if info is None else {"start": 1, "done": 2}.get(info.role, 0)


def _op_lines(op_lines, stat_ids, plane_name: str, fixes, roles: _Roles):
    """Rows of every op line, the op events of each (the guidance's timeline) and the lines'
    (first begin, last end)."""
    lo = hi = None
    line_rows = []
    core_events = []  # (line, md, begin, duration) of every op event
    for line_index, (b, a, z) in enumerate(op_lines):
        acc = OpLine(roles)
        events: list = []
        check = _LineCheck(plane_name, fixes)

        def sink(*cols, acc=acc, events=events, check=check):
            md, begin, dur, group, stall, occ = check(cols)
            events.append((md, begin, dur))
            acc.add(md, begin, dur, group, stall, occ)

        batches = _Batches(sink)
        if collect(b, a, z, stat_ids, batches) is None:
            cols = fallback_events(bytes(b.read(a, z - a)), stat_ids)[1]
            acc = OpLine(roles)
            acc.ordered = False
            events.clear()
            md, begin, dur, group, stall, occ = _LineCheck(plane_name, fixes)(cols)
            events.append((md, begin, dur))
            acc.add(md, begin, dur, group, stall, occ)
        else:
            batches.flush()
        if events:
            core_events.append((line_index, *concat(events)))
            events.clear()  # (the windows' arrays: the line's copy above is what is kept)
        rows = acc.finish(roles.start_of(acc))
        if acc.lo is not None:
            lo = acc.lo if lo is None else min(lo, acc.lo)
            hi = acc.hi if hi is None else max(hi, acc.hi)
        if rows is not None:
            line_rows.append(rows)
    return line_rows, core_events, (lo, hi)


class _Batches:
    """Windows' columns handed on `BATCH_EVENTS` events at a time: the checks and the reduction
    cost a few dozen numpy calls per batch, whatever its size, and a window (small, to stay in
    the CPU caches) holds a few thousand events. The reduction concatenates its pending events
    anyway, so a batch adds no copy."""

    def __init__(self, sink):
        self.sink, self.chunks, self.n = sink, [], 0

    def __call__(self, *cols):
        self.chunks.append(cols)
        self.n += len(cols[0])
        if self.n >= BATCH_EVENTS:
            self.flush()

    def flush(self):
        if self.chunks:
            cols = concat(self.chunks)
            self.chunks, self.n = [], 0
            self.sink(*cols)


class _LineCheck:
    """`tpu.check_events` on each window of a line, with the line's running sums checked too (a
    window may hold, a line's sum not)."""

    def __init__(self, plane_name: str, fixes):
        self.plane_name, self.fixes = plane_name, fixes
        self.dur = self.stall = 0.0

    def __call__(self, cols):
        md, begin, dur, group, stall, occ = check_events(
            tuple(cols), self.plane_name, OPS_LINE, self.fixes
        )
        self.dur += float(dur.sum(dtype=np.float64))
        self.stall += float(stall.sum(dtype=np.float64))
        if self.dur >= TIME_LIMIT_PS or self.stall >= TIME_LIMIT_PS:
            raise ProfileFormatError(
                f"plane {self.plane_name[:100]!r}, line {OPS_LINE!r}: event "
                "durations beyond 2^62 ps (53 days): corrupt durations"
            )
        return md, begin, dur, group, stall, occ


def _timeline(core, span, steps, core_events, info_of, cache: dict, same_as):
    """This core's timeline facts (table/timeline.py), as the reference builds them; the facts
    of its ops are kept with the plane metadata's decoded ops, for the cores that share it."""
    got = cache.get(("timeline", same_as))
    if got is None or got[0] != len(info_of):
        facts = event_facts(
            (m, i.program_id, i.operation, i.category, i.caveat, i.is_container)
            for m, i in info_of.items()
            if i is not None
        )
        cache[("timeline", same_as)] = got = (len(info_of), facts)
    builder = TimelineBuilder()
    core_steps = [(int(g), int(b), int(d)) for g, b, d in zip(*(c.tolist() for c in steps))]
    add_core_events(builder, core, span, core_steps, core_events, got[1])
    return builder.build()


def _plane_result(core, ps, meta, programs, marks, line_rows, info_of, lo, hi) -> PlaneResult:
    per_line = [distinct(r[1][r[1] != NO_STEP]) for r in line_rows]
    op_groups = distinct(np.concatenate(per_line)) if per_line else np.zeros(0, np.int64)
    steps = step_spans(marks, op_groups)
    # One key per distinct known op of the plane; rows of unknown ops are dropped (counted).
    if len(line_rows) == 1:
        md, step, sums = line_rows[0]
    elif line_rows:
        md = np.concatenate([r[0] for r in line_rows])
        step = np.concatenate([r[1] for r in line_rows])
        sums = [
            None
            if all(r[2][i] is None for r in line_rows)
            else np.concatenate(
                [
                    r[2][i] if r[2][i] is not None else np.zeros(len(r[0]), np.int64)
                    for r in line_rows
                ]
            )
            for i in range(5)
        ]
    else:
        md = step = np.zeros(0, np.int64)
        sums = [np.zeros(0, np.int64)] * 5
    line_rows.clear()
    key_md, op = _codes(md)
    known_key = np.array([info_of.get(m) is not None for m in key_md.tolist()], bool)
    infos = [info_of[m] for m in key_md[known_key].tolist()]
    if known_key.all():
        dropped, keep = 0, slice(None)
    else:
        known = known_key[op]
        dropped = int(sums[3][~known].sum())
        op = (np.cumsum(known_key) - 1)[op[known]]
        keep = known
    rows: dict = {"op": _narrow(op), "step": _narrow(step[keep])}
    for name, col in zip(("time", "self", "stall", "occ", "span"), sums):
        # all-zero stalls and spans (the usual case) travel as None
        rows[name] = (
            None if col is None or not (name in ("time", "self", "occ") or col.any()) else col[keep]
        )
    rows["occ"] = _narrow(rows["occ"])
    rows["self"] = _sparse(rows["self"], rows["time"], "time")
    for name in ("stall", "span"):
        rows[name] = _sparse(rows[name], None, None)
    fields = dict(zip(Info._fields, zip(*infos))) if infos else dict.fromkeys(Info._fields, ())
    keys: dict = {k: list(fields[k]) for k in KEY_TEXTS + ("shape", "link")}
    keys["program"] = [programs.get(p, "") for p in fields["program_id"]]
    keys["per_exec"] = (
        np.frombuffer(b"".join(fields["per_exec"]), np.float64)
        .reshape(-1, len(COST_COLUMNS))
        .copy()
    )
    return PlaneResult(
        core=core,
        plane_stats=ps.as_dict(meta.stats),
        lo=lo,
        hi=hi,
        steps=steps,
        keys=keys,
        rows=rows,
        dropped_ops=dropped,
    )


class Sparse(NamedTuple):
    """A row column sent as its `values` at the rows `at` where it differs from another column
    of the plane (`like`; None: from zero): self time is the total time on most rows (ops that
    nest nothing), transfer spans are zero but on async ops' rows. A worker then sends back
    less (1.5 million rows: 29 MB, not 51), and the host's merge writes the column as it
    would (`tpu_file._put`)."""

    at: np.ndarray
    values: np.ndarray
    like: str | None


def _sparse(column, like_column, like: str | None):
    """`column` as a `Sparse` where it differs from `like_column` (None: zeros) on under a
    third of its rows, else as it is."""
    if column is None or not len(column):
        return column
    differ = column != like_column if like_column is not None else column != 0
    index = np.flatnonzero(differ)
    del differ
    if 3 * len(index) >= len(column):
        return column
    return Sparse(_narrow(index), column[index], like)


def _narrow(column: np.ndarray) -> np.ndarray:
    """An integer column as int32 where its values fit: what a worker sends back is a
    quarter smaller (op, step and executions of 1.5 million rows: 18 of 68 MB), and the
    host's table holds them so anyway (`tpu_file._int_types`)."""
    if not len(column) or column.dtype == np.int32:
        return column
    if int(column.min()) >= -(2**31) and int(column.max()) < 2**31:
        return column.astype(np.int32)
    return column


def _codes(values: np.ndarray):
    """(sorted distinct values, index of each value among them): by a table when the values
    are small non-negative ids, else by sorting."""
    if len(values) and int(values.min()) >= 0 and int(values.max()) < 4 * len(values) + 4096:
        seen = np.zeros(int(values.max()) + 1, bool)
        seen[values] = True
        uniq = np.flatnonzero(seen)
        where = np.zeros(len(seen), np.int64)
        where[uniq] = np.arange(len(uniq))
        return uniq, where[values]
    uniq, inv = np.unique(values, return_inverse=True)
    return uniq, inv.reshape(-1)
