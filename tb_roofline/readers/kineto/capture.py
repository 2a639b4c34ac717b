"""Graph-captured serving: kernels replayed from a CUDA/HIP graph, attributed to the ops that
launched them when the graph was captured (docs/pytorch_traces.md, "Graph capture").

A replayed graph's kernels all carry the correlation id of one `cudaGraphLaunch` /
`hipGraphLaunch`: the execution trace has their times but no op, no shapes. SGLang and vLLM can
write a second trace while they capture their graphs (SGLang: `capture/<bs>_rank<r>…`, vLLM:
`capture_traces/graph_capture_rank_…`), where each launch between `StreamBeginCapture` and
`StreamEndCapture` names its kernel and its op (with `Input Dims`). A graph launch is matched
to the capture window whose launched kernels are the same multiset of names; the k-th replay
of a kernel name is the k-th launch of that name at capture (so kernels of several streams may
interleave). The capture window's ops are then added to the execution trace inside the graph
launch's span (their times scaled into it, nesting kept) on a thread of their own, with one
launch per replayed kernel, and the reader attributes them as any other kernel. Windows that
tie (same kernels, other shapes, grids undecided) are named, never picked; a capture trace's
batch label (SGLang's `execution_details.json`) is checked against the replaying steps' batch.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import json
import os
import re

from tb_roofline.costs.hlo.fingerprint import grid_fingerprint
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers.kineto.event_fields import args_dict, dur_ns, int_or, ts_ns
from tb_roofline.readers.kineto.events import Collector
from tb_roofline.table.timeline import GRAPH_CAPTURE_CALLS

CAPTURE_DIRS = ("capture", "capture_traces")
_BEGIN, _END = frozenset(GRAPH_CAPTURE_CALLS[0]), frozenset(GRAPH_CAPTURE_CALLS[1])


class CaptureCollector(Collector):
    """A collector that also keeps what a capture trace needs: each op event, each kernel
    launch with its kernel name, and the capture windows."""

    COLUMNS = False  # its own add_op and _runtime read each event

    def __init__(self):
        super().__init__()
        self.raw_ops: list = []  # (thread, ts ns, dur ns, name, args, ext)
        # (ts ns, dur ns, thread, kernel name, External id, launch grid fingerprint)
        self.launches: list = []
        self.windows: list = []  # (thread, begin ns, end ns)
        self._begin: dict = {}

    def add_op(self, thread, ts, dur, name, args, ext):
        super().add_op(thread, ts, dur, name, args, ext)
        self.raw_ops.append((thread, ts, dur, name, args, ext))

    def _runtime(self, name, pid, tid, ts, dur, args):
        super()._runtime(name, pid, tid, ts, dur, args)
        args = args_dict(args)
        ts, dur = ts_ns(ts), dur_ns(dur)
        thread = self.thread_id(pid, tid)
        if name in _BEGIN:
            self._begin[thread] = ts
        elif name in _END and thread in self._begin:
            self.windows.append((thread, self._begin.pop(thread), ts + dur))
        elif "Launch" in name and type(args.get("kernel")) is str:
            self.launches.append(
                (
                    ts,
                    dur,
                    thread,
                    self.bounded(args["kernel"]),
                    int_or(args.get("External id"), -1),
                    grid_fingerprint(args.get("grid")),
                )
            )
        elif is_node_call(name):
            # CUDA's launch calls name no kernel: the node is known by its place in the window
            self.launches.append((ts, dur, thread, None, int_or(args.get("External id"), -1), ""))


def is_node_call(name: str) -> bool:
    """A runtime or driver call that adds one node to a graph being captured: a kernel launch
    (`cudaLaunchKernel`, `cudaLaunchKernelExC`, `cuLaunchKernelEx`, ...), an async copy or set."""
    if "GraphLaunch" in name:
        return False
    return (
        "LaunchKernel" in name
        or "LaunchCooperativeKernel" in name
        or (("Memcpy" in name or "Memset" in name) and "Async" in name)
    )


def capture_files(path: str, rank: int | None = None) -> list[str]:
    """The capture traces beside an execution trace (a `capture/` or `capture_traces/` folder
    in its directory); of several ranks' (`…rank_0…`, `…rank0…`), this rank's."""
    here = os.path.dirname(os.path.abspath(path))
    out = []
    for sub in CAPTURE_DIRS:
        d = os.path.join(here, sub)
        if os.path.isdir(d):
            out += sorted(
                os.path.join(d, f)
                for f in os.listdir(d)
                if f.endswith((".json", ".json.gz")) and f != "execution_details.json"
            )
    if rank is not None:
        mine = [f for f in out if re.search(rf"rank_?{rank}(?!\d)", os.path.basename(f))]
        if mine:
            return mine
    return out


def _windows(cap: CaptureCollector) -> list[tuple]:
    """Per capture window: (begin, end, its launches in time order, its ops) — by bisection
    in per-thread time order (a vLLM capture trace holds a window per graph piece and batch
    size)."""
    launches, ops = collections.defaultdict(list), collections.defaultdict(list)
    for x in sorted(cap.launches, key=lambda x: x[:3]):
        launches[x[2]].append(x)
    for o in sorted(cap.raw_ops, key=lambda o: (o[0], o[1])):
        ops[o[0]].append(o)
    l_ts = {t: [x[0] for x in v] for t, v in launches.items()}
    o_ts = {t: [o[1] for o in v] for t, v in ops.items()}
    out = []
    for thread, begin, end in cap.windows:
        lt, ot = l_ts.get(thread, []), o_ts.get(thread, [])
        mine = launches[thread][bisect.bisect_left(lt, begin) : bisect.bisect_right(lt, end)]
        named = [x for x in mine if x[3] is not None]
        mine = named or mine  # unnamed nodes count only where no launch names its kernel
        if mine:
            out.append(
                (
                    begin,
                    end,
                    mine,
                    ops[thread][bisect.bisect_left(ot, begin) : bisect.bisect_right(ot, end)],
                )
            )
    return out


def _names_key(names) -> tuple:
    names = list(names)
    if names and names[0] is None:  # a CUDA window: its nodes are known by count and order
        return (("", len(names)),)
    return tuple(sorted(collections.Counter(names).items()))


def _choose(candidates: list, grids: tuple[str, ...]):
    """The capture window for one graph launch among those launching the same kernel names:
    any when their ops have the same shapes (pieces of one graph), else the one whose launch
    grids agree with the replayed kernels' (where the trace records them); None when that
    does not decide (windows of several batch sizes launching the same kernels)."""
    if not candidates:
        return None
    if _same_shapes(candidates):
        return candidates[0]
    wanted = collections.Counter(g for g in grids if g)
    if not wanted:
        return None
    agree = [
        w for w in candidates if collections.Counter(x[5] for x in w[2] if x[5]) & wanted == wanted
    ]
    return agree[0] if agree and _same_shapes(agree) else None


def _same_shapes(windows: list) -> bool:
    """Whether the windows' ops are the same calls (names and shapes, in order)."""
    return len({tuple((o[3], repr(o[4].get("Input Dims"))) for o in w[3]) for w in windows}) == 1


def _first_op(window) -> str:
    """A tied window's first captured op and its input dims, to tell the windows apart."""
    ops = window[3]
    if not ops:
        return "no ops"
    return f"{ops[0][3]} {str(ops[0][4].get('Input Dims'))[:60]}"


@dataclasses.dataclass
class Merged:
    """What `merge` did: kernels attributed and replayed, the ties (per undecided launch group:
    its kernels, the tied windows' first ops) and, per capture used, its graph launches' times."""

    attributed: int = 0
    replayed: int = 0
    ties: list = dataclasses.field(default_factory=list)
    used: dict = dataclasses.field(default_factory=dict)  # capture index -> [launch ts ns]


def _by_position(col, windows, batches: dict, source: dict, kernels, ts, graphs: int):
    """The capture window for one graph launch whose capture names no kernels (CUDA): the
    windows of as many nodes as the launch replayed kernels, on one stream (so replay order is
    capture order). One such window, or windows of the same shapes, are taken where the trace
    replays one graph of that size (`graphs`: how many kernel sequences of that length it
    replays; two could be two buckets, one of them not captured); of several with other
    shapes, the one whose batch label (`batches`: capture index -> batch) is the batch of the
    serving step replaying it and the leading dimension of its first op's input; else None,
    and the tie is said. Returns (window, tied)."""
    if len({col.gpu_stream[i] for i in kernels}) != 1:
        return None, []
    found = windows.get(_names_key([None] * len(kernels)), [])
    if (len(found) == 1 or (found and _same_shapes(found))) and graphs == 1:
        return found[0], []
    step = [f.batch for _, s, d, f in col.serving if f.batch is not None and s <= ts <= s + d]
    agree = [
        w
        for w in found
        if step and batches.get(source[id(w)]) == step[0] and _leading_dim(w) == step[0]
    ]
    if len(agree) == 1:
        return agree[0], []
    return None, found


def _leading_dim(window) -> int | None:
    """The first dimension of the window's first op's first input: a decode step's batch (a
    label SGLang can get wrong is taken only when the recorded shapes bear it out)."""
    for op in window[3]:
        dims = op[4].get("Input Dims")
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0]:
            return int_or(dims[0][0], None)
    return None


def merge(col: Collector, captures: list, names_of, batches: dict | None = None) -> Merged:
    """Attribute the replayed kernels of `col` to the ops of matching capture windows
    (`captures`: CaptureCollectors; `batches`: capture index -> the batch its label states)."""
    windows = collections.defaultdict(list)  # the multiset of kernel names -> windows
    source: dict = {}  # id of a window -> the index of its capture
    for ci, cap in enumerate(captures):
        for w in _windows(cap):
            windows[_names_key(x[3] for x in w[2])].append(w)
            source[id(w)] = ci
    used: dict = collections.defaultdict(list)
    by_corr, sequences = _replays(col)
    grid_names = {v: k for k, v in col.grids.items()}
    chosen: dict = {}
    ids = _NextIds(
        max(list(col.rt_corr) + list(col.gpu_corr) + [0]) + 1,
        max(list(col.op_ext) + list(col.rt_ext) + [0]) + 1,
    )
    attributed = replayed = 0
    ties: dict = {}
    for g, (corr, _thread, ts, dur) in enumerate(col.graph_launches):
        kernels = by_corr.get(corr, [])
        replayed += len(kernels)
        if not kernels:
            continue
        names = [names_of[col.gpu_name[i]] for i in kernels]
        key = _names_key(names)
        grids = tuple(grid_names.get(col.gpu_grid[i], "") for i in kernels)
        tied = windows.get(key, [])
        if (key, grids) not in chosen:  # a step's graph replays alike: decide once
            chosen[(key, grids)] = (
                (_choose(tied, grids), tied)
                if tied
                else _by_position(
                    col, windows, batches or {}, source, kernels, ts, len(sequences[len(names)])
                )
            )
        w, tied = chosen[(key, grids)]
        if w is None:
            # several windows launched these kernels with other shapes (batch-size buckets)
            # and nothing decided between them: a tie, said, never picked
            if len(tied) > 1:
                n, firsts = ties.get((key, grids), (0, [_first_op(t) for t in tied]))
                ties[(key, grids)] = (n + len(kernels), firsts)
            continue
        used[source[id(w)]].append(ts)
        _replay_window(col, ids, w, (g, corr, ts, dur), kernels, names)
        attributed += len(kernels)
    return Merged(attributed, replayed, list(ties.values()), dict(used))


def _replays(col: Collector) -> tuple[dict, dict]:
    """(each graph launch's correlation -> its replayed kernels by start, the number of
    kernels of a replay -> the name sequences replays of that many kernels ran)."""
    by_corr = collections.defaultdict(list)
    launch_corrs = {corr for corr, *_ in col.graph_launches}
    for i, corr in enumerate(col.gpu_corr):
        if corr in launch_corrs:
            by_corr[corr].append(i)
    for kernels in by_corr.values():
        kernels.sort(key=lambda i: col.gpu_ts[i])
    sequences = collections.defaultdict(set)
    for corr, *_ in col.graph_launches:
        order = by_corr.get(corr, [])
        sequences[len(order)].add(tuple(col.gpu_name[i] for i in order))
    return by_corr, sequences


@dataclasses.dataclass
class _NextIds:
    """The next correlation and external ids free for the ops and launches a replay gets."""

    corr: int
    ext: int


def _replay_window(col: Collector, ids: _NextIds, w, launch, kernels: list, names: list):
    """Copy window `w`'s ops onto a thread of graph launch `launch` (index, correlation,
    start, duration), scaled into its span, and give each replayed kernel a launch of its
    own, matched to the window's launches by kernel name in order."""
    g, corr, ts, dur = launch
    begin, end, launches, ops = w
    span = max(end - begin, 1)

    def at(t):
        return ts + (t - begin) * dur // span

    new_thread = col.thread_id(("graph capture", g), 0)
    ext_map = {}
    for _, ots, odur, name, args, ext in ops:
        ext_map[ext] = ids.ext
        col.add_op(new_thread, at(ots), max(at(ots + odur) - at(ots), 0), name, args, ids.ext)
        ids.ext += 1
    queue: collections.defaultdict[str | None, collections.deque] = collections.defaultdict(
        collections.deque
    )
    for x in launches:
        queue[x[3]].append(x)
    for i, name in zip(kernels, names):
        lts, ldur, _, _, lext, _ = queue[name if None not in queue else None].popleft()
        col.gpu_corr[i] = ids.corr
        col.launch_alias[ids.corr] = corr
        col.rt_corr.append(ids.corr)
        col.rt_ext.append(ext_map.get(lext, -1))
        col.rt_thread.append(new_thread)
        col.rt_ts.append(at(lts))
        col.rt_dur.append(max(at(lts + ldur) - at(lts), 0))
        col.rt_launch.append(True)
        ids.corr += 1


def _stem(name: str) -> str:
    """A capture file's name without its trace suffixes (`bs_32_rank0.pt.trace.json.gz` and
    SGLang's listing of it, `bs_32_rank0.json.gz`, are one file)."""
    name = os.path.basename(name)
    for suffix in (".gz", ".json", ".pt.trace"):
        name = name.removesuffix(suffix)
    return name


def batch_labels(files: list) -> dict:
    """The batch size SGLang's `execution_details.json` (beside its capture traces) gives each
    capture file: stem -> batch; {} when there is none or it cannot be read."""
    out: dict = {}
    for d in {os.path.dirname(f) for f in files}:
        try:
            with open(os.path.join(d, "execution_details.json"), "rb") as fh:
                entries = json.loads(fh.read(1 << 20))
        except (OSError, ValueError):
            continue
        for e in entries if isinstance(entries, list) else []:
            if isinstance(e, dict) and isinstance(e.get("file"), str):
                batch = int_or(e.get("batch_size"), None)
                if batch is not None:
                    out[_stem(e["file"])] = batch
    return out


def file_batch(path: str, labels: dict) -> int | None:
    """The batch a capture file states: SGLang's `execution_details.json` label, else a
    `bs<N>` / `bs_<N>` in its name (SGLang's `bs_32_rank0`); None when neither says."""
    got = labels.get(_stem(path))
    if got is not None:
        return got
    m = re.search(r"(?:^|[^a-z0-9])bs_?(\d+)(?!\d)", os.path.basename(path), re.I)
    return int(m.group(1)) if m else None


def _label_notes(col: Collector, used: dict, files: list, labels: dict) -> list:
    """Cross-check a capture trace's batch label against the batch of the steps replaying its
    graphs (SGLang labels a capture trace with the wrong batch size when one bucket captures
    two graphs): the windows are matched by their kernels and their recorded shapes are what
    is used, never the label; say so where the two disagree."""
    steps = [(ts, ts + dur, f.batch) for _, ts, dur, f in col.serving if f.batch is not None]
    out = []
    for ci, launches in sorted(used.items()):
        label = labels.get(_stem(files[ci]))
        batches = sorted({b for t in launches for lo, hi, b in steps if lo <= t <= hi})
        if label is None or not batches or batches == [label]:
            continue
        out.append(
            Diagnostic(
                "warning",
                "capture_batch_label",
                f"capture trace {os.path.basename(files[ci])} is labelled batch {label} "
                "(execution_details.json), but the steps replaying its graphs run batch "
                f"{', '.join(map(str, batches))}: its windows were matched by their kernels "
                "(and launch grids) and the shapes recorded at capture were used, not the label",
            )
        )
    return out


def _tie_note(kernels: int, firsts: list) -> Diagnostic:
    return Diagnostic(
        "warning",
        "graph_capture_tie",
        f"{kernels} replayed kernels match {len(firsts)} capture windows that launched the same "
        f"kernels with other shapes (batch-size buckets: {'; '.join(firsts)}); the launch "
        "grids do not decide and no capture record names the op of a graph node id "
        "(docs/serving.md), so none was picked: these kernels stay unattributed rather than "
        "costed with another batch's shapes",
    )


def attach(col: Collector, path: str, load) -> None:
    """Read the capture traces beside `path` (`load(path)` → CaptureCollector) into `col`, and
    say in `col.notes` what was matched or why nothing could be."""
    if not col.graph_launches:
        if any(n in _BEGIN for n, *_ in col.host_calls):
            col.notes.append(
                Diagnostic(
                    "info",
                    "graph_capture_trace",
                    "this trace records CUDA/HIP graph capture: its launches record graphs, the "
                    "device barely runs, so its time is not the workload's. The execution trace "
                    "(the one with the graph launches) is needed for the serving roofline; this "
                    "one gives it the ops and shapes of the replayed kernels",
                )
            )
        return
    names_of = {i: n for n, i in col.names.items()}
    dist = col.meta.get("distributedInfo")
    files = capture_files(path, int_or(dist.get("rank"), None) if isinstance(dist, dict) else None)
    captures, unreadable, readable = [], [], []
    for i, f in enumerate(files):
        try:
            captures.append(load(f))
            readable.append(i)
        except (ProfileFormatError, OSError) as exc:
            unreadable.append(f"{os.path.basename(f)} ({exc})")
    labels = batch_labels(files)
    batches = {
        k: b for k, i in enumerate(readable) if (b := file_batch(files[i], labels)) is not None
    }
    merged = merge(col, captures, names_of, batches) if captures else Merged()
    done, replayed = merged.attributed, merged.replayed
    col.notes += [_tie_note(n, firsts) for n, firsts in merged.ties]
    col.notes += _label_notes(col, merged.used, [files[i] for i in readable], labels)
    if not replayed:
        graphs = {g[0] for g in col.graph_launches}  # once, not once per kernel
        replayed = sum(1 for c in col.gpu_corr if c in graphs)
    if done == replayed:
        col.notes.append(
            Diagnostic(
                "info",
                "graph_capture",
                f"{done} kernels replayed from {len(col.graph_launches)} graph launches were "
                f"attributed to the ops recorded when the graphs were captured "
                f"({', '.join(os.path.basename(f) for f in files)})",
            )
        )
        return
    why = (
        "no capture trace beside this one (a capture/ or capture_traces/ folder)"
        if not files
        else "no capture window launched the same kernels (or several did, "
        "with other shapes, and the launch grids do not say which; a CUDA capture trace names "
        "no kernels, so its windows are matched by their node count, one stream, and where "
        "several tie by the batch their file and the replaying serving step state)"
        + (f"; unreadable: {', '.join(unreadable)}" if unreadable else "")
    )
    col.notes.append(
        Diagnostic(
            "warning",
            "graph_replay_without_capture",
            f"{replayed - done} of {replayed} kernels replay CUDA/HIP graphs whose ops were "
            f"recorded only when the graphs were captured: {why}. They are rows named after the "
            "kernel, without FLOPs. Profile the capture too (SGLang and vLLM write a capture "
            "trace per batch size) and put it in a capture/ folder beside this trace",
        )
    )
