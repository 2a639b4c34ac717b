"""Costs of the ops of a PyTorch trace beyond aten (docs/pytorch_traces.md): collectives (c10d,
vLLM / symmetric-memory all-reduces, `record_param_comms` and `nccl:*` annotations), the
`flash_attn` package's attention ops and Triton kernels compiled by Inductor.

`op_cost(name, args)` is the one entry the Kineto reader calls for a `cpu_op`: aten ops go to
readers/torch_flops.py, the others are handled here. Conventions are torch_flops's: FLOPs of the
products only, bytes = every tensor argument read once + outputs written once.
"""
from __future__ import annotations

import math

from tb_roofline.readers import collectives, torch_flops
from tb_roofline.readers.torch_flops import Args, OpCost, Tensor

# c10 ScalarType names as `record_param_comms` writes them (`dtype`) → (precision, bytes).
SCALAR_TYPES = {
    "Float": ("f32", 4), "Double": ("f64", 8), "Half": ("f16", 2), "BFloat16": ("bf16", 2),
    "Long": ("s64", 8), "Int": ("s32", 4), "Short": ("s16", 2), "Char": ("s8", 1),
    "Byte": ("u8", 1), "Bool": ("pred", 1), "Float8_e4m3fn": ("f8e4m3", 1),
    "Float8_e5m2": ("f8e5m2", 1), "Float8_e4m3fnuz": ("f8e4m3", 1),
    "Float8_e5m2fnuz": ("f8e5m2", 1), "ComplexFloat": ("c64", 8), "ComplexDouble": ("c128", 16),
}


def op_cost(name: str, args: dict) -> OpCost | None:
    """The cost of one `cpu_op` call from its recorded args, or None when nothing applies."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    concrete = args.get("Concrete Inputs")
    if name.startswith("aten::"):
        return torch_flops.op_cost(name, dims, types, concrete)
    if name.startswith("triton_"):
        return triton_cost(args, Args(dims, types, concrete))
    if name.startswith("flash_attn::"):
        return flash_attn_cost(name[len("flash_attn::"):], Args(dims, types, concrete))
    if name == "record_param_comms" or not torch_flops.COMMUNICATION.search(name):
        return None
    return collective_cost(name, Args(dims, types, concrete))


# ------------------------------------------------------------------------------ collectives

def comm_op_cost(kind: str, in_bytes: float, out_bytes: float, precision: str) -> OpCost:
    """A collective's cost: 0 FLOPs, local bytes in + out, message size S for the links."""
    size = collectives.message_bytes(kind, in_bytes, out_bytes)
    return OpCost("communication", 0.0, float(in_bytes + out_bytes), precision, "formula",
                  (kind, float(size)))


def collective_cost(name: str, args: Args) -> OpCost | None:
    """c10d collectives from their tensors (output and input positions in C10D_ARGS); other
    namespaces' all-reduces (vLLM, symmetric memory) from their first tensor, reduced in
    place or into a buffer of the same size."""
    kind = collectives.kind_of(name)
    if not kind:
        return None
    if name.startswith("c10d::"):
        positions = collectives.C10D_ARGS.get(name[len("c10d::"):])
        if positions is None:
            return None
        out_i, in_i = positions
        out_b = _tensor_bytes(args, out_i)
        in_b = _tensor_bytes(args, in_i)
        if (out_i >= 0 and out_b is None) or (in_i >= 0 and in_b is None):
            return None
        out_b = out_b or 0.0
        in_b = in_b or 0.0
        if out_i == in_i:  # in place: one buffer read and written
            out_b = in_b
        prec = next((t.precision for t in args.tensors()), "")
        return comm_op_cost(kind, in_b, out_b, prec) if (in_b or out_b) else None
    if kind != collectives.ALL_REDUCE:
        return None
    t = args.tensor(0)
    if t is None or not t.numel:
        return None
    return comm_op_cost(kind, t.nbytes, t.nbytes, t.precision)


def _tensor_bytes(args: Args, i: int) -> float | None:
    """Bytes of argument i: a tensor, or a TensorList summed; None when not recorded."""
    if i < 0:
        return 0.0
    t = args.tensor(i)
    if t is not None:
        return float(t.nbytes)
    if i < len(args.types) and args.types[i] == "TensorList":
        parts = args.tensor_list(i)
        if parts:
            return float(sum(p.nbytes for p in parts))
    return None


def param_comms_fact(args: dict):
    """(kind, in bytes, out bytes, ranks, precision) from `record_param_comms` fields
    (`Collective name`, `In msg nelems`, `Out msg nelems`, `dtype`, `Group size`), or None."""
    kind = collectives.kind_of(str(args.get("Collective name") or ""))
    info = SCALAR_TYPES.get(str(args.get("dtype") or ""))
    if not kind or info is None:
        return None
    n_in, n_out = _count(args.get("In msg nelems")), _count(args.get("Out msg nelems"))
    ranks = _count(args.get("Group size"))
    if n_in is None and n_out is None:
        return None
    return (kind, (n_in or 0) * info[1], (n_out or 0) * info[1], ranks or 0, info[0])


def annotation_fact(name: str, args: dict):
    """(kind, in bytes, 0, 0, precision) of an `nccl:<collective>` annotation from its
    `Input Dims` and `Input type` (the tensor it sends), or None."""
    kind = collectives.kind_of(name)
    if not kind:
        return None
    a = Args(args.get("Input Dims"), args.get("Input type"))
    tensors = a.tensors()
    if not tensors:
        return None
    return (kind, float(sum(t.nbytes for t in tensors)), 0.0, 0, tensors[0].precision)


def fact_cost(kind: str, in_bytes: float, out_bytes: float, ranks: int,
              precision: str) -> OpCost:
    """A collective's cost from a fact whose output (or input) size may be missing: all-gather
    writes n × its input, reduce-scatter n times less than it reads, the others as much."""
    n = max(ranks, 1)
    if not out_bytes:
        out_bytes = in_bytes * n if kind == collectives.ALL_GATHER else (
            in_bytes / n if kind == collectives.REDUCE_SCATTER else in_bytes)
    if not in_bytes:
        in_bytes = out_bytes / n if kind == collectives.ALL_GATHER else (
            out_bytes * n if kind == collectives.REDUCE_SCATTER else out_bytes)
    return comm_op_cost(kind, in_bytes, out_bytes, precision)


def _count(value) -> int | None:
    if type(value) is int and 0 <= value < 2 ** 53:
        return value
    if type(value) is float and value.is_integer() and 0 <= value < 2 ** 53:
        return int(value)
    return None


# ------------------------------------------------------------------------------ attention

# flash_attn's registered ops: name → (index of q, backward?). Layout [batch, seq, heads, dim].
FLASH_ATTN_OPS = {
    "_flash_attn_forward": (0, False),
    "_flash_attn_backward": (1, True),
}


def flash_attn_cost(name: str, args: Args) -> OpCost | None:
    """flash_attn::_flash_attn_forward(q, k, v, ...) and _flash_attn_backward(dout, q, k, v,
    ...): the counts of torch's SDPA formulas on [B, S, H, D] tensors (varlen ops: q is
    [total tokens, H, D] and the per-sequence lengths are not recorded, so no cost)."""
    spec = FLASH_ATTN_OPS.get(name)
    if spec is None:
        return None
    qi, backward = spec
    q, k, v = args.tensor(qi), args.tensor(qi + 1), args.tensor(qi + 2)
    if q is None or k is None or v is None or not (len(q.shape) == len(k.shape) ==
                                                   len(v.shape) == 4):
        return None
    b, lq, h, dq = q.shape
    lk, dv = k.shape[1], v.shape[3]
    flops = torch_flops.attention_flops(b, h, lq, lk, dq, dv, backward=backward)
    if backward:
        g = args.tensor(0)
        inputs = [t for t in (g, q, k, v) if t is not None]
        outs = [q, k, v]
    else:
        inputs, outs = [q, k, v], [Tensor((b, lq, h, dv), q.precision)]
    nbytes = sum(t.nbytes for t in inputs) + sum(t.nbytes for t in outs)
    return OpCost("attention", float(flops), float(nbytes), q.precision, "formula")


# ------------------------------------------------------------------------------ triton

def triton_cost(args: dict, a: Args) -> OpCost | None:
    """An Inductor Triton kernel's launch: FLOPs and bytes from Inductor's own annotations
    (`kernel_flop`, `kernel_num_gb`) when present; else bytes from the kernel's tensor
    arguments (each read or written once: Inductor passes inputs and outputs alike), FLOPs
    unknown (source "bytes")."""
    flop = _number(args.get("kernel_flop"))
    gb = _number(args.get("kernel_num_gb"))
    tensors = a.tensors()
    prec = torch_flops._first_float(tensors) if tensors else ""
    nbytes = gb * 1e9 if gb is not None else (
        float(sum(t.nbytes for t in tensors)) if tensors else None)
    if flop is not None and nbytes is not None:
        return OpCost("fusion", flop, nbytes, prec, "formula")
    if nbytes is not None:
        return OpCost("fusion", 0.0, nbytes, prec, "bytes")
    return None


def _number(value) -> float | None:
    if type(value) in (int, float) and math.isfinite(value) and 0 <= value < 1e30:
        return float(value)
    return None
