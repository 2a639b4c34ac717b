"""The roofline model: op tables in, program/step/host/op records out.

Knows nothing of file formats: it takes `ProfileData` (an `OpTable`, step and core spans, a
`DeviceInfo`). One pass over the rows sums every column per key (distinct op); op, program and
host records group those key sums, and only per-step records take a second pass over the rows
(`np.bincount` by step). Time is linear in rows, steps and hosts; strings are only touched per
distinct op.

Here: `analyze` composes the parts of an `Analysis`, each made by one named function (the
hosts and their spans, the proven gaps, the step sums, the kernel views, the program blocks,
the model's notes, the scope source, the key floors), and `scoped_op_records` makes op records
of one step or the average step later. The sums are in model/records/row_sums.py, the op records in
model/records/op_records.py, the program records in model/records/program_records.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.diagnostics import Diagnostic, no_hw_counters_note
from tb_roofline.model.guidance import facts as timeline_facts
from tb_roofline.model.records import counter_records, peaks
from tb_roofline.model.records import steps as steps_model
from tb_roofline.model.records.floors import KeyFloors, Roofs, proven_keys
from tb_roofline.model.records.op_records import op_records
from tb_roofline.model.records.program_records import (
    average_block,
    counter_step_block,
    counter_total_block,
    coverage_notes,
    host_block,
    hw_block,
    program_records,
    step_block,
    total_block,
)
from tb_roofline.model.records.record_table import RECORD_COLUMNS, RecordTable, scope_record_type
from tb_roofline.model.records.records import call_floors
from tb_roofline.model.records.row_sums import ScopePass, StepPass, key_sums, step_sums
from tb_roofline.model.serving import phases as serving_model
from tb_roofline.table.held_rows import HeldRows, is_held
from tb_roofline.table.host_summary import all_held, held_fold
from tb_roofline.table.key_sums import summed_columns
from tb_roofline.table.op_table import OpTable


@dataclasses.dataclass
class Analysis:
    """Everything the API serves for one run and host selection."""

    device: DeviceInfo
    program: dict  # include_infeed_outfeed (bool) -> RecordTable
    ops: dict  # include_infeed_outfeed (bool) -> RecordTable
    diagnostics: list
    num_steps: int
    has_hw_counters: bool = False
    views: dict = dataclasses.field(default_factory=dict)  # "kernel", "kernel_hw" -> {io: table}
    facts: timeline_facts.Facts | None = None  # timeline facts for the guidance rules
    scope: ScopeSource | None = None  # what op records of one step need (scoped_op_records)
    serving: list = dataclasses.field(default_factory=list)  # model/serving/phases.py summary
    floors: KeyFloors | None = None  # per-call floors of the op records (guidance rules)
    # sampled counters (model/records/counter_records.py): the Total's and each step's window
    counters: counter_records.RunCounters | None = None

    def scope_source(self) -> ScopeSource:
        """The op tables behind the analysis, which scoped records are made from."""
        if self.scope is None:
            raise ValueError("this analysis was built without its op tables (no scopes)")
        return self.scope


@dataclasses.dataclass
class ScopeSource:
    """The op tables behind an Analysis, with each row's aligned step, so that op records can be
    made for one step or the average step (run comparisons) after the Analysis is built."""

    tables: dict  # view ("op", "kernel", "kernel_hw") -> OpTable
    aligned: steps_model.Steps  # the complete steps, aligned across hosts
    profile_host: np.ndarray  # host code of each profile
    key_hosts: dict  # view -> host code of each key of its table
    step_labels: list  # aligned step index -> the label of its program record
    step_ps: dict  # include_io -> time of each aligned step (ps)
    span_ps: dict  # include_io -> the Total's time (ps)
    num_cores: int
    host_label: str
    cache: dict = dataclasses.field(default_factory=dict)
    phase_steps: dict = dataclasses.field(default_factory=dict)  # serving phase -> indices
    # the per-step sums made host by host where the hosts' rows are (None: no complete step)
    step_pass: StepPass | None = None
    # the run's profiles when a cluster keeps all their rows (table/host_summary.py): a
    # scope's key sums are then made there (`ScopePass`), its rows fetched only if asked for
    held: list | None = None

    def row_steps(self, view: str) -> np.ndarray:
        """The aligned step of each row of a view's table (-1: outside complete steps),
        computed when a comparison first asks for one step."""
        key = ("row_steps", view)
        if key not in self.cache:
            t = self.tables[view]
            self.cache[key] = steps_model.row_steps(
                self.aligned, self.profile_host, self.key_hosts[view], t.rows["op"], t.rows["step"]
            )
        return self.cache[key]


# Op record columns that add up over steps (divided by the step count for the average step).
# (The floors and the time saved are sums over calls too: they scale the same way.)
EXTENSIVE_COLUMNS = (
    "occurrences",
    "total_time_us",
    "total_self_time_us",
    "flops",
    "model_flops",
    "bytes",
    "total_time_per_core_us",
    "transfer_time_us",
    "roof_time_us",
    "potential_time_saved_us",
) + tuple(c for c in RECORD_COLUMNS if c.endswith("_bytes"))


def scoped_op_records(
    analysis: Analysis,
    scope: str,
    include_io: bool = True,
    view: str = "op",
    split_by: str | None = None,
) -> RecordTable:
    """Op records of one scope: `Total` (every row, as `analysis.ops`), `Average` (rows of
    complete steps, extensive columns divided by the step count: per step) or a step label as
    the program records name it. `split_by`: a key column whose values split records further
    (`fingerprint`: one record per PyTorch input shape). Cached on the analysis."""
    src = analysis.scope_source()
    key = (scope, include_io, view, split_by)
    if key in src.cache:
        return src.cache[key]
    if scope_record_type(scope) == "total" and not split_by:  # the records it already has
        return analysis.ops[include_io] if view == "op" else analysis.views[view][include_io]
    table, denominator, n_steps = scope_rows(analysis, scope, include_io, view)
    rec = op_records(
        table,
        key_sums(table, analysis.device),
        analysis.device,
        src.num_cores,
        src.host_label,
        include_io,
        denominator,
        split_by=split_by,
    )
    per_step(rec, scope, n_steps)
    src.cache[key] = rec
    return rec


def per_step(rec: RecordTable, scope: str, n_steps: int):
    """An Average scope's records per step: extensive columns over the step count."""
    if scope_record_type(scope) == "average" and n_steps:
        for c in EXTENSIVE_COLUMNS:
            rec.columns[c] = rec.columns[c] / n_steps


def scope_rows(analysis: Analysis, scope: str, include_io: bool, view: str):
    """(the view's table cut to a scope's rows, the scope's time in ps, its step count)."""
    src = analysis.scope_source()
    kind = scope_record_type(scope)
    table = src.tables[view]
    n_steps = len(src.step_labels)
    if kind == "total":
        return table, src.span_ps[include_io], n_steps
    if kind == "average" and scope in src.phase_steps:  # `Average · decode`
        idx = np.asarray(src.phase_steps[scope], np.int64)
        n_steps = len(idx)
        denominator = float(src.step_ps[include_io][idx].sum())
    elif kind == "average":
        idx, denominator = np.arange(n_steps), float(src.step_ps[include_io].sum())
    else:
        i = src.step_labels.index(scope)  # the caller checks the label
        idx, denominator = np.array([i]), float(src.step_ps[include_io][i])
    if src.held is not None and view == "op" and is_held(table.rows):
        return _held_scope(src, table, idx), denominator, n_steps
    row_step = src.row_steps(view)
    if kind == "step":
        mask = row_step == idx[0]
    elif scope in src.phase_steps:
        mask = np.isin(row_step, idx)
    else:  # the average of every complete step
        mask = row_step >= 0
    return table.select(mask), denominator, n_steps


def _held_scope(src: ScopeSource, table: OpTable, idx: np.ndarray) -> OpTable:
    """The run's table cut to the rows of aligned steps `idx`, its rows kept where they are:
    its key sums and row counts made there (`ScopePass`), its rows (the run's, fetched, then
    cut) only if asked for."""
    assert src.held is not None
    key = ("held scope", idx.tobytes())  # (one fold a scope, whatever its records' options)
    if key not in src.cache:
        src.cache[key] = _held_scope_table(src, table, idx)
    return src.cache[key]


def _held_scope_table(src: ScopeSource, table: OpTable, idx: np.ndarray) -> OpTable:
    assert src.held is not None
    sp, columns = src.step_pass, tuple(summed_columns(table))
    if sp is None or not len(idx):  # no complete step: no row
        sums = {c: np.zeros(table.num_keys) for c in columns}
        counts = np.zeros(table.num_keys, np.int64)
    else:
        scope = ScopePass(sp.aligned, sp.profile_host, sp.key_host, sp.bounds, idx, columns)
        sums, counts = scope.finish(held_fold(src.held, scope.add_host, scope.start()))
    row_step = src.row_steps  # (bound now: the rows, if ever asked for, are the run's cut)

    def fetch() -> dict:
        return dict(table.select(np.isin(row_step("op"), idx)).rows)

    rows = HeldRows(int(counts.sum()), counts > 0, "ops", fetch=fetch, parts=[table.rows])
    return OpTable(table.keys, rows, table.unit_costs, sums)


def analyze(profiles: list, host_label: str = "*") -> Analysis:
    device = DeviceInfo.merge([p.device for p in profiles])
    # The hosts' tables (a service keeps them) become views of the run's: one copy of the rows.
    table = OpTable.concat([p.ops for p in profiles], share=True)
    kernel_tables = {}
    for name, attr in (("kernel", "kernels"), ("kernel_hw", "hw_ops")):
        tables = [getattr(p, attr) for p in profiles if getattr(p, attr, None) is not None]
        if any(len(t) for t in tables):
            kernel_tables[name] = OpTable.concat(tables, share=True)
    diagnostics = _host_diagnostics(profiles) + _mixed_devices_note(profiles, device)
    # A profile-derived peak that the profile's own ops beat is the figure in doubt.
    device, notes = peaks.settle(device, table, kernel_tables.get("kernel"), key_sums)
    diagnostics += notes
    return _analyze(profiles, device, table, kernel_tables, host_label, diagnostics)


def _host_diagnostics(profiles) -> list:
    """The readers' diagnostics, each saying which host it is about when several are
    aggregated."""
    diagnostics = []
    for p in profiles:
        host = p.core_spans[0].host if p.core_spans else ""
        for d in p.diagnostics:
            diagnostics.append(
                dataclasses.replace(d, message=f"host {host}: {d.message}")
                if len(profiles) > 1 and host
                else d
            )
    return diagnostics


def _mixed_devices_note(profiles, device: DeviceInfo) -> list:
    """A warning when the hosts of a run report different devices (the aggregate is judged
    against one device's peaks)."""
    kinds: dict = {}
    for p in profiles:
        if p.device is not None and p.core_spans:
            kinds.setdefault(p.device.type, []).append(p.core_spans[0].host)
    if len(kinds) <= 1:
        return []
    return [
        Diagnostic(
            "warning",
            "mixed_devices",
            "the hosts of this run report different devices ("
            + "; ".join(
                f"{t}: {', '.join(h[:3])}{' ...' if len(h) > 3 else ''}" for t, h in kinds.items()
            )
            + f"): the aggregate is judged against {device.type}'s peaks; "
            "look at each host alone",
        )
    ]


def _analyze(profiles, device, table, kernel_tables, host_label, diagnostics) -> Analysis:
    num_cores = max(device.num_cores, 1)
    ksums = key_sums(table, device)
    hosts = _hosts(profiles, table, ksums)
    # The op records first: which keys' gaps to their roofs are proven (their record has a
    # time saved), so the program records' time saved is the sum of those, per step too.
    ops = {
        io: op_records(table, ksums, device, num_cores, host_label, io, hosts.span(io))
        for io in (True, False)
    }
    roofs = _proven_roofs(table, device, ops, ksums)
    steps = _step_sums(profiles, table, roofs, hosts)
    views = _kernel_views(kernel_tables, device, num_cores, host_label, hosts)
    hw = [p.hw_counters for p in profiles if getattr(p, "hw_counters", None) is not None]
    counters = counter_records.run_counters(
        profiles,
        list(steps.aligned.ids),  # one row per profile
        steps.labels,
        device,
    )
    program, step_ps = {}, {}
    for io in (True, False):
        blocks, step_ps[io] = _program_blocks(
            io, ksums, table, steps, hosts, (hw, counters), device, host_label
        )
        program[io] = program_records(
            blocks, profiles, device, num_cores, io, table.keys["flops_source"]
        )
    measured = counters is not None and counters.measured
    diagnostics += _model_notes(
        device, table, diagnostics, program, steps, (hw, measured), kernel_tables
    )
    if counters is not None:
        diagnostics += counter_records.counter_notes(counters, device, steps.labels)
    return Analysis(
        device=device,
        program=program,
        ops=ops,
        diagnostics=diagnostics,
        num_steps=len(steps),
        has_hw_counters=bool(hw) or measured,
        views=views,
        scope=_scope_source(
            profiles, table, kernel_tables, hosts, steps, step_ps, num_cores, host_label
        ),
        facts=timeline_facts.collect(profiles, table, _step_members(hosts, steps)),
        floors=_key_floors(ksums, table, device, roofs, ops),
        serving=serving_model.summary(profiles, device),
        counters=counters,
    )


@dataclasses.dataclass
class _Hosts:
    """The hosts of a run as every part of the analysis reads them: their names, the host of
    each key and of each profile, the profiled span (all cores, and per host) and the
    infeed/outfeed time in it (all hosts, and per host)."""

    names: list
    key_host: np.ndarray
    profile_host: np.ndarray
    spans_ps: float
    host_span: np.ndarray
    io_time: float
    io_host: np.ndarray

    def span(self, include_io: bool) -> float:
        """The Total's time (ps): the span, less infeed/outfeed time when they are left out."""
        return self.spans_ps - (0.0 if include_io else self.io_time)


def _hosts(profiles, table: OpTable, ksums: dict) -> _Hosts:
    keys = table.keys
    names = [c.host for p in profiles for c in p.core_spans[:1]]
    key_host = _key_hosts(profiles, names)
    io_keys = ~keys["is_container"] & keys["is_infeed_outfeed"]
    return _Hosts(
        names=names,
        key_host=key_host,
        profile_host=np.array(
            [_index(names, p.core_spans[0].host) if p.core_spans else 0 for p in profiles],
            np.int64,
        ),
        spans_ps=float(sum(s.duration_ps for p in profiles for s in p.core_spans)),
        host_span=np.array(
            [float(sum(s.duration_ps for s in p.core_spans)) for p in profiles if p.core_spans]
        ),
        io_time=float(ksums["total_time_ps"][io_keys].sum()),
        io_host=np.bincount(
            key_host[io_keys], weights=ksums["total_time_ps"][io_keys], minlength=len(names)
        ),
    )


@dataclasses.dataclass
class _StepSums:
    """The complete steps aligned across hosts, their labels, the serving phases' steps
    (phase -> step indices) and SUM_COLUMNS per (step, infeed/outfeed or not)."""

    aligned: steps_model.Steps
    labels: list
    phases: dict
    by_step: dict
    step_pass: StepPass | None = None

    def __len__(self) -> int:
        return len(self.aligned)


def _step_sums(profiles, table: OpTable, roofs: Roofs, hosts: _Hosts) -> _StepSums:
    aligned = steps_model.align(profiles)
    n_steps = len(aligned)
    if not n_steps:
        return _StepSums(aligned, [], {}, {})
    single_ids = aligned.ids[0] if len(profiles) == 1 else []
    labels = (
        serving_model.step_labels(profiles, single_ids)
        if len(profiles) == 1
        else [str(x) for x in range(n_steps)]
    )
    phases = serving_model.phase_steps(profiles, single_ids)
    bounds = np.cumsum([0] + [p.ops.num_keys for p in profiles])
    step_pass = StepPass(roofs, aligned, hosts.profile_host, hosts.key_host, bounds)
    # Hosts whose rows are kept where they were read add them there, host by host: the
    # same sums bit for bit, and only the sums travel (table/host_summary.py).
    folded = held_fold(profiles, step_pass.add_host, step_pass.start())
    if folded is not None:
        by_step = step_pass.finish(folded)
    else:
        by_step = step_sums(table, roofs, aligned, hosts.profile_host, hosts.key_host)
    return _StepSums(aligned, labels, phases, by_step, step_pass)


def _proven_roofs(table: OpTable, device: DeviceInfo, ops: dict, ksums: dict) -> Roofs:
    """The per-row roofs with the keys whose gaps to their roofs are proven (their op record
    has a time saved), and those gaps in the key sums (`gap_ps`): a program record's time
    saved is their sum, per step too."""
    roofs = Roofs.of(table, device)
    roofs.proven = proven_keys(ops[True], device)
    ksums["gap_ps"] = (ksums["total_time_ps"] - ksums["floor_time"] * 1e3) * roofs.proven
    return roofs


def _kernel_views(kernel_tables: dict, device, num_cores, host_label, hosts: _Hosts) -> dict:
    """The kernel-level op records ("kernel", "kernel_hw") of each infeed/outfeed choice."""
    kernel_sums = {name: key_sums(t, device) for name, t in kernel_tables.items()}
    views: dict = {}
    for io in (True, False):
        for name, t in kernel_tables.items():
            views.setdefault(name, {})[io] = op_records(
                t, kernel_sums[name], device, num_cores, host_label, io, hosts.span(io)
            )
    return views


def _program_blocks(io, ksums, table, steps: _StepSums, hosts: _Hosts, hw, device, host_label):
    """(the blocks of one infeed/outfeed choice's program records: Total, Total (HW), Total (HW
    counters), one per host, Average, the serving phases' averages, one per step and one
    measured per step; its steps' times in ps). `hw`: (range-profiler counters, RunCounters)."""
    hw, counters = hw
    keys = table.keys
    inner = ~keys["is_container"]
    keep = inner if io else inner & ~keys["is_infeed_outfeed"]
    denominator = hosts.span(io)
    blocks = [total_block(ksums, keep, denominator, host_label)]
    if hw:
        blocks.append(hw_block(hw, device, denominator, host_label))
    measured = counters is not None and counters.measured
    if measured:
        sums = counter_records.counter_sums(counters.total, device)
        blocks.append(counter_total_block(sums, denominator, host_label))
    single_host = len(hosts.profile_host) == 1
    if not single_host:  # one point per host (rank), so a straggler shows
        span = hosts.host_span - (0.0 if io else hosts.io_host)
        blocks.append(host_block(ksums, keep, hosts.key_host, hosts.names, span))
    if not len(steps):
        return blocks, np.zeros(0)
    by_step = steps.by_step
    sums = {c: v.sum(axis=1) if io else v[:, 0] for c, v in by_step.items()}
    step_ps = steps.aligned.time_ps - (0.0 if io else by_step["total_time_ps"][:, 1])
    blocks.append(average_block(sums, step_ps, len(steps), host_label))
    blocks += serving_model.phase_average_blocks(steps.phases, sums, step_ps, host_label)
    label = steps.labels if single_host else np.arange(len(steps))
    scales = counters.step_scales() if counters is not None else np.ones(len(steps))
    # A step that ran below the rated clock is judged under compute roofs scaled to its clock.
    blocks.append(
        step_block(dict(sums, roof_time=sums["roof_time"] / scales), step_ps, label, host_label)
    )
    if measured:
        blocks.append(_counter_steps(counters, device, step_ps, label, host_label))
    return blocks, step_ps


def _counter_steps(counters, device, step_ps, label, host_label):
    """The measured step records (`step_hw`) under the same, clock-scaled, roofs."""
    scales = counters.step_scales()
    empty = counter_records.WindowCounters()
    sums = [
        counter_records.counter_sums(w if w is not None else empty, device, float(k))
        for w, k in zip(counters.steps, scales)
    ]
    return counter_step_block(sums, step_ps, label, host_label)


def _model_notes(device, table, diagnostics, program, steps, hw, kernel_tables) -> list:
    """What the model says about the run besides the readers' diagnostics: no steps, no
    peaks, no ops, low cost coverage, and whether hardware counters were read. `hw`: (the
    range profiler's counters, whether sampled counters measured a record)."""
    hw, measured = hw
    notes = []
    if not len(steps):
        notes.append(
            Diagnostic(
                "warning",
                "no_steps",
                "no complete step markers (a 'Steps' line with group_id on every core): only the "
                "Total record is shown, no Average or per-step records. Annotate training steps "
                "(e.g. jax.profiler.StepTraceAnnotation) or profile longer than one step.",
            )
        )
    if not device.peaks_known and not any(d.code == "peaks_unknown" for d in diagnostics):
        notes.append(
            Diagnostic(
                "warning",
                "peaks_unknown",
                "the profile carries no peak FLOP rate for this device: "
                "efficiencies and bound-by cannot be computed",
            )
        )
    if len(table) == 0:
        notes.append(
            Diagnostic(
                "warning", "no_ops", "no XLA ops with FLOPs/bytes were found in this profile"
            )
        )
    notes += coverage_notes(program[True])
    if hw:
        notes.append(Diagnostic("info", "hw_counters", hw[0].note))
    elif not measured:
        notes.append(no_hw_counters_note("kernel" in kernel_tables, device.kind == "gpu"))
    return notes


def _scope_source(
    profiles, table, kernel_tables, hosts: _Hosts, steps: _StepSums, step_ps, num_cores, host_label
) -> ScopeSource:
    """What op records of one step or the average step need, kept for later comparisons."""
    tables = dict(kernel_tables, op=table)
    attrs = {"op": "ops", "kernel": "kernels", "kernel_hw": "hw_ops"}
    return ScopeSource(
        tables=tables,
        aligned=steps.aligned,
        profile_host=hosts.profile_host,
        key_hosts={
            name: hosts.key_host if t is table else _key_hosts(profiles, hosts.names, attrs[name])
            for name, t in tables.items()
        },
        step_labels=steps.labels,
        step_ps=step_ps,
        span_ps={io: hosts.span(io) for io in (True, False)},
        num_cores=num_cores,
        host_label=host_label,
        phase_steps={serving_model.AVERAGE_PREFIX + k: v for k, v in steps.phases.items()},
        step_pass=steps.step_pass,
        held=profiles if all_held(profiles) else None,
    )


def _step_members(hosts: _Hosts, steps: _StepSums) -> list:
    """The aligned steps as (host, step id) pairs, for the guidance facts."""
    ids = steps.aligned.ids
    return [
        [(hosts.names[h], int(ids[h, i])) for h in range(min(len(hosts.names), ids.shape[0]))]
        for i in range(len(steps))
    ]


def _key_floors(ksums, table, device, roofs: Roofs, ops: dict) -> KeyFloors:
    """Each key's FLOPs and the time its bytes take at their roofs, with its op records."""
    memory_ns = call_floors(
        ksums["flops"], ksums, np.zeros(table.num_keys), device, roofs.link, roofs.link_scale
    )[0]
    return KeyFloors(ksums["flops"], memory_ns, {io: ops[io].key_record for io in ops})


def _index(values: list, value) -> int:
    try:
        return values.index(value)
    except ValueError:
        return 0


def _key_hosts(profiles, host_names: list, attr: str = "ops") -> np.ndarray:
    """The host code (index in host_names; 0 when absent) of every key of the concatenated
    tables (`attr`: the profiles' table, `ops` or a kernel view's, None ones left out): one
    lookup per distinct host name of each profile."""
    codes = {h: i for i, h in reversed(list(enumerate(host_names)))}
    parts = []
    for p in profiles:
        table = getattr(p, attr, None)
        if table is None:
            continue
        hosts = table.keys["host"]
        if not len(hosts):
            continue
        first = hosts[0]
        if (hosts == first).all():
            parts.append(np.full(len(hosts), codes.get(first, 0), np.int64))
        else:
            parts.append(
                np.fromiter((codes.get(h, 0) for h in hosts.tolist()), np.int64, len(hosts))
            )
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)
