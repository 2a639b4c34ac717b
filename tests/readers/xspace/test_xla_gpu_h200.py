"""Real XLA GPU profiles of one H200 (testdata/xla_gpu_h200, JAX 0.11.2): PM-sampling counters,
the MLP's FLOPs against its dot shapes and XLA's cost analysis, every op under its roof.

Every expected figure is derived here from the raw XSpace with `tb_roofline.protos` only (the
`_counters_` line, the host's `StepTraceAnnotation` events, the kernels of the stream line, the
HLO in `/host:metadata`), never with the reader or the model under test.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.protos import hlo_pb2, xplane_pb2
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
H200 = os.path.join(REPO, "testdata", "xla_gpu_h200")
GIB = 2**30


def _path(run: str) -> str:
    (path,) = glob.glob(os.path.join(H200, run, "plugins", "profile", "*", "*.xplane.pb"))
    return path


def _space(run: str) -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    with open(_path(run), "rb") as f:
        space.ParseFromString(f.read())
    return space


def _plane(space, name: str):
    return next(p for p in space.planes if p.name == name)


def _plane_stats(plane) -> dict:
    out = {}
    for st in plane.stats:
        kind = st.WhichOneof("value")
        out[plane.stat_metadata[st.metadata_id].name] = getattr(st, kind)
    return out


def _run_id(service: RooflineService, run: str) -> str:
    return next(r["run"] for r in service.list_runs()["runs"] if r["tb_run"] == run)


@pytest.fixture(scope="module")
def service():
    return RooflineService(H200)


def _records(service, run: str) -> dict:
    prog = service.program(_run_id(service, run), "", True)
    return {r[1]: dict(zip(prog["columns"], r)) for r in prog["rows"]}


# ------------------------------------------------------------------ PM sampling, by hand


class _Raw:
    """The PM-sampling profile as its raw events say: each metric's samples (start ps,
    value) in file order, the kernels' spans, the host's step markers, the plane's figures."""

    def __init__(self, run: str = "mlp_pm_sampling"):
        space = _space(run)
        gpu = _plane(space, "/device:GPU:0")
        self.stats = _plane_stats(gpu)
        self.samples: dict = {}
        begin, end = [], []
        for line in gpu.lines:
            for ev in line.events:
                t = line.timestamp_ns * 1000 + ev.offset_ps
                if line.name == "_counters_":
                    name = gpu.event_metadata[ev.metadata_id].name
                    (st,) = ev.stats
                    assert gpu.stat_metadata[st.metadata_id].name == name
                    self.samples.setdefault(name, []).append((t, st.double_value))
                else:
                    begin.append(t)
                    end.append(t + ev.duration_ps)
        self.kernels = np.array(begin), np.array(end)
        host = _plane(space, "/host:CPU")
        self.steps = sorted(
            (st.int64_value, line.timestamp_ns * 1000 + ev.offset_ps, ev.duration_ps)
            for line in host.lines
            for ev in line.events
            for st in ev.stats
            if host.stat_metadata[st.metadata_id].name == "step_num"
        )

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray, float]:
        """(starts, values, interval) of a metric; its last sample, stamped before its first
        (the sampler's), is left out."""
        a = np.array(self.samples[name])
        assert a[-1, 0] < a[0, 0] and (np.diff(a[:-1, 0]) > 0).all()
        ts, v = a[:-1, 0], a[:-1, 1]
        return ts, v, float(np.median(np.diff(ts)))

    def windows(self) -> list:
        """(record label, lo ps, hi ps): the Total's (the GPU's span: kernels and steps) and
        each step's (its host marker: the kernels carry no group id)."""
        begin, end = self.kernels
        lo = min(begin.min(), self.steps[0][1])
        hi = max(end.max(), max(b + d for _, b, d in self.steps))
        return [("Total (HW counters)", lo, hi)] + [
            (f"{s} (HW counters)", b, b + d) for s, b, d in self.steps
        ]


def _integrate(ts, v, interval, lo, hi) -> tuple[float, float, float]:
    """(Σ v × overlap / interval, Σ v × overlap, covered ps): samples cover [t, t + interval),
    up to the next sample's start (their spacing varies by 1-2 ns about the interval)."""
    end = np.minimum(ts + interval, np.append(ts[1:], np.inf))
    ov = np.clip(np.minimum(end, hi) - np.maximum(ts, lo), 0, None)
    return float((v * ov).sum() / interval), float((v * ov).sum()), float(ov.sum())


DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
CYCLES = "sm__cycles_active.avg"


def test_pm_sampling_records_are_mean_dram_percent_times_the_plane_bandwidth(service):
    """Total (HW counters) and each step's: mean DRAM throughput % over the covered time ×
    the plane's `memory_bandwidth` stat (4,814.3 GB/s) × that time; under the HBM roof."""
    raw = _Raw()
    ts, pct, interval = raw.series(DRAM)
    assert interval == pytest.approx(100e6, rel=1e-4)  # 100 µs, as captured
    assert (pct <= 100).all()
    peak_bps = float(raw.stats["memory_bandwidth"])
    records = _records(service, "mlp_pm_sampling")
    measured = {k: r for k, r in records.items() if r["record_type"] in ("total_hw", "step_hw")}
    windows = raw.windows()
    assert set(measured) == {w[0] for w in windows}
    for label, lo, hi in windows:
        _, weighted, covered = _integrate(ts, pct, interval, lo, hi)
        mean_pct = weighted / covered
        nbytes = mean_pct / 100 * peak_bps * covered * 1e-12
        r = measured[label]
        assert r["bytes"] == pytest.approx(nbytes, rel=1e-9), label
        assert r["hbm_bytes"] == r["bytes"]
        assert r["total_time_us"] == pytest.approx((hi - lo) / 1e6, rel=1e-12)
        assert r["memory_bw"] == pytest.approx(nbytes / ((hi - lo) * 1e-12) / GIB, rel=1e-9)
        assert r["bytes_coverage"] == pytest.approx(covered / (hi - lo), rel=1e-12)
        # under the roof: at most the plane's bandwidth, and the share of it the counter says
        assert r["memory_bw"] <= peak_bps / GIB
        assert r["max_mem_bw_utilization"] == pytest.approx(
            mean_pct / 100 * covered / (hi - lo), rel=1e-9
        )
        assert r["flops"] is None and r["flops_source"] == "counter"
        assert r["potential_time_saved_us"] is None
    # figures measured on the capture (GiB/s): 1,017 over the Total, 861-1,126 per step
    assert measured["Total (HW counters)"]["memory_bw"] == pytest.approx(1017.0, abs=0.1)
    assert measured["2 (HW counters)"]["memory_bw"] == pytest.approx(1125.6, abs=0.1)


def test_pm_sampling_notes_state_interval_coverage_peak_and_sm_activity(service):
    """The note gives the sampling interval, the coverage, which HBM peak the % is taken of,
    and the SMs' active share: sm__cycles_active.avg over the cycles the rated 1,980 MHz
    clock (the plane's `clock_rate`) fits in the covered time; never more than the share of
    the window a kernel ran (the SMs are idle between kernels)."""
    raw = _Raw()
    ts, cycles, interval = raw.series(CYCLES)
    clock_hz = raw.stats["clock_rate"] * 1e3
    assert clock_hz == 1.98e9
    assert (cycles <= clock_hz * interval * 1e-12).all()  # a sample holds at most its cycles
    notes = {
        d["code"]: d["message"]
        for d in service.diagnostics(_run_id(service, "mlp_pm_sampling"), "")["diagnostics"]
    }
    assert "no_hw_counters" not in notes
    text = notes["pm_counters"]
    assert "every 0.1 ms" in text and "cover 100.0% of the Total's time" in text
    assert "4,814.3 GB/s, source: profile" in text and "never attributed to ops" in text
    begin, end = raw.kernels
    for label, lo, hi in raw.windows():
        amount, _, covered = _integrate(ts, cycles, interval, lo, hi)
        active = amount / (clock_hz * covered * 1e-12)
        busy = (np.clip(end, lo, hi) - np.clip(begin, lo, hi)).sum() / (hi - lo)
        assert 0 < active <= busy, label  # one stream: kernels never overlap
        step = label.split(" ")[0]
        shown = f"SMs active {active:.1%}" if step == "Total" else f"{step} {active:.1%}"
        assert shown in text, label


def test_counters_line_is_not_ops(tmp_path):
    """The `_counters_` line adds counter series and nothing else: the op table, steps and
    spans of the profile equal those of the same profile with the line removed."""
    from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace

    space = _space("mlp_pm_sampling")
    with_counters = read_gpu_cpu_xspace(space, "h")
    gpu = _plane(space, "/device:GPU:0")
    keep = [line for line in gpu.lines if line.name != "_counters_"]
    del gpu.lines[:]
    gpu.lines.extend(keep)
    without = read_gpu_cpu_xspace(space, "h")
    assert without.counter_series is None and with_counters.counter_series is not None
    for part in ("keys", "rows"):
        a, b = getattr(with_counters.ops, part), getattr(without.ops, part)
        assert a.keys() == b.keys()
        for col in a:
            assert np.array_equal(a[col], b[col]), (part, col)
    assert with_counters.steps == without.steps
    assert with_counters.core_spans == without.core_spans
    cs = with_counters.counter_series
    assert sorted(cs.names) == sorted([CYCLES, DRAM])
    assert sorted(cs.quantities) == ["dram_pct", "sm_active_cycles"]
    assert len(cs.ts_ps) == 400  # 201 samples each, the two stamped before the first left out
    codes = {d.code for d in with_counters.diagnostics}
    assert "counter_samples_dropped" in codes


def test_counter_line_fast_decoding_equals_protobuf_objects():
    """The numpy decoding of the `_counters_` line gives what protobuf's objects say, on the
    real line and on lines whose events need longer varints (metadata ids past 127)."""
    from tb_roofline.readers.xspace.xla_gpu_cpu import counters

    gpu = _plane(_space("mlp_pm_sampling"), "/device:GPU:0")
    line = next(line for line in gpu.lines if line.name == "_counters_")
    fast = counters._fast_columns(line)
    assert fast is not None
    for a, b in zip(fast, counters._protobuf_columns(line)):
        assert np.array_equal(a, b)
    wide = xplane_pb2.XLine()
    wide.CopyFrom(line)
    for ev in wide.events:
        ev.metadata_id += 300
        ev.stats[0].metadata_id += 70000
    fast = counters._fast_columns(wide)
    assert fast is not None
    for a, b in zip(fast, counters._protobuf_columns(wide)):
        assert np.array_equal(a, b)
    wide.events[3].duration_ps = 5  # a layout the fast path does not take: read as objects
    assert counters._fast_columns(wide) is None
    md, ts, value = counters._columns(wide)
    assert np.array_equal(value, counters._protobuf_columns(wide)[2])


def test_cli_report_shows_the_measured_record():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tb_roofline.serve.cli.main",
            "report",
            os.path.join(H200, "mlp_pm_sampling"),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=REPO),
    ).stdout
    assert "Total (HW counters)" in out and "4 (HW counters)" in out
    assert "carries no hardware counters" not in out and "SMs active" in out


def test_xla_profile_without_counters_says_how_to_get_them(service):
    notes = {
        d["code"]: d["message"]
        for d in service.diagnostics(_run_id(service, "mlp"), "")["diagnostics"]
    }
    text = notes["no_hw_counters"]
    assert "PM sampling" in text and "_counters_" in text and "gpu_pm_sample_counters" in text


# ------------------------------------------------------------------ the MLP's FLOPs, by hand

BATCH, SIZES = 2048, (4096, 8192, 8192, 1024)


def _hlo(run: str, program: str) -> hlo_pb2.HloModuleProto:
    meta = _plane(_space(run), "/host:metadata")
    md = next(v for v in meta.event_metadata.values() if v.name.startswith(program + "("))
    blob = next(st.bytes_value for st in md.stats if st.WhichOneof("value") == "bytes_value")
    proto = hlo_pb2.HloProto()
    proto.ParseFromString(blob)
    return proto.hlo_module


def _dot_flops(module) -> tuple[dict, dict]:
    """({custom call: FLOPs}, {dot inside a fusion: FLOPs}) of one execution: 2 × result
    elements × contracted size, the contraction from the cuBLAS call's backend config or the
    dot's dimension numbers."""
    by_id = {i.id: i for c in module.computations for i in c.instructions}
    calls, fused = {}, {}
    for comp in module.computations:
        for ins in comp.instructions:
            lhs = by_id[ins.operand_ids[0]].shape if ins.operand_ids else None
            if ins.opcode == "custom-call" and ins.custom_call_target == "__cublas$lt$matmul":
                cfg = json.loads(ins.backend_config)["gemm_backend_config"]
                dims = cfg["dot_dimension_numbers"]["lhs_contracting_dimensions"]
                k = int(np.prod([lhs.dimensions[int(d)] for d in dims]))
                out = ins.shape.tuple_shapes[0]  # (result, workspace)
                calls[ins.name] = 2 * int(np.prod(out.dimensions)) * k
            elif ins.opcode == "dot":
                dims = ins.dot_dimension_numbers.lhs_contracting_dimensions
                k = int(np.prod([lhs.dimensions[d] for d in dims]))
                fused[ins.name] = 2 * int(np.prod(ins.shape.dimensions)) * k
    return calls, fused


def test_mlp_step_flops_are_its_dots_and_xla_cost_analysis_leaves_out_cublas(service):
    """A step of the MLP (batch 2048, 4096→8192→8192→1024, bf16, value_and_grad over the
    weights) does 2·B·a·b FLOPs per layer forward, the same for each weight gradient, and the
    same for each input gradient but the first layer's (x is not differentiated): 1,202.59
    GFLOP. In the HLO the forward and input-gradient dots are cuBLAS custom calls and the
    weight gradients Triton gemm fusions; XLA's `cost_analysis()` (447.78 GFLOP) counts the
    fusions (and the elementwise work) and not the custom calls. tb-roofline costs both."""
    layers = [2 * BATCH * a * b for a, b in zip(SIZES[:-1], SIZES[1:])]
    forward, weight_grads, input_grads = sum(layers), sum(layers), sum(layers[1:])
    by_shape = forward + weight_grads + input_grads
    assert by_shape == 1_202_590_842_880
    calls, fused = _dot_flops(_hlo("mlp", "jit_step"))
    assert len(calls) == 5 and len(fused) == 3
    assert sum(calls.values()) == forward + input_grads
    assert sum(fused.values()) == weight_grads
    with open(os.path.join(H200, "mlp", "cost_analysis.json")) as f:
        xla = json.load(f)["cost_analysis"]["flops"]
    # XLA's figure is the fusions' dots plus elementwise work (under 0.3%), no custom call
    assert 0 < xla - weight_grads < 0.003 * xla
    # the tool: each step's FLOPs are every dot plus the same elementwise work
    records = _records(service, "mlp")
    steps = [r for r in records.values() if r["record_type"] == "step"]
    assert len(steps) == 5
    ops = service.ops(_run_id(service, "mlp"), "", True)
    rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
    per_call = {r["operation"]: r["flops"] / r["occurrences"] for r in rows}
    for name, flops in calls.items():
        assert per_call[name] == flops, name
    for r in steps:
        assert by_shape <= r["flops"] < by_shape * 1.001
        # what XLA counts = the tool's step less the custom calls (XLA sums in float32)
        assert r["flops"] - sum(calls.values()) == pytest.approx(xla, rel=1e-6)


# Ops above the HBM roof by their cost, each because its operand is still in L2 (50 MB on the
# H200): `wrapped_transpose` transposes the 16.8 MB `input_transpose_fusion.3` wrote just
# before it (33.6 MB in 6.6 µs by its cost, 5.07 TB/s).
ABOVE_HBM = {"attention": {"wrapped_transpose"}, "attention_cmdbuf": {"wrapped_transpose"}}


@pytest.mark.parametrize("run", ["mlp", "mlp_pm_sampling", "attention", "attention_cmdbuf"])
def test_every_op_point_is_under_the_h200_roofs(service, run):
    """Every measured op point of the real profiles is under its roofs: its FLOP rate under its
    precision's peak, its bandwidth under the plane's `memory_bandwidth` (4,814.3 GB/s, the
    data sheet's 4.8 TB/s: the run keeps it, never a figure raised to fit an op); an op above
    it by its cost is caveated `above_roof` (no measurement, no saving) and named above."""
    raw_bw = float(_plane_stats(_plane(_space(run), "/device:GPU:0"))["memory_bandwidth"])
    run_id = _run_id(service, run)
    device = service.answer("device", run_id, "")["device"]
    hbm = next(m for m in device["memories"] if m["id"] == "hbm")
    assert hbm["peak_gbs"] == pytest.approx(raw_bw / 1e9, rel=1e-12), hbm["note"]
    ops = service.ops(run_id, "", True)
    rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
    above = {r["operation"] for r in rows if r["caveat"] == "above_roof"}
    assert above == ABOVE_HBM.get(run, set())
    measured = [r for r in rows if r["measurement"]]
    assert len(measured) >= 15
    for r in measured:
        if r["flop_rate"] is not None:
            assert r["flop_rate"] <= r["peak_flop_rate"], r["operation"]
        if r["memory_bw"] is not None:
            assert r["memory_bw"] * GIB <= raw_bw, r["operation"]
    for r in rows:
        if r["operation"] in above:
            assert r["memory_bw"] * GIB > raw_bw and r["potential_time_saved_us"] is None


def test_a_slice_of_a_bitcast_parameter_reads_its_slice(service):
    """JAX's q/k/v split of the fused projection: `input_transpose_fusion.{3,4,5}` each bitcast
    their [8192, 3072] bf16 operand to [8, 1024, 3072], slice [8, 1024, 1024] out of it and
    transpose it: they read the slice and write as much, 2 × 8·1024·1024 × 2 B per call (XLA's
    cost analysis counts the whole 50 MB operand, 3× the read)."""
    module = _hlo("attention", "jit_f")
    by_id = {i.id: i for c in module.computations for i in c.instructions}
    ops = service.ops(_run_id(service, "attention"), "", True)
    rows = {r[4]: dict(zip(ops["columns"], r)) for r in ops["rows"]}
    for name in (
        "input_transpose_fusion.3",
        "input_transpose_fusion.4",
        "input_transpose_fusion.5",
    ):
        ins = next(i for c in module.computations for i in c.instructions if i.name == name)
        (operand,) = [by_id[o] for o in ins.operand_ids]
        assert list(operand.shape.dimensions) == [8192, 3072]
        out = int(np.prod(ins.shape.dimensions)) * 2
        assert out == 8 * 1024 * 1024 * 2
        r = rows[name]
        assert r["bytes"] / r["occurrences"] == 2 * out, name
        assert r["measurement"] and r["memory_bw"] * GIB < 4814.304e9


# ------------------------------------------------------------------ command buffers


def _kernels(run: str) -> list:
    """(name, hlo_op, duration ps) of every kernel and memset on the GPU's stream lines."""
    gpu = _plane(_space(run), "/device:GPU:0")
    names = {k: v.name for k, v in gpu.stat_metadata.items()}
    out = []
    for line in gpu.lines:
        if line.name == "_counters_":
            continue
        for ev in line.events:
            hlo_op = next(
                gpu.stat_metadata[st.ref_value].name
                for st in ev.stats
                if names[st.metadata_id] == "hlo_op"
            )
            out.append((gpu.event_metadata[ev.metadata_id].name, hlo_op, ev.duration_ps))
    return out


def test_command_buffer_kernels_are_attributed_by_their_names(service):
    """XLA's command buffers (its default) put the program's kernels in a CUDA graph: every
    kernel's hlo_op is the buffer (`command_buffer_1`), which the HLO does not hold. A kernel
    XLA generated is named after its instruction ("input_transpose_fusion.3" →
    `input_transpose_fusion_3`) and is attributed by that name; cuBLAS kernels and memsets
    carry no instruction's name and stay unattributed. Against the same program without
    command buffers (`attention`): ops of one name cost the same per call; a kernel XLA shares
    between two identical fusions counts for the one it is named after; the kernel time per
    step agrees; the step's FLOPs are what XLA's cost analysis of that compile says (it leaves
    the cuBLAS calls out too: 71,992,868,864, capture_log.txt)."""
    raw = _kernels("attention_cmdbuf")
    assert {h for _, h, _ in raw} == {"command_buffer_1"}
    hlo_names = {
        i.name for c in _hlo("attention_cmdbuf", "jit_f").computations for i in c.instructions
    }
    assert "command_buffer_1" not in hlo_names
    named = {n.replace(".", "_").replace("-", "_"): n for n in hlo_names}
    library = [(n, d) for n, _, d in raw if n not in named]
    assert {n.split(" ")[0].split("_")[0] for n, _ in library} == {"nvjet", "Memset"}

    def ops(run):
        o = service.ops(_run_id(service, run), "", True)
        return {r[4]: dict(zip(o["columns"], r)) for r in o["rows"]}

    cmd, plain = ops("attention_cmdbuf"), ops("attention")
    (lost,) = [r for r in cmd.values() if r["category"] == "unattributed"]
    assert lost["occurrences"] == len(library) == 60  # 7 cuBLAS calls and 5 memsets a step
    assert lost["total_time_us"] == pytest.approx(sum(d for _, d in library) / 1e6, rel=1e-12)
    shared = {"input_transpose_fusion.2": "input_transpose_fusion"}
    shared["loop_transpose_fusion.1"] = "loop_transpose_fusion"
    for name, r in cmd.items():
        if r["category"] == "unattributed":
            continue
        p = plain[name]
        for col in ("flops", "bytes"):
            assert r[col] / r["occurrences"] == p[col] / p["occurrences"], (name, col)
        assert r["occurrences"] == p["occurrences"] + (5 if name in shared else 0), name
    assert all(n not in cmd for n in shared.values())
    per_step = [sum(r["total_time_us"] for r in t.values()) / 5 for t in (cmd, plain)]
    assert per_step[0] == pytest.approx(per_step[1], rel=0.01)
    with open(os.path.join(H200, "capture_log.txt")) as f:
        line = next(x for x in f if x.startswith("jax attention flags='' "))
    xla = float(line.split("'flops': ")[1].split(",")[0])
    for r in _records(service, "attention_cmdbuf").values():
        if r["record_type"] == "step":
            assert r["flops"] == pytest.approx(xla, rel=1e-6)
    notes = {
        d["code"]: d["message"]
        for d in service.diagnostics(_run_id(service, "attention_cmdbuf"), "")["diagnostics"]
    }
    assert "60 in a command buffer" in notes["unattributed_time"]
    assert notes["kernels_by_name"].startswith(f"{len(raw) - 60} kernels name an op")


def test_memset_details_stat_names_a_memset():
    """XLA writes a memset's details under `Memset_details` (capital M): a memset without an
    hlo_op is a runtime fill, not a kernel of the program."""
    from tb_roofline.readers.xspace.xla_gpu_cpu.events import copy_kind

    gpu = _plane(_space("mlp"), "/device:GPU:0")
    assert "Memset_details" in {m.name for m in gpu.stat_metadata.values()}
    assert copy_kind("Memset 3", {"Memset_details": "size:1024"}) == "memset"


def test_xla_counter_series_survive_the_disk_cache_encoding():
    """The disk cache's codec keeps the `_counters_` series of an XSpace read."""
    from tb_roofline.readers.xspace.read import read_xspace_file
    from tb_roofline.serve.caches import codec

    data = read_xspace_file(_path("mlp_pm_sampling"), "h200")
    cs = data.counter_series
    back = codec.decode(codec.encode(data)).counter_series
    assert back.names == cs.names and back.quantities == cs.quantities
    assert np.array_equal(back.value, cs.value) and np.array_equal(back.ts_ps, cs.ts_ps)
    assert back.rated_clock_mhz == cs.rated_clock_mhz == 1980.0


def test_damaged_counter_lines_are_left_out_and_said():
    """A `_counters_` line whose samples hold no value, a negative or a NaN one, or times
    beyond 2^62 ps is read without failing: those samples are left out and counted; a line
    with none left gives no series (no measured record with 0 bytes)."""
    from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace

    space = _space("mlp_pm_sampling")
    line = next(x for x in _plane(space, "/device:GPU:0").lines if x.name == "_counters_")
    del line.events[0].stats[:]
    line.events[1].stats[0].double_value = -1.0
    line.events[2].stats[0].double_value = float("nan")
    line.events[3].offset_ps = 2**63 - 1
    data = read_gpu_cpu_xspace(space, "h")
    (note,) = [d for d in data.diagnostics if d.code == "counter_samples_dropped"]
    assert note.message.startswith("6 PM-sampling")  # 4 damaged, 2 stamped before the first
    assert len(data.counter_series.ts_ps) == 402 - 6
    line.timestamp_ns = 2**62
    data = read_gpu_cpu_xspace(space, "h")
    assert data.counter_series is None
    assert [d.message[:18] for d in data.diagnostics if d.code == "counter_samples_dropped"] == [
        "402 PM-sampling co"
    ]


# ------------------------------------------------------------- the same model, PyTorch traces


def _kineto_activity(run: str, metric: str) -> list:
    """(label, mean % over the covered time) of the Total and each ProfilerStep of a Kineto
    PM-sampling fixture, from its raw counter events."""
    import gzip

    path = os.path.join(REPO, "testdata", "kineto", run, "worker0.1700000000000.pt.trace.json.gz")
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    ts, v = np.array(
        sorted(
            (e["ts"], e["args"][""])
            for e in events
            if e.get("ph") == "C" and e.get("pid") == "GPU 0 Counters" and e["name"] == metric
        )
    ).T
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    )
    windows = [("Total", steps[0][0], steps[-1][1])]
    windows += [(str(i + 1), lo, hi) for i, (lo, hi) in enumerate(steps)]
    out = []
    for label, lo, hi in windows:
        _, weighted, covered = _integrate(ts, v, float(np.median(np.diff(ts))), lo, hi)
        out.append((label, weighted / covered))
    return out


@pytest.mark.parametrize(
    "run, metric, words",
    [
        (
            "pm_sampling_kineto",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "tensor pipes busy",
        ),
        ("pm_sampling_pytorch", "SM Active (%)", "SMs active"),
    ],
)
def test_kineto_activity_shares_come_from_the_same_model(run, metric, words):
    """PyTorch traces' SM Active % and tensor-pipe % series: time-weighted means over the
    Total's and each step's covered time, in the `pm_counters` note."""
    service = RooflineService(os.path.join(REPO, "testdata", "kineto"))
    notes = {d["code"]: d["message"] for d in service.diagnostics(run, "")["diagnostics"]}
    text = notes["pm_counters"]
    (total, *steps) = _kineto_activity(run, metric)
    assert f"{words} {total[1] / 100:.1%}" in text
    assert "per step: " + ", ".join(f"{s} {p / 100:.1%}" for s, p in steps) in text
