"""Collectives in HLO: the bytes one execution of a collective instruction moves over the device
links. The bus factor (nccl-tests' table) is costs/collective_bytes.py's, the one definition every
reader uses.

Message size S from the operands: all-reduce, reduce-scatter, all-to-all, collective-permute,
collective-broadcast, send/recv take their operands' size; all-gather the gathered result
(operands × n). n = devices per group in any form XLA writes (costs/hlo/replica_groups.py); no
groups = every device (the caller says how many, and the row says it was assumed).
An async pair moves its bytes in the `-start` (or `async-start` wrapping the collective); the
`-done` moves nothing of its own.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tb_roofline.costs.collective_bytes import ONE_KINDS, bus_factor
from tb_roofline.costs.hlo.replica_groups import from_proto
from tb_roofline.costs.hlo.shapes import byte_size

if TYPE_CHECKING:  # its protos are imported by the readers that parse HLO
    from tb_roofline.costs.hlo.module import Instruction

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
    kernel names state it (costs/hlo/nccl_algorithm.py), "" when they do not."""
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
