"""What the XLA readers take from an HLO instruction's shapes, beyond its costs: the bytes a
TPU collective moves over the chip links (from the op metadata's HLO text) and the arrays an
elementwise / fusion op writes and reads (the guidance's `tensor` shapes, so the fusion rule
can tell a producer -> consumer pair that shares an array from two unrelated ops).

Collectives: nccl-tests' bus bytes, as costs/collective_bytes.py defines them (its bus factors are
reused here): message size S from the operand arrays the text names, else from the output
(all-reduce, all-to-all, collective-permute: the output's size; all-gather: the gathered
output; reduce-scatter: output × n); n from `replica_groups` in any of XLA's forms (lists,
iota, mesh axes: costs/hlo/replica_groups.py), else unknown (the caller assumes its device count,
and says so).
"""

from __future__ import annotations

import functools
import math
import re

from tb_roofline.costs.collective_bytes import bus_factor
from tb_roofline.costs.hlo.collectives import (
    KINDS,
    MESSAGE_IS_FIRST_OPERAND,
    group_free,
)
from tb_roofline.costs.hlo.replica_groups import from_text
from tb_roofline.costs.hlo.shapes import BYTE_WIDTH_BY_NAME as _WIDTH
from tb_roofline.costs.hlo.shapes import TUPLE, TYPE_NAMES
from tb_roofline.costs.hlo.text import split_instruction
from tb_roofline.table.collective_info import describe

_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")

# Categories / opcodes whose arrays the fusion rule compares (elementwise and fusions).
TENSOR_WORDS = (
    "fusion",
    "elementwise",
    "add",
    "multiply",
    "subtract",
    "divide",
    "tanh",
    "exponential",
    "log",
    "maximum",
    "minimum",
    "negate",
    "convert",
    "select",
    "compare",
    "broadcast",
    "reduce",
    "transpose",
    "copy",
    "data formatting",
    "logistic",
    "rsqrt",
    "sqrt",
    "power",
    "abs",
)
# ... but not collectives nor async halves (they move data, they fuse with nothing).
_NOT_TENSOR_WORDS = ("all-", "reduce-scatter", "collective", "-start", "-done", "send", "recv")


@functools.lru_cache(maxsize=512)  # (a profile has a few categories, asked of every op)
def _tensor_category(category: str) -> bool:
    cat = category.lower()
    return any(w in cat for w in TENSOR_WORDS) and not any(w in cat for w in _NOT_TENSOR_WORDS)


def _arrays(text: str, scalars: bool = False) -> list:
    """(element type, dims) of each array in `text`, in order (tokens dropped; scalars too
    unless asked: a collective's message counts them)."""
    return [
        (t, tuple(int(d) for d in dims.split(",") if d))
        for t, dims in _ARRAY.findall(text)
        if t in _WIDTH and (dims or scalars)
    ]


def _size(arrays) -> float:
    return float(sum(_WIDTH[t] * math.prod(d) for t, d in arrays))


def text_group(text: str) -> int | None:
    """Devices per group from the text's `replica_groups` (any form: costs/hlo/replica_groups.py);
    None when it names none."""
    g = from_text(text)
    return g.size if g is not None else None


# Every collective opcode contains one of these (a cheap test before parsing the text).
_ANY_KIND = re.compile("|".join(sorted({re.escape(k) for k in KINDS}, key=len, reverse=True)))


def text_link(text: str) -> tuple | None:
    """(kind, message bytes S, group n or 0 when the text names none, groups, form) of a
    collective's HLO text (groups 0 and form "" when it names none); None for other ops and
    for `-done` halves (they move nothing of their own)."""
    if not text or _ANY_KIND.search(text) is None:  # no collective's opcode in it: at once
        return None
    parts = split_instruction(text)
    if parts is None or parts[0] not in KINDS:
        return None
    opcode, out_text, operand_text = parts
    kind = KINDS[opcode]
    g = from_text(text)
    n = 1 if group_free(opcode) else (g.size if g is not None else 0)
    named = (g.count, g.form) if g is not None else (0, "")
    operands = _arrays(operand_text, scalars=True)
    if opcode in MESSAGE_IS_FIRST_OPERAND:
        operands = operands[:1]
    if operands:
        message = _size(operands)
        # an all-gather's S is × n once n is known (link_message)
        return (kind, message, n) + named
    outputs = _arrays(out_text, scalars=True)
    if not outputs:
        return None
    # From the output alone: a `-start`'s tuple holds (operand, result): the largest is the result;
    # send/recv: (buffer, u32[] context, token): the buffer.
    pick = opcode.endswith("-start") or kind in ("send", "recv")
    result = max(outputs, key=lambda a: _size([a])) if pick else None
    message = _size([result]) if result is not None else _size(outputs)
    if kind == "all-gather":
        return ("all-gather-result", message, n) + named
    if kind == "reduce-scatter":
        return ("reduce-scatter-result", message, n) + named
    return (kind, message, n) + named


def link_message(link: tuple, devices: int) -> tuple:
    """(kind, message S as nccl-tests defines it, n, whether n was assumed) of a `text_link`
    answer; n = the text's group, else `devices`."""
    kind, message, n = link[:3]
    assumed = not n
    n = max(int(n or devices), 1)
    if kind == "all-gather":
        message = message * n  # S of an all-gather is the gathered array
    elif kind == "all-gather-result":
        kind = "all-gather"
    elif kind == "reduce-scatter-result":
        kind, message = "reduce-scatter", message * n
    return kind, message, n, assumed


def link_bus_bytes(link: tuple | None, devices: int) -> tuple:
    """(bus bytes of one execution, whether n was assumed) of a `text_link` answer; n = the
    text's group, else `devices`."""
    if link is None:
        return 0.0, False
    kind, message, n, assumed = link_message(link, devices)
    return message * bus_factor(kind, n), assumed


def link_collective(link: tuple | None, devices: int) -> str:
    """The op table's `collective` (table/collective_info.py) of a `text_link` answer."""
    if link is None:
        return ""
    kind, message, n, assumed = link_message(link, devices)
    groups, form = link[3:5] if len(link) >= 5 else (0, "")
    return describe(kind, message, n, groups, form, assumed=assumed)


def _label(arrays, operands=()) -> str:
    """ "f32[8,128] f32[128]", then " from a b": the operands' instruction names (so a pair is
    checked as a data edge, not only by shape)."""
    text = " ".join(f"{t}[{','.join(map(str, d))}]" for t, d in arrays)
    names = [n for n in operands if n]
    return text + (" from " + " ".join(names) if names else "")


def text_tensor_shape(text: str, category: str) -> tuple | None:
    """("tensor", (output dims, operand dims...), "f32[..] f32[..] from <operand names>") of an
    elementwise or fusion op from its HLO text (the array it writes, first of a tuple, and the
    arrays it reads); None for other ops or when the text names no output array."""
    if not _tensor_category(category):
        return None
    parts = split_instruction(text)
    if parts is None:
        return None
    _, out_text, operand_text = parts
    outputs = _arrays(out_text)
    if not outputs:
        return None
    arrays = outputs[:1] + _arrays(operand_text)
    names = [
        tok.split()[-1].lstrip("%") for tok in operand_text.split(",") if tok.strip() and "%" in tok
    ]
    return "tensor", tuple(d for _, d in arrays), _label(arrays, names)


def _leaves(shape) -> list:
    if shape.etype == TUPLE:
        return [x for s in shape.tuple_shapes for x in _leaves(s)]
    name = TYPE_NAMES.get(shape.etype, "")
    return [(name, tuple(shape.dims))] if name in _WIDTH and shape.dims else []


def hlo_tensor_shape(ins, category: str) -> tuple | None:
    """The same `tensor` shape from a parsed HLO instruction (costs/hlo/module.Instruction): its
    output arrays, then its operands' arrays."""
    if not _tensor_category(category) and not (
        ins.opcode == "fusion" and _tensor_category(category + " fusion")
    ):
        return None
    arrays = _leaves(ins.shape)[:1]
    if not arrays:
        return None
    for o in ins.operands:
        arrays += _leaves(o.shape)
    return "tensor", tuple(d for _, d in arrays), _label(arrays, [o.name for o in ins.operands])


# A custom call's arrays: attention kernels (cuDNN fMHA, Pallas / Triton flash attention), other
# hand-written kernels. Kind "custom_call" (no guidance rule reads it; `get_op` shows it): dims =
# the output arrays, then the operands'; text = "target: outputs <- operands".
CUSTOM_CALL = "custom_call"
_TARGET = re.compile(r'custom_call_target="([^"]*)"')


def _custom_call(target: str, outputs: list, operands: list) -> tuple | None:
    outputs = [(t, d) for t, d in outputs if math.prod(d)]  # not the empty scratch buffers
    operands = [(t, d) for t, d in operands if math.prod(d)]
    if not outputs and not operands:
        return None
    text = (
        " ".join(f"{t}[{','.join(map(str, d))}]" for t, d in outputs)
        + " <- "
        + " ".join(f"{t}[{','.join(map(str, d))}]" for t, d in operands)
    )
    return CUSTOM_CALL, tuple(d for _, d in outputs + operands), f"{target or '?'}: {text}"


def text_custom_call_shape(text: str) -> tuple | None:
    """The arrays of a custom call from its HLO text (TPU op metadata); None for other ops."""
    if not text or "custom-call" not in text:
        return None
    parts = split_instruction(text)
    if parts is None or parts[0] != "custom-call":
        return None
    target = _TARGET.search(text)
    return _custom_call(target.group(1) if target else "", _arrays(parts[1]), _arrays(parts[2]))


def hlo_custom_call_shape(ins) -> tuple | None:
    """The same from a parsed HLO instruction (costs/hlo/module.Instruction: XLA on GPU/CPU)."""
    if ins.opcode != "custom-call":
        return None
    return _custom_call(
        ins.proto.custom_call_target,
        _leaves(ins.shape),
        [a for o in ins.operands for a in _leaves(o.shape)],
    )
