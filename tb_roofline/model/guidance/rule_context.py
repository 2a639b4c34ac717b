"""What every guidance rule reads and returns: the `Context` (one infeed/outfeed variant's op
records, the device, the timeline facts; which records are *trusted*), the `Finding`, the
thresholds shared by several rules, and the bound each op rule's saving is checked against
(the gap to its calls' floors, `gap_formula`). Thresholds, reasons and sources:
docs/guidance.md.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.model.guidance import advice
from tb_roofline.model.guidance.facts import Facts
from tb_roofline.model.records.counter_records import RunCounters
from tb_roofline.model.records.floors import KeyFloors
from tb_roofline.model.records.record_table import RecordTable
from tb_roofline.model.records.records import bound_classes
from tb_roofline.table.timeline import is_communication

MIN_SHARE = 0.0005  # an op finding must be worth at least 0.05% of the profiled time
FAR_BELOW_ROOF = 0.5  # compute-bound and under half its roof
IDLE_SHARE = 0.10
IDLE_CLASS_SHARE = (
    0.02  # one cause of idle time (model/guidance/idle_rules.py) worth its own finding
)
EXPOSED_SHARE = 0.05
STRAGGLER_RATIO = 1.15


@dataclasses.dataclass
class Finding:
    rule: str
    title: str
    rows: list  # op record indices (op findings), [] for program findings
    facts: dict
    time_saved_us: float
    suggestion: str
    claim: int = -1  # the record whose time this saving comes out of (op findings)
    counted_us: float = 0.0  # what it adds to the total (model.guidance._count)
    bound_us: float = math.inf  # the most the rule's model proves this could save
    formula: str = ""  # the bound, written out with its numbers


@dataclasses.dataclass
class Context:
    ops: RecordTable  # one infeed/outfeed variant
    device: DeviceInfo
    facts: Facts | None  # None when the analysis has no timeline facts
    total_time_us: float
    num_steps: int
    framework: str  # "pytorch" or "xla"
    runtime: str = advice.XLA  # model.advice: xla, pytorch_eager, torch_compile, cuda_graphs
    tensors: dict = dataclasses.field(default_factory=dict)  # identity -> {input dims}
    # identity -> ({output dims}, {operand dims}, {operand names}) where the HLO says which is
    # which (`tensor` shapes): such a pair shares a tensor only when the producer's output is
    # an operand of the consumer (two ops writing, or both reading, one shape share no
    # intermediate), and, where operand names are known, the producer is one of them.
    flows: dict = dataclasses.field(default_factory=dict)
    floors: KeyFloors | None = None  # each record's per-call floor parts
    include_io: bool = True
    # identity -> (time µs, calls) of the op within complete steps (repeated_copy)
    step_ops: dict = dataclasses.field(default_factory=dict)
    serving: bool = False  # a serving engine's steps (model/serving/phases.py): scheduling advice
    counters: RunCounters | None = None  # the run's sampled counters (clock_throttled)

    def __post_init__(self):
        c = self.ops.columns
        self.c = c
        self.index = {
            (pid, op, p): i
            for i, (pid, op, p) in enumerate(
                zip(c["program_id"].tolist(), c["operation"].tolist(), c["precision"].tolist())
            )
        }
        caveat = np.array([not v for v in c["caveat"].tolist()], bool)
        saved = np.isfinite(c["potential_time_saved_us"].astype(float))
        comm = np.array([is_communication(cat) for cat in c["category"].tolist()], bool)
        full = (np.nan_to_num(c["flop_coverage"].astype(float)) >= 1.0) & (
            np.nan_to_num(c["bytes_coverage"].astype(float)) >= 1.0
        )
        self.trusted = (
            caveat
            & saved
            & ~comm
            & full
            & ~c["is_infeed_outfeed"].astype(bool)
            & (c["flops_source"] != "none")
        )
        self.min_us = MIN_SHARE * self.total_time_us
        # What binds each record, as the model decides it (records.binding_roof_ids).
        self.compute_bound, self.memory_bound = bound_classes(c["bound_by"], self.device)

    def advise(self, rule: str) -> str:
        """The rule's suggestion for the runtime that ran, on this device (model.advice)."""
        return advice.advice(rule, self.runtime, getattr(self.device, "kind", ""))

    def per_step(self, calls: float) -> float:
        """Calls per step of one core (occurrences add up over every core and host: each core
        runs the program once a step)."""
        return calls / max(self.num_steps, 1) / max(getattr(self.device, "num_cores", 1) or 1, 1)


def us_text(x: float) -> str:
    return f"{x:,.1f} µs"


def floor_us(ctx: Context, i: int, peak: float | None = None) -> float:
    """The op's time at its roofs: the sum of its calls' floors, Σ max(F_i/P, B_i/BW) over its
    distinct shapes (`roof_time_us`: calls in different regimes are not averaged into one
    floor); `peak`: the same FLOPs on another compute roof, summed the same way."""
    if peak is not None and ctx.floors is not None:
        return ctx.floors.floor_us(ctx.include_io, i, peak)
    return float(np.nan_to_num(ctx.c["roof_time_us"][i]))


def per_call_efficiency(ctx: Context) -> np.ndarray:
    """Each record's floor over its time (its roofline efficiency by its calls' floors)."""
    t = ctx.c["total_time_us"].astype(float)
    floor = np.nan_to_num(ctx.c["roof_time_us"].astype(float))
    return np.divide(floor, t, out=np.zeros(len(t)), where=t > 0)


def regimes_note(ctx: Context, i: int) -> str:
    if not bool(ctx.c["mixed_regimes"][i]):
        return ""
    return " (its calls run in different regimes: the floor is their floors' sum)"


def gap_formula(ctx: Context, i: int) -> str:
    t = float(ctx.c["total_time_us"][i])
    return (
        f"t − Σ max(F_i/P, B_i/BW) = {us_text(t)} − {us_text(floor_us(ctx, i))} = "
        f"{us_text(float(ctx.c['potential_time_saved_us'][i]))}" + regimes_note(ctx, i)
    )


def recorded_arrays(input_dims) -> list:
    """The arrays one op call recorded, in argument order (PyTorch's `Input Dims` as data, the
    op table's `input_dims`; TensorLists flattened), or [] when unknown (None)."""
    out: list = []

    def walk(v):
        if isinstance(v, tuple) and v and all(isinstance(x, int) for x in v):
            out.append(v)
        elif isinstance(v, tuple):
            for x in v:
                walk(x)

    walk(input_dims)
    return out
