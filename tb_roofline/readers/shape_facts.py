"""Shapes the guidance rules need and the op table does not keep: the GEMM dimensions (M, N, K)
of matmuls and convolutions (do they fill the device's matrix tiles?) and the shape of copies
and transposes (is the same relayout repeated?). One function per source: PyTorch's recorded
`Input Dims`, an HLO instruction (XLA on GPU/CPU), an HLO text (TPU op metadata).

Each returns `(kind, dims, text)` or None; readers sum calls and time per (op, text) into
`ShapeUse`s (table/timeline.py).
"""

from __future__ import annotations

import json
import math
import re

from tb_roofline.costs.hlo.shapes import TUPLE, TYPE_NAMES

_TORCH_MATMUL = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear"})
_TORCH_CONV = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "convolution",
        "_convolution",
        "cudnn_convolution",
        "mkldnn_convolution",
        "miopen_convolution",
        "miopen_depthwise_convolution",
    }
)
_TORCH_COPY = frozenset({"copy_", "clone", "contiguous", "_to_copy", "to", "transpose", "permute"})


def _dims(value) -> tuple | None:
    if isinstance(value, list) and value and all(isinstance(d, int) for d in value):
        return tuple(value)
    return None


def _gemm(m: int, n: int, k: int, text: str):
    if min(m, n, k) <= 0:
        return None
    return "gemm", (int(m), int(n), int(k)), f"M={m} N={n} K={k} ({text})"


def torch_shape(name: str, dims, types=None, concrete=None) -> tuple | None:
    """From an aten op's `Input Dims` (and, for convolutions, its `Input type` and `Concrete
    Inputs`: stride, padding, dilation, groups): GEMM dims of the matmul family and the
    implicit GEMM of convolutions (costs/torch/contractions.conv_gemm: the product cuDNN,
    MIOpen and oneDNN tile), the array of copy-family ops."""
    if not isinstance(dims, list) or not name.startswith("aten::"):
        return None
    n = name[len("aten::") :]
    shapes = [_dims(d) for d in dims]
    text = " x ".join(str(list(s)) for s in shapes if s)
    if n in _TORCH_MATMUL:
        args = [s for s in shapes if s]
        if n in ("addmm", "baddbmm", "addbmm"):
            args = [s for s in shapes[1:3] if s]
        if len(args) < 2 or len(args[0]) < 2 or len(args[1]) < 2:
            return None
        a, b = args[0], args[1]
        if n == "linear":  # x[..., K] · w[N, K]^T
            return _gemm(math.prod(a[:-1]), b[0], a[-1], text)
        return _gemm(math.prod(a[:-1]), b[-1], a[-1], text)
    if n in _TORCH_CONV:
        # PyTorch's cost rules, imported for PyTorch traces only (a TPU read loads none)
        from tb_roofline.costs.torch.args import Args
        from tb_roofline.costs.torch.contractions import conv_gemm

        mnk = conv_gemm(n, Args(dims, types, concrete))
        if mnk is None:
            return None
        gm, gn, gk = mnk
        return _gemm(gm, gn, gk, text)
    if n in _TORCH_COPY and shapes and shapes[0]:
        return "copy", shapes[0], str(list(shapes[0]))
    return None


def _array_dims(shape) -> tuple:
    while shape.etype == TUPLE and shape.tuple_shapes:
        shape = shape.tuple_shapes[0]
    return tuple(shape.dims)


def _free(dims: tuple, used) -> int:
    used = set(used)
    return math.prod(d for i, d in enumerate(dims) if i not in used)


def hlo_shape(ins) -> tuple | None:
    """From an HLO instruction (module.Instruction): dot / convolution (also inside a fusion,
    and cuBLAS / cuDNN custom calls) → GEMM dims (a convolution's implicit GEMM); copy /
    transpose → the copied array."""
    op = ins.opcode
    if op == "fusion" and ins.called:
        inner = [i for i in ins.called[0].instructions if i.opcode in ("dot", "convolution")]
        if inner:
            return hlo_shape(inner[0])
        if any(i.opcode in ("copy", "transpose") for i in ins.called[0].instructions) and all(
            i.opcode in ("copy", "transpose", "parameter", "bitcast", "reshape")
            for i in ins.called[0].instructions
        ):
            return "copy", _array_dims(ins.shape), _text(ins.shape)
        return None
    if len(ins.operands) >= 2 and (
        op == "dot" or (op == "custom-call" and "gemm" in ins.proto.custom_call_target.lower())
    ):
        lhs, rhs = _array_dims(ins.operands[0].shape), _array_dims(ins.operands[1].shape)
        dn = ins.proto.dot_dimension_numbers
        lc, lb, rc, rb = (
            list(dn.lhs_contracting_dimensions),
            list(dn.lhs_batch_dimensions),
            list(dn.rhs_contracting_dimensions),
            list(dn.rhs_batch_dimensions),
        )
        if op == "custom-call":
            lc, lb, rc, rb = _gemm_config_dims(ins, lhs, rhs)
        if not lhs or not rhs or not lc:
            return None
        k = math.prod(lhs[i] for i in lc if i < len(lhs))
        text = f"{_text(ins.operands[0].shape)} x {_text(ins.operands[1].shape)}"
        return _gemm(_free(lhs, lc + lb), _free(rhs, rc + rb), k, text)
    if len(ins.operands) >= 2 and (
        op == "convolution"
        or (op == "custom-call" and "conv" in ins.proto.custom_call_target.lower())
    ):
        p = ins.proto
        dn = p.convolution_dimension_numbers
        x, w = _array_dims(ins.operands[0].shape), _array_dims(ins.operands[1].shape)
        if len(w) < 2 or len(x) < 2:
            return None
        cin = (
            w[dn.kernel_input_feature_dimension]
            if dn.kernel_input_feature_dimension < len(w)
            else 0
        )
        cout = (
            w[dn.kernel_output_feature_dimension]
            if dn.kernel_output_feature_dimension < len(w)
            else 0
        )
        # The implicit GEMM: M = batch × output positions, K = input features × filter taps.
        taps = math.prod(w[i] for i in dn.kernel_spatial_dimensions if i < len(w))
        out = _array_dims(ins.shape)
        m = math.prod(d for i, d in enumerate(out) if i != dn.output_feature_dimension)
        text = f"{_text(ins.operands[0].shape)} * {_text(ins.operands[1].shape)}"
        return _gemm(m, cout, cin * taps, text)
    if op in ("copy", "transpose"):
        return "copy", _array_dims(ins.shape), _text(ins.shape)
    return None


def _gemm_config_dims(ins, lhs, rhs):
    """Contracting / batch dims of a gemm custom call from its GemmBackendConfig JSON."""
    try:
        cfg = json.loads(bytes(ins.proto.backend_config) or b"{}")
    except ValueError:
        cfg = {}
    gemm = cfg.get("gemm_backend_config", cfg) if isinstance(cfg, dict) else {}
    dn = gemm.get("dot_dimension_numbers") or {} if isinstance(gemm, dict) else {}

    def ints(key, default):
        v = dn.get(key)
        return [int(x) for x in v] if isinstance(v, list) else default

    return (
        ints("lhs_contracting_dimensions", [len(lhs) - 1] if lhs else []),
        ints("lhs_batch_dimensions", []),
        ints("rhs_contracting_dimensions", [0] if rhs else []),
        ints("rhs_batch_dimensions", []),
    )


def _text(shape) -> str:
    while shape.etype == TUPLE and shape.tuple_shapes:
        shape = shape.tuple_shapes[0]
    return f"{TYPE_NAMES.get(shape.etype, '?')}[{','.join(str(d) for d in shape.dims)}]"


_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]+)\]")
_TPU_MATMUL_WORDS = ("convolution", "dot")


def tpu_text_shape(text: str, category: str) -> tuple | None:
    """From a TPU op's HLO text: for convolutions / dots (and their fusions) every array in the
    instruction (output first, then operands as far as the text names them: `kind` "array");
    for copies / transposes the output array."""
    if not text or "=" not in text:
        return None
    cat = category.lower()
    matmul = any(w in cat for w in _TPU_MATMUL_WORDS)
    if (
        not matmul
        and cat not in ("data formatting", "copy", "transpose")
        and "transpose" not in cat
    ):
        return None  # (before the arrays: most ops are neither)
    rhs = text.split("=", 1)[1]
    arrays = [(t, tuple(int(d) for d in dims.split(",") if d)) for t, dims in _ARRAY.findall(rhs)]
    arrays = [(t, d) for t, d in arrays if d and t in _TPU_TYPES]
    if not arrays:
        return None
    if matmul:
        return (
            "array",
            tuple(d for _, d in arrays),
            " ".join(f"{t}[{','.join(map(str, d))}]" for t, d in arrays),
        )
    if cat in ("data formatting", "copy", "transpose") or "transpose" in cat:
        t, d = arrays[0]
        return "copy", d, f"{t}[{','.join(map(str, d))}]"
    return None


_TPU_TYPES = frozenset(TYPE_NAMES.values()) - {"tuple", "token", "opaque", "buffer"}
