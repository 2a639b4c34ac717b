"""The `op` matching rule (docs/compare.md): an op run on both sides is never new or removed.
When one side calls an op with more input shapes (or precisions) than the other, all records
of that op are merged into one per side by the model and paired. Checked on a real PyTorch
trace with one shape of `aten::add_` taken out, on a hand-made trace whose merged record mixes
two precisions (every figure derived by hand), and over the real captured pairs."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import shutil

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.model.records.roofline import scoped_op_records
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
DATA = os.path.join(REPO, "testdata", "compare")
TORCH = os.path.join(DATA, "torch_cpu")
DROPPED = [[10], [10], []]  # the fc bias update of convnet_b16's optimizer step


def _model_pairs(service, base, cand, step=None) -> list[dict]:
    """The comparison's pairs unrounded (the model's columns, not the 6-digit answer)."""
    cmp, _, _ = service.comparison(base, cand, base_step=step, step=step)
    return [{k: v[i] for k, v in cmp.ops.columns.items()} for i in range(len(cmp.ops))]


def _check_invariants(service, base, cand, step=None) -> list[dict]:
    """No op new or removed while the other side runs it; each side's op self time summed
    over the pairs equals the sum of its records."""
    ps = _model_pairs(service, base, cand, step)
    ops = {
        s: {(p["program"], p[f"{s}_operation"]) for p in ps if p[f"{s}_operation"]}
        for s in ("base", "cand")
    }
    for p in ps:
        if p["status"] == "new":
            assert (p["program"], p["cand_operation"]) not in ops["base"], p
        if p["status"] == "removed":
            assert (p["program"], p["base_operation"]) not in ops["cand"], p
    for side, run in (("base", base), ("cand", cand)):
        a = service.analysis(run, "")
        rec = scoped_op_records(a, step or "Total", True, "op", split_by="fingerprint")
        want = float(rec.columns["total_self_time_us"].sum())
        got = float(np.nansum([p[f"{side}_total_self_time_us"] for p in ps]))
        assert got == pytest.approx(want, rel=1e-12), (side, base, cand)
    return ps


def _raw_events(path: str, name: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [
            e for e in json.load(f)["traceEvents"] if e.get("name") == name and e.get("ph") == "X"
        ]


@pytest.fixture(scope="module")
def fewer_shapes(tmp_path_factory):
    """convnet_b8 and convnet_b16 with every call of one `aten::add_` shape removed: the base
    calls aten::add_ with 7 shapes, the candidate with 6."""
    root = tmp_path_factory.mktemp("fewer_shapes")
    shutil.copytree(os.path.join(TORCH, "convnet_b8"), root / "b8")
    (root / "b16").mkdir()
    src = os.listdir(os.path.join(TORCH, "convnet_b16"))[0]
    with gzip.open(os.path.join(TORCH, "convnet_b16", src), "rt") as f:
        trace = json.load(f)
    trace["traceEvents"] = [
        e
        for e in trace["traceEvents"]
        if not (e.get("name") == "aten::add_" and e.get("args", {}).get("Input Dims") == DROPPED)
    ]
    with gzip.open(root / "b16" / src, "wt") as f:
        json.dump(trace, f)
    return root


def test_op_present_on_both_sides_pairs_at_op_level(fewer_shapes):
    service = RooflineService(str(fewer_shapes))
    shapes = {}
    for run in ("b8", "b16"):
        rec = scoped_op_records(
            service.analysis(run, ""), "Total", True, "op", split_by="fingerprint"
        )
        shapes[run] = int((rec.columns["operation"] == "aten::add_").sum())
    assert shapes == {"b8": 7, "b16": 6}  # one shape record is left over by rules 1-3
    ps = _check_invariants(service, "b8", "b16")
    assert not [p for p in ps if p["status"] != "matched"]
    merged = [p for p in ps if p["match_rule"] == "op"]
    assert [p["base_operation"] for p in merged] == ["aten::add_"]
    assert not [
        p
        for p in ps
        if p["match_rule"] != "op" and "aten::add_" in (p["base_operation"], p["cand_operation"])
    ]  # its shape records are all in the merge
    m = merged[0]
    assert m["base_fingerprint"] == m["cand_fingerprint"] == ""
    # Each side's merged record against the raw trace (calls, time) and the run's own /ops
    # records of aten::add_ (one per precision, made without the merge).
    for side, run in (("base", "b8"), ("cand", "b16")):
        path = os.path.join(fewer_shapes, run, os.listdir(fewer_shapes / run)[0])
        calls = _raw_events(path, "aten::add_")
        assert m[f"{side}_occurrences"] == len(calls)
        assert m[f"{side}_total_time_us"] == pytest.approx(sum(e["dur"] for e in calls), rel=1e-9)
        ops = service.ops(run, "")
        rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
        rows = [r for r in rows if r["operation"] == "aten::add_"]
        assert len(rows) == 2 and m[f"{side}_precision"] == "+".join(
            sorted(r["precision"] for r in rows)
        )
        for c in ("total_self_time_us", "flops", "bytes"):
            assert m[f"{side}_{c}"] == pytest.approx(sum(r[c] for r in rows), rel=1e-5), c
    tb, tc = m["base_total_self_time_us"], m["cand_total_self_time_us"]
    assert m["delta_time_us"] == pytest.approx(tc - tb, rel=1e-12)
    assert m["speedup"] == pytest.approx(tb / tc, rel=1e-12)
    assert m["change"] == ("faster" if tc < tb else "slower")
    # The answer says the same, and so does the average step.
    s = service.compare("b8", "b16")["summary"]
    assert s["new"] == s["removed"] == 0 and s["rules"]["op"] == 1
    avg = _check_invariants(service, "b8", "b16", step="Average")
    assert [p["base_operation"] for p in avg if p["match_rule"] == "op"] == ["aten::add_"]


def _synthetic(root):
    """Two hand-made CPU traces: the base calls aten::mm with two shapes in fp32 (twice) and
    fp64 (once), the candidate with the fp32 shape only; aten::relu on both."""

    def ev(name, ts, dur, dims, types):
        return {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": dur,
            "args": {"Input Dims": dims, "Input type": types},
        }

    f32 = ([[64, 64], [64, 64]], ["float", "float"])
    f64 = ([[128, 64], [64, 64]], ["double", "double"])
    relu = ([[64, 64]], ["float"])
    sides = {
        "base": [
            ("aten::mm", f32, 10.0),
            ("aten::mm", f32, 12.0),
            ("aten::mm", f64, 30.0),
            ("aten::relu", relu, 3.0),
        ],
        "cand": [("aten::mm", f32, 8.0), ("aten::relu", relu, 2.0)],
    }
    for side, calls in sides.items():
        (root / side).mkdir()
        events, ts = [], 1000.0
        for name, (dims, types), dur in calls:
            events.append(ev(name, ts, dur, dims, types))
            ts += dur + 1.0
        (root / side / "t.pt.trace.json").write_text(json.dumps({"traceEvents": events}))
    (root / "roofline_device.json").write_text(
        json.dumps(
            {
                "tb_roofline_device_file": 1,
                "type": "test CPU",
                "kind": "cpu",
                "num_cores": 1,
                "default_precision": "fp32",
                "compute": {"fp32": 200.0, "fp64": 100.0},
                "memories": {"hbm": {"name": "DRAM", "gbs": 40.0}},
            }
        )
    )


def test_merged_record_of_two_precisions_by_hand(tmp_path):
    _synthetic(tmp_path)
    service = RooflineService(str(tmp_path))
    ps = {p["base_operation"]: p for p in _check_invariants(service, "base", "cand")}
    assert set(ps) == {"aten::mm", "aten::relu"}
    mm = ps["aten::mm"]
    assert mm["status"] == "matched" and mm["match_rule"] == "op"
    assert ps["aten::relu"]["match_rule"] == "name"
    mm32, mm64 = 2 * 64 * 64 * 64, 2 * 128 * 64 * 64  # FLOPs per call: 2 M N K
    flops_b = 2 * mm32 + mm64
    bytes_b = 2 * (3 * 64 * 64) * 4 + (128 * 64 + 64 * 64 + 128 * 64) * 8  # A, B and C
    time_b, time_c = 52.0, 8.0  # µs
    peak_b = flops_b / (2 * mm32 / 200.0 + mm64 / 100.0)  # each part on its own ceiling
    rate_b, rate_c = flops_b / (time_b * 1e3), mm32 / (time_c * 1e3)  # GFLOP/s
    expected = {
        "precision": ("fp32+fp64", "fp32"),
        "occurrences": (3, 1),
        "total_self_time_us": (time_b, time_c),
        "flops": (flops_b, mm32),
        "bytes": (bytes_b, 3 * 64 * 64 * 4),
        "peak_flop_rate": (peak_b, 200.0),
        "flop_rate": (rate_b, rate_c),
        "bound_by": ("Compute", "Compute"),
        "roofline_efficiency": (rate_b / peak_b, rate_c / 200.0),
    }
    for c, (b, cand) in expected.items():
        if isinstance(b, str):  # names compare exactly; approx is for numbers only
            assert (mm[f"base_{c}"], mm[f"cand_{c}"]) == (b, cand), c
            continue
        assert mm[f"base_{c}"] == pytest.approx(b, rel=1e-12), c
        assert mm[f"cand_{c}"] == pytest.approx(cand, rel=1e-12), c
    assert mm["delta_time_us"] == pytest.approx(time_c - time_b, rel=1e-12)
    assert mm["speedup"] == pytest.approx(time_b / time_c, rel=1e-12)
    assert mm["delta_flop_rate"] == pytest.approx(rate_c - rate_b, rel=1e-12)
    assert mm["delta_operational_intensity"] == pytest.approx(
        mm32 / (3 * 64 * 64 * 4) - flops_b / bytes_b, rel=1e-12
    )
    assert mm["delta_roofline_efficiency"] == pytest.approx(
        rate_c / 200.0 - rate_b / peak_b, rel=1e-12
    )
    assert mm["roof_changed"] and not mm["bound_by_changed"]
    answer = service.compare("base", "cand")
    assert answer["summary"]["rules"] == {"op": 1, "name": 1}
    assert any("another precision" in n for n in answer["notes"])


@pytest.mark.parametrize("framework", ["torch_cpu", "jax_cpu"])
def test_no_op_run_on_both_sides_is_new_or_removed(framework):
    """Every ordered pair of the real captured runs of one framework (what is new or removed
    there is ops the other side does not run: other models, unfused ops, layout copies)."""
    service = RooflineService(DATA)
    runs = [r["run"] for r in service.list_runs()["runs"] if r["run"].startswith(framework)]
    assert len(runs) >= 3
    for base, cand in itertools.permutations(runs, 2):
        _check_invariants(service, base, cand)
