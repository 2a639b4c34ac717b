"""What an op computes, apart from its name: the key that pairs ops of two runs when their names
do not (XLA renames fusions between compilations: `fusion.12` becomes `fusion.14`).

- `hlo:<hash>` (XLA, name-independent): the opcode, the result and operand shapes and dtypes
  (no layouts, no names), the fusion kind, and the multiset of (opcode, shape) of the
  instructions of every computation it calls (a fusion's fused computation, a loop's body),
  nested calls included. From the HloProto (GPU/CPU) or from the instruction's HLO text (TPU op
  metadata, which holds no fused computation: there the shapes and attributes decide).
- `shapes:<input dims>` (PyTorch ops) and `grid:<grid>` (GPU kernels): readable, and only
  meaningful together with the op or kernel name. The dims themselves travel as data (the op
  table's `input_dims` column, tuples); this text is rendered from them and never read back.
Two ops with equal `hlo:` fingerprints do the same work on the same shapes; a changed shape,
dtype or fused instruction changes the fingerprint.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re

HLO, SHAPES, GRID = "hlo:", "shapes:", "grid:"

# Attributes from which on an instruction's text says nothing about the work (op names, source
# lines, backend tuning); XLA prints them after the ones that do (kind, dims, window...).
_TRAILING_ATTRS = re.compile(
    r",\s*(?:metadata|backend_config|frontend_attributes|sharding|"
    r"statistics|origin|control-predecessors)="
)
_LAYOUT = re.compile(r"\]\{[^{}]*\}")
_NAME_REF = re.compile(r"%[\w.\-]+")
_SPACES = re.compile(r"\s+")


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def instruction_fingerprint(ins, cache: dict | None = None) -> str:
    """`hlo:<hash>` of a decoded instruction (`tb_roofline.costs.hlo.module.Instruction`). `cache`
    keeps computation signatures (by id) across the instructions of one module."""
    cache = {} if cache is None else cache
    parts = [
        ins.opcode,
        repr(ins.shape),
        ";".join(repr(o.shape) for o in ins.operands),
        ins.proto.fusion_kind,
    ]
    parts += [_computation_signature(c, cache) for c in ins.called]
    return HLO + _digest("|".join(parts))


def _computation_signature(comp, cache: dict) -> str:
    key = id(comp)
    sig = cache.get(key)
    if sig is None:
        cache[key] = ""  # a recursive call (never in valid HLO) ends here
        counts = collections.Counter(
            f"{i.opcode}{i.shape!r}"
            + "".join(f"<{_computation_signature(c, cache)}>" for c in i.called)
            for i in comp.instructions
        )
        sig = cache[key] = _digest(";".join(f"{k}*{n}" for k, n in sorted(counts.items())))
    return sig


def text_fingerprint(text: str) -> str:
    """`hlo:<hash>` of an instruction's HLO text (`%fusion.3 = f32[8]{0} fusion(...), kind=kLoop,
    calls=%fused_computation.3, metadata={...}`): its right-hand side without names, layouts and
    the trailing attributes; "" when the text is not an instruction."""
    if not text or "=" not in text:
        return ""
    rhs = text.split("=", 1)[1]
    cut = _TRAILING_ATTRS.search(rhs)
    if cut:
        rhs = rhs[: cut.start()]
    rhs = _NAME_REF.sub("%", _LAYOUT.sub("]", rhs))
    return HLO + _digest(_SPACES.sub(" ", rhs).strip())


def shapes_fingerprint(dims) -> str:
    """`shapes:[[8,3,32,32],[16,3,3,3],[16]]`: the text of a PyTorch op's input dims, as data
    (`input_dims`: tuples). The one place that text is made: the op table's `fingerprint`
    renders what its `input_dims` column holds, so runs compare by it and exports show it."""
    return SHAPES + dims_text(dims)


def grid_fingerprint(grid) -> str:
    """`grid:[128,1,1]`: a GPU kernel's launch grid ("" when the trace does not say)."""
    if grid is None:
        return ""
    return GRID + dims_text(grid)


def input_dims(recorded) -> tuple | None:
    """A recorded `Input Dims` value as data: lists as tuples (hashable, so a key column can
    hold it), numbers and other JSON scalars as they are; None when it is not a list or holds
    something no shape does (an object)."""
    if type(recorded) is not list:
        return None
    try:
        return _as_tuples(recorded)
    except TypeError:
        return None


def _as_tuples(value):
    if type(value) is list:
        return tuple([_as_tuples(v) for v in value])
    if value is None or type(value) in _SCALARS:
        return value
    raise TypeError(type(value).__name__)


_SCALARS = (int, float, str, bool)


def dims_text(dims) -> str:
    """Dims as compact JSON (`[[8,3],[3]]`, what `json.dumps(..., separators=(",", ":"))`
    writes of the list they were read from): integers by `str`, other scalars by JSON."""
    if type(dims) is tuple or type(dims) is list:
        return "[" + ",".join([dims_text(d) for d in dims]) + "]"
    if type(dims) is int:
        return str(dims)
    try:
        return json.dumps(dims)
    except (TypeError, ValueError):
        return json.dumps(repr(dims))


def is_name_independent(fingerprint: str) -> bool:
    """Whether the fingerprint alone identifies the work (XLA), so that ops of other names may be
    paired by it."""
    return fingerprint.startswith(HLO)
