"""Stage 4 of the Kineto reader: the op table, the kernel table, steps and core spans.

GPU traces: kernels summed per (row op call, device), the call's FLOPs and bytes counted once
(on its first device); kernels launched outside every op are rows of their own, by name;
memcpy/memset are rows of their own with their measured bytes. The kernel table gives each op
call's cost to its main kernel (GEMM-like calls) or shares it by time. CPU-only traces: each op's
self time goes to its row op. Steps on a GPU run from the CPU step start to the end of the last
activity launched in it.
"""

from __future__ import annotations

import re

import numpy as np

from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers import kernel_names, torch_flops
from tb_roofline.readers.common import (
    group_codes,
    longest_matmul_unit,
    op_call_precision,
    self_times,
)
from tb_roofline.readers.kineto import timeline as kineto_timeline
from tb_roofline.readers.kineto.events import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET
from tb_roofline.table.op_table import HOST_TRANSFER, PEER_TRANSFER, ROW_COLUMNS
from tb_roofline.table.spans import CoreSpan, StepSpan

# The op table's column for bytes over the GPU links, when this version of it has one.
HAS_INTERCONNECT = "interconnect_bytes" in ROW_COLUMNS
KNOWN_SOURCES = frozenset({"formula", "measured", "counter"})
_HOST_COPY = re.compile(r"htod|dtoh|htoh|hosttodevice|devicetohost|hosttohost", re.I)
_PEER_COPY = re.compile(r"ptop|peer", re.I)


def transfers(kind: np.ndarray, names: np.ndarray, nbytes: np.ndarray):
    """(HBM bytes, host-link bytes, caveat) of memcpy/memset activity: a host copy crosses the
    host link (never HBM), a device copy reads and writes HBM, a memset writes it, a peer copy
    crosses the GPU link. A row's `bytes` are the bytes it accesses (every read and write, as
    XLA's bytes_accessed counts them): at least each memory's bytes (`accessed_bytes`)."""
    n = len(kind)
    hbm, host = np.zeros(n), np.zeros(n)
    caveat = np.full(n, "", dtype=object)
    for i, (k, name, b) in enumerate(zip(kind.tolist(), names.tolist(), nbytes.tolist())):
        if k == KIND_MEMSET:
            hbm[i] = b
        elif k == KIND_MEMCPY:
            if _HOST_COPY.search(name):
                host[i], caveat[i] = b, HOST_TRANSFER
            elif _PEER_COPY.search(name):
                caveat[i] = PEER_TRANSFER
            else:
                hbm[i] = 2 * b
    return hbm, host, caveat


def accessed_bytes(nbytes: np.ndarray, hbm: np.ndarray) -> np.ndarray:
    """The bytes a memcpy/memset row accesses: a device-to-device copy of N bytes reads N and
    writes N of HBM, so its `bytes` are 2N, its HBM bytes (one convention: `bytes` is never
    below a memory's bytes)."""
    return np.maximum(np.asarray(nbytes, np.float64), hbm)


def add_grouped(
    builder,
    host,
    core,
    op,
    cat,
    prec,
    src,
    step,
    t_ps,
    flops,
    nbytes,
    occ,
    hbm=None,
    host_bytes=None,
    caveat=None,
    fingerprint=None,
    interconnect=None,
    collective=None,
):
    """Sum rows sharing (core, op, category, precision, source, caveat, fingerprint, step) and
    add them. `hbm` defaults to all bytes; a cost source says whether FLOPs and bytes are
    known; `fingerprint`: input shapes (ops) or launch grid (kernels), "" when unknown."""
    if not len(op):
        return
    n_rows = len(op)
    hbm = nbytes if hbm is None else hbm
    host_bytes = np.zeros(n_rows) if host_bytes is None else host_bytes
    caveat = np.full(n_rows, "", dtype=object) if caveat is None else caveat
    fingerprint = np.full(n_rows, "", dtype=object) if fingerprint is None else fingerprint
    collective = np.full(n_rows, "", dtype=object) if collective is None else collective
    codes, first = group_codes(core, op, cat, prec, src, caveat, fingerprint, collective, step)
    n = len(first)

    def total(w):
        return np.bincount(codes, weights=w, minlength=n)

    t = total(t_ps)
    known = np.array([x in KNOWN_SOURCES for x in src[first].tolist()], bool)
    counted = src[first] == "counter"  # hardware counters: FLOPs, no memory traffic
    bytes_only = src[first] == "bytes"  # bytes from shapes, FLOPs unknown
    extra = {}
    if interconnect is not None and HAS_INTERCONNECT:
        extra["interconnect_bytes"] = total(interconnect)
    builder.add_columns(
        n,
        host=host,
        core=core[first],
        program_id="",
        program="",
        operation=op[first],
        category=cat[first],
        precision=prec[first],
        flops_source=src[first],
        caveat=caveat[first],
        fingerprint=fingerprint[first],
        collective=collective[first],
        flops_known=known,
        bytes_known=(known & ~counted) | bytes_only,
        step=step[first],
        occurrences=total(occ).astype(np.int64),
        total_time_ps=t,
        self_time_ps=t,
        flops=total(flops),
        bytes=total(nbytes),
        hbm_bytes=total(hbm),
        host_bytes=total(host_bytes),
        **extra,
    )


def _add_rows(
    builder,
    host,
    core,
    op_names,
    cost_ids,
    costs,
    step,
    t_ps,
    flops,
    nbytes,
    occurrences,
    fingerprint=None,
    interconnect=None,
    collective=None,
):
    cats = np.array([costs[c].category for c in cost_ids.tolist()], dtype=object)
    precs = np.array([costs[c].precision for c in cost_ids.tolist()], dtype=object)
    srcs = np.array([costs[c].source for c in cost_ids.tolist()], dtype=object)
    add_grouped(
        builder,
        host,
        np.asarray(core, np.int64),
        op_names,
        cats,
        precs,
        srcs,
        step,
        t_ps,
        flops,
        nbytes,
        occurrences,
        fingerprint=fingerprint,
        interconnect=interconnect,
        collective=collective,
    )


def div_safe(a, b):
    out = np.zeros(np.broadcast(a, b).shape)
    np.divide(a, b, out=out, where=b != 0)
    return out


def kernel_view(
    builder,
    host,
    kind,
    dev,
    name_ids,
    names,
    row,
    dur,
    gbytes,
    step,
    op_cost,
    cost_flops,
    cost_bytes,
    costs,
    name_units,
    grid_fp,
    op_ic=None,
    kernel_comm=None,
):
    """Kernel-level rows: a GEMM-like op call's FLOPs and bytes go to its main kernel (its
    longest GEMM / convolution / attention kernel; helpers such as offset, fill or split-K
    reduction kernels get none, however long they ran); other calls share them by time.
    A kernel's precision is what its name says ran, else its op's data type; a kernel outside
    any known op is categorised by its name."""
    n = len(kind)
    if not n:
        return
    kernel_name = names[name_ids]
    flops = np.zeros(n)
    ic = np.zeros(n)
    nbytes = np.where(kind != KIND_KERNEL, gbytes, 0.0)
    cats = np.array(
        [kernel_names.kernel_category(x) or "other" for x in kernel_name.tolist()], dtype=object
    )
    precs = name_units[name_ids].copy()
    srcs = np.full(n, "none", dtype=object)
    cats[kind == KIND_MEMCPY] = "memcpy"
    cats[kind == KIND_MEMSET] = "memset"
    srcs[kind != KIND_KERNEL] = "measured"
    k = np.flatnonzero((kind == KIND_KERNEL) & (row >= 0))
    if len(k):
        c_ids = op_cost[row[k]]
        for j, c in zip(k.tolist(), c_ids.tolist()):
            cost = costs[c]
            if cost.category not in ("other", ""):
                cats[j] = cost.category
            if not precs[j]:
                precs[j] = cost.precision
            srcs[j] = cost.source
        # A GEMM/convolution call: its longest kernel does the math (split-K reductions and
        # offset helpers get none). Any other call: its kernels share its cost by their time,
        # so each runs at the call's own rate.
        mm_name = np.array(
            [
                u != "" or kernel_names.is_matmul_kernel(x)
                for u, x in zip(name_units.tolist(), names.tolist())
            ],
            bool,
        )
        is_mm = mm_name[name_ids[k]]
        o = np.lexsort((-dur[k], ~is_mm, row[k]))
        ks = k[o]
        firsts = ks[np.r_[True, row[ks][1:] != row[ks][:-1]]]
        calls, call_of = np.unique(row[k], return_inverse=True)
        call_time = np.bincount(call_of, weights=dur[k])
        main = dict(zip(row[firsts].tolist(), firsts.tolist()))
        gemm = mm_name[name_ids[np.array([main[c] for c in calls.tolist()], np.int64)]]
        share = np.where(call_time[call_of] > 0, div_safe(dur[k], call_time[call_of]), 0.0)
        is_first = np.zeros(n, bool)
        is_first[firsts] = True
        share = np.where(
            gemm[call_of] | (call_time[call_of] <= 0), is_first[k].astype(float), share
        )
        c_of_k = op_cost[row[k]]
        flops[k] = cost_flops[c_of_k] * share
        nbytes[k] = cost_bytes[c_of_k] * share
        if op_ic is not None:
            ic[k] = op_ic[row[k]] * share
    if kernel_comm is not None:  # NCCL kernels outside any op that name their collective
        own = np.flatnonzero((kind == KIND_KERNEL) & (row < 0) & kernel_comm[2])
        nbytes[own], ic[own] = kernel_comm[0][own], kernel_comm[1][own]
        srcs[own], cats[own] = "formula", "communication"
    hbm, host_b, caveat = transfers(kind, kernel_name, gbytes)
    nbytes = np.where(kind == KIND_KERNEL, nbytes, accessed_bytes(nbytes, hbm))
    hbm = np.where(kind == KIND_KERNEL, nbytes, hbm)
    add_grouped(
        builder,
        host,
        dev,
        kernel_name,
        cats,
        precs,
        srcs,
        step,
        dur * 1e3,
        flops,
        nbytes,
        np.ones(n, np.int64),
        hbm=hbm,
        host_bytes=host_b,
        caveat=caveat,
        fingerprint=grid_fp,
        interconnect=ic,
    )


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
    names, costs, op_cost = c.names, c.costs, c.op_cost
    is_k = c.gpu_kind == KIND_KERNEL
    k_idx = np.flatnonzero(is_k)
    att = k_idx[links.row[k_idx] >= 0]
    unatt = k_idx[links.row[k_idx] < 0]
    shapes: dict = {}
    op_kernels: dict = {}
    if len(att):
        inv = links.row[att]
        dev = c.gpu_dev[att]
        # One group per (invocation, device); device ids may be any int32 (even negative).
        d0 = dev - int(dev.min())
        key = inv * (int(d0.max()) + 1) + d0
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        t_ps = np.bincount(inverse, weights=c.gpu_dur[att] * 1e3, minlength=len(uniq))
        inv_u, dev_u = inv[first], dev[first]
        # FLOPs go to one device per invocation: the first in key order.
        _, first_dev = np.unique(inv_u, return_index=True)
        owner = np.zeros(len(uniq), bool)
        owner[first_dev] = True
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
        op_kernels = kineto_timeline.op_kernels(
            labels, inverse, c.gpu_name[att], names, c.gpu_dur[att]
        )
        add_grouped(
            builder,
            host,
            dev_u,
            op_names,
            np.array([costs[k].category for k in c_ids.tolist()], dtype=object),
            precs,
            np.array([costs[k].source for k in c_ids.tolist()], dtype=object),
            op_step[inv_u],
            t_ps,
            np.where(owner, c.cost_flops[c_ids], 0.0),
            np.where(owner, c.cost_bytes[c_ids], 0.0),
            owner.astype(np.int64),
            fingerprint=c.cost_fp[c_ids],
            interconnect=np.where(owner, c.op_ic[inv_u], 0.0),
            collective=c.op_coll[inv_u],
        )
    if len(unatt):
        nm = names[c.gpu_name[unatt]]
        cats = np.array(
            [
                torch_flops.category_of(x)
                if torch_flops.COMMUNICATION.search(x)
                else kernel_names.kernel_category(x) or "other"
                for x in nm.tolist()
            ],
            dtype=object,
        )
        k_bytes, k_ic, k_known = kernel_comm
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
        )
    # memcpy / memset: measured bytes, own rows.
    m_idx = np.flatnonzero(~is_k)
    if len(m_idx):
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
    kernel_view(
        kernels,
        host,
        c.gpu_kind,
        c.gpu_dev,
        c.gpu_name,
        names,
        links.row,
        c.gpu_dur,
        c.gpu_bytes,
        links.step,
        op_cost,
        c.cost_flops,
        c.cost_bytes,
        costs,
        c.name_units,
        c.gpu_fp,
        c.op_ic,
        kernel_comm,
    )
    return links.outside, shapes, op_kernels


def program_devices(c) -> tuple[list, list]:
    """(the devices that ran the program: a kernel, the devices whose only activity is
    memcpy / memset). A device that only copied runs no program: no idle time of its own.
    Without a kernel anywhere, every device counts."""
    every = sorted(set(c.gpu_dev.tolist()))
    ran = set(c.gpu_dev[c.gpu_kind == KIND_KERNEL].tolist())
    if not ran:
        return every, []
    return [d for d in every if d in ran], [d for d in every if d not in ran]


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
    _add_rows(
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
