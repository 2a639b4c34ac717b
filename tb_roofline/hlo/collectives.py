"""Collectives: the bytes one execution moves over the device links, as nccl-tests counts them.

The one home of the bus factor (the PyTorch readers' readers/collectives.py and the TPU text
path readers/hlo_shapes.py use `bus_factor` below).

nccl-tests (its doc/PERFORMANCE.md) reports an algorithm bandwidth S / t and a *bus* bandwidth
S / t × factor, the factor making the figure comparable with one link's peak per direction:

| collective | S (message size) | bus factor (n ranks) |
|---|---|---|
| all-reduce | the buffer | 2(n-1)/n |
| all-gather | the gathered output (n × the input) | (n-1)/n |
| reduce-scatter | the input (n × the output) | (n-1)/n |
| all-to-all | the buffer each rank sends | (n-1)/n |
| collective-permute, broadcast, reduce, send, recv | the buffer | 1 |

Where the trace names the algorithm (NCCL/RCCL kernel names: hlo/nccl_algorithm.py), an
all-reduce over NVLink SHARP (NVLS) moves S per direction (the switch reduces): factor 1.

Message size S from the operands: all-reduce, reduce-scatter, all-to-all, collective-permute,
collective-broadcast, send/recv take their operands' size; all-gather the gathered result
(operands × n). n = devices per group in any form XLA writes (hlo/replica_groups.py); no
groups = every device (the caller says how many, and the row says it was assumed).
An async pair moves its bytes in the `-start` (or `async-start` wrapping the collective); the
`-done` moves nothing of its own.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tb_roofline.hlo.replica_groups import from_proto
from tb_roofline.hlo.shapes import byte_size

if TYPE_CHECKING:  # its protos are imported by the readers that parse HLO
    from tb_roofline.hlo.module import Instruction

SPLIT_KINDS = frozenset({"all-gather", "reduce-scatter", "all-to-all"})
ONE_KINDS = frozenset({"collective-permute", "broadcast", "reduce", "send", "recv"})
NVLS = "NVLS"


def bus_factor(kind: str, n: int | None, algorithm: str = "") -> float:
    """nccl-tests' bus factor of `kind` over `n` ranks; 0 when n is unknown or the kind is
    none of the table's (never claimed). `kind` in this module's spelling ("all-reduce");
    `algorithm` as hlo/nccl_algorithm.py names it ("" = not stated: nccl-tests' ring)."""
    if n is None or n < 1:
        return 0.0
    if kind == "all-reduce":
        return 1.0 if algorithm.startswith(NVLS) else 2.0 * (n - 1) / n
    if kind in SPLIT_KINDS:
        return (n - 1.0) / n
    return 1.0 if kind in ONE_KINDS else 0.0


KINDS = {
    "all-reduce": "all-reduce",
    "all-reduce-start": "all-reduce",
    "all-gather": "all-gather",
    "all-gather-start": "all-gather",
    "reduce-scatter": "reduce-scatter",
    "all-to-all": "all-to-all",
    "ragged-all-to-all": "all-to-all",
    "collective-permute": "collective-permute",
    "collective-permute-start": "collective-permute",
    "collective-broadcast": "broadcast",
    "send": "send",
    "recv": "recv",
}  # opcode -> kind
# Its message is its first operand: the others are the output buffer and the offset and size
# arrays (ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets,
# recv_sizes)).
MESSAGE_IS_FIRST_OPERAND = frozenset({"ragged-all-to-all"})


def group_free(opcode: str) -> bool:
    """Whether the bus bytes of this collective do not depend on the group size (factor 1)."""
    return KINDS[opcode] in ONE_KINDS


@dataclasses.dataclass(frozen=True)
class Transfer:
    kind: str  # all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute, ...
    group: int  # devices in the group (n; 2 for a permute's pairs)
    group_known: bool  # False: no groups in the HLO, n is the caller's device count
    message_bytes: float  # S
    bus_bytes: float  # S × bus factor(n)
    groups: int = 0  # how many groups (pairs); 0 when not named
    form: str = ""  # how the HLO names them: list, iota, mesh, pairs ("" = not named)


def _collective(ins: Instruction) -> Instruction | None:
    if ins.opcode in KINDS:
        return ins
    if ins.opcode == "async-start" and ins.called and ins.called[0].root is not None:
        root = ins.called[0].root
        return root if root.opcode in KINDS else None
    return None


def group_size(ins: Instruction) -> int | None:
    """Devices per group from the instruction's replica groups; None when it has none."""
    g = from_proto(ins.proto)
    return g.size if g is not None else None


def transfer(ins: Instruction, devices: int, algorithm: str = "") -> Transfer | None:
    """What one execution of `ins` moves over the links; None when it is no collective (or the
    `-done` half). `devices`: the group when the HLO names none; `algorithm`: as the
    kernel names state it (hlo/nccl_algorithm.py), "" when they do not."""
    c = _collective(ins)
    if c is None:
        return None
    kind = KINDS[c.opcode]
    g = from_proto(c.proto)
    known = g is not None or group_free(c.opcode)
    n = max(int(g.size if g is not None else devices), 1)
    moved = c.operands[:1] if c.opcode in MESSAGE_IS_FIRST_OPERAND else c.operands
    operands = float(sum(byte_size(o.shape) for o in moved))
    message = operands * n if kind == "all-gather" else operands
    return Transfer(
        kind,
        n,
        known,
        message,
        message * bus_factor(kind, n, algorithm),
        g.count if g is not None else 0,
        g.form if g is not None else "",
    )
