"""Guidance: each rule fires on a profile built to trigger it, with the evidence and
time saved computed by hand from the raw trace; nothing fires on clean cases; the invariants
(real ops, evidence equal to the ops' exported numbers, no caveated op, totals within the step
time) hold on every committed profile; MFU by hand."""

from __future__ import annotations

import glob
import gzip
import json
import math
import os

import pytest
from testpaths import TESTS

from tb_roofline.model.guidance.findings import guidance as model_guidance
from tb_roofline.model.records.roofline import analyze
from tb_roofline.readers.xspace.read import read_xspace
from tb_roofline.serve.cli import main as cli
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.service.guidance import guidance_answer
from tb_roofline.serve.service.workload_file import WorkloadFileError, workload_from_dict
from tb_roofline.synthetic import SynthConfig, make_tpu_xspace
from tb_roofline.table.op_table import NO_STEP
from tb_roofline.table.timeline import is_communication
from tb_roofline.table.timeline_builder import TimelineBuilder


def guidance(analysis, *args):
    """The `/guidance` answer the service lays out from the model's record."""
    return guidance_answer(model_guidance(analysis, *args))


TESTDATA = os.path.join(TESTS, "..", "testdata")
GUIDANCE = os.path.join(TESTDATA, "guidance")
DEVICE_FILE = os.path.join(GUIDANCE, "roofline_device.json")


def _service(logdir, device_file=None):
    return RooflineService(logdir, device_file=device_file)


def _answer(logdir, run=None, device_file=None, io=True, host=""):
    s = _service(logdir, device_file)
    run = run or s.list_runs()["runs"][0]["run"]
    return s, run, s.guidance(run, host, io)


def _ops_by_identity(s, run, io=True, host=""):
    ans = s.ops(run, host, io)
    rows = [dict(zip(ans["columns"], r)) for r in ans["rows"]]
    return {(r["program_id"], r["operation"], r["precision"]): r for r in rows}


def _by_rule(g, rule):
    return [f for f in g["findings"] if f["rule"] == rule]


def _top_level_ops(path):
    """(name, ts µs, dur µs) of the top-level cpu ops of the main thread, in time order."""
    with gzip.open(path, "rt") as f:
        events = [
            e
            for e in json.load(f)["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") == "cpu_op"
        ]
    events.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    out, end = [], -math.inf
    for e in events:
        if e["ts"] >= end:
            out.append((e["name"], float(e["ts"]), float(e["dur"])))
            end = e["ts"] + e["dur"]
    return out


def _trace(run):
    return glob.glob(os.path.join(GUIDANCE, run, "*.pt.trace.json.gz"))[0]


# --------------------------------------------------------------------- rules, one case each
def _device_hbm_gbs():
    with open(DEVICE_FILE) as f:
        return json.load(f)["memories"]["hbm"]["gbs"]


def test_fusion_pairs_on_eager_elementwise_chain():
    s, run, g = _answer(GUIDANCE, "torch/elementwise_chain")
    ops = _ops_by_identity(s, run)
    fusion = {
        (f["ops"][0]["operation"], f["ops"][1]["operation"]): f for f in _by_rule(g, "fusion")
    }
    assert set(fusion) == {
        ("aten::mul", "aten::add"),
        ("aten::add", "aten::relu"),
        ("aten::relu", "aten::mul"),
    }
    top = _top_level_ops(_trace("torch/elementwise_chain"))
    pairs = [
        (a, b)
        for a, b in zip(top, top[1:])
        if (a[0], b[0]) == ("aten::mul", "aten::add") and b[1] >= a[1] + a[2]
    ]
    shorter = sum(min(a[2], b[2]) for a, b in pairs)
    # By hand: the shared f32[16777216] tensor written and read once less, at the DRAM roof.
    bound = len(pairs) * 2 * 16777216 * 4 / (_device_hbm_gbs() * 1e3)
    f = fusion[("aten::mul", "aten::add")]
    assert f["bound_us"] == pytest.approx(bound, rel=1e-9)
    assert f["time_saved_us"] == pytest.approx(min(bound, shorter), rel=1e-9)
    assert f["evidence"]["facts"]["pairs"] == 4  # one per profiled step
    assert f["evidence"]["facts"]["shared_shape"] == [16777216]
    assert "4 × 2 × 67,108,864 B" in f["bound_formula"]
    assert "torch.compile" in f["suggestion"]
    for rec in f["evidence"]["records"]:
        assert rec["bound_by"] == "HBM" and rec["category"] == "elementwise"  # main memory
        assert ops[(rec["program_id"], rec["operation"], rec["precision"])]["bound_by"] == "HBM"
    # 3 pairs: one group (the ops' own gaps to their roofs, far_below_roof, rank above it)
    (group,) = [gr for gr in g["groups"] if gr["rule"] == "fusion"]
    assert group["title"].startswith("3 fusion pairs, ") and group["title"].endswith(
        "µs per step in all"
    )
    assert group["counted_us"] == pytest.approx(sum(x["counted_us"] for x in fusion.values()))


def test_no_fusion_for_adjacent_ops_that_share_no_tensor(tmp_path):
    """The same chain with aten::add's input recorded as another shape ([4096, 4096]: the same
    element count, another tensor by shape): the pairs with add share nothing and vanish; the
    relu → mul pair still shares [16777216]."""
    src = _trace("torch/elementwise_chain")
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if e.get("name") == "aten::add" and e.get("cat") == "cpu_op":
            e["args"]["Input Dims"] = [[4096, 4096]] + e["args"]["Input Dims"][1:]
    out = tmp_path / "torch" / "unrelated"
    out.mkdir(parents=True)
    with gzip.open(out / os.path.basename(src), "wt") as f:
        json.dump(doc, f)
    s, run, g = _answer(str(tmp_path), "torch/unrelated", device_file=DEVICE_FILE)
    pairs = {(f["ops"][0]["operation"], f["ops"][1]["operation"]) for f in _by_rule(g, "fusion")}
    assert pairs == {("aten::relu", "aten::mul")}


def _call_pairs(path):
    """(first, second, shared dims or None, shorter µs) of each back-to-back pair of top-level
    ops in the raw trace: the first call's output is its largest recorded array; it is shared
    when the second call records an array of that shape."""
    with gzip.open(path, "rt") as f:
        events = [
            e
            for e in json.load(f)["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") == "cpu_op"
        ]
    events.sort(key=lambda e: (e["ts"], -e["dur"]))
    top, end = [], -math.inf
    for e in events:
        if e["ts"] >= end:
            top.append(e)
            end = e["ts"] + e["dur"]
    out = []
    for a, b in zip(top, top[1:]):
        dims_a = [tuple(d) for d in a["args"]["Input Dims"] if d]
        dims_b = {tuple(d) for d in b["args"]["Input Dims"] if d}
        produced = max(dims_a, key=math.prod)
        shared = produced if produced in dims_b else None
        out.append((a["name"], b["name"], shared, min(a["dur"], b["dur"])))
    return out


def test_fusion_bills_each_pair_at_the_tensor_its_calls_share():
    """q [2048, 4096] and k [2048, 1024] each cloned then scaled (SGLang's per-head q/k norm
    pattern): clone → mul is billed at q for the q calls and at k for the k calls, and
    mul(q) → clone(k), back to back but sharing no tensor, is not reported. Worked out from
    the raw events (shapes in call order), not from the op names."""
    s, run, g = _answer(GUIDANCE, "torch/qk_clone_norm", DEVICE_FILE)
    fusion = {
        (f["ops"][0]["operation"], f["ops"][1]["operation"]): f for f in _by_rule(g, "fusion")
    }
    assert set(fusion) == {("aten::clone", "aten::mul")}
    pairs = _call_pairs(_trace("torch/qk_clone_norm"))
    assert any(p[:2] == ("aten::mul", "aten::clone") and p[2] is None for p in pairs)
    gbs = _device_hbm_gbs()
    terms: dict = {}
    for first, second, shared, shorter in pairs:
        if (first, second) == ("aten::clone", "aten::mul") and shared is not None:
            n, t = terms.get(shared, (0, 0.0))
            terms[shared] = (n + 1, t + shorter)
    assert set(terms) == {(2048, 4096), (2048, 1024)}
    bounds = {d: n * 2 * math.prod(d) * 4 / (gbs * 1e3) for d, (n, _) in terms.items()}
    f = fusion[("aten::clone", "aten::mul")]
    assert f["bound_us"] == pytest.approx(sum(bounds.values()), rel=1e-9)
    saved = sum(min(bounds[d], t) for d, (_, t) in terms.items())
    assert f["time_saved_us"] == pytest.approx(saved, rel=1e-6)
    facts = f["evidence"]["facts"]
    assert facts["pairs"] == 8 and facts["shared_shape"] == [2048, 4096]
    assert {tuple(t["shape"]): t["pairs"] for t in facts["tensors"]} == {
        (2048, 4096): 4,
        (2048, 1024): 4,
    }
    assert "(4 × 2 × 33,554,432 B + 4 × 2 × 8,388,608 B)" in f["bound_formula"]


def test_tiny_ops_on_small_tensor_loop():
    s, run, g = _answer(GUIDANCE, "torch/tiny_ops")
    ops = _ops_by_identity(s, run)
    (f,) = _by_rule(g, "tiny_ops")
    rec = f["evidence"]["records"][0]
    assert rec["operation"] == "aten::add" and rec["avg_time_us"] < 5.0
    assert f["evidence"]["facts"]["calls_per_step"] == 200
    op = ops[("", "aten::add", rec["precision"])]
    assert f["time_saved_us"] == op["potential_time_saved_us"]
    assert op["occurrences"] == 800 and op["caveat"] is None


@pytest.mark.parametrize("run", ["torch/host_bound", "jax/host_bound/2026_11_30_13_47_44"])
def test_idle_device_when_host_bound(run):
    s, run_name, g = _answer(GUIDANCE, run)
    (f,) = _by_rule(g, "idle")
    idle = next(c for c in g["classes"] if c["class"] == "idle")
    facts = f["evidence"]["facts"]
    assert facts["idle_us"] == pytest.approx(idle["time_us"], rel=1e-12)
    # The profile's own start and end are idle but nobody's to save; the rest is host-bound.
    assert f["time_saved_us"] == pytest.approx(idle["time_us"] - facts["profile_edges_us"])
    assert facts["host_bound_us"] == pytest.approx(f["time_saved_us"])
    assert facts["graph_capture_us"] == 0 and facts["idle_share"] > 0.5  # sleeps ~20-30 ms
    if run.startswith("torch"):
        # By hand: the profiled span less the union of the top-level ops on the main thread;
        # the edges: before the first op and after the last one.
        top = _top_level_ops(_trace(run))
        busy = sum(d for _, _, d in top)
        total = g["time"]["total_time_us"]
        assert idle["time_us"] == pytest.approx(total - busy, rel=1e-6)
        # The profile's edges are idle outside any step before the first op / after the
        # last: here the ProfilerStep spans cover the whole profile (their first start to their
        # last end is the profiled time), so there are none, and all idle is the host's.
        with gzip.open(_trace(run), "rt") as fh:
            steps = sorted(
                (e["ts"], e["ts"] + e["dur"])
                for e in json.load(fh)["traceEvents"]
                if str(e.get("name", "")).startswith("ProfilerStep#")
            )
        assert steps[-1][1] - steps[0][0] == pytest.approx(total, rel=1e-6)
        assert steps[0][0] <= top[0][1] and top[-1][1] + top[-1][2] <= steps[-1][1]
        assert facts["profile_edges_us"] == 0
        assert "DataLoader" in f["suggestion"]
    else:  # JAX: advice for XLA, never PyTorch's
        assert g["runtime"] == "xla"
        assert "DataLoader" not in f["suggestion"] and "CUDA graphs" not in f["suggestion"]
        assert "jax" in f["suggestion"]


def test_straggler_and_exposed_collectives_across_ranks():
    s, run, g = _answer(GUIDANCE, "torch/ddp_straggler")
    (st,) = _by_rule(g, "straggler")
    assert st["evidence"]["facts"]["host"].startswith("rank1")
    assert st["evidence"]["facts"]["ratio_to_median"] > 1.15
    assert st["counted_us"] == 0.0  # the others' wait is already idle / exposed time
    (ex,) = _by_rule(g, "exposed_communication")
    comm = next(c for c in g["classes"] if c["class"] == "communication")
    work = next(c for c in g["classes"] if c["class"] == "compute_bound")["time_us"] + sum(
        c["time_us"] for c in g["classes"] if c["class"] in ("memory_bound", "unknown")
    )
    # Overlap hides at most the exposed time or the work beside it, whichever is less.
    assert ex["time_saved_us"] == pytest.approx(min(comm["time_us"], work)) and comm["percent"] > 5
    assert ex["evidence"]["facts"]["overlap_work_us"] == pytest.approx(work)
    assert ex["ops"] == []  # a program finding: its contributors are in the facts
    assert any(c["operation"].startswith("gloo:") for c in ex["evidence"]["facts"]["contributors"])
    # Per host, the same straggler is no finding (one host cannot be compared).
    host = s.hosts(run)["hosts"][0]
    assert not _by_rule(s.guidance(run, host, True), "straggler")


def _a100_like(rows):
    from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak
    from tb_roofline.table.op_table import OpTableBuilder, ProfileData
    from tb_roofline.table.spans import CoreSpan

    d = DeviceInfo(type="A100-like", kind="gpu", num_cores=1)
    d.compute += [
        ComputePeak("fp32", 19500.0, "datasheet"),
        ComputePeak("tf32", 156000.0, "datasheet"),
    ]
    d.memories.append(MemoryPeak("hbm", "HBM", 2039.0, "datasheet"))
    b = OpTableBuilder()
    for r in rows:
        b.add(
            host="h",
            core=0,
            step=0,
            occurrences=10,
            category="matmul",
            precision="fp32",
            flops_source="formula",
            flops_known=True,
            bytes_known=True,
            self_time_ps=r["total_time_ps"],
            hbm_bytes=r["bytes"],
            model_flops=r["flops"],
            **r,
        )
    return ProfileData(
        device=d,
        ops=b.build(),
        steps=[],
        diagnostics=[],
        core_spans=[CoreSpan("h", 0, 0, int(sum(r["total_time_ps"] for r in rows)))],
    )


def test_precision_saves_the_floor_difference_and_nothing_when_memory_bound():
    """A compute-bound f32 GEMM: floor on fp32 − floor on tf32, by hand. A memory-bound f32
    GEMM (intensity 1 FLOP/B, under the fp32 ridge): the floors are equal, no finding."""
    ms = 1_000_000_000  # ps per ms
    gemm = dict(operation="aten::mm", flops=1e12, bytes=1e9, total_time_ps=100 * ms)
    thin = dict(operation="aten::bmm", flops=1e10, bytes=1e10, total_time_ps=10 * ms)
    g = guidance(analyze([_a100_like([gemm, thin])]))
    (f,) = _by_rule(g, "precision")
    assert f["ops"][0]["operation"] == "aten::mm"
    t = 100_000.0  # µs
    now = max(1e12 / 19500e9 * 1e6, 1e9 / 2039e9 * 1e6)  # max(F/P, B/BW), µs
    new = max(1e12 / 156000e9 * 1e6, 1e9 / 2039e9 * 1e6)
    assert f["time_saved_us"] == pytest.approx(now - new, rel=1e-9) and now - new < t
    assert f["bound_us"] == pytest.approx(now - new, rel=1e-9)
    assert f["evidence"]["facts"]["target_precision"] == "tf32"
    assert "156,000" in f["bound_formula"] and "allow_tf32" in f["suggestion"]
    assert not [
        x
        for x in g["findings"]
        if x["rule"] == "precision" and x["ops"][0]["operation"] == "aten::bmm"
    ]


def test_precision_on_a100_f32_gemm():
    """The real A100 trace: its f32 aten::mm is compute-bound at 51% of the fp32 roof but its
    memory floor is close, so tf32 saves the floor difference only, below the 0.05% threshold;
    its memory-bound tf32 rows never get a precision finding."""
    logdir = os.path.join(TESTDATA, "kineto", "a100_80gb_shapes")
    s, run, g = _answer(logdir)
    ops = _ops_by_identity(s, run)
    # The calls whose GEMM kernel is a CUTLASS tensor-op one are TF32 even when a split-K
    # reduction or a cast kernel ran longer (the GEMM kernel decides, readers/common.py).
    assert ops[("", "aten::mm", "tf32")]["occurrences"] == 10
    op = ops[("", "aten::mm", "fp32")]
    t = op["total_time_us"]
    saved = t * max(op["compute_efficiency"], op["max_mem_bw_utilization"]) - t * max(
        op["compute_efficiency"] * 19500.0 / 156000.0, op["max_mem_bw_utilization"]
    )
    assert op["bound_by"] == "Compute" and 0 < saved < 0.0005 * g["time"]["total_time_us"]
    assert not _by_rule(g, "precision")


def test_tiling_on_tpu_shapes_that_do_not_fill_the_tiles(tmp_path):
    name = "convolution_fusion.8"  # compute-bound at 26% of its roof with seed 0 on v6e
    text = (
        f"%{name} = bf16[1000,1000]{{1,0}} fusion(bf16[1000,4000]{{1,0}} %a, "
        "bf16[4000,1000]{1,0} %b), kind=kOutput"
    )
    aligned = analyze([read_xspace(make_tpu_xspace(SynthConfig(seed=0, chip="v6e")), "h")])
    assert not _by_rule(guidance(aligned), "tiling")  # f32[128,1024] fills (8, 128) tiles
    a = analyze(
        [read_xspace(make_tpu_xspace(SynthConfig(seed=0, chip="v6e", op_text={name: text})), "h")]
    )
    (f,) = _by_rule(guidance(a), "tiling")
    rec = f["evidence"]["records"][0]
    assert rec["operation"] == name and rec["bound_by"] == "Compute"
    assert rec["roofline_efficiency"] < 0.5
    row = next(r for r in a.ops[True].row_dicts() if r["operation"] == name)
    assert f["time_saved_us"] == row["potential_time_saved_us"]  # every call misaligned
    assert f["evidence"]["facts"]["tile"] == [8, 128]
    real = 1000 * 1000 + 1000 * 4000 + 4000 * 1000
    waste = 1 - real / (1000 * 1024 + 1000 * 4096 + 4000 * 1024)  # minor dims padded to 128
    assert f["evidence"]["facts"]["shapes"][0]["padding_share"] == pytest.approx(waste)


@pytest.mark.parametrize(
    "logdir,run",
    [(GUIDANCE, "torch/clean_matmul"), (os.path.join(TESTDATA, "jax_cpu", "matmul_tanh"), None)],
)
def test_clean_cases_have_no_findings_but_big_ops_far_below_their_roof(logdir, run):
    """No rule fires on a clean matmul loop, except that every big op under half its roof is
    named (far_below_roof): by hand from the op rows, the op with >= 5% of the op time or a
    gap >= 2% of the profiled time, under 50% of its roof, without a caveat."""
    s, run, g = _answer(logdir, run, device_file=DEVICE_FILE)
    assert {f["rule"] for f in g["findings"]} <= {"far_below_roof"}
    ops = _ops_by_identity(s, run)
    total = g["time"]["total_time_us"]
    want = {
        k[1]
        for k, r in ops.items()
        if r["caveat"] is None
        and r["roofline_efficiency"]
        and r["roofline_efficiency"] < 0.5
        and r["flop_coverage"] == 1
        and r["bytes_coverage"] == 1
        and r["flops_source"] != "none"
        and (r["self_time_percent"] >= 5 or r["potential_time_saved_us"] >= 0.02 * total)
        and r["potential_time_saved_us"] >= 0.0005 * total
    }
    assert {f["ops"][0]["operation"] for f in g["findings"]} == want
    for f in g["findings"]:
        op = ops[tuple(f["ops"][0][k] for k in ("program_id", "operation", "precision"))]
        assert f["time_saved_us"] == op["potential_time_saved_us"]  # its gap to its roof
        assert f["bound_us"] == op["potential_time_saved_us"]
    compute = next(c for c in g["classes"] if c["class"] == "compute_bound")
    assert compute["percent"] > 80 or run is None


def test_mfu_and_hfu_by_hand():
    s, run, g = _answer(GUIDANCE, "torch/clean_matmul")
    t = g["throughput"]
    prog = s.program(run, "", True)
    avg = next(dict(zip(prog["columns"], r)) for r in prog["rows"] if r[0] == "average")
    step_s = avg["total_time_per_core_us"] / 1e6
    with open(DEVICE_FILE) as f:
        peak = json.load(f)["compute"]["fp32"] * 1e9
    assert t["step_time_us"] == pytest.approx(step_s * 1e6)
    assert t["mfu"] == pytest.approx(4294967296 / (step_s * peak), rel=1e-12)
    assert t["hfu"] == pytest.approx(avg["flops"] / (step_s * peak), rel=1e-12)
    assert t["samples_per_second"] == pytest.approx(1024 / step_s)
    assert t["workload_source"] == "roofline_workload.json"
    # Without a workload: HFU only, and how to get MFU.
    s2, run2, g2 = _answer(GUIDANCE, "torch/host_bound")
    assert g2["throughput"]["mfu"] is None and g2["throughput"]["hfu"] > 0
    assert "model_flops_per_step" in g2["throughput"]["note"]


def test_workload_file_validation():
    w = workload_from_dict({"model_flops_per_step": 1e12, "tokens_per_step": 4096}, "x.json")
    assert w.model_flops_per_step == 1e12 and w.tokens_per_step == 4096
    for bad in (
        {},
        {"model_flops_per_step": -1},
        {"tokens": 3},
        {"model_flops_per_step": 1, "precision": "f33"},
        {"model_flops_per_step": 1, "num_devices": 0},
    ):
        with pytest.raises(WorkloadFileError):
            workload_from_dict(bad, "x.json")


# --------------------------------------------------------------------- invariants everywhere
def _all_runs():
    cases = [
        (os.path.join(TESTDATA, "demo"), None),
        (GUIDANCE, DEVICE_FILE),
        (os.path.join(TESTDATA, "xla_gpu_mi300_conv"), None),
    ]
    cases += [(d, None) for d in sorted(glob.glob(os.path.join(TESTDATA, "kineto", "*")))]
    cases += [(d, DEVICE_FILE) for d in sorted(glob.glob(os.path.join(TESTDATA, "jax_cpu", "*")))]
    cases += [
        (os.path.join(TESTDATA, "compare"), DEVICE_FILE),
        (os.path.join(TESTDATA, "kineto_captured"), DEVICE_FILE),
        (
            os.path.join(TESTDATA, "torch_cpu"),
            os.path.join(TESTDATA, "torch_cpu", "roofline_device_amx.json"),
        ),
        (os.path.join(TESTDATA, "xplane_tf_gpu_v100"), None),
        (os.path.join(GUIDANCE, "vllm"), None),
    ]
    out = []
    for logdir, dev in cases:
        for r in RooflineService(logdir).list_runs()["runs"]:
            out.append(
                pytest.param(logdir, dev, r["run"], id=f"{os.path.basename(logdir)}:{r['run']}")
            )
    return out


@pytest.mark.slow
@pytest.mark.parametrize("logdir,device_file,run", _all_runs())
def test_invariants(logdir, device_file, run):
    s = _service(logdir, device_file)
    for io in (True, False):
        g = s.guidance(run, "", io)
        ops = _ops_by_identity(s, run, io)
        total = g["time"]["total_time_us"]
        assert g["total_time_saved_us"] <= total * (1 + 1e-9)
        if g["total_time_saved_per_step_us"] is not None:
            assert g["total_time_saved_per_step_us"] <= g["time"]["step_time_us"] * (1 + 1e-9)
        if total > 0:
            assert sum(c["percent"] for c in g["classes"]) == pytest.approx(100.0, abs=1e-6)
            assert all(c["time_us"] >= -1e-6 for c in g["classes"])
        saved = [f["time_saved_us"] for f in g["findings"]]
        assert saved == sorted(saved, reverse=True)
        assert sum(f["counted_us"] for f in g["findings"]) == pytest.approx(
            g["total_time_saved_us"]
        )
        for f in g["findings"]:
            assert 0 <= f["counted_us"] <= f["time_saved_us"] * (1 + 1e-9) + 1e-9
            # Each saving within the bound its rule states (written out with its numbers).
            assert f["bound_us"] is not None and f["bound_formula"]
            assert f["time_saved_us"] <= f["bound_us"] * (1 + 1e-9) + 1e-9, f["id"]
            assert (f["scope"] == "op") == bool(f["ops"])
            for ident, rec in zip(f["ops"], f["evidence"]["records"]):
                op = ops[(ident["program_id"], ident["operation"], ident["precision"])]
                assert ident["host"] == op["host"]
                for k, v in rec.items():
                    assert v == op[k], (f["id"], k)  # the op's own exported number
                assert op["caveat"] is None and op["flops_source"] != "none"
                assert op["flop_coverage"] == 1 and op["bytes_coverage"] == 1
                assert op["potential_time_saved_us"] is not None
                assert not is_communication(op["category"])  # never a compute/HBM finding
                assert (
                    f["time_saved_us"] <= op["total_time_us"] * (1 + 1e-9) or f["rule"] == "fusion"
                )
        # Nothing big left out: every trusted op with >= 5% of the op time under half its
        # roof (and a gap worth a finding) is named by some finding.
        named = {
            (o["program_id"], o["operation"], o["precision"])
            for f in g["findings"]
            for o in f["ops"]
        }
        for ident, op in ops.items():
            if (
                op["caveat"] is None
                and op["flops_source"] != "none"
                and op["flop_coverage"] == 1
                and op["bytes_coverage"] == 1
                and not op["is_infeed_outfeed"]
                and not is_communication(op["category"])
                and op["potential_time_saved_us"] is not None
                and op["self_time_percent"] >= 5
                and 0 < op["roofline_efficiency"] < 0.5
                and op["potential_time_saved_us"] >= 0.0005 * total
            ):
                assert ident in named, ident
        json.dumps(g, allow_nan=False)


# --------------------------------------------------------------------- timeline and CLI
def test_timeline_windows_by_hand():
    tb = TimelineBuilder()
    a, b, x = (tb.label_id(("p", n, "")) for n in ("a", "b", "x"))
    # lane 0: compute 0-10, 20-30; lane 1: a collective 5-25 (overlapped 5-10 and 20-25).
    tb.add_core(
        0,
        (0, 40),
        [(1, 0, 30)],
        lane=[0, 0, 1],
        begin=[0, 20, 5],
        end=[10, 30, 25],
        op=[a, b, x],
        comm=[False, False, True],
        fusible=[True, True, False],
    )
    t = tb.build()
    w = {k: v.tolist() for k, v in t.windows.items()}
    assert w["step"] == [1, NO_STEP] and w["span_ps"] == [30, 10]
    assert w["busy_ps"] == [30, 0] and w["compute_ps"] == [20, 0] and w["exposed_ps"] == [10, 0]
    assert t.exposed_by_op == {("p", "x", ""): 10.0}
    (pair,) = t.pairs
    assert (pair.first, pair.second, pair.count, pair.gap_ps, pair.shorter_ps) == (
        ("p", "a", ""),
        ("p", "b", ""),
        1,
        10.0,
        10.0,
    )


def test_exposed_contributors_are_a_union():
    """Two communication ops overlapping on two threads while no compute runs: the window's
    exposed time is their union, and the contributors add up to it (each instant once, to the
    op that reached it first), not to the sum of their lengths."""
    tb = TimelineBuilder()
    a, x, y = (tb.label_id(("", n, "")) for n in ("a", "x", "y"))
    # compute 0-10; x on lane 1 from 5 to 30, y on lane 2 from 20 to 40 (exposed: 10-40).
    tb.add_core(
        0,
        (0, 40),
        [],
        lane=[0, 1, 2],
        begin=[0, 5, 20],
        end=[10, 30, 40],
        op=[a, x, y],
        comm=[False, True, True],
        fusible=[False, False, False],
    )
    t = tb.build()
    assert t.windows["exposed_ps"].sum() == 30
    assert t.exposed_by_op == {("", "x", ""): 20.0, ("", "y", ""): 10.0}
    assert sum(t.exposed_by_op.values()) == t.windows["exposed_ps"].sum()


def test_cli_report_json_and_text(capsys):
    assert (
        cli.main(
            [
                "report",
                GUIDANCE,
                "--run",
                "torch/elementwise_chain",
                "--format",
                "json",
                "--top",
                "3",
                "--tokens-per-step",
                "1000",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "tb-roofline-report/1" and len(report["top_ops"]) == 3
    assert {"device", "program", "top_ops", "guidance", "diagnostics"} <= set(report)
    assert report["guidance"]["throughput"]["tokens_per_step"] == 1000
    assert report["guidance"]["throughput"]["workload_source"] == "command line"
    assert {"idle", "fusion"} <= {f["rule"] for f in report["guidance"]["findings"]}
    assert cli.main(["report", GUIDANCE, "--run", "torch/host_bound", "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "Opportunities (1 findings" in text and "[idle]" in text and "steps/s" in text


def test_repeated_copies_of_one_instruction_on_tpu(tmp_path):
    """A TPU program whose data-formatting ops each run several times a step (the random
    synthetic program, two TensorCores): a copy is claimed only as one instruction repeated
    within a step (the same data), never by equal shapes across instructions; k and the bound
    by hand from the op's occurrences and time within the steps (its Average record × steps).
    The demo's fixed program has one copy of each shape a step per core: no finding."""
    from tb_roofline.model.records.roofline import scoped_op_records
    from tb_roofline.synthetic import write_tpu_session

    write_tpu_session(
        str(tmp_path),
        "",
        "s",
        [
            SynthConfig(
                seed=11, chip="v6e", num_cores=2, num_steps=6, ops_per_step=160, distinct_ops=60
            )
        ],
    )
    s = _service(str(tmp_path))
    g = s.guidance("s", "", True)
    n = g["time"]["num_steps"]
    avg = {
        (r["program_id"], r["operation"], r["precision"]): r
        for r in scoped_op_records(s.analysis("s", ""), "Average", True).row_dicts()
    }
    found = _by_rule(g, "repeated_copy")
    assert found
    for f in found:
        facts = f["evidence"]["facts"]
        ident = tuple(f["ops"][0][c] for c in ("program_id", "operation", "precision"))
        assert facts["shape"] == "f32[128,1024]" and facts["ops_with_shape"] == [ident[1]]
        k = avg[ident]["occurrences"] * n / n / 2  # this instruction's calls per step per core
        assert facts["calls_per_step_of_shape"] == pytest.approx(k) and k >= 2
        in_steps = avg[ident]["total_time_us"] * n
        assert f["time_saved_us"] == pytest.approx(in_steps * (1 - 1 / k))
        assert f["bound_us"] <= in_steps
    demo = _service(os.path.join(TESTDATA, "demo"))
    run = next(r["run"] for r in demo.list_runs()["runs"] if r["run"].startswith("v6e"))
    assert not _by_rule(demo.guidance(run, "", True), "repeated_copy")


def test_no_repeated_copy_without_steps_or_tensor_identity(tmp_path):
    """Without step markers (separate executions of one program are no repeat within a step)
    nothing is claimed; nor on PyTorch traces, which record no tensor identity."""
    from tb_roofline.synthetic import write_tpu_session

    write_tpu_session(
        str(tmp_path),
        "",
        "s",
        [
            SynthConfig(
                seed=11, chip="v6e", num_cores=2, num_steps=0, ops_per_step=160, distinct_ops=60
            )
        ],
    )
    s = _service(str(tmp_path))
    g = s.guidance("s", "", True)
    assert g["time"]["num_steps"] == 0 and not _by_rule(g, "repeated_copy")
    for run in ("torch/elementwise_chain", "torch/tiny_ops"):
        assert not _by_rule(_service(GUIDANCE).guidance(run, "", True), "repeated_copy")


def test_exposed_collectives_on_a100_trace():
    s, run, g = _answer(os.path.join(TESTDATA, "kineto", "a100_80gb_shapes"))
    (f,) = _by_rule(g, "exposed_communication")
    names = [c["operation"] for c in f["evidence"]["facts"]["contributors"]]
    assert names[0] == "c10d::allreduce_" and any(n.startswith("ncclKernel") for n in names)
    assert f["time_saved_us"] == pytest.approx(
        next(c["time_us"] for c in g["classes"] if c["class"] == "communication")
    )


def test_element_bytes_of_every_spelling():
    """By hand: the element size of a type as each reader spells it (torch `c10::` names,
    kernel-decided precisions, HLO and Kineto names)."""
    from tb_roofline.costs.hlo.shapes import element_bytes

    cases = {
        "c10::Half": 2,
        "c10::BFloat16": 2,
        "float": 4,
        "f32": 4,
        "kernel:tf32": 4,
        "double": 8,
        "long int": 8,
        "c64": 8,
        "c10::Float8_e4m3fn": 1,
        "pred": 1,
    }
    assert {k: element_bytes(k) for k in cases} == cases
    assert element_bytes("") is None and element_bytes("no such type") is None
