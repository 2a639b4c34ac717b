"""Bytes a fusion reads and writes: each fused parameter as its users read it (a slice reads
its slice, a dynamic-slice of the parameter its window, nested fusions looked into), big
constants, and the result (a dynamic-update-slice root writes its update only).

Bitcasts of a parameter are looked through (`through_bitcasts`): a bitcast moves no data, so a
slice of a bitcast of the parameter reads its slice, as a slice of the parameter does. XLA's
cost analysis counts the whole parameter there (a bitcast is a user like any other), which
puts a kernel that reads a third of its operand (JAX's q/k/v split of a fused projection) at
up to twice the HBM peak. `CostModel` looks through them on GPU (where an op's bytes are judged
against HBM kernel by kernel); on CPU and with `xla_compatible=True` it keeps XLA's rule."""

from __future__ import annotations

from tb_roofline.costs.hlo.module import Instruction
from tb_roofline.costs.hlo.shapes import TUPLE, byte_size, leaf_bytes


def _users(p: Instruction, through_bitcasts: bool):
    """(user, the instruction it reads: `p` or a bitcast of it) of `p`'s users; with
    `through_bitcasts`, a bitcast's users stand for it."""
    out, todo = [], [(u, p) for u in p.users]
    while todo:
        u, via = todo.pop(0)
        if through_bitcasts and u.opcode == "bitcast":
            todo.extend((uu, u) for uu in u.users)
        else:
            out.append((u, via))
    return out


def param_read_bytes(p: Instruction, through_bitcasts: bool = False) -> float:
    """Bytes a fused parameter (or a tuple parameter's element) is read with, by its users."""
    size = byte_size(p.shape)
    total = 0
    shared = False
    for u, via in _users(p, through_bitcasts):
        op = u.opcode
        if op == "slice":
            total += byte_size(u.shape)
        elif op == "dynamic-slice":
            if u.operands and u.operands[0] is via:
                total += byte_size(u.shape)
            elif not shared:
                shared = True
                total += size
        elif op == "dynamic-update-slice":
            if not (u.operands and u.operands[0] is via) and not shared:
                shared = True
                total += size
        elif op in ("broadcast", "reshape"):
            total += size
        elif op == "fusion" and u.called:
            nested = u.called[0].parameters()
            for idx in u.operand_indices(via):
                if idx >= len(nested):
                    continue
                np_ = nested[idx]
                nested_shared = False
                if not np_.users and np_ is u.called[0].root:
                    # A pass-through nested fusion (Triton's operand tiles of a gemm fusion:
                    # `ROOT p = parameter(0)`) reads its operand whole.
                    total += size
                for nu in np_.users:
                    if nu.opcode == "slice":
                        total += byte_size(nu.shape)
                    elif nu.opcode == "dynamic-slice":
                        if nu.operands and nu.operands[0] is np_:
                            total += byte_size(nu.shape)
                        elif not nested_shared:
                            nested_shared = True
                            total += size
                    elif nu.opcode == "dynamic-update-slice":
                        if not (nu.operands and nu.operands[0] is np_) and not nested_shared:
                            nested_shared = True
                            total += size
                    elif not nested_shared:
                        nested_shared = True
                        total += size
        elif not shared:
            shared = True
            total += size
    return float(total)


def fusion_read_bytes(comp, constant_max_elements: int, through_bitcasts: bool = False) -> float:
    """Bytes a fusion reads: constants above `constant_max_elements` elements, and each
    parameter (or tuple parameter's element) as its users read it."""
    read = 0.0
    for inner in comp.instructions:
        if (
            inner.opcode == "constant"
            and inner.shape.elements() > constant_max_elements
            and inner.shape.is_array
        ):
            read += byte_size(inner.shape)
    for p in comp.parameters():
        if p.shape.etype != TUPLE:
            read += param_read_bytes(p, through_bitcasts)
        else:
            for u in p.users:
                if u.opcode == "get-tuple-element" and u.shape.etype != TUPLE:
                    read += param_read_bytes(u, through_bitcasts)
    return read


def fusion_written_bytes(ins: Instruction, comp) -> float:
    """Bytes a fusion writes: its result's arrays; a dynamic-update-slice root (or tuple
    element) writes its update only."""
    written = 0.0
    root = comp.root
    if ins.shape.etype == TUPLE:
        for i, leaf in enumerate(ins.shape.tuple_shapes):
            if not leaf.is_array:
                continue  # nested tuples: XLA visits every array subshape
            r = (
                root.operands[i]
                if root is not None and root.opcode == "tuple" and i < len(root.operands)
                else None
            )
            if r is not None and r.opcode == "dynamic-update-slice":
                written += byte_size(r.operands[1].shape)
            else:
                written += byte_size(leaf)
        for leaf in ins.shape.tuple_shapes:
            if leaf.etype == TUPLE:
                written += leaf_bytes(leaf)
    elif ins.shape.is_array:
        if root is not None and root.opcode == "dynamic-update-slice":
            written = float(byte_size(root.operands[1].shape))
        else:
            written = float(byte_size(ins.shape))
    return written
