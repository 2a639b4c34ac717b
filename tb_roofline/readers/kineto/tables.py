"""Stage 4 of the Kineto reader: the op table, the kernel table, steps and core spans.

GPU traces: kernels summed per (row op call, device), the call's FLOPs and bytes counted once
(on its first device); kernels launched outside every op are rows of their own, by name;
memcpy/memset are rows of their own with their measured bytes. The kernel table
(`kernel_table.py`) gives each op call's cost to its main kernel (GEMM-like calls) or shares it
by time; rows are grouped by their key in `grouped_rows.py`. CPU-only traces: each op's
self time goes to its row op. Steps on a GPU run from the CPU step start to the end of the last
activity launched in it.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers import kernel_names
from tb_roofline.readers.common import longest_matmul_unit, op_call_precision, self_times
from tb_roofline.readers.common import program_devices as common_program_devices
from tb_roofline.readers.kineto import timeline as kineto_timeline
from tb_roofline.readers.kineto.events import KIND_KERNEL, KIND_MEMCPY
from tb_roofline.readers.kineto.grouped_rows import (
    accessed_bytes,
    add_cost_rows,
    add_grouped,
    transfers,
)
from tb_roofline.readers.kineto.kernel_table import kernel_view
from tb_roofline.table.spans import CoreSpan, StepSpan


def _ns_to_ps(ns: float, base: float) -> int:
    """A time in ns as integer ps after `base` (ns); also a duration: _ns_to_ps(end, start)."""
    return int(round((ns - base) * 1000))


def invocation_units(c, links) -> dict:
    """Per row-op call: the unit its longest GEMM-like kernel names (helper kernels such as
    split-K reductions and fills never decide); calls without one are not in the dict."""
    att = np.flatnonzero((c.gpu_kind == KIND_KERNEL) & (links.row >= 0))
    return longest_matmul_unit(links.row[att], c.gpu_dur[att], c.name_units[c.gpu_name[att]])


def gpu_rows(
    builder, kernels, host: str, c, links, op_step, cost_shapes, kernel_comm
) -> tuple[int, dict, dict]:
    """The op rows and kernel rows of a GPU trace; (kernels launched outside every op, the
    op shapes, the kernels each op launched). Kernels without a row op are rows of their own,
    by kernel name, costed when their args name their collective (`kernel_comm`:
    comms.kernel_costs)."""
    is_k = c.gpu_kind == KIND_KERNEL
    k_idx = np.flatnonzero(is_k)
    att = k_idx[links.row[k_idx] >= 0]
    unatt = k_idx[links.row[k_idx] < 0]
    shapes: dict = {}
    op_kernels: dict = {}
    if len(att):
        shapes, op_kernels = _op_call_rows(builder, host, c, links, att, op_step, cost_shapes)
    if len(unatt):
        _outside_kernel_rows(builder, host, c, links, unatt, kernel_comm)
    m_idx = np.flatnonzero(~is_k)
    if len(m_idx):
        _copy_rows(builder, host, c, links, m_idx)
    kernel_view(kernels, host, c, links, kernel_comm)
    return links.outside, shapes, op_kernels


def _op_call_rows(builder, host, c, links, att, op_step, cost_shapes) -> tuple[dict, dict]:
    """Op rows of the kernels `att` launched inside a row op: summed per (call, device), the
    call's FLOPs and bytes counted once (on its first device); (op shapes, kernels per op)."""
    names, costs, op_cost = c.names, c.costs, c.op_cost
    inv = links.row[att]
    dev = c.gpu_dev[att]
    side = _collective_side_kernels(c, att, inv)
    # One group per (invocation, device, side); device ids may be any int32 (even negative).
    d0 = dev - int(dev.min())
    key = (inv * (int(d0.max()) + 1) + d0) * 2 + side
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    t_ps = np.bincount(inverse, weights=c.gpu_dur[att] * 1e3, minlength=len(uniq))
    inv_u, dev_u, side_u = inv[first], dev[first], side[first]
    # FLOPs go to one device per invocation: the first in key order (a collective's
    # communication kernels, never its side kernels: they have a group of their own).
    _, first_dev = np.unique(np.where(side_u, -1, inv_u), return_index=True)
    owner = np.zeros(len(uniq), bool)
    owner[first_dev] = True
    owner &= ~side_u
    c_ids = op_cost[inv_u]
    # What ran: a GEMM-like call's unit as its longest kernel names it (with its input
    # type), any other call's input type.
    unit_of_inv = invocation_units(c, links)
    precs = np.array(
        [
            op_call_precision(unit_of_inv.get(i, ""), costs[k].precision, costs[k].category)
            for i, k in zip(inv_u.tolist(), c_ids.tolist())
        ],
        dtype=object,
    )
    op_names = names[c.op_name[inv_u]]
    labels = list(zip([""] * len(inv_u), op_names.tolist(), precs.tolist()))
    shapes = kineto_timeline.op_shapes(inv_u, t_ps, labels, cost_shapes, op_cost)
    op_kernels = kineto_timeline.op_kernels(labels, inverse, c.gpu_name[att], names, c.gpu_dur[att])
    add_grouped(
        builder,
        host,
        dev_u,
        op_names,
        _call_categories(c, links, inv_u, c_ids),
        precs,
        np.array([costs[k].source for k in c_ids.tolist()], dtype=object),
        op_step[inv_u],
        t_ps,
        np.where(owner, c.cost_flops[c_ids], 0.0),
        np.where(owner, c.cost_bytes[c_ids], 0.0),
        owner.astype(np.int64),
        fingerprint=c.cost_fp[c_ids],
        input_dims=c.cost_dims[c_ids],
        interconnect=np.where(owner, c.op_ic[inv_u], 0.0),
        collective=np.where(side_u, "", c.op_coll[inv_u]),
    )
    return shapes, op_kernels


def _call_categories(c, links, inv_u, c_ids) -> np.ndarray:
    """The category of each op call: its cost's; a call with no formula at all (`other`,
    source `none`) whose longest kernel is a GEMM by name is `matmul`, as the kernel rows of a
    replay are, so the GEMM time a decode floor must cover holds it (an fp8 `_scaled_mm` or a
    fused MoE without a cost: their kernels, not their FLOPs, say they are GEMMs)."""
    costs = c.costs
    cats = np.array([costs[k].category for k in c_ids.tolist()], dtype=object)
    open_ = np.array(
        [costs[k].category == "other" and costs[k].source == "none" for k in c_ids.tolist()],
        bool,
    )
    if not open_.any():
        return cats
    gemm = longest_kernel_is_gemm(c, links)
    cats[open_ & np.isin(inv_u, gemm)] = "matmul"
    return cats


def longest_kernel_is_gemm(c, links) -> np.ndarray:
    """The row-op calls whose longest kernel is a GEMM by its name (kernel_names
    .kernel_category), helpers such as split-K reductions being shorter."""
    att = np.flatnonzero((c.gpu_kind == KIND_KERNEL) & (links.row >= 0))
    if not len(att):
        return np.zeros(0, np.int64)
    used, at = np.unique(c.gpu_name[att], return_inverse=True)
    is_gemm = np.array(
        [kernel_names.kernel_category(str(x)) == "matmul" for x in c.names[used].tolist()], bool
    )[at.reshape(-1)]
    row, dur = links.row[att], c.gpu_dur[att]
    o = np.lexsort((-dur, row))
    first = o[np.r_[True, row[o][1:] != row[o][:-1]]]
    return row[first][is_gemm[first]]


def _collective_side_kernels(c, att, inv) -> np.ndarray:
    """Per kernel of `att`: whether it is a collective call's side work (its copy and concat
    kernels, kernel_names.is_communication_kernel false) in a call that ran communication
    kernels too. Such kernels stay in the op's time but not in the collective's (the op
    table's `collective` key is "" on them): a collective's time and bus bandwidth are those
    of its communication kernels, as the timeline's exposed communication counts them."""
    side = np.zeros(len(att), bool)
    coll = c.op_coll[inv] != ""
    if not coll.any():
        return side
    used, at = np.unique(c.gpu_name[att], return_inverse=True)
    is_comm = np.array(
        [kernel_names.is_communication_kernel(str(x)) for x in c.names[used].tolist()], bool
    )[at.reshape(-1)]
    calls_with_comm = np.unique(inv[coll & is_comm])
    return coll & ~is_comm & np.isin(inv, calls_with_comm)


def _kernel_category(name: str) -> str:
    """The category of a kernel launched outside every op, by its name."""
    if torch_flops.COMMUNICATION.search(name):
        return torch_flops.category_of(name)
    return kernel_names.kernel_category(name) or "other"


def _outside_kernel_rows(builder, host, c, links, unatt, kernel_comm) -> None:
    """Rows of the kernels `unatt` launched outside every op, by kernel name; costed when their
    args name their collective (`kernel_comm`: comms.kernel_costs)."""
    names = c.names
    nm = names[c.gpu_name[unatt]]
    # judged once per distinct kernel name (names are long: a regex per kernel is slow)
    used, at = np.unique(c.gpu_name[unatt], return_inverse=True)
    judged = np.array([_kernel_category(x) for x in names[used].tolist()], dtype=object)
    cats = judged[at.reshape(-1)]
    k_bytes, k_ic, k_known, k_coll = kernel_comm
    srcs = np.where(k_known[unatt], "formula", "none").astype(object)
    cats[k_known[unatt]] = "communication"
    add_grouped(
        builder,
        host,
        c.gpu_dev[unatt],
        nm,
        cats,
        c.name_units[c.gpu_name[unatt]],
        srcs,
        links.step[unatt],
        c.gpu_dur[unatt] * 1e3,
        np.zeros(len(unatt)),
        k_bytes[unatt],
        np.ones(len(unatt), np.int64),
        fingerprint=c.gpu_fp[unatt],
        interconnect=k_ic[unatt],
        collective=k_coll[unatt],
    )


def _copy_rows(builder, host, c, links, m_idx) -> None:
    """memcpy / memset rows `m_idx`: their measured bytes, rows of their own."""
    names = c.names
    kind = c.gpu_kind[m_idx]
    cats = np.where(kind == KIND_MEMCPY, "memcpy", "memset").astype(object)
    b = c.gpu_bytes[m_idx]
    hbm, host_b, caveat = transfers(kind, names[c.gpu_name[m_idx]], b)
    b = accessed_bytes(b, hbm)
    add_grouped(
        builder,
        host,
        c.gpu_dev[m_idx],
        names[c.gpu_name[m_idx]],
        cats,
        np.full(len(m_idx), "", object),
        np.full(len(m_idx), "measured", object),
        links.step[m_idx],
        c.gpu_dur[m_idx] * 1e3,
        np.zeros(len(m_idx)),
        b,
        np.ones(len(m_idx), np.int64),
        hbm=hbm,
        host_bytes=host_b,
        caveat=caveat,
    )


def program_devices(c) -> tuple[list, list]:
    """(the devices that ran the program: a kernel, the devices whose only activity is
    memcpy / memset): readers.common.program_devices."""
    return common_program_devices(c.gpu_dev, c.gpu_kind == KIND_KERNEL)


def gpu_spans(host: str, c, links, step_spans) -> tuple[list, list]:
    """(steps, core spans) per device of a GPU trace that ran the program (program_devices)."""
    steps: list[StepSpan] = []
    spans: list[CoreSpan] = []
    g_end = c.gpu_ts + c.gpu_dur
    for d in program_devices(c)[0]:
        m = c.gpu_dev == d
        lo, hi = float(c.gpu_ts[m].min()), float(g_end[m].max())
        # Steps on the device: from the CPU step start (nothing launches earlier) to the end
        # of the last activity launched in it, never before the CPU step ends; steps do not
        # overlap (a step starts when the previous one has ended on the device).
        prev_end = -np.inf
        for sid, sb, se in step_spans.spans():
            mm = m & (links.step == sid)
            end = max(se, float(g_end[mm].max())) if mm.any() else se
            start = max(sb, prev_end)
            end = max(end, start)  # overlapping markers: never a negative duration
            prev_end = end
            steps.append(StepSpan(host, d, sid, _ns_to_ps(start, 0.0), _ns_to_ps(end, start)))
            lo, hi = min(lo, start), max(hi, end)
        spans.append(CoreSpan(host, d, _ns_to_ps(lo, 0.0), _ns_to_ps(hi, 0.0)))
    return steps, spans


def cpu_ops_skipped(c, tree, links) -> list:
    """Ops with a formula that launched no GPU work (a GPU trace shows device time only)."""
    n_ops = c.n_ops
    skipped = int(
        np.count_nonzero(
            (tree.row_op == np.arange(n_ops))
            & c.op_has_formula
            & ~np.isin(np.arange(n_ops), links.row)
        )
    )
    if not skipped:
        return []
    return [
        Diagnostic(
            "info",
            "cpu_ops_skipped",
            f"{skipped} op calls with FLOP formulas launched no GPU work (CPU-side "
            "ops); GPU traces show device time only, so they are not in the table",
        )
    ]


def cpu_rows(builder, host: str, c, tree, op_step) -> tuple[np.ndarray, np.ndarray]:
    """The op rows of a CPU-only trace: each op's self time goes to its row op; row ops count
    one occurrence. Returns (the row ops, time per op in ps)."""
    n_ops = c.n_ops
    self_ps = self_times(tree.parent, c.op_dur) * 1e3
    t_ps = np.bincount(tree.row_op, weights=self_ps, minlength=n_ops)
    rows = np.flatnonzero(tree.row_op == np.arange(n_ops))
    c_ids = c.op_cost[rows]
    add_cost_rows(
        builder,
        host,
        np.zeros(len(rows), np.int64),
        c.names[c.op_name[rows]],
        c_ids,
        c.costs,
        op_step[rows],
        t_ps[rows],
        c.cost_flops[c_ids],
        c.cost_bytes[c_ids],
        occurrences=np.ones(len(rows), np.int64),
        fingerprint=c.cost_fp[c_ids],
        input_dims=c.cost_dims[c_ids],
        interconnect=c.op_ic[rows],
        collective=c.op_coll[rows],
    )
    return rows, t_ps


def cpu_spans(host: str, c, step_spans) -> tuple[list, list]:
    """(steps, the one core span) of a CPU-only trace."""
    steps: list[StepSpan] = []
    lo = float(c.op_ts.min())
    hi = float((c.op_ts + c.op_dur).max())
    prev_end = -np.inf
    for sid, sb, se in step_spans.spans():
        start = max(sb, prev_end)
        end = max(se, start)  # overlapping markers: never a negative duration
        prev_end = end
        steps.append(StepSpan(host, 0, sid, _ns_to_ps(start, 0.0), _ns_to_ps(end, start)))
        lo, hi = min(lo, start), max(hi, end)
    return steps, [CoreSpan(host, 0, _ns_to_ps(lo, 0.0), _ns_to_ps(hi, 0.0))]
