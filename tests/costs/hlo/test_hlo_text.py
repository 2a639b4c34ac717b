"""An HLO instruction's text (costs/hlo/text.py): the operand split and the one split of a
text that the reader's several questions share."""

from __future__ import annotations

import random

from tb_roofline.costs.hlo import text as hlo_text
from tb_roofline.costs.hlo.text import parse_instruction, split_instruction


def _split_by_characters(args: str) -> list[str]:
    """The reference: every character walked, commas at depth 0 split."""
    out, depth, cur = [], 0, ""
    for ch in args:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + ([cur] if cur else [])


def test_operand_lists_split_at_top_level_commas_only():
    rng = random.Random(7)
    cases = [
        "f32[128,1024]{1,0} %p.1, f32[1024]{0} %p.2",
        "(f32[2], s32[]) %t, f32[4,4]{1,0:T(8,128)} %x",
        "",
        ",",
        "a,",
        ",a",
        ")(,]",
    ]
    cases += [
        "".join(rng.choice("ab,()[]{} %") for _ in range(rng.randint(0, 24))) for _ in range(5000)
    ]
    for case in cases:
        assert hlo_text._split_top(case) == _split_by_characters(case), case


def test_one_split_serves_each_text_and_never_another():
    texts = [
        "%fusion.1 = f32[8,128]{1,0} fusion(f32[8,128]{1,0} %a, f32[128]{0} %b), kind=kLoop",
        "%copy-start.2 = (f32[1024]{0:S(5)}, f32[1024]{0}, u32[]) copy-start(f32[1024]{0} %p)",
        "not an instruction",
        "",
    ]
    for _ in range(3):
        for t in texts + ["".join(list(texts[0]))]:  # (an equal text that is another object)
            assert split_instruction(t) == hlo_text._split(t)
            assert split_instruction(t) == hlo_text._split(t)
    got = parse_instruction(texts[1])
    assert got.opcode == "copy-start" and got.operands == ("p",)
    assert got.host_bytes == 4096
    assert parse_instruction(texts[0]).operands == ("a", "b")
