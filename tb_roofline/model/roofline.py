"""The roofline model: op tables in, program/step/host/op records out.

Knows nothing of file formats: it takes `ProfileData` (an `OpTable`, step and core spans, a
`DeviceInfo`). One pass over the rows sums every column per key (distinct op); op, program and
host records group those key sums, and only per-step records take a second pass over the rows
(`np.bincount` by step). Time is linear in rows, steps and hosts; strings are only touched per
distinct op.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.spec import DeviceInfo, split_kernel_type
from tb_roofline.diagnostics import Diagnostic, no_hw_counters_note
from tb_roofline.model import facts as timeline_facts
from tb_roofline.model import peaks
from tb_roofline.model import serving as serving_model
from tb_roofline.model import steps as steps_model
from tb_roofline.model.floors import KeyFloors, Roofs, mixed_regimes, proven_keys
from tb_roofline.model.records import (
    CONTAINER_CAVEAT,
    RECORD_COLUMNS,
    SUM_COLUMNS,
    RecordTable,
    build_records,
    call_floors,
    compute_roof,
    div,
    mixed_roof,
    resources,
    scope_record_type,
    unknown_bytes,
)
from tb_roofline.table.op_table import (
    COST_COLUMNS,
    ROW_BLOCK,
    OpTable,
    constant,
    distinct,
    factorize,
    is_constant,
)


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
    serving: list = dataclasses.field(default_factory=list)  # model/serving.py summary
    floors: KeyFloors | None = None  # per-call floors of the op records (guidance rules)


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
    src = analysis.scope
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
    src = analysis.scope
    kind = scope_record_type(scope)
    table, row_step = src.tables[view], src.row_steps(view)
    n_steps = len(src.step_labels)
    if kind == "total":
        mask, denominator = None, src.span_ps[include_io]
    elif kind == "average" and scope in src.phase_steps:  # `Average · decode`
        idx = np.asarray(src.phase_steps[scope], np.int64)
        n_steps = len(idx)
        mask = np.isin(row_step, idx)
        denominator = float(src.step_ps[include_io][idx].sum())
    elif kind == "average":
        mask, denominator = row_step >= 0, float(src.step_ps[include_io].sum())
    else:
        i = src.step_labels.index(scope)  # the caller checks the label
        mask, denominator = row_step == i, float(src.step_ps[include_io][i])
    if mask is not None:
        table = table.select(mask)
    return table, denominator, n_steps


def _key_peaks(table: OpTable, device: DeviceInfo) -> np.ndarray:
    """The compute ceiling of each key's precision (records.compute_roof; 0 when none)."""
    return compute_roof(device, table.keys["precision"])


_ROW_COLUMNS = tuple(
    c
    for c in SUM_COLUMNS
    if c
    not in ("roof_time", "flops_known_ps", "bytes_known_ps", "op_time_ps", "floor_time", "gap_ps")
)


def _row_column(table: OpTable, c: str, roofs: Roofs | None) -> np.ndarray:
    """One per-row column of SUM_COLUMNS (float64; the table's own array when it is one)."""
    rows, keys, op = table.rows, table.keys, table.rows["op"]
    if c in rows and is_constant(rows[c]):  # (still one value: `_sum_by` counts it)
        return constant(np.float64(rows[c][0]), len(rows[c]))
    if c in rows or c in COST_COLUMNS:
        return np.asarray(table[c], np.float64)
    if c == "roof_time":
        return table["flops"] * roofs.inv_peak[op]
    if c in ("floor_time", "gap_ps"):
        mem = {col: table[col] for _, col, _ in resources(roofs.device)}
        floor = roofs.floors(table["flops"], mem, op)
        if c == "floor_time":
            return floor
        if roofs.proven is None:
            return np.zeros(len(op))
        return (np.asarray(rows["total_time_ps"], np.float64) - floor * 1e3) * roofs.proven[op]
    time = np.asarray(rows["total_time_ps"], np.float64)
    if c == "op_time_ps":
        return time
    return time * keys["flops_known" if c == "flops_known_ps" else "bytes_known"][op]


def _sum_rows(
    table: OpTable, c: str, roofs: Roofs, codes: np.ndarray, n: int, buf: np.ndarray | None
) -> np.ndarray:
    """`_sum_by(codes, _row_column(table, c, roofs), n)`, a derived column made a block of
    rows at a time into `buf` (as long as the table; None for a table of one block): one such
    array, not the two or three temporaries of the whole column (`roof_time`: the rows'
    FLOPs, each row's peak, their product). Each value is computed as the whole column
    computes it, so the sums are the same."""
    rows = table.rows
    own = c == "op_time_ps" or c in rows and (is_constant(rows[c]) or rows[c].dtype == np.float64)
    if own or buf is None:
        return _sum_by(codes, _row_column(table, c, roofs), n)
    for lo in range(0, len(buf), ROW_BLOCK):
        part = OpTable(
            table.keys, {k: v[lo : lo + ROW_BLOCK] for k, v in rows.items()}, table.unit_costs
        )
        buf[lo : lo + ROW_BLOCK] = _row_column(part, c, roofs)
    return _sum_by(codes, buf, n)


def _sum_by(codes: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """`np.bincount(codes, weights, n)`; a constant column of zeros or ones (table/op_table.py)
    as counts, without the full-length copy bincount would make of it (the same sums, exactly:
    counts of ones are integers)."""
    if is_constant(weights) and weights[0] in (0, 1) and len(weights) == len(codes):
        return np.bincount(codes, minlength=n) * (float(weights[0]) + 0.0)  # (never -0.0)
    return np.bincount(codes, weights=weights, minlength=n)


def key_sums(table: OpTable, device: DeviceInfo) -> dict[str, np.ndarray]:
    """SUM_COLUMNS summed per key (distinct op) in one pass over the rows: every record that
    groups whole keys (ops, program totals, hosts) is then a sum over keys."""
    n, op = table.num_keys, table.rows["op"]
    unit = table.unit_costs
    out = {
        c: _sum_by(op, _row_column(table, c, None), n)
        for c in _ROW_COLUMNS
        if unit is None or c not in COST_COLUMNS
    }
    if unit is not None:  # a row's costs are its key's times its occurrences
        for j, c in enumerate(COST_COLUMNS):  # (columns a reader does not give: 0)
            out[c] = unit[:, j] * out["occurrences"] if j < unit.shape[1] else np.zeros(n)
    out["roof_time"] = div(out["flops"], _key_peaks(table, device))
    out["flops_known_ps"] = out["total_time_ps"] * table.keys["flops_known"]
    out["bytes_known_ps"] = out["total_time_ps"] * table.keys["bytes_known"]
    out["op_time_ps"] = out["total_time_ps"]
    # A key's calls share one shape (PyTorch keys hold their input shapes, XLA keys are one
    # instruction): its floor from its sums is the sum of its calls' floors.
    out["floor_time"], out["bound_code"] = call_floors(
        out["flops"], out, div(1.0, _key_peaks(table, device)), device, Roofs.of(table, device).link
    )
    out["gap_ps"] = np.zeros(n)  # (set once the op records say which gaps are proven)
    return out


def _group(sums: dict, codes: np.ndarray, n: int, mask=None) -> dict:
    """Sums grouped by a code per element (elements with mask False left out)."""
    if mask is not None:
        codes = codes[mask]
    return {
        c: np.bincount(codes, weights=v if mask is None else v[mask], minlength=n)
        for c, v in sums.items()
    }


def op_records(
    table: OpTable,
    ksums: dict,
    device: DeviceInfo,
    num_cores: int,
    host_label: str,
    include_io: bool,
    span_ps: float,
    split_by: str | None = None,
    group: np.ndarray | None = None,
) -> RecordTable:
    """One record per (program, op, precision) over all cores, hosts and steps; ranked by self
    time, ties by name. A row merges only calls that ran in one precision (its roof).
    `ksums`: `key_sums` of the table. `split_by`: a key column that splits records further;
    its values are then in the records (an extra column). `group`: a record code per key (-1:
    left out) in place of that key (`merged_op_records`); a record whose keys ran in several
    precisions is labelled with all of them (`bf16+f32`) and sits under their mixed roof."""
    keys = table.keys
    keep = np.ones(table.num_keys, bool) if include_io else ~keys["is_infeed_outfeed"]
    keep &= np.bincount(table.rows["op"], minlength=table.num_keys) > 0
    if group is not None:
        keep &= group >= 0
        rec_of_key = np.where(group >= 0, group, 0)
    else:  # record id of each key: program id, op name and precision (not the host)
        split = (factorize(keys[split_by]),) if split_by else ()
        rec_of_key = _combine(
            factorize(keys["program_id"]),
            factorize(keys["operation"]),
            factorize(keys["precision"]),
            *split,
        )
    present = distinct(rec_of_key[keep])
    remap = np.full(int(rec_of_key.max()) + 1 if len(rec_of_key) else 0, -1, np.int64)
    remap[present] = np.arange(len(present))
    n = len(present)
    key_rec = remap[rec_of_key] if group is None else np.where(keep, remap[rec_of_key], -1)
    sums = _group(ksums, key_rec, n, keep) if n else {c: np.zeros(0) for c in ksums}
    mixed = mixed_regimes(ksums, key_rec, keep, n)
    # The first key of each record labels it (a reader caveat: the first one that is set).
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
    order = (
        np.lexsort(
            (keys["precision"][first_key].astype(str), name.astype(str), -sums["self_time_ps"])
        )
        if n
        else np.zeros(0, np.int64)
    )
    first_key, sums, cav = first_key[order], {k: v[order] for k, v in sums.items()}, cav[order]
    labels = {
        "record_type": "op",
        "step": "Total",
        "rank": np.arange(1, n + 1),
        "host": host_label,
        "mixed_regimes": mixed[order],
    }
    for col in (
        "category",
        "operation",
        "program",
        "program_id",
        "is_infeed_outfeed",
        "source",
        "tf_op",
        "flops_source",
        "precision",
    ):
        labels[col] = keys[col][first_key]
    # The data type its inputs had (the precision names the roof it sits under: a bf16
    # elementwise op runs on the vector units, under their roof).
    labels["dtype"] = _data_types(keys["dtype"][first_key])
    if group is not None:
        sums = _mixed_precisions(sums, labels, keys["precision"], key_rec, order, device)
    # A program without a module name (no `XLA Modules` event for it) is named by its id.
    unnamed = np.flatnonzero((labels["program"] == "") & (labels["program_id"] != ""))
    if len(unnamed):
        labels["program"] = labels["program"].copy()
        labels["program"][unnamed] = [
            "program " + str(p) for p in labels["program_id"][unnamed].tolist()
        ]
    rec = build_records(
        sums,
        device,
        num_cores,
        labels,
        n,
        include_io,
        np.full(n, span_ps),
        cav,
        containers=keys["is_container"][first_key] if n else np.zeros(0, bool),
    )
    # Percentages of all ops' self time in this view: they sum to 100.
    self_pct = div(sums["self_time_ps"], np.full(n, sums["self_time_ps"].sum())) * 100.0
    rec.columns["self_time_percent"] = self_pct
    rec.columns["cumulative_self_time_percent"] = np.cumsum(self_pct)
    if split_by:
        rec.columns[split_by] = keys[split_by][first_key]
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    rec.key_record = np.where(key_rec >= 0, rank[np.maximum(key_rec, 0)] if n else -1, -1)
    return rec


def _mixed_precisions(
    sums: dict,
    labels: dict,
    precision: np.ndarray,
    key_rec: np.ndarray,
    order: np.ndarray,
    device: DeviceInfo,
) -> dict:
    """Records of keys in several precisions: every precision in the label, and the roof of
    the mix (records.mixed_roof); the others keep their own precision's ceiling."""
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    seen: dict = {}
    for r, p in zip(key_rec.tolist(), precision.tolist()):
        if r >= 0:
            seen.setdefault(int(rank[r]), set()).add(str(p))
    label = labels["precision"].copy()
    peak = compute_roof(device, label)
    mix = mixed_roof(sums["flops"], sums["roof_time"], device)
    for i, ps in seen.items():
        if len(ps) > 1:
            label[i] = "+".join(sorted(ps))
            peak[i] = mix[i]
    labels["precision"] = label
    return dict(sums, peak=peak)


def _data_types(dtypes: np.ndarray) -> np.ndarray:
    """Data types as named in the API: the recorded input type, also of a row whose kernel
    named its unit (`kernel:tf32/f32` -> f32); "" when none was recorded (`kernel:tf32`)."""
    names = {d: split_kernel_type(d)[1] for d in set(dtypes.tolist())}
    out = np.empty(len(dtypes), dtype=object)
    out[:] = [names[d] for d in dtypes.tolist()]
    return out


def _combine(*codes: np.ndarray) -> np.ndarray:
    """One code per combination of several integer codes (equal combinations, equal codes)."""
    out = np.zeros(len(codes[0]), np.int64)
    for c in codes:
        width = int(c.max()) + 1 if len(c) else 1
        if int(out.max(initial=0)) * width + width >= 2**62:
            out = np.unique(out, return_inverse=True)[1].reshape(-1)
        out = out * width + c
    return np.unique(out, return_inverse=True)[1].reshape(-1) if len(out) else out


def analyze(profiles: list, host_label: str = "*") -> Analysis:
    device = DeviceInfo.merge([p.device for p in profiles])
    # The hosts' tables (a service keeps them) become views of the run's: one copy of the rows.
    table = OpTable.concat([p.ops for p in profiles], share=True)
    kernel_tables = {}
    for name, attr in (("kernel", "kernels"), ("kernel_hw", "hw_ops")):
        tables = [getattr(p, attr) for p in profiles if getattr(p, attr, None) is not None]
        if any(len(t) for t in tables):
            kernel_tables[name] = OpTable.concat(tables, share=True)
    diagnostics = []
    for p in profiles:  # say which host a diagnostic is about when several are aggregated
        host = p.core_spans[0].host if p.core_spans else ""
        for d in p.diagnostics:
            diagnostics.append(
                Diagnostic(d.severity, d.code, f"host {host}: {d.message}")
                if len(profiles) > 1 and host
                else d
            )
    kinds = {}
    for p in profiles:
        if p.device is not None and p.core_spans:
            kinds.setdefault(p.device.type, []).append(p.core_spans[0].host)
    if len(kinds) > 1:
        diagnostics.append(
            Diagnostic(
                "warning",
                "mixed_devices",
                "the hosts of this run report different devices ("
                + "; ".join(
                    f"{t}: {', '.join(h[:3])}{' ...' if len(h) > 3 else ''}"
                    for t, h in kinds.items()
                )
                + f"): the aggregate is judged against {device.type}'s peaks; "
                "look at each host alone",
            )
        )
    # A profile-derived peak that the profile's own ops beat is the figure in doubt.
    device, notes = peaks.settle(device, table, kernel_tables.get("kernel"), key_sums)
    diagnostics += notes
    analysis = _analyze(profiles, device, table, kernel_tables, host_label, diagnostics)
    return analysis


def _analyze(profiles, device, table, kernel_tables, host_label, diagnostics) -> Analysis:
    num_cores = max(device.num_cores, 1)
    keys, op = table.keys, table.rows["op"]
    ksums = key_sums(table, device)
    inner, is_io = ~keys["is_container"], keys["is_infeed_outfeed"]
    host_names = [c.host for p in profiles for c in p.core_spans[:1]]
    key_host = _key_hosts(profiles, host_names)
    spans_ps = float(sum(s.duration_ps for p in profiles for s in p.core_spans))
    host_span = np.array(
        [float(sum(s.duration_ps for s in p.core_spans)) for p in profiles if p.core_spans]
    )
    io_keys = inner & is_io
    io_time = float(ksums["total_time_ps"][io_keys].sum())
    io_host = np.bincount(
        key_host[io_keys], weights=ksums["total_time_ps"][io_keys], minlength=len(host_names)
    )

    # The op records first: which keys' gaps to their roofs are proven (their record has a
    # time saved), so the program records' time saved is the sum of those, per step too.
    ops = {
        io: op_records(
            table, ksums, device, num_cores, host_label, io, spans_ps - (0.0 if io else io_time)
        )
        for io in (True, False)
    }
    roofs = Roofs.of(table, device)
    roofs.proven = proven_keys(ops[True], device)
    ksums["gap_ps"] = (ksums["total_time_ps"] - ksums["floor_time"] * 1e3) * roofs.proven

    # Steps: the aligned step of each row; sums per (step, infeed/outfeed or not) in one pass.
    aligned = steps_model.align(profiles)
    n_steps = len(aligned)
    single_ids = aligned.ids[0] if n_steps and len(profiles) == 1 else []
    labels = (
        (
            serving_model.step_labels(profiles, single_ids)
            if len(profiles) == 1
            else [str(x) for x in range(n_steps)]
        )
        if n_steps
        else []
    )
    phases = serving_model.phase_steps(profiles, single_ids) if n_steps else {}
    by_step = {}
    if n_steps:
        profile_host = np.array(
            [_index(host_names, p.core_spans[0].host) if p.core_spans else 0 for p in profiles],
            np.int64,
        )
        # (in place where it can: a table of millions of rows makes each temporary count)
        code = steps_model.row_steps(aligned, profile_host, key_host, op, table.rows["step"])
        left_out = code < 0
        left_out |= keys["is_container"][op]
        code *= 2
        code += is_io[op]
        code[left_out] = 2 * n_steps
        del left_out
        buf = np.empty(len(code)) if len(code) > ROW_BLOCK else None
        for c in SUM_COLUMNS:
            if c == "floor_time":  # (op records' column: a program's saving is its gap_ps)
                by_step[c] = np.zeros((n_steps, 2))
                continue
            by_step[c] = _sum_rows(table, c, roofs, code, 2 * n_steps + 1, buf)[:-1].reshape(
                n_steps, 2
            )
        del buf
    kernel_sums = {name: key_sums(t, device) for name, t in kernel_tables.items()}
    hw = [p.hw_counters for p in profiles if getattr(p, "hw_counters", None) is not None]
    single_host = len(profiles) == 1
    program, views = {}, {}
    step_ps_of = {}
    for include_io in (True, False):
        denominator = spans_ps - (0.0 if include_io else io_time)
        for name, t in kernel_tables.items():
            views.setdefault(name, {})[include_io] = op_records(
                t, kernel_sums[name], device, num_cores, host_label, include_io, denominator
            )
        keep = inner if include_io else inner & ~is_io
        blocks = [_total_block(ksums, keep, denominator, host_label)]
        if hw:
            blocks.append(_hw_block(hw, device, denominator, host_label))
        if not single_host:  # one point per host (rank), so a straggler shows
            blocks.append(
                _host_block(
                    ksums, keep, key_host, host_names, host_span - (0.0 if include_io else io_host)
                )
            )
        if n_steps:
            step_sums = {c: v.sum(axis=1) if include_io else v[:, 0] for c, v in by_step.items()}
            step_ps = aligned.time_ps - (0.0 if include_io else by_step["total_time_ps"][:, 1])
            step_ps_of[include_io] = step_ps
            blocks.append(_average_block(step_sums, step_ps, n_steps, host_label))
            blocks += serving_model.phase_average_blocks(phases, step_sums, step_ps, host_label)
            label = labels if single_host else np.arange(n_steps)
            blocks.append(_step_block(step_sums, step_ps, label, host_label))
        program[include_io] = program_records(
            blocks, profiles, device, num_cores, include_io, keys["flops_source"]
        )

    if not n_steps:
        diagnostics.append(
            Diagnostic(
                "warning",
                "no_steps",
                "no complete step markers (a 'Steps' line with group_id on every core): only the "
                "Total record is shown, no Average or per-step records. Annotate training steps "
                "(e.g. jax.profiler.StepTraceAnnotation) or profile longer than one step.",
            )
        )
    if not device.peaks_known and not any(d.code == "peaks_unknown" for d in diagnostics):
        diagnostics.append(
            Diagnostic(
                "warning",
                "peaks_unknown",
                "the profile carries no peak FLOP rate for this device: "
                "efficiencies and bound-by cannot be computed",
            )
        )
    if len(table) == 0:
        diagnostics.append(
            Diagnostic(
                "warning", "no_ops", "no XLA ops with FLOPs/bytes were found in this profile"
            )
        )
    diagnostics += _coverage_notes(program[True])
    if hw:
        diagnostics.append(Diagnostic("info", "hw_counters", hw[0].note))
    else:
        diagnostics.append(no_hw_counters_note("kernel" in kernel_tables))
    tables = dict(kernel_tables, op=table)
    attrs = {"op": "ops", "kernel": "kernels", "kernel_hw": "hw_ops"}
    scope = ScopeSource(
        tables=tables,
        aligned=aligned,
        profile_host=np.array(
            [_index(host_names, p.core_spans[0].host) if p.core_spans else 0 for p in profiles],
            np.int64,
        ),
        key_hosts={
            name: key_host if t is table else _key_hosts(profiles, host_names, attrs[name])
            for name, t in tables.items()
        },
        step_labels=labels,
        step_ps={io: step_ps_of.get(io, np.zeros(0)) for io in (True, False)},
        span_ps={io: spans_ps - (0.0 if io else io_time) for io in (True, False)},
        num_cores=num_cores,
        host_label=host_label,
        phase_steps={serving_model.AVERAGE_PREFIX + k: v for k, v in phases.items()},
    )
    # The aligned steps as (host, step id) pairs, for the guidance facts.
    members = [
        [
            (host_names[h], int(aligned.ids[h, i]))
            for h in range(min(len(host_names), aligned.ids.shape[0]))
        ]
        for i in range(n_steps)
    ]
    memory_ns = call_floors(ksums["flops"], ksums, np.zeros(table.num_keys), device, roofs.link)[0]
    floors = KeyFloors(ksums["flops"], memory_ns, {io: ops[io].key_record for io in ops})
    return Analysis(
        device=device,
        program=program,
        ops=ops,
        diagnostics=diagnostics,
        num_steps=n_steps,
        has_hw_counters=bool(hw),
        views=views,
        scope=scope,
        facts=timeline_facts.collect(profiles, table, members),
        floors=floors,
        serving=serving_model.summary(profiles, device),
    )


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


# Program record blocks, one builder per record kind: (record types, step labels, times ps,
# sums, hosts), which `program_records` turns into records.
def _total_block(ksums: dict, keep, span_ps: float, host_label: str) -> tuple:
    """The Total record: every (kept) op of every core, host and step."""
    total = {c: np.array([v[keep].sum()]) for c, v in ksums.items()}
    return ["total"], ["Total"], [span_ps], total, [host_label]


def _hw_block(hw, device, span_ps: float, host_label: str) -> tuple:
    """The Total (HW) record: FLOPs the hardware counted."""
    return ["total_hw"], ["Total (HW)"], [span_ps], _hw_sums(hw, device), [host_label]


def _host_block(ksums: dict, keep, key_host, host_names: list, span_ps) -> tuple:
    """One Total record per host (rank)."""
    by_host = _group(ksums, key_host, len(host_names), keep)
    return ["host"] * len(host_names), ["Total"] * len(host_names), span_ps, by_host, host_names


def _average_block(step_sums: dict, step_ps, n_steps: int, host_label: str) -> tuple:
    """The Average record: the complete steps' sums over their count."""
    avg = {c: np.array([v.sum() / n_steps]) for c, v in step_sums.items()}
    return ["average"], ["Average"], [float(step_ps.sum() / n_steps)], avg, [host_label]


def _step_block(step_sums: dict, step_ps, label, host_label: str) -> tuple:
    """One record per complete (aligned) step."""
    n = len(step_ps)
    return (
        np.full(n, "step", object),
        np.asarray(label).astype(str).astype(object),
        step_ps,
        step_sums,
        np.full(n, host_label, object),
    )


def _hw_sums(hw, device) -> dict:
    """FLOPs counted by the hardware, over the same time (when the trace timed kernels)."""
    sums = {c: np.zeros(1) for c in SUM_COLUMNS}
    sums["occurrences"] = np.ones(1)
    sums["flops"] = np.array([sum(h.total_flops for h in hw)])
    sums["model_flops"] = sums["flops"].copy()
    sums["roof_time"] = np.array(
        [sum(float(div(f, compute_roof(device, [p])[0])) for h in hw for p, f in h.flops.items())]
    )
    sums["flops_known_ps"] = sums["op_time_ps"] = np.ones(1)
    return sums


def program_records(blocks, profiles, device, num_cores, include_io, flops_source) -> RecordTable:
    """Program records from blocks of rows (record types, step labels, times, sums, hosts)."""

    def cat(i, dtype):
        return np.concatenate([np.asarray(b[i], dtype).reshape(-1) for b in blocks])

    kinds = cat(0, object)
    n = len(kinds)
    merged = {
        c: np.concatenate([np.asarray(b[3][c], np.float64).reshape(-1) for b in blocks])
        for c in SUM_COLUMNS
    }
    merged["self_time_ps"] = np.zeros(n)
    merged["occurrences"] = np.ones(n)
    merged["floor_time"] = np.zeros(n)  # (op records' column: a program's saving is gap_ps)
    timed = np.ones(n, bool)
    if not all(
        h.kernel_time_known for h in (p.hw_counters for p in profiles if p.hw_counters is not None)
    ):
        timed = kinds != "total_hw"
    merged["total_time_ps"] = np.where(timed, cat(2, np.float64), 0.0)
    distinct = set(flops_source.tolist())
    hosts = cat(4, object)
    labels = {
        "record_type": kinds,
        "step": cat(1, object),
        "rank": np.zeros(n, np.int64),
        "category": "Program",
        "operation": "Program",
        "program": "",
        "program_id": "",
        "is_infeed_outfeed": np.zeros(n, bool),
        "source": "",
        "tf_op": "",
        "flops_source": distinct.pop() if len(distinct) == 1 else ("mixed" if distinct else "none"),
        "precision": "mixed",
        "dtype": "",
        "host": hosts,
    }
    prog = build_records(merged, device, num_cores, labels, n, include_io, merged["total_time_ps"])
    # A program's time saved on the roof is what its ops prove: the sum of their gaps (async
    # halves, unknown costs, caveated ops and idle time left out; Opportunities adds idle and
    # exposed communication as findings of their own).
    prog.columns["potential_time_saved_us"] = np.where(
        device.peaks_known & (kinds != "total_hw") & (prog.columns["caveat"] != "no_cost"),
        merged["gap_ps"] / 1e6,
        np.nan,
    )
    prog.columns["roof_time_us"] = np.full(n, np.nan)
    host_rows = np.flatnonzero(kinds == "host")
    if len(host_rows):  # a host's time per core is over its own cores
        cores = {p.core_spans[0].host: p.device.num_cores for p in profiles if p.core_spans}
        per_host = np.array([max(cores.get(h, 1), 1) for h in hosts[host_rows].tolist()])
        prog.columns["total_time_per_core_us"][host_rows] = (
            merged["total_time_ps"][host_rows] / 1e6 / per_host
        )
    for i in np.flatnonzero(kinds == "total_hw").tolist():
        # counters give FLOPs only: bytes (and untimed rates) unknown
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
    total = dict(zip(RECORD_COLUMNS, program.select(slice(0, 1)).rows()[0]))
    flops, nbytes = total["flop_coverage"], total["bytes_coverage"]
    low = [
        (what, cov)
        for what, cov in (("FLOPs", flops), ("bytes", nbytes))
        if cov is not None and cov < 0.5
    ]
    if not low:
        return []
    if len(low) == 2 and abs(flops - nbytes) < 5e-4:
        low = [("FLOPs and bytes", flops)]
    return [
        Diagnostic(
            "warning",
            "low_coverage",
            f"only {cov * 100:.1f}% of the op time has known {what}: the program-level rates, "
            "bound-by and efficiency describe that part, not the whole run (ops without a cost "
            "are marked no_cost; see their time in the op table)",
        )
        for what, cov in low
    ]
