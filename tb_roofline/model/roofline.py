"""The roofline model: op tables in, program/step/host/op records out.

Knows nothing of file formats: it takes `ProfileData` (an `OpTable`, step and core spans, a
`DeviceInfo`). Every record comes from one grouped pass over the rows (`np.bincount` by record
id), so time is linear in rows, steps and hosts; strings are only touched per distinct op.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.model import facts as timeline_facts
from tb_roofline.model import peaks
from tb_roofline.model.op_table import OpTable, factorize
from tb_roofline.model.records import (RECORD_COLUMNS, SUM_COLUMNS, RecordTable, build_records,
                                       div, unknown_bytes)

CONTAINER_CAVEAT = "container"


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
    facts: "timeline_facts.Facts | None" = None  # timeline facts for the guidance rules
    derived: dict = dataclasses.field(default_factory=dict)  # answers cached by the service
    scope: "ScopeSource | None" = None  # what op records of one step need (scoped_op_records)


@dataclasses.dataclass
class ScopeSource:
    """The op tables behind an Analysis, with each row's aligned step, so that op records can be
    made for one step or the average step (run comparisons) after the Analysis is built."""
    tables: dict  # view ("op", "kernel", "kernel_hw") -> OpTable
    row_steps: dict  # view -> aligned step index of each row (-1: outside complete steps)
    step_labels: list  # aligned step index -> the label of its program record
    step_ps: dict  # include_io -> time of each aligned step (ps)
    span_ps: dict  # include_io -> the Total's time (ps)
    num_cores: int
    host_label: str
    cache: dict = dataclasses.field(default_factory=dict)


# Op record columns that add up over steps (divided by the step count for the average step).
EXTENSIVE_COLUMNS = ("occurrences", "total_time_us", "total_self_time_us", "flops",
                     "model_flops", "bytes", "total_time_per_core_us", "potential_time_saved_us",
                     "transfer_time_us") + tuple(c for c in RECORD_COLUMNS if c.endswith("_bytes"))


def scoped_op_records(analysis: Analysis, scope: str, include_io: bool = True, view: str = "op",
                      split_by: str | None = None) -> RecordTable:
    """Op records of one scope: `Total` (every row, as `analysis.ops`), `Average` (rows of
    complete steps, extensive columns divided by the step count: per step) or a step label as
    the program records name it. `split_by`: a key column whose values split records further
    (`fingerprint`: one record per PyTorch input shape). Cached on the analysis."""
    src = analysis.scope
    key = (scope, include_io, view, split_by)
    if key in src.cache:
        return src.cache[key]
    if scope == "Total" and not split_by:  # the records the analysis already has
        return analysis.ops[include_io] if view == "op" else analysis.views[view][include_io]
    table, row_step = src.tables[view], src.row_steps[view]
    n_steps = len(src.step_labels)
    if scope == "Total":
        mask, denominator = None, src.span_ps[include_io]
    elif scope == "Average":
        mask, denominator = row_step >= 0, float(src.step_ps[include_io].sum())
    else:
        i = src.step_labels.index(scope)  # the caller checks the label
        mask, denominator = row_step == i, float(src.step_ps[include_io][i])
    if mask is not None:
        table = table.select(mask)
    rec = op_records(table, row_sums(table, analysis.device), analysis.device, src.num_cores,
                     src.host_label, include_io, denominator, split_by=split_by)
    if scope == "Average" and n_steps:
        for c in EXTENSIVE_COLUMNS:
            rec.columns[c] = rec.columns[c] / n_steps
    src.cache[key] = rec
    return rec


def row_sums(table: OpTable, device: DeviceInfo) -> dict[str, np.ndarray]:
    """Per-row values of SUM_COLUMNS: the table's numbers, the time each row's FLOPs would take
    on its own precision's roof (summed, it gives any group its mixed-precision roof), and the
    op time whose FLOPs / bytes are known (for coverage)."""
    rows, keys, op = table.rows, table.keys, table.rows["op"]
    out = {c: rows[c].astype(np.float64) for c in SUM_COLUMNS if c in rows}
    codes = factorize(keys["precision"])
    distinct = {}
    for p, c in zip(keys["precision"].tolist(), codes.tolist()):
        distinct.setdefault(c, p)
    roof = np.array([device.peak_for(distinct[c]) for c in range(len(distinct))] or [0.0])
    key_peak = roof[codes] if len(codes) else np.zeros(0)
    time = out["total_time_ps"]
    out["roof_time"] = div(out["flops"], key_peak[op]) if len(op) else np.zeros(0)
    out["flops_known_ps"] = time * keys["flops_known"][op]
    out["bytes_known_ps"] = time * keys["bytes_known"][op]
    out["op_time_ps"] = time
    return out


def _bincount(vals: dict, codes: np.ndarray, n: int, mask=None) -> dict:
    if mask is not None:
        codes = codes[mask]
    return {c: np.bincount(codes, weights=v if mask is None else v[mask], minlength=n)
            for c, v in vals.items()}


def op_records(table: OpTable, vals: dict, device: DeviceInfo, num_cores: int,
               host_label: str, include_io: bool, span_ps: float,
               split_by: str | None = None) -> RecordTable:
    """One record per (program, op, precision) over all cores, hosts and steps; ranked by self
    time, ties by name. A row merges only calls that ran in one precision (its roof).
    `split_by`: a key column that splits records further; its values are then in the records
    (an extra column)."""
    keys = table.keys
    keep = np.ones(len(table), bool) if include_io else ~keys["is_infeed_outfeed"][table.rows["op"]]
    # Record id of each key: program id, op name and precision (not the host).
    split = (keys[split_by],) if split_by else ()
    rec_of_key = factorize(_tuples(keys["program_id"], keys["operation"], keys["precision"],
                                   *split))
    codes = rec_of_key[table.rows["op"]]
    present = np.unique(codes[keep])
    remap = np.full(int(rec_of_key.max()) + 1 if len(rec_of_key) else 0, -1, np.int64)
    remap[present] = np.arange(len(present))
    n = len(present)
    sums = _bincount(vals, remap[codes], n, keep) if n else {c: np.zeros(0) for c in vals}
    # The first key of each record labels it (a reader caveat: the first one that is set).
    key_rec = remap[rec_of_key]
    first_key = np.full(n, -1, np.int64)
    valid = np.flatnonzero(key_rec >= 0)
    first_key[key_rec[valid[::-1]]] = valid[::-1]
    caveat = keys["caveat"]
    has_caveat = np.flatnonzero((caveat != "") & (key_rec >= 0))
    cav = np.full(n, "", dtype=object)
    cav[key_rec[has_caveat[::-1]]] = caveat[has_caveat[::-1]]
    container = keys["is_container"][first_key] if n else np.zeros(0, bool)
    cav[container & (cav == "")] = CONTAINER_CAVEAT
    name = keys["operation"][first_key]
    order = np.lexsort((keys["precision"][first_key].astype(str), name.astype(str),
                        -sums["self_time_ps"])) if n else np.zeros(0, np.int64)
    first_key, sums, cav = first_key[order], {k: v[order] for k, v in sums.items()}, cav[order]
    labels = {"record_type": "op", "step": "Total", "rank": np.arange(1, n + 1),
              "host": host_label}
    for col in ("category", "operation", "program", "program_id", "is_infeed_outfeed",
                "source", "tf_op", "flops_source", "precision"):
        labels[col] = keys[col][first_key]
    # A program without a module name (no `XLA Modules` event for it) is named by its id.
    unnamed = (labels["program"] == "") & (labels["program_id"] != "")
    labels["program"] = np.where(unnamed, np.char.add("program ", labels["program_id"].astype(str)),
                                 labels["program"]).astype(object)
    rec = build_records(sums, device, num_cores, labels, n, include_io, np.full(n, span_ps), cav)
    # Percentages of all ops' self time in this view: they sum to 100.
    self_pct = div(sums["self_time_ps"], np.full(n, sums["self_time_ps"].sum())) * 100.0
    rec.columns["self_time_percent"] = self_pct
    rec.columns["cumulative_self_time_percent"] = np.cumsum(self_pct)
    rec.columns["potential_time_saved_us"][keys["is_container"][first_key]] = 0.0
    if split_by:
        rec.columns[split_by] = keys[split_by][first_key]
    return rec


def _tuples(*columns) -> np.ndarray:
    out = np.empty(len(columns[0]), dtype=object)
    out[:] = list(zip(*[c.tolist() for c in columns]))
    return out


def _host_steps(profiles) -> list[list[tuple[str, int]]]:
    """Complete steps: present on every core of a host; hosts aligned by position (as XProf).

    Returns one entry per step: the (host, step id) pairs that make it up.
    """
    per_host = []
    for p in profiles:
        by_core: dict[int, set] = {}
        for s in p.steps:
            by_core.setdefault(s.core, set()).add(s.step)
        cores = {c.core for c in p.core_spans}
        if not by_core or set(by_core) != cores:
            per_host.append([])
            continue
        common = set.intersection(*by_core.values())
        host = p.core_spans[0].host
        per_host.append([(host, s) for s in sorted(common)])
    if not per_host:
        return []
    k = min(len(h) for h in per_host)
    return [[h[i] for h in per_host] for i in range(k)]


def analyze(profiles: list, host_label: str = "*") -> Analysis:
    device = DeviceInfo.merge([p.device for p in profiles])
    table = OpTable.concat([p.ops for p in profiles])
    kernel_tables = {}
    for name, attr in (("kernel", "kernels"), ("kernel_hw", "hw_ops")):
        tables = [getattr(p, attr) for p in profiles if getattr(p, attr, None) is not None]
        if any(len(t) for t in tables):
            kernel_tables[name] = OpTable.concat(tables)
    diagnostics = []
    for p in profiles:  # say which host a diagnostic is about when several are aggregated
        host = p.core_spans[0].host if p.core_spans else ""
        for d in p.diagnostics:
            diagnostics.append(Diagnostic(d.severity, d.code, f"host {host}: {d.message}")
                               if len(profiles) > 1 and host else d)
    kinds = {}
    for p in profiles:
        if p.device is not None and p.core_spans:
            kinds.setdefault(p.device.type, []).append(p.core_spans[0].host)
    if len(kinds) > 1:
        diagnostics.append(Diagnostic(
            "warning", "mixed_devices",
            "the hosts of this run report different devices (" + "; ".join(
                f"{t}: {', '.join(h[:3])}{' ...' if len(h) > 3 else ''}" for t, h in kinds.items())
            + f"): the aggregate is judged against {device.type}'s peaks; look at each host alone"))
    # A profile-derived peak that the profile's own ops beat is the figure in doubt.
    device, notes = peaks.settle(device, table, kernel_tables.get("kernel"), row_sums)
    diagnostics += notes
    analysis = _analyze(profiles, device, table, kernel_tables, host_label, diagnostics)
    return analysis


def _analyze(profiles, device, table, kernel_tables, host_label, diagnostics) -> Analysis:
    num_cores = max(device.num_cores, 1)
    vals = row_sums(table, device)
    op = table.rows["op"]
    keys = table.keys
    inner = ~keys["is_container"][op]
    is_io = keys["is_infeed_outfeed"][op]
    io_inner = is_io & inner
    host_names = [c.host for p in profiles for c in p.core_spans[:1]]
    row_host = _row_hosts(table, host_names)
    spans_ps = float(sum(s.duration_ps for p in profiles for s in p.core_spans))
    host_span = np.array([float(sum(s.duration_ps for s in p.core_spans)) for p in profiles
                          if p.core_spans])
    time = vals["total_time_ps"]
    io_time = float(time[io_inner].sum())
    io_host = np.bincount(row_host[io_inner], weights=time[io_inner], minlength=len(host_names))

    # Steps: (host, step id) of each row -> aligned step index, in one pass.
    steps = _host_steps(profiles)
    step_marks: dict = {}
    for p in profiles:
        for s in p.steps:
            step_marks.setdefault((s.host, s.step), []).append(s.duration_ps)
    # XProf: a step's time is its longest marker over the host's cores × the number of cores.
    step_time = {k: len(v) * max(v) for k, v in step_marks.items()}
    member_index = {(_index(host_names, h), sid): i for i, members in enumerate(steps)
                    for h, sid in members}
    row_step = _step_index(row_host, table.rows["step"], member_index)
    n_steps = len(steps)
    step_time_all = np.array([sum(step_time.get(m, 0) for m in members) for members in steps])
    io_step = np.bincount(row_step[io_inner & (row_step >= 0)],
                          weights=time[io_inner & (row_step >= 0)], minlength=n_steps)

    kernel_vals = {name: row_sums(t, device) for name, t in kernel_tables.items()}
    hw = [p.hw_counters for p in profiles if getattr(p, "hw_counters", None) is not None]
    single_host = len(profiles) == 1
    program, ops, views = {}, {}, {}
    step_ps_of = {}
    for include_io in (True, False):
        denominator = spans_ps - (0.0 if include_io else io_time)
        ops[include_io] = op_records(table, vals, device, num_cores, host_label, include_io,
                                     denominator)
        for name, t in kernel_tables.items():
            views.setdefault(name, {})[include_io] = op_records(
                t, kernel_vals[name], device, num_cores, host_label, include_io, denominator)
        keep = inner if include_io else inner & ~is_io
        rows = []  # (record_type, step label, time ps, sums, host)
        total = {c: np.array([v[keep].sum()]) for c, v in vals.items()}
        rows.append(("total", "Total", denominator, total, host_label))
        if hw:
            rows.append(("total_hw", "Total (HW)", denominator, _hw_sums(hw, device), host_label))
        if not single_host:  # one point per host (rank), so a straggler shows
            by_host = _bincount(vals, row_host, len(host_names), keep)
            for i, h in enumerate(host_names):
                span = host_span[i] - (0.0 if include_io else io_host[i])
                rows.append(("host", "Total", span, {c: v[i:i + 1] for c, v in by_host.items()}, h))
        if n_steps:
            in_step = keep & (row_step >= 0)
            by_step = _bincount(vals, row_step, n_steps, in_step)
            step_ps = step_time_all - (0.0 if include_io else io_step)
            step_ps_of[include_io] = step_ps
            avg = {c: np.array([v.sum() / n_steps]) for c, v in by_step.items()}
            rows.append(("average", "Average", float(step_ps.sum() / n_steps), avg, host_label))
            for i, members in enumerate(steps):
                label = str(members[0][1]) if single_host else str(i)
                rows.append(("step", label, float(step_ps[i]),
                             {c: v[i:i + 1] for c, v in by_step.items()}, host_label))
        program[include_io] = _program_table(rows, profiles, device, num_cores, include_io,
                                             keys["flops_source"])

    if not steps:
        diagnostics.append(Diagnostic(
            "warning", "no_steps",
            "no complete step markers (a 'Steps' line with group_id on every core): only the "
            "Total record is shown, no Average or per-step records. Annotate training steps "
            "(e.g. jax.profiler.StepTraceAnnotation) or profile longer than one step."))
    if not device.peaks_known and not any(d.code == "peaks_unknown" for d in diagnostics):
        diagnostics.append(Diagnostic("warning", "peaks_unknown",
                                      "the profile carries no peak FLOP rate for this device: "
                                      "efficiencies and bound-by cannot be computed"))
    if len(table) == 0:
        diagnostics.append(Diagnostic("warning", "no_ops",
                                      "no XLA ops with FLOPs/bytes were found in this profile"))
    diagnostics += _coverage_notes(program[True])
    if hw:
        diagnostics.append(Diagnostic("info", "hw_counters", hw[0].note))
    labels = [str(m[0][1]) if single_host else str(i) for i, m in enumerate(steps)]
    tables = dict(kernel_tables, op=table)
    scope = ScopeSource(
        tables=tables,
        row_steps={name: row_step if t is table else _step_index(
            _row_hosts(t, host_names), t.rows["step"], member_index) for name, t in tables.items()},
        step_labels=labels, step_ps={io: step_ps_of.get(io, np.zeros(0)) for io in (True, False)},
        span_ps={io: spans_ps - (0.0 if io else io_time) for io in (True, False)},
        num_cores=num_cores, host_label=host_label)
    return Analysis(device=device, program=program, ops=ops, diagnostics=diagnostics,
                    num_steps=n_steps, has_hw_counters=bool(hw), views=views, scope=scope,
                    facts=timeline_facts.collect(profiles, table, steps))


def _row_hosts(table: OpTable, host_names: list) -> np.ndarray:
    """Each row's host as an index into `host_names`."""
    keys, op = table.keys, table.rows["op"]
    code_of_key = np.array([_index(host_names, h) for h in keys["host"].tolist()],
                           np.int64) if len(keys["host"]) else np.zeros(0, np.int64)
    return code_of_key[op] if len(op) else np.zeros(0, np.int64)


def _index(values: list, value) -> int:
    try:
        return values.index(value)
    except ValueError:
        return 0


def _step_index(row_host: np.ndarray, row_step: np.ndarray, member_index: dict) -> np.ndarray:
    """The aligned step index of each row (-1 when its (host, step) is not a complete step)."""
    if not len(row_step) or not member_index:
        return np.full(len(row_step), -1, np.int64)
    # Step ids may be any int64 (a corrupt group_id): rank them first, then pair with hosts.
    step_ids, step_code = np.unique(row_step, return_inverse=True)
    width = len(step_ids)
    uniq, inverse = np.unique(row_host * width + step_code.reshape(-1), return_inverse=True)
    mapped = np.array([member_index.get((int(u) // width, int(step_ids[int(u) % width])), -1)
                       for u in uniq.tolist()], np.int64)
    return mapped[inverse.reshape(-1)]


def _hw_sums(hw, device) -> dict:
    """FLOPs counted by the hardware, over the same time (when the trace timed kernels)."""
    sums = {c: np.zeros(1) for c in SUM_COLUMNS}
    sums["occurrences"] = np.ones(1)
    sums["flops"] = np.array([sum(h.total_flops for h in hw)])
    sums["model_flops"] = sums["flops"].copy()
    sums["roof_time"] = np.array([sum(float(div(f, device.peak_for(p)))
                                      for h in hw for p, f in h.flops.items())])
    sums["flops_known_ps"] = sums["op_time_ps"] = np.ones(1)
    return sums


def _program_table(rows, profiles, device, num_cores, include_io, flops_source) -> RecordTable:
    n = len(rows)
    merged = {c: np.concatenate([np.asarray(r[3][c], np.float64).reshape(1) for r in rows])
              for c in SUM_COLUMNS}
    merged["total_time_ps"] = np.array([r[2] for r in rows], np.float64)
    merged["self_time_ps"] = np.zeros(n)
    merged["occurrences"] = np.ones(n)
    timed = np.array([r[0] != "total_hw" or all(h.kernel_time_known for h in (
        p.hw_counters for p in profiles if p.hw_counters is not None)) for r in rows])
    merged["total_time_ps"] = np.where(timed, merged["total_time_ps"], 0.0)
    distinct = set(flops_source.tolist())
    labels = {"record_type": np.array([r[0] for r in rows], dtype=object),
              "step": np.array([r[1] for r in rows], dtype=object), "rank": np.zeros(n, np.int64),
              "category": "Program", "operation": "Program", "program": "", "program_id": "",
              "is_infeed_outfeed": np.zeros(n, bool), "source": "", "tf_op": "",
              "flops_source": distinct.pop() if len(distinct) == 1 else (
                  "mixed" if distinct else "none"),
              "precision": "mixed", "host": np.array([r[4] for r in rows], dtype=object)}
    prog = build_records(merged, device, num_cores, labels, n, include_io,
                         merged["total_time_ps"])
    cores = {p.core_spans[0].host: p.device.num_cores for p in profiles if p.core_spans}
    for i, r in enumerate(rows):
        if r[0] == "host":  # a host's time per core is over its own cores
            prog.columns["total_time_per_core_us"][i] = r[2] / 1e6 / max(cores.get(r[4], 1), 1)
        if r[0] == "total_hw":  # counters give FLOPs only: bytes (and untimed rates) unknown
            unknown_bytes(prog, i, timed=bool(timed[i]))
            prog.columns["flops_source"][i] = "counter"
            prog.columns["flop_coverage"][i] = np.nan
            prog.columns["bytes_coverage"][i] = np.nan
    prog.columns["self_time_percent"] = np.zeros(n)
    prog.columns["cumulative_self_time_percent"] = np.zeros(n)
    return prog


def _coverage_notes(program: RecordTable) -> list[Diagnostic]:
    """Say so when most of the op time has unknown FLOPs or bytes: the program's point then
    describes only the known part."""
    if not len(program):
        return []
    total = program.row_dicts()[0]
    flops, nbytes = total["flop_coverage"], total["bytes_coverage"]
    low = [(what, cov) for what, cov in (("FLOPs", flops), ("bytes", nbytes))
           if cov is not None and cov < 0.5]
    if not low:
        return []
    if len(low) == 2 and abs(flops - nbytes) < 5e-4:
        low = [("FLOPs and bytes", flops)]
    return [Diagnostic(
        "warning", "low_coverage",
        f"only {cov * 100:.1f}% of the op time has known {what}: the program-level rates, "
        "bound-by and efficiency describe that part, not the whole run (ops without a cost "
        "are marked no_cost; see their time in the op table)") for what, cov in low]
