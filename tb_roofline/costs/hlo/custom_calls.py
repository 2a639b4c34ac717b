"""Custom calls: cuBLAS/cuBLASLt/hipBLASLt GEMMs and cuDNN/MIOpen convolutions cost as a dot /
convolution; fused attention (`attention.py`); others take the `cost_estimate_json` of their
backend config, else count 0 and are reported."""

from __future__ import annotations

import json
import re

from tb_roofline.costs.hlo.attention import attention_bytes, attention_of, is_attention_target
from tb_roofline.costs.hlo.conv_geometry import convolution_flops
from tb_roofline.costs.hlo.cost_basics import (
    FMA,
    Cost,
    HloError,
    dot_precision,
    first_array,
    in_precision,
    out_precision,
    prod,
)
from tb_roofline.costs.hlo.module import Instruction
from tb_roofline.costs.hlo.shapes import byte_size, leaf_bytes

COST_ESTIMATE_FLOPS = re.compile(rb'flops\\*["\']?\s*[:=]\s*\\*["\']?(\d+)')
COST_ESTIMATE_BYTES = re.compile(rb'bytes_accessed\\*["\']?\s*[:=]\s*\\*["\']?(\d+)')


def is_gemm_target(target: str) -> bool:
    """cuBLAS / cuBLASLt / hipBLASLt matmul custom calls (legacy and current names)."""
    t = target.lower()
    return t.startswith(("__cublas$", "__hipblas")) and ("gemm" in t or "matmul" in t)


def is_conv_target(target: str) -> bool:
    t = target.lower()
    return t.startswith(("__cudnn$conv", "__miopen$conv"))


def gemm_contracting(ins: Instruction) -> tuple[int, str]:
    """(contracted size, precision) of a gemm custom call from its GemmBackendConfig JSON."""
    precision = in_precision(ins)
    try:
        cfg = json.loads(bytes(ins.proto.backend_config) or b"{}")
    except ValueError:
        cfg = {}
    gemm = cfg.get("gemm_backend_config", cfg) if isinstance(cfg, dict) else {}
    dims = (gemm.get("dot_dimension_numbers") or {}).get("lhs_contracting_dimensions")
    lhs = ins.operands[0].shape if ins.operands else None
    if dims is None or lhs is None:
        k = lhs.dims[-1] if lhs is not None and lhs.dims else 1
    else:
        k = prod(lhs.dims[int(d)] for d in dims)
    alg = (gemm.get("precision_config") or {}).get("algorithm", "ALG_UNSET")
    names = {
        "ALG_DOT_TF32_TF32_F32": "tf32",
        "ALG_DOT_TF32_TF32_F32_X3": "tf32",
        "ALG_DOT_BF16_BF16_F32": "bf16",
        "ALG_DOT_BF16_BF16_F32_X3": "bf16",
        "ALG_DOT_BF16_BF16_F32_X6": "bf16",
        "ALG_DOT_BF16_BF16_F32_X9": "bf16",
        "ALG_DOT_F16_F16_F32": "f16",
        "ALG_DOT_ANY_F8_ANY_F8_F32": "fp8",
        "ALG_DOT_ANY_F8_ANY_F8_F32_FAST_ACCUM": "fp8",
    }
    return k, names.get(alg, precision)


def custom_call_cost(ins: Instruction, xla_compatible: bool, unknown, where) -> Cost:
    """One custom call's cost. `unknown` tallies targets without a rule; `where(ins)` names the
    instruction in errors. `xla_compatible`: −1 FLOPs and bytes, as XLA's PJRT cost analysis
    reports every custom call."""
    target = ins.proto.custom_call_target
    if xla_compatible:
        return Cost(-1.0, 0.0, -1.0, 0.0, out_precision(ins), "custom-call")
    result = first_array(ins.shape)
    operands = float(sum(byte_size(o.shape) for o in ins.operands))
    if is_gemm_target(target):
        k, precision = gemm_contracting(ins)
        flops = float(FMA * result.elements() * k)
        return Cost(flops, 0.0, operands, float(byte_size(result)), precision, "dot")
    if is_conv_target(target):
        if len(ins.operands) < 2:
            raise HloError(
                f"{where(ins)}: a convolution needs 2 operands, it has {len(ins.operands)}"
            )
        flops = float(convolution_flops(ins, result))
        return Cost(
            flops, 0.0, operands, float(byte_size(result)), dot_precision(ins), "convolution"
        )
    if is_attention_target(target):
        att = attention_of(ins)
        if att is not None:
            read, written = attention_bytes(ins)
            return Cost(att.flops, 0.0, read, written, in_precision(ins), "attention")
    raw = bytes(ins.proto.backend_config)
    if b"cost_estimate_json" in raw:
        f = COST_ESTIMATE_FLOPS.search(raw)
        b = COST_ESTIMATE_BYTES.search(raw)
        c = Cost(
            float(f.group(1)) if f else 0.0,
            0.0,
            operands,
            float(leaf_bytes(ins.shape)),
            out_precision(ins),
            "custom-call",
        )
        if b:
            c.read, c.written, c.bytes = float(b.group(1)), 0.0, float(b.group(1))
        return c
    unknown[f"custom-call {target}"] += 1
    return Cost(0.0, 0.0, operands, float(leaf_bytes(ins.shape)), out_precision(ins), "custom-call")
