"""Which of a device's compute ceilings an op belongs under: tensor-core roofs for dots and
convolutions, vector roofs for the rest, or exactly the unit a kernel name says ran.

`ceiling_precision(dtype, is_matmul, device)` places one op (an f32 dot under TF32 where the
device has it, bf16 under the bf16 tensor roof, ...); `apply_ceilings` places an op table.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.devices.precision import (
    KERNEL_PREFIX,
    normalize_precision,
    plain_precision,
    split_kernel_type,
)
from tb_roofline.devices.spec import DeviceInfo

_MATMUL_CHAINS = {
    "fp4": ("fp4", "fp6", "fp8", "fp16", "bf16"),  # no fp4 units: converted up
    "fp6": ("fp6", "fp8", "fp16", "bf16"),
    "fp64": ("fp64_tc", "fp64"),
    "fp32": ("tf32", "fp32_tc", "fp32"),
    "tf32": ("tf32", "fp32_tc", "fp32"),
    "bf16": ("bf16", "fp32_tc", "fp32"),  # no bf16 units (V100, T4): XLA computes in f32
    "fp16": ("fp16", "fp32_tc", "fp32"),
    "fp8": ("fp8", "fp16", "bf16"),  # no fp8 units: converted to 16-bit
    "int8": ("int8",),
}
_VECTOR_CHAINS = {
    "fp64": ("fp64",),
    "fp32": ("fp32",),
    "tf32": ("fp32",),
    # Elementwise 16-bit math runs on the vector units (packed, up to 2x the fp32 rate on some
    # parts); the fp32 roof is the closest ceiling the tables carry.
    "bf16": ("fp32",),
    "fp16": ("fp32",),
    "fp8": ("fp32",),
    "int8": ("fp32",),
    "fp6": ("fp32",),
    "fp4": ("fp32",),
}
# What a kernel name says ran (readers set `dtype` to "kernel:<this>"): the exact unit, so f32
# inputs on TF32 tensor cores go under the TF32 roof and SIMT sgemm under the FP32 one.
_KERNEL_CHAINS = {
    "tf32": ("tf32", "fp32_tc", "fp32"),
    "fp32": ("fp32",),
    "fp32_tc": ("fp32_tc", "fp32"),
    "fp16": ("fp16", "fp32_tc", "fp32"),
    "bf16": ("bf16", "fp16", "fp32_tc", "fp32"),
    "fp8": ("fp8", "fp16", "bf16"),
    "int8": ("int8",),
    "fp64": ("fp64",),
    "fp6": ("fp6", "fp8", "fp16", "bf16"),
    "fp4": ("fp4", "fp6", "fp8", "fp16", "bf16"),
    "fp64_tc": ("fp64_tc", "fp64"),
}


def ceiling_precision(
    dtype: str, is_matmul: bool, device: DeviceInfo, allow_tf32: bool = True
) -> str:
    """The precision of the ceiling an op belongs under on this device, '' for the default.

    is_matmul: dots and convolutions (tensor / matrix cores); everything else uses the vector
    units. allow_tf32: f32 dots whose kernels are not known may run on TF32 tensor cores (XLA's
    default on Ampere and later; PyTorch's only with `allow_tf32`). A `kernel:` dtype names the
    unit that ran and is taken as it is.
    """
    if dtype.startswith(KERNEL_PREFIX):
        chain = _KERNEL_CHAINS.get(split_kernel_type(dtype)[0], ())
    else:
        p = normalize_precision(dtype)
        if not p:
            return ""
        chain = (_MATMUL_CHAINS if is_matmul else _VECTOR_CHAINS).get(p, ())
        if not allow_tf32:
            chain = tuple(c for c in chain if c != "tf32")
    have = {c.precision for c in device.compute if c.gflops > 0}
    return next((c for c in chain if c in have), "")


_MATMUL_WORDS = ("conv", "dot", "matmul", "gemm", "attention", "einsum", "linear")
# Data precisions a vector-unit op is labelled by (its roof is the vector ceiling they run on).
_FLOAT_DATA = frozenset({"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4"})


def is_matmul_category(category: str) -> bool:
    """Dots, convolutions and attention: work for the tensor / matrix cores."""
    low = str(category).lower()
    return any(w in low for w in _MATMUL_WORDS)


def roof_precision(precision: str, category: str, dtype: str, device: DeviceInfo) -> str:
    """The ceiling whose peak an op of this precision key (apply_ceilings'), category and
    `dtype` key is judged under: its precision for dots and convolutions and for a unit its
    kernel names (both already ceilings); for the other ops, the vector units' ceiling of
    their data (bf16 elementwise math runs on the CUDA cores in fp32: the fp32 roof), or the
    precision itself when the device has none."""
    if is_matmul_category(category) or str(dtype).startswith(KERNEL_PREFIX):
        return precision
    if normalize_precision(precision) not in _FLOAT_DATA:  # integer work: records.compute_roof
        return precision
    return ceiling_precision(precision, False, device) or precision


def roof_precisions(keys: dict, device: DeviceInfo) -> np.ndarray:
    """`roof_precision` of each key of an op table (its `precision`, `category`, `dtype`)."""
    triples = list(
        zip(keys["precision"].tolist(), keys["category"].tolist(), keys["dtype"].tolist())
    )
    names = {t: roof_precision(str(t[0]), str(t[1]), str(t[2]), device) for t in set(triples)}
    out = np.empty(len(triples), dtype=object)
    out[:] = [names[t] for t in triples]
    return out


def _placed(dtype: str, matmul: bool, device: DeviceInfo, allow_tf32: bool) -> str:
    """An op's precision key: the ceiling of a dot or convolution (or of the unit its kernel
    names); for another op on floating-point data, that data's precision (the label says what
    it moved and computed; roof_precision gives the vector roof it is judged under)."""
    ceiling = ceiling_precision(dtype, matmul, device, allow_tf32)
    data = normalize_precision(dtype) if not dtype.startswith(KERNEL_PREFIX) else ""
    if ceiling and not matmul and data in _FLOAT_DATA:
        return data
    return ceiling or plain_precision(dtype)


def apply_ceilings(table, device: DeviceInfo, allow_tf32: bool = True) -> None:
    """Set each op's `precision` (a key column of the op table): for dots and convolutions the
    ceiling they belong under on this device (tensor-core roofs, or exactly the unit its kernel
    names); for the other ops their data's precision, judged under the vector roof
    `roof_precision` names; ops whose precision has no ceiling of its own keep their data type
    and fall under the default roof. The data type itself stays in `dtype`, so a later device
    (a device file) can place the ops again."""
    keys = table.keys
    if not len(keys["precision"]):
        return
    dtypes = keys["dtype"]
    unset = np.flatnonzero(dtypes == "")  # first call: the reader's precision is the data type
    dtypes[unset] = keys["precision"][unset]
    if not device.compute:
        keys["precision"] = np.array([plain_precision(d) for d in dtypes.tolist()], dtype=object)
        return
    cache: dict = {}
    out = []
    for dtype, category in zip(dtypes.tolist(), keys["category"].tolist()):
        key = (dtype, category)
        if key not in cache:
            cache[key] = _placed(dtype, is_matmul_category(category), device, allow_tf32)
        out.append(cache[key])
    out_arr = np.empty(len(out), dtype=object)
    out_arr[:] = out
    keys["precision"] = out_arr
