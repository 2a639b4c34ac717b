"""The roofline model alone, on op tables built by hand, against hand-derived numbers."""

from __future__ import annotations

import pytest

from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak
from tb_roofline.model.records import roofline
from tb_roofline.table.op_table import OpTableBuilder, ProfileData
from tb_roofline.table.spans import CoreSpan, StepSpan

US = 1_000_000  # ps per microsecond


def _device(**kw):
    d = DeviceInfo(type="test", kind="tpu", num_cores=1, **kw)
    d.compute.append(ComputePeak("default", 100_000.0, "profile"))  # 100 TFLOP/s
    d.memories.append(MemoryPeak("hbm", "HBM", 1000.0, "profile"))  # 1000 GB/s
    return d


def _profile(rows, span_us=250, steps=(), device=None):
    b = OpTableBuilder()
    for r in rows:
        r = dict(r)
        r.setdefault("hbm_bytes", r.get("bytes", 0.0))
        b.add(host="h", core=0, program_id="1", occurrences=1, **r)
    return ProfileData(
        device=device or _device(),
        ops=b.build(),
        steps=[StepSpan("h", 0, s, 0, d * US) for s, d in steps],
        core_spans=[CoreSpan("h", 0, 0, span_us * US)],
        diagnostics=[],
    )


def _rows(table):
    return {r["operation"]: r for r in table.row_dicts()}


COMPUTE_OP = dict(
    operation="dot.1",
    category="convolution fusion",
    total_time_ps=100 * US,
    self_time_ps=100 * US,
    flops=1e9,
    model_flops=1e9,
    bytes=1e6,
    step=0,
)
MEMORY_OP = dict(
    operation="copy.2",
    category="data formatting",
    total_time_ps=100 * US,
    self_time_ps=100 * US,
    flops=1e6,
    model_flops=1e6,
    bytes=1e8,
    step=0,
)


def test_compute_and_memory_bound_ops():
    a = roofline.analyze([_profile([COMPUTE_OP, MEMORY_OP])], "h")
    ops = _rows(a.ops[True])
    dot, copy = ops["dot.1"], ops["copy.2"]
    # 1e9 FLOP in 100 us = 1e4 GFLOP/s = 10% of 100 TFLOP/s; 1e6 B in 100 us = 10 GB/s.
    assert dot["flop_rate"] == pytest.approx(1e4)
    assert dot["hbm_bw"] == pytest.approx(10 / 1.073741824)
    assert dot["bound_by"] == "Compute"
    assert dot["roofline_efficiency"] == pytest.approx(0.1)
    assert dot["optimal_flop_rate"] == pytest.approx(1e5)
    assert dot["potential_time_saved_us"] == pytest.approx(90.0)
    assert dot["operational_intensity"] == pytest.approx(1000.0)
    assert dot["bottleneck_operational_intensity"] == pytest.approx(1000.0)
    # 1e8 B in 100 us = 1000 GB/s: exactly on the HBM roof.
    assert copy["bound_by"] == "HBM"
    assert copy["roofline_efficiency"] == pytest.approx(1.0)
    assert copy["max_mem_bw_utilization"] == pytest.approx(1.0)
    assert copy["potential_time_saved_us"] == pytest.approx(0.0)
    assert copy["bottleneck_operational_intensity"] == pytest.approx(0.01)
    # Ranking by self time, ties by name.
    assert [r["operation"] for r in a.ops[True].row_dicts()] == ["copy.2", "dot.1"]
    assert a.device.to_json()["memories"][0]["ridge_point"] == pytest.approx(100.0)


def test_program_record_uses_the_whole_span_and_skips_containers():
    loop = dict(
        operation="while.3",
        category="while",
        total_time_ps=200 * US,
        self_time_ps=0,
        flops=5e12,
        bytes=5e12,
        step=0,
    )
    a = roofline.analyze(
        [_profile([COMPUTE_OP, MEMORY_OP, loop], span_us=250, steps=[(0, 240)])], "h"
    )
    prog = {r["step"]: r for r in a.program[True].row_dicts()}
    total = prog["Total"]
    assert total["total_time_us"] == pytest.approx(250.0)  # idle time counts against it
    assert total["flops"] == pytest.approx(1e9 + 1e6)  # the while's own numbers are skipped
    assert total["flop_rate"] == pytest.approx((1e9 + 1e6) / 250e3)
    assert total["time_fraction"] == pytest.approx(1.0)
    step = prog["0"]
    assert step["total_time_us"] == pytest.approx(240.0)
    assert prog["Average"]["total_time_us"] == pytest.approx(240.0)
    ops = _rows(a.ops[True])
    assert ops["while.3"]["potential_time_saved_us"] == 0.0  # containers: children count


def test_infeed_outfeed_variant():
    infeed = dict(
        operation="infeed.4",
        category="infeed",
        total_time_ps=50 * US,
        self_time_ps=50 * US,
        bytes=1e6,
        step=0,
    )
    a = roofline.analyze([_profile([COMPUTE_OP, infeed], span_us=250, steps=[(0, 200)])], "h")
    assert "infeed.4" in _rows(a.ops[True])
    assert "infeed.4" not in _rows(a.ops[False])
    with_io = {r["step"]: r for r in a.program[True].row_dicts()}
    without = {r["step"]: r for r in a.program[False].row_dicts()}
    assert without["Total"]["total_time_us"] == pytest.approx(200.0)
    assert without["0"]["total_time_us"] == pytest.approx(150.0)
    assert with_io["Total"]["bytes"] == pytest.approx(2e6)
    assert without["Total"]["bytes"] == pytest.approx(1e6)
    # Op time shares are of the profile's time without infeed/outfeed.
    assert _rows(a.ops[False])["dot.1"]["time_fraction"] == pytest.approx(100 / 200)


def test_program_hbm_counts_ops_without_breakdown():
    """XProf drops such ops from Program HBM once any op has a breakdown; we count them."""
    with_breakdown = dict(COMPUTE_OP, hbm_bytes=4e5, vmem_read_bytes=6e5)
    no_breakdown = dict(MEMORY_OP)  # all bytes are HBM
    a = roofline.analyze([_profile([with_breakdown, no_breakdown])], "h")
    total = a.program[True].row_dicts()[0]
    assert total["hbm_bytes"] == pytest.approx(4e5 + 1e8)


def test_vmem_and_cmem_take_part_when_the_chip_has_them():
    dev = _device(has_merged_vmem=True)
    dev.memories.append(MemoryPeak("vmem_read", "VMEM Read", 10.0, "profile"))
    op = dict(COMPUTE_OP, vmem_read_bytes=1e6)  # 10 GB/s against a 10 GB/s roof
    a = roofline.analyze([_profile([op], device=dev)], "h")
    row = a.ops[True].row_dicts()[0]
    assert row["bound_by"] == "VMEM Read"
    assert row["roofline_efficiency"] == pytest.approx(1.0)


def test_unknown_peaks_give_rates_but_no_efficiency():
    dev = DeviceInfo(type="CPU", kind="cpu", num_cores=1)
    a = roofline.analyze([_profile([COMPUTE_OP], device=dev)], "h")
    row = a.ops[True].row_dicts()[0]
    assert row["flop_rate"] == pytest.approx(1e4)
    assert row["roofline_efficiency"] is None and row["peak_flop_rate"] is None
    assert row["bound_by"] == "Unknown"
    assert "peaks_unknown" in [d.code for d in a.diagnostics]


def test_zero_work_op_is_unknown_bound():
    idle = dict(operation="after-all.9", category="after-all", total_time_ps=US, self_time_ps=US)
    row = roofline.analyze([_profile([idle])], "h").ops[True].row_dicts()[0]
    assert row["bound_by"] == "Unknown"
    assert row["potential_time_saved_us"] is None


def test_each_precision_sits_under_its_own_ceiling():
    dev = DeviceInfo(type="gpu", kind="gpu", num_cores=1)
    dev.compute += [
        ComputePeak("fp32", 10_000.0, "datasheet"),
        ComputePeak("bf16", 100_000.0, "datasheet"),
    ]
    dev.memories.append(MemoryPeak("hbm", "HBM", 1000.0, "datasheet"))
    f32 = dict(COMPUTE_OP, operation="dot.f32", precision="f32")  # 1e4 GFLOP/s
    bf16 = dict(COMPUTE_OP, operation="dot.bf16", precision="bf16")
    a = roofline.analyze([_profile([f32, bf16], device=dev)], "h")
    ops = _rows(a.ops[True])
    assert ops["dot.f32"]["peak_flop_rate"] == pytest.approx(10_000.0)
    assert ops["dot.f32"]["compute_efficiency"] == pytest.approx(1.0)
    assert ops["dot.bf16"]["peak_flop_rate"] == pytest.approx(100_000.0)
    assert ops["dot.bf16"]["compute_efficiency"] == pytest.approx(0.1)
    # The Program roof for the mix: 2e9 FLOP would take 1e9/1e4 + 1e9/1e5 ns on their roofs.
    total = a.program[True].row_dicts()[0]
    assert total["peak_flop_rate"] == pytest.approx(2e9 / (1e9 / 1e4 + 1e9 / 1e5))
    assert total["precision"] == "mixed"
