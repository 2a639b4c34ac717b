"""The binding roof's id comes from the model (records.binding_roof_ids) in the program and op
answers: every record bound by a memory names that memory's id in the device answer, and the
id agrees with the memory the record's `bound_by` names (the name rule clients used to apply)."""

from __future__ import annotations

import os

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
CASES = [
    ("demo", "v4_pod/2026_11_29_11_30_00"),
    ("demo", "v6e_train/2026_11_29_10_00_00"),
    ("kineto", "a100_80gb_shapes"),
    ("kineto", "a100_alexnet"),
]


def _named(memories, bound_by):
    """The memory a `bound_by` names: equal to its name or id, or its name before a bracket."""
    hits = [
        m
        for m in memories
        if m["name"] == bound_by or m["id"] == bound_by or m["name"].startswith(f"{bound_by} (")
    ]
    assert len(hits) <= 1, (bound_by, hits)
    return hits[0] if hits else None


@pytest.mark.parametrize("logdir,run", CASES)
def test_binding_roof_id_is_the_memory_bound_by_names(logdir, run):
    s = RooflineService(os.path.join(REPO, "testdata", logdir))
    memories = s.device(run, "")["device"]["memories"]
    seen = set()
    for answer in (s.program(run, ""), s.ops(run, "")):
        rows = [dict(zip(answer["columns"], r)) for r in answer["rows"]]
        for r in rows:
            rid, bound = r["binding_roof_id"], r["bound_by"]
            if bound == "Compute":
                assert rid == "compute"
            elif bound in ("Unknown", "Async"):
                assert rid is None
            else:
                m = _named(memories, bound)
                assert m is not None and rid == m["id"], (r["operation"], bound, rid)
            seen.add(rid)
    assert "compute" in seen or "hbm" in seen


@pytest.mark.parametrize(
    "base,run",
    [
        ("v6e_train/2026_11_29_10_00_00", "v4_pod/2026_11_29_11_30_00"),
        ("v4_pod/2026_11_29_11_30_00", "v4_pod/2026_11_29_11_30_00"),
    ],
)
def test_compare_sides_carry_their_own_devices_roof_ids(base, run):
    """Each side of a pair names its binding roof by an id of its own device's memories (two
    devices: v6e base, v4 candidate with CMEM), in op and program pairs; a missing side has
    none. The browser draws the comparison's roofs from these ids."""
    s = RooflineService(os.path.join(REPO, "testdata", "demo"))
    memories = {
        "base": s.device(base, "")["device"]["memories"],
        "cand": s.device(run, "")["device"]["memories"],
    }
    seen = set()
    for level in ("op", "program"):
        answer = s.compare(base, run, level=level)
        table = answer if level == "op" else answer["program"]
        assert {"base_binding_roof_id", "cand_binding_roof_id"} <= set(table["columns"])
        for p in (dict(zip(table["columns"], r)) for r in zip(*table["values"])):
            for side in ("base", "cand"):
                rid, bound = p[f"{side}_binding_roof_id"], p[f"{side}_bound_by"]
                if bound is None or bound in ("Unknown", "Async"):
                    assert rid is None
                elif bound == "Compute":
                    assert rid == "compute"
                else:
                    m = _named(memories[side], bound)
                    assert m is not None and rid == m["id"], (side, bound, rid)
                seen.add((side, rid))
    assert ("cand", "cmem_read") in seen and ("base", "hbm") in seen


def test_bound_classes_on_hand_made_names():
    """By hand: every name `resources` gives a memory is memory-bound, "Compute" is
    compute-bound, Unknown and Async are neither."""
    from tb_roofline.model.records.records import bound_classes, resources

    s = RooflineService(os.path.join(REPO, "testdata", "kineto"))
    device = s.analysis("a100_80gb_shapes", "").device
    memories = [name for name, _, _ in resources(device)]
    assert "HBM" in memories and len(memories) >= 2  # (HBM and the host link at least)
    names = ["Compute", "Unknown", "Async"] + memories
    compute, memory = bound_classes(names, device)
    assert compute.tolist() == [True, False, False] + [False] * len(memories)
    assert memory.tolist() == [False, False, False] + [True] * len(memories)


@pytest.mark.parametrize("logdir,run", CASES + [("guidance", "torch/elementwise_chain")])
def test_the_rules_read_compute_and_memory_bound_off_the_binding_roof(logdir, run):
    """The guidance rules and the step time's classes take compute- and memory-bound from
    the records' binding roof (the one sent as `binding_roof_id`), never from names of their
    own: compute-bound exactly where it is "compute", memory-bound exactly where it is a
    memory's id."""
    from tb_roofline.model.guidance import advice
    from tb_roofline.model.guidance.rule_context import Context

    s = RooflineService(os.path.join(REPO, "testdata", logdir))
    a = s.analysis(run, "")
    answer = s.ops(run, "")
    ids = [dict(zip(answer["columns"], r))["binding_roof_id"] for r in answer["rows"]]
    ops = a.ops[True]
    assert ops.columns["operation"].tolist() == [
        dict(zip(answer["columns"], r))["operation"] for r in answer["rows"]
    ]
    ctx = Context(ops, a.device, a.facts, 1.0, a.num_steps, "xla", advice.XLA)
    assert ctx.compute_bound.tolist() == [i == "compute" for i in ids]
    assert ctx.memory_bound.tolist() == [i not in (None, "compute") for i in ids]
    assert ctx.compute_bound.any() or ctx.memory_bound.any()
