"""Device idle time split by what the trace proves, checked against the raw Kineto events.

The reference here reads the JSON itself (no reader, timeline or model code): for every idle
gap between a device's activities it finds the activity that ends the gap, its launch (the
first runtime event with its correlation id) and the waits for events its launching thread
issued since the previous launch on its stream. Before the launch is the host's time; from the
launch to 50 µs after it (or the call's return) the launch's latency; after that a wait. The
product's figures cover the leading and trailing gaps of each device too (from its first step
to its first activity, after its last one): the reference counts them for `ProfilerStep#`
steps, not for a serving engine's step annotations, so the product lies between the
reference's figure and that figure plus those gaps.
"""

from __future__ import annotations

import gzip
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.model.guidance.findings import guidance as model_guidance
from tb_roofline.model.records import roofline
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.serve.service.guidance import guidance_answer


def guidance(analysis, *args):
    """The `/guidance` answer the service lays out from the model's record."""
    return guidance_answer(model_guidance(analysis, *args))


HERE = TESTS
KINETO = os.path.join(HERE, "..", "testdata", "kineto")
RUNTIME = ("cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver")
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")
WAITS = ("cudaStreamWaitEvent", "hipStreamWaitEvent", "cuStreamWaitEvent")
LATENCY_US = 50.0
TRACES = {
    "sglang": "sglang_qwen3_8b_decode/worker0.pt.trace.json.gz",
    "b200": "b200_eager/worker0.1773700000000.pt.trace.json.gz",
    "a100_shapes": "a100_80gb_shapes/rank0.pt.trace.json.gz",
    "a100_alexnet": "a100_alexnet/worker0.1695835535.pt.trace.json.gz",
    "mi250": "mi250/worker0.pt.trace.json.gz",
    "h200_idle": "h200_idle_causes/h200.1764870900000.pt.trace.json.gz",
    "h200_graph": "h200_decode_graph/h200.1764870795000.pt.trace.json.gz",
}


def _events(name):
    with gzip.open(os.path.join(KINETO, TRACES[name]), "rt") as f:
        return json.load(f)["traceEvents"]


def by_hand(events) -> dict:
    """µs of device idle between a device's first and last activity, by the next activity's
    launch: before it, its latency, after it with a wait for an event on its stream, after it
    without one, and no launch in the trace; plus the leading / trailing gaps' length."""
    launch, waits = {}, {}
    for e in events:
        if e.get("cat") in RUNTIME and e.get("ph") == "X":
            thread = (e.get("pid"), e.get("tid"))
            corr = (e.get("args") or {}).get("correlation")
            if isinstance(corr, int) and corr >= 0:
                launch.setdefault(corr, (e["ts"], e["ts"] + e.get("dur", 0), thread))
            if e["name"] in WAITS:
                waits.setdefault(thread, []).append(e["ts"])
    out = dict.fromkeys(("before", "latency", "event_wait", "other_wait", "no_launch"), 0.0)
    acts: dict = {}
    for e in events:
        if e.get("cat") in DEVICE:
            acts.setdefault(e["args"].get("device", 0), []).append(e)
    steps = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    ]
    for dev_acts in acts.values():
        _device(dev_acts, launch, waits, out, steps)
    return out


def _device(acts, launch, waits, out, steps):
    """One device's gaps; with ProfilerStep# steps, also the time from the first step's start
    to the first activity (split by its launch) and from the last activity to the last step's
    end (nothing more is launched: the host's)."""
    acts = sorted(acts, key=lambda e: e["ts"])  # stable: file order among equal starts
    if steps:
        first, last = acts[0]["ts"], max(e["ts"] + e.get("dur", 0) for e in acts)
        out["before"] += max(0.0, max(e for _, e in steps) - last)
        lead = min(b for b, _ in steps)
        if lead < first:
            acts = [{"ts": lead, "dur": 0, "args": {}}] + acts
    prev_on_stream: dict = {}
    prev_launch = {}  # activity id -> launch time of the one before it on its stream
    for e in acts:
        s = e["args"].get("stream")
        prev_launch[id(e)] = prev_on_stream.get(s, float("-inf"))
        got = launch.get(e["args"].get("correlation"))
        prev_on_stream[s] = got[0] if got else float("-inf")
    reach = None
    for e in acts:
        g0, g1 = reach, e["ts"]
        reach = max(reach if reach is not None else g1, g1 + e.get("dur", 0))
        if g0 is None or g1 <= g0:
            continue
        got = launch.get(e["args"].get("correlation"))
        if got is None:
            out["no_launch"] += g1 - g0
            continue
        issue, ret, thread = got
        a = min(max(issue, g0), g1)
        c = min(max(max(ret, issue + LATENCY_US), g0), g1)
        out["before"] += a - g0
        out["latency"] += c - a
        waited = any(prev_launch[id(e)] < w < issue for w in waits.get(thread, ()))
        out["event_wait" if waited else "other_wait"] += g1 - c


def _product(name):
    data = read_kineto_file(os.path.join(KINETO, TRACES[name]), "h")
    g = guidance(roofline.analyze([data]))
    facts = next(
        f["evidence"]["facts"]
        for f in g["findings"]
        if f["rule"] in ("idle", "idle_wait", "launch_latency", "idle_undetermined")
    )
    return g, facts


def _outer(events) -> float:
    """The most the product adds beyond the interior gaps: from each device's first step
    annotation (or the trace's first event) to its first activity, and after its last one."""
    starts = [e["ts"] for e in events if e.get("ph") == "X" and "ts" in e]
    ends = [e["ts"] + e.get("dur", 0) for e in events if e.get("ph") == "X" and "ts" in e]
    dev = [e for e in events if e.get("cat") in DEVICE]
    first = min(e["ts"] for e in dev)
    last = max(e["ts"] + e.get("dur", 0) for e in dev)
    return (first - min(starts)) + (max(ends) - last)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TRACES))
def test_idle_split_by_launch_matches_the_raw_events(name):
    events = _events(name)
    hand = by_hand(events)
    g, facts = _product(name)
    outer = _outer(events)
    assert facts["launch_known"]
    product = {
        "before": facts["host_bound_us"] + facts["sync_us"],
        "latency": facts["launch_latency_us"],
        "event_wait": facts["event_wait_us"],
        "other_wait": facts["sync_wait_us"] + facts["memcpy_wait_us"] + facts["queued_us"],
        "no_launch": facts["no_launch_us"],
    }
    edges = facts["profile_edges_us"]  # the reference's step ends may reach outside steps
    for k, v in hand.items():
        assert v - edges - 1e-3 <= product[k] <= v + outer + 1e-3, (k, v, product[k], outer)
    # Host-bound is the time before the next launch, within 10 % where it is material.
    if hand["before"] > 0.05 * facts["idle_us"]:
        assert product["before"] == pytest.approx(hand["before"], rel=0.10)
    # The classes add up to the idle time, each instant once.
    parts = sum(product.values()) + facts["profile_edges_us"] + facts["graph_capture_us"]
    assert parts == pytest.approx(facts["idle_us"], rel=1e-6)


def test_sglang_wait_on_the_previous_batch_is_not_host_bound():
    """The SGLang decode step: the forward stream waits (hipStreamWaitEvent) for the previous
    batch for ~463 ms while the host blocks in hipMemcpyWithStream; the next kernels were
    launched long before they ran. That is a dependency wait with engine-scheduling advice,
    not host-bound idle with DataLoader advice."""
    events = _events("sglang")
    hand = by_hand(events)
    g, _ = _product("sglang")
    rules = {f["rule"]: f for f in g["findings"]}
    wait = rules["idle_wait"]
    assert wait["time_saved_us"] == pytest.approx(hand["event_wait"], rel=0.01)
    assert hand["event_wait"] > 0.9 * g["time"]["total_time_us"]
    assert "scheduling" in wait["suggestion"] and "DataLoader" not in wait["suggestion"]
    assert "hipStreamWaitEvent" in wait["suggestion"]
    assert wait["evidence"]["facts"]["event_wait_host_blocked_us"] > 0.9 * hand["event_wait"]
    # What preceded the launches is small: no host-bound finding claims the wait.
    host = rules.get("idle")
    assert host is None or host["time_saved_us"] < 0.01 * hand["event_wait"]
    assert wait["bound_us"] == pytest.approx(wait["time_saved_us"])


def test_h200_host_sleep_is_host_bound():
    """The H200 capture sleeps 3 ms on the host before each step's first launch (5 steps), then
    queues a GEMM, a side-stream GEMM behind an event, a pageable copy and `.item()`: the sleeps
    are host-bound time, before any launch, and the finding's advice is the host's."""
    events = _events("h200_idle")
    steps = [e for e in events if e.get("cat") == "user_annotation" and "Step#" in e["name"]]
    assert len(steps) == 5
    hand = by_hand(events)
    assert hand["before"] >= 5 * 3000
    g, facts = _product("h200_idle")
    (idle,) = [f for f in g["findings"] if f["rule"] == "idle"]
    assert facts["host_bound_us"] >= 5 * 3000
    assert idle["time_saved_us"] == pytest.approx(idle["bound_us"], rel=1e-6)
    assert "DataLoader" in idle["suggestion"]


def test_first_launch_loading_code_is_launch_latency():
    """MI250: one hipLaunchKernel call lasts 6.5 ms (the first launch loads the kernel's code):
    the device waits inside that call, which is launch latency, not host-bound time."""
    events = _events("mi250")
    slow = max(
        (e for e in events if e.get("cat") in RUNTIME and "Launch" in e.get("name", "")),
        key=lambda e: e.get("dur", 0),
    )
    assert slow["dur"] > 6000
    g, facts = _product("mi250")
    (f,) = [x for x in g["findings"] if x["rule"] == "launch_latency"]
    assert f["time_saved_us"] >= 0.95 * slow["dur"]
    assert "warm up" in f["suggestion"]


def test_no_runtime_events_leave_the_cause_undetermined(tmp_path):
    """The same SGLang decode trace with its runtime events removed: nothing says when the work
    was launched, so the idle time is undetermined rather than host-bound."""
    events = [e for e in _events("sglang") if e.get("cat") not in RUNTIME]
    path = tmp_path / "worker0.pt.trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    g = guidance(roofline.analyze([read_kineto_file(str(path), "h")]))
    rules = {f["rule"]: f for f in g["findings"]}
    assert "idle" not in rules and "idle_undetermined" in rules
    f = rules["idle_undetermined"]
    facts = f["evidence"]["facts"]
    assert facts["host_bound_us"] == 0 and facts["no_launch_us"] > 0.9 * facts["idle_us"]
    assert "cannot tell" in f["suggestion"]


def test_launch_split_by_hand():
    """One core, span and step 0-1000 µs; activities 100-200, 400-500, 600-700, 800-850 launched
    at 20 (returns 25), 210 (after a wait for an event), 590, and never. A blocking copy
    80-90, a sync 550-560. Gap 0-100: 20 before the launch, 50 latency, then 10 in the copy and
    20 queued; 200-400: 10 before, 50 latency, 140 event wait; 500-600: 90 before (10 in the
    sync), 10 latency; 700-800: no launch; 850-1000: nothing more launched, the host's."""
    from tb_roofline.table.timeline import IDLE_COPY, IDLE_SYNC
    from tb_roofline.table.timeline_builder import TimelineBuilder

    us = 1e6
    tb = TimelineBuilder()
    a = tb.label_id(("", "k", ""))
    nan = float("nan")
    tb.add_core(
        0,
        (0, 1000 * us),
        [(1, 0, 1000 * us)],
        lane=[0, 0, 0, 0],
        begin=[x * us for x in (100, 400, 600, 800)],
        end=[x * us for x in (200, 500, 700, 850)],
        op=[a] * 4,
        comm=[False] * 4,
        fusible=[False] * 4,
        causes={IDLE_COPY: ([80 * us], [90 * us]), IDLE_SYNC: ([550 * us], [560 * us])},
        launch=(
            [20 * us, 210 * us, 590 * us, nan],
            [25 * us, 215 * us, 595 * us, nan],
            [False, True, False, False],
        ),
    )
    got = {k: round(v / us, 6) for k, v in tb.build().idle_causes.items()}
    assert got == {
        "profile_edges": 0.0,
        "host_bound": 260.0,
        "sync": 10.0,
        "launch_latency": 110.0,
        "event_wait": 140.0,
        "event_wait_host_blocked": 0.0,
        "sync_wait": 0.0,
        "memcpy_wait": 10.0,
        "queued": 20.0,
        "no_launch": 100.0,
    }
    assert sum(v for k, v in got.items() if k != "event_wait_host_blocked") == 650.0
    # A launch recorded after its activity started (clocks that disagree) proves nothing.
    tb = TimelineBuilder()
    tb.add_core(
        0,
        (0, 300 * us),
        [(1, 0, 300 * us)],
        lane=[0, 0],
        begin=[0, 200 * us],
        end=[100 * us, 300 * us],
        op=[a, a],
        comm=[False] * 2,
        fusible=[False] * 2,
        launch=([0.0, 250 * us], [1.0, 251 * us], [False, False]),
    )
    got = {k: v / us for k, v in tb.build().idle_causes.items() if v}
    assert got == {"no_launch": 100.0}
