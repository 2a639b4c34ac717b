"""One precision vocabulary (`devices/precision.py`): every spelling the readers and the cost code
emit normalises to a known precision, the hand-written one below; the device tables key their
figures by the vocabulary's ceiling names; and the two places that place an op under a ceiling
(`DeviceInfo.peak_for` and `precision_ceilings.ceiling_precision`) agree on every spelling."""

from __future__ import annotations

import pytest

from tb_roofline.costs.hlo import cost_basics, shapes
from tb_roofline.costs.torch import args, custom_ops, flops
from tb_roofline.devices import datasheets, gpu_arch_rates
from tb_roofline.devices.precision import (
    CEILING_PRECISIONS,
    PRECISIONS,
    normalize_precision,
)
from tb_roofline.devices.precision_ceilings import ceiling_precision
from tb_roofline.devices.spec import ComputePeak, DeviceInfo
from tb_roofline.model.records.records import is_integer_precision
from tb_roofline.readers import kernel_names
from tb_roofline.readers.kineto import counters

# The precision of each spelling, written by hand from the format's definition (bits of the
# element; complex types are two reals of the component precision; e8m0 is an 8-bit scale).
EXPECTED = {
    "pred": "pred",
    "bool": "pred",
    **{f"{s}{w}": f"int{w}" for s in ("s", "u") for w in (1, 2, 4, 8, 16, 32, 64)},
    **{f"int{w}": f"int{w}" for w in (4, 8, 16, 32, 64)},
    "f16": "fp16",
    "f32": "fp32",
    "f64": "fp64",
    "c32": "fp16",
    "c64": "fp32",
    "c128": "fp64",
    "bf16": "bf16",
    "tf32": "tf32",
    "fp64": "fp64",
    "fp64_tc": "fp64_tc",
    "fp32": "fp32",
    "fp32_tc": "fp32_tc",
    "fp16": "fp16",
    "fp8": "fp8",
    "fp6": "fp6",
    "fp4": "fp4",
    "f8e5m2": "fp8",
    "f8e4m3": "fp8",
    "f8e4m3fn": "fp8",
    "f8e4m3b11fnuz": "fp8",
    "f8e5m2fnuz": "fp8",
    "f8e4m3fnuz": "fp8",
    "f8e3m4": "fp8",
    "f8e8m0": "fp8",
    "f8e8m0fnu": "fp8",
    "f4e2m1": "fp4",
    "f4e2m1fn": "fp4",
    "f6e3m2fn": "fp6",
    "f6e2m3fn": "fp6",
}
# HLO's types that hold no numbers: no precision.
NOT_DATA = {"tuple", "opaque", "token", "buffer", "invalid"}


def _emitted() -> dict[str, str]:
    """Every precision spelling the cost code and the readers emit, with where it comes from."""
    out: dict[str, str] = {}
    for t, name in shapes.TYPE_NAMES.items():
        out[name] = "costs/hlo/shapes.py TYPE_NAMES"
        out[shapes.precision_name(t)] = "costs/hlo/shapes.py precision_name"
    for p, _size in args.DTYPES.values():
        out[p] = "costs/torch/args.py DTYPES"
    for p, _size in custom_ops.SCALAR_TYPES.values():
        out[p] = "costs/torch/custom_ops.py SCALAR_TYPES"
    for p in flops.SCALAR_TYPE_CODES.values():
        out[p] = "costs/torch/flops.py scalar type codes"
    for p in args.FLOAT_PRECISIONS:
        out[p] = "costs/torch/args.py FLOAT_PRECISIONS"
    for p in cost_basics.ALGORITHM_PRECISION.values():
        out[p] = "costs/hlo/cost_basics.py ALGORITHM_PRECISION"
    for _pattern, p in kernel_names._UNIT_RULES:
        out[p] = "readers/kernel_names.py unit rules"
    for pair in kernel_names._TENSILE_TYPES.values():
        out.update(dict.fromkeys(pair, "readers/kernel_names.py Tensile types"))
    for p in counters.HW_PRECISIONS.values():
        out[p] = "readers/kineto/counters.py"
    return {k: v for k, v in out.items() if k not in NOT_DATA}


def test_every_emitted_spelling_normalises_to_its_precision():
    emitted = _emitted()
    assert len(emitted) > 40  # the collection above found the tables
    unlisted = sorted(s for s in emitted if s not in EXPECTED)
    assert not unlisted, f"spellings with no hand-written precision here: {unlisted}"
    for spelling, where in emitted.items():
        got = normalize_precision(spelling)
        assert got == EXPECTED[spelling], (spelling, where, got)
        assert got in PRECISIONS


@pytest.mark.parametrize(
    "spelling, precision",
    [
        ("float", "fp32"),
        ("double", "fp64"),
        ("c10::Half", "fp16"),
        ("c10::BFloat16", "bf16"),
        ("at::BFloat16", "bf16"),
        ("c10::Float8_e4m3fn", "fp8"),
        ("float8_e4m3fnuz", "fp8"),
        ("float4_e2m1fn_x2", "fp4"),
        ("unsigned char", "int8"),
        ("signed char", "int8"),
        ("uint8", "int8"),
        ("int8_t", "int8"),
        ("long int", "int64"),
        ("kernel:tf32", "tf32"),
        ("kernel:tf32/f32", "tf32"),
        ("  BF16 ", "bf16"),
        ("default", ""),
        ("f7", ""),
        ("", ""),
    ],
)
def test_trace_spellings(spelling, precision):
    assert normalize_precision(spelling) == precision


def test_device_tables_use_the_vocabulary():
    for spec in datasheets.TABLE:
        assert set(spec.compute) <= set(CEILING_PRECISIONS), spec.key
    for archs in (gpu_arch_rates.NVIDIA_ARCHS, gpu_arch_rates.AMD_ARCHS):
        for arch in archs.values():
            assert set(arch.rates) <= set(CEILING_PRECISIONS), arch.name
    for p in CEILING_PRECISIONS:
        assert normalize_precision(p) == p


def test_roof_lookup_and_ceiling_placement_agree():
    """A device with every ceiling, each a different figure: an op of any emitted spelling gets
    the roof of its precision from `peak_for`, and `ceiling_precision` places a dot or a vector
    op of it exactly where it places its precision's own name (a dot of an unknown precision
    nowhere)."""
    compute = [ComputePeak(p, 1000.0 + i, "datasheet") for i, p in enumerate(CEILING_PRECISIONS)]
    device = DeviceInfo(type="every ceiling", kind="gpu", num_cores=1, compute=compute)
    roof = {c.precision: c.gflops for c in compute}
    for spelling in _emitted():
        precision = EXPECTED[spelling]
        assert device.peak_for(spelling) == roof.get(precision, device.peak_gflops), spelling
        for matmul in (True, False):
            placed = ceiling_precision(spelling, matmul, device)
            assert placed == ceiling_precision(precision, matmul, device), spelling
        if precision in ("fp16", "bf16", "fp8", "fp6", "fp4", "int8"):
            assert ceiling_precision(spelling, True, device) == precision, spelling
        if precision not in roof:
            assert ceiling_precision(spelling, True, device) == "", spelling


def test_integer_work_is_told_by_the_vocabulary():
    """The model's integer test (no floating-point roof) agrees with the hand-written precision
    of every emitted spelling, and of PyTorch's C++ spellings."""
    cpp = {"int": True, "long": True, "short": True, "unsigned char": True, "bool": True}
    cpp.update({"c10::Half": False, "double": False, "float": False})
    for spelling in _emitted():
        integer = EXPECTED[spelling] == "pred" or EXPECTED[spelling].startswith("int")
        assert is_integer_precision(spelling) == integer, spelling
    for spelling, integer in cpp.items():
        assert is_integer_precision(spelling) == integer, spelling
