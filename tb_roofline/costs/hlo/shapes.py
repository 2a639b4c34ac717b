"""HLO shapes: element types, element counts and byte sizes as XLA's cost analysis sizes them.

Facts (docs/hlo_cost_model.md, "Sizes"): a primitive type's byte width is ceil(bits / 8)
unless the layout sets `element_size_in_bits` (then the array takes ceil(elements × bits / 8)
bytes); a tuple takes 8 bytes per top-level element (its pointer table); a token 0; an opaque
8. XLA's cost analysis sizes a shape **without a layout** as 0 bytes (a tuple has one when all
its leaves do).
"""

from __future__ import annotations

import math

from tb_roofline.devices.precision import normalize_precision, split_kernel_type

# PrimitiveType numbers (xla_data.proto).
PRED, S8, S16, S32, S64, U8, U16, U32, U64, F16, F32, F64 = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
TUPLE, OPAQUE, C64, BF16, TOKEN, C128 = 13, 14, 15, 16, 17, 18
BUFFER = 34

# Storage bits per element (PRED is stored in a byte; sub-byte types round up to a byte).
_BITS = {
    PRED: 8,
    S8: 8,
    S16: 16,
    S32: 32,
    S64: 64,
    U8: 8,
    U16: 16,
    U32: 32,
    U64: 64,
    F16: 16,
    F32: 32,
    F64: 64,
    C64: 64,
    BF16: 16,
    C128: 128,
    19: 8,
    20: 8,
    21: 4,
    22: 4,
    23: 8,
    24: 8,
    25: 8,
    26: 2,
    27: 2,
    28: 8,
    29: 8,
    30: 1,
    31: 1,
    32: 4,
    33: 8,
    35: 8,
    36: 8,
}
BYTE_WIDTH = {t: (b + 7) // 8 for t, b in _BITS.items()}

TYPE_NAMES = {
    PRED: "pred",
    S8: "s8",
    S16: "s16",
    S32: "s32",
    S64: "s64",
    U8: "u8",
    U16: "u16",
    U32: "u32",
    U64: "u64",
    F16: "f16",
    F32: "f32",
    F64: "f64",
    TUPLE: "tuple",
    OPAQUE: "opaque",
    C64: "c64",
    BF16: "bf16",
    TOKEN: "token",
    C128: "c128",
    19: "f8e5m2",
    20: "f8e4m3fn",
    21: "s4",
    22: "u4",
    23: "f8e4m3b11fnuz",
    24: "f8e5m2fnuz",
    25: "f8e4m3fnuz",
    26: "s2",
    27: "u2",
    28: "f8e4m3",
    29: "f8e3m4",
    30: "s1",
    31: "u1",
    32: "f4e2m1fn",
    33: "f8e8m0fnu",
    34: "buffer",
    35: "f6e3m2fn",
    36: "f6e2m3fn",
}
# Element width in bytes by the type's name in HLO text (`f32`, `bf16`, ...).
BYTE_WIDTH_BY_NAME = {name: BYTE_WIDTH[t] for t, name in TYPE_NAMES.items() if t in BYTE_WIDTH}

# The precision a piece of work runs at, in the names the peaks use.
_PRECISION = {
    F32: "f32",
    C64: "f32",
    BF16: "bf16",
    F16: "f16",
    F64: "f64",
    C128: "f64",
    S8: "int8",
    U8: "int8",
    S16: "int16",
    U16: "int16",
    S32: "int32",
    U32: "int32",
    S64: "int64",
    U64: "int64",
    PRED: "pred",
}
for _t in (21, 22, 26, 27, 30, 31):  # s4, u4, s2, u2, s1, u1
    _PRECISION[_t] = "int4"
for _t in (19, 20, 23, 24, 25, 28, 29, 33):  # the f8 family
    _PRECISION[_t] = "fp8"
_PRECISION.update({32: "fp4", 35: "fp6", 36: "fp6"})

# THE element sizes (bytes) of every precision and data-type name the readers and the model use:
# HLO's type names (above), the peak tables' precision names (tf32 is stored as f32), PyTorch's
# precisions beyond HLO's (complex half; fp4 packed two to a byte; e8m0 scales) and the dtype
# spellings of PyTorch's traces that no alias of `normalize_precision` covers.
ELEMENT_BYTES = {  # sub-byte types have no whole-byte element: unknown (None), not 1
    **{name: BYTE_WIDTH[t] for t, name in TYPE_NAMES.items() if _BITS.get(t, 0) >= 8},
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "int64": 8,
    "int32": 4,
    "c32": 4,
    "f4e2m1": 1,
    "f8e8m0": 1,
    "long": 8,
    "long int": 8,
    "int": 4,
    "bool": 1,
    "complexfloat": 8,
    "complexdouble": 16,
}


def element_bytes(name: str) -> int | None:
    """Bytes of one element of a precision or data type as any reader spells it (f32, bf16,
    s32, pred, kernel:tf32, kernel:tf32/f32, float, c10::Half, ...); None when unknown."""
    if not name:
        return None
    unit, inputs = split_kernel_type(str(name))
    # The recorded input type when a kernel named the unit ("kernel:tf32/f32" -> f32).
    d = str(inputs or unit).rsplit("::", 1)[-1].strip().lower()  # c10::Half -> half
    return ELEMENT_BYTES.get(d) or ELEMENT_BYTES.get(normalize_precision(d))


def precision_name(element_type: int) -> str:
    return _PRECISION.get(element_type, TYPE_NAMES.get(element_type, f"type{element_type}"))


class Shape:
    """A decoded ShapeProto. `dims` is a tuple; `tuple_shapes` is a tuple of Shapes."""

    __slots__ = ("etype", "dims", "has_layout", "bits", "m2m", "tuple_shapes", "dynamic")

    def __init__(
        self, etype, dims=(), has_layout=True, bits=0, m2m=(), tuple_shapes=(), dynamic=False
    ):
        self.etype = etype
        self.dims = tuple(dims)
        self.has_layout = has_layout
        self.bits = bits
        self.m2m = tuple(m2m)
        self.tuple_shapes = tuple(tuple_shapes)
        self.dynamic = dynamic

    @staticmethod
    def from_proto(p) -> Shape:
        etype = p.element_type
        if etype == TUPLE:
            subs = tuple(Shape.from_proto(t) for t in p.tuple_shapes)
            return Shape(TUPLE, (), all(s.has_layout for s in subs), 0, (), subs)
        dyn = p.is_dynamic_dimension
        dynamic = bool(len(dyn)) and any(dyn)
        if p.HasField("layout"):
            lay = p.layout
            return Shape(
                etype, p.dimensions, True, lay.element_size_in_bits, lay.minor_to_major, (), dynamic
            )
        return Shape(etype, p.dimensions, False, 0, (), (), dynamic)

    @property
    def is_tuple(self) -> bool:
        return self.etype == TUPLE

    @property
    def is_array(self) -> bool:
        return self.etype not in (TUPLE, TOKEN, OPAQUE) and self.etype != 0

    def elements(self) -> int:
        return math.prod(self.dims)

    def leaves(self):
        """Array leaves, depth first (tokens and opaques are not arrays)."""
        if self.etype == TUPLE:
            for s in self.tuple_shapes:
                yield from s.leaves()
        elif self.is_array:
            yield self

    def leaf_elements(self) -> int:
        return sum(s.elements() for s in self.leaves())

    def __repr__(self):
        if self.etype == TUPLE:
            return "(" + ", ".join(map(repr, self.tuple_shapes)) + ")"
        return f"{TYPE_NAMES.get(self.etype, self.etype)}{list(self.dims)}"


def byte_size(s: Shape) -> int:
    """XLA's `GetShapeSize`: ByteSizeOf with 8-byte pointers, 0 for a shape without layout."""
    if not s.has_layout:
        return 0
    return _raw_size(s)


def _raw_size(s: Shape) -> int:
    et = s.etype
    if et == TUPLE:
        return 8 * len(s.tuple_shapes)
    if et == TOKEN:
        return 0
    if et == OPAQUE:
        return 8
    n = math.prod(s.dims)
    if s.bits:
        size = (n * s.bits + 7) // 8
    else:
        size = n * BYTE_WIDTH.get(et, 0)
    if s.dynamic:
        size += 4 * len(s.dims)  # dynamic shapes carry their sizes as int32 metadata
    return size


def leaf_bytes(s: Shape) -> int:
    """Sum of the sizes of the array leaves (XLA's output bytes of an instruction)."""
    if s.etype != TUPLE:
        return byte_size(s) if s.is_array else 0
    return sum(leaf_bytes(t) for t in s.tuple_shapes)


HOST_MEMORY_SPACE = 5  # Layout::kHostMemorySpace: host offload (pinned_host / unpinned_host)


def largest_in_memory_space(p, space: int = HOST_MEMORY_SPACE) -> int:
    """Bytes of the largest array of ShapeProto `p` (tuples walked) whose layout puts it in
    `space`: what a host transfer moves once."""
    if p.element_type == TUPLE:
        return max((largest_in_memory_space(t, space) for t in p.tuple_shapes), default=0)
    if not p.HasField("layout") or p.layout.memory_space != space:
        return 0
    return byte_size(Shape.from_proto(p))
