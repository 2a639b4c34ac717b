"""Geometry rules: convolution FLOPs over the valid (kernel, output) positions, and
transposes that are only a relabelling of dimensions."""

from __future__ import annotations

import math

from tb_roofline.costs.hlo.cost_basics import FMA, MAX_WINDOW_POSITIONS
from tb_roofline.costs.hlo.module import Instruction
from tb_roofline.costs.hlo.shapes import Shape


def convolution_flops(ins: Instruction, out: Shape) -> int:
    """2 × (C_in/groups) × C_out × (N/batch groups) × Π valid (kernel, output) positions."""
    p = ins.proto
    dn = p.convolution_dimension_numbers
    lhs, rhs = ins.operands[0].shape, ins.operands[1].shape
    fgc = p.feature_group_count or 1
    bgc = p.batch_group_count or 1
    cin = lhs.dims[dn.input_feature_dimension]
    cout = out.dims[dn.output_feature_dimension]
    batch = lhs.dims[dn.input_batch_dimension]
    positions = 1
    wdims = p.window.dimensions
    for i, (ids, ods) in enumerate(zip(dn.input_spatial_dimensions, dn.output_spatial_dimensions)):
        in_size, out_size = lhs.dims[ids], out.dims[ods]
        if i < len(wdims):
            w = wdims[i]
            k_size = w.size or 1
            stride, lo = w.stride or 1, w.padding_low
            wd, bd = w.window_dilation or 1, w.base_dilation or 1
        else:
            k_size = (
                rhs.dims[dn.kernel_spatial_dimensions[i]]
                if i < len(dn.kernel_spatial_dimensions)
                else 1
            )
            stride, lo, wd, bd = 1, 0, 1, 1
        positions *= valid_positions(in_size, out_size, k_size, stride, lo, wd, bd)
    return FMA * (cin // fgc) * cout * (batch // bgc) * positions


def valid_positions(in_size, out_size, k_size, stride, pad_lo, wdil, bdil) -> int:
    """(kernel index, output index) pairs that land on a real input element: output o and
    kernel tap k read the base-dilated input at u = o·stride + k·wdil − pad_lo, a real element
    when 0 <= u <= (in_size − 1)·bdil and bdil divides u. Counted per tap in O(1), over the
    taps that can land at all (a corrupt window size cannot make this loop for ever)."""
    if in_size <= 0 or out_size <= 0 or k_size <= 0:
        return 0
    if stride <= 0 or wdil <= 0 or bdil <= 0:
        raise ValueError("non-positive stride or dilation")
    hi_u = (in_size - 1) * bdil
    k_lo = max(0, -(((out_size - 1) * stride - pad_lo) // wdil))  # ceil((pad_lo − …) / wdil)
    k_hi = min(k_size - 1, (hi_u + pad_lo) // wdil)
    if k_hi - k_lo >= MAX_WINDOW_POSITIONS:
        raise ValueError("convolution window too large")
    g = math.gcd(stride, bdil)
    period = bdil // g
    step_inv = pow(stride // g, -1, period) if period > 1 else 0
    total = 0
    for k in range(k_lo, k_hi + 1):
        base = k * wdil - pad_lo
        o_lo = max(0, -(base // stride))  # ceil(−base / stride)
        o_hi = min(out_size - 1, (hi_u - base) // stride)
        if o_lo > o_hi:
            continue
        if period == 1:
            if base % g == 0:  # g == bdil here: every o lands on an element, or none does
                total += o_hi - o_lo + 1
            continue
        if base % g:
            continue
        r = (-(base // g)) * step_inv % period  # o ≡ r (mod period) lands on an element
        first = o_lo + (r - o_lo) % period
        if first <= o_hi:
            total += (o_hi - first) // period + 1
    return total


def transpose_is_bitcast(ins: Instruction) -> bool:
    """A transpose that only relabels dimensions: same physical order in memory."""
    if not ins.operands:
        return False
    a, b = ins.operands[0].shape, ins.shape
    if (
        not (a.has_layout and b.has_layout)
        or len(a.m2m) != len(a.dims)
        or len(b.m2m) != len(b.dims)
    ):
        return False
    perm = list(ins.proto.dimensions)
    try:
        mapped = [perm[d] for d in b.m2m]
    except IndexError:
        return False
    return mapped == list(a.m2m)
