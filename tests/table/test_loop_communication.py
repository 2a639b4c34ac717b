"""Communication inside loops (testdata/jax_cpu_collectives: `pipeline_scan`, a pipeline
`ppermute` inside `lax.scan`; `psum_while`, a `psum` inside a `lax.while_loop`). XLA's `while`
event encloses each iteration's ops: counted as work, it would hide every collective inside it.

The reference is worked out here from the raw events, decoded with the XSpace protobuf (not the
reader): every `/host:CPU` event with an `hlo_op` stat, its opcode from the capture's
`module.hlo.txt`; collectives are communication, `while`/`call`/`conditional` containers are
neither, the rest is work. Exposed communication = measure(collectives ∪ work) − measure(work)
over the plane (XLA on CPU is one core, its device threads its lanes). The loop-free captures
check the same reference, so the rule that loops needed changes nothing without them.
"""

from __future__ import annotations

import glob
import os
import re
import shutil

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace
from tb_roofline.readers.xspace.xplane import load_xspace
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.table.op_table import NO_STEP
from tb_roofline.table.timeline_builder import TimelineBuilder

REPO = os.path.dirname(TESTS)
DATA = os.path.join(REPO, "testdata", "jax_cpu_collectives")
LOOPS = ("pipeline_scan", "psum_while")
CASES = sorted(os.listdir(DATA))
COLLECTIVES = {
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "all-reduce-start",
    "all-reduce-done",
    "all-gather-start",
    "all-gather-done",
    "collective-permute-start",
    "collective-permute-done",
}
CONTAINERS = {"while", "call", "conditional"}
# `%name = <shape> opcode(operands)...`: the opcode is the first `word(` after the name.
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+) = .*?\s([a-z][a-z\-]*)\(", re.M)


def _xplane(case):
    (path,) = glob.glob(f"{DATA}/{case}/plugins/profile/*/*.xplane.pb")
    return path


def _opcodes(case) -> dict:
    with open(f"{DATA}/{case}/module.hlo.txt") as f:
        return dict(INSTRUCTION.findall(f.read()))


def _union(begin, end) -> float:
    """Measure of a union of intervals, by a sort and a sweep."""
    total, start, reach = 0, None, None
    for b, e in sorted(zip(begin, end)):
        if reach is None or b > reach:
            if reach is not None:
                total += reach - start
            start, reach = b, e
        else:
            reach = max(reach, e)
    return float(total + (reach - start if reach is not None else 0))


def _text(s, stat) -> str:
    """A text stat: written inline or as a reference to a stat metadata's name."""
    return s.str_value or (stat[s.ref_value] if s.ref_value else "")


def _raw(case) -> dict:
    """ps intervals by kind ("comm", "container", "work") of the raw op events, all devices."""
    out: dict = {"comm": ([], []), "container": ([], []), "work": ([], [])}
    for raw in _raw_by_device(case).values():
        for kind, (b, e) in raw.items():
            out[kind][0].extend(b)
            out[kind][1].extend(e)
    return out


def _raw_by_device(case) -> dict:
    """`_raw` per XLA device (the events' `device_ordinal`): each device is its own timeline."""
    space = xplane_pb2.XSpace()
    with open(_xplane(case), "rb") as f:
        space.ParseFromString(f.read())
    (plane,) = [p for p in space.planes if p.name == "/host:CPU"]
    stat = {k: m.name for k, m in plane.stat_metadata.items()}
    opcodes = _opcodes(case)
    out: dict = {}
    for line in plane.lines:
        base = line.timestamp_ns * 1000
        for ev in line.events:
            op = next((_text(s, stat) for s in ev.stats if stat[s.metadata_id] == "hlo_op"), "")
            if not op:
                continue
            dev = next(
                (
                    s.int64_value or s.uint64_value
                    for s in ev.stats
                    if stat[s.metadata_id] == "device_ordinal"
                ),
                0,
            )
            code = opcodes[op]
            kind = "comm" if code in COLLECTIVES else "container" if code in CONTAINERS else "work"
            by_kind = out.setdefault(
                dev, {"comm": ([], []), "container": ([], []), "work": ([], [])}
            )
            by_kind[kind][0].append(base + ev.offset_ps)
            by_kind[kind][1].append(base + ev.offset_ps + ev.duration_ps)
    return out


def _reference_exposed_ps(case) -> float:
    """Σ over devices of union(collectives ∪ work) − union(work)."""
    total = 0.0
    for raw in _raw_by_device(case).values():
        comm, work = raw["comm"], raw["work"]
        total += _union(comm[0] + work[0], comm[1] + work[1]) - _union(*work)
    return total


def _busy_ps(case) -> float:
    """Σ over devices of the union of every op event (the loops' own time included)."""
    total = 0.0
    for raw in _raw_by_device(case).values():
        total += _union(sum((raw[k][0] for k in raw), []), sum((raw[k][1] for k in raw), []))
    return total


def _timeline(case):
    return read_gpu_cpu_xspace(load_xspace(_xplane(case)), "vm").timeline


@pytest.mark.parametrize("case", CASES)
def test_exposed_communication_from_the_raw_events(case):
    """Every capture, with loops or not: the windows' exposed time and the per-op contributors
    equal the union of collectives less the union of work, from the raw events."""
    ref = _reference_exposed_ps(case)
    raw = _raw(case)
    assert raw["comm"][0], "every capture runs collectives"
    assert bool(raw["container"][0]) == (case in LOOPS)
    tl = _timeline(case)
    exposed = float(tl.windows["exposed_ps"].sum())
    assert ref > 0
    assert exposed == pytest.approx(ref, rel=1e-9)
    assert sum(tl.exposed_by_op.values()) == pytest.approx(ref, rel=1e-9)
    # busy is still every op's union (the loops' own time included); compute = busy − exposed
    w = tl.windows
    assert float(w["busy_ps"].sum()) == pytest.approx(_busy_ps(case), rel=1e-9)
    assert np.allclose(w["compute_ps"] + w["exposed_ps"], w["busy_ps"], rtol=1e-12, atol=1)


@pytest.mark.parametrize("case", LOOPS)
def test_the_loop_would_hide_everything(case):
    """The loop's `while` event spans every collective in it: counted as work, nothing would be
    exposed. With it left out, a fifth or more of the profiled time is collectives alone."""
    hidden = 0.0
    for raw in _raw_by_device(case).values():
        (cb, ce) = raw["container"]
        comm_b, comm_e = raw["comm"]
        loops_and_work = _union(cb + raw["work"][0], ce + raw["work"][1])
        everything = _union(cb + raw["work"][0] + comm_b, ce + raw["work"][1] + comm_e)
        hidden += everything - loops_and_work
    assert hidden < 0.01 * _reference_exposed_ps(case)
    tl = _timeline(case)
    span = float(tl.windows["span_ps"].sum())
    assert float(tl.windows["exposed_ps"].sum()) > 0.15 * span


@pytest.mark.parametrize("case", LOOPS)
def test_every_front_end_sees_the_exposed_time(tmp_path, case):
    """The step-time class "communication", the `exposed_communication` finding and `/comm`'s
    `exposed_us` (the answers every front end reads) hold the reference, in µs."""
    ref_us = _reference_exposed_ps(case) / 1e6
    shutil.copytree(f"{DATA}/{case}", tmp_path / case)
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    g = service.guidance(run, "")
    classes = {c["class"]: c["time_us"] for c in g["classes"]}
    assert classes["communication"] == pytest.approx(ref_us, rel=1e-6)
    (f,) = [x for x in g["findings"] if x["rule"] == "exposed_communication"]
    facts = f["evidence"]["facts"]
    assert facts["exposed_us"] == pytest.approx(ref_us, rel=1e-6)
    (top,) = facts["contributors"]
    assert top["exposed_us"] == pytest.approx(ref_us, rel=1e-6)
    (point,) = service.comm(run, "")["points"]
    assert point["exposed_us"] == pytest.approx(ref_us, rel=1e-6)
    assert point["kind"] == ("collective-permute" if case == "pipeline_scan" else "all-reduce")


def test_loop_containers_are_decided_by_enclosure():
    """By hand, lane 0: a `while` 0-100 enclosing work 0-30 (same start, listed after it) and a
    collective 30-90: 60 exposed. Lane 1: a `call` 200-250 that encloses nothing (the only
    record of what ran) hides the collective on lane 2 at 210-240."""
    tb = TimelineBuilder()
    w, a, x, c, y = (tb.label_id(("p", n, "")) for n in ("while", "a", "x", "call", "y"))
    tb.add_core(
        0,
        (0, 300),
        [(1, 0, 300)],
        lane=[0, 0, 0, 1, 2],
        begin=[0, 0, 30, 200, 210],
        end=[30, 100, 90, 250, 240],
        op=[a, w, x, c, y],
        comm=[False, False, True, False, True],
        fusible=[False] * 5,
        leaf=[True, False, True, False, True],
    )
    t = tb.build()
    ws = {k: v.tolist() for k, v in t.windows.items()}
    assert ws["step"] == [1, NO_STEP]
    assert ws["busy_ps"] == [150, 0] and ws["exposed_ps"] == [60, 0]
    assert ws["compute_ps"] == [90, 0]  # work 30 + the loop's own 10 + the call's 50
    assert t.exposed_by_op == {("p", "x", ""): 60.0}
