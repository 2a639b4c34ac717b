"""Decode the `Hlo Proto`s of an XSpace's `/host:metadata` plane and index their instructions.

Facts (docs/hlo_cost_model.md): the metadata plane has one event metadata per compiled program,
named `<module name>(<program id>)`, with stats `Hlo Proto` (a serialized HloProto) and
`program_id`. Computations list callees before callers and instructions list operands before users;
`operand_ids` refer to instructions of the same computation; instruction ids are unique in the
module. Execution events name their instruction with `hlo_op` (GPU may write `a::b`; the last part
is the instruction) and their program with `program_id` / `hlo_module`.
"""

from __future__ import annotations

import hashlib
import re

from google.protobuf.message import DecodeError

from tb_roofline.costs.hlo.shapes import Shape
from tb_roofline.protos import hlo_pb2

METADATA_PLANE = "/host:metadata"
_NAME_WITH_ID = re.compile(r"^(.*)\((\d+)\)$")


class Instruction:
    """One HLO instruction with its operands and called computations resolved."""

    __slots__ = (
        "proto",
        "name",
        "opcode",
        "id",
        "shape",
        "operands",
        "called",
        "computation",
        "_users",
    )

    def __init__(self, proto, computation):
        self.proto = proto
        self.name = proto.name
        self.opcode = proto.opcode
        self.id = proto.id
        self.shape = Shape.from_proto(proto.shape)
        self.operands: list[Instruction] = []
        self.called: list[Computation] = []
        self.computation = computation
        self._users: list[Instruction] | None = None  # made for the computation at first use

    @property
    def users(self) -> list[Instruction]:
        """Distinct users inside the same computation, in instruction order."""
        if self._users is None:
            self.computation._index_users()  # gives each of its instructions a list
        return self._users or []

    def operand_indices(self, operand: Instruction) -> list[int]:
        return [i for i, o in enumerate(self.operands) if o is operand]

    def __repr__(self):
        return f"<{self.opcode} {self.name} {self.shape!r}>"


class Computation:
    __slots__ = (
        "proto",
        "name",
        "id",
        "instructions",
        "root",
        "is_fusion",
        "module",
        "_users_done",
    )

    def __init__(self, proto, module):
        self.proto = proto
        self.name = proto.name
        self.id = proto.id
        self.is_fusion = proto.is_fusion_computation
        self.module = module
        self.instructions: list[Instruction] = []
        self.root: Instruction | None = None
        self._users_done = False

    def parameters(self) -> list[Instruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        params.sort(key=lambda i: i.proto.parameter_number)
        return params

    def _index_users(self):
        if self._users_done:
            return
        for ins in self.instructions:
            ins._users = []
        for ins in self.instructions:
            seen = set()
            for op in ins.operands:
                if id(op) not in seen:
                    seen.add(id(op))
                    if op._users is not None:
                        op._users.append(ins)
        self._users_done = True


class HloModule:
    """One program: its computations (callees first) and its instructions by name."""

    def __init__(self, proto: hlo_pb2.HloModuleProto, program_id: str = "", digest: str = ""):
        self.proto = proto
        self.name = proto.name
        self.program_id = program_id
        self.digest = digest
        self.computations: list[Computation] = []
        self.by_comp_id: dict[int, Computation] = {}
        self.by_name: dict[str, Instruction] = {}
        self.unresolved: list[str] = []
        for cp in proto.computations:
            comp = Computation(cp, self)
            self.computations.append(comp)
            self.by_comp_id[comp.id] = comp
        for comp in self.computations:
            by_id: dict[int, Instruction] = {}
            for ip in comp.proto.instructions:
                ins = Instruction(ip, comp)
                by_id[ins.id] = ins
                comp.instructions.append(ins)
                self.by_name[ins.name] = ins
            for ins in comp.instructions:
                ip = ins.proto
                try:
                    ins.operands = [by_id[o] for o in ip.operand_ids]
                except KeyError:
                    self.unresolved.append(ins.name)
                    ins.operands = [by_id[o] for o in ip.operand_ids if o in by_id]
                ids = ip.called_computation_ids
                if ids:
                    ins.called = [self.by_comp_id[c] for c in ids if c in self.by_comp_id]
            comp.root = by_id.get(comp.proto.root_id) or (
                comp.instructions[-1] if comp.instructions else None
            )
        self.entry = self.by_comp_id.get(proto.entry_computation_id)
        if self.entry is None:
            named = [c for c in self.computations if c.name == proto.entry_computation_name]
            self.entry = (
                named[0] if named else (self.computations[-1] if self.computations else None)
            )
        self._costs: dict = {}

    def instruction(self, hlo_op: str) -> Instruction | None:
        """The instruction an event's `hlo_op` names (`a::b` names `b`)."""
        ins = self.by_name.get(hlo_op)
        if ins is None and "::" in hlo_op:
            ins = self.by_name.get(hlo_op.rsplit("::", 1)[-1])
        return ins

    def num_instructions(self) -> int:
        return sum(len(c.instructions) for c in self.computations)

    def source_of(self, ins: Instruction) -> str:
        """ "file:line" of the innermost stack frame (JAX keeps source only there)."""
        md = ins.proto.metadata
        if md.source_file:
            return f"{md.source_file}:{md.source_line}"
        fid = md.stack_frame_id
        index = self.proto.stack_frame_index
        if fid <= 0 or fid > len(index.stack_frames):
            return ""
        frame = index.stack_frames[fid - 1]
        loc_id = frame.file_location_id
        if loc_id <= 0 or loc_id > len(index.file_locations):
            return ""
        loc = index.file_locations[loc_id - 1]
        name = (
            index.file_names[loc.file_name_id - 1]
            if 0 < loc.file_name_id <= len(index.file_names)
            else ""
        )
        return f"{name}:{loc.line}" if name else ""


def parse_module(blob: bytes, program_id: str = "") -> HloModule:
    """Decode one serialized HloProto (or a bare HloModuleProto)."""
    try:
        module = hlo_pb2.HloProto.FromString(blob).hlo_module
    except DecodeError:
        module = None
    if module is None or not module.computations:
        alt = hlo_pb2.HloModuleProto.FromString(blob)
        if alt.computations or module is None:
            module = alt
    return HloModule(module, program_id, hashlib.blake2b(blob, digest_size=16).hexdigest())


class HloIndex:
    """Every program of one XSpace, decoded on first use, found by program id or module name."""

    def __init__(self):
        self._blobs: dict[str, bytes] = {}
        self._names: dict[str, str] = {}  # program id -> module name (from the metadata name)
        self._modules: dict[str, HloModule | None] = {}
        self.errors: list[str] = []

    @staticmethod
    def from_space(space) -> HloIndex:
        index = HloIndex()
        for plane in space.planes:
            if plane.name != METADATA_PLANE:
                continue
            names = {k: v.name for k, v in plane.stat_metadata.items()}
            for md in plane.event_metadata.values():
                blob, pid = None, None
                for st in md.stats:
                    key = names.get(st.metadata_id)
                    if key == "Hlo Proto":
                        blob = st.bytes_value
                    elif key == "program_id":
                        pid = st.int64_value or st.uint64_value
                m = _NAME_WITH_ID.match(md.name)
                if m and len(m.group(2)) > 19:  # not an int64: not a program id
                    m = None
                if pid is None and m:
                    pid = int(m.group(2))
                if blob is None or pid is None:
                    continue
                index.add(str(pid), blob, m.group(1) if m else md.name)
        return index

    def add(self, program_id: str, blob: bytes, name: str = ""):
        self._blobs[program_id] = blob
        self._names[program_id] = name

    def program_ids(self) -> list[str]:
        return list(self._blobs)

    def module_name(self, program_id: str) -> str:
        return self._names.get(program_id, "")

    def __len__(self):
        return len(self._blobs)

    def get(self, program_id) -> HloModule | None:
        pid = str(program_id)
        if pid in self._modules:
            return self._modules[pid]
        blob = self._blobs.get(pid)
        module = None
        if blob is not None:
            try:
                module = parse_module(blob, pid)
                if not self._names.get(pid):
                    self._names[pid] = module.name
            except (DecodeError, RuntimeError, ValueError) as exc:
                self.errors.append(f"program {pid}: HLO proto does not decode ({exc})")
            if module is not None and module.entry is None:  # empty: nothing to cost
                self.errors.append(f"program {pid}: HLO proto holds no computation")
                module = None
        self._modules[pid] = module
        return module

    def find(self, program_id=None, module_name: str = "") -> HloModule | None:
        """By program id when given; else the only program with that module name."""
        if program_id not in (None, ""):
            return self.get(program_id)
        if module_name:
            ids = [p for p, n in self._names.items() if n == module_name]
            if len(ids) == 1:
                return self.get(ids[0])
        return None

    def modules(self) -> list[HloModule]:
        return [m for m in (self.get(p) for p in self._blobs) if m is not None]
