"""Seeded synthetic TPU XSpaces: the demo logdir, the conformance tests and the benchmark.

The layout follows what real TPU profiles carry (docs/xspace_format.md, "The layout"): one
`/device:TPU:N` plane per TensorCore with its peaks as plane stats, lines `Steps`, `XLA Modules` and
`XLA Ops`, op metadata with per-execution FLOPs and a `memory_access_breakdown`, nested ops inside
`while` bodies, infeed/outfeed ops, SparseCore planes and a `Task Environment` plane.
"""

from __future__ import annotations

import dataclasses
import os
import random
from typing import Any

from tb_roofline.devices.interconnect import interconnect
from tb_roofline.protos import memory_access_pb2, xplane_pb2

HBM, CMEM, VMEM = 1, 2, 3
READ, WRITE = 1, 2

# Per-TensorCore peaks as real profiles report them (TFLOP/s, GB/s).
CHIPS: dict[str, dict[str, Any]] = {
    "v6e": dict(
        device_type_string="TPU v6 Lite",
        peak_teraflops_per_second=918.0,
        peak_hbm_bw_gigabytes_per_second=1637.99,
        peak_sram_rd_bw_gigabytes_per_second=0.0,
        peak_sram_wr_bw_gigabytes_per_second=0.0,
        peak_cmem_rd_bw_gigabytes_per_second=0.0,
        peak_cmem_wr_bw_gigabytes_per_second=0.0,
        peak_vmem_rd_bw_gigabytes_per_second=23296.01,
        peak_vmem_wr_bw_gigabytes_per_second=16128.03,
        has_megacore=0,
        has_merged_vmem=1,
    ),
    "v4": dict(
        device_type_string="TPU v4",
        peak_teraflops_per_second=137.5,
        peak_hbm_bw_gigabytes_per_second=600.0,
        peak_sram_rd_bw_gigabytes_per_second=0.0,
        peak_sram_wr_bw_gigabytes_per_second=0.0,
        peak_cmem_rd_bw_gigabytes_per_second=2048.0,
        peak_cmem_wr_bw_gigabytes_per_second=1536.0,
        peak_vmem_rd_bw_gigabytes_per_second=0.0,
        peak_vmem_wr_bw_gigabytes_per_second=0.0,
        has_megacore=1,
        has_merged_vmem=0,
    ),
}

# (category, name prefix, FLOPs per byte) templates for generated HLO ops.
OP_KINDS = [
    ("convolution fusion", "convolution_fusion", 300.0),
    ("convolution", "convolution", 150.0),
    ("loop fusion", "loop_fusion", 0.4),
    ("output fusion", "output_fusion", 2.0),
    ("data formatting", "copy", 0.0),
    ("all-reduce", "all-reduce", 0.0),
    ("non-fusion elementwise", "add", 0.25),
    ("reduce", "reduce", 1.0),
]


@dataclasses.dataclass
class SynthConfig:
    seed: int = 0
    chip: str = "v6e"
    num_cores: int = 2
    num_steps: int = 4
    ops_per_step: int = 24
    distinct_ops: int = 12
    with_steps: bool = True
    with_infeed_outfeed: bool = True
    with_while: bool = True
    with_sparse_core: bool = True
    with_device_timing: bool = True
    hostname: str = "host0"
    program_seed: int | None = None  # hosts of one SPMD job share the program: same seed here
    host_offload_pairs: int = 0  # async copy-start/copy-done pairs to and from host memory
    # HLO text of named ops (their shapes), e.g. {"convolution.1": "%convolution.1 = bf16[...]
    # convolution(...)"}; others get f32[128,1024].
    op_text: dict = dataclasses.field(default_factory=dict)
    # As a compiled program runs: each op once per step, in a fixed order, each with its own
    # output shape (ops_per_step is then ignored). The default draws ops at random.
    fixed_program: bool = False
    # "random": each step draws its ops at random from the templates; "cycle": the templates in
    # order (ops_per_step = distinct_ops runs every op exactly once per step: the benchmark's
    # unique-op shape).
    op_order: str = "random"


# Stats XProf reads with `IntValue()` (int64 only: a uint64_value reads as 0). `group_id` is one:
# the Steps-line markers' group id is read that way, so uint64 ids would all collapse into step 0.
# XProf itself writes group_id as int64 (EventNode::SetGroupId).
INT64_STATS = frozenset({"group_id"})


class _Plane:
    """Builds one XPlane with interned stat and event metadata."""

    def __init__(self, plane: xplane_pb2.XPlane):
        self.plane = plane
        self._stat_ids: dict[str, int] = {}
        self._next_event_id = 1

    def stat_id(self, name: str) -> int:
        if name not in self._stat_ids:
            sid = len(self._stat_ids) + 1
            self._stat_ids[name] = sid
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
        return self._stat_ids[name]

    def add_stat(self, holder, name, value):
        stat = holder.stats.add(metadata_id=self.stat_id(name))
        if isinstance(value, bool):
            stat.int64_value = int(value)
        elif isinstance(value, int):
            if value < 0 or name in INT64_STATS:
                stat.int64_value = value
            else:
                stat.uint64_value = value
        elif isinstance(value, float):
            stat.double_value = value
        elif isinstance(value, bytes):
            stat.bytes_value = value
        elif isinstance(value, _Ref):
            stat.ref_value = self.stat_id(value.text)
        else:
            stat.str_value = str(value)
        return stat

    def event_metadata(self, name, display_name="", **stats):
        mid = self._next_event_id
        self._next_event_id += 1
        md = self.plane.event_metadata[mid]
        md.id = mid
        md.name = name
        md.display_name = display_name
        for key, value in stats.items():
            self.add_stat(md, key, value)
        return md


@dataclasses.dataclass(frozen=True)
class _Ref:
    """A string stat written by reference (`ref_value`), as real profiles do for repeated text."""

    text: str


def _breakdown_entries(rng: random.Random, total_bytes: int, chip: str) -> list:
    if total_bytes <= 0:
        return []
    hbm_read = int(total_bytes * rng.uniform(0.3, 0.6))
    hbm_write = int(total_bytes * rng.uniform(0.1, 0.3))
    entries = [(READ, HBM, hbm_read), (WRITE, HBM, hbm_write)]
    on_chip = CMEM if chip == "v4" else VMEM
    entries += [
        (READ, on_chip, int(total_bytes * rng.uniform(0.5, 3.0))),
        (WRITE, on_chip, int(total_bytes * rng.uniform(0.2, 1.5))),
    ]
    return entries


def _breakdown(entries: list) -> bytes:
    msg = memory_access_pb2.MemoryAccessBreakdown()
    for op_type, space, nbytes in entries:
        msg.memory_accessed.add(operation_type=op_type, memory_space=space, bytes_accessed=nbytes)
    return msg.SerializeToString()


def _roofline_time_ps(flops: float, entries: list, chip: str) -> float:
    """The shortest time the chip's roofs allow (ps): a generated op never beats them."""
    c = CHIPS[chip]
    per_ps = {  # bytes per ps = GB/s / 1000
        (READ, HBM): c["peak_hbm_bw_gigabytes_per_second"] / 1000,
        (WRITE, HBM): c["peak_hbm_bw_gigabytes_per_second"] / 1000,
        (READ, CMEM): c["peak_cmem_rd_bw_gigabytes_per_second"] / 1000,
        (WRITE, CMEM): c["peak_cmem_wr_bw_gigabytes_per_second"] / 1000,
        (READ, VMEM): c["peak_vmem_rd_bw_gigabytes_per_second"] / 1000,
        (WRITE, VMEM): c["peak_vmem_wr_bw_gigabytes_per_second"] / 1000,
    }
    hbm = sum(b for _, space, b in entries if space == HBM)
    times = [flops / c["peak_teraflops_per_second"], hbm / per_ps[(READ, HBM)]]
    times += [
        b / per_ps[(t, space)] for t, space, b in entries if space != HBM and per_ps[(t, space)] > 0
    ]
    return max(times)


def _link_time_ps(cfg: SynthConfig, nbytes: int) -> float:
    """The shortest time a generated all-reduce of its output shape (see make_tpu_xspace) takes
    on the chip's ICI roof (devices/interconnect.py): its nccl-tests bus bytes over all the
    host's cores (the group the reader assumes without replica groups) at that rate."""
    rows = max(1, nbytes // 8192) if cfg.fixed_program else 128
    n = max(cfg.num_cores, 1)
    bus = rows * 1024 * 4 * 2.0 * (n - 1) / n
    link = interconnect(f"tpu-{cfg.chip}")
    if link is None:
        raise ValueError(f"no ICI figure for chip {cfg.chip!r} (devices/interconnect.py)")
    return bus / (link.value / 1000)


def _op_templates(rng: random.Random, cfg: SynthConfig, program_id: int):
    """Distinct HLO ops of one program: (metadata kwargs, name, duration_ps). Each op runs at a
    random efficiency (3-85%) of its tightest roof, never above it."""
    ops = []
    for i in range(cfg.distinct_ops):
        category, prefix, intensity = OP_KINDS[i % len(OP_KINDS)]
        name = f"{prefix}.{i}"
        nbytes = rng.randint(1 << 16, 1 << 26)
        flops = int(nbytes * intensity * rng.uniform(0.5, 2.0))
        entries = _breakdown_entries(rng, nbytes, cfg.chip)
        floor = max(
            _roofline_time_ps(flops, entries, cfg.chip),
            _link_time_ps(cfg, nbytes) if category == "all-reduce" else 0.0,
        )
        duration = max(int(floor / rng.uniform(0.03, 0.85)), 2_000_000)
        ops.append(
            dict(
                name=name,
                category=category,
                flops=flops,
                bytes=nbytes,
                breakdown=_breakdown(entries),
                duration_ps=duration,
                source=f"model/layers.py:{10 + i}",
                tf_op=f"jit(train_step)/{prefix}",
            )
        )
    if cfg.with_infeed_outfeed:
        ops.append(
            dict(
                name="infeed.1",
                category="infeed",
                flops=0,
                bytes=1 << 20,
                breakdown=_breakdown(_breakdown_entries(rng, 1 << 20, cfg.chip)),
                duration_ps=rng.randint(50_000_000, 300_000_000),
                source="",
                tf_op="",
            )
        )
        ops.append(
            dict(
                name="outfeed.2",
                category="outfeed",
                flops=0,
                bytes=1 << 12,
                breakdown=_breakdown(_breakdown_entries(rng, 1 << 12, cfg.chip)),
                duration_ps=rng.randint(5_000_000, 30_000_000),
                source="",
                tf_op="",
            )
        )
    return ops


def _host_offload_templates(rng: random.Random, cfg: SynthConfig) -> list:
    """Async copies to and from host memory (S(5)), as host offload compiles them: a short
    `copy-start` that issues the DMA and a `copy-done` that waits for it; no memory breakdown
    (docs/xspace_format.md, "The layout"). The HLO text in the metadata name carries the layouts."""
    out = []
    for i in range(cfg.host_offload_pairs):
        rows = 256 * (1 + rng.randrange(16))
        size = rows * 1024 * 4
        host, dev = f"f32[{rows},1024]{{1,0:T(8,128)S(5)}}", f"f32[{rows},1024]{{1,0:T(8,128)}}"
        to_host = i % 2 == 0
        dst, src = (host, dev) if to_host else (dev, host)
        ctx = "u32[]{:S(2)}"
        start, done = f"copy-start.{100 + i}", f"copy-done.{100 + i}"
        src_name = f"fusion.{200 + i}" if to_host else f"param.{300 + i}"
        out.append(
            dict(
                name=start,
                category="copy-start",
                flops=0,
                bytes=3 * size + 4,
                breakdown=b"",
                text=f"%{start} = ({dst}, {src}, {ctx}) copy-start({src} %{src_name})",
                duration_ps=rng.randint(1_000_000, 2_000_000),
                source="",
                tf_op="offload",
            )
        )
        out.append(
            dict(
                name=done,
                category="copy-done",
                flops=0,
                bytes=3 * size + 4,
                breakdown=b"",
                text=f"%{done} = {dst} copy-done(({dst}, {src}, {ctx}) %{start})",
                duration_ps=rng.randint(20_000_000, 200_000_000),
                source="",
                tf_op="offload",
            )
        )
    return out


def make_tpu_xspace(cfg: SynthConfig | None = None) -> xplane_pb2.XSpace:
    """One host's XSpace: `cfg.num_cores` TensorCores, each running `cfg.num_steps` steps."""
    cfg = cfg or SynthConfig()
    rng = random.Random(cfg.seed)
    space = xplane_pb2.XSpace(hostnames=[cfg.hostname])
    program_seed = cfg.seed if cfg.program_seed is None else cfg.program_seed
    program_id = 1000 + program_seed
    program_rng = random.Random(program_seed)
    templates = _op_templates(program_rng, cfg, program_id)
    offload = _host_offload_templates(program_rng, cfg)
    start_ns = 5_000_000_000  # device clock ns; absolute ps offsets must fit int64
    for core in range(cfg.num_cores):
        plane = _Plane(space.planes.add(id=core, name=f"/device:TPU:{core}"))
        _core_stats(plane, CHIPS[cfg.chip])
        lines = [
            plane.plane.lines.add(id=1, name="Steps", display_name="Steps", timestamp_ns=start_ns),
            plane.plane.lines.add(id=2, name="XLA Modules", timestamp_ns=start_ns),
            plane.plane.lines.add(id=3, name="XLA Ops", timestamp_ns=start_ns),
        ]
        mds = _core_metadata(plane, cfg, templates, offload, program_id)
        t_ps = rng.randint(1_000_000, 5_000_000)
        for step in range(cfg.num_steps):
            step_start = t_ps
            events, t_ps = _step_events(rng, cfg, templates, offload, mds, t_ps)
            _write_step(plane, cfg, lines, mds[2], step, events, (step_start, t_ps), start_ns)
            t_ps += rng.randint(2_000_000, 20_000_000)  # idle gap between steps
        if not cfg.with_steps:
            plane.plane.lines.remove(lines[0])
        if cfg.with_sparse_core:
            _sparse_core_plane(space, core, cfg, start_ns)
    env = _Plane(space.planes.add(id=999, name="Task Environment"))
    env.add_stat(env.plane, "profile_start_time", start_ns)
    env.add_stat(env.plane, "profile_stop_time", start_ns + 10_000_000)
    return space


def _core_stats(plane: _Plane, chip: dict):
    for key, value in chip.items():
        if key.startswith("has_"):  # XProf reads these flags as int64 only
            plane.plane.stats.add(metadata_id=plane.stat_id(key), int64_value=int(value))
        else:
            plane.add_stat(plane.plane, key, value)


def _core_metadata(plane: _Plane, cfg: SynthConfig, templates, offload, program_id: int):
    """(op name -> (metadata, template), the while loop's metadata or None, the module's)."""
    op_md = {}
    for symbol_id, tpl in enumerate(templates + offload, start=1):
        total = tpl["bytes"]
        stats = dict(
            program_id=program_id,
            symbol_id=symbol_id,
            hlo_category=_Ref(tpl["category"]),
            flops=tpl["flops"],
            model_flops=int(tpl["flops"] * 0.9),
            bytes_accessed=total,
            raw_bytes_accessed=total,
        )
        if tpl["breakdown"]:
            stats["memory_access_breakdown"] = tpl["breakdown"]
        shape = f"f32[{max(1, total // 8192)},1024]" if cfg.fixed_program else "f32[128,1024]"
        md = plane.event_metadata(
            tpl.get("text")
            or cfg.op_text.get(tpl["name"])
            or f"%{tpl['name']} = {shape}{{1,0}} {tpl['category']}(...)",
            tpl["name"],
            **stats,
            shape_with_layout=f"{shape}{{1,0}}",
            tf_op=tpl["tf_op"],
            source=tpl["source"],
            deduplicated_name="",
        )
        op_md[tpl["name"]] = (md, tpl)
    while_md = None
    if cfg.with_while:
        while_md = plane.event_metadata(
            "%while.9 = (f32[]) while(...)",
            "while.9",
            program_id=program_id,
            symbol_id=len(templates) + len(offload) + 1,
            hlo_category=_Ref("while"),
            flops=0,
            model_flops=0,
            bytes_accessed=0,
        )
        while_md.child_id.extend([op_md[t["name"]][0].id for t in templates[:3]])
    module_md = plane.event_metadata(
        f"jit_train_step({program_id})", "jit_train_step", program_id=program_id
    )
    return op_md, while_md, module_md


def _chosen_ops(rng: random.Random, cfg: SynthConfig, templates) -> list:
    if cfg.fixed_program:
        chosen = list(templates)
    elif cfg.op_order == "cycle":
        regular = templates[: cfg.distinct_ops]
        chosen = [regular[i % len(regular)] for i in range(cfg.ops_per_step)]
    else:
        chosen = [templates[rng.randrange(len(templates))] for _ in range(cfg.ops_per_step)]
    if cfg.with_infeed_outfeed:
        inner = [c for c in chosen if c["category"] not in ("infeed", "outfeed")]
        chosen = [templates[-2]] + inner + [templates[-1]]
    return chosen


def _step_events(rng: random.Random, cfg: SynthConfig, templates, offload, mds, t_ps: int):
    """One step's (metadata, offset, duration) op events, sorted, and the time it ends."""
    op_md, while_md, _ = mds
    chosen = _chosen_ops(rng, cfg, templates)
    events = []
    for i, tpl in enumerate(chosen):
        if while_md is not None and i == len(chosen) // 2:
            # A while loop whose body runs three nested ops.
            body_start = t_ps
            for inner in templates[:3]:
                events.append((op_md[inner["name"]][0], t_ps, inner["duration_ps"]))
                t_ps += inner["duration_ps"] + rng.randint(0, 200_000)
            events.append((while_md, body_start - 100_000, t_ps - body_start + 200_000))
            t_ps += 200_000
        halves = offload[0::2] if i == 1 else offload[1::2] if i == len(chosen) - 1 else []
        for half in halves:  # copies issued early in the step, waited for at its end
            duration = int(half["duration_ps"] * rng.uniform(0.9, 1.1))
            events.append((op_md[half["name"]][0], t_ps, duration))
            t_ps += duration + rng.randint(0, 200_000)
        duration = int(tpl["duration_ps"] * rng.uniform(0.9, 1.1))
        events.append((op_md[tpl["name"]][0], t_ps, duration))
        t_ps += duration + rng.randint(0, 1_000_000)
    events.sort(key=lambda e: (e[1], -e[2]))
    return events, t_ps


def _write_step(
    plane: _Plane, cfg: SynthConfig, lines, module_md, step: int, events, span, start_ns: int
):
    """A step's op events, its module event and (with steps) its step marker."""
    steps_line, modules_line, ops_line = lines
    step_start, t_ps = span
    for md, offset, duration in events:
        ev = ops_line.events.add(metadata_id=md.id, offset_ps=offset, duration_ps=duration)
        if cfg.with_steps:
            plane.add_stat(ev, "group_id", step)
        if cfg.with_device_timing:
            # Absolute ps, as the profiler writes it.
            plane.add_stat(ev, "device_offset_ps", start_ns * 1000 + offset)
            plane.add_stat(ev, "device_duration_ps", duration)
    mod_ev = modules_line.events.add(
        metadata_id=module_md.id, offset_ps=step_start, duration_ps=t_ps - step_start
    )
    plane.add_stat(mod_ev, "run_id", step)
    if cfg.with_steps:
        plane.add_stat(mod_ev, "group_id", step)
        step_md = plane.event_metadata(str(step))
        step_ev = steps_line.events.add(
            metadata_id=step_md.id,
            offset_ps=step_start - 50_000,
            duration_ps=t_ps - step_start + 100_000,
        )
        plane.add_stat(step_ev, "group_id", step)
        plane.add_stat(step_ev, "step_num", step)


def _sparse_core_plane(space, core: int, cfg: SynthConfig, start_ns: int):
    sc = _Plane(space.planes.add(id=100 + core, name=f"/device:TPU:{core} SparseCore 0"))
    if cfg.with_steps:
        # A grouped XSpace (as XProf leaves it) has `group_id` stat metadata on every plane.
        # XProf re-groups (renumbering the Steps markers 0, 1, ... by position on each core)
        # unless every /device:TPU: plane, SparseCore ones included, declares group_id.
        sc.stat_id("group_id")
    line = sc.plane.lines.add(id=1, name="XLA Ops", timestamp_ns=start_ns)
    md = sc.event_metadata(
        "%sc_gather = f32[8] gather(...)",
        "sc_gather",
        flops=10,
        bytes_accessed=100,
        hlo_category=_Ref("gather"),
    )
    line.events.add(metadata_id=md.id, offset_ps=1000, duration_ps=5000)


def write_xspace(space: xplane_pb2.XSpace, path: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(space.SerializeToString())
    return path


def write_tpu_session(logdir: str, run: str, session: str, cfgs: list[SynthConfig]) -> list[str]:
    """Write one profiling session (one file per host) as TensorBoard's layout expects."""
    base = (
        os.path.join(logdir, run, "plugins", "profile", session)
        if run
        else os.path.join(logdir, "plugins", "profile", session)
    )
    return [
        write_xspace(make_tpu_xspace(c), os.path.join(base, f"{c.hostname}.xplane.pb"))
        for c in cfgs
    ]
