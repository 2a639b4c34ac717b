"""Stage 3b of the Kineto reader: collectives' sizes, and the bytes they move over the links.

A collective's op may record its tensors (`c10d::_allgather_base_`, `vllm::all_reduce`: a cost
from costs/torch/custom_ops.py), or not (`c10d::allreduce_` takes a TensorList whose shapes
older traces leave empty). Two records inside it then give the size: `record_param_comms`
(newer traces: collective name, element counts, dtype, group size) and the `nccl:<collective>`
annotation (its Input Dims and type). Each such fact goes to the op it runs in: walking up from
the innermost op enclosing it, the first op with a cost, else the outermost communication op
(so the row carries the collective's name, e.g. `c10d::allreduce_`, not `record_param_comms`).
The ranks n are the fact's group size, else the trace's `distributedInfo.world_size`; the
bytes over the links are S × the bus factor (costs/collective_bytes.py).
"""

from __future__ import annotations

import numpy as np

from tb_roofline.costs import collective_bytes
from tb_roofline.costs.hlo.nccl_algorithm import algorithm_of
from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.costs.torch.custom_ops import fact_cost
from tb_roofline.readers.common import innermost_enclosing
from tb_roofline.readers.kineto.columns import Columns
from tb_roofline.readers.kineto.event_fields import int_or
from tb_roofline.readers.kineto.events import Collector
from tb_roofline.table.collective_info import describe


def world_size(meta: dict) -> int:
    """The trace's world size (0 when it does not say)."""
    dist = meta.get("distributedInfo")
    n = int_or(dist.get("world_size"), 0) if isinstance(dist, dict) else 0
    return n if 0 < n < 2**31 else 0


def apply_facts(c: Columns, col: Collector, order, parent) -> np.ndarray:
    """Give collectives without a cost the one their facts imply (new cost ids; c.op_cost and
    c.op_has_formula updated in place, before row ops are chosen); returns each op's ranks
    (0: not said)."""
    ranks = np.zeros(c.n_ops, np.int64)
    if not col.comm_facts or not c.n_ops:
        return ranks
    facts = col.comm_facts
    thread = np.array([f[0] for f in facts], np.int64)
    ts = np.array([f[1] for f in facts], np.int64) - c.base_ns
    dur = np.maximum(np.array([f[2] for f in facts], np.int64), 0)
    inner = innermost_enclosing(
        order,
        parent,
        c.op_thread,
        c.op_ts,
        c.op_ts + c.op_dur,
        thread,
        ts.astype(np.float64),
        (ts + dur).astype(np.float64),
    )
    names = c.names[c.op_name].tolist()
    par = parent.tolist()
    chosen: dict = {}  # op -> fact (the first with a group size wins over one without)
    for f, op in zip(facts, inner.tolist()):
        target = -1
        while op >= 0:
            if c.op_has_formula[op]:
                target = op
                break
            if torch_flops.COMMUNICATION.search(names[op]):
                target = op
            op = par[op]
        if target < 0:
            continue
        have = chosen.get(target)
        if have is None or (not have[6] and f[6]):
            chosen[target] = f
    made: dict = {}
    for op, (_, _, _, kind, in_b, out_b, n, prec) in chosen.items():
        if n:
            ranks[op] = n
        if c.op_has_formula[op]:
            continue
        fingerprint = c.cost_fp[c.op_cost[op]]
        key = (kind, in_b, out_b, n, prec, fingerprint)
        cid = made.get(key)
        if cid is None:
            cost = fact_cost(kind, in_b, out_b, n, prec)
            cost = cost._replace(precision=torch_flops.precision_label(cost.precision))
            cid = made[key] = _add_cost(c, cost, c.op_cost[op])
        c.op_cost[op] = cid
        c.op_has_formula[op] = True
    return ranks


def _add_cost(c: Columns, cost, base: int) -> int:
    """Append a cost id (after the unknown-cost entry, which keeps its id) with the input
    dims, and their text, of cost id `base`."""
    c.costs.append(cost)
    c.cost_flops = np.r_[c.cost_flops, cost.flops]
    c.cost_bytes = np.r_[c.cost_bytes, cost.bytes]
    c.cost_fp = np.r_[c.cost_fp, c.cost_fp[base : base + 1]]
    c.cost_dims = np.r_[c.cost_dims, c.cost_dims[base : base + 1]]
    return len(c.costs) - 1


def op_algorithms(c: Columns, gpu_row: np.ndarray) -> dict:
    """op call -> the NCCL/RCCL algorithm its kernels' names state (costs/hlo/nccl_algorithm.py),
    for the collective calls that launched a kernel of their own collective that states one;
    `gpu_row`: each GPU activity's row op."""
    kinds = {op: kind.replace("_", "-") for op, kind, _ in _comm_ops(c)}
    if not len(gpu_row) or not kinds:
        return {}
    used = np.unique(c.gpu_name)
    nccl = {
        int(i): str(c.names[i]) for i in used.tolist() if algorithm_of([str(c.names[i])])
    }  # a few distinct kernel names
    if not nccl:
        return {}
    stated = np.isin(c.gpu_name, list(nccl)) & (gpu_row >= 0)
    out: dict = {}
    for i in np.flatnonzero(stated).tolist():
        op = int(gpu_row[i])
        if op in kinds and op not in out:
            algo = algorithm_of([nccl[int(c.gpu_name[i])]], kinds[op])
            if algo:
                out[op] = algo
    return out


def _comm_ops(c: Columns):
    """(op call, kind, message size S) of every op call whose cost is a collective."""
    comm = {i: cost.comm for i, cost in enumerate(c.costs) if cost.comm}
    if not comm or not c.n_ops:
        return
    per_cost = np.zeros(len(c.costs))
    for i, (_, size) in comm.items():
        per_cost[i] = size
    for op in np.flatnonzero(per_cost[c.op_cost] > 0).tolist():
        cid = int(c.op_cost[op])
        yield op, comm[cid][0], per_cost[cid]


def op_interconnect(c: Columns, ranks: np.ndarray, world: int, algorithms=None) -> np.ndarray:
    """Bytes over the links per op call (S × bus factor of its collective, and of the
    algorithm its kernels state; 0 for others)."""
    out = np.zeros(c.n_ops)
    algorithms = algorithms or {}
    for op, kind, size in _comm_ops(c):
        n = int(ranks[op]) or world
        out[op] = collective_bytes.bus_bytes(kind, size, n, algorithms.get(op, ""))
    return out


def op_collectives(c: Columns, ranks: np.ndarray, world: int, algorithms=None) -> np.ndarray:
    """The op table's `collective` of each op call (table/collective_info.py); "" for others.
    n is the call's group size, else the trace's world size (then said to be assumed)."""
    out = np.full(c.n_ops, "", dtype=object)
    algorithms = algorithms or {}
    for op, kind, size in _comm_ops(c):
        n = int(ranks[op])
        out[op] = describe(
            kind.replace("_", "-"),
            size,
            n or world,
            algorithm=algorithms.get(op, ""),
            assumed=not n,
        )
    return out


def kernel_costs(c: Columns, col: Collector) -> tuple:
    """(local bytes, bytes over the links, has a cost, its `collective` text) per GPU activity,
    for the NCCL kernels whose args carry the collective (newer traces: `Collective name`,
    `In msg nelems`, ...); used where the kernel has no op to take the cost from. The text
    (table/collective_info.py) gives the group its link roof is judged on."""
    n = len(c.gpu_ts)
    nbytes, ic, known = np.zeros(n), np.zeros(n), np.zeros(n, bool)
    texts = np.full(n, "", dtype=object)
    for i, (kind, in_b, out_b, ranks, prec) in col.kernel_comm.items():
        cost = fact_cost(kind, in_b, out_b, ranks, prec)
        algorithm = algorithm_of([str(c.names[c.gpu_name[i]])], kind.replace("_", "-"))
        nbytes[i] = cost.bytes
        ic[i] = collective_bytes.bus_bytes(kind, cost.comm[1], ranks or c.world, algorithm)
        texts[i] = describe(
            kind.replace("_", "-"),
            cost.comm[1],
            ranks or c.world,
            algorithm=algorithm,
            assumed=not ranks,
        )
        known[i] = True
    return nbytes, ic, known, texts
