"""PM-sampling and environment counters of PyTorch traces: the "Total (HW counters)" and per-step
measured records, clock-scaled step roofs and the clock_throttled finding.

Every expected figure is recomputed here from the raw JSON events (counter events of the
`GPU 0 Counters` process, `ProfilerStep#N` spans) with numpy, without the reader or the model;
the only inputs taken from elsewhere are the H100 SXM data-sheet figures (NVIDIA H100 Tensor
Core GPU whitepaper: HBM3 3,352 GB/s, 1,980 MHz boost clock, bf16 dense 989.4 TFLOP/s, f32
66.9 TFLOP/s).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
KINETO = os.path.join(REPO, "testdata", "kineto")
FILE = "worker0.1700000000000.pt.trace.json.gz"
HBM_GBS, RATED_MHZ, BF16_GFLOPS = 3352.0, 1980.0, 989.4e3
GIB_PER_GB = 1e9 / 2**30


def _trace(run: str) -> dict:
    with gzip.open(os.path.join(KINETO, run, FILE), "rt") as f:
        return json.load(f)


def _series(trace: dict) -> dict:
    """name -> (start µs, value) of the counter events of GPU 0, sorted by time."""
    out: dict = {}
    for ev in trace["traceEvents"]:
        if ev.get("ph") == "C" and ev.get("pid") == "GPU 0 Counters":
            out.setdefault(ev["name"], []).append((ev["ts"], ev["args"][""]))
    return {k: np.array(sorted(v)).T for k, v in out.items()}


def _steps(trace: dict) -> list:
    """(lo, hi) µs of each ProfilerStep; the fixtures' kernels all end inside their step, so
    these are the steps' device windows too."""
    spans = sorted(
        (ev["ts"], ev["ts"] + ev["dur"])
        for ev in trace["traceEvents"]
        if ev.get("cat") == "user_annotation" and ev["name"].startswith("ProfilerStep#")
    )
    kernels = [ev for ev in trace["traceEvents"] if ev.get("cat") == "kernel"]
    assert all(any(lo <= k["ts"] and k["ts"] + k["dur"] <= hi for lo, hi in spans) for k in kernels)
    return spans


def _window(ts, values, lo, hi):
    """(Σ value × overlap / interval, Σ value × overlap, covered) of samples [t, t + interval)."""
    interval = float(np.median(np.diff(ts)))
    ov = np.clip(np.minimum(ts + interval, hi) - np.maximum(ts, lo), 0, None)
    return float((values * ov).sum() / interval), float((values * ov).sum()), float(ov.sum())


def _program(run: str) -> tuple[RooflineService, list]:
    service = RooflineService(KINETO)
    prog = service.program(run, "", True)
    return service, [dict(zip(prog["columns"], r)) for r in prog["rows"]]


def test_kineto_bytes_and_flops_over_total_and_steps():
    """Kineto's writer: DRAM bytes and SASS FLOPs summed over each window's covered part; the
    samples start 2.5 ms in, so coverage is below 1 and said so."""
    run = "pm_sampling_kineto"
    trace = _trace(run)
    series = _series(trace)
    steps = _steps(trace)
    windows = [("Total (HW counters)", steps[0][0], steps[-1][1])] + [
        (f"{i + 1} (HW counters)", lo, hi) for i, (lo, hi) in enumerate(steps)
    ]
    service, rows = _program(run)
    by_label = {r["step"]: r for r in rows if r["record_type"] in ("total_hw", "step_hw")}
    assert set(by_label) == {w[0] for w in windows}
    for label, lo, hi in windows:
        read = _window(*series["dram__bytes_read.sum"], lo, hi)
        write = _window(*series["dram__bytes_write.sum"], lo, hi)
        flops = 0.0
        for name, k in (("ffma", 2), ("fadd", 1), ("fmul", 1), ("hfma", 2)):
            metric = f"smsp__sass_thread_inst_executed_op_{name}_pred_on.sum"
            flops += k * _window(*series[metric], lo, hi)[0]
        r = by_label[label]
        seconds = (hi - lo) / 1e6
        assert r["bytes"] == pytest.approx(read[0] + write[0], rel=1e-12)
        assert r["hbm_bytes"] == r["bytes"]
        assert r["flops"] == pytest.approx(flops, rel=1e-12)
        assert r["total_time_us"] == pytest.approx(hi - lo)
        assert r["memory_bw"] == pytest.approx((read[0] + write[0]) / seconds / 2**30, rel=1e-9)
        assert r["bytes_coverage"] == pytest.approx(read[2] / (hi - lo), rel=1e-12)
        assert r["flops_source"] == "counter" and r["potential_time_saved_us"] is None
    assert by_label["1 (HW counters)"]["bytes_coverage"] == pytest.approx(
        0.5
    )  # samples from 2.5 ms
    assert by_label["Total (HW counters)"]["bytes_coverage"] == pytest.approx(12.5 / 15)
    codes = {d["code"]: d["message"] for d in service.diagnostics(run, "")["diagnostics"]}
    assert "1 ms" in codes["pm_counters"] and "83.3%" in codes["pm_counters"]
    assert "never attributed to ops" in codes["pm_counters"]
    assert "no_hw_counters" not in codes
    # no SM clock series: nothing scaled, no clock finding
    assert "clock_scaled_roofs" not in codes
    assert not [f for f in service.guidance(run, "")["findings"] if f["rule"] == "clock_throttled"]


def test_pytorch_throughput_percent_times_hbm_peak():
    """PyTorch's exporter: "HBM BW (%)" × the data sheet's HBM peak over the covered time."""
    run = "pm_sampling_pytorch"
    trace = _trace(run)
    ts, pct = _series(trace)["HBM BW (%)"]
    steps = _steps(trace)
    _, rows = _program(run)
    total = next(r for r in rows if r["step"] == "Total (HW counters)")
    lo, hi = steps[0][0], steps[-1][1]
    _, weighted, covered = _window(ts, pct, lo, hi)
    expected = weighted / 100 * HBM_GBS * 1e3  # share × µs × GB/s = 1e3 B
    assert covered == pytest.approx(hi - lo)
    assert total["bytes"] == pytest.approx(expected, rel=1e-12)
    assert total["max_mem_bw_utilization"] == pytest.approx(weighted / covered / 100, rel=1e-9)
    assert total["flops"] is None and total["bound_by"] == "HBM"  # no FLOP metric sampled


def test_throttled_step_runs_under_a_scaled_roof():
    """Step 2's SM clock dips below the rated 1,980 MHz: its records' compute roofs scale by the
    mean clock / rated, the other steps keep the data sheet's, and a finding bounds the cost."""
    run = "pm_sampling_pytorch"
    trace = _trace(run)
    ts, mhz = _series(trace)["SM Clock (MHz)"]
    service, rows = _program(run)
    steps = {r["step"]: r for r in rows if r["record_type"] == "step"}
    average = next(r for r in rows if r["record_type"] == "average")
    assert average["peak_flop_rate"] <= BF16_GFLOPS
    bound, shares = 0.0, {}
    for i, (lo, hi) in enumerate(_steps(trace)):
        _, weighted, covered = _window(ts, mhz, lo, hi)
        scale = min(1.0, weighted / covered / RATED_MHZ)
        # The steps run one mix (bf16 matmuls, an add): the Average keeps the data sheet's roofs
        roof = steps[str(i + 1)]["peak_flop_rate"]
        assert roof == pytest.approx(average["peak_flop_rate"] * scale, rel=1e-9), i
        interval = float(np.median(np.diff(ts)))
        ov = np.clip(np.minimum(ts + interval, hi) - np.maximum(ts, lo), 0, None)
        slow = mhz < 0.99 * RATED_MHZ
        shares[str(i + 1)] = ov[slow].sum() / covered
        bound += float((ov * (1 - mhz / RATED_MHZ))[slow].sum())
    assert steps["2"]["peak_flop_rate"] < 0.9 * steps["1"]["peak_flop_rate"]
    codes = {d["code"]: d["message"] for d in service.diagnostics(run, "")["diagnostics"]}
    assert (
        "step 2" in codes["clock_scaled_roofs"]
        and "memory roofs are not" in codes["clock_scaled_roofs"]
    )
    (f,) = [f for f in service.guidance(run, "")["findings"] if f["rule"] == "clock_throttled"]
    assert f["title"] == f"SM clock throttled {shares['2']:.0%} of step 2"
    assert f["bound_us"] == pytest.approx(bound, rel=1e-9) and f["counted_us"] == 0.0
    assert "1 − clock / rated" in f["bound_formula"]


def _variant(tmp_path, edit) -> str:
    """A copy of the PyTorch-form fixture with `edit` applied to its JSON (bad-input cases)."""
    trace = _trace("pm_sampling_pytorch")
    edit(trace)
    run = tmp_path / "variant"
    run.mkdir()
    with gzip.open(run / FILE, "wt") as f:
        json.dump(trace, f)
    return str(tmp_path)


def test_no_rated_clock_says_scaling_unknown(tmp_path):
    """A GPU whose data sheet gives no clock (B200): the roofs stay, and the notes say why."""

    def b200(trace):
        trace["deviceProperties"][0].update(
            name="NVIDIA B200", computeMajor=10, numSms=148, totalGlobalMem=191503138816
        )

    service = RooflineService(_variant(tmp_path, b200))
    run = service.list_runs()["runs"][0]["run"]
    codes = {d["code"] for d in service.diagnostics(run, "")["diagnostics"]}
    assert "clock_scaling_unknown" in codes and "clock_scaled_roofs" not in codes
    assert not [f for f in service.guidance(run, "")["findings"] if f["rule"] == "clock_throttled"]


def test_malformed_counter_events_are_counted_not_fatal(tmp_path):
    def corrupt(trace):
        bad = [e for e in trace["traceEvents"] if e.get("ph") == "C"][:4]
        bad[0]["args"] = {"": "fast"}
        bad[1]["args"] = {"": -5.0}
        bad[2]["ts"] = "soon"
        bad[3]["args"] = {"": 1e300}  # no counter reaches it: sums would overflow

    service = RooflineService(_variant(tmp_path, corrupt))
    run = service.list_runs()["runs"][0]["run"]
    notes = {d["code"]: d["message"] for d in service.diagnostics(run, "")["diagnostics"]}
    assert notes["bad_events"].startswith("4 events were skipped")
    rows = service.program(run, "", True)["rows"]
    assert rows  # still analysed


def test_legacy_range_profiler_record_kept():
    """Older traces' CUPTI range-profiler counters still give "Total (HW)" (FLOPs only)."""
    _, rows = _program("a100_cupti_counters")
    hw = [r for r in rows if r["record_type"] == "total_hw"]
    assert [r["step"] for r in hw] == ["Total (HW)"] and hw[0]["bytes"] is None


def test_fixture_builder_is_reproducible(tmp_path):
    """The committed fixtures are what tools/build_pm_fixtures.py writes."""
    import subprocess
    import sys

    tool = os.path.join(REPO, "tools", "build_pm_fixtures.py")
    subprocess.run([sys.executable, tool, str(tmp_path)], check=True, capture_output=True)
    for run in ("pm_sampling_kineto", "pm_sampling_pytorch"):
        with gzip.open(tmp_path / run / FILE, "rt") as f:
            built = json.load(f)
        assert built == _trace(run), run
    shutil.rmtree(tmp_path)


def test_counter_series_survive_the_disk_cache_encoding():
    """The disk cache's data-only codec keeps the sampled series (a fresh process reads them)."""
    from tb_roofline.readers.kineto import read_kineto_file
    from tb_roofline.serve.caches import codec

    data = read_kineto_file(os.path.join(KINETO, "pm_sampling_pytorch", FILE), "h")
    back = codec.decode(codec.encode(data)).counter_series
    cs = data.counter_series
    assert back.names == cs.names and back.quantities == cs.quantities
    assert np.array_equal(back.value, cs.value) and np.array_equal(back.ts_ps, cs.ts_ps)
    assert back.rated_clock_mhz == cs.rated_clock_mhz == RATED_MHZ


def test_two_ranks_add_up(tmp_path):
    """Two ranks (the fixture as worker0 and worker1): the Total (HW counters) and each step's
    measured record hold both ranks' bytes over both ranks' time, as the analytic records do."""
    run = tmp_path / "two"
    run.mkdir()
    for w in ("worker0", "worker1"):
        shutil.copy(
            os.path.join(KINETO, "pm_sampling_pytorch", FILE), run / f"{w}.1.pt.trace.json.gz"
        )
    service = RooflineService(str(tmp_path))
    prog = service.program("two", "", True)
    two = {
        (r["record_type"], r["step"]): r
        for r in (dict(zip(prog["columns"], x)) for x in prog["rows"])
    }
    _, one = _program("pm_sampling_pytorch")
    single = {(r["record_type"], r["step"]): r for r in one}
    key = ("total_hw", "Total (HW counters)")
    assert two[key]["bytes"] == pytest.approx(2 * single[key]["bytes"], rel=1e-12)
    assert two[key]["total_time_us"] == pytest.approx(2 * 15000.0)
    for i in range(3):  # steps aligned by position; single-host labels are the step ids
        both = two[("step_hw", f"{i} (HW counters)")]
        alone = single[("step_hw", f"{i + 1} (HW counters)")]
        assert both["bytes"] == pytest.approx(2 * alone["bytes"], rel=1e-12)
