"""Bytes a collective moves over the device links, as nccl-tests count them: the one home of the
bus factor, for every reader (XLA's HLO collectives in costs/hlo/collectives.py, PyTorch's c10d
and NCCL calls in readers/kineto/comms.py and costs/torch/custom_ops.py).

nccl-tests (its doc/PERFORMANCE.md) reports an algorithm bandwidth S / t and a *bus* bandwidth
S / t × factor, the factor making the figure comparable with one link's peak per direction:

| collective | S (message size) | bus factor (n ranks) |
|---|---|---|
| all-reduce | the buffer | 2(n-1)/n |
| all-gather | the gathered output (n × the input) | (n-1)/n |
| reduce-scatter | the input (n × the output) | (n-1)/n |
| all-to-all | the buffer each rank sends | (n-1)/n |
| collective-permute, broadcast, reduce, send, recv | the buffer | 1 |

Where the trace names the algorithm (NCCL/RCCL kernel names: costs/hlo/nccl_algorithm.py), an
all-reduce over NVLink SHARP (NVLS) moves S per direction (the switch reduces): factor 1.

`interconnect_bytes` of a collective row is S × factor: the bytes its busiest link carries
under a ring/tree algorithm. Its FLOPs are 0 (reductions are not counted, as torch's counter
does not count them); its `bytes` are its local reads and writes (input + output).
"""

from __future__ import annotations

import re

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
)
BROADCAST, REDUCE, SEND, RECV = "broadcast", "reduce", "send", "recv"

SPLIT_KINDS = frozenset({"all-gather", "reduce-scatter", "all-to-all"})
ONE_KINDS = frozenset({"collective-permute", "broadcast", "reduce", "send", "recv"})
NVLS = "NVLS"


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


def bus_factor(kind: str, n: int | None, algorithm: str = "") -> float:
    """nccl-tests' bus factor of `kind` over `n` ranks; 0 when n is unknown or the kind is
    none of the table's (never claimed). `kind` in either spelling ("all-reduce" as HLO writes
    it, "all_reduce" as this module's `kind_of` names it); `algorithm` as
    costs/hlo/nccl_algorithm.py names it ("" = not stated: nccl-tests' ring)."""
    kind = kind.replace("_", "-")
    if n is None or n < 1:
        return 0.0
    if kind == "all-reduce":
        return 1.0 if algorithm.startswith(NVLS) else 2.0 * (n - 1) / n
    if kind in SPLIT_KINDS:
        return (n - 1.0) / n
    return 1.0 if kind in ONE_KINDS else 0.0


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
