"""Every line of code the guidance suggests (model/guidance/advice.py) runs: each `torch.…` /
`jax.…` expression or assignment in an advice text is found by a scan of the text written here, then
compiled, and, where the library is installed, executed (torch: `torch.autocast(...)` built,
settings assigned and restored)."""

from __future__ import annotations

import re

import pytest

from tb_roofline.model.guidance import advice

START = re.compile(r"\b(torch|jax)\.[A-Za-z_]")


def _balanced_end(text: str, i: int) -> int:
    """The end of the dotted name, call arguments and `= value` starting at text[i]."""
    j = i
    while j < len(text) and (text[j].isalnum() or text[j] in "._"):
        j += 1
    if j < len(text) and text[j] == "(":
        depth = 0
        for k in range(j, len(text)):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            if depth == 0:
                j = k + 1
                break
        else:
            return len(text)  # unbalanced: compile() below says so
    m = re.match(r"\s*=\s*(True|False|'[^']*'|\d+)", text[j:])
    return j + m.end() if m else j


def code_fragments(text: str) -> list[str]:
    out, i = [], 0
    while True:
        m = START.search(text, i)
        if m is None:
            return out
        end = _balanced_end(text, m.start())
        out.append(text[m.start() : end].rstrip("."))
        i = end


def all_texts() -> list[tuple[str, str]]:
    texts = [(f"{rule}/{rt}", t) for rule, by in advice.ADVICE.items() for rt, t in by.items()]
    texts += [("/".join(k), t) for k, t in advice.ADVICE_BY_DEVICE.items()]
    texts += [(k, t) for k, t in advice.CAPTURE_NOTES.items()]
    return texts


FRAGMENTS = sorted({(where, f) for where, t in all_texts() for f in code_fragments(t)})


def test_the_scan_finds_the_autocast_lines():
    found = {f for _, f in FRAGMENTS}
    assert "torch.autocast(device_type='cpu', dtype=torch.bfloat16)" in found
    assert "torch.autocast(device_type='cuda', dtype=torch.bfloat16)" in found
    assert "torch.backends.cuda.matmul.allow_tf32 = True" in found
    assert not any(f.startswith("torch.autocast(dtype") for f in found)


@pytest.mark.parametrize("where,code", FRAGMENTS)
def test_every_suggested_line_compiles(where, code):
    compile(code, where, "exec")


@pytest.mark.slow
@pytest.mark.parametrize("where,code", [(w, c) for w, c in FRAGMENTS if c.startswith("torch.")])
def test_every_suggested_torch_line_runs(where, code):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity

    precision = torch.get_float32_matmul_precision()
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        exec(code, {"torch": torch, "ProfilerActivity": ProfilerActivity})
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cuda.matmul.allow_tf32 = tf32


@pytest.mark.parametrize("where,code", [(w, c) for w, c in FRAGMENTS if c.startswith("jax.")])
def test_every_suggested_jax_line_runs(where, code):
    jax = pytest.importorskip("jax")
    exec(code, {"jax": jax})


def test_cpu_pytorch_advice_names_no_cuda_tool():
    for rule in advice.ADVICE:
        for rt in (advice.EAGER, advice.COMPILE):
            text = advice.advice(rule, rt, "cpu")
            for word in ("Nsight", "cuBLAS", "cuDNN", "CUDA", "tf32", "Triton", "pin_memory"):
                assert word not in text, (rule, rt, word)
