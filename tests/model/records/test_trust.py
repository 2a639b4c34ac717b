"""Every figure is a measurement under its true roof or says why not: one real or
realistic profile per finding, each checked against a reference computed here, plus a suite-wide
invariant over every profile in testdata/ and every view."""

from __future__ import annotations

import glob
import gzip
import json
import os
import re

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.costs.hlo.text import parse_instruction
from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.model.guidance.findings import guidance as model_guidance
from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.service.guidance import guidance_answer


def guidance(analysis, *args):
    """The `/guidance` answer the service lays out from the model's record."""
    return guidance_answer(model_guidance(analysis, *args))


ROOT = os.path.join(os.path.dirname(TESTS), "testdata")
A100 = os.path.join(ROOT, "kineto", "a100_80gb_shapes")
V6E_RUN = "demo/v6e_train/2026_11_29_10_00_00"


def rows(table) -> list[dict]:
    return table.row_dicts()


@pytest.fixture(scope="module")
def testdata():
    return RooflineService(ROOT)


@pytest.fixture(scope="module")
def a100(testdata):
    return testdata.analysis("kineto/a100_80gb_shapes", "")


# ------------------------------------------------------------------- 1, 2: what ran, per row


def test_rows_carry_their_input_data_type(a100):
    """The precision names the roof a row sits under; `dtype` the data type its inputs were
    recorded with (the trace's "float" is f32, "long int" s64...)."""
    ops = rows(a100.ops[True])
    assert any(r["precision"] == "fp32" and r["dtype"] == "f32" for r in ops)
    assert all(
        r["dtype"] in (None, "f32", "f64", "int", "bool", "s64", "s32", "pred", "bf16", "f16")
        for r in ops
    ), {r["dtype"] for r in ops}


def test_tf32_gemms_sit_under_the_tf32_roof(a100):
    """f32 aten::mm runs cutlass tensorop_s1688 kernels (TF32) and ampere_sgemm (FP32 SIMT)."""
    peaks = {c.precision: c.gflops for c in a100.device.compute}
    mm = [r for r in rows(a100.ops[True]) if r["operation"] in ("aten::mm", "aten::linear")]
    assert {r["precision"] for r in mm} == {"tf32", "fp32"}
    for r in mm:
        assert r["peak_flop_rate"] == peaks[r["precision"]]
        assert r["roofline_efficiency"] <= 1.0 and r["caveat"] is None
    kernels = rows(a100.views["kernel"][True])
    tensorop = [r for r in kernels if "tensorop_s1688gemm" in r["operation"]]
    sgemm = [r for r in kernels if "ampere_sgemm" in r["operation"]]
    assert tensorop and all(
        r["precision"] == "tf32" and r["category"] == "matmul" for r in tensorop
    )
    assert sgemm and all(r["precision"] == "fp32" and r["category"] == "matmul" for r in sgemm)
    assert all((r["roofline_efficiency"] or 0) <= 1.001 for r in tensorop + sgemm)


def test_rows_never_merge_precisions(a100):
    """aten::add_ ran fp32 and fp64 calls: one row each, under its own ceiling, and the calls
    add up to the trace's own count of aten::add_ calls that launched kernels."""
    peaks = {c.precision: c.gflops for c in a100.device.compute}
    add = [r for r in rows(a100.ops[True]) if r["operation"] == "aten::add_"]
    assert {r["precision"] for r in add} >= {"fp32", "fp64"}
    for r in add:
        # Integer rows (s64, labelled "int" by the Kineto reader) have no FLOP roof on A100
        # (no int64 ceiling), never the bf16 one.
        integer = r["precision"].startswith("s") or r["precision"] in ("int", "bool")
        want = 0.0 if integer else peaks[r["precision"]]
        assert r["peak_flop_rate"] == want
    # Independent count: aten::add_ calls in the JSON by their first input type.
    doc = json.load(gzip.open(glob.glob(os.path.join(A100, "*.gz"))[0]))
    types = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op" and e.get("name") == "aten::add_":
            t = (e.get("args") or {}).get("Input type") or [""]
            types[t[0]] = types.get(t[0], 0) + 1
    assert types.get("double", 0) > 0 and types.get("float", 0) > 0
    by_prec = {}
    for r in add:
        by_prec[r["precision"]] = by_prec.get(r["precision"], 0) + r["occurrences"]
    assert by_prec["fp64"] <= types["double"] and by_prec["fp32"] <= types["float"]


def test_program_roof_follows_its_flop_mix(a100):
    """FLOPs ÷ Σ FLOPs_p / peak_p over the program's ops, computed by hand from the op rows
    (integer ops have no FLOP roof: their FLOPs take no time on one)."""
    ops = [r for r in rows(a100.ops[True]) if (r["flops"] or 0) > 0]
    mix = sum(r["flops"] for r in ops) / sum(
        r["flops"] / r["peak_flop_rate"] for r in ops if r["peak_flop_rate"]
    )
    total = rows(a100.program[True])[0]
    assert total["peak_flop_rate"] == pytest.approx(mix, rel=1e-9)
    assert total["compute_efficiency"] == pytest.approx(total["flop_rate"] / mix, rel=1e-9)
    assert mix not in {c.gflops for c in a100.device.compute}  # a real mix here


# ------------------------------------------------------------ 4, 5: host memory, async pairs


def _events_by_name(path):
    """(op name -> [(begin ps, end ps)]) and (op name -> HLO text) of every TensorCore plane,
    read with the plain protobuf classes (the independent reference)."""
    space = xplane_pb2.XSpace.FromString(open(path, "rb").read())
    events, texts = {}, {}
    for plane in space.planes:
        if not re.fullmatch(r"/device:TPU:\d+", plane.name):
            continue
        stat = {v.name: k for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            if line.name != "XLA Ops":
                continue
            for ev in line.events:
                md = plane.event_metadata[ev.metadata_id]
                begin = next(
                    s.int64_value or s.uint64_value
                    for s in ev.stats
                    if s.metadata_id == stat["device_offset_ps"]
                )
                dur = next(
                    s.int64_value or s.uint64_value
                    for s in ev.stats
                    if s.metadata_id == stat["device_duration_ps"]
                )
                events.setdefault((plane.name, md.display_name), []).append((begin, begin + dur))
                texts[md.display_name] = md.name
    return events, texts


def test_host_offload_copies_are_host_traffic_and_async_pairs(testdata):
    a = testdata.analysis(V6E_RUN, "")
    path = glob.glob(os.path.join(ROOT, "demo", "v6e_train", "plugins", "profile", "*", "*.pb"))[0]
    events, texts = _events_by_name(path)
    ops = {r["operation"]: r for r in rows(a.ops[True])}
    starts = [n for n in ops if n.startswith("copy-start")]
    assert starts
    for start in starts:
        done = start.replace("start", "done")
        s, d = ops[start], ops[done]
        assert s["caveat"] == "async_start" and d["caveat"] == "async_wait"
        for r in (s, d):  # not roofline points, not opportunities, never HBM
            assert r["roofline_efficiency"] is None and r["potential_time_saved_us"] is None
            assert r["hbm_bytes"] == 0 and r["bound_by"] == "Async"
        # The transfer moves the host array once, on the half that completes it.
        size = parse_instruction(texts[done]).host_bytes
        assert size > 0 and d["host_bytes"] == size * d["occurrences"] and s["host_bytes"] == 0
        # Its real interval: from each start's issue to its done's end, paired in order.
        span = 0
        for (plane, name), evs in events.items():
            if name != done:
                continue
            issued = sorted(events[(plane, start)])
            span += sum(e - b for (b, _), (_, e) in zip(issued, sorted(evs)))
        assert d["transfer_time_us"] == pytest.approx(span / 1e6, rel=1e-12)
        assert d["transfer_bw"] == pytest.approx(d["host_bytes"] / (span / 1e3) / 1.073741824)
    total = rows(a.program[True])[0]
    assert total["host_bytes"] == sum(ops[s.replace("start", "done")]["host_bytes"] for s in starts)


# ------------------------------------------------------------------------- 6, 7: coverage


def test_coverage_is_the_share_of_op_time_with_a_known_cost(a100, testdata):
    run = testdata.resolve_run("kineto/a100_80gb_shapes")
    data = testdata.read_host(run, run.files[0])
    t = data.ops
    known = t["flops_known"]
    expected = t["total_time_ps"][known].sum() / t["total_time_ps"].sum()
    total = rows(a100.program[True])[0]
    assert total["flop_coverage"] == pytest.approx(expected, rel=1e-12)
    # the low-coverage warning is said exactly when less than half the time has a cost
    assert 0 < total["flop_coverage"] < 1
    assert (total["flop_coverage"] < 0.5) == any(d.code == "low_coverage" for d in a100.diagnostics)


def _gpu_trace(tmp_path, events):
    doc = {
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA A100-SXM4-80GB",
                "computeMajor": 8,
                "computeMinor": 0,
                "numSms": 108,
                "totalGlobalMem": 85899345920,
            }
        ],
        "traceEvents": events,
    }
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps(doc))
    old = 1_000_000_000
    os.utime(path, (old, old))
    return str(path)


def _op_with_kernel(name, ts, corr, stream, kts, kdur, kernel):
    return [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": 5,
            "args": {"External id": corr},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": ts + 1,
            "dur": 2,
            "args": {"correlation": corr, "External id": corr},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": kernel,
            "pid": 0,
            "tid": stream,
            "ts": kts,
            "dur": kdur,
            "args": {"correlation": corr, "device": 0, "stream": stream, "External id": corr},
        },
    ]


def test_self_time_percent_is_a_share_of_all_ops_self_time(tmp_path):
    """Concurrent streams (NCCL beside a GEMM) make op time exceed the span: shares of the
    span would sum past 100% (the old definition); shares of all ops' self time sum to 100."""
    events = _op_with_kernel(
        "c10d::allreduce_", 0, 1, 13, 10, 100, "ncclKernel_AllReduce"
    ) + _op_with_kernel("aten::mm", 6, 2, 7, 12, 90, "ampere_sgemm_128x64_nn")
    service = RooflineService(str(tmp_path))
    _gpu_trace(tmp_path, events)
    a = service.analysis(".", "")
    ops = rows(a.ops[True])
    span = rows(a.program[True])[0]["total_time_us"]
    assert sum(r["total_self_time_us"] for r in ops) == pytest.approx(190.0)
    assert span < 190.0  # the kernels overlap
    assert sum(r["time_fraction"] for r in ops) > 1.0  # span shares: not additive
    assert sum(r["self_time_percent"] for r in ops) == pytest.approx(100.0, rel=1e-12)
    assert ops[-1]["cumulative_self_time_percent"] == pytest.approx(100.0, rel=1e-12)
    assert ops[0]["self_time_percent"] == pytest.approx(100 * 100 / 190)


def test_exposed_communication_is_communication_kernels_only(tmp_path):
    """A communication op (All2All_Pooled_Wait) that launches a copy kernel beside its NCCL
    kernel: only the NCCL kernel's time is communication; the copy is device work, so it is
    not exposed, and it hides nothing it does not overlap. By hand: NCCL 10-110 alone, the
    copy 200-260 alone: exposed 100 µs, compute 60 µs."""
    events = _op_with_kernel(
        "All2All_Pooled_Wait",
        0,
        1,
        13,
        10,
        100,
        "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
    ) + _op_with_kernel(
        "All2All_Pooled_Wait",
        150,
        2,
        7,
        200,
        60,
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<int>",
    )
    service = RooflineService(str(tmp_path))
    _gpu_trace(tmp_path, events)
    a = service.analysis(".", "")
    w = a.facts.timeline.windows
    assert w["exposed_ps"].sum() == pytest.approx(100e6)
    assert w["compute_ps"].sum() == pytest.approx(60e6)
    assert sum(a.facts.timeline.exposed_by_op.values()) == pytest.approx(100e6)


def test_an_op_of_two_regimes_is_floored_per_call(tmp_path):
    """aten::mm called with a square (compute-bound) and a skinny (memory-bound) f32 shape on
    an A100: its floor is the sum of the calls' floors Σ max(F_i/P, B_i/BW), by hand from the
    shapes and the device's fp32 and HBM roofs, above the floor of the summed FLOPs and bytes
    (which would claim more time than the calls can give); the record says it mixes regimes."""

    def mm(m, k, n, ts, corr, dur):
        ev = _op_with_kernel("aten::mm", ts, corr, 7, ts + 2, dur, "ampere_sgemm_128x64_nn")
        ev[0]["args"].update({"Input Dims": [[m, k], [k, n]], "Input type": ["float", "float"]})
        return ev

    events = mm(4096, 4096, 4096, 0, 1, 20000) + mm(65536, 64, 8, 30000, 2, 2000)
    service = RooflineService(str(tmp_path))
    _gpu_trace(tmp_path, events)
    a = service.analysis(".", "")
    (r,) = [x for x in rows(a.ops[True]) if x["operation"] == "aten::mm"]
    peak = r["peak_flop_rate"]  # GFLOP/s of fp32 (SIMT) on the A100
    hbm = a.device.memory("hbm").gbs
    floors, flops, nbytes = [], 0.0, 0.0
    for m, k, n in ((4096, 4096, 4096), (65536, 64, 8)):
        f, b = 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n)
        floors.append(max(f / peak, b / hbm) / 1e3)  # µs
        flops, nbytes = flops + f, nbytes + b
    assert floors[0] == pytest.approx(2 * 4096**3 / peak / 1e3)  # compute-bound call
    assert floors[1] == pytest.approx(4.0 * (65536 * 64 + 64 * 8 + 65536 * 8) / hbm / 1e3)
    assert r["flops"] == flops and r["bytes"] == nbytes
    assert r["roof_time_us"] == pytest.approx(sum(floors), rel=1e-12)
    assert r["potential_time_saved_us"] == pytest.approx(22000.0 - sum(floors), rel=1e-12)
    summed = max(flops / peak, nbytes / hbm) / 1e3
    assert summed < sum(floors) and r["mixed_regimes"] is True
    # The kernel's name (SIMT sgemm) decided its precision; the recorded input type is kept.
    assert r["dtype"] == "f32" and r["precision"] == "fp32"
    assert rows(a.program[True])[0]["dtype"] is None
    assert r["total_time_us"] * r["roofline_efficiency"] == pytest.approx(summed, rel=1e-9)


def test_a_device_that_only_copied_has_no_idle_time(tmp_path):
    """GPU 0 runs a kernel; GPU 1 only copies (DtoD) long after: GPU 1 ran no program, so it
    adds no device time and no idle (its copy stays in the op table, and a note says so)."""
    events = _op_with_kernel("aten::mm", 0, 1, 7, 10, 100, "ampere_sgemm_128x64_nn") + [
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoD (Device -> Device)",
            "pid": 1,
            "tid": 9,
            "ts": 5000,
            "dur": 20,
            "args": {"device": 1, "stream": 9, "bytes": 1000000, "correlation": 9},
        }
    ]
    service = RooflineService(str(tmp_path))
    _gpu_trace(tmp_path, events)
    a = service.analysis(".", "")
    total = rows(a.program[True])[0]
    assert total["total_time_us"] == pytest.approx(100.0)  # GPU 0's span only
    assert a.facts.timeline.windows["core"].tolist() == [0]
    g = guidance(a)
    idle = next(c for c in g["classes"] if c["class"] == "idle")
    assert idle["time_us"] == pytest.approx(0.0, abs=1e-9)
    assert any(d.code == "copy_only_devices" for d in a.diagnostics)
    ops = {r["operation"]: r for r in rows(a.ops[True])}
    assert ops["Memcpy DtoD (Device -> Device)"]["bytes"] == 2e6


# --------------------------------------------------------------------------- 8: Kineto details


def test_epoch_ns_timestamps_read_exactly():
    """The same trace with epoch-µs timestamps (ns fractions a float64 cannot hold, see
    tools/epoch_trace.py) gives exactly the same op table, steps and spans."""
    base = read_kineto_file(glob.glob(os.path.join(ROOT, "kineto", "cpu_convnet", "*.gz"))[0], "h")
    epoch = read_kineto_file(
        glob.glob(os.path.join(ROOT, "kineto", "cpu_convnet_epoch", "*.gz"))[0], "h"
    )
    for col in ("operation", "total_time_ps", "self_time_ps", "flops", "step", "occurrences"):
        assert list(epoch.ops[col]) == list(base.ops[col]), col
    assert [(s.step, s.duration_ps) for s in epoch.steps] == [
        (s.step, s.duration_ps) for s in base.steps
    ]
    assert [c.duration_ps for c in epoch.core_spans] == [c.duration_ps for c in base.core_spans]


@pytest.mark.parametrize(
    "spelling,precision",
    [
        ("long", "s64"),
        ("int", "s32"),
        ("short", "s16"),
        ("c10::BFloat16", "bf16"),
        ("c10::Half", "f16"),
        ("long int", "s64"),
    ],
)
def test_every_dtype_spelling_gets_a_formula(spelling, precision):
    cost = torch_flops.op_cost("aten::add", [[8, 4], [8, 4]], [spelling, spelling])
    assert cost is not None and cost.precision == precision and cost.flops == 32


# ---------------------------------------------------------------- 9: a profile's own peak


def test_peak_beaten_by_its_own_ops_is_replaced_by_the_data_sheet(testdata):
    run = testdata.list_runs()["runs"]
    run = next(r["run"] for r in run if r["run"].startswith("xla_gpu_mi300_conv"))
    a = testdata.analysis(run, "")
    hbm = a.device.memory("hbm")
    assert hbm.gbs == 5300.0 and hbm.source == "datasheet" and "2,662" in hbm.note
    notes = [d.message for d in a.diagnostics if d.code == "peak_replaced"]
    assert notes and "input_transpose_fusion" in notes[0] and "2,662" in notes[0]
    for r in rows(a.ops[True]):
        assert (r["roofline_efficiency"] or 0) <= 1.001 or r["caveat"]


# ------------------------------------------------------------------ invariant over testdata


def _all_runs(service):
    return [r["run"] for r in service.list_runs()["runs"]]


def test_every_row_of_every_profile_is_a_measurement_or_says_why(testdata):
    runs = _all_runs(testdata)
    assert len(runs) >= 12
    checked = 0
    for run in runs:
        try:
            a = testdata.analysis(run, "")
        except Exception as exc:  # a deliberately broken fixture would be named here
            raise AssertionError(f"{run}: {exc}") from exc
        for io in (True, False):
            views = {
                "op": a.ops[io],
                **{k: v[io] for k, v in a.views.items()},
                "program": a.program[io],
            }
            for name, table in views.items():
                rs = rows(table)
                for r in rs:
                    where = f"{run} {name} {r['operation']} {r['step']}"
                    eff = r["roofline_efficiency"]
                    assert eff is None or eff <= 1.001 or r["caveat"], where
                    if r["caveat"] and r["caveat"] not in ("host_transfer", "container"):
                        assert r["potential_time_saved_us"] is None, where
                    saved = r["potential_time_saved_us"]
                    assert saved is None or 0 <= saved <= r["total_time_us"] + 1e-9, where
                    for c in ("flop_coverage", "bytes_coverage"):
                        assert r[c] is None or 0.0 <= r[c] <= 1.0, where
                    for c in (
                        "total_time_us",
                        "total_self_time_us",
                        "flops",
                        "bytes",
                        "time_fraction",
                        "self_time_percent",
                    ):
                        assert r[c] is None or r[c] >= 0, where
                    _unknown_is_null(r, where)
                    checked += 1
                if name != "program" and rs:
                    pct = [r["self_time_percent"] for r in rs]
                    if sum(r["total_self_time_us"] for r in rs) > 0:
                        assert sum(pct) == pytest.approx(100.0, rel=1e-9), (run, name)
                    assert max(r["cumulative_self_time_percent"] for r in rs) <= 100 + 1e-9
                if name == "program" and rs and rs[0]["record_type"] == "total":
                    assert rs[0]["flop_coverage"] is not None or not len(a.ops[io]), run
    assert checked > 1000
    assert np.isfinite(checked)


_RATES = ("flop_rate", "model_flop_rate", "memory_bw", "hbm_bw", "host_bw", "interconnect_bw")


def _unknown_is_null(r: dict, where: str):
    """Unknown is null, never 0: a record with op time but no known FLOPs has null FLOPs,
    FLOP rate, intensity and compute efficiency; no known bytes, null bytes and bandwidths;
    neither, or `no_cost`: null efficiency; an async half has no rates. `bytes` is never below
    a memory's bytes (one convention: every byte accessed)."""
    if r["record_type"] == "total_hw":
        return
    if r["total_time_us"] and r["flop_coverage"] == 0:
        for c in ("flops", "flop_rate", "operational_intensity", "compute_efficiency"):
            assert r[c] is None, (where, c, r[c])
    if r["total_time_us"] and r["bytes_coverage"] == 0:
        for c in ("bytes", "memory_bw", "hbm_bytes", "max_mem_bw_utilization"):
            assert r[c] is None, (where, c, r[c])
    if r["caveat"] == "no_cost":
        assert r["roofline_efficiency"] is None and r["bound_by"] == "Unknown", where
    if r["caveat"] in ("async_start", "async_wait"):
        for c in _RATES:
            assert r[c] is None, (where, c, r[c])
    if r["bytes"] is not None:
        for c in ("hbm_bytes", "host_bytes"):
            assert r[c] is None or r[c] <= r["bytes"] * (1 + 1e-9) + 1e-6, (where, c)


def test_no_cost_ops_are_null_not_zero(a100, testdata):
    """On the A100 trace the ops without a known cost answer null efficiency, FLOPs and rates
    in the API, its exports and the report (sorting by efficiency cannot rank them worst)."""
    from tb_roofline.serve.service import export

    ops = rows(a100.ops[True])
    none = [r for r in ops if r["caveat"] == "no_cost"]
    assert len(none) >= 5
    for r in none:
        assert r["roofline_efficiency"] is None and r["flops"] is None and r["flop_rate"] is None, (
            r["operation"]
        )
    answer = testdata.ops("kineto/a100_80gb_shapes", "", True)
    text, _, _ = export.export(answer, "r", "", "op", "json")
    out = [x for x in json.loads(text) if x["caveat"] == "no_cost"]
    assert out and all(x["roofline_efficiency"] is None and x["flops"] is None for x in out)
    csv, _, _ = export.export(answer, "r", "", "op", "csv")
    header = csv.splitlines()[0].split(",")
    line = next(ln for ln in csv.splitlines()[1:] if ",no_cost," in ln)
    assert line.split(",")[header.index("roofline_efficiency")] == ""


def test_host_copies_are_judged_against_the_host_link(testdata):
    """Memcpy HtoD/DtoH cross PCIe: under the data sheet's per-direction link speed, never HBM."""
    a = testdata.analysis("kineto/a100_alexnet", "")
    link = a.device.memory("host")
    assert link.gbs == 32.0 and link.source == "datasheet"  # A100: PCIe Gen4 64 GB/s both ways
    copy = next(r for r in rows(a.ops[True]) if r["operation"].startswith("Memcpy HtoD"))
    assert copy["hbm_bytes"] == 0 and copy["host_bytes"] == copy["bytes"] > 0
    assert copy["bound_by"] == link.name and copy["caveat"] == "host_transfer"
    rate_gbs = copy["host_bytes"] / (copy["total_time_us"] * 1e3)
    assert copy["roofline_efficiency"] == pytest.approx(rate_gbs / 32.0, rel=1e-12)
    assert copy["potential_time_saved_us"] == pytest.approx(
        copy["total_time_us"] * (1 - copy["roofline_efficiency"]), rel=1e-12
    )
