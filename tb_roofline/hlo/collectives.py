"""Collectives: the bytes one execution moves over the device links, as nccl-tests counts them.

Message size S (bytes) from the operands: all-reduce, reduce-scatter, all-to-all,
collective-permute, collective-broadcast, send/recv take their operands' size; all-gather the
gathered result (operands × n). Bus bytes = S × the bus factor of nccl-tests: all-reduce
2(n−1)/n; all-gather, reduce-scatter, all-to-all (n−1)/n; permute, broadcast, send/recv 1 —
so bus bytes / time is the bus bandwidth nccl-tests reports, comparable with the link's peak.
n = devices in the instruction's group: `replica_groups` (or `collective_device_list`, or its
iota form: `num_devices_per_group`); no groups = every device (the caller says how many).
An async pair moves its bytes in the `-start` (or `async-start` wrapping the collective); the
`-done` moves nothing of its own.
"""
from __future__ import annotations

import dataclasses

from typing import TYPE_CHECKING

from tb_roofline.hlo.shapes import byte_size

if TYPE_CHECKING:  # its protos are imported by the readers that parse HLO
    from tb_roofline.hlo.module import Instruction

# opcode -> (kind, bus factor as a function of n)
_ALL_REDUCE = lambda n: 2.0 * (n - 1) / n  # noqa: E731
_SPLIT = lambda n: (n - 1.0) / n  # noqa: E731
_ONE = lambda n: 1.0  # noqa: E731
KINDS = {
    "all-reduce": ("all-reduce", _ALL_REDUCE), "all-reduce-start": ("all-reduce", _ALL_REDUCE),
    "all-gather": ("all-gather", _SPLIT), "all-gather-start": ("all-gather", _SPLIT),
    "reduce-scatter": ("reduce-scatter", _SPLIT),
    "all-to-all": ("all-to-all", _SPLIT), "ragged-all-to-all": ("all-to-all", _SPLIT),
    "collective-permute": ("collective-permute", _ONE),
    "collective-permute-start": ("collective-permute", _ONE),
    "collective-broadcast": ("broadcast", _ONE), "send": ("send", _ONE), "recv": ("recv", _ONE),
}
# Its message is its first operand: the others are the output buffer and the offset and size
# arrays (ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets,
# recv_sizes)).
MESSAGE_IS_FIRST_OPERAND = frozenset({"ragged-all-to-all"})


def group_free(opcode: str) -> bool:
    """Whether the bus bytes of this collective do not depend on the group size (factor 1)."""
    return KINDS[opcode][1] is _ONE


@dataclasses.dataclass(frozen=True)
class Transfer:
    kind: str  # all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute, ...
    group: int  # devices in the group (n)
    group_known: bool  # False: no groups in the HLO, n is the caller's device count
    message_bytes: float  # S
    bus_bytes: float  # S × bus factor(n)


def _collective(ins: Instruction) -> Instruction | None:
    if ins.opcode in KINDS:
        return ins
    if ins.opcode == "async-start" and ins.called and ins.called[0].root is not None:
        root = ins.called[0].root
        return root if root.opcode in KINDS else None
    return None


def group_size(ins: Instruction) -> int | None:
    """Devices per group from the instruction's replica groups; None when it has none."""
    p = ins.proto
    if len(p.replica_groups) and len(p.replica_groups[0].replica_ids):
        return len(p.replica_groups[0].replica_ids)
    dl = p.collective_device_list
    if len(dl.replica_groups) and len(dl.replica_groups[0].replica_ids):
        return len(dl.replica_groups[0].replica_ids)
    for iota in (dl.iota_replica_group_list, p.iota_collective_device_list):
        if iota.num_devices_per_group > 0:
            return int(iota.num_devices_per_group)
    return None


def transfer(ins: Instruction, devices: int) -> Transfer | None:
    """What one execution of `ins` moves over the links; None when it is no collective (or the
    `-done` half). `devices`: the group when the HLO names none."""
    c = _collective(ins)
    if c is None:
        return None
    kind, factor = KINDS[c.opcode]
    n = group_size(c)
    known = n is not None
    n = max(int(n if known else devices), 1)
    moved = c.operands[:1] if c.opcode in MESSAGE_IS_FIRST_OPERAND else c.operands
    operands = float(sum(byte_size(o.shape) for o in moved))
    message = operands * n if kind == "all-gather" else operands
    return Transfer(kind, n, known, message, message * factor(n))
