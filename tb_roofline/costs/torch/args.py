"""The arguments of a PyTorch op call as `record_shapes=True` writes them into a Kineto trace.

A `cpu_op` event carries, per argument, `Input Dims` (a shape, a list of shapes for a
TensorList, `[]` for non-tensors), `Input type` (the dtype of a tensor argument, or `Scalar`,
`ScalarList`, `TensorList`, `""`) and `Concrete Inputs` (the value of scalar arguments as text).
`Args` decodes them; `OpCost` is what a formula (costs/torch/flops.py,
costs/torch/custom_ops.py) makes of one call.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from tb_roofline.costs.hlo.shapes import element_bytes

# Kineto `Input type` strings (c10 scalar type names) → precision names; their element sizes
# are the one table's (costs/hlo/shapes.py ELEMENT_BYTES).
_PRECISIONS = {
    "double": "f64",
    "float": "f32",
    "c10::Half": "f16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "f8e4m3",
    "c10::Float8_e5m2": "f8e5m2",
    "c10::Float8_e4m3fnuz": "f8e4m3",
    "c10::Float8_e5m2fnuz": "f8e5m2",
    "c10::complex<float>": "c64",
    "c10::complex<double>": "c128",
    "c10::complex<c10::Half>": "c32",
    "long int": "s64",
    "int": "s32",
    "short int": "s16",
    "signed char": "s8",
    "unsigned char": "u8",
    "bool": "pred",
    "unsigned int": "u32",
    "unsigned short": "u16",
    "unsigned long": "u64",
    # The spellings PyTorch writes depend on the platform's C++ type names (docs/pytorch_traces.md,
    # "Timestamps and type names").
    "long": "s64",
    "long long": "s64",
    "long long int": "s64",
    "short": "s16",
    "unsigned long long": "u64",
    "uint8_t": "u8",
    "int8_t": "s8",
    "c10::Float8_e8m0fnu": "f8e8m0",
    "c10::Float4_e2m1fn_x2": "f4e2m1",
    "Half": "f16",
    "BFloat16": "bf16",
    "at::Half": "f16",
    "at::BFloat16": "bf16",
}
DTYPES = {t: (p, element_bytes(p)) for t, p in _PRECISIONS.items()}
FLOAT_PRECISIONS = frozenset(
    {"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2", "c64", "c128", "c32"}
)
# c10::ScalarType codes as recorded in Concrete Inputs (e.g. `aten::to(x, 6)` = float).
SCALAR_TYPE_CODES = {
    0: "u8",
    1: "s8",
    2: "s16",
    3: "s32",
    4: "s64",
    5: "f16",
    6: "f32",
    7: "f64",
    8: "c32",
    9: "c64",
    10: "c128",
    11: "pred",
    15: "bf16",
    23: "f8e5m2",
    24: "f8e4m3",
}
# Every precision here has a whole-byte element (tests/devices/test_element_sizes.py checks them).
SIZES: dict[str, int] = {p: s for p, s in DTYPES.values() if s is not None}


class OpCost(NamedTuple):
    category: str
    flops: float
    bytes: float
    precision: str
    # "formula" (FLOPs and bytes from a formula; 0 is a real 0 for copies), "bytes" (bytes
    # known, FLOPs not) or "none"
    source: str
    # A collective: (kind, message bytes S) as costs/collective_bytes.py defines them; the bytes
    # over the links follow once the number of ranks is known.
    comm: tuple = ()


class Tensor(NamedTuple):
    shape: tuple
    precision: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * SIZES.get(self.precision, 4)


class Args:
    """Positional arguments of one op call, decoded from the three `record_shapes` lists."""

    def __init__(self, dims, types, concrete=None):
        self.dims = dims if isinstance(dims, list) else []
        self.types = types if isinstance(types, list) else []
        self.concrete = concrete if isinstance(concrete, list) else []

    def __len__(self):
        return len(self.types)

    def tensor(self, i) -> Tensor | None:
        if i >= len(self.types) or i >= len(self.dims):
            return None
        info = DTYPES.get(self.types[i])
        shape = self.dims[i]
        if info is None or not _is_shape(shape):
            return None
        return Tensor(tuple(shape), info[0])

    def tensors(self) -> list[Tensor]:
        out = []
        for i in range(len(self.types)):
            t = self.tensor(i)
            if t is not None:
                out.append(t)
            elif i < len(self.types) and self.types[i] == "TensorList":
                out.extend(self.tensor_list(i) or [])
        return out

    def tensor_list(self, i) -> list[Tensor] | None:
        """Shapes of a TensorList argument (their dtype is not recorded: taken as the op's)."""
        if i >= len(self.dims) or not isinstance(self.dims[i], list):
            return None
        shapes = self.dims[i]
        if not all(_is_shape(s) for s in shapes):
            return None
        prec = next((t.precision for t in self._plain_tensors()), "f32")
        return [Tensor(tuple(s), prec) for s in shapes]

    def _plain_tensors(self):
        return [t for t in (self.tensor(i) for i in range(len(self.types))) if t is not None]

    def value(self, i, default=None):
        """The concrete value of a scalar argument, parsed; `default` when absent."""
        if i >= len(self.concrete):
            return default
        parsed = parse_concrete(self.concrete[i])
        return default if parsed is None else parsed


def _is_shape(shape) -> bool:
    """A list of non-negative ints (a negative dimension is a corrupt shape: no cost)."""
    return isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)


def has_negative_dim(dims) -> bool:
    """Whether `Input Dims` holds a negative dimension anywhere (two levels: TensorLists)."""
    if not isinstance(dims, list):
        return False
    for s in dims:
        if isinstance(s, list):
            for d in s:
                if (type(d) is int and d < 0) or (
                    isinstance(d, list) and any(type(x) is int and x < 0 for x in d)
                ):
                    return True
    return False


# Integer and boolean tensors run on no floating-point unit: their rows say so ("int",
# "bool"); 8-bit integers keep their own name (int8 tensor-core ceilings exist).
INT_LABELS = {
    "s16": "int",
    "s32": "int",
    "s64": "int",
    "u16": "int",
    "u32": "int",
    "u64": "int",
    "pred": "bool",
}


def precision_label(precision: str) -> str:
    """The precision a row shows: integer and boolean dtypes as "int" / "bool"."""
    return INT_LABELS.get(precision, precision)


_INT_LIST = re.compile(r"^\[\s*(-?\d+\s*(,\s*-?\d+\s*)*)?\]$")


def parse_concrete(text):
    """'[1, 1]' → [1, 1]; '2' → 2; '0.5' → 0.5; 'True' → True; '' → None."""
    if not isinstance(text, str):
        return text
    s = text.strip()
    if not s:
        return None
    if s in ("True", "False"):
        return s == "True"
    if s.startswith("["):
        inner = s[1:-1].strip() if s.endswith("]") else None
        if inner is None:
            return None
        if not inner:
            return []
        items = [parse_concrete(p) for p in inner.split(",")]
        return None if any(v is None for v in items) else items
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s.strip("\"'")


def _tuple(value, n, default):
    """Expand an int or a 1-element list to n entries (PyTorch's _ntuple)."""
    if value is None:
        return (default,) * n
    if isinstance(value, (int, float)):
        return (int(value),) * n
    if isinstance(value, list) and all(isinstance(v, (int, bool)) for v in value):
        if len(value) == 1:
            return (int(value[0]),) * n
        if len(value) == n:
            return tuple(int(v) for v in value)
    return None


def _first_float(tensors) -> str:
    for t in tensors:
        if t.precision in FLOAT_PRECISIONS:
            return t.precision
    return tensors[0].precision if tensors else ""


def _cost(category, flops, tensors_in, out: Tensor | list | None, precision=None):
    outs = out if isinstance(out, list) else ([out] if out is not None else [])
    nbytes = sum(t.nbytes for t in tensors_in) + sum(t.nbytes for t in outs)
    return OpCost(
        category, float(flops), float(nbytes), precision or _first_float(tensors_in), "formula"
    )


def broadcast(*shapes) -> tuple | None:
    """NumPy/PyTorch broadcasting of shapes; None when they do not broadcast."""
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        dims = {s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)
