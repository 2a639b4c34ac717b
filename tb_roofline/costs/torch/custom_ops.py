"""Costs of the ops of a PyTorch trace beyond aten (docs/pytorch_traces.md): collectives (c10d,
vLLM / symmetric-memory all-reduces, `record_param_comms` and `nccl:*` annotations), the
`flash_attn` package's attention ops and Triton kernels compiled by Inductor; MoE layers,
grouped GEMMs and embedding bags in costs/torch/sparse_ops.py.

`op_cost(name, args)` is the one entry the Kineto reader calls for a `cpu_op`: aten ops go to
costs/torch/flops.py, the others are handled here. Conventions are torch_flops's: FLOPs of the
products only, bytes = every tensor argument read once + outputs written once.
"""

from __future__ import annotations

import math

from tb_roofline.costs import collective_bytes
from tb_roofline.costs.hlo.shapes import element_bytes
from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.costs.torch import layers as torch_layers
from tb_roofline.costs.torch import pooling, serving_ops
from tb_roofline.costs.torch import sparse_ops as torch_sparse_ops
from tb_roofline.costs.torch.flops import Args, OpCost, Tensor
from tb_roofline.costs.torch.scaled_mm import SCALED_MM_OPS, scaled_mm_cost

# c10 ScalarType names as `record_param_comms` writes them (`dtype`) → precision (sizes:
# costs/hlo/shapes.py ELEMENT_BYTES).
_SCALAR_PRECISIONS = {
    "Float": "f32",
    "Double": "f64",
    "Half": "f16",
    "BFloat16": "bf16",
    "Long": "s64",
    "Int": "s32",
    "Short": "s16",
    "Char": "s8",
    "Byte": "u8",
    "Bool": "pred",
    "Float8_e4m3fn": "f8e4m3",
    "Float8_e5m2": "f8e5m2",
    "Float8_e4m3fnuz": "f8e4m3",
    "Float8_e5m2fnuz": "f8e5m2",
    "ComplexFloat": "c64",
    "ComplexDouble": "c128",
}
SCALAR_TYPES: dict[str, tuple[str, int]] = {
    t: (p, size) for t, p in _SCALAR_PRECISIONS.items() if (size := element_bytes(p)) is not None
}


def op_cost(name: str, args: dict) -> OpCost | None:
    """The cost of one `cpu_op` call from its recorded args, or None when nothing applies."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    concrete = args.get("Concrete Inputs")
    if name.startswith("aten::"):
        cost = torch_flops.op_cost(name, dims, types, concrete)
        if cost is None and dims is not None:
            cost = more_aten_cost(name[len("aten::") :], Args(dims, types, concrete))
        return cost
    if name.startswith(("_C::", "vllm::unified_kv")):
        cost = vllm_cost(name, Args(dims, types, concrete))
        if cost is not None:
            return cost
    if name.startswith("triton_"):
        return triton_cost(args, Args(dims, types, concrete))
    if name.startswith("flash_attn::"):
        return flash_attn_cost(name[len("flash_attn::") :], Args(dims, types, concrete))
    if "fused_experts" in name or "fused_moe" in name:  # vllm::, sglang:: MoE layers
        return torch_sparse_ops.fused_experts_cost(Args(dims, types, concrete))
    if dims is not None and not torch_flops.COMMUNICATION.search(name):
        return serving_ops.op_cost(name, Args(dims, types, concrete))
    if name == "record_param_comms" or not torch_flops.COMMUNICATION.search(name):
        return None
    return collective_cost(name, Args(dims, types, concrete))


# ------------------------------------------------------------------------------ collectives


def comm_op_cost(kind: str, in_bytes: float, out_bytes: float, precision: str) -> OpCost:
    """A collective's cost: 0 FLOPs, local bytes in + out, message size S for the links."""
    size = collective_bytes.message_bytes(kind, in_bytes, out_bytes)
    return OpCost(
        "communication", 0.0, float(in_bytes + out_bytes), precision, "formula", (kind, float(size))
    )


def collective_cost(name: str, args: Args) -> OpCost | None:
    """c10d collectives from their tensors (output and input positions in C10D_ARGS); other
    namespaces' all-reduces (vLLM, symmetric memory) from their first tensor, reduced in
    place or into a buffer of the same size."""
    kind = collective_bytes.kind_of(name)
    if not kind:
        return None
    if name.startswith("c10d::"):
        positions = collective_bytes.C10D_ARGS.get(name[len("c10d::") :])
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
    if kind != collective_bytes.ALL_REDUCE:
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
    kind = collective_bytes.kind_of(str(args.get("Collective name") or ""))
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
    kind = collective_bytes.kind_of(name)
    if not kind:
        return None
    a = Args(args.get("Input Dims"), args.get("Input type"))
    tensors = a.tensors()
    if not tensors:
        return None
    return (kind, float(sum(t.nbytes for t in tensors)), 0.0, 0, tensors[0].precision)


def fact_cost(kind: str, in_bytes: float, out_bytes: float, ranks: int, precision: str) -> OpCost:
    """A collective's cost from a fact whose output (or input) size may be missing: all-gather
    writes n × its input, reduce-scatter n times less than it reads, the others as much."""
    n = max(ranks, 1)
    if not out_bytes:
        out_bytes = (
            in_bytes * n
            if kind == collective_bytes.ALL_GATHER
            else (in_bytes / n if kind == collective_bytes.REDUCE_SCATTER else in_bytes)
        )
    if not in_bytes:
        in_bytes = (
            out_bytes / n
            if kind == collective_bytes.ALL_GATHER
            else (out_bytes * n if kind == collective_bytes.REDUCE_SCATTER else out_bytes)
        )
    return comm_op_cost(kind, in_bytes, out_bytes, precision)


def _count(value) -> int | None:
    if type(value) is int and 0 <= value < 2**53:
        return value
    if type(value) is float and value.is_integer() and 0 <= value < 2**53:
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
    if (
        q is None
        or k is None
        or v is None
        or not (len(q.shape) == len(k.shape) == len(v.shape) == 4)
    ):
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
    nbytes = (
        gb * 1e9 if gb is not None else (float(sum(t.nbytes for t in tensors)) if tensors else None)
    )
    if flop is not None and nbytes is not None:
        return OpCost("fusion", flop, nbytes, prec, "formula")
    if nbytes is not None:
        return OpCost("fusion", 0.0, nbytes, prec, "bytes")
    return None


def _number(value) -> float | None:
    if type(value) in (int, float) and math.isfinite(value) and 0 <= value < 1e30:
        return float(value)
    return None


# ------------------------------------------------------------------------------ more aten


def more_aten_cost(n: str, args: Args) -> OpCost | None:
    """aten families costs/torch/flops.py does not cover: the `_foreach_*` ops (the
    optimizers' multi_tensor_apply kernels), fills, the MSE loss, padding, embedding bags,
    grouped GEMMs, pooling (costs/torch/pooling.py), LSTMs and upsampling
    (costs/torch/layers.py)."""
    if n.startswith("_foreach_"):
        return foreach_cost(n[len("_foreach_") :].rstrip("_"), n.endswith("_"), args)
    if n.startswith("_fused_adam"):
        return fused_adam_cost(args)
    if n in ("fill_", "zero_", "fill", "zero", "ones_like", "zeros_like", "full_like"):
        x = args.tensor(0)
        if x is None:
            return None
        return OpCost("copy", 0.0, float(x.nbytes), x.precision, "formula")  # writes only
    if n in ("mse_loss", "mse_loss_backward"):
        return mse_cost(n, args)
    if n in ("pad", "constant_pad_nd"):
        return pad_cost(args)
    if n in ("embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"):
        return torch_sparse_ops.embedding_bag_cost(args)
    if n == "_grouped_mm":
        return torch_sparse_ops.grouped_mm_cost(args)
    if n in SCALED_MM_OPS:
        return scaled_mm_cost(n, args)
    if n in pooling.POOL_OPS:
        return pooling.pool_cost(n, args)
    if n == "lstm":
        return torch_layers.lstm_cost(args)
    if n == "mkldnn_rnn_layer":
        return torch_layers.mkldnn_layer_cost(args)
    if n.removesuffix("_backward") in torch_layers.UPSAMPLE_OPS:
        return torch_layers.upsample_cost(n, args)
    return None


def pad_cost(args: Args) -> OpCost | None:
    """pad / constant_pad_nd(x, [left, right, ...] from the last dim backwards, ...): a copy
    into the padded shape (0 FLOPs; x read, the padded tensor written)."""
    x, pads = args.tensor(0), args.value(1)
    if (
        x is None
        or not isinstance(pads, list)
        or len(pads) % 2
        or len(pads) // 2 > len(x.shape)
        or not all(type(p) is int for p in pads)
    ):
        return None
    shape = list(x.shape)
    for i in range(len(pads) // 2):
        shape[-1 - i] += pads[2 * i] + pads[2 * i + 1]
    if any(d < 0 for d in shape):
        return None
    out = Tensor(tuple(shape), x.precision)
    return OpCost("copy", 0.0, float(x.nbytes + out.nbytes), x.precision, "formula")


def _lists(args: Args) -> list:
    """The TensorList arguments, in order (their dtype is not recorded: the op's, else f32)."""
    out = []
    for i, t in enumerate(args.types):
        if t == "TensorList":
            parts = args.tensor_list(i)
            if parts is None:
                return []
            out.append(parts)
    return out


def foreach_cost(op: str, inplace: bool, args: Args) -> OpCost | None:
    """`_foreach_<op>(list, [list | scalar], ...)`: `op` over every tensor of the first list;
    FLOPs as the single-tensor op counts them (1 per element, addcmul/addcdiv/lerp 2, copies
    and zeroing 0, norms 1 per element read); bytes = every list read + the result written."""
    lists = _lists(args)
    if not lists or not lists[0]:
        return None
    first = lists[0]
    numel = sum(t.numel for t in first)
    out_bytes = float(sum(t.nbytes for t in first))
    read = float(sum(t.nbytes for parts in lists for t in parts))
    prec = first[0].precision
    if op in ("zero", "copy"):
        read = 0.0 if op == "zero" else read - out_bytes  # copy_(self, src): reads src
        return OpCost("copy", 0.0, read + out_bytes, prec, "formula")
    if op == "norm":
        return OpCost("reduction", float(numel), read + 4.0 * len(first), prec, "formula")
    if op in torch_flops.ELEMENTWISE_2:
        per = 2
    elif op in torch_flops.ELEMENTWISE_1:
        per = 1
    else:
        return None
    return OpCost("elementwise", float(per * numel), read + out_bytes, prec, "formula")


def fused_adam_cost(args: Args) -> OpCost | None:
    """`_fused_adam[w]_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, ...)`:
    reads the four lists, writes params and both moments; FLOPs not counted (source
    "bytes")."""
    lists = _lists(args)
    if len(lists) < 4 or not lists[0]:
        return None
    read = sum(t.nbytes for parts in lists[:4] for t in parts)
    written = sum(t.nbytes for parts in (lists[0], lists[2], lists[3]) for t in parts)
    return OpCost("elementwise", 0.0, float(read + written), lists[0][0].precision, "bytes")


def mse_cost(n: str, args: Args) -> OpCost | None:
    """mse_loss(input, target, reduction): subtract, square, then (mean/sum) reduce: 3 FLOPs
    per element (2 with reduction 'none'). mse_loss_backward(grad, input, target, reduction):
    subtract, scale, multiply by the gradient: 3 per element, a gradient of the input's
    shape written."""
    back = n.endswith("backward")
    g = args.tensor(0) if back else None
    x, y = (args.tensor(1), args.tensor(2)) if back else (args.tensor(0), args.tensor(1))
    if x is None or y is None or (back and g is None):
        return None
    reduction = args.value(3 if back else 2, 1)
    numel = x.numel
    if back and g is not None:  # (a backward without its gradient returned above)
        out = Tensor(x.shape, x.precision)
        flops, inputs = 3 * numel, [g, x, y]
    else:
        out = Tensor(x.shape if reduction == 0 else (), x.precision)
        flops, inputs = (2 if reduction == 0 else 3) * numel, [x, y]
    nbytes = sum(t.nbytes for t in inputs) + out.nbytes
    return OpCost(
        "reduction" if not back else "elementwise",
        float(flops),
        float(nbytes),
        x.precision,
        "formula",
    )


# ------------------------------------------------------------------------------ vLLM


def vllm_cost(name: str, args: Args) -> OpCost | None:
    """vLLM's custom ops whose work follows from their recorded tensors."""
    if name == "_C::rms_norm":  # rms_norm(out, input, weight, eps)
        out, x, w = args.tensor(0), args.tensor(1), args.tensor(2)
        if out is None or x is None or w is None:
            return None
        flops = torch_flops.norm_flops_per_element("rms", True, True) * x.numel
        return OpCost(
            "normalization",
            float(flops),
            float(x.nbytes + w.nbytes + out.nbytes),
            x.precision,
            "formula",
        )
    if name == "_C::fused_add_rms_norm":  # (input, residual, weight, eps), both in place
        x, r, w = args.tensor(0), args.tensor(1), args.tensor(2)
        if x is None or r is None or w is None:
            return None
        flops = (1 + torch_flops.norm_flops_per_element("rms", True, True)) * x.numel
        return OpCost(
            "normalization",
            float(flops),
            float(2 * (x.nbytes + r.nbytes) + w.nbytes),
            x.precision,
            "formula",
        )
    if name == "vllm::unified_kv_cache_update":  # (key, value, layer): k, v into the cache
        k, v = args.tensor(0), args.tensor(1)
        if k is None or v is None:
            return None
        return OpCost("copy", 0.0, float(2 * (k.nbytes + v.nbytes)), k.precision, "formula")
    if name == "_C::rotary_embedding":  # (positions, query, key, head_size, cache, is_neox)
        return serving_ops.rotary_cost(args)
    if name in ("_C::static_scaled_fp8_quant", "_C::dynamic_scaled_fp8_quant"):
        out, x = args.tensor(0), args.tensor(1)  # (out, input, scale): one multiply each
        if out is None or x is None:
            return None
        scale = args.tensor(2)
        nbytes = x.nbytes + out.nbytes + (scale.nbytes if scale is not None else 0)
        return OpCost("elementwise", float(x.numel), float(nbytes), x.precision, "formula")
    return None
