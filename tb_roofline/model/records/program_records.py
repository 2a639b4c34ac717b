"""Program records: the Total, Total (HW), Total (HW counters), per-host, Average, per-step and
measured per-step records of a run.

Each kind of record is a block (record types, step labels, times in ps, sums, hosts) made by
its own builder; `program_records` turns the blocks into records, and `coverage_notes` says
when the Total describes only part of the op time.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.diagnostics import Diagnostic
from tb_roofline.model.records.link_roofs import program_link_assumption
from tb_roofline.model.records.record_table import RECORD_COLUMNS, SUM_COLUMNS, RecordTable
from tb_roofline.model.records.records import build_records, compute_roof, div, unknown_bytes
from tb_roofline.model.records.row_sums import group_sums

HW_LABEL = "Total (HW)"
PM_SUFFIX = "(HW counters)"
PM_LABEL = f"Total {PM_SUFFIX}"
# Records measured by hardware counters: no time saved (their roofs are the analytic records')
MEASURED_KINDS = ("total_hw", "step_hw")


def total_block(ksums: dict, keep, span_ps: float, host_label: str) -> tuple:
    """The Total record: every (kept) op of every core, host and step."""
    total = {c: np.array([v[keep].sum()]) for c, v in ksums.items()}
    return ["total"], ["Total"], [span_ps], total, [host_label]


def hw_block(hw, device, span_ps: float, host_label: str) -> tuple:
    """The Total (HW) record: FLOPs the hardware counted."""
    return ["total_hw"], [HW_LABEL], [span_ps], _hw_sums(hw, device), [host_label]


def counter_total_block(sums: dict, span_ps: float, host_label: str) -> tuple:
    """The Total (HW counters) record: what PM-sampling counters measured over the Total's time
    (model/records/counter_records.py)."""
    return ["total_hw"], [PM_LABEL], [span_ps], sums, [host_label]


def counter_step_block(step_sums: list, step_ps, label, host_label: str) -> tuple:
    """One measured record per complete step (`step_hw`), labelled "<step> (HW counters)"."""
    n = len(step_sums)
    sums = {c: np.concatenate([s[c] for s in step_sums]) for c in SUM_COLUMNS}
    label = [f"{x} {PM_SUFFIX}" for x in np.asarray(label).astype(str).tolist()]
    kinds, labels, times, _, hosts = step_block(sums, step_ps, label, host_label)
    return np.full(n, "step_hw", object), labels, times, sums, hosts


def host_block(ksums: dict, keep, key_host, host_names: list, span_ps) -> tuple:
    """One Total record per host (rank)."""
    by_host = group_sums(ksums, key_host, len(host_names), keep)
    return ["host"] * len(host_names), ["Total"] * len(host_names), span_ps, by_host, host_names


def average_block(step_sums: dict, step_ps, n_steps: int, host_label: str) -> tuple:
    """The Average record: the complete steps' sums over their count."""
    avg = {c: np.array([v.sum() / n_steps]) for c, v in step_sums.items()}
    return ["average"], ["Average"], [float(step_ps.sum() / n_steps)], avg, [host_label]


def step_block(step_sums: dict, step_ps, label, host_label: str) -> tuple:
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
    steps = cat(1, object)
    # The range profiler's record (the PM-sampling ones are "Total (HW counters)", "step_hw")
    legacy = (kinds == "total_hw") & (steps == HW_LABEL)
    timed = np.ones(n, bool)
    if not all(
        h.kernel_time_known for h in (p.hw_counters for p in profiles if p.hw_counters is not None)
    ):
        timed = ~legacy
    merged["total_time_ps"] = np.where(timed, cat(2, np.float64), 0.0)
    hosts = cat(4, object)
    labels = _program_labels(kinds, steps, hosts, flops_source)
    assumed = np.full(n, None, dtype=object)
    assumed[merged["interconnect_bytes"] > 0] = program_link_assumption(device)
    labels["link_assumption"] = assumed
    prog = build_records(merged, device, num_cores, labels, n, include_io, merged["total_time_ps"])
    # A program's time saved on the roof is what its ops prove: the sum of their gaps (async
    # halves, unknown costs, caveated ops and idle time left out; Opportunities adds idle and
    # exposed communication as findings of their own).
    prog.columns["potential_time_saved_us"] = np.where(
        device.peaks_known
        & ~np.isin(kinds, MEASURED_KINDS)
        & (prog.columns["caveat"] != "no_cost"),
        merged["gap_ps"] / 1e6,
        np.nan,
    )
    prog.columns["roof_time_us"] = np.full(n, np.nan)
    _host_time_per_core(prog, kinds, hosts, merged, profiles)
    for i in np.flatnonzero(legacy).tolist():
        # counters give FLOPs only: bytes (and untimed rates) unknown
        unknown_bytes(prog, i, timed=bool(timed[i]))
        prog.columns["flop_coverage"][i] = np.nan
        prog.columns["bytes_coverage"][i] = np.nan
    # Measured records' coverages are the share of their window the samples cover.
    for i in np.flatnonzero(np.isin(kinds, MEASURED_KINDS)).tolist():
        prog.columns["flops_source"][i] = "counter"
    prog.columns["self_time_percent"] = np.zeros(n)
    prog.columns["cumulative_self_time_percent"] = np.zeros(n)
    return prog


def _program_labels(kinds, steps, hosts, flops_source) -> dict:
    """The label columns of program records: their kind, step and host; the FLOPs' source
    (one source, else `mixed`, `none` without ops)."""
    n = len(kinds)
    distinct = set(flops_source.tolist())
    return {
        "record_type": kinds,
        "step": steps,
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
        "roof_precision": "",
        "dtype": "",
        "host": hosts,
    }


def _host_time_per_core(prog: RecordTable, kinds, hosts, merged: dict, profiles):
    """A host record's time per core is over its own cores."""
    host_rows = np.flatnonzero(kinds == "host")
    if len(host_rows):
        cores = {p.core_spans[0].host: p.device.num_cores for p in profiles if p.core_spans}
        per_host = np.array([max(cores.get(h, 1), 1) for h in hosts[host_rows].tolist()])
        prog.columns["total_time_per_core_us"][host_rows] = (
            merged["total_time_ps"][host_rows] / 1e6 / per_host
        )


def coverage_notes(program: RecordTable) -> list[Diagnostic]:
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
