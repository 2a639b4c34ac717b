"""What an op computes, apart from its name: the key that pairs ops of two runs when their names
do not (XLA renames fusions between compilations: `fusion.12` becomes `fusion.14`).

- `hlo:<hash>` (XLA, name-independent): the opcode, the result and operand shapes and dtypes
  (no layouts, no names), the fusion kind, and the multiset of (opcode, shape) of the
  instructions of every computation it calls (a fusion's fused computation, a loop's body),
  nested calls included. From the HloProto (GPU/CPU) or from the instruction's HLO text (TPU op
  metadata, which holds no fused computation: there the shapes and attributes decide).
- `shapes:<input dims>` (PyTorch ops) and `grid:<grid>` (GPU kernels): readable, and only
  meaningful together with the op or kernel name.
Two ops with equal `hlo:` fingerprints do the same work on the same shapes; a changed shape,
dtype or fused instruction changes the fingerprint.
"""

from __future__ import annotations

import collections
import functools
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
    """`shapes:[[8,3,32,32],[16,3,3,3],[16]]`: a PyTorch op's recorded `Input Dims`."""
    try:
        return SHAPES + json.dumps(dims, separators=(",", ":"))
    except (TypeError, ValueError):
        return SHAPES + repr(dims)


# Kept: the recorded dims of this many distinct texts of at most SHAPES_CACHED_CHARS each
# (~8 bytes a character as tuples: at most ~32 MB, whatever a trace holds).
SHAPES_CACHE = 4096
SHAPES_CACHED_CHARS = 1024


def recorded_dims(fingerprint: str) -> tuple | None:
    """The `Input Dims` a `shapes:` fingerprint was written from, lists as tuples (hashable,
    shared); None for any other fingerprint. The one reader of the text `shapes_fingerprint`
    writes: each distinct text is parsed once per process however many ops, rules and
    comparisons ask (a longer text than SHAPES_CACHED_CHARS each time it is asked)."""
    if not fingerprint.startswith(SHAPES):
        return None
    if len(fingerprint) > SHAPES_CACHED_CHARS:
        return _parsed_dims(fingerprint)
    return _cached_dims(fingerprint)


def _parsed_dims(fingerprint: str) -> tuple | None:
    try:
        value = json.loads(fingerprint[len(SHAPES) :])
    except ValueError:
        return None
    return _as_tuples(value) if isinstance(value, list) else None


_cached_dims = functools.lru_cache(maxsize=SHAPES_CACHE)(_parsed_dims)


def _as_tuples(value):
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


def grid_fingerprint(grid) -> str:
    """`grid:[128,1,1]`: a GPU kernel's launch grid ("" when the trace does not say)."""
    if grid is None:
        return ""
    try:
        return GRID + json.dumps(grid, separators=(",", ":"))
    except (TypeError, ValueError):
        return GRID + repr(grid)


def is_name_independent(fingerprint: str) -> bool:
    """Whether the fingerprint alone identifies the work (XLA), so that ops of other names may be
    paired by it."""
    return fingerprint.startswith(HLO)
