"""What every HLO cost rule shares: the opcode families, `Cost` (one instruction, one
execution), `Totals` (sums over a computation), precision and category of an instruction.

The rules themselves are in `cost_model.py` (dispatch), `conv_geometry.py`, `fusion_bytes.py`,
`custom_calls.py`, `attention.py` and `collectives.py`; docs/hlo_cost_model.md lists them.
"""

from __future__ import annotations

import re

from tb_roofline.costs.hlo.module import Instruction
from tb_roofline.costs.hlo.shapes import TUPLE, Shape, precision_name
from tb_roofline.errors import ProfileFormatError

FMA = 2  # one multiply-add counts as two FLOPs

ELEMENTWISE = frozenset(
    """
add subtract multiply divide remainder maximum minimum abs negate sign floor ceil
round-nearest-afz round-nearest-even and or xor not shift-left shift-right-arithmetic
shift-right-logical popcnt count-leading-zeros clz compare select clamp convert bitcast-convert
stochastic-convert reduce-precision complex real imag is-finite mulhi
""".split()
)
TRANSCENDENTAL = frozenset(
    """
acos acosh asin asinh atan2 atanh cbrt cosine cosh erf exponential exponential-minus-one log
log-plus-one logistic power rsqrt sine sinh sqrt tan tanh
""".split()
)
# Ops whose cost is XLA's default (no FLOPs; bytes = output + operands).
DEFAULT_BYTES = frozenset(
    """
copy reshape dynamic-reshape broadcast pad concatenate reverse iota send send-done recv recv-done
copy-start copy-done async-update async-done partition-id replica-id get-dimension-size
set-dimension-size opt-barrier batch-norm-training batch-norm-inference batch-norm-grad
all-gather all-gather-start all-gather-done reduce-scatter all-to-all ragged-all-to-all
collective-permute collective-permute-start collective-permute-done collective-broadcast
all-reduce-done rng-get-and-update-state topk
""".split()
)
NO_COST = frozenset(
    "parameter constant get-tuple-element bitcast after-all add-dependency domain".split()
)
CONTAINERS = frozenset(("while", "call", "conditional"))
# Operands each rule needs (fewer is a malformed instruction, not a cost of 0).
MIN_OPERANDS = {
    "dot": 2,
    "scaled-dot": 2,
    "ragged-dot": 3,
    "convolution": 2,
    "fft": 1,
    "triangular-solve": 2,
    "cholesky": 1,
    "sort": 1,
    "reduce": 2,
    "reduce-window": 2,
    "select-and-scatter": 3,
    "dynamic-update-slice": 2,
    "gather": 2,
    "scatter": 3,
}
MAX_WINDOW_POSITIONS = 1 << 22  # kernel positions one convolution dimension may enumerate


class HloError(ProfileFormatError):
    """A malformed instruction: names its program and instruction."""


TRIP_COUNT = re.compile(rb'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)')
ALGORITHM_PRECISION = {
    1: "fp8",
    2: "fp8",
    3: "f16",
    4: "f16",
    5: "bf16",
    6: "bf16",
    7: "bf16",
    8: "bf16",
    9: "tf32",
    10: "tf32",
    11: "f32",
    12: "f64",
    13: "bf16",
}


class Cost:
    """One instruction's cost for ONE execution. `read + written = bytes` except where XLA's
    own bytes total counts otherwise (containers: the sum of their callees)."""

    __slots__ = ("flops", "transcendentals", "bytes", "read", "written", "precision", "category")

    def __init__(
        self, flops=0.0, transcendentals=0.0, read=0.0, written=0.0, precision="", category=""
    ):
        self.flops = flops
        self.transcendentals = transcendentals
        self.read = read
        self.written = written
        self.bytes = read + written
        self.precision = precision
        self.category = category

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return (
            f"Cost(flops={self.flops}, transcendentals={self.transcendentals}, "
            f"bytes={self.bytes}, read={self.read}, written={self.written}, "
            f"precision={self.precision!r}, category={self.category!r})"
        )


class Totals:
    """Sums of the keys over a computation (XLA's sub-computation properties)."""

    __slots__ = ("flops", "transcendentals", "bytes", "read", "written", "precision", "max_flops")

    def __init__(self):
        self.flops = self.transcendentals = self.bytes = self.read = self.written = 0.0
        self.precision = ""
        self.max_flops = -1.0

    def add(self, c: Cost, times: float = 1.0):
        self.flops += c.flops * times
        self.transcendentals += c.transcendentals * times
        self.bytes += c.bytes * times
        self.read += c.read * times
        self.written += c.written * times
        work = c.flops + c.transcendentals
        if work > self.max_flops:  # the precision of the heaviest work wins
            self.max_flops = work
            self.precision = c.precision


# ---------------------------------------------------------------------- helpers
def prod(values) -> int:
    p = 1
    for v in values:
        p *= v
    return p


def first_array(s: Shape) -> Shape:
    while s.etype == TUPLE and s.tuple_shapes:
        s = s.tuple_shapes[0]
    return s


def out_elements(ins: Instruction) -> int:
    return prod(ins.shape.dims) if ins.shape.etype != TUPLE else ins.shape.leaf_elements()


def out_precision(ins: Instruction) -> str:
    s = first_array(ins.shape)
    if ins.opcode in ("compare", "convert", "bitcast-convert", "select") and ins.operands:
        s = first_array(ins.operands[-1].shape)
    return precision_name(s.etype) if s.etype != TUPLE else ""


def in_precision(ins: Instruction) -> str:
    if ins.operands:
        return precision_name(first_array(ins.operands[0].shape).etype)
    return out_precision(ins)


def dot_precision(ins: Instruction) -> str:
    algorithm = ins.proto.precision_config.algorithm
    if algorithm in ALGORITHM_PRECISION:
        return ALGORITHM_PRECISION[algorithm]
    return in_precision(ins)


def trip_count(ins: Instruction) -> int | None:
    """`known_trip_count.n` from a while's backend config, when XLA recorded it."""
    m = TRIP_COUNT.search(bytes(ins.proto.backend_config))
    return int(m.group(1)) if m else None


def category_of(ins: Instruction) -> str:
    """An XProf-style category: "convolution fusion", "loop fusion", "dot", "data formatting"..."""
    op = ins.opcode
    if op == "fusion":
        kinds = {i.opcode for i in ins.called[0].instructions} if ins.called else set()
        if (
            "convolution" in kinds
            or "dot" in kinds
            or "scaled-dot" in kinds
            or "ragged-dot" in kinds
        ):
            return "convolution fusion"
        kind = ins.proto.fusion_kind
        return {
            "kLoop": "loop fusion",
            "kInput": "input fusion",
            "kOutput": "output fusion",
            "kCustom": "custom fusion",
        }.get(kind, "fusion")
    if op in ELEMENTWISE or op in TRANSCENDENTAL:
        return "non-fusion elementwise"
    if op in (
        "copy",
        "transpose",
        "reshape",
        "bitcast",
        "broadcast",
        "pad",
        "concatenate",
        "reverse",
        "slice",
        "dynamic-slice",
        "dynamic-update-slice",
        "gather",
        "scatter",
        "iota",
        "dynamic-reshape",
        "copy-start",
        "copy-done",
    ):
        return "data formatting"
    if op in ("scaled-dot", "ragged-dot"):
        return "dot"
    return op
