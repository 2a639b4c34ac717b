"""PyTorch profiler traces (Kineto JSON, `*.pt.trace.json[.gz]`) → op table, steps, core spans.

The reader by stage (docs/pytorch_traces.md has the facts and choices):
1. `stream`: the JSON text streamed in batches into the collector (limits, truncation);
2. `events`: events into compact columns (`event_fields` checks each field), then numpy arrays
   on one time base (`columns`);
3. `attribution`: the op tree, each op's row op, GPU activity → op, steps;
4. `tables`: the op table, the kernel table (`kernel_table`), steps and core spans, rows grouped
   by their key in `grouped_rows`;
5. `counters`: CUPTI hardware counters ("Total (HW counters)");
and `timeline` (the timeline summary and op shapes), `device` (peaks, trace diagnostics).

Attribution (so nested ops never count their kernels twice): every op is charged to one "row
op": the outermost op around it that has a FLOP formula, else its outermost (top-level) op. All
kernels launched inside, and on CPU-only traces all CPU time spent inside (minus the time of
nested row ops), go to that row op. memcpy/memset are rows of their own with measured bytes.
"""

from __future__ import annotations

import dataclasses
import json  # tests patch kineto.json.loads
import os

import numpy as np

from tb_roofline.devices.precision_ceilings import apply_ceilings
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers.common import copy_only_note
from tb_roofline.readers.kineto import (
    attribution,
    capture,
    comms,
    counters,
    device,
    label_precision,
    pm_samples,
    serving,
    tables,
)
from tb_roofline.readers.kineto import timeline as kineto_timeline
from tb_roofline.readers.kineto.columns import to_columns
from tb_roofline.readers.kineto.counters import (  # noqa: F401
    HW_NOTE,
    HW_PRECISIONS,
    HW_PREFIX,
    HwCounters,
    hw_flops_from_metrics,
)
from tb_roofline.readers.kineto.event_fields import int_or
from tb_roofline.readers.kineto.events import (  # noqa: F401
    GPU_CATEGORIES,
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    RUNTIME_CATEGORIES,
    STEP_NAME,
    Collector,
)
from tb_roofline.readers.kineto.grouped_rows import KNOWN_SOURCES, div_safe, transfers  # noqa: F401
from tb_roofline.readers.kineto.stream import CHUNK_CHARS, MAX_EVENTS, MAX_EVENTS_ENV, load_kineto  # noqa: F401
from tb_roofline.table.op_table import OpTableBuilder, ProfileData

# What other modules and tests use from the package (re-exported from its stages).
__all__ = [
    "read_kineto_file",
    "read_kineto",
    "load_kineto",
    "to_columns",
    "Collector",
    "HwCounters",
    "hw_flops_from_metrics",
    "HW_NOTE",
    "HW_PRECISIONS",
    "HW_PREFIX",
    "GPU_CATEGORIES",
    "RUNTIME_CATEGORIES",
    "STEP_NAME",
    "KIND_KERNEL",
    "KIND_MEMCPY",
    "KIND_MEMSET",
    "CHUNK_CHARS",
    "MAX_EVENTS",
    "MAX_EVENTS_ENV",
    "KNOWN_SOURCES",
    "div_safe",
    "json",
]


@dataclasses.dataclass
class _Tables:
    """What the GPU or the CPU stage builds: op and kernel rows, steps, spans, the timeline."""

    builder: OpTableBuilder
    kernels: OpTableBuilder
    timeline: object = None
    shapes: dict = dataclasses.field(default_factory=dict)
    steps: list = dataclasses.field(default_factory=list)
    spans: list = dataclasses.field(default_factory=list)
    op_kernels: dict = dataclasses.field(default_factory=dict)
    unattributed: int = 0  # kernels launched outside every op
    # GPU activity → op row, step, launch time: none until the GPU stage links them
    links: attribution.GpuLinks = dataclasses.field(default_factory=attribution.no_links)
    replayed: frozenset = frozenset()  # kernels replayed from graphs with no op attributed
    serving_spans: list = dataclasses.field(default_factory=list)  # per serving step


def read_kineto(col: Collector, host: str, windows=None) -> ProfileData:
    """The profile of one collected trace: the stages in order; `windows`: the model's
    sliding-window layers (readers/model_config.py), when the user gave its config."""
    diagnostics: list[Diagnostic] = list(col.notes)
    serving_steps = serving.steps_of(col)
    serving.assign_steps(col, serving_steps)
    diagnostics += serving.cost_attention(col, serving_steps, windows)
    windows_said = any(d.code in serving.WINDOW_CODES for d in diagnostics)
    c, tree, ranks = _columns(col, diagnostics)
    step_spans = attribution.steps(c, diagnostics)
    op_step = step_spans.of(c.op_ts)
    has_gpu = len(c.gpu_ts) > 0
    causes = kineto_timeline.idle_causes(col.host_calls, c.base_ns)
    out = _Tables(OpTableBuilder(), OpTableBuilder())
    if has_gpu:
        diagnostics += _gpu_tables(out, col, c, tree, ranks, host, step_spans, op_step, causes)
        out.serving_spans = serving.device_spans(serving_steps, c, out.links.launch)
        if not windows_said:  # the config's windows, else the kernels' names
            diagnostics += serving.window_notes(c, out.links, serving_steps)
    elif c.n_ops:
        _cpu_tables(out, col, c, tree, host, step_spans, op_step, causes)
    return _profile(col, c, tree, step_spans, out, host, has_gpu, diagnostics, serving_steps)


def _columns(col: Collector, diagnostics: list):
    """(the events as columns with their collectives' costs, the op nesting, the ranks of each
    collective): costs are added before row ops are chosen, since row ops follow formulas."""
    c = to_columns(col)
    order, parent = attribution.op_tree(c)
    diagnostics += label_precision.notes(c, order, parent, comms._add_cost)
    ranks = comms.apply_facts(c, col, order, parent)
    tree = attribution.nesting(c, order, parent)
    attribution.inner_precision(c, tree, comms._add_cost, col.cost_shapes)
    c.world = comms.world_size(col.meta)
    c.op_ic = comms.op_interconnect(c, ranks, c.world)
    c.op_coll = comms.op_collectives(c, ranks, c.world)
    return c, tree, ranks


def _gpu_tables(out: _Tables, col, c, tree, ranks, host, step_spans, op_step, causes) -> list:
    """Op and kernel rows, steps, spans and the timeline of a trace with device activity;
    returns its notes."""
    notes = []
    links = attribution.gpu_links(c, tree, step_spans)
    out.links = links
    out.replayed = _replayed_without_op(col, c, links)
    algorithms = comms.op_algorithms(c, links.row)  # as the NCCL kernel names state it
    if algorithms:
        c.op_ic = comms.op_interconnect(c, ranks, c.world, algorithms)
        c.op_coll = comms.op_collectives(c, ranks, c.world, algorithms)
    out.unattributed, out.shapes, out.op_kernels = tables.gpu_rows(
        out.builder,
        out.kernels,
        host,
        c,
        links,
        op_step,
        col.cost_shapes,
        comms.kernel_costs(c, col),
    )
    out.steps, out.spans = tables.gpu_spans(host, c, links, step_spans)
    if not c.n_ops:
        notes.append(Diagnostic("warning", NO_CPU_OPS, NO_CPU_OPS_NOTE))
    notes += copy_only_note(tables.program_devices(c)[1])
    out.timeline = kineto_timeline.gpu_timeline(
        out.spans,
        out.steps,
        c,
        links.row,
        lambda kind, nm: transfers(kind, nm, np.zeros(len(kind)))[2],
        causes,
        launches=kineto_timeline.gpu_launches(c, col.launch_alias, col.host_calls),
    )
    return notes + tables.cpu_ops_skipped(c, tree, links)


def _replayed_without_op(col, c, links) -> frozenset:
    """Names of the kernels replayed from a graph launch that no captured op was attributed
    to (readers/kineto/capture.py)."""
    if not col.graph_launches:
        return frozenset()
    corr = np.array([g[0] for g in col.graph_launches])
    m = np.isin(c.gpu_corr, corr) & (links.row < 0)
    return frozenset(str(x) for x in c.names[np.unique(c.gpu_name[m])].tolist())


def _cpu_tables(out: _Tables, col, c, tree, host, step_spans, op_step, causes) -> None:
    """Op rows, steps, the core span, the timeline and op shapes of a CPU-only trace."""
    rows, t_ps = tables.cpu_rows(out.builder, host, c, tree, op_step)
    out.steps, out.spans = tables.cpu_spans(host, c, step_spans)
    out.timeline = kineto_timeline.cpu_timeline(
        out.spans,
        out.steps,
        c,
        tree.parent,
        [(t, a - c.base_ns, d, n) for t, a, d, n in col.comm_spans],
        causes,
    )
    out.shapes = kineto_timeline.op_shapes(
        rows,
        t_ps[rows],
        [("", str(c.names[c.op_name[r]]), c.costs[c.op_cost[r]].precision) for r in rows.tolist()],
        col.cost_shapes,
        c.op_cost,
    )


def _profile(
    col, c, tree, step_spans, out: _Tables, host, has_gpu, diagnostics, serving_steps
) -> ProfileData:
    """The tables built and the device placed under its ceilings, with every note."""
    hw = counters.hw_counters(col, c, tree, step_spans)
    props = device.device_properties(col.meta)
    dev, device_notes = device.device_info(props, out.spans, has_gpu or bool(hw))
    diagnostics += device_notes
    diagnostics += device.trace_notes(col, c, has_gpu, hw, out.unattributed)
    diagnostics += counters.negative_counters(col)
    ops, kernel_table = out.builder.build(), out.kernels.build()
    diagnostics += device.uncosted_ops(ops, replayed=out.replayed)
    for table in (ops, kernel_table):  # PyTorch runs f32 matmuls in full f32 unless told otherwise
        apply_ceilings(table, dev, allow_tf32=False)
    dist = col.meta.get("distributedInfo") or {}
    return ProfileData(
        device=dev,
        ops=ops,
        steps=out.steps,
        core_spans=out.spans,
        diagnostics=diagnostics,
        has_hw_counters=hw is not None,
        allow_tf32=False,
        kernels=kernel_table,
        hw_counters=hw,
        hw_ops=counters.hw_table(hw, host) if hw is not None else None,
        rank=int_or(dist.get("rank"), None) if isinstance(dist, dict) else None,
        world_size=int_or(dist.get("world_size"), None) if isinstance(dist, dict) else None,
        device_properties=props,
        timeline=out.timeline,
        op_shapes=out.shapes,
        op_kernels=out.op_kernels,
        serving_steps=serving.step_records(serving_steps, out.serving_spans, c.base_ns) or None,
        counter_series=(
            col.pm.build(c.base_ns, pm_samples.rated_clock_mhz(props, out.spans))
            if len(col.pm.series)
            else None
        ),
    )


# A GPU trace without one `cpu_op` event (the reader sees them; op names cannot tell: an
# Inductor trace's CPU ops carry its kernels' names).
NO_CPU_OPS = "no_cpu_ops"
NO_CPU_OPS_NOTE = (
    "this PyTorch trace has device activity but no CPU ops: kernels cannot be named by the "
    "aten op that launched them, so no FLOPs or shapes are known. Record CPU activity too: "
    "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], "
    "record_shapes=True)"
)


def read_kineto_file(
    path: str, host: str, max_bytes: int | None = None, progress=None, windows=None
) -> ProfileData:
    """Read one `*.pt.trace.json[.gz]` (one worker/rank, one profiling span).

    Besides the op table it fills the PyTorch fields of ProfileData: `kernels`, `hw_counters`,
    `hw_ops`, `rank`, `world_size` and `device_properties`. Malformed events are skipped (the
    `bad_events` diagnostic counts them); a malformed file raises ProfileFormatError.
    """
    if progress:
        progress(0, 1)
    col = load_kineto(path, max_bytes=max_bytes, progress=progress)
    capture.attach(
        col, path, lambda f: load_kineto(f, max_bytes=max_bytes, collector=capture.CaptureCollector)
    )
    negative = sum(
        int(np.count_nonzero(np.asarray(a) < 0))
        for a in (col.op_dur, col.gpu_dur, col.rt_dur)
        if len(a)
    )
    negative += sum(1 for s in col.steps if s[2] < 0)
    try:
        data = read_kineto(col, host, windows)
    except ProfileFormatError as exc:
        raise ProfileFormatError(f"{os.path.basename(path)}: {exc}") from None
    if negative:
        data.diagnostics.append(
            Diagnostic(
                "warning",
                "negative_durations",
                f"{negative} events have a negative 'dur'; they count as 0 µs long",
            )
        )
    if progress:
        progress(1, 1)
    return data
