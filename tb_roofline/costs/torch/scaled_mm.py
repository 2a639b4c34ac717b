"""Costs of PyTorch's scaled (fp8 / fp4) GEMMs from their recorded arguments
(docs/pytorch_traces.md, "Beyond aten"): `aten::_scaled_mm`, `_scaled_grouped_mm` and their
`_v2` overloads, whose schemas (torch 2.14) are

    _scaled_mm(self, mat2, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum)
    _scaled_grouped_mm(self, mat2, scale_a, scale_b, offs?, bias?, scale_result?, out_dtype?,
                       use_fast_accum)
    _scaled_mm_v2(self, mat2, Tensor[] scale_a, int[] recipe_a, int[] swizzle_a,
                  Tensor[] scale_b, int[] recipe_b, int[] swizzle_b, bias?, out_dtype?,
                  int[] contraction_dim, use_fast_accum)
    _scaled_grouped_mm_v2(self, mat2, scale_a[], recipe_a, swizzle_a, scale_b[], recipe_b,
                          swizzle_b, offs?, bias?, out_dtype?, contraction_dim, use_fast_accum)

FLOPs 2·M·N·K (FlopCounterMode's `_scaled_mm` count); bytes: both matrices at their element
size (1 B for fp8), the scales, offsets, bias and scale_result, the output in out_dtype.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from tb_roofline.costs.torch.args import SCALAR_TYPE_CODES, Args, OpCost, Tensor, _cost


class _Spec(NamedTuple):
    tensors: tuple  # tensors read besides the two matrices (dtype recorded)
    out_dtype: int  # where the output's ScalarType code is
    scale_lists: tuple = ()  # (TensorList index, its recipe list index) of a _v2 overload
    contraction: int | None = None  # the _v2 overloads' contraction_dim ([] = the usual K)


SCALED_MM_OPS = {
    "_scaled_mm": _Spec((2, 3, 4, 5), 6),
    "_scaled_grouped_mm": _Spec((2, 3, 4, 5, 6), 7),
    "_scaled_mm_v2": _Spec((8,), 9, ((2, 3), (5, 6)), 10),
    "_scaled_grouped_mm_v2": _Spec((8, 9), 10, ((2, 3), (5, 6)), 11),
}
# A _v2 scale list's element type is not recorded (a TensorList); its recipe says it:
# at::blas::ScalingType (ATen/BlasBackend.h): TensorWise and RowWise fp32 scales,
# BlockWise1x16 fp8_e4m3fn, BlockWise1x32 fp8_e8m0fnu, BlockWise1x128 and 128x128 fp32.
RECIPE_SCALE_BYTES = {0: 4, 1: 4, 2: 1, 3: 1, 4: 4, 5: 4}
# Float4_e2m1fn_x2 packs two fp4 values in each recorded element: the contraction is twice
# the recorded K (its bytes are the recorded elements', one byte each).
_PACKED_VALUES = {"f4e2m1": 2}


def scaled_out_precision(spec: _Spec, args: Args, a: Tensor) -> str | None:
    """The output's precision: the recorded `out_dtype` code, else (recorded as None) the
    first matrix's type, the op's default; None for a code the table does not know and when
    the trace records no scalar values (`Concrete Inputs`): the output's size is unknown."""
    if spec.out_dtype >= len(args.concrete):
        return None
    code = args.value(spec.out_dtype)
    if code is None:
        return a.precision
    return SCALAR_TYPE_CODES.get(code) if type(code) is int else None


def scale_list_bytes(args: Args, spec: _Spec) -> int | None:
    """Bytes of a _v2 overload's scale lists: each tensor's elements at its recipe's scale
    size; None when a list or its recipes are not recorded or do not pair up."""
    total = 0
    for tensors, recipes in spec.scale_lists:
        shapes = args.tensor_list(tensors)
        kinds = args.value(recipes)
        if shapes is None or not isinstance(kinds, list) or len(kinds) != len(shapes):
            return None
        sizes = [RECIPE_SCALE_BYTES.get(k) if type(k) is int else None for k in kinds]
        if any(s is None for s in sizes):
            return None
        total += sum(math.prod(t.shape) * int(s or 0) for t, s in zip(shapes, sizes))
    return total


def scaled_mm_cost(name: str, args: Args) -> OpCost | None:
    """One call of a scaled GEMM (module docstring); None when a shape, the output type, a
    _v2 scale list or a non-default contraction_dim leaves it unknown. The precision is the
    matrices' (the fp8 tensor-core roof for fp8)."""
    spec = SCALED_MM_OPS[name]
    a, b = args.tensor(0), args.tensor(1)
    if a is None or b is None:
        return None
    if spec.contraction is not None and args.value(spec.contraction) not in (None, []):
        return None
    shape = _scaled_gemm_shape(name.removesuffix("_v2"), a.shape, b.shape)
    out_precision = scaled_out_precision(spec, args, a)
    scales = scale_list_bytes(args, spec)
    if shape is None or out_precision is None or scales is None:
        return None
    m, k, n, out_shape = shape
    k *= _PACKED_VALUES.get(a.precision, 1)
    extra = [t for t in map(args.tensor, spec.tensors) if t is not None]
    cost = _cost("matmul", 2 * m * k * n, [a, b, *extra], Tensor(out_shape, out_precision))
    return cost._replace(bytes=cost.bytes + scales)


def _scaled_gemm_shape(name: str, a: tuple, b: tuple):
    """(rows M summed over groups, K, N, output shape) of a [M, K] @ b [K, N], or of a grouped
    GEMM: a [M, K] over b [G, K, N] (each row meets its group's matrix), a [G, M, K] @
    b [G, K, N], or a [M, ΣK] @ b [ΣK, N] split along K into G outputs (G unknown from shapes
    alone: the FLOPs are the same, the output [G, M, N] is not, so that form is not costed)."""
    if name == "_scaled_mm" and len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        return a[0], a[1], b[1], (a[0], b[1])
    if name != "_scaled_grouped_mm" or len(b) != 3:
        return None
    g, k, n = b
    if len(a) == 2 and a[1] == k:
        return a[0], k, n, (a[0], n)
    if len(a) == 3 and a[0] == g and a[2] == k:
        return g * a[1], k, n, (g, a[1], n)
    return None
