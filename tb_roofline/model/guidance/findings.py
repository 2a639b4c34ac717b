"""From chart to action: findings ranked by the time they would save, the step time split by
class, and throughput / MFU. Knows nothing of files or HTTP: an `Analysis` in, a JSON-ready
dict out (schema in docs/guidance.md).

Time is core-time, as in the op records: summed over cores and hosts. Every finding's saving is
a bound its rule proves (`bound_us`, written out in `bound_formula`). The total is their union:
an op counts once (its largest claim); op savings together count at most the wall time
non-communication ops ran; overlap hides communication under at most the work left after them;
idle time is time no op ran; so the total never exceeds the profiled time, and per step never
the step time.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.costs.hlo.shapes import element_bytes
from tb_roofline.model.guidance import advice, rules
from tb_roofline.model.guidance.program_rules import program_findings
from tb_roofline.model.guidance.rule_context import Context, Finding, recorded_arrays
from tb_roofline.model.records import roofline
from tb_roofline.model.records.throughput import throughput
from tb_roofline.table.op_table import NO_STEP
from tb_roofline.table.timeline import IDLE_CAPTURE, is_communication

GROUP_MIN = 3  # this many findings of one rule are shown as one group
FULL_CAPTURE = 0.9  # graph captures spanning this much of a trace: the trace is one capture
CLASSES = (
    ("compute_bound", "Compute-bound ops"),
    ("memory_bound", "Memory-bound ops"),
    ("communication", "Exposed communication and host transfers"),
    ("idle", "Idle (no op running)"),
    ("unknown", "Unknown cost or bound"),
)


@dataclasses.dataclass
class FindingRecord:
    """One finding with its numbers: over the whole profile, per unit (step or profile) and
    as a share of the profiled time; `records`: its op records' evidence columns."""

    rule: str
    title: str
    records: list  # {column: value} of each op record the finding is about
    facts: dict
    formula: str
    time_saved_us: float
    time_saved_per_unit_us: float | None
    percent_of_step: float | None
    counted_us: float
    counted_per_unit_us: float | None
    bound_us: float | None  # None: the rule proves no finite bound
    suggestion: str


@dataclasses.dataclass
class GroupRecord:
    """GROUP_MIN or more findings of one op rule, with their union."""

    rule: str
    title: str
    members: list  # indices into Guidance.findings
    counted_us: float
    counted_per_unit_us: float
    time_saved_us: float


@dataclasses.dataclass
class ClassTime:
    key: str
    label: str
    time_us: float
    percent: float | None


@dataclasses.dataclass
class Guidance:
    """What `guidance` finds in an analysis: findings ranked by time saved, their groups, the
    time per class, the totals and throughput."""

    framework: str
    runtime: str
    runtime_label: str
    unit_name: str  # "step" (the profile has complete steps) or "profile"
    unit_label: str
    step_us: float  # the unit's time
    total_time_us: float
    num_steps: int
    timeline: bool
    classes: list  # ClassTime, in CLASSES order
    findings: list  # FindingRecord, most time saved first
    groups: list  # GroupRecord, most counted first
    total_time_saved_us: float
    total_time_saved_per_step_us: float | None
    total_percent_of_step: float | None
    ops_time_saved_us: float | None
    diagnostics: list  # {severity, code, message}
    throughput: dict


def guidance(analysis, include_io: bool = True, workload=None, devices_in_run=None) -> Guidance:
    ops = analysis.ops[include_io]
    program = analysis.program[include_io].row_dicts()
    total = next((r for r in program if r["record_type"] == "total"), None)
    average = next((r for r in program if r["record_type"] == "average"), None)
    total_us = float(total["total_time_us"]) if total else 0.0
    rt = runtime_of(analysis)
    framework = advice.framework(rt)
    ctx = Context(
        ops,
        analysis.device,
        analysis.facts,
        total_us,
        analysis.num_steps,
        framework,
        rt,
        tensor_shapes(analysis),
        tensor_flows(analysis),
        getattr(analysis, "floors", None),
        include_io,
        _step_ops(analysis, include_io) if framework == advice.XLA else {},
        bool(getattr(analysis, "serving", None)),
        getattr(analysis, "counters", None),
    )
    full = next(
        (r for r in analysis.program[True].row_dicts() if r["record_type"] == "total"), None
    )
    wall = _wall_split(ctx, float(full["total_time_us"]) if full else total_us)
    findings = []
    for rule in rules.OP_RULES:
        findings += rule(ctx)
    findings += program_findings(ctx, wall)
    _count(findings, ctx, wall)
    findings.sort(key=lambda f: (-f.time_saved_us, f.rule, f.title))
    step_us = float(average["total_time_us"]) if average else total_us
    counted = sum(f.counted_us for f in findings)
    items = [_finding_record(f, ctx, step_us) for f in findings]
    return Guidance(
        framework=framework,
        runtime=rt,
        runtime_label=advice.RUNTIME_LABELS[rt],
        unit_name="step" if average else "profile",
        unit_label="per step" if average else "over the whole profile",
        step_us=step_us,
        total_time_us=total_us,
        num_steps=analysis.num_steps,
        timeline=analysis.facts is not None and analysis.facts.timeline is not None,
        classes=[
            ClassTime(k, label, wall["classes"][k], _pct(wall["classes"][k], total_us))
            for k, label in CLASSES
        ],
        findings=items,
        groups=_groups(items, "per step" if average else "over the whole profile"),
        total_time_saved_us=counted,
        total_time_saved_per_step_us=_per_step(counted, total_us, step_us),
        total_percent_of_step=_pct(counted, total_us),
        ops_time_saved_us=_ops_saved(total),
        diagnostics=guidance_diagnostics(analysis, rt),
        throughput=throughput(analysis, include_io, workload, devices_in_run),
    )


def _step_ops(analysis, include_io: bool) -> dict:
    """Record identity -> (time µs, calls) within the complete steps (the Average op records
    times the step count); empty without steps. Only repeated_copy needs it, on XLA profiles."""
    n = analysis.num_steps
    if not n or getattr(analysis, "scope", None) is None:
        return {}
    c = roofline.scoped_op_records(analysis, "Average", include_io).columns
    return {
        (pid, op, p): (float(t) * n, float(k) * n)
        for pid, op, p, t, k in zip(
            c["program_id"].tolist(),
            c["operation"].tolist(),
            c["precision"].tolist(),
            c["total_time_us"].tolist(),
            c["occurrences"].tolist(),
        )
    }


def _ops_saved(total):
    """The Total record's time saved (the sum of its ops' proven gaps), None when unknown."""
    v = total.get("potential_time_saved_us") if total else None
    return float(v) if v is not None else None


def runtime_of(analysis) -> str:
    """model.advice.runtime of an analysis (its op names, kernel view and graph captures)."""
    tl = analysis.facts.timeline if analysis.facts is not None else None
    captured = bool(tl is not None and tl.cause_span_ps.get(IDLE_CAPTURE, 0) > 0)
    names = set(analysis.ops[True].columns["operation"].tolist())
    return advice.runtime(names, "kernel" in analysis.views, captured)


def tensor_shapes(analysis) -> dict:
    """Record identity -> {array dims: element bytes (None: unknown)} of the arrays it touched:
    the PyTorch inputs recorded (the op table's `input_dims`; elementwise outputs have their
    inputs' shape; the element size from the op's data type), the copied array of `copy`
    shapes, and every array of `array` / `tensor` shapes (an op's output and operands from its
    HLO text: readers that give them let XLA pairs be checked too)."""
    out: dict = {}
    scope = getattr(analysis, "scope", None)
    if scope is not None and "op" in scope.tables:
        keys = scope.tables["op"].keys
        for pid, op, p, dt, dims in zip(
            keys["program_id"].tolist(),
            keys["operation"].tolist(),
            keys["precision"].tolist(),
            keys["dtype"].tolist(),
            keys["input_dims"].tolist(),
        ):
            if dims is not None:
                size = element_bytes(dt or p)
                for d in recorded_arrays(dims):
                    out.setdefault((pid, op, p), {}).setdefault(d, size)
    facts = analysis.facts
    for ident, uses in ((facts.op_shapes if facts is not None else {}) or {}).items():
        for u in uses:
            arrays = (
                [u.dims]
                if u.kind == "copy"
                else list(u.dims)
                if u.kind in ("array", "tensor")
                else []
            )
            types = rules.ARRAY_TYPE.findall(u.text or "")
            for j, a in enumerate(arrays):
                if a:
                    size = element_bytes(types[j]) if j < len(types) else None
                    out.setdefault(ident, {}).setdefault(tuple(int(d) for d in a), size)
    return out


def tensor_flows(analysis) -> dict:
    """Record identity -> ({output dims}, {operand dims}, {operand names}) from `tensor` shapes
    (dims[0]: the op's output, the rest its operands; the text's " from a b": the operands'
    instruction names, where the reader gives them)."""
    out: dict = {}
    facts = analysis.facts
    for ident, uses in ((facts.op_shapes if facts is not None else {}) or {}).items():
        for u in uses:
            if u.kind == "tensor" and u.dims:
                outs, ins, names = out.setdefault(ident, (set(), set(), set()))
                outs.add(tuple(int(d) for d in u.dims[0]))
                ins.update(tuple(int(d) for d in a) for a in u.dims[1:])
                if " from " in (u.text or ""):
                    names.update(u.text.split(" from ", 1)[1].split())
    return out


def guidance_diagnostics(analysis, rt: str) -> list:
    """What the profile would need for the rules to say more: a graph capture instead of the
    replay, a PyTorch trace without CPU ops or without shapes (each says what to capture)."""
    out = []
    tl = analysis.facts.timeline if analysis.facts is not None else None
    if tl is not None and tl.cause_span_ps.get(IDLE_CAPTURE, 0) > 0:
        span = float(tl.windows["span_ps"].sum())
        share = tl.cause_span_ps[IDLE_CAPTURE] / span if span > 0 else 0.0
        kind = (
            f"a full graph capture: captures span {min(share, 1.0):.0%} of the trace"
            if share >= FULL_CAPTURE
            else f"a piecewise graph capture: captures span {share:.0%} of the trace"
        )
        out.append(
            {
                "severity": "warning",
                "code": "graph_capture",
                "message": f"{kind}; " + advice.CAPTURE_NOTES["graph_capture"],
            }
        )
    if rt != advice.XLA:
        names = [str(n) for n in analysis.ops[True].columns["operation"].tolist()]
        # Only the reader knows whether the trace held CPU ops (it says so in a diagnostic).
        if any(d.code == "no_cpu_ops" for d in analysis.diagnostics):
            out.append(
                {
                    "severity": "warning",
                    "code": "no_cpu_ops",
                    "message": advice.CAPTURE_NOTES["no_cpu_ops"],
                }
            )
        elif names and not any(d is not None for d in _input_dims(analysis)):
            out.append(
                {
                    "severity": "warning",
                    "code": "no_shapes",
                    "message": advice.CAPTURE_NOTES["no_shapes"],
                }
            )
    return out


def _input_dims(analysis) -> list:
    scope = getattr(analysis, "scope", None)
    if scope is None or "op" not in scope.tables:
        return []
    return scope.tables["op"].keys["input_dims"].tolist()


def _groups(items: list, unit_label: str) -> list:
    """Findings of one op rule, GROUP_MIN or more: one group each, with their union."""
    by_rule: dict = {}
    for n, f in enumerate(items):
        if f.records:
            by_rule.setdefault(f.rule, []).append(n)
    out = []
    nouns = {
        "fusion": "fusion pairs",
        "tiny_ops": "ops with tiny calls",
        "repeated_copy": "repeated copies",
        "tiling": "ops with untiled shapes",
        "precision": "f32 ops with a faster roof",
        "far_below_roof": "ops far below their roof",
    }
    for rule, members in by_rule.items():
        if len(members) < GROUP_MIN:
            continue
        fs = [items[n] for n in members]
        per_unit = sum(f.counted_per_unit_us or 0.0 for f in fs)
        out.append(
            GroupRecord(
                rule=rule,
                title=f"{len(fs)} {nouns.get(rule, rule)}, {per_unit:,.0f} µs {unit_label} in all",
                members=members,
                counted_us=sum(f.counted_us for f in fs),
                counted_per_unit_us=per_unit,
                time_saved_us=sum(f.time_saved_us for f in fs),
            )
        )
    out.sort(key=lambda g: -g.counted_us)
    return out


def _pct(part: float, whole: float):
    return 100.0 * part / whole if whole > 0 else None


def _per_step(us: float, total_us: float, step_us: float):
    return us * step_us / total_us if total_us > 0 else None


def _wall_split(ctx: Context, total_with_io: float) -> dict:
    """Wall time (core-time) per class: idle and exposed communication from the timeline, the
    rest (time non-communication ops ran) split by the self time of op classes. The classes
    add up to the Total record's time: `total_with_io` is that time with infeed/outfeed, the
    view's Total leaves their time out."""
    c = ctx.c
    total = ctx.total_time_us
    self_us = _program_self_us(ctx)
    container = c["caveat"] == "container"
    comm = np.array(
        [
            is_communication(cat, cav or "")
            for cat, cav in zip(c["category"].tolist(), c["caveat"].tolist())
        ],
        bool,
    )
    tl = ctx.facts.timeline if ctx.facts is not None else None
    if tl is not None:
        w = tl.windows
        busy = min(float(w["busy_ps"].sum()) / 1e6, total_with_io)
        exposed = min(float(w["exposed_ps"].sum()) / 1e6, busy)
        idle_in = float((w["span_ps"] - w["busy_ps"])[w["step"] != NO_STEP].sum()) / 1e6
        # Without infeed/outfeed the records leave their time out: take it from the exposed
        # (they count as transfers), then from the compute time.
        io = max(0.0, total_with_io - total)
        compute = max(0.0, busy - exposed - max(0.0, io - exposed))
        exposed = max(0.0, exposed - io)
        idle = max(0.0, total_with_io - busy)
    else:
        busy = min(float(self_us[~container].sum()), total)
        exposed = min(float(self_us[comm & ~container].sum()), busy)
        compute, idle, idle_in = busy - exposed, max(0.0, total - busy), 0.0
    trusted_class = np.array([not cav for cav in c["caveat"].tolist()], bool)
    work = ~container & ~comm
    cb = work & trusted_class & ctx.compute_bound
    mb = work & trusted_class & ctx.memory_bound
    shares = np.array([self_us[cb].sum(), self_us[mb].sum(), self_us[work & ~cb & ~mb].sum()])
    split = compute * shares / shares.sum() if shares.sum() > 0 else np.array([0, 0, compute])
    return {
        "classes": {
            "compute_bound": float(split[0]),
            "memory_bound": float(split[1]),
            "communication": exposed,
            "idle": idle,
            "unknown": float(split[2]),
        },
        "compute": compute,
        "idle": idle,
        "idle_in_steps": min(idle_in, idle),
        "exposed": exposed,
    }


def _program_self_us(ctx: Context) -> np.ndarray:
    """Each record's self time (µs) on the devices that ran the program: a device that only
    copied has no span, so its copies take no share of any class (the one rule of
    readers.common.program_devices, which keeps it out of the Total and idle)."""
    self_us = ctx.c["total_self_time_us"].astype(float)
    off = getattr(ctx.facts, "off_program_self_ps", None) or {}
    if not off:
        return self_us
    out = self_us.copy()
    for label, ps in off.items():
        i = ctx.index.get(label)
        if i is not None:
            out[i] = max(0.0, out[i] - ps / 1e6)
    return out


def _count(findings: list, ctx: Context, wall: dict):
    """`counted_us`: what each finding adds to the total (the union). An op counts once (its
    largest claim); op findings together at most the wall time of non-communication ops;
    overlap at most the work left beside the communication after them; idle as it is; a
    straggler 0."""
    claimed: dict = {}
    op_findings = sorted((f for f in findings if f.claim >= 0), key=lambda f: -f.time_saved_us)
    for f in op_findings:
        cap = min(f.time_saved_us, float(ctx.c["total_time_us"][f.claim]))
        f.counted_us = max(0.0, cap - claimed.get(f.claim, 0.0))
        claimed[f.claim] = max(claimed.get(f.claim, 0.0), cap)
    ops_total = sum(f.counted_us for f in op_findings)
    if ops_total > wall["compute"] > 0 or (ops_total > 0 and wall["compute"] <= 0):
        scale = max(wall["compute"], 0.0) / ops_total  # concurrent kernels overlap in time
        for f in op_findings:
            f.counted_us *= scale
        ops_total = max(wall["compute"], 0.0)
    for f in findings:
        if f.claim < 0:
            if f.rule in ("straggler", "clock_throttled"):
                f.counted_us = 0.0
            elif f.rule == "exposed_communication":
                f.counted_us = min(f.time_saved_us, max(0.0, wall["compute"] - ops_total))
            else:
                f.counted_us = f.time_saved_us


def _finding_record(f: Finding, ctx: Context, step_us: float) -> FindingRecord:
    c = ctx.c
    cols = rules.OP_COLUMNS.get(f.rule, ())
    records = []
    for i in f.rows:
        row = {k: _value(c[k][i]) for k in cols}
        row.update(
            {
                "program_id": str(c["program_id"][i]),
                "operation": str(c["operation"][i]),
                "precision": str(c["precision"][i]),
                "host": str(c["host"][i]),
            }
        )
        records.append(row)
    return FindingRecord(
        rule=f.rule,
        title=f.title,
        records=records,
        facts=f.facts,
        formula=f.formula,
        time_saved_us=f.time_saved_us,
        time_saved_per_unit_us=_per_step(f.time_saved_us, ctx.total_time_us, step_us),
        percent_of_step=_pct(f.time_saved_us, ctx.total_time_us),
        counted_us=f.counted_us,
        counted_per_unit_us=_per_step(f.counted_us, ctx.total_time_us, step_us),
        bound_us=f.bound_us if np.isfinite(f.bound_us) else None,
        suggestion=f.suggestion,
    )


def _value(v):
    if isinstance(v, (np.floating, float)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v
