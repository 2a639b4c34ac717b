"""Element sizes and precision names have one home each: `costs/hlo/shapes.py` ELEMENT_BYTES /
`element_bytes` and `devices/precision.py` `plain_precision`. The readers' dtype tables take their
sizes from it; each size is checked against numpy's own item size (an independent reference)."""

from __future__ import annotations

import numpy as np
import pytest

from tb_roofline.costs.hlo import shapes
from tb_roofline.costs.hlo.shapes import ELEMENT_BYTES, element_bytes
from tb_roofline.costs.torch import args as torch_args
from tb_roofline.costs.torch import custom_ops as torch_custom_ops
from tb_roofline.devices.precision import plain_precision

# Precision name -> the numpy dtype of the same storage (numpy has no bf16 / fp8: their sizes
# are the bits their names give).
NUMPY = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "c64": np.complex64,
    "c128": np.complex128,
    "s64": np.int64,
    "s32": np.int32,
    "s16": np.int16,
    "s8": np.int8,
    "u64": np.uint64,
    "u32": np.uint32,
    "u16": np.uint16,
    "u8": np.uint8,
    "pred": np.bool_,
}
BITS = {"bf16": 16, "f8e4m3": 8, "f8e5m2": 8, "f8e8m0": 8, "c32": 32, "f4e2m1": 8}  # x2 packed


def _reference(precision: str) -> int:
    if precision in NUMPY:
        return np.dtype(NUMPY[precision]).itemsize
    return BITS[precision] // 8


@pytest.mark.parametrize("table", [torch_args.DTYPES, torch_custom_ops.SCALAR_TYPES])
def test_reader_tables_take_the_one_size(table):
    for spelling, (precision, size) in table.items():
        assert size == ELEMENT_BYTES[precision] == _reference(precision), spelling


def test_every_torch_precision_has_a_whole_byte_size():
    """The size tables keep only whole-byte precisions: none may be left out of them."""
    assert set(torch_args.SIZES) == {p for p, _ in torch_args.DTYPES.values()}
    assert None not in {size for _, size in torch_args.DTYPES.values()}
    assert len(torch_custom_ops.SCALAR_TYPES) == len(torch_custom_ops._SCALAR_PRECISIONS)


def test_hlo_type_widths_and_the_names_the_model_reads():
    for t, name in shapes.TYPE_NAMES.items():
        if name in NUMPY:
            assert shapes.BYTE_WIDTH[t] == ELEMENT_BYTES[name] == _reference(name), name
    for spelling, size in (
        ("kernel:tf32", 4),
        ("c10::Half", 2),
        ("at::BFloat16", 2),
        ("float", 4),
        ("double", 8),
        ("long int", 8),
        ("bool", 1),
        ("fp8", 1),
        ("int8", 1),
        ("f8e4m3fn", 1),
        ("bf16", 2),
        ("complexdouble", 16),
    ):
        assert element_bytes(spelling) == size, spelling
    # unknown is None, never a guess: sub-byte types have no whole-byte element
    for spelling in ("s4", "u4", "f4e2m1fn", "", None, "mixed", "opaque"):
        assert element_bytes(spelling) is None, spelling


def test_the_source_prefix_is_stripped_in_one_place():
    assert plain_precision("kernel:tf32") == "tf32"
    assert plain_precision("bf16") == "bf16"
    assert plain_precision("c10::Half") == "c10::Half"  # a dtype spelling, not a prefix
