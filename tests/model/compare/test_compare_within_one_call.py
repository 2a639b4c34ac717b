"""A step difference no larger than one op call is said to be one (no speedup quoted): two
steps of the real H200 fp8 decode trace, the longest call derived here by hand from the raw
kernel events of each step (every op of this trace launches one kernel a call)."""

from __future__ import annotations

import gzip
import io
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.serve.cli.main import main

RUN = os.path.join(TESTS, "..", "testdata", "kineto", "h200_decode_eager")


def _longest_kernel_per_step() -> dict[int, float]:
    """{step: its longest kernel, µs}: kernels inside each `ProfilerStep#N` GPU annotation."""
    path = next(f for f in os.listdir(RUN) if f.endswith(".pt.trace.json.gz"))
    with gzip.open(os.path.join(RUN, path)) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    out = {}
    for e in events:
        if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#"):
            inside = [k["dur"] for k in kernels if e["ts"] <= k["ts"] < e["ts"] + e["dur"]]
            out[int(e["name"].split("#")[1])] = max(inside)
    return out


# (base step, candidate step, within one call): 2.8 and 44 µs of change under a 64 µs call;
# 120 and 167 µs beyond it.
CASES = [(2, 4, True), (1, 2, True), (1, 3, False), (3, 4, False)]


@pytest.mark.parametrize("base,cand,expected", CASES)
def test_a_step_difference_within_one_call_is_said_so(base, cand, expected, monkeypatch, capsys):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    longest = _longest_kernel_per_step()
    argv = ["diff", RUN, "--base-step", str(base), "--step", str(cand), "--no-progress"]
    out = io.StringIO()
    assert main(argv + ["--format", "json"], out) == 0, capsys.readouterr().err
    doc = json.loads(out.getvalue())
    s = doc["summary"]
    assert s["longest_call_us"] == pytest.approx(max(longest[base], longest[cand]), abs=1e-3)
    change = s["cand_time_per_core_us"] - s["base_time_per_core_us"]
    assert s["time_change_per_core_us"] == pytest.approx(change)
    within = 0 < abs(change) <= s["longest_call_us"]
    assert s["within_one_call"] is within is expected
    said = [n for n in doc["notes"] if "no more than the longest single op call" in n]
    assert bool(said) is within, doc["notes"]
    if within:
        assert f"({s['longest_call_us']:,.3g} µs)" in said[0]
    out = io.StringIO()
    assert main(argv, out) == 0
    assert ("no more than the longest single op call" in out.getvalue()) is within
