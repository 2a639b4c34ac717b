"""Bytes a collective moves over the GPU-GPU links, as nccl-tests count them
(docs/pytorch_traces.md).

nccl-tests (its `doc/PERFORMANCE.md`) reports an algorithm bandwidth S / t and a *bus*
bandwidth S / t × factor, the factor making the figure comparable with the link's peak: its
table and the factor are in hlo/collectives.py (one definition for every reader).

`interconnect_bytes` of a collective row is S × factor: the bytes its busiest link carries
under a ring/tree algorithm. Its FLOPs are 0 (reductions are not counted, as torch's counter
does not count them); its `bytes` are its local reads and writes (input + output).
"""

from __future__ import annotations

import re

from tb_roofline.hlo import collectives as hlo_collectives

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
)
BROADCAST, REDUCE, SEND, RECV = "broadcast", "reduce", "send", "recv"

# First match wins: reduce_scatter before reduce, all_reduce before reduce.
_KINDS = [
    (re.compile(r"reduce_?scatter", re.I), REDUCE_SCATTER),
    (re.compile(r"all_?reduce", re.I), ALL_REDUCE),
    (re.compile(r"all_?gather", re.I), ALL_GATHER),
    (re.compile(r"all_?to_?all|all_?2_?all", re.I), ALL_TO_ALL),
    (re.compile(r"broadcast", re.I), BROADCAST),
    (re.compile(r"(?<![a-z])reduce(?!_?scatter)", re.I), REDUCE),
    (re.compile(r"send", re.I), SEND),
    (re.compile(r"recv", re.I), RECV),
]


def kind_of(name: str) -> str:
    """The collective a name (op, annotation or `Collective name`) runs, or ""."""
    for pattern, kind in _KINDS:
        if pattern.search(name):
            return kind
    return ""


def bus_factor(kind: str, n: int, algorithm: str = "") -> float:
    """nccl-tests' bus factor for `kind` over `n` ranks (0 when n is unknown): the one
    definition in hlo/collectives.py, in this module's spelling of the kinds."""
    return hlo_collectives.bus_factor(kind.replace("_", "-"), n, algorithm)


def message_bytes(kind: str, in_bytes: float, out_bytes: float) -> float:
    """S of the table above from the bytes of the input and output buffers (either may be 0
    when unknown: all-gather output = n × input and reduce-scatter input = n × output are then
    not guessed here)."""
    if kind == ALL_GATHER:
        return out_bytes or in_bytes
    if kind == REDUCE_SCATTER:
        return in_bytes or out_bytes
    return in_bytes or out_bytes


def bus_bytes(kind: str, size: float, n: int, algorithm: str = "") -> float:
    """Bytes over the busiest link: S × bus factor."""
    return size * bus_factor(kind, n, algorithm)


# c10d ops: (index of the output tensor, index of the input tensor) in `Input Dims` (-1: none;
# in-place ops work on one buffer, the same for both).
C10D_ARGS = {
    "allreduce_": (0, 0),
    "allreduce_coalesced_": (0, 0),
    "_allgather_base_": (0, 1),
    "allgather_into_tensor_coalesced_": (0, 1),
    "allgather_": (0, 1),
    "_reduce_scatter_base_": (0, 1),
    "reduce_scatter_tensor_coalesced_": (0, 1),
    "reduce_scatter_": (0, 1),
    "alltoall_base_": (0, 1),
    "alltoall_": (0, 1),
    "broadcast_": (0, 0),
    "reduce_": (0, 0),
    "send": (-1, 0),
    "recv_": (0, -1),
}
