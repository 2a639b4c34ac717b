"""GPU/CPU XSpace reader: ops matched to HLO instructions and costed by the HLO model.

GPU matching runs on synthetic XSpaces built from the facts in docs/hlo_cost_model.md (kernels on
`Stream #N` lines of `/device:GPU:N` with `hlo_op`/`program_id`, a derived `XLA Ops` line that
must not be read twice, a `Steps` line); CPU on the real JAX profiles end to end.
"""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
from test_hlo_cost_model import HloBuilder
from testpaths import TESTS

from tb_roofline.costs.hlo.shapes import BF16, S8
from tb_roofline.devices.precision_ceilings import roof_precisions
from tb_roofline.model.records import roofline
from tb_roofline.protos import hlo_pb2, xplane_pb2
from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace
from tb_roofline.readers.xspace.xplane import load_xspace
from tb_roofline.synthetic import _Plane, _Ref

REPO = os.path.dirname(TESTS)
GEMM_FLOPS = 2 * 64 * 32 * 128
FUSION_FLOPS = 64 * 32  # the multiply; the exponential is a transcendental
FUSION_BYTES = 2 * (64 * 32 * 2)  # bf16 in and out


def _gpu_module() -> bytes:
    b = HloBuilder("jit_step")
    fused = b.computation("fused_exp_mul", fusion=True)
    fp = b.param("fp", (BF16, (64, 32)), 0)
    e = b.add("e", "exponential", (BF16, (64, 32)), [fp])
    b.add("m", "multiply", (BF16, (64, 32)), [e, fp])
    entry = b.computation("main")
    a = b.param("a", (BF16, (64, 128)), 0)
    w = b.param("w", (BF16, (128, 32)), 1)
    cfg = {
        "gemm_backend_config": {
            "dot_dimension_numbers": {
                "lhs_contracting_dimensions": ["1"],
                "rhs_contracting_dimensions": ["0"],
                "lhs_batch_dimensions": [],
                "rhs_batch_dimensions": [],
            }
        }
    }
    out = HloBuilder.shape(
        0, tuple_shapes=[HloBuilder.shape(BF16, (64, 32)), HloBuilder.shape(S8, (4096,))]
    )
    gemm = b.add(
        "custom-call.1",
        "custom-call",
        out,
        [a, w],
        custom_call_target="__cublas$lt$matmul",
        backend_config=json.dumps(cfg).encode(),
    )
    g = b.add("get-tuple-element.2", "get-tuple-element", (BF16, (64, 32)), [gemm], tuple_index=0)
    b.add("fusion.1", "fusion", (BF16, (64, 32)), [g], [fused], fusion_kind="kLoop")
    b.module.entry_computation_id = entry.id
    return hlo_pb2.HloProto(hlo_module=b.module).SerializeToString()


def _gpu_space():
    """GPU:0 with two compute streams and 2 steps; GPU:1 with one stream; one program (id 7).

    Per step on GPU:0: custom-call.1 launches 2 kernels (gemm 30 ps + split-K reduce 10 ps) on
    stream 1; fusion.1 one kernel (20 ps) on stream 2. Also, unattributed: a CUDA-graph kernel
    with no hlo_op (50 ps), a kernel of program 99 (no HLO proto, 5 ps) and one naming an op that
    program 7 lacks (7 ps), in step 0.
    """
    space = xplane_pb2.XSpace()
    meta = _Plane(space.planes.add(id=1, name="/host:metadata"))
    meta.event_metadata("jit_step(7)", "", **{"Hlo Proto": _gpu_module(), "program_id": 7})
    gpus = []
    for n in range(2):
        gp = _Plane(space.planes.add(id=10 + n, name=f"/device:GPU:{n}"))
        for key, value in (
            ("clock_rate", 1410000),
            ("core_count", 108),
            ("compute_cap_major", 8),
            ("compute_cap_minor", 0),
        ):
            gp.add_stat(gp.plane, key, value)
        gpus.append(gp)
    mds = {}

    def kernel(gp, line, name, begin, dur, hlo_op=None, program_id=7, group=None):
        key = (id(gp), name)
        if key not in mds:
            mds[key] = gp.event_metadata(name, "")
        ev = line.events.add(metadata_id=mds[key].id, offset_ps=begin, duration_ps=dur)
        if hlo_op is not None:
            gp.add_stat(ev, "hlo_op", _Ref(hlo_op))
            gp.add_stat(ev, "hlo_module", _Ref("jit_step"))
            gp.add_stat(ev, "program_id", program_id)
        if group is not None:
            gp.add_stat(ev, "group_id", group)
        return ev

    g0 = gpus[0]
    s1 = g0.plane.lines.add(id=1, name="Stream #1(Compute)", timestamp_ns=1)
    s2 = g0.plane.lines.add(id=2, name="Stream #2(Compute)", timestamp_ns=1)
    xla_ops = g0.plane.lines.add(id=3, name="XLA Ops", timestamp_ns=1)
    steps = g0.plane.lines.add(id=4, name="Steps", timestamp_ns=1)
    for step, t0 in ((0, 0), (1, 1000)):
        kernel(g0, s1, "sm80_xmma_gemm_bf16", t0 + 0, 30, "custom-call.1", group=step)
        kernel(g0, s1, "splitKreduce_kernel", t0 + 30, 10, "custom-call.1", group=step)
        kernel(g0, s2, "loop_fusion_kernel", t0 + 40, 20, "fusion.1", group=step)
        kernel(g0, xla_ops, "fusion.1", t0 + 40, 20, "fusion.1", group=step)  # derived copy
        marker = g0.event_metadata(str(step))
        ev = steps.events.add(metadata_id=marker.id, offset_ps=t0, duration_ps=900)
        g0.add_stat(ev, "group_id", step)
    kernel(g0, s2, "graph_kernel", 100, 50, group=0)  # no hlo_op
    kernel(g0, s2, "other_prog_kernel", 200, 5, "fusion.9", program_id=99, group=0)
    kernel(g0, s1, "stray_kernel", 300, 7, "fusion.404", group=0)
    g1 = gpus[1]
    t1 = g1.plane.lines.add(id=1, name="Stream #7(Compute)", timestamp_ns=2)
    kernel(g1, t1, "loop_fusion_kernel", 0, 25, "jit_step::fusion.1", group=0)
    return space


@pytest.fixture(scope="module")
def gpu():
    return read_gpu_cpu_xspace(_gpu_space(), "gpuhost")


def _rows(data, **match):
    t = data.ops
    mask = np.ones(len(t), bool)
    for k, v in match.items():
        mask &= t[k] == v
    return [{k: t[k][i] for k in t.columns} for i in np.flatnonzero(mask)]


def test_gpu_device_and_cores(gpu):
    assert gpu.device.kind == "gpu" and gpu.device.num_cores == 2
    # Peaks from the device-capability stats: 108 SMs x 1.41 GHz x 2048 FLOP/cycle (bf16 TC).
    assert gpu.device.peak_for("bf16") == pytest.approx(108 * 1.41 * 2048, rel=1e-9)
    spans = {s.core: (s.start_ps, s.end_ps) for s in gpu.core_spans}
    assert spans[0] == (1000, 1000 + 1000 + 900)  # step 1's marker ends last
    assert spans[1] == (2000, 2025)


def test_multi_kernel_hlo_counts_its_flops_once_per_execution(gpu):
    rows = _rows(gpu, core=0, operation="custom-call.1")
    assert sorted(r["step"] for r in rows) == [0, 1]
    for r in rows:
        assert r["occurrences"] == 1  # 2 kernels, 1 execution
        assert r["flops"] == GEMM_FLOPS  # XProf would count 2 ×
        assert r["total_time_ps"] == 40  # both kernels' time
        assert r["bytes"] == 2 * (64 * 128 + 128 * 32) + 2 * 64 * 32
        assert r["hbm_bytes"] == r["bytes"]
        assert (r["category"], r["precision"], r["flops_source"]) == ("dot", "bf16", "cost_model")
        assert r["program"] == "jit_step" and r["program_id"] == "7"


def test_fusion_rows_and_derived_lines_not_double_counted(gpu):
    rows = _rows(gpu, core=0, operation="fusion.1")
    assert len(rows) == 2
    for r in rows:
        assert r["occurrences"] == 1 and r["total_time_ps"] == 20
        assert r["flops"] == FUSION_FLOPS and r["bytes"] == FUSION_BYTES
        # bf16 elementwise work is labelled by its data and sits under the vector (CUDA-core)
        # roof, not the tensor-core one.
        assert r["category"] == "loop fusion" and r["precision"] == "bf16"
        keys = {"precision": np.array(["bf16"]), "category": np.array(["loop fusion"])}
        keys["dtype"] = np.array(["bf16"])
        assert roof_precisions(keys, gpu.device).tolist() == ["fp32"]
    # `a::b` names the instruction b; GPU:1 is core 1.
    (r1,) = _rows(gpu, core=1)
    assert r1["operation"] == "fusion.1" and r1["flops"] == FUSION_FLOPS and r1["step"] == 0


def test_kernels_without_hlo_are_kept_as_unattributed_time(gpu):
    rows = _rows(gpu, category="unattributed")
    assert {r["operation"]: r["total_time_ps"] for r in rows} == {
        "graph_kernel": 50,
        "fusion.9": 5,
        "fusion.404": 7,
    }
    assert all(r["flops"] == 0 and r["bytes"] == 0 for r in rows)
    (diag,) = [d for d in gpu.diagnostics if d.code == "unattributed_time"]
    assert diag.severity == "warning"
    for text in ("3 kernels", "1 no hlo_op", "1 program without HLO proto", "1 op not found"):
        assert text in diag.message
    # Nothing disappears: every stream kernel's time is in the table once.
    assert gpu.ops["total_time_ps"].sum() == 2 * (30 + 10 + 20) + 50 + 5 + 7 + 25


def test_gpu_steps_from_the_steps_line(gpu):
    steps = {(s.core, s.step): (s.start_ps, s.duration_ps) for s in gpu.steps}
    assert steps[(0, 0)] == (1000, 900) and steps[(0, 1)] == (2000, 900)
    assert steps[(1, 0)] == (2000, 25)  # no Steps line on GPU:1: its ops' extent


def test_gpu_analysis_end_to_end(gpu):
    a = roofline.analyze([gpu])
    total = a.program[True].row_dicts()[0]
    assert total["step"] == "Total"
    assert total["flops"] == 2 * (GEMM_FLOPS + FUSION_FLOPS) + FUSION_FLOPS
    ops = {r["operation"]: r for r in a.ops[True].row_dicts()}
    assert ops["custom-call.1"]["flops"] == 2 * GEMM_FLOPS
    # a kernel without HLO: its FLOPs are unknown (null), not 0
    assert ops["graph_kernel"]["flops"] is None and ops["graph_kernel"]["flop_coverage"] == 0
    assert ops["graph_kernel"]["total_time_us"] == pytest.approx(50 / 1e6)


def test_profile_without_hlo_shows_all_kernels_unattributed():
    path = glob.glob(
        os.path.join(REPO, "testdata", "xplane_tf_gpu_v100", "**", "*.xplane.pb"), recursive=True
    )[0]
    space = load_xspace(path)
    data = read_gpu_cpu_xspace(space, "v100")
    # 8 GPU planes, 3 with activity: GPU:1 only copies (memcpy_details), 4 and 6 run kernels.
    # A GPU that only copied ran no program: per-core figures count the 2 that did, GPU:1 has
    # no span (no device time, no idle), its copies stay in the table; notes say so.
    assert data.device.kind == "gpu" and data.device.num_cores == 2
    assert sorted(s.core for s in data.core_spans) == [4, 6]
    (idle,) = [d for d in data.diagnostics if d.code == "idle_gpus"]
    assert "8 GPUs are listed, 2 ran the program" in idle.message
    (copies,) = [d for d in data.diagnostics if d.code == "copy_only_devices"]
    assert "device(s) 1 only copied" in copies.message
    on_1 = data.ops["core"] == 1
    assert on_1.any() and set(data.ops["category"][on_1]) <= {"memcpy", "memset"}
    assert set(data.ops["category"][~on_1]) <= {"unattributed", "memcpy", "memset"}
    assert "no_hlo_protos" in [d.code for d in data.diagnostics]
    stream_time = sum(
        ev.duration_ps
        for p in space.planes
        if p.name.startswith("/device:GPU:")
        for line in p.lines
        if line.name.startswith("Stream")
        for ev in line.events
    )
    assert data.ops["total_time_ps"].sum() == stream_time


CPU_PROFILES = sorted(
    os.path.dirname(p)
    for p in glob.glob(os.path.join(REPO, "testdata", "jax_cpu", "*", "cost_analysis.json"))
)


@pytest.mark.parametrize("folder", CPU_PROFILES, ids=os.path.basename)
def test_real_cpu_profile_end_to_end(folder):
    path = glob.glob(os.path.join(folder, "plugins", "profile", "*", "*.xplane.pb"))[0]
    data = read_gpu_cpu_xspace(load_xspace(path), "vm")
    ref = json.load(open(os.path.join(folder, "cost_analysis.json")))
    assert data.device.kind == "cpu" and data.device.num_cores == 1
    assert [s.step for s in data.steps] == [0, 1, 2, 3, 4]  # StepTraceAnnotation step_num
    assert len(data.core_spans) == 1 and data.core_spans[0].core == 0
    t = data.ops
    assert set(t["flops_source"]) == {"cost_model"}
    assert "unattributed" not in set(t["category"])
    assert set(t["precision"]) <= {"f32", "int32", "pred", ""}
    # Every op ran once per step.
    assert set(t["step"]) == {0, 1, 2, 3, 4}
    a = roofline.analyze([data])
    records = a.program[True].row_dicts()
    total = records[0]
    per_step = [r for r in records if r["record_type"] == "step"] or records[2:]
    if os.path.basename(folder) != "while_loop":  # there we count every iteration
        assert total["flops"] == pytest.approx(5 * ref["flops"], rel=1e-3)
        for r in per_step:
            assert r["flops"] == pytest.approx(ref["flops"], rel=1e-3)
    assert total["total_time_us"] > 0
    ops = a.ops[True].row_dicts()
    assert ops and all(r["flops_source"] == "cost_model" for r in ops)
    top = max(
        (r for r in ops if r["category"] not in ("while", "call", "conditional")),
        key=lambda r: r["flops"],
    )
    assert top["category"] in ("convolution fusion", "dot", "convolution")


def test_host_offload_copies_on_gpu_are_host_link_traffic():
    """A copy to host memory (layout memory space 5, JAX host offload) moves its array over the
    host link: host bytes, never HBM, with the host_transfer caveat."""
    from tb_roofline.costs.hlo.shapes import F32

    b = HloBuilder("jit_offload")
    b.computation("main")
    x = b.param("x", (F32, (256, 1024)), 0)
    host = HloBuilder.shape(F32, (256, 1024))
    host.layout.memory_space = 5
    ctx = HloBuilder.shape(8, ())
    start = b.add(
        "copy-start.3",
        "copy-start",
        HloBuilder.shape(0, tuple_shapes=[host, HloBuilder.shape(F32, (256, 1024)), ctx]),
        [x],
    )
    b.add("copy-done.3", "copy-done", host, [start])
    b.module.entry_computation_id = 1
    space = xplane_pb2.XSpace()
    meta = _Plane(space.planes.add(id=1, name="/host:metadata"))
    meta.event_metadata(
        "jit_offload(5)",
        "",
        **{"Hlo Proto": hlo_pb2.HloProto(hlo_module=b.module).SerializeToString(), "program_id": 5},
    )
    gp = _Plane(space.planes.add(id=10, name="/device:GPU:0"))
    for key, value in (
        ("clock_rate", 1410000),
        ("core_count", 108),
        ("compute_cap_major", 8),
        ("compute_cap_minor", 0),
    ):
        gp.add_stat(gp.plane, key, value)
    line = gp.plane.lines.add(id=1, name="Stream #3(MemcpyD2H)", timestamp_ns=1)
    md = gp.event_metadata("MemcpyD2H", "")
    for t in (0, 1_000_000):
        ev = line.events.add(metadata_id=md.id, offset_ps=t, duration_ps=40_000_000)
        gp.add_stat(ev, "hlo_op", _Ref("copy-start.3"))
        gp.add_stat(ev, "program_id", 5)
    data = read_gpu_cpu_xspace(space, "h")
    row = {k: data.ops[k][0] for k in ("operation", "host_bytes", "hbm_bytes", "caveat")}
    assert row == {
        "operation": "copy-start.3",
        "host_bytes": 2 * 256 * 1024 * 4,
        "hbm_bytes": 0.0,
        "caveat": "host_transfer",
    }


# ---------------------------------------------------------------------------- GPU costs
def _one_gpu_space(module: hlo_pb2.HloModuleProto, kernels, gpus=1, stats=None):
    """An XSpace with `gpus` GPU planes (A100 stats unless `stats`); `kernels` = [(name, begin,
    duration, hlo_op)] all on GPU:0, stream 1, program 3."""
    space = xplane_pb2.XSpace()
    meta = _Plane(space.planes.add(id=1, name="/host:metadata"))
    meta.event_metadata(
        f"{module.name}(3)",
        "",
        **{"Hlo Proto": hlo_pb2.HloProto(hlo_module=module).SerializeToString(), "program_id": 3},
    )
    planes = []
    for n in range(gpus):
        gp = _Plane(space.planes.add(id=10 + n, name=f"/device:GPU:{n}"))
        for key, value in stats or (
            ("clock_rate", 1410000),
            ("core_count", 108),
            ("compute_cap_major", 8),
            ("compute_cap_minor", 0),
        ):
            gp.add_stat(gp.plane, key, value)
        planes.append(gp)
    gp = planes[0]
    line = gp.plane.lines.add(id=1, name="Stream #1(Compute)", timestamp_ns=1)
    mds = {}
    for name, begin, dur, hlo_op in kernels:
        if name not in mds:
            mds[name] = gp.event_metadata(name, "")
        ev = line.events.add(metadata_id=mds[name].id, offset_ps=begin, duration_ps=dur)
        gp.add_stat(ev, "hlo_op", _Ref(hlo_op))
        gp.add_stat(ev, "program_id", 3)
    return space


def _entry_with(opcode, out, operands, **fields):
    b = HloBuilder("jit_f")
    entry = b.computation("main")
    params = [b.param(f"p{i}", s, i) for i, s in enumerate(operands)]
    b.add("op.1", opcode, out, params, **fields)
    b.module.entry_computation_id = entry.id
    return b.module


def test_executions_count_the_main_kernel_not_its_helpers():
    """A Transformer Engine backward launches FmhaBwdDQDKDV once and a fill kernel twice per
    call: 5 calls are 5 executions (the most launched kernel would say 10)."""
    from test_hlo_gpu_costs import TE_BACKWARD_FLOPS, TE_CONFIG

    qkv, o = (BF16, (2, 2048, 3, 16, 128)), (BF16, (2, 2048, 16, 128))
    out = HloBuilder.shape(0, tuple_shapes=[HloBuilder.shape(*qkv)])
    module = _entry_with(
        "custom-call",
        out,
        [qkv, o, o],
        custom_call_target="te_fused_attn_backward_ffi",
        backend_config=TE_CONFIG,
    )
    kernels = []
    for call in range(5):
        t = call * 10_000
        kernels += [
            ("__amd_rocclr_fillBufferAligned", t, 100, "op.1"),
            ("__amd_rocclr_fillBufferAligned", t + 200, 100, "op.1"),
            ("FmhaBwdDQDKDV_bf16_hdim128", t + 400, 5_000, "op.1"),
        ]
    data = read_gpu_cpu_xspace(_one_gpu_space(module, kernels), "h")
    (row,) = _rows(data, operation="op.1")
    assert row["occurrences"] == 5
    assert row["flops"] == 5 * TE_BACKWARD_FLOPS
    assert row["total_time_ps"] == 5 * 5_200
    assert row["category"] == "attention" and row["precision"] == "bf16"
    masked = [d for d in data.diagnostics if d.code == "attention_mask_not_discounted"]
    assert masked and "op.1 (causal)" in masked[0].message


def test_precision_is_the_gemm_kernels_even_when_a_helper_runs_longer():
    """A split-K f32 gemm whose reduction kernel outlasts the GEMM: the TF32 tensor-op kernel
    says what ran (the longest kernel would say nothing, leaving f32)."""
    from tb_roofline.costs.hlo.shapes import F32

    cfg = {
        "gemm_backend_config": {
            "dot_dimension_numbers": {
                "lhs_contracting_dimensions": ["1"],
                "rhs_contracting_dimensions": ["0"],
            }
        }
    }
    module = _entry_with(
        "custom-call",
        (F32, (64, 32)),
        [(F32, (64, 128)), (F32, (128, 32))],
        custom_call_target="__cublas$gemm",
        backend_config=json.dumps(cfg).encode(),
    )
    kernels = [
        ("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", 0, 10, "op.1"),
        ("splitKreduce_kernel", 10, 30, "op.1"),
    ]
    data = read_gpu_cpu_xspace(_one_gpu_space(module, kernels), "h")
    (row,) = _rows(data, operation="op.1")
    # The unit the kernel names, with the HLO's f32 operands beside it.
    assert row["precision"] == "tf32" and row["dtype"] == "kernel:tf32/f32"
    assert row["occurrences"] == 1 and row["flops"] == 2 * 64 * 32 * 128


def test_collectives_fill_interconnect_bytes_with_bus_bytes():
    """all-reduce-start of f32[1024, 256] in groups of 4, run 3 times: bus bytes =
    S × 2(n−1)/n = 1 MiB × 1.5 per execution; `bytes` is at least every memory's."""
    from tb_roofline.costs.hlo.shapes import F32

    module = _entry_with(
        "all-reduce-start",
        (F32, (1024, 256)),
        [(F32, (1024, 256))],
        replica_groups=[
            hlo_pb2.ReplicaGroup(replica_ids=[0, 1, 2, 3]),
            hlo_pb2.ReplicaGroup(replica_ids=[4, 5, 6, 7]),
        ],
    )
    kernels = [("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t, 50, "op.1") for t in (0, 1000, 2000)]
    data = read_gpu_cpu_xspace(_one_gpu_space(module, kernels), "h")
    (row,) = _rows(data, operation="op.1")
    s = 1024 * 256 * 4
    assert row["interconnect_bytes"] == 3 * s * 1.5
    assert row["bytes"] >= max(row["hbm_bytes"], row["interconnect_bytes"], row["host_bytes"])
    assert row["category"] == "all-reduce-start"
    assert not [d for d in data.diagnostics if d.code == "collective_groups_assumed"]
    # Without replica groups every device takes part: the profile's GPUs (here 2).
    module = _entry_with("all-gather", (F32, (2048, 256)), [(F32, (1024, 256))])
    data = read_gpu_cpu_xspace(_one_gpu_space(module, kernels[:1], gpus=2), "h")
    (row,) = _rows(data, operation="op.1")
    assert row["interconnect_bytes"] == 2 * s * (1 / 2)
    (note,) = [d for d in data.diagnostics if d.code == "collective_groups_assumed"]
    assert "2 device(s)" in note.message and "op.1" in note.message


@pytest.mark.parametrize(
    "kernel,algo,factor",
    [
        # the ring: nccl-tests' 2(n-1)/n, and the row says which algorithm the kernel names
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "RING_LL", 2 * 7 / 8),
        ("ncclKernel_AllReduce_TREE_LL128_Sum_float", "TREE_LL128", 2 * 7 / 8),
        # NVLink SHARP: the switch reduces, each GPU sends and receives S once: factor 1
        ("ncclDevKernel_AllReduce_Sum_bf16_NVLS", "NVLS", 1.0),
        # a generic kernel states nothing: nccl-tests' default, no algorithm on the row
        ("ncclDevKernel_Generic", "", 2 * 7 / 8),
    ],
)
def test_the_algorithm_the_nccl_kernel_names_sets_the_bus_factor(kernel, algo, factor):
    from tb_roofline.costs.hlo.shapes import F32
    from tb_roofline.table.collective_info import parse

    module = _entry_with(
        "all-reduce-start",
        (F32, (1024, 256)),
        [(F32, (1024, 256))],
        replica_groups=[hlo_pb2.ReplicaGroup(replica_ids=list(range(8)))],
    )
    data = read_gpu_cpu_xspace(_one_gpu_space(module, [(kernel, 0, 50, "op.1")]), "h")
    (row,) = _rows(data, operation="op.1")
    s = 1024 * 256 * 4
    assert row["interconnect_bytes"] == pytest.approx(s * factor)
    info = parse(row["collective"])
    assert (info["kind"], info["S"], info["n"], info["groups"], info["form"], info["algo"]) == (
        "all-reduce",
        s,
        8,
        1,
        "list",
        algo,
    )


def test_per_core_figures_count_the_gpus_that_ran():
    from tb_roofline.costs.hlo.shapes import F32

    module = _entry_with("add", (F32, (64,)), [(F32, (64,)), (F32, (64,))])
    data = read_gpu_cpu_xspace(_one_gpu_space(module, [("add_kernel", 0, 10, "op.1")], gpus=8), "h")
    assert data.device.num_cores == 1
    assert [s.core for s in data.core_spans] == [0]


def test_gfx950_profile_peak_beaten_by_its_own_fusion_is_replaced():
    """gfx950 (MI355X) profiles report 4,096 GB/s; a loop fusion moving 2 × 32 MiB in 10 µs runs
    at 6.7 TB/s, so the model takes the data sheet's 8 TB/s, and the compute peaks are known."""
    from tb_roofline.costs.hlo.shapes import BF16

    b = HloBuilder("jit_scale")
    fused = b.computation("fused_neg", fusion=True)
    fp = b.param("fp", (BF16, (1 << 24,)), 0)
    b.add("n", "negate", (BF16, (1 << 24,)), [fp])
    entry = b.computation("main")
    x = b.param("x", (BF16, (1 << 24,)), 0)
    b.add("op.1", "fusion", (BF16, (1 << 24,)), [x], [fused], fusion_kind="kLoop")
    b.module.entry_computation_id = entry.id
    stats = (
        ("gpu_device_name", "gfx950"),
        ("core_count", 256),
        ("clock_rate", 2_400_000),
        ("memory_bandwidth", 4_096_000_000_000),
        ("memory_size", 288 << 30),
    )
    kernels = [("loop_neg_fusion", t, 10_000_000, "op.1") for t in (0, 20_000_000)]
    data = read_gpu_cpu_xspace(_one_gpu_space(b.module, kernels, stats=stats), "h")
    assert data.device.peaks_known
    assert data.device.peak_for("bf16") == pytest.approx(2_516_582.4)
    a = roofline.analyze([data])
    hbm = a.device.memory("hbm")
    assert (hbm.gbs, hbm.source) == (8000.0, "datasheet")
    (note,) = [d for d in a.diagnostics if d.code == "peak_replaced"]
    assert "4,096 GB/s" in note.message and "op.1" in note.message


def test_ops_without_a_cost_rule_are_named_by_share_of_time():
    from tb_roofline.costs.hlo.shapes import F32

    b = HloBuilder("jit_mix")
    entry = b.computation("main")
    x = b.param("x", (F32, (64,)), 0)
    b.add("cc.1", "custom-call", (F32, (64,)), [x], custom_call_target="my_moe_kernel")
    b.add("add.2", "add", (F32, (64,)), [x, x])
    b.module.entry_computation_id = entry.id
    kernels = [("moe", 0, 300, "cc.1"), ("add_kernel", 400, 100, "add.2")]
    data = read_gpu_cpu_xspace(_one_gpu_space(b.module, kernels), "h")
    (note,) = [d for d in data.diagnostics if d.code == "uncosted_time"]
    assert "custom-call my_moe_kernel 75.0%" in note.message and "add" not in note.message


def test_an_all_reduce_on_mi300x_is_judged_under_the_infinity_fabric_roof():
    """all-reduce-start of f32[16M] over 8 GPUs, twice, 500 µs each: bus bytes 64 MiB × 2 × 7/8
    = 117.4 MB per call, 234.9 GB/s over 1 ms, 52.4% of the 448 GB/s per direction of 7
    Infinity Fabric links (128 GB/s each, both directions)."""
    from tb_roofline.costs.hlo.shapes import F32

    module = _entry_with(
        "all-reduce-start",
        (F32, (1 << 24,)),
        [(F32, (1 << 24,))],
        replica_groups=[hlo_pb2.ReplicaGroup(replica_ids=list(range(8)))],
    )
    stats = (
        ("gpu_device_name", "gfx942"),
        ("core_count", 304),
        ("clock_rate", 2_100_000),
        ("memory_bandwidth", 5_300_000_000_000),
        ("memory_size", 192 << 30),
    )
    kernels = [("ncclDevKernel_AllReduce_Sum_f32", t, 500_000_000, "op.1") for t in (0, 10**9)]
    data = read_gpu_cpu_xspace(_one_gpu_space(module, kernels, stats=stats), "h")
    assert data.device.memory("interconnect").gbs == 448
    (r,) = [x for x in roofline.analyze([data]).ops[True].row_dicts() if x["operation"] == "op.1"]
    assert r["interconnect_bytes"] == 2 * (1 << 26) * 2 * 7 / 8
    assert r["bound_by"] == "Interconnect"
    assert r["roofline_efficiency"] == pytest.approx(2 * (1 << 26) * 1.75 / 1e6 / 448)
