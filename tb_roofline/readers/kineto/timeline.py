"""Timeline facts and op shapes of a PyTorch trace (table/timeline.py), from the reader's columns.

GPU traces: the lanes are (device, stream) of the kernels, memcpys and memsets; each activity is
labelled as the op table labels it (its row op and the precision its longest kernel names, or
the kernel / memcpy name when no op launched it). CPU-only traces: the lanes are threads and
the events their top-level ops. Times arrive in ns and leave in ps, like the spans.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.readers import kernel_names
from tb_roofline.readers.common import group_codes, longest_matmul_unit, op_call_precision
from tb_roofline.readers.kineto.events import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET  # noqa: F401
from tb_roofline.table.timeline import (
    BLOCKING_COPY_CALLS,
    GRAPH_CAPTURE_CALLS,
    IDLE_CAPTURE,
    IDLE_COPY,
    IDLE_SYNC,
    MAX_KERNELS_PER_OP,
    SYNC_CALLS,
    WAIT_CALLS,
    KernelUse,
    ShapeUse,
    is_communication,
    is_fusible,
    paired_spans,
)
from tb_roofline.table.timeline_builder import TimelineBuilder


def _host_call_columns(host_calls, base_ns):
    """(names, threads, begin ps, end ps) of the kept host calls on the op events' clock (ns
    after `base_ns`, times 1000). `host_calls`: (name, thread, ts ns, dur ns)."""
    names = np.array([c[0] for c in host_calls], dtype=object)
    thread = np.array([c[1] for c in host_calls], np.int64)
    begin = (np.array([c[2] for c in host_calls], np.int64) - base_ns).astype(np.float64) * 1e3
    end = begin + np.array([max(c[3], 0) for c in host_calls], np.float64) * 1e3
    return names, thread, begin, end


def idle_causes(host_calls, base_ns) -> dict:
    """The host spans that explain device idle time, in ps on the op events' clock: graph
    captures (Begin .. EndCapture on one thread, paired by table/timeline.paired_spans), sync
    calls and blocking copies."""
    if not host_calls:
        return {}
    names, thread, begin, end = _host_call_columns(host_calls, base_ns)
    out = {}
    cap_b, cap_e = paired_spans(names, begin, end, thread, *GRAPH_CAPTURE_CALLS)
    if len(cap_b):
        out[IDLE_CAPTURE] = (cap_b, cap_e)
    for key, calls in ((IDLE_SYNC, SYNC_CALLS), (IDLE_COPY, BLOCKING_COPY_CALLS)):
        sel = np.isin(names, list(calls))
        if sel.any():
            out[key] = (begin[sel], end[sel])
    return out


def gpu_launches(c, alias: dict, host_calls) -> tuple:
    """Per GPU activity of the columns `c`: (issue ps, return ps, launching thread) of the
    runtime call with its correlation id (the first one, as attribution.gpu_links takes it;
    a kernel replayed from a graph: the graph launch, through `alias`), NaN / -1 where the
    trace has none; and the waits for events (thread, issue ps) of `host_calls`."""
    n = len(c.gpu_ts)
    issue, ret = np.full(n, np.nan), np.full(n, np.nan)
    thread = np.full(n, -1, np.int64)
    corr = c.gpu_corr
    if alias:
        k = np.fromiter(alias.keys(), np.int64, len(alias))
        v = np.fromiter(alias.values(), np.int64, len(alias))
        o = np.argsort(k)
        k, v = k[o], v[o]
        j = np.minimum(np.searchsorted(k, corr), len(k) - 1)
        corr = np.where(k[j] == corr, v[j], corr)
    if n and len(c.rt_corr):
        uniq, first = np.unique(c.rt_corr, return_index=True)
        j = np.minimum(np.searchsorted(uniq, corr), len(uniq) - 1)
        hit = (uniq[j] == corr) & (corr >= 0)
        r = first[j[hit]]
        issue[hit] = np.round(c.rt_ts[r] * 1000.0)
        ret[hit] = np.round((c.rt_ts[r] + c.rt_dur[r]) * 1000.0)
        thread[hit] = c.rt_thread[r]
    waits = (np.zeros(0, np.int64), np.zeros(0))
    if host_calls:
        names, t, b, _ = _host_call_columns(host_calls, c.base_ns)
        sel = np.isin(names, list(WAIT_CALLS))
        waits = (t[sel], np.round(b[sel]))
    return issue, ret, thread, waits


def waited_for_event(lane, begin, issue, thread, waits) -> np.ndarray:
    """Per activity: whether its launching thread called a wait for an event after the launch
    of the activity before it on its lane (stream) and before its own launch: the stream may
    have been told to wait there (the trace does not record which stream a wait targets)."""
    n = len(lane)
    out = np.zeros(n, bool)
    w_thread, w_ts = waits
    if not n or not len(w_ts):
        return out
    order = np.lexsort((begin, lane))
    prev = np.full(n, -np.inf)
    same = np.r_[False, lane[order][1:] == lane[order][:-1]]
    before = np.r_[-np.inf, np.nan_to_num(issue[order][:-1], nan=-np.inf)]
    prev[order] = np.where(same, before, -np.inf)
    for t in np.unique(w_thread).tolist():
        sel = np.flatnonzero((thread == t) & ~np.isnan(issue))
        w = np.sort(w_ts[w_thread == t])
        count = np.searchsorted(w, issue[sel], "left") - np.searchsorted(w, prev[sel], "right")
        out[sel] = count > 0
    return out


def gpu_timeline(spans, steps, c, row, caveat_of, causes=None, launches=None):
    """The timeline of a GPU trace's activity (trace columns `c`, readers/kineto/columns.py;
    `row`: each activity's row op, or -1); `caveat_of(kind, names)` gives the memcpy caveats
    the op table uses (host / peer transfers); `causes`: idle_causes(...) (host spans, ps);
    `launches`: gpu_launches(...) (when each activity was launched). Pairs of kernels are told
    apart by the input dims of the calls that launched them (`c.cost_dims`)."""
    kind, dev, name_ids, names = c.gpu_kind, c.gpu_dev, c.gpu_name, c.names
    stream = c.gpu_stream * (1 << 20) + c.gpu_dev
    ts_ns, dur_ns, op_name, op_cost = c.gpu_ts, c.gpu_dur, c.op_name, c.op_cost
    costs, name_units, cost_dims = c.costs, c.name_units, c.cost_dims
    n = len(kind)
    tb = TimelineBuilder()
    if not n:
        return tb.build()
    kernel_name = names[name_ids]
    att = np.flatnonzero((kind == KIND_KERNEL) & (row >= 0))
    labels = (np.empty(n, np.int64), np.zeros(n, bool), np.zeros(n, bool))  # id, comm, fusible
    # Label ids are given in order of first use: activities launched by ops first.
    if len(att):
        # The precision of each invocation, as the op table labels it (op_call_precision).
        unit_of_inv = longest_matmul_unit(row[att], dur_ns[att], name_units[name_ids[att]])
        _label_by_op(tb, labels, att, row, name_ids, names, op_name, op_cost, costs, unit_of_inv)
    rest = np.setdiff1d(np.arange(n), att)
    if len(rest):
        caveats = caveat_of(kind, kernel_name)
        _label_by_name(tb, labels, rest, kind, name_ids, kernel_name, name_units, caveats)
    label_ids, comm, fusible = labels
    shape = np.zeros(n, np.int64)
    if len(att) and cost_dims is not None:
        invs, inv_of = np.unique(row[att], return_inverse=True)
        shape[att] = _shape_ids(tb, cost_dims, op_cost[invs])[inv_of.reshape(-1)]
    begin = np.round(ts_ns * 1000.0)
    end = begin + np.round(dur_ns * 1000.0)
    launch = None
    if launches is not None:
        issue, ret, thread, waits = launches
        launch = (issue, ret, waited_for_event(stream, begin, issue, thread, waits))
    for s in spans:
        m = dev == s.core
        core_steps = [(x.step, x.start_ps, x.duration_ps) for x in steps if x.core == s.core]
        tb.add_core(
            s.core,
            (s.start_ps, s.end_ps),
            core_steps,
            stream[m],
            begin[m],
            end[m],
            label_ids[m],
            comm[m],
            fusible[m],
            causes=causes,
            launch=None if launch is None else tuple(x[m] for x in launch),
            shape=shape[m],
        )
    return tb.build()


def _label_by_op(tb, labels, att, row, name_ids, names, op_name, op_cost, costs, unit_of_inv):
    """Activities `att` launched by an op: labelled per invocation (its op, its precision), in
    place in `labels` (label id, communication, fusible)."""
    label_ids, comm, fusible = labels
    invs, inv_of = np.unique(row[att], return_inverse=True)
    facts = []
    memo: dict = {}  # (name, cost, unit) -> its facts: judged once per distinct call
    for r, nm, ci in zip(invs.tolist(), op_name[invs].tolist(), op_cost[invs].tolist()):
        unit = unit_of_inv.get(r, "")
        fact = memo.get((nm, ci, unit))
        if fact is None:
            cost = costs[ci]
            label = ("", str(names[nm]), op_call_precision(unit, cost.precision, cost.category))
            fact = memo[nm, ci, unit] = (
                tb.label_id(label),
                is_communication(cost.category),
                is_fusible(cost.category),
            )
        facts.append(fact)
    f = np.array(facts, np.int64).reshape(-1, 3)[inv_of.reshape(-1)]
    label_ids[att], fusible[att] = f[:, 0], f[:, 2] > 0
    # Communication is what communication kernels run (NCCL / RCCL, named so), not every
    # kernel a communication op launches (its copy and concat kernels are device work).
    used, at = np.unique(name_ids[att], return_inverse=True)
    comm_name = np.array(
        [kernel_names.is_communication_kernel(str(x)) for x in names[used].tolist()], bool
    )
    comm[att] = comm_name[at.reshape(-1)]


def _label_by_name(tb, labels, rest, kind, name_ids, kernel_name, name_units, caveats):
    """The other activities `rest` (kernels outside any op, memcpy, memset): labelled by their
    name, in place in `labels`."""
    label_ids, comm, fusible = labels
    uniq, first, inv_of = np.unique(name_ids[rest], return_index=True, return_inverse=True)
    facts = []
    for j in rest[first].tolist():
        nm, k, cav = str(kernel_name[j]), int(kind[j]), caveats[j]
        if k == KIND_KERNEL:
            cat = (
                "communication"
                if torch_flops.COMMUNICATION.search(nm)
                else kernel_names.kernel_category(nm) or "other"
            )
            label = ("", nm, name_units[name_ids[j]])
        else:
            cat, label = ("memcpy" if k == KIND_MEMCPY else "memset"), ("", nm, "")
        facts.append((tb.label_id(label), is_communication(cat, cav), is_fusible(cat)))
    f = np.array(facts, np.int64).reshape(-1, 3)[inv_of.reshape(-1)]
    label_ids[rest], comm[rest], fusible[rest] = f[:, 0], f[:, 1] > 0, f[:, 2] > 0


def cpu_timeline(spans, steps, c, parent, comm_spans=(), causes=None):
    """The timeline of a CPU-only trace (trace columns `c`, readers/kineto/columns.py; each
    op's `parent`, or -1): top-level ops on their threads, plus the collectives' annotated
    runs on their backend threads (`comm_spans`: (thread, ts ns, dur ns, name); the op that
    issues a collective returns before it completes); shapes as gpu_timeline tells them."""
    thread, ts_ns, dur_ns, names = c.op_thread, c.op_ts, c.op_dur, c.names
    op_name, op_cost, costs, cost_dims = c.op_name, c.op_cost, c.costs, c.cost_dims
    tb = TimelineBuilder()
    top = np.flatnonzero(parent < 0)
    if not len(top) or not spans:
        return tb.build()
    facts: dict = {}
    ids = np.empty(len(top), np.int64)
    comm = np.zeros(len(top), bool)
    fusible = np.zeros(len(top), bool)
    for j, i in enumerate(top.tolist()):
        cost = costs[op_cost[i]]
        label = ("", str(names[op_name[i]]), cost.precision)
        if label not in facts:
            facts[label] = (
                tb.label_id(label),
                is_communication(cost.category),
                is_fusible(cost.category),
            )
        ids[j], comm[j], fusible[j] = facts[label]
    begin = np.round(ts_ns[top] * 1000.0)
    end = begin + np.round(dur_ns[top] * 1000.0)
    lanes = thread[top]
    shape = (
        _shape_ids(tb, cost_dims, op_cost[top])
        if cost_dims is not None
        else np.zeros(len(top), np.int64)
    )
    if comm_spans:
        c_ids = [tb.label_id(("", n, "")) for *_, n in comm_spans]
        c_begin = np.round(np.array([a for _, a, _, _ in comm_spans], np.float64) * 1000.0)
        c_end = c_begin + np.round(np.array([d for _, _, d, _ in comm_spans], np.float64) * 1000)
        begin, end = np.r_[begin, c_begin], np.r_[end, c_end]
        lanes = np.r_[lanes, [t for t, *_ in comm_spans]]
        ids = np.r_[ids, c_ids]
        comm = np.r_[comm, np.ones(len(comm_spans), bool)]
        fusible = np.r_[fusible, np.zeros(len(comm_spans), bool)]
        shape = np.r_[shape, np.zeros(len(comm_spans), np.int64)]
    s = spans[0]
    tb.add_core(
        s.core,
        (s.start_ps, s.end_ps),
        [(x.step, x.start_ps, x.duration_ps) for x in steps],
        lanes,
        begin,
        end,
        ids,
        comm,
        fusible,
        causes=causes,
        shape=shape,
    )
    return tb.build()


def _shape_ids(tb: TimelineBuilder, cost_dims: np.ndarray, cost_ids: np.ndarray) -> np.ndarray:
    """`tb.shape_ids` of these calls' input dims, each distinct cost id's dims interned once (in
    order of first call): a tuple is hashed again each time, unlike a string."""
    codes, first = group_codes(cost_ids)
    return tb.shape_ids(cost_dims[cost_ids[first]].tolist())[codes]


def op_kernels(labels, group_of, kernel_name_ids, names, dur_ns) -> dict:
    """The kernels each op label launched, most time first: `labels[g]` is group g's label,
    `group_of[i]` the group of kernel i (a launch), `kernel_name_ids[i]` its name id."""
    if not len(group_of):
        return {}
    label_ids: dict = {}
    of_group = np.array([label_ids.setdefault(x, len(label_ids)) for x in labels], np.int64)
    n_names = int(kernel_name_ids.max()) + 1
    key = of_group[group_of] * n_names + kernel_name_ids
    uniq, inv = np.unique(key, return_inverse=True)
    inv = inv.reshape(-1)
    launches = np.bincount(inv, minlength=len(uniq))
    time_ps = np.bincount(inv, weights=dur_ns * 1e3, minlength=len(uniq))
    by_id = list(label_ids)
    out: dict = {}
    for k, n, t in zip(uniq.tolist(), launches.tolist(), time_ps.tolist()):
        out.setdefault(by_id[k // n_names], []).append(KernelUse(str(names[k % n_names]), n, t))
    return {
        label: sorted(uses, key=lambda u: (-u.time_ps, u.name))[:MAX_KERNELS_PER_OP]
        for label, uses in out.items()
    }


def op_shapes(invocations, time_ps, labels, cost_shapes, op_cost) -> dict:
    """Calls and time per (op label, shape) of the invocations whose op has a shape fact."""
    out: dict = {}
    for inv, t, label in zip(invocations.tolist(), time_ps.tolist(), labels):
        shape = cost_shapes[op_cost[inv]] if op_cost[inv] < len(cost_shapes) else None
        if shape is None:
            continue
        kind, dims, text = shape
        per = out.setdefault(label, {})
        calls, total = per.get(text, (0, 0.0))[:2]
        per[text] = (calls + 1, total + t, kind, dims)
    return {
        label: [
            ShapeUse(kind, dims, text, calls, total)
            for text, (calls, total, kind, dims) in per.items()
        ]
        for label, per in out.items()
    }
