"""The collected events as numpy arrays on one time base (`to_columns`): float64 ns after the
earliest event, exact below 2**53 ns; step markers cut to the record window."""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers.common import kernel_unit_labels
from tb_roofline.readers.kineto.event_fields import MAX_SPAN_NS
from tb_roofline.readers.kineto.events import Collector


@dataclasses.dataclass
class Columns:
    """The collected events as numpy arrays; times in float64 ns after `base_ns` (the earliest
    event), durations clipped at 0. Costs are indexed by cost id; an op without one points at
    the extra last entry (unknown cost)."""

    names: np.ndarray  # name id -> name
    base_ns: int
    op_thread: np.ndarray
    op_ts: np.ndarray
    op_dur: np.ndarray
    op_name: np.ndarray
    op_ext: np.ndarray
    op_cost: np.ndarray
    gpu_kind: np.ndarray
    gpu_ts: np.ndarray
    gpu_dur: np.ndarray
    gpu_dev: np.ndarray
    gpu_corr: np.ndarray
    gpu_ext: np.ndarray
    gpu_name: np.ndarray
    gpu_bytes: np.ndarray
    gpu_stream: np.ndarray
    gpu_fp: np.ndarray  # per activity: its launch-grid fingerprint
    rt_corr: np.ndarray
    rt_ext: np.ndarray
    rt_thread: np.ndarray
    rt_ts: np.ndarray
    rt_dur: np.ndarray
    rt_launch: np.ndarray
    step_ids: np.ndarray  # as recorded (not sorted)
    step_ts: np.ndarray  # relative ns
    step_dur: np.ndarray
    costs: list  # torch_flops.OpCost per cost id, plus the unknown one
    cost_flops: np.ndarray
    cost_bytes: np.ndarray
    cost_fp: np.ndarray  # per cost id: the `shapes:` text of its input dims, "" unknown
    cost_dims: np.ndarray  # per cost id: its input dims as data (tuples), None unknown
    op_has_formula: np.ndarray
    name_units: np.ndarray  # per name: the unit a GEMM-like kernel name says ran, else ""
    # Set by the comms stage (readers/kineto/comms.py), empty before it: per op, the bytes over
    # the GPU links and the collective it runs ("" for none).
    op_ic: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    op_coll: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, object))
    world: int = 0  # ranks of the run (distributedInfo.world_size; 0: not said)
    steps_clipped: int = 0  # step markers cut at the record window's end
    steps_dropped: int = 0  # step markers starting after it

    @property
    def n_ops(self) -> int:
        return len(self.op_ts)


def values_array(values: list) -> np.ndarray:
    """An object array of one item per value (a tuple stays one item, not a row)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _int64(a) -> np.ndarray:
    return np.frombuffer(a, np.int64) if len(a) else np.zeros(0, np.int64)


def _steps_in_window(col: Collector):
    """(ids, starts ns, durations ns, how many were clipped, how many dropped) of the step
    markers within the trace's record window: a step running past the "Record Window End"
    instant ends there (the profiler recorded nothing later), one starting after it is
    dropped."""
    ids = np.array([s[0] for s in col.steps], np.int64)
    ts = np.array([s[1] for s in col.steps], np.int64)
    dur = np.maximum(np.array([s[2] for s in col.steps], np.int64), 0)
    end = col.window_end
    if end is None or not len(ts):
        return ids, ts, dur, 0, 0
    keep = ts < end
    over = keep & (ts + dur > end)
    dur = np.where(over, end - ts, dur)
    return ids[keep], ts[keep], dur[keep], int(over.sum()), int((~keep).sum())


def to_columns(col: Collector) -> Columns:
    """The collector's columns as numpy arrays on one time base (ProfileFormatError when the
    times span more than a trace can: a corrupt 'ts' or 'dur')."""
    names = np.empty(len(col.names), dtype=object)
    names[:] = list(col.names)
    ts_ns = {
        k: _int64(getattr(col, k))
        for k in ("op_ts", "op_dur", "gpu_ts", "gpu_dur", "rt_ts", "rt_dur")
    }
    step_ids, step_ts, step_dur, clipped, dropped = _steps_in_window(col)
    starts = [
        int(a.min()) for a in (ts_ns["op_ts"], ts_ns["gpu_ts"], ts_ns["rt_ts"], step_ts) if len(a)
    ]
    base_ns = min(starts) if starts else 0
    ends = [
        int((ts_ns[t] + np.maximum(ts_ns[d], 0)).max())
        for t, d in (("op_ts", "op_dur"), ("gpu_ts", "gpu_dur"), ("rt_ts", "rt_dur"))
        if len(ts_ns[t])
    ]
    ends += [int((step_ts + step_dur).max())] if len(step_ts) else []
    if ends and max(ends) - base_ns > MAX_SPAN_NS:
        raise ProfileFormatError(
            f"event times span {(max(ends) - base_ns) / 86400e9:.3g} days, more than the "
            f"{MAX_SPAN_NS / 86400e9:.0f} days a trace can cover: a 'ts' or 'dur' is corrupt"
        )

    def rel(key):
        return (ts_ns[key] - base_ns).astype(np.float64)

    def dur(key):
        return np.maximum(ts_ns[key], 0).astype(np.float64)

    n_costs = len(col.costs)
    costs = col.costs + [torch_flops.OpCost("other", 0.0, 0.0, "", "none")]
    op_cost = np.asarray(col.op_cost, np.int64)
    op_cost = np.where(op_cost < 0, n_costs, op_cost)  # the extra last entry
    cost_formula = np.array([c.source in ("formula", "bytes") for c in col.costs] + [False])
    grids = np.empty(len(col.grids), dtype=object)
    grids[:] = list(col.grids)
    return Columns(
        names=names,
        base_ns=base_ns,
        op_thread=_int64(col.op_thread),
        op_ts=rel("op_ts"),
        op_dur=dur("op_dur"),
        op_name=np.asarray(col.op_name, np.int64),
        op_ext=np.asarray(col.op_ext, np.int64),
        op_cost=op_cost,
        gpu_kind=np.asarray(col.gpu_kind, np.int64),
        gpu_ts=rel("gpu_ts"),
        gpu_dur=dur("gpu_dur"),
        gpu_dev=np.asarray(col.gpu_dev, np.int64),
        gpu_corr=np.asarray(col.gpu_corr, np.int64),
        gpu_ext=np.asarray(col.gpu_ext, np.int64),
        gpu_name=np.asarray(col.gpu_name, np.int64),
        gpu_bytes=np.asarray(col.gpu_bytes, np.float64),
        gpu_stream=np.asarray(col.gpu_stream, np.int64),
        gpu_fp=grids[np.asarray(col.gpu_grid, np.int64)],
        rt_corr=np.asarray(col.rt_corr, np.int64),
        rt_ext=np.asarray(col.rt_ext, np.int64),
        rt_thread=np.asarray(col.rt_thread, np.int64),
        rt_ts=rel("rt_ts"),
        rt_dur=dur("rt_dur"),
        rt_launch=np.asarray(col.rt_launch, bool),
        step_ids=step_ids,
        steps_clipped=clipped,
        steps_dropped=dropped,
        step_ts=(step_ts - base_ns).astype(np.float64),
        step_dur=step_dur.astype(np.float64),
        costs=costs,
        cost_flops=np.array([c.flops for c in col.costs] + [0.0]),
        cost_bytes=np.array([c.bytes for c in col.costs] + [0.0]),
        cost_fp=np.array(col.cost_fingerprints + [""], dtype=object),
        cost_dims=values_array(col.cost_dims + [None]),
        op_has_formula=cost_formula[op_cost],
        name_units=kernel_unit_labels(names)
        if len(col.gpu_ts)
        else np.full(len(names), "", dtype=object),
    )
