"""The roofline model: op rows in, program/step/op records out.

Knows nothing of file formats: it takes an `OpTable`, the step and core spans and a
`DeviceInfo`. Definitions follow XProf's Roofline Model tool (REFERENCE.md §4) so users see the
numbers they know, except where XProf is wrong (docs/xprof_differences.md).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.model.op_table import (MEMORY_COLUMNS, OpTable, factorize)
GIB = 1.073741824  # GB per GiB: XProf's GiB/s = (bytes / ns) / 1.073741824

# Output columns, in API order (docs/http_api.md).
RECORD_COLUMNS = (
    "record_type", "step", "rank", "category", "operation", "program", "program_id",
    "occurrences", "total_time_us", "avg_time_us", "total_self_time_us", "avg_self_time_us",
    "self_time_percent", "cumulative_self_time_percent", "dma_stall_percent",
    "flops", "model_flops", "bytes", "hbm_bytes", "cmem_read_bytes", "cmem_write_bytes",
    "vmem_read_bytes", "vmem_write_bytes",
    "flop_rate", "model_flop_rate", "memory_bw", "hbm_bw", "cmem_read_bw", "cmem_write_bw",
    "vmem_read_bw", "vmem_write_bw",
    "operational_intensity", "hbm_operational_intensity", "cmem_read_operational_intensity",
    "cmem_write_operational_intensity", "vmem_read_operational_intensity",
    "vmem_write_operational_intensity", "bottleneck_operational_intensity", "bound_by",
    "total_time_per_core_us", "time_fraction", "optimal_flop_rate", "roofline_efficiency",
    "compute_efficiency", "max_mem_bw_utilization", "potential_time_saved_us",
    "peak_flop_rate", "precision",
    "include_infeed_outfeed", "is_infeed_outfeed", "source", "tf_op", "flops_source", "host",
)


@dataclasses.dataclass
class RecordTable:
    """Records as numpy columns in `RECORD_COLUMNS` order."""
    columns: dict[str, np.ndarray]

    def __len__(self):
        return len(self.columns["operation"])

    def select(self, mask) -> "RecordTable":
        return RecordTable({k: v[mask] for k, v in self.columns.items()})

    def rows(self) -> list[list]:
        """JSON-ready rows: numpy scalars become Python values, NaN/inf become None."""
        cols = []
        for name in RECORD_COLUMNS:
            arr = self.columns[name]
            if arr.dtype.kind == "f":
                values = arr.tolist()
                if not np.isfinite(arr).all():
                    bad = ~np.isfinite(arr)
                    for i in np.flatnonzero(bad):
                        values[i] = None
                cols.append(values)
            else:
                cols.append(arr.tolist())
        return [list(r) for r in zip(*cols)] if cols and len(self) else []

    def row_dicts(self) -> list[dict]:
        return [dict(zip(RECORD_COLUMNS, r)) for r in self.rows()]


def _resources(device: DeviceInfo):
    """(name, memory column, peak GB/s) for each memory that takes part in bound-by.

    Order matters: ties keep the earlier one, as in XProf (Compute first, then HBM, CMEM, VMEM).
    """
    out = []
    for col, name, mid, _ in MEMORY_COLUMNS:
        if mid.startswith("cmem") and not device.has_cmem:
            continue
        if mid.startswith("vmem") and not device.has_merged_vmem:
            continue
        peak = device.memory(mid)
        if mid == "hbm" or (peak is not None and peak.gbs > 0):
            out.append((name, col, peak.gbs if peak else 0.0))
    return out


def _div(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = np.zeros(np.broadcast(a, b).shape)
    np.divide(a, b, out=out, where=b != 0)
    return out


def derive(sums: dict[str, np.ndarray], device: DeviceInfo, num_cores: int) -> dict[str, np.ndarray]:
    """Rates, intensities, bound-by and efficiencies from summed FLOPs, bytes and times (ps).

    The compute roof of each record is `sums["peak"]` when given (op records: their precision's
    ceiling), else `sums["flops"] / sums["roof_time"]`: for a mix (a Program record) the rate at
    which the mix would run if each part ran on its own ceiling.
    """
    time_ns = sums["total_time_ps"] / 1000.0
    out = {}
    out["flop_rate"] = _div(sums["flops"], time_ns)
    out["model_flop_rate"] = _div(sums["model_flops"], time_ns)
    out["memory_bw"] = _div(sums["bytes"], time_ns) / GIB
    out["operational_intensity"] = _div(sums["flops"], sums["bytes"])
    for col, _name, mid, _ in MEMORY_COLUMNS:
        out[f"{mid}_bw"] = _div(sums[col], time_ns) / GIB
        out[f"{mid}_operational_intensity"] = _div(sums["flops"], sums[col])

    n = len(time_ns)
    peak = sums.get("peak")
    if peak is None:  # the mixed roof of each record's FLOPs
        peak = np.where(sums["roof_time"] > 0, _div(sums["flops"], sums["roof_time"]),
                        device.peak_gflops)
    out["peak_flop_rate"] = peak
    compute_util = _div(out["flop_rate"], peak)
    names = ["Compute"]
    utils = [compute_util]
    intensities = [out["operational_intensity"]]
    for name, col, peak_gbs in _resources(device):
        mid = col[: -len("_bytes")]
        utils.append(_div(_div(sums[col], time_ns), np.full(n, peak_gbs)))  # GB/s over GB/s
        names.append(name)
        intensities.append(out[f"{mid}_operational_intensity"])
    util = np.nan_to_num(np.vstack(utils), nan=0.0, posinf=0.0)  # resources × rows
    best = np.argmax(util, axis=0)  # first maximum: ties keep the earlier resource
    eff = util[best, np.arange(n)]
    out["roofline_efficiency"] = eff
    out["compute_efficiency"] = compute_util
    out["max_mem_bw_utilization"] = util[1:].max(axis=0) if len(utils) > 1 else np.zeros(n)
    bound = np.asarray(names, dtype=object)[best]
    bound[eff <= 0] = "Unknown"  # nothing measurable (no FLOPs, no bytes, or no peaks)
    out["bound_by"] = bound
    out["bottleneck_operational_intensity"] = np.vstack(intensities)[best, np.arange(n)]
    out["optimal_flop_rate"] = _div(out["flop_rate"], eff)
    out["total_time_per_core_us"] = sums["total_time_ps"] / 1e6 / max(num_cores, 1)
    return out


SUM_COLUMNS = ("occurrences", "total_time_ps", "self_time_ps", "dma_stall_ps", "flops",
               "model_flops", "bytes", "roof_time") + tuple(c for c, *_ in MEMORY_COLUMNS)


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


def _group_sums(table: OpTable, keys: list[np.ndarray]):
    """Sum SUM_COLUMNS over rows sharing the same key tuple; returns (first row index, sums)."""
    if len(table) == 0:
        return np.zeros(0, np.int64), {c: np.zeros(0) for c in SUM_COLUMNS}
    combined = np.zeros(len(table), np.int64)
    for k in keys:
        codes = factorize(k)
        combined = combined * (int(codes.max()) + 1) + codes
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = {c: np.bincount(inverse, weights=table[c].astype(np.float64), minlength=len(first))
            for c in SUM_COLUMNS}
    return first, sums


def _common(values: np.ndarray) -> str:
    """The one value all rows share, "mixed" when they differ, "none" without rows."""
    distinct = set(values.tolist())
    return distinct.pop() if len(distinct) == 1 else ("mixed" if distinct else "none")


def _firsts(values: np.ndarray, codes: np.ndarray) -> list:
    """The value of each code, in code order."""
    out = {}
    for v, c in zip(values.tolist(), codes.tolist()):
        out.setdefault(c, v)
    return [out[c] for c in range(len(out))]


def _total_sums(table: OpTable) -> dict:
    return {c: np.asarray([table[c].astype(np.float64).sum()]) for c in SUM_COLUMNS}


def _records(sums: dict, device: DeviceInfo, num_cores: int, labels: dict, n: int,
             include_io: bool, frac_denominator_ps) -> RecordTable:
    precision = labels.get("precision")
    if isinstance(precision, np.ndarray):  # rows of one precision each: exactly its ceiling
        sums = dict(sums, peak=np.array([device.peak_for(p) for p in precision.tolist()]))
    d = derive(sums, device, num_cores)
    occ = sums["occurrences"]
    cols = {}
    for key, value in labels.items():
        arr = np.empty(n, dtype=object) if not isinstance(value, np.ndarray) else value
        if not isinstance(value, np.ndarray):
            arr[:] = [value] * n
        cols[key] = arr
    cols["occurrences"] = occ.astype(np.int64)
    cols["total_time_us"] = sums["total_time_ps"] / 1e6
    cols["avg_time_us"] = _div(cols["total_time_us"], occ)
    cols["total_self_time_us"] = sums["self_time_ps"] / 1e6
    cols["avg_self_time_us"] = _div(cols["total_self_time_us"], occ)
    cols["dma_stall_percent"] = _div(sums["dma_stall_ps"], sums["total_time_ps"]) * 100.0
    for c in ("flops", "model_flops", "bytes") + tuple(c for c, *_ in MEMORY_COLUMNS):
        cols[c] = sums[c]
    cols.update(d)
    cols["time_fraction"] = _div(sums["total_time_ps"], frac_denominator_ps)
    eff = d["roofline_efficiency"]
    saved = cols["total_time_us"] * (1.0 - np.minimum(eff, 1.0))
    saved[(eff <= 0)] = np.nan
    if not device.peaks_known:
        for c in ("roofline_efficiency", "compute_efficiency", "optimal_flop_rate",
                  "peak_flop_rate"):
            cols[c] = np.full(n, np.nan)
        saved[:] = np.nan
    cols["potential_time_saved_us"] = saved
    cols["include_infeed_outfeed"] = np.full(n, include_io)
    cols.setdefault("self_time_percent", np.zeros(n))
    cols.setdefault("cumulative_self_time_percent", np.zeros(n))
    return RecordTable({c: cols[c] for c in RECORD_COLUMNS})


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
    from tb_roofline.model.op_table import OpTable as _OpTable
    device = DeviceInfo.merge([p.device for p in profiles])
    num_cores = max(device.num_cores, 1)
    table = _with_roof_time(_OpTable.concat([p.ops for p in profiles]), device)
    spans_ps = float(sum(s.duration_ps for p in profiles for s in p.core_spans))
    diagnostics = []
    for p in profiles:  # say which host a diagnostic is about when several are aggregated
        host = p.core_spans[0].host if p.core_spans else ""
        for d in p.diagnostics:
            diagnostics.append(Diagnostic(d.severity, d.code, f"host {host}: {d.message}")
                               if len(profiles) > 1 and host else d)
    steps = _host_steps(profiles)
    single_host = len(profiles) == 1
    # XProf: StepTime() = the longest marker of the step over all cores of the host; each
    # core's step db gets that total, so the host's step time is n_cores x max.
    step_marks: dict = {}
    for p in profiles:
        for s in p.steps:
            step_marks.setdefault((s.host, s.step), []).append(s.duration_ps)
    step_time = {k: len(v) * max(v) for k, v in step_marks.items()}

    io_step_time: dict = {}
    io_mask = table["is_infeed_outfeed"] & ~table["is_container"]
    for host, sid, tps in zip(table["host"][io_mask], table["step"][io_mask],
                              table["total_time_ps"][io_mask]):
        io_step_time[(host, sid)] = io_step_time.get((host, sid), 0.0) + tps

    # Second views of PyTorch traces: one row per kernel, and per-kernel hardware counters.
    extra_tables = {}
    for name, attr in (("kernel", "kernels"), ("kernel_hw", "hw_ops")):
        tables = [getattr(p, attr) for p in profiles if getattr(p, attr, None) is not None]
        if any(len(t) for t in tables):
            extra_tables[name] = _with_roof_time(_OpTable.concat(tables), device)
    hw = [p.hw_counters for p in profiles if getattr(p, "hw_counters", None) is not None]

    program, ops, views = {}, {}, {}
    for include_io in (True, False):
        keep = np.ones(len(table), bool) if include_io else ~table["is_infeed_outfeed"]
        io_time = 0.0 if include_io else float(table["total_time_ps"][io_mask].sum())
        denominator = spans_ps - io_time
        t = table.select(keep)

        # Op records: one per (program, op) over all cores, hosts and steps.
        ops[include_io] = _op_records(t, device, num_cores, host_label, include_io, denominator)
        for name, extra in extra_tables.items():
            kept = extra if include_io else extra.select(~extra["is_infeed_outfeed"])
            views.setdefault(name, {})[include_io] = _op_records(
                kept, device, num_cores, host_label, include_io, denominator)

        # Program records: innermost ops only, over the whole span / each step.
        inner = t.select(~t["is_container"])
        rows = []
        total = _total_sums(inner)
        total["total_time_ps"] = np.asarray([denominator])
        total["self_time_ps"] = np.zeros(1)
        total["occurrences"] = np.ones(1)
        rows.append(("total", "Total", total))
        if hw:  # FLOPs counted by the hardware, over the same time
            hw_sums = {c: np.zeros(1) for c in SUM_COLUMNS}
            hw_sums["occurrences"] = np.ones(1)
            hw_sums["flops"] = np.asarray([sum(h.total_flops for h in hw)])
            hw_sums["model_flops"] = hw_sums["flops"].copy()
            hw_sums["roof_time"] = np.asarray([sum(
                _div(np.asarray([f]), np.asarray([device.peak_for(prec)]))[0]
                for h in hw for prec, f in h.flops.items())])
            timed = all(h.kernel_time_known for h in hw)
            hw_sums["total_time_ps"] = np.asarray([denominator if timed else 0.0])
            rows.append(("total_hw", "Total (HW)", hw_sums))
        if len(profiles) > 1:  # one point per host (rank), so a straggler shows
            for p in profiles:
                if not p.core_spans:
                    continue
                host = p.core_spans[0].host
                mine = inner.select(inner["host"] == host)
                h = _total_sums(mine)
                span = float(sum(s.duration_ps for s in p.core_spans))
                if not include_io:
                    span -= float(table["total_time_ps"][io_mask & (table["host"] == host)].sum())
                h["total_time_ps"] = np.asarray([span])
                h["self_time_ps"] = np.zeros(1)
                h["occurrences"] = np.ones(1)
                rows.append(("host", "Total", h, host))
        step_sums = []
        for i, members in enumerate(steps):
            mask = np.zeros(len(inner), bool)
            time_ps = 0.0
            for host, sid in members:
                m = (inner["host"] == host) & (inner["step"] == sid)
                mask |= m
                time_ps += step_time.get((host, sid), 0)
                if not include_io:
                    time_ps -= io_step_time.get((host, sid), 0.0)
            s = _total_sums(inner.select(mask))
            s["total_time_ps"] = np.asarray([time_ps])
            s["self_time_ps"] = np.zeros(1)
            s["occurrences"] = np.ones(1)
            label = str(members[0][1]) if single_host else str(i)
            step_sums.append((label, s))
        if step_sums:
            k = len(step_sums)
            avg = {c: np.asarray([sum(s[c][0] for _, s in step_sums) / k]) for c in SUM_COLUMNS}
            avg["occurrences"] = np.ones(1)
            rows.append(("average", "Average", avg))
        rows += [("step", label, s) for label, s in step_sums]
        merged = {c: np.concatenate([r[2][c] for r in rows]) for c in SUM_COLUMNS}
        n = len(rows)
        labels = {"record_type": np.asarray([r[0] for r in rows], dtype=object),
                  "step": np.asarray([r[1] for r in rows], dtype=object), "rank": np.zeros(n, np.int64),
                  "category": "Program", "operation": "Program", "program": "", "program_id": "",
                  "is_infeed_outfeed": np.zeros(n, bool), "source": "", "tf_op": "",
                  "flops_source": _common(inner["flops_source"]), "precision": "mixed",
                  "host": np.asarray([r[3] if len(r) > 3 else host_label for r in rows],
                                     dtype=object)}
        prog = _records(merged, device, num_cores, labels, n, include_io, merged["total_time_ps"])
        for i, r in enumerate(rows):  # a host's time per core is over its own cores
            if r[0] == "host":
                cores = next(p.device.num_cores for p in profiles
                             if p.core_spans and p.core_spans[0].host == r[3])
                prog.columns["total_time_per_core_us"][i] = r[2]["total_time_ps"][0] / 1e6 / max(cores, 1)
        for i, r in enumerate(rows):
            if r[0] == "total_hw":  # counters give FLOPs only: bytes and (untimed) rates unknown
                _unknown_bytes(prog, i, timed=r[2]["total_time_ps"][0] > 0)
                prog.columns["flops_source"][i] = "counter"
        prog.columns["self_time_percent"] = np.zeros(n)
        prog.columns["cumulative_self_time_percent"] = np.zeros(n)
        program[include_io] = prog

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
    if hw:
        diagnostics.append(Diagnostic("info", "hw_counters", hw[0].note))
    return Analysis(device=device, program=program, ops=ops, diagnostics=diagnostics,
                    num_steps=len(steps), has_hw_counters=bool(hw), views=views)


def _with_roof_time(table: OpTable, device: DeviceInfo) -> OpTable:
    """Add the time (ns) each row's FLOPs would take on its own precision's roof: summed, it
    gives any group of rows its mixed-precision roof."""
    codes = factorize(table["precision"])
    roofs = np.array([device.peak_for(v) for v in _firsts(table["precision"], codes)] or [0.0])
    row_peak = roofs[codes] if len(codes) else np.zeros(0)
    table.columns["roof_time"] = _div(table["flops"], row_peak)
    return table


def _op_records(t: OpTable, device, num_cores, host_label, include_io, denominator) -> RecordTable:
    """One record per (program, op): ranked by self time, ties by name."""
    first, sums = _group_sums(t, [t["program_id"], t["operation"]])
    n = len(first)
    order = np.lexsort((t["operation"][first].astype(str), -sums["self_time_ps"]))
    first = first[order]
    sums = {k: v[order] for k, v in sums.items()}
    labels = {"record_type": "op", "step": "Total", "rank": np.arange(1, n + 1),
              "category": t["category"][first], "operation": t["operation"][first],
              "program": t["program"][first], "program_id": t["program_id"][first],
              "is_infeed_outfeed": t["is_infeed_outfeed"][first],
              "source": t["source"][first], "tf_op": t["tf_op"][first],
              "flops_source": t["flops_source"][first], "host": host_label,
              "precision": t["precision"][first]}
    rec = _records(sums, device, num_cores, labels, n, include_io, np.full(n, denominator))
    self_pct = _div(sums["self_time_ps"], np.full(n, denominator)) * 100.0
    rec.columns["self_time_percent"] = self_pct
    rec.columns["cumulative_self_time_percent"] = np.cumsum(self_pct)
    rec.columns["potential_time_saved_us"][t["is_container"][first]] = 0.0
    return rec


_BYTE_COLUMNS = ("bytes", "hbm_bytes", "cmem_read_bytes", "cmem_write_bytes", "vmem_read_bytes",
                 "vmem_write_bytes", "memory_bw", "hbm_bw", "cmem_read_bw", "cmem_write_bw",
                 "vmem_read_bw", "vmem_write_bw", "operational_intensity",
                 "hbm_operational_intensity", "cmem_read_operational_intensity",
                 "cmem_write_operational_intensity", "vmem_read_operational_intensity",
                 "vmem_write_operational_intensity", "bottleneck_operational_intensity",
                 "max_mem_bw_utilization")
_RATE_COLUMNS = ("total_time_us", "avg_time_us", "total_time_per_core_us", "flop_rate",
                 "model_flop_rate", "optimal_flop_rate", "roofline_efficiency",
                 "compute_efficiency", "potential_time_saved_us", "time_fraction")


def _unknown_bytes(table: RecordTable, i: int, timed: bool):
    for c in _BYTE_COLUMNS + (() if timed else _RATE_COLUMNS):
        table.columns[c][i] = np.nan
    if not timed:
        table.columns["bound_by"][i] = "Unknown"
