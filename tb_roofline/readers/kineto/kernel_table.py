"""The kernel table of a GPU trace: one row per (kernel name, device, step, ...), each op call's
FLOPs and bytes given to its main kernel (GEMM-like calls) or shared by time."""

from __future__ import annotations

import numpy as np

from tb_roofline.readers import kernel_names
from tb_roofline.readers.kineto.events import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET
from tb_roofline.readers.kineto.grouped_rows import accessed_bytes, add_grouped, div_safe, transfers


def kernel_view(builder, host: str, c, links, kernel_comm=None) -> None:
    """Kernel-level rows of trace columns `c` (readers/kineto/columns.py) with the kernels'
    row ops and steps (`links`): a GEMM-like op call's FLOPs and bytes go to its main kernel
    (its longest GEMM / convolution / attention kernel; helpers such as offset, fill or
    split-K reduction kernels get none, however long they ran); other calls share them by
    time. A kernel's precision is what its name says ran, else its op's data type; a kernel
    outside any known op is categorised by its name. A kernel with link bytes carries its
    collective (its op's, `c.op_coll`, or its own args', `kernel_comm`): it is judged on its
    group's links, as its op is (model/records/link_roofs.py)."""
    kind = c.gpu_kind
    n = len(kind)
    if not n:
        return
    kernel_name = c.names[c.gpu_name]
    cats, precs, srcs = _kernel_labels(kind, kernel_name, c.name_units[c.gpu_name].copy())
    flops, nbytes, ic, coll = _op_shares(c, links, cats, precs, srcs)
    if kernel_comm is not None:  # NCCL kernels outside any op that name their collective
        own = np.flatnonzero((kind == KIND_KERNEL) & (links.row < 0) & kernel_comm[2])
        nbytes[own], ic[own] = kernel_comm[0][own], kernel_comm[1][own]
        if len(kernel_comm) > 3:
            coll[own] = kernel_comm[3][own]
        srcs[own], cats[own] = "formula", "communication"
    hbm, host_b, caveat = transfers(kind, kernel_name, c.gpu_bytes)
    nbytes = np.where(kind == KIND_KERNEL, nbytes, accessed_bytes(nbytes, hbm))
    hbm = np.where(kind == KIND_KERNEL, nbytes, hbm)
    add_grouped(
        builder,
        host,
        c.gpu_dev,
        kernel_name,
        cats,
        precs,
        srcs,
        links.step,
        c.gpu_dur * 1e3,
        flops,
        nbytes,
        np.ones(n, np.int64),
        hbm=hbm,
        host_bytes=host_b,
        caveat=caveat,
        fingerprint=c.gpu_fp,
        interconnect=ic,
        collective=coll,
    )


def _op_shares(c, links, cats, precs, srcs) -> tuple:
    """(FLOPs, bytes, link bytes, collective) of each activity: a kernel inside a costed op
    gets its share of the op call's (`_cost_shares`) and its labels from the op where its
    name says nothing (`_label_by_op`, which fills `cats`, `precs`, `srcs`); a memcpy or
    memset keeps its own bytes."""
    kind, row, n = c.gpu_kind, links.row, len(c.gpu_kind)
    flops = np.zeros(n)
    ic = np.zeros(n)
    coll = np.full(n, "", dtype=object)
    nbytes = np.where(kind != KIND_KERNEL, c.gpu_bytes, 0.0)
    k = np.flatnonzero((kind == KIND_KERNEL) & (row >= 0))
    if len(k):
        c_of_k = c.op_cost[row[k]]
        _label_by_op(k, c_of_k, c.costs, cats, precs, srcs)
        share = _cost_shares(k, row, c.gpu_dur, c.gpu_name, c.names, c.name_units, n)
        flops[k] = c.cost_flops[c_of_k] * share
        nbytes[k] = c.cost_bytes[c_of_k] * share
        if c.op_ic is not None:
            ic[k] = c.op_ic[row[k]] * share
        if c.op_coll is not None:
            coll[k] = np.where(ic[k] > 0, c.op_coll[row[k]], "")
    return flops, nbytes, ic, coll


def _kernel_labels(kind, kernel_name, precs):
    """(categories, precisions, cost sources) of activity by its name alone: a kernel's category
    from its name, its precision the unit its name says ran; copies are measured."""
    n = len(kind)
    cats = np.array(
        [kernel_names.kernel_category(x) or "other" for x in kernel_name.tolist()], dtype=object
    )
    srcs = np.full(n, "none", dtype=object)
    cats[kind == KIND_MEMCPY] = "memcpy"
    cats[kind == KIND_MEMSET] = "memset"
    srcs[kind != KIND_KERNEL] = "measured"
    return cats, precs, srcs


def _label_by_op(k, c_ids, costs, cats, precs, srcs) -> None:
    """Kernels `k` launched inside an op take its category and cost source, and its data type
    where their name says no unit (in place)."""
    for j, c in zip(k.tolist(), c_ids.tolist()):
        cost = costs[c]
        if cost.category not in ("other", ""):
            cats[j] = cost.category
        if not precs[j]:
            precs[j] = cost.precision
        srcs[j] = cost.source


def _cost_shares(k, row, dur, name_ids, names, name_units, n) -> np.ndarray:
    """Each kernel's share of its op call's cost. A GEMM/convolution call: its longest kernel
    does the math (split-K reductions and offset helpers get none). Any other call: its kernels
    share its cost by their time, so each runs at the call's own rate."""
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
    return np.where(gemm[call_of] | (call_time[call_of] <= 0), is_first[k].astype(float), share)
