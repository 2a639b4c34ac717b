"""THE precision vocabulary: the names a compute ceiling or an op's work can have, and the one
function (`normalize_precision`) that maps every spelling the readers and cost code meet onto
them.

Spellings come from HLO (`f32`, `s8`, `f8e4m3fn`), PyTorch's traces and the cost code's own
names (`float`, `c10::Half`, `f8e4m3`, `s64`, `c64`), kernel names (`kernel:tf32`) and data
sheets (`fp32`, `fp64_tc`). A name that is none of them normalises to "" (unknown), never to a
guess. Device tables and files key their figures by `CEILING_PRECISIONS`; the op side adds the
integer widths and `pred`, which have no floating-point roof.
"""

from __future__ import annotations

import re

# Ceilings a device can have (the data-sheet tables' keys, devices/datasheet_entry.py).
# `fp64_tc`: FP64 on tensor / matrix cores; `fp32_tc`: FP32 on AMD matrix cores.
CEILING_PRECISIONS = (
    "fp64",
    "fp64_tc",
    "fp32",
    "fp32_tc",
    "tf32",
    "bf16",
    "fp16",
    "fp8",
    "int8",
    "fp6",
    "fp4",
)
INTEGER_PRECISIONS = ("int1", "int2", "int4", "int8", "int16", "int32", "int64")
# Every name `normalize_precision` can return besides "".
PRECISIONS = CEILING_PRECISIONS + tuple(p for p in INTEGER_PRECISIONS if p != "int8") + ("pred",)

_ALIASES = {
    **{p: p for p in PRECISIONS},
    "f64": "fp64",
    "double": "fp64",
    "float64": "fp64",
    "c128": "fp64",  # complex: two reals of the component precision
    "complexdouble": "fp64",
    "f32": "fp32",
    "float": "fp32",
    "float32": "fp32",
    "c64": "fp32",
    "complexfloat": "fp32",
    "bfloat16": "bf16",
    "f16": "fp16",
    "half": "fp16",
    "float16": "fp16",
    "c32": "fp16",
    "uint8": "int8",
    "signed char": "int8",
    "unsigned char": "int8",
    "char": "int8",
    "byte": "int8",
    "short": "int16",
    "short int": "int16",
    "unsigned short": "int16",
    "int": "int32",
    "unsigned int": "int32",
    "long": "int64",
    "long int": "int64",
    "long long": "int64",
    "long long int": "int64",
    "unsigned long": "int64",
    "unsigned long long": "int64",
    "bool": "pred",
    "boolean": "pred",
}
# Families named by prefix: HLO's and PyTorch's many fp8 / fp6 / fp4 formats (f8e4m3fn,
# float8_e5m2fnuz, f8e8m0fnu, f4e2m1fn, float4_e2m1fn_x2) and signed / unsigned integers of
# any width (s32, u16, int64_t).
_FAMILIES = (
    (re.compile(r"^(f8e|float8_)"), "fp8"),
    (re.compile(r"^(f6e|float6_)"), "fp6"),
    (re.compile(r"^(f4e|float4_)"), "fp4"),
)
_INTEGER = re.compile(r"^(?:s|u|int|uint)(1|2|4|8|16|32|64)(?:_t)?$")


def normalize_precision(name: str) -> str:
    """One spelling per precision (`PRECISIONS`: 'fp32', 'bf16', 'int32', ...) of any name the
    readers, the cost code or a data sheet use; '' when unknown or not given. A C++ namespace
    (`c10::Half`, `at::BFloat16`) and a `kernel:` prefix are dropped first."""
    if not name:
        return ""
    key = plain_precision(str(name)).strip().lower().rsplit("::", 1)[-1]
    if key in _ALIASES:
        return _ALIASES[key]
    for pattern, precision in _FAMILIES:
        if pattern.match(key):
            return precision
    m = _INTEGER.match(key)
    return f"int{m.group(1)}" if m else ""


# A precision named by the GEMM kernel that ran ("kernel:tf32"), not by the tensors' dtype
# (readers/common.py sets it, devices/precision_ceilings.py picks the ceiling of it).
KERNEL_PREFIX = "kernel:"
# A kernel-named unit may carry the op's recorded input type after it: "kernel:tf32/f32" (f32
# tensors on TF32 tensor cores), so the roof follows the kernel and the label the inputs.
INPUT_SEPARATOR = "/"


_SIXTEEN_BIT = {
    (prefix + unit, inputs): prefix + recorded
    for prefix in ("", KERNEL_PREFIX)
    for unit, inputs, recorded in (("fp16", "bf16", "bf16"), ("bf16", "f16", "fp16"))
}


def with_input_type(unit: str, input_type: str) -> str:
    """A kernel-named unit with the input type recorded beside it (either may be ""). Between
    the two 16-bit float formats the recorded inputs decide: a GEMM or attention kernel computes
    in the format its operands hold, and a name's `f16` also matches bf16 spellings."""
    if not unit:
        return input_type
    unit = _SIXTEEN_BIT.get((unit, input_type), unit)
    return unit + INPUT_SEPARATOR + input_type if input_type else unit


def split_kernel_type(dtype: str) -> tuple[str, str]:
    """(kernel-named unit or "", recorded input type or "") of a reader's `dtype` key."""
    d = str(dtype or "")
    if not d.startswith(KERNEL_PREFIX):
        return "", d
    unit, _, inputs = d[len(KERNEL_PREFIX) :].partition(INPUT_SEPARATOR)
    return unit, inputs


def plain_precision(name: str) -> str:
    """A precision without its source prefix and recorded input type ("kernel:tf32" and
    "kernel:tf32/f32" -> "tf32"): THE one place the prefix is stripped."""
    return split_kernel_type(name)[0] if name.startswith(KERNEL_PREFIX) else name
