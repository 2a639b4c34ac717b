"""Stage 4 of the XLA GPU/CPU reader: one core's events summed per (op, step) into op rows.

Self times come from the nesting of events on their own line (a `while` around its body);
sums per (op, step) by `readers.common.group_sums`; per-execution costs × executions.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.costs.hlo.attention import attention_of
from tb_roofline.costs.hlo.collectives import Transfer, transfer
from tb_roofline.costs.hlo.cost_basics import Cost
from tb_roofline.costs.hlo.cost_model import ModuleCosts
from tb_roofline.costs.hlo.module import HloModule, Instruction
from tb_roofline.costs.hlo.nccl_algorithm import algorithm_of
from tb_roofline.readers.common import group_codes, group_sums, op_nesting, self_times
from tb_roofline.readers.shape_facts import hlo_shape
from tb_roofline.readers.xspace.hlo_shapes import hlo_custom_call_shape, hlo_tensor_shape
from tb_roofline.readers.xspace.xla_gpu_cpu.costing import (
    UNCOSTED,
    Costing,
    costed,
    executions,
    host_bytes,
    ran_at,
)
from tb_roofline.table.collective_info import describe
from tb_roofline.table.op_table import CONTAINER_CATEGORIES, HOST_TRANSFER, OpTableBuilder
from tb_roofline.table.timeline import add_shape_use


@dataclasses.dataclass
class Group:
    """The events of one (op, step) on one core."""

    key: tuple  # (kind, program id, op name, step)
    # What it matched (Costing.match): None for the UNCOSTED kinds, which matched none
    ins: Instruction | None
    module: HloModule | None
    mc: ModuleCosts | None
    total_ps: float
    self_ps: float
    n_events: int
    kernels: dict  # kernel name -> launches
    kernel_time: dict  # kernel name -> ps


def lanes(per_line) -> np.ndarray:
    return np.repeat(np.arange(len(per_line)), [len(evs) for evs in per_line])


def group_events(flat, lane, costing: Costing) -> tuple[list[Group], np.ndarray]:
    """(groups, each event's group index): events summed per (op, step)."""
    begin = np.fromiter((e.begin for e in flat), np.int64, len(flat))
    dur = np.fromiter((e.dur for e in flat), np.int64, len(flat))
    _, parent = op_nesting(lane, begin, dur)  # ops nest only on their own line
    selft = self_times(parent, dur)
    matched = [costing.match(e) for e in flat]
    codes, first = group_codes([m[0] for m in matched])
    n = len(first)
    sums = group_sums(codes, n, total=dur, self=selft, events=np.ones(len(flat)))
    kcodes, kfirst = group_codes(codes, [e.name for e in flat])
    ksums = group_sums(kcodes, len(kfirst), time=dur, launches=np.ones(len(flat)))
    kernels: list[dict] = [{} for _ in range(n)]
    kernel_time: list[dict] = [{} for _ in range(n)]
    for k, row in enumerate(kfirst.tolist()):
        g, name = int(codes[row]), flat[row].name
        kernels[g][name] = int(ksums["launches"][k])
        kernel_time[g][name] = float(ksums["time"][k])
    groups = []
    for g, row in enumerate(first.tolist()):
        key, ins, module, mc = matched[row]
        groups.append(
            Group(
                key,
                ins,
                module,
                mc,
                float(sums["total"][g]),
                float(sums["self"][g]),
                int(sums["events"][g]),
                kernels[g],
                kernel_time[g],
            )
        )
    return groups, codes


def add_rows(
    builder: OpTableBuilder,
    groups: list[Group],
    host: str,
    core: int,
    costing: Costing,
    shapes: dict,
    devices: int,
) -> list[tuple]:
    """One op row per group; returns each group's (timeline label, category). `devices`: the
    group of a collective whose HLO names none."""
    labels = []
    index = costing.index
    for g in groups:
        kind, pid, opname, _ = g.key
        program = index.module_name(pid) if pid else ""
        if kind in UNCOSTED:
            # Its name as its category: an NCCL kernel without hlo_op is still communication.
            labels.append(((pid, opname, ""), opname))
            _add_unattributed(builder, g, host, core, program)
        else:
            labels.append(_add_costed(builder, g, host, core, program, costing, shapes, devices))
    return labels


def _add_unattributed(builder: OpTableBuilder, g: Group, host: str, core: int, program: str):
    """An (op, step) that matches no HLO instruction, or a runtime copy: its time, no cost
    (category `unattributed`, `memcpy` or `memset`)."""
    kind, pid, opname, step = g.key
    builder.add(
        host=host,
        core=core,
        program_id=pid,
        program=program,
        operation=opname,
        category=kind,
        step=step,
        occurrences=g.n_events,
        total_time_ps=g.total_ps,
        self_time_ps=g.self_ps,
        flops_source="none",
        flops_known=False,
        bytes_known=False,
    )


@dataclasses.dataclass(frozen=True)
class OpFacts:
    """What an instruction alone says, the same for each of its (op, step) rows on every core
    (a CPU host's devices all run the program): worked out once per op, not once per row."""

    c: Cost  # its per-execution costs (costs/hlo/cost_model.py)
    has_cost: bool
    uncosted: str  # what has no cost rule ("" when it has one)
    host_moved: int
    moved: Transfer | None  # its collective transfer without an algorithm named
    mask: str  # the mask of an attention call counted unmasked ("" for any other)
    shape: tuple | None
    source: str
    tf_op: str
    fingerprint: str
    described: str  # `moved` described


def op_facts(pid: str, opname: str, ins, module, mc, costing: Costing, devices: int) -> OpFacts:
    key = (pid, opname)
    facts = costing.op_facts.get(key)
    if facts is None:
        facts = costing.op_facts[key] = _op_facts(pid, opname, ins, module, mc, costing, devices)
    return facts


def _op_facts(pid, opname, ins, module, mc, costing: Costing, devices: int) -> OpFacts:
    c = mc.get(opname)
    has_cost = costed(ins, mc)
    uncosted = ""
    if not has_cost:
        target = ins.proto.custom_call_target if ins.opcode == "custom-call" else ""
        uncosted = f"custom-call {target}" if target else ins.opcode
    mask = ""
    if c.category == "attention":
        att = attention_of(ins)
        if att is not None and att.mask:
            mask = att.mask
    moved = transfer(ins, devices)
    return OpFacts(
        c=c,
        has_cost=has_cost,
        uncosted=uncosted,
        host_moved=host_bytes(ins),
        moved=moved,
        mask=mask,
        shape=hlo_shape(ins) or hlo_custom_call_shape(ins) or hlo_tensor_shape(ins, c.category),
        source=module.source_of(ins),
        tf_op=ins.proto.metadata.op_name,
        fingerprint=costing.fingerprint(pid, ins),
        described=_described(moved, ""),
    )


def _add_costed(
    builder: OpTableBuilder,
    g: Group,
    host: str,
    core: int,
    program: str,
    costing: Costing,
    shapes: dict,
    devices: int,
) -> tuple:
    """An (op, step) matched to its HLO instruction: its per-execution costs × executions;
    returns its (timeline label, category). Notes what the costs could not cover in `costing`."""
    _, pid, opname, step = g.key
    ins, module, mc = g.ins, g.module, g.mc
    assert ins is not None and module is not None and mc is not None, "only matched ops cost"
    f = op_facts(pid, opname, ins, module, mc, costing, devices)
    c = f.c
    execs = executions(g.kernels, g.kernel_time) if costing.gpu else g.n_events
    if f.uncosted:
        costing.uncosted_ps[f.uncosted] += g.total_ps  # type: ignore[assignment]  # (float ps)
    host_moved = f.host_moved
    moved, described = f.moved, f.described
    algorithm = algorithm_of(g.kernel_time, moved.kind) if moved is not None and costing.gpu else ""
    if algorithm:  # the bus factor the kernels' algorithm gives
        moved = transfer(ins, devices, algorithm)
        described = _described(moved, algorithm)
    link = moved.bus_bytes if moved is not None else 0.0
    if moved is not None and not moved.group_known:
        costing.ungrouped.add((pid, opname))
    if f.mask:
        costing.masked[(pid, opname)] = f.mask
    hbm = 0.0 if host_moved else c.bytes
    precision = ran_at(g.kernel_time, c.precision) if costing.gpu else c.precision
    if f.shape is not None:
        add_shape_use(shapes, (pid, opname, precision), f.shape, execs, g.total_ps)
    builder.add(
        host=host,
        core=core,
        program_id=pid,
        program=program or module.name,
        operation=opname,
        category=c.category,
        step=step,
        occurrences=execs,
        total_time_ps=g.total_ps,
        self_time_ps=g.self_ps,
        flops=c.flops * execs,
        model_flops=c.flops * execs,
        bytes=max(c.bytes, hbm, host_moved, link) * execs,
        hbm_bytes=hbm * execs,
        host_bytes=host_moved * execs,
        interconnect_bytes=link * execs,
        caveat=HOST_TRANSFER if host_moved else "",
        source=f.source,
        tf_op=f.tf_op,
        flops_source="cost_model" if f.has_cost else "none",
        flops_known=f.has_cost,
        bytes_known=f.has_cost,
        precision=precision,
        fingerprint=f.fingerprint,
        is_container=c.category in CONTAINER_CATEGORIES,
        collective=described,
    )
    return (pid, opname, precision), c.category


def _described(moved, algorithm: str) -> str:
    if moved is None:
        return ""
    return describe(
        moved.kind,
        moved.message_bytes,
        moved.group,
        moved.groups,
        moved.form,
        algorithm,
        not moved.group_known,
    )
