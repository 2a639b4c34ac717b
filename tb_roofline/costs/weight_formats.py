"""Bytes per weight of a quantized GEMM from its kernel's name (docs/serving.md, "Weight bytes
from kernel names"): what each weight element costs in HBM traffic when a kernel reads weights
stored in a block-scaled or 8-bit format, scales included.

- MXFP4 (OCP microscaling): 4-bit E2M1 values, one 8-bit E8M0 scale per 32: 0.5 + 1/32 B.
  Names: Triton `_matmul_ogs_…mxfp4…`, TRT-LLM `bmm_…MxE2m1…` (the weight operand MxE2m1).
- NVFP4: 4-bit E2M1 values, one FP8 E4M3 scale per 16: 0.5 + 1/16 B (the per-tensor FP32
  scale is negligible).
- FP8 (E4M3 / E5M2, per-tensor or per-row scales: negligible per weight): 1 B. Names: `fp8`,
  `e4m3`, `e5m2`, and cuBLAS `nvjet_…qq…` (two fp8 operands: on the H200 decode trace every
  `nvjet_sm90_qqtst_*` kernel was launched by an `aten::_scaled_mm` of float8_e4m3fn tensors,
  every bf16 `aten::mm` ran `nvjet_sm90_tst_*`; tests/costs/test_weight_formats.py).

None when the name does not say (a bf16 or unknown GEMM: its recorded tensors decide).
"""

from __future__ import annotations

import functools
import re

MXFP4_BYTES = 0.5 + 1 / 32
NVFP4_BYTES = 0.5 + 1 / 16
FP8_BYTES = 1.0

# cuBLAS's nvjet GEMMs name two fp8 operands `qq` (readers/kernel_names.py uses it too).
NVJET_FP8 = r"^nvjet_(sm\d+_)?qq"
# First match wins: 4-bit weight formats before fp8 (an MXFP4 GEMM may take fp8 activations,
# `bmm_MxE4m3_MxE2m1…`).
_FORMATS = (
    (re.compile(r"mxfp4|mxe2m1"), MXFP4_BYTES),
    (re.compile(r"nvfp4"), NVFP4_BYTES),
    (re.compile(r"fp8|e4m3|e5m2|" + NVJET_FP8), FP8_BYTES),
)


@functools.lru_cache(maxsize=4096)
def weight_bytes_per_element(kernel_name: str) -> float | None:
    """HBM bytes per weight element a GEMM kernel of this name reads, or None when its name
    names no quantized weight format."""
    low = str(kernel_name).lower()
    return next((b for pattern, b in _FORMATS if pattern.search(low)), None)
