"""Guidance an expert can act on: a graph capture read as a capture, collectives as
communication, integer work without a FLOP roof, one unit per view, capture diagnostics, peaks
the profile's own ops beat, the speedup label's sign and a throttled clock's bound; each
against the raw profile or a hand-built op table."""

from __future__ import annotations

import glob
import gzip
import json
import os

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.devices.spec import ComputePeak, DeviceInfo, Fallback, MemoryPeak
from tb_roofline.model.compare.comparison import change_label
from tb_roofline.model.guidance.findings import guidance as model_guidance
from tb_roofline.model.records import peaks, roofline
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.service.guidance import guidance_answer
from tb_roofline.table.op_table import OpTableBuilder, ProfileData
from tb_roofline.table.spans import CoreSpan
from tb_roofline.table.timeline import (
    GRAPH_CAPTURE_CALLS,
    IDLE_CAPTURE,
    IDLE_SYNC,
    SYNC_CALLS,
    paired_spans,
)
from tb_roofline.table.timeline_builder import TimelineBuilder


def guidance(analysis, *args):
    """The `/guidance` answer the service lays out from the model's record."""
    return guidance_answer(model_guidance(analysis, *args))


TESTDATA = os.path.join(TESTS, "..", "testdata")
GUIDANCE = os.path.join(TESTDATA, "guidance")
VLLM = glob.glob(os.path.join(GUIDANCE, "vllm", "graph_capture", "*.pt.trace.json.gz"))[0]
US = 1_000_000


def _union(intervals):
    out = []
    for b, e in sorted(intervals):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        elif e > b:
            out.append([b, e])
    return out


def _overlap(a, b):
    return sum(max(0.0, min(e1, e2) - max(b1, b2)) for b1, e1 in a for b2, e2 in b)


def test_graph_capture_is_not_an_idle_host(monkeypatch):
    """The real vLLM MI300X trace: 25 hipStreamBeginCapture .. EndCapture spans hold most
    launches, so the device idles while graphs are recorded. The capture spans (which the
    Kineto reader does not hand over yet) come from the raw trace through
    timeline.paired_spans; the idle time inside them is checked by hand against the kernels."""
    with gzip.open(VLLM, "rt") as f:
        events = json.load(f)["traceEvents"]
    rt = [e for e in events if e.get("cat") == "cuda_runtime" and e.get("ph") == "X"]
    cap_b, cap_e = paired_spans(
        [e["name"] for e in rt],
        [e["ts"] for e in rt],
        [e["ts"] + e["dur"] for e in rt],
        [e["tid"] for e in rt],
        *GRAPH_CAPTURE_CALLS,
    )
    assert len(cap_b) == 25
    syncs = [(e["ts"], e["ts"] + e["dur"]) for e in rt if e["name"] in SYNC_CALLS]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    first_us = min(e["ts"] for e in device)
    real_add_core = TimelineBuilder.add_core

    def add_core(self, core, span, steps, lane, begin, end, *args, **kw):
        offset = float(np.min(begin)) - first_us * US  # the reader's clock, in ps
        kw["causes"] = {
            IDLE_CAPTURE: (cap_b * US + offset, cap_e * US + offset),
            IDLE_SYNC: (
                np.array([b for b, _ in syncs]) * US + offset,
                np.array([e for _, e in syncs]) * US + offset,
            ),
        }
        return real_add_core(self, core, span, steps, lane, begin, end, *args, **kw)

    monkeypatch.setattr(TimelineBuilder, "add_core", add_core)
    a = roofline.analyze([read_kineto_file(VLLM, "h")])
    g = guidance(a)
    assert g["runtime"] == "cuda_graphs"
    (f,) = [x for x in g["findings"] if x["rule"] == "idle"]
    facts = f["evidence"]["facts"]
    # By hand: the capture spans' union less the device activity inside it.
    busy = _union([(e["ts"], e["ts"] + e["dur"]) for e in device])
    capture = _union(zip(cap_b.tolist(), cap_e.tolist()))
    by_hand = sum(e - b for b, e in capture) - _overlap(capture, busy)
    assert facts["graph_capture_us"] == pytest.approx(by_hand, rel=1e-6)
    assert facts["graph_capture_us"] >= 0.5 * facts["idle_us"]
    assert "captured" in f["title"] and "DataLoader" not in f["suggestion"]
    assert f["time_saved_us"] == pytest.approx(
        facts["idle_us"] - facts["graph_capture_us"] - facts["profile_edges_us"]
    )
    assert f["time_saved_us"] <= f["bound_us"] * (1 + 1e-9)
    assert "graph_capture" in {d["code"] for d in g["diagnostics"]}
    assert g["unit"]["name"] == "profile"  # no steps: one unit, the whole profile


def test_graph_capture_through_the_reader():
    """The same trace through the real pipeline (read_kineto_file -> analyze -> guidance): the
    Kineto reader keeps the capture and sync runtime calls itself. The capture share is checked
    against a hand count of the raw JSON's Begin .. EndCapture spans (paired here without
    paired_spans: per thread, each BeginCapture closes at the next EndCapture)."""
    with gzip.open(VLLM, "rt") as f:
        events = json.load(f)["traceEvents"]
    rt = sorted(
        (e for e in events if e.get("cat") == "cuda_runtime" and e.get("ph") == "X"),
        key=lambda e: (e["tid"], e["ts"]),
    )
    capture, syncs, open_at = [], [], {}
    for e in rt:
        if e["name"] == "hipStreamBeginCapture" and e["tid"] not in open_at:
            open_at[e["tid"]] = e["ts"]
        elif e["name"] == "hipStreamEndCapture" and e["tid"] in open_at:
            capture.append((open_at.pop(e["tid"]), e["ts"] + e["dur"]))
        elif e["name"] in SYNC_CALLS:
            syncs.append((e["ts"], e["ts"] + e["dur"]))
    assert len(capture) == 25 and not open_at and len(syncs) == 27
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    busy = _union([(e["ts"], e["ts"] + e["dur"]) for e in device])
    capture = _union(capture)
    by_hand = sum(e - b for b, e in capture) - _overlap(capture, busy)
    data = read_kineto_file(VLLM, "h")
    assert data.timeline.cause_span_ps[IDLE_CAPTURE] / US == pytest.approx(
        sum(e - b for b, e in capture), rel=1e-6
    )
    g = guidance(roofline.analyze([data]))
    (f,) = [x for x in g["findings"] if x["rule"] == "idle"]
    facts = f["evidence"]["facts"]
    assert facts["graph_capture_us"] == pytest.approx(by_hand, rel=1e-6)
    assert facts["graph_capture_us"] >= 0.5 * facts["idle_us"]
    assert facts["sync_us"] > 0
    assert "graph" in f["title"] and "captured" in f["title"]
    assert "DataLoader" not in f["suggestion"] and "host-bound" not in f["title"]
    assert f["time_saved_us"] <= f["bound_us"] * (1 + 1e-9)
    # Named as what it is: 25 captures over part of the trace, a piecewise capture.
    note = next(d for d in g["diagnostics"] if d["code"] == "graph_capture")
    span = sum(c.end_ps - c.start_ps for c in data.core_spans) / US
    share = sum(e - b for b, e in capture) * len(data.core_spans) / span
    assert share < 0.9 and note["message"].startswith(
        f"a piecewise graph capture: captures span {share:.0%} of the trace"
    )


def _device(compute=(), memories=()):
    d = DeviceInfo(type="test", kind="gpu", num_cores=1)
    d.compute += list(compute)
    d.memories += list(memories)
    return d


def _profile(rows, device):
    b = OpTableBuilder()
    for r in rows:
        r = dict(r)
        r.setdefault("hbm_bytes", r.get("bytes", 0.0))
        b.add(
            host="h",
            core=0,
            step=0,
            occurrences=1,
            flops_known=True,
            bytes_known=True,
            flops_source="formula",
            self_time_ps=r["total_time_ps"],
            **r,
        )
    span = int(sum(r["total_time_ps"] for r in rows))
    return ProfileData(
        device=device,
        ops=b.build(),
        steps=[],
        diagnostics=[],
        core_spans=[CoreSpan("h", 0, 0, span)],
    )


def _rows(a):
    return {r["operation"]: r for r in a.ops[True].row_dicts()}


def test_collectives_sit_under_the_interconnect_roof_only():
    """An all-reduce with bus bytes: under a 450 GB/s interconnect roof it is judged there (not
    on HBM, although its HBM bytes would place it there); without a link roof it has no time
    to save and no finding."""
    ar = dict(
        operation="nccl:all_reduce",
        category="collective",
        total_time_ps=1000 * US,
        flops=0.0,
        bytes=2e8,
        hbm_bytes=4e8,
        interconnect_bytes=2e8,
    )
    mm = dict(
        operation="aten::mm",
        category="matmul",
        precision="bf16",
        total_time_ps=1000 * US,
        flops=1e11,
        bytes=1e8,
    )
    compute = [ComputePeak("bf16", 312000.0, "datasheet")]
    hbm = MemoryPeak("hbm", "HBM", 2039.0, "datasheet")
    link = MemoryPeak("interconnect", "NVLink", 450.0, "datasheet")
    with_link = roofline.analyze([_profile([ar, mm], _device(compute, [hbm, link]))])
    r = _rows(with_link)["nccl:all_reduce"]
    assert r["bound_by"] == "Interconnect"
    assert r["roofline_efficiency"] == pytest.approx(2e8 / 1e-3 / 450e9)  # 0.444
    assert r["potential_time_saved_us"] == pytest.approx(1000 * (1 - 2e8 / 1e-3 / 450e9))
    no_link = roofline.analyze([_profile([ar, mm], _device(compute, [hbm]))])
    r = _rows(no_link)["nccl:all_reduce"]
    assert r["potential_time_saved_us"] is None  # never a point to win back on its HBM roof
    for a in (with_link, no_link):
        for f in guidance(a)["findings"]:
            assert all(o["operation"] != "nccl:all_reduce" for o in f["ops"])


def test_tpu_all_reduce_is_no_top_op_to_win_back():
    s = RooflineService(os.path.join(TESTDATA, "demo"))
    run = next(r["run"] for r in s.list_runs()["runs"] if r["run"].startswith("v6e"))
    rep = s.report(run, "", True, top=1000)
    comm = [r for r in rep["top_ops"] if "all-reduce" in r["category"]]
    assert comm
    for r in comm:  # only under the ICI roof (its bus bytes), never on its HBM roof
        saved = r["potential_time_saved_us"]
        if saved is not None:
            assert r["bound_by"] == "Interconnect"
            assert saved == pytest.approx(r["total_time_us"] * (1 - r["roofline_efficiency"]))
    for f in rep["guidance"]["findings"]:
        assert all("all-reduce" not in o["operation"] for o in f["ops"])


def test_integer_work_gets_no_floating_point_roof():
    """s32 and pred rows on a device with only bf16/fp32 roofs: no FLOP roof (never bf16's);
    s8 under the int8 roof when the device has one."""
    rows = [
        dict(
            operation=name,
            category="elementwise",
            precision=p,
            total_time_ps=100 * US,
            flops=1e9,
            bytes=1e6,
        )
        for name, p in (("sum_i", "s32"), ("mask", "pred"), ("q", "s8"), ("f", "fp32"))
    ]
    dev = _device(
        [
            ComputePeak("bf16", 312000.0, "datasheet"),
            ComputePeak("fp32", 19500.0, "datasheet"),
            ComputePeak("int8", 624000.0, "datasheet"),
        ],
        [MemoryPeak("hbm", "HBM", 2039.0, "datasheet")],
    )
    r = _rows(roofline.analyze([_profile(rows, dev)]))
    assert r["sum_i"]["peak_flop_rate"] == 0 and r["mask"]["peak_flop_rate"] == 0
    assert r["sum_i"]["bound_by"] == "HBM"  # judged by its bytes only
    assert r["q"]["peak_flop_rate"] == 624000.0 and r["f"]["peak_flop_rate"] == 19500.0


@pytest.mark.parametrize(
    "logdir,unit",
    [
        (os.path.join(TESTDATA, "kineto", "a100_80gb_shapes"), "step"),
        # vLLM's step annotations make its steps (readers/serving_steps.py)
        (os.path.join(TESTDATA, "kineto", "b200_eager"), "step"),
        (os.path.join(TESTDATA, "kineto", "a100_alexnet"), "profile"),
    ],
)
def test_one_unit_per_view(logdir, unit):
    s = RooflineService(logdir)
    run = s.list_runs()["runs"][0]["run"]
    g = s.guidance(run, "", True)
    assert g["unit"]["name"] == unit
    total, step = g["time"]["total_time_us"], g["time"]["step_time_us"]
    assert g["unit"]["time_us"] == step
    for f in g["findings"]:
        assert f["time_saved_per_unit_us"] == pytest.approx(f["time_saved_us"] * step / total)
    if unit == "profile":
        assert step == total and g["unit"]["label"] == "over the whole profile"
    rep = s.report(run, "", True, top=5)  # the report's top ops in the same unit
    assert rep["top_ops_unit"] == g["unit"]
    for r in rep["top_ops"]:
        if r["potential_time_saved_us"] is not None:
            assert r["potential_time_saved_per_unit_us"] == pytest.approx(
                r["potential_time_saved_us"] * step / total
            )


def test_speedup_labels_follow_the_sign():
    assert change_label(-0.7) == {"change": "faster", "change_label": "0.7% faster"}
    assert change_label(0.7) == {"change": "slower", "change_label": "0.7% slower"}
    assert change_label(0.0)["change"] == "same" and change_label(None)["change"] is None


def _rewrite(src, dst_dir, edit):
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    edit(doc)
    os.makedirs(dst_dir, exist_ok=True)
    with gzip.open(os.path.join(dst_dir, os.path.basename(src)), "wt") as f:
        json.dump(doc, f)


def test_diagnostics_say_what_to_capture(tmp_path):
    """A GPU trace with its CPU ops removed, and a CPU trace without shapes (generated from
    committed captures): each answer says what to record."""
    b200 = glob.glob(os.path.join(TESTDATA, "kineto", "b200_eager", "*.json.gz"))[0]
    cpu_only = ("cpu_op", "python_function", "user_annotation", "cpu_instant_event")

    def drop_cpu(doc):
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in cpu_only]

    _rewrite(b200, str(tmp_path / "no_cpu"), drop_cpu)
    chain = glob.glob(os.path.join(GUIDANCE, "torch", "elementwise_chain", "*.json.gz"))[0]

    def drop_shapes(doc):
        doc.pop("record_shapes", None)
        for e in doc["traceEvents"]:
            for k in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                e.get("args", {}).pop(k, None)

    _rewrite(chain, str(tmp_path / "no_shapes"), drop_shapes)
    s = RooflineService(str(tmp_path))
    codes = {
        r["run"]: {d["code"] for d in s.guidance(r["run"], "", True)["diagnostics"]}
        for r in s.list_runs()["runs"]
    }
    assert "no_cpu_ops" in codes["no_cpu"] and "no_shapes" in codes["no_shapes"]
    g = s.guidance("no_cpu", "", True)
    msg = next(d["message"] for d in g["diagnostics"] if d["code"] == "no_cpu_ops")
    assert "ProfilerActivity.CPU" in msg
    # The committed captures with CPU ops and shapes get neither.
    full = RooflineService(os.path.join(TESTDATA, "kineto", "a100_80gb_shapes"))
    run = full.list_runs()["runs"][0]["run"]
    assert not {"no_cpu_ops", "no_shapes"} & {
        d["code"] for d in full.guidance(run, "", True)["diagnostics"]
    }


@pytest.mark.slow
def test_a_trace_inside_one_capture_is_named_a_full_capture(tmp_path):
    """The vLLM trace made into one capture that began before the trace did: its captures'
    Begin calls removed and one EndCapture (no Begin) after its last event. The capture spans
    from the first runtime call to that End: a full capture, named so."""

    def one_capture(doc):
        ev = doc["traceEvents"]
        caps = [e for e in ev if e.get("name", "").endswith("StreamEndCapture")]
        end = max(e["ts"] + e.get("dur", 0) for e in ev if e.get("ph") == "X")
        last = dict(caps[-1], ts=end + 1, dur=1)
        doc["traceEvents"] = [
            e
            for e in ev
            if not e.get("name", "").endswith(("StreamBeginCapture", "StreamEndCapture"))
        ] + [last]

    _rewrite(VLLM, str(tmp_path / "full"), one_capture)
    s = RooflineService(str(tmp_path))
    note = next(
        d for d in s.guidance("full", "", True)["diagnostics"] if d["code"] == "graph_capture"
    )
    assert note["message"].startswith("a full graph capture")


def test_no_cpu_ops_only_when_the_trace_has_none(tmp_path):
    """A GPU trace whose CPU ops all carry non-aten names (an all-Inductor trace names its CPU
    ops like its kernels): it holds cpu_op events, so no `no_cpu_ops` note."""
    b200 = glob.glob(os.path.join(TESTDATA, "kineto", "b200_eager", "*.json.gz"))[0]

    def rename(doc):
        for e in doc["traceEvents"]:
            if e.get("cat") == "cpu_op":
                e["name"] = "triton_poi_fused_" + e["name"].replace("::", "_")

    _rewrite(b200, str(tmp_path / "renamed"), rename)
    s = RooflineService(str(tmp_path))
    codes = {d["code"] for d in s.guidance("renamed", "", True)["diagnostics"]}
    assert "no_cpu_ops" not in codes
    assert "no_cpu_ops" not in {d["code"] for d in s.diagnostics("renamed", "")["diagnostics"]}


def test_broadcast_tensors_is_not_communication():
    from tb_roofline.costs.torch import flops as torch_flops
    from tb_roofline.table.timeline import is_communication

    for name in ("aten::broadcast_tensors", "aten::broadcast_to"):
        assert not torch_flops.COMMUNICATION.search(name)
        assert not is_communication(torch_flops.category_of(name))
    for name in ("c10d::broadcast_", "nccl:broadcast", "ncclKernel_Broadcast_RING_LL"):
        assert torch_flops.COMMUNICATION.search(name)


def test_uncosted_reason_is_the_real_cause():
    """An op whose shapes are recorded but that has no formula says `no_formula`, not
    `no_shapes`; the same op without shapes says `no_shapes`."""
    from tb_roofline.readers.kineto.device import why_no_cost

    assert why_no_cost("aten::_embedding_bag_backward", "none", True) == "no_formula"
    assert why_no_cost("aten::_embedding_bag_backward", "none", False) == "no_shapes"
    assert why_no_cost("my::op", "none", False) == "no_formula"


def test_hw_counter_record_absence_is_explained():
    for name, has in (("a100_80gb_shapes", False), ("a100_cupti_counters", True)):
        s = RooflineService(os.path.join(TESTDATA, "kineto", name))
        run = s.list_runs()["runs"][0]["run"]
        codes = {d["code"] for d in s.diagnostics(run, "")["diagnostics"]}
        assert ("no_hw_counters" in codes) != has, name


def _beaten(device):
    """An op moving 3,000 GB/s (3e9 B in 1 ms) on a device whose profile says 2,000 GB/s."""
    rows = [
        dict(operation="copy.1", category="copy", total_time_ps=1000 * US, flops=0.0, bytes=3e9)
    ]
    return roofline.analyze([_profile(rows, device)])


def test_beaten_profile_peak_is_replaced_without_compute_peaks():
    """No compute peaks known: the profile's HBM figure beaten by its own op is still
    replaced, by the data sheet's figure when that holds, else by the op's own rate."""
    sheet = MemoryPeak("hbm", "HBM", 2000.0, "profile", fallback=Fallback(8000.0, "sheet"))
    a = _beaten(_device([], [sheet]))
    hbm = a.device.memory("hbm")
    assert not a.device.peaks_known
    assert hbm.gbs == 8000.0 and hbm.source == "datasheet"
    assert any(d.code == "peak_replaced" for d in a.diagnostics)
    none = MemoryPeak("hbm", "HBM", 2000.0, "profile")
    a = _beaten(_device([ComputePeak("fp32", 1000.0, "profile")], [none]))
    hbm = a.device.memory("hbm")
    assert hbm.gbs == pytest.approx(3e9 / 1e-3 / 1e9) and hbm.source == "measured"
    note = next(d.message for d in a.diagnostics if d.code == "peak_replaced")
    assert "no data-sheet figure" in note
    assert _rows(a)["copy.1"]["caveat"] is None  # at its (new) roof, not above it
    assert peaks.settle(a.device, OpTableBuilder().build(), None, None) == (a.device, [])


def _xla_pair(shapes: bool):
    """Two XLA loop fusions run back to back twice on one op line; with `shapes`, the reader's
    `tensor` shapes say both touch f32[128,1024] (output of the first, operand of the second)."""
    from tb_roofline.table.timeline import ShapeUse

    dev = _device(
        [ComputePeak("default", 100_000.0, "profile")],
        [MemoryPeak("hbm", "HBM", 1000.0, "profile")],
    )
    b = OpTableBuilder()
    for name in ("add.1", "reduce.2"):
        b.add(
            host="h",
            core=0,
            step=0,
            occurrences=2,
            program_id="1",
            operation=name,
            category="loop fusion",
            flops_known=True,
            bytes_known=True,
            flops_source="profile",
            total_time_ps=200 * US,
            self_time_ps=200 * US,
            flops=1e6,
            bytes=2e7,
            hbm_bytes=2e7,
        )
    tb = TimelineBuilder()
    a, r = tb.label_id(("1", "add.1", "")), tb.label_id(("1", "reduce.2", ""))
    tb.add_core(
        0,
        (0, 500 * US),
        [],
        lane=[0] * 4,
        begin=np.array([0, 100, 250, 350]) * US,
        end=np.array([100, 200, 350, 450]) * US,
        op=[a, r, a, r],
        comm=[False] * 4,
        fusible=[True] * 4,
    )
    use = [
        ShapeUse("tensor", ((128, 1024), (128, 1024)), "f32[128,1024] f32[128,1024]", 2, 200 * US)
    ]
    op_shapes = {("1", "add.1", ""): use, ("1", "reduce.2", ""): use} if shapes else None
    return ProfileData(
        device=dev,
        ops=b.build(),
        steps=[],
        diagnostics=[],
        core_spans=[CoreSpan("h", 0, 0, 500 * US)],
        timeline=tb.build(),
        op_shapes=op_shapes,
    )


def test_xla_fusion_needs_a_shared_tensor_from_the_reader():
    """XLA pairs carry no PyTorch shapes: without the HLO's arrays no fusion finding (nothing
    proves they share a tensor); with them, the intermediate's write and read at HBM speed."""
    assert not [
        f
        for f in guidance(roofline.analyze([_xla_pair(False)]))["findings"]
        if f["rule"] == "fusion"
    ]
    g = guidance(roofline.analyze([_xla_pair(True)]))
    (f,) = [f for f in g["findings"] if f["rule"] == "fusion"]
    bound = 2 * 2 * 128 * 1024 * 4 / (1000.0 * 1e3)  # pairs × 2 × bytes ÷ GB/s, µs
    assert f["bound_us"] == pytest.approx(bound) and f["time_saved_us"] == pytest.approx(bound)
    assert f["evidence"]["facts"]["shared_shape"] == [128, 1024]
    assert g["runtime"] == "xla" and "torch" not in f["suggestion"]


def test_idle_causes_by_hand():
    """One core, span 0-100, one step 10-60, ops 20-30 and 70-80; a capture 25-50, a sync
    45-65. Idle: 0-20, 30-70, 80-100 (80). Capture takes 30-50 (20), the sync 50-65 (15, its
    45-50 is the capture's), the edges what is left of 0-20 and 80-100 outside the step: 0-10
    and 80-100 (30); the rest (10-20, 65-70) is the host's."""
    tb = TimelineBuilder()
    a = tb.label_id(("p", "a", ""))
    tb.add_core(
        0,
        (0, 100),
        [(1, 10, 50)],
        lane=[0, 0],
        begin=[20, 70],
        end=[30, 80],
        op=[a, a],
        comm=[False, False],
        fusible=[False, False],
        causes={
            IDLE_CAPTURE: (np.array([25.0]), np.array([50.0])),
            IDLE_SYNC: (np.array([45.0]), np.array([65.0])),
        },
    )
    t = tb.build()
    assert t.idle_causes == {"graph_capture": 20.0, "sync": 15.0, "profile_edges": 30.0}
    assert t.cause_span_ps == {"graph_capture": 25.0, "sync": 20.0}
    names = ["hipStreamBeginCapture", "x", "hipStreamEndCapture", "cudaStreamBeginCapture"]
    b = paired_spans(names, [0, 1, 2, 5], [0.5, 1.5, 3, 6], [7, 7, 7, 8], *GRAPH_CAPTURE_CALLS)
    assert b[0].tolist() == [0.0, 5.0] and b[1].tolist() == [3.0, 6.0]  # unclosed: to the end
    # A trace inside one capture (it began before the trace): its first close, without an
    # open, spans from the first call; a later stray close does not.
    names = ["x", "cudaStreamEndCapture", "cudaStreamEndCapture", "y"]
    b = paired_spans(names, [1, 4, 6, 8], [2, 5, 7, 9], [3, 3, 3, 3], *GRAPH_CAPTURE_CALLS)
    assert b[0].tolist() == [1.0] and b[1].tolist() == [5.0]


def test_host_offload_overlap_is_bounded_by_the_work_beside_it():
    """A TPU host-offload program (the demo generator's async copies to and from host memory):
    the copies run alone most of the time, but overlap can hide at most the op work there is;
    the rest is the host link itself."""
    from tb_roofline.readers.xspace.read import read_xspace
    from tb_roofline.synthetic import SynthConfig, make_tpu_xspace

    a = roofline.analyze(
        [read_xspace(make_tpu_xspace(SynthConfig(seed=3, chip="v6e", host_offload_pairs=16)), "h")]
    )
    g = guidance(a)
    (f,) = [x for x in g["findings"] if x["rule"] == "exposed_communication"]
    cls = {c["class"]: c["time_us"] for c in g["classes"]}
    work = cls["compute_bound"] + cls["memory_bound"] + cls["unknown"]
    assert cls["communication"] > 3 * work  # the copies dominate
    assert f["time_saved_us"] == pytest.approx(work) == f["bound_us"]
    assert f["counted_us"] <= work - sum(x["counted_us"] for x in g["findings"] if x["ops"]) + 1e-6
    assert "link itself" in f["suggestion"] and "DataLoader" not in f["suggestion"]
    assert g["runtime"] == "xla" and "ICI" in f["suggestion"]


def test_clock_throttled_bound_from_the_raw_clock_samples():
    """clock_throttled: the bound Σ overlap × (1 − clock / rated) over the SM-clock samples below
    99% of the H100 SXM's rated 1,980 MHz (its whitepaper), recomputed from the counter events."""
    run = os.path.join(TESTDATA, "kineto", "pm_sampling_pytorch")
    (path,) = glob.glob(os.path.join(run, "*.pt.trace.json.gz"))
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    clock = sorted(
        (e["ts"], e["args"][""])
        for e in events
        if e.get("ph") == "C" and e.get("name") == "SM Clock (MHz)"
    )
    ts, mhz = (np.array(c, float) for c in zip(*clock))
    interval = float(np.median(np.diff(ts)))
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("name", "").startswith("ProfilerStep#")
    )
    bound = 0.0
    for lo, hi in steps:
        ov = np.clip(np.minimum(ts + interval, hi) - np.maximum(ts, lo), 0, None)
        slow = mhz < 0.99 * 1980.0
        bound += float((ov * (1 - mhz / 1980.0))[slow].sum())
    s = RooflineService(os.path.join(TESTDATA, "kineto"))
    (f,) = [
        f
        for f in s.guidance("pm_sampling_pytorch", "")["findings"]
        if f["rule"] == "clock_throttled"
    ]
    assert bound > 0 and f["bound_us"] == pytest.approx(bound, rel=1e-9)
    assert f["time_saved_us"] == f["bound_us"] and f["counted_us"] == 0.0
