"""What one HLO instruction's text says (TPU op metadata names carry it whole:
`%copy-start.1 = (f32[1024]{0:S(5)}, f32[1024]{0}, u32[]) copy-start(f32[1024]{0} %p.1)`):
its opcode, operand names, and the arrays that live in each memory space.

Memory spaces (docs/hlo_cost_model.md): `S(n)` in a layout; 0 = device memory (HBM),
1 = on-chip, 5 = host memory (`pinned_host` / host offload).
"""

from __future__ import annotations

import dataclasses
import math
import re

from tb_roofline.costs.hlo.shapes import BYTE_WIDTH_BY_NAME

HOST_MEMORY_SPACE = 5

# An array with a layout: element type, dims, layout body.
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]\{([^{}]*)\}")
_SPACE = re.compile(r"S\((\d+)\)")
_OPCODE = re.compile(r"\s([a-z][a-z0-9\-]*)\(")


@dataclasses.dataclass(frozen=True)
class InstructionText:
    opcode: str
    operands: tuple[str, ...]
    space_bytes: dict  # memory space -> bytes of the largest array in it

    @property
    def host_bytes(self) -> int:
        """Size of the largest array in host memory: what a host transfer moves once."""
        return self.space_bytes.get(HOST_MEMORY_SPACE, 0)


def split_instruction(text: str) -> tuple | None:
    """(opcode, the text before it: the output shape, the operand list) of an HLO instruction
    text (`name = shape opcode(operands), attributes`); None when it is not one."""
    global _last_split
    last = _last_split
    if last[0] is text:  # a reader asks several questions of one op's text in turn
        return last[1]
    parts = _split(text)
    _last_split = (text, parts)  # (one tuple replaced whole: safe in threads)
    return parts


_last_split: tuple = (None, None)


def _split(text: str) -> tuple | None:
    if not text or "=" not in text:
        return None
    rhs = text.split("=", 1)[1]
    m = _OPCODE.search(rhs)
    if m is None:
        return None
    args = rhs[m.end() :]
    depth, end = 1, len(args)
    for i, ch in enumerate(args):  # the operand list ends at the matching parenthesis
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            end = i
            break
    return m.group(1), rhs[: m.start()], args[:end]


def parse_instruction(text: str) -> InstructionText | None:
    """None when `text` is not an HLO instruction (`name = shape opcode(operands)`)."""
    parts = split_instruction(text)
    if parts is None:
        return None
    opcode, _, operand_text = parts
    rhs = text.split("=", 1)[1]
    operands = tuple(
        words[-1].lstrip("%") for words in map(str.split, _split_top(operand_text)) if words
    )
    spaces: dict = {}
    for etype, dims, layout in _ARRAY.findall(rhs) if "S(" in rhs else ():  # (spaces named)
        s = _SPACE.search(layout)
        if s is None:
            continue
        width = BYTE_WIDTH_BY_NAME.get(etype)
        if width is None:
            continue
        size = width * math.prod(int(d) for d in dims.split(",") if d)
        space = int(s.group(1))
        spaces[space] = max(spaces.get(space, 0), size)
    return InstructionText(opcode, operands, spaces)


def _split_top(args: str) -> list[str]:
    """Split an operand list at top-level commas (shapes hold commas inside [] {} ())."""
    out, depth, start = [], 0, 0
    for m in _PUNCT.finditer(args):  # (only the brackets and commas, not every character)
        ch = m.group()
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            out.append(args[start : m.start()])
            start = m.end()
    if start < len(args):
        out.append(args[start:])
    return out


_PUNCT = re.compile(r"[()\[\]{},]")


def async_role(opcode: str, category: str = "") -> str:
    """'start' for the issuing half of an asynchronous pair, 'done' for the waiting half, ''."""
    for word in (opcode, category.replace(" ", "-")):
        if not word:
            continue
        if word.endswith("-start") or word in ("send", "recv"):
            return "start"
        if word.endswith("-done"):
            return "done"
    return ""
