"""From chart to action: findings ranked by the time they would save, the step time split by
class, and throughput / MFU. Knows nothing of files or HTTP: an `Analysis` in, a JSON-ready
dict out (schema in docs/guidance.md).

Time is core-time, as in the op records: summed over cores and hosts. Totals hold by
construction: each op finding saves at most its op's time and an op counts once (the largest
claim); op savings together count at most the wall time non-communication ops ran; the idle and
exposed-communication findings count time no other finding counts; so the total never exceeds
the profiled time, and per step never the step time.
"""
from __future__ import annotations

import numpy as np

from tb_roofline.model import rules
from tb_roofline.model.op_table import NO_STEP
from tb_roofline.model.rules import Context, Finding
from tb_roofline.model.throughput import throughput
from tb_roofline.model.timeline import is_communication

SCHEMA = "tb-roofline-guidance/1"
CLASSES = (("compute_bound", "Compute-bound ops"), ("memory_bound", "Memory-bound ops"),
           ("communication", "Exposed communication and host transfers"),
           ("idle", "Idle (no op running)"), ("unknown", "Unknown cost or bound"))


def guidance(analysis, include_io: bool = True, workload=None, devices_in_run=None) -> dict:
    ops = analysis.ops[include_io]
    program = analysis.program[include_io].row_dicts()
    total = next((r for r in program if r["record_type"] == "total"), None)
    average = next((r for r in program if r["record_type"] == "average"), None)
    total_us = float(total["total_time_us"]) if total else 0.0
    framework = "pytorch" if "formula" in set(ops.columns["flops_source"].tolist()) else "xla"
    ctx = Context(ops, analysis.device, analysis.facts, total_us, analysis.num_steps, framework)
    full = next((r for r in analysis.program[True].row_dicts() if r["record_type"] == "total"),
                None)
    wall = _wall_split(ctx, float(full["total_time_us"]) if full else total_us)
    findings = []
    for rule in rules.OP_RULES:
        findings += rule(ctx)
    findings += _program_findings(ctx, wall)
    _count(findings, ctx, wall)
    findings.sort(key=lambda f: (-f.time_saved_us, f.rule, f.title))
    step_us = float(average["total_time_us"]) if average else total_us
    counted = sum(f.counted_us for f in findings)
    host = ops.columns["host"][0] if len(ops) else ""
    return {
        "schema": SCHEMA, "framework": framework,
        "time": {"total_time_us": total_us, "step_time_us": step_us,
                 "num_steps": analysis.num_steps,
                 "timeline": analysis.facts is not None and analysis.facts.timeline is not None},
        "classes": [{"class": k, "label": label, "time_us": wall["classes"][k],
                     "percent": _pct(wall["classes"][k], total_us)} for k, label in CLASSES],
        "findings": [_finding_json(f, n, ctx, host, step_us) for n, f in enumerate(findings)],
        "total_time_saved_us": counted,
        "total_time_saved_per_step_us": _per_step(counted, total_us, step_us),
        "total_percent_of_step": _pct(counted, total_us),
        "throughput": throughput(analysis, include_io, workload, devices_in_run),
    }


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
    self_us = c["total_self_time_us"].astype(float)
    container = c["caveat"] == "container"
    comm = np.array([is_communication(cat, cav or "") for cat, cav in zip(
        c["category"].tolist(), c["caveat"].tolist())], bool)
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
    bound = c["bound_by"]
    trusted_class = np.array([not cav for cav in c["caveat"].tolist()], bool)
    work = ~container & ~comm
    cb = work & trusted_class & (bound == "Compute")
    mb = work & trusted_class & ~np.isin(bound, ("Compute", "Unknown", "Async"))
    shares = np.array([self_us[cb].sum(), self_us[mb].sum(), self_us[work & ~cb & ~mb].sum()])
    split = compute * shares / shares.sum() if shares.sum() > 0 else np.array([0, 0, compute])
    return {"classes": {"compute_bound": float(split[0]), "memory_bound": float(split[1]),
                        "communication": exposed, "idle": idle, "unknown": float(split[2])},
            "compute": compute, "idle": idle, "idle_in_steps": min(idle_in, idle),
            "exposed": exposed}


def _program_findings(ctx: Context, wall: dict) -> list:
    out = []
    total = ctx.total_time_us
    if total <= 0:
        return out
    idle = wall["idle"]
    if idle >= rules.IDLE_SHARE * total:
        facts = {"idle_us": idle, "idle_in_steps_us": wall["idle_in_steps"],
                 "idle_outside_steps_us": idle - wall["idle_in_steps"],
                 "idle_share": idle / total}
        out.append(Finding(
            "idle", f"The device is idle {idle / total:.0%} of the time", [], facts, idle,
            "No op runs for this long: the device waits for the host. Feed it ahead of time "
            "(DataLoader num_workers / pin_memory / prefetch, tf.data prefetch, batches put on "
            "the device one step early), keep Python work (logging, .item() / host syncs) out of "
            "the step, and cut launch gaps with CUDA graphs, jit or torch.compile."))
    exposed = wall["exposed"]
    if exposed >= rules.EXPOSED_SHARE * total:
        tl = ctx.facts.timeline
        top = sorted((tl.exposed_by_op if tl else {}).items(), key=lambda kv: -kv[1])[:5]
        facts = {"exposed_us": exposed, "exposed_share": exposed / total,
                 "contributors": [{"program_id": k[0], "operation": k[1], "precision": k[2],
                                   "exposed_us": v / 1e6} for k, v in top]}
        out.append(Finding(
            "exposed_communication", f"Communication and host transfers run alone "
            f"{exposed / total:.0%} of the time", [], facts, exposed,
            "Overlap them with compute: async collectives (XLA's latency-hiding scheduler, "
            "DDP/FSDP bucketing and prefetch), fewer and larger transfers, pinned host memory "
            "with non_blocking copies on a side stream, and input prefetch instead of "
            "synchronous host-to-device copies."))
    out += _straggler(ctx)
    return out


def _straggler(ctx: Context) -> list:
    steps = ctx.facts.host_step_ps if ctx.facts is not None else {}
    if len(steps) < 2:
        return []
    hosts = list(steps)
    t = np.vstack([steps[h] for h in hosts])  # hosts × steps (ps)
    mean = t.mean(axis=1)
    slow = int(np.argmax(mean))
    others = np.median(np.delete(t, slow, axis=0), axis=0)
    ratio = float(mean[slow] / others.mean()) if others.mean() > 0 else 0.0
    if ratio < rules.STRAGGLER_RATIO:
        return []
    wait_us = float(np.maximum(t[slow] - np.delete(t, slow, axis=0), 0).sum()) / 1e6 * max(
        1, ctx.device.num_cores // len(hosts))
    facts = {"host": hosts[slow], "ratio_to_median": ratio,
             "step_time_us": {h: float(m) / 1e6 for h, m in zip(hosts, mean)},
             "others_wait_us": wait_us}
    return [Finding(
        "straggler", f"Host {hosts[slow]} is {ratio - 1:.0%} slower per step than the others",
        [], facts, wait_us,
        f"In synchronous training every host waits for {hosts[slow]}: compare its op times and "
        "idle time with the others (its input shard, clocks / thermal throttling, background "
        "processes, an uneven split of data or model). Its wait shows up as the others' idle "
        "or exposed-communication time, so it is not added to the total again.")]


def _count(findings: list, ctx: Context, wall: dict):
    """`counted_us`: what each finding adds to the total. An op counts once (its largest
    claim); op findings together at most the wall time of non-communication ops."""
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
    for f in findings:
        if f.claim < 0:
            f.counted_us = 0.0 if f.rule == "straggler" else f.time_saved_us


def _finding_json(f: Finding, n: int, ctx: Context, host: str, step_us: float) -> dict:
    c = ctx.c
    cols = rules.OP_COLUMNS.get(f.rule, ())
    records = []
    for i in f.rows:
        row = {k: _value(c[k][i]) for k in cols}
        row.update({"program_id": str(c["program_id"][i]), "operation": str(c["operation"][i]),
                    "precision": str(c["precision"][i]), "host": str(c["host"][i])})
        records.append(row)
    return {
        "id": f"{f.rule}-{n + 1}", "rule": f.rule, "title": f.title,
        "scope": "op" if f.rows else "program",
        "ops": [{k: r[k] for k in ("program_id", "operation", "precision", "host")}
                for r in records],
        "evidence": {"records": records, "facts": f.facts},
        "time_saved_us": f.time_saved_us,
        "time_saved_per_step_us": _per_step(f.time_saved_us, ctx.total_time_us, step_us),
        "percent_of_step": _pct(f.time_saved_us, ctx.total_time_us),
        "counted_us": f.counted_us, "suggestion": f.suggestion,
    }


def _value(v):
    if isinstance(v, (np.floating, float)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v
