"""Stage 3 of the XLA GPU/CPU reader: events matched to HLO instructions, and their costs.

The programs' HLO is in `/host:metadata` (`Hlo Proto`, by `program_id`); FLOPs, bytes and
precision come from `tb_roofline.costs.hlo` (per execution) × executions. A kernel whose
`hlo_op` the HLO lacks (a command buffer's) is matched by its own name, which XLA derives from
its instruction's. An HLO op that launches several kernels runs once per launch of its MAIN
kernel (its longest-running one: a fused attention backward launches one `FmhaBwdDQDKDV`
kernel and two fills per call); what ran is said by its GEMM / convolution / attention kernel,
never by a helper kernel (a split-K reduction, a fill), however long it ran.
"""

from __future__ import annotations

import collections
import re

from tb_roofline.costs.hlo.cost_model import module_costs
from tb_roofline.costs.hlo.fingerprint import instruction_fingerprint
from tb_roofline.costs.hlo.module import HloIndex
from tb_roofline.costs.hlo.shapes import largest_in_memory_space
from tb_roofline.devices.precision import with_input_type
from tb_roofline.readers.common import longest_kernel_unit

UNATTRIBUTED = "unattributed"
# XLA names a kernel after its HLO instruction with the characters a symbol cannot hold as "_".
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
IN_COMMAND_BUFFER = (
    "in a command buffer (its hlo_op names the buffer, which the HLO lacks) and not named after "
    "an instruction (a cuBLAS kernel or a memset)"
)
# Row kinds that carry time and no cost: events matching no instruction, runtime copies.
UNCOSTED = frozenset({UNATTRIBUTED, "memcpy", "memset"})


class Costing:
    """Looks instructions up and costs them, once per program; tallies what does not match."""

    def __init__(self, index: HloIndex, gpu: bool):
        self.index = index
        self.gpu = gpu
        self.costs: dict = {}
        self.fingerprints: dict = {}  # program id -> {op name: fingerprint}
        self._signatures: dict = {}  # computation signatures, shared by the programs
        self.unknown: collections.Counter = collections.Counter()
        self.no_trip = 0
        self.reasons: collections.Counter = (
            collections.Counter()
        )  # why events matched no instruction
        self.copies: collections.Counter = collections.Counter()  # runtime copies without hlo_op
        self.ungrouped: set = set()  # (program, op) of collectives without replica groups
        self.masked: dict = {}  # (program, op) -> mask of attention calls counted unmasked
        # what has no cost rule -> its time (ps, a float: a Counter for its most_common)
        self.uncosted_ps: collections.Counter = collections.Counter()
        self._name_to_pid: dict = {}
        self.op_facts: dict = {}  # (program id, op name) -> what its instruction alone says
        self._kernel_names: dict = {}  # program id -> {kernel name: instruction}
        self.by_kernel_name = 0  # events in command buffers matched by their kernel's name

    def program_id(self, ev) -> str:
        if ev.program_id:
            return ev.program_id
        if ev.module and ev.module not in self._name_to_pid:
            m = self.index.find(None, ev.module)
            self._name_to_pid[ev.module] = m.program_id if m is not None else ""
        return self._name_to_pid.get(ev.module, "")

    def fingerprint(self, pid: str, ins) -> str:
        by_name = self.fingerprints.setdefault(pid, {})
        fp = by_name.get(ins.name)
        if fp is None:
            fp = by_name[ins.name] = instruction_fingerprint(ins, self._signatures)
        return fp

    def module_costs(self, pid: str):
        if pid not in self.costs:
            module = self.index.get(pid) if pid else None
            mc = None
            if module is not None:
                mc = module_costs(module, gpu=self.gpu)
                self.unknown.update(mc.unknown)
                self.no_trip += sum(
                    1
                    for c in module.computations
                    for i in c.instructions
                    if i.opcode == "while"
                    and b"known_trip_count" not in bytes(i.proto.backend_config)
                )
            self.costs[pid] = (module, mc)
        return self.costs[pid]

    def match(self, e):
        """(group key, instruction, module, module costs) of one event; an event that matches
        no instruction gets an `unattributed` key (its reason tallied); a runtime copy or fill
        without `hlo_op` is keyed by its kind (`memcpy` / `memset`), a copy, not a kernel."""
        if e.copy and not e.hlo_op:
            self.copies[e.copy] += 1
            return (e.copy, e.program_id, e.name, e.step), None, None, None
        pid = self.program_id(e) if e.hlo_op else e.program_id
        module, mc = self.module_costs(pid) if e.hlo_op else (None, None)
        ins = module.instruction(e.hlo_op) if module is not None else None
        if ins is None and module is not None:
            ins = self._kernel_names_of(pid, module).get(e.name)
            self.by_kernel_name += ins is not None
        if ins is None:
            reason = (
                "no hlo_op (command buffer, CUDA graph or non-XLA kernel)"
                if not e.hlo_op
                else "program without HLO proto"
                if module is None
                else IN_COMMAND_BUFFER
                if e.hlo_op.startswith("command_buffer")
                else "op not found in its program's HLO"
            )
            self.reasons[reason] += 1
            return (UNATTRIBUTED, pid, e.hlo_op or e.name, e.step), None, None, None
        return ("op", pid, ins.name, e.step), ins, module, mc

    def _kernel_names_of(self, pid: str, module) -> dict:
        """{kernel name: instruction} of a program: an XLA kernel is named after the
        instruction it computes, "." and "-" written "_" (names two instructions would share
        are left out). What identifies the kernels of a command buffer, whose events' hlo_op
        names the buffer: the thunk that XLA's HLO does not hold."""
        names = self._kernel_names.get(pid)
        if names is None:
            seen: dict = {}
            for comp in module.computations:
                for ins in comp.instructions:
                    seen.setdefault(_UNSAFE.sub("_", ins.name), []).append(ins)
            names = {k: v[0] for k, v in seen.items() if len(v) == 1}
            self._kernel_names[pid] = names
        return names


def executions(kernels: dict, kernel_time: dict) -> int:
    """Executions of a GPU op: the launches of its main kernel, the one that ran longest (ties:
    the most launched). A call launches its main kernel once; helpers (fills, split-K
    reductions) may run several times per call."""
    main = max(kernel_time, key=lambda k: (kernel_time[k], kernels[k]))
    return kernels[main]


def ran_at(kernel_time: dict, dtype: str) -> str:
    """What ran: the unit the op's longest GEMM/convolution/attention kernel names (TF32 tensor
    cores, FP32 SIMT, ...) with the HLO's data type beside it (`kernel:tf32/f32`), else that
    data type."""
    return with_input_type(longest_kernel_unit(kernel_time), dtype)


def host_bytes(ins) -> int:
    """Arrays in host memory (`S(5)`) among an instruction's result and operands make it a host
    transfer (JAX host offload on GPU/CPU): the size it moves over the host link, else 0. The
    `-done` half of an async copy moves nothing of its own."""
    if ins.opcode.endswith("-done"):
        return 0
    shapes = [ins.proto.shape] + [o.proto.shape for o in ins.operands]
    return max(largest_in_memory_space(s) for s in shapes)


def costed(ins, mc) -> bool:
    """Whether the cost model has a rule for this instruction (unknown opcodes count 0)."""
    unknown = mc.unknown
    if ins.opcode in unknown:
        return False
    target = getattr(ins.proto, "custom_call_target", "")
    return not (ins.opcode == "custom-call" and f"custom-call {target}" in unknown)
