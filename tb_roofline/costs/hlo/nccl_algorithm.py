"""The algorithm and protocol a collective ran with, where its NCCL/RCCL kernel names say it.

NCCL names its device kernels after the collective, the reduction, the type, the algorithm and
the protocol: `ncclDevKernel_AllReduce_Sum_f32_RING_LL` (NCCL >= 2.19),
`ncclKernel_AllReduce_RING_LL_Sum_float` (older NCCL, RCCL); algorithms RING, TREE, NVLS,
NVLS_TREE, COLLNET_DIRECT, COLLNET_CHAIN, PAT; protocols LL, LL128, SIMPLE. A generic kernel
(`ncclDevKernel_Generic`) does not say: the algorithm is then "" and the bus factor is
nccl-tests' (docs/hlo_cost_model.md).

The algorithm matters for the bytes over the links of an all-reduce only: with NVLink SHARP
(NVLS, NVLS_TREE) the switch reduces, so each GPU sends its buffer once and receives the result
once, S per direction (bus factor 1, costs/collective_bytes.py) instead of a ring's 2(n-1)/n.
"""

from __future__ import annotations

import re

ALGORITHMS = ("NVLS_TREE", "NVLS", "COLLNET_DIRECT", "COLLNET_CHAIN", "RING", "TREE", "PAT")
PROTOCOLS = ("LL128", "LL", "SIMPLE")
# Delimited by "_" or the name's end / its argument list ("...RING_LL(ncclDevKernelArgs...)").
_NAME = re.compile(
    r"(?:^|_)(" + "|".join(ALGORITHMS) + r")(?:_(" + "|".join(PROTOCOLS) + r"))?(?![A-Za-z0-9])"
)
_NCCL = re.compile(r"nccl|rccl", re.I)
# The collective a kernel runs, as its name spells it after the prefix.
_COLLECTIVE = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.I)
# The kernels that may carry each collective (NCCL runs all-to-all as grouped send/recv).
_RUNS = {
    "all-reduce": ("allreduce",),
    "all-gather": ("allgather",),
    "reduce-scatter": ("reducescatter",),
    "broadcast": ("broadcast",),
    "reduce": ("reduce",),
    "all-to-all": ("sendrecv", "alltoall"),
    "send": ("sendrecv", "send"),
    "recv": ("sendrecv", "recv"),
    "collective-permute": ("sendrecv", "send", "recv"),
}


def algorithm_of(kernel_names, kind: str = "") -> str:
    """ "RING_LL", "NVLS", "TREE_LL128", ... from the first NCCL/RCCL kernel name that states
    one (the longest-running first when given a {name: time} dict); "" when none does.
    `kind` (all-reduce, ...): only kernels of that collective count (an all-reduce whose call
    also launched a SendRecv kernel takes nothing from it)."""
    names = (
        sorted(kernel_names, key=lambda k: -kernel_names[k])
        if isinstance(kernel_names, dict)
        else list(kernel_names)
    )
    for name in names:
        if not _NCCL.search(name):
            continue
        if kind:
            c = _COLLECTIVE.search(name)
            if c is None or c.group(1).lower() not in _RUNS.get(kind, ()):
                continue
        m = _NAME.search(name)
        if m is not None:
            return m.group(1) + (f"_{m.group(2)}" if m.group(2) else "")
    return ""
