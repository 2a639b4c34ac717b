"""Costs of what modern GPU workloads run, from Kineto traces (docs/pytorch_traces.md):
collectives (bytes over the links as nccl-tests count them), precision by the GEMM kernel,
flash_attn and Triton ops, integer labels, uncosted-op diagnostics, bounded names and corrupt
shapes and counters. Each expected figure is derived by hand from the formula it tests, or
counted from the raw trace file independently of the reader."""

import gzip
import json
import os
import time

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.costs import collective_bytes
from tb_roofline.costs.torch import custom_ops as torch_custom_ops
from tb_roofline.readers.kineto import attribution, comms, load_kineto, read_kineto_file, to_columns

HERE = TESTS
A100 = os.path.join(HERE, "..", "testdata", "kineto", "a100_80gb_shapes", "rank0.pt.trace.json.gz")
B200 = os.path.join(
    HERE, "..", "testdata", "kineto", "b200_eager", "worker0.1773700000000.pt.trace.json.gz"
)


def _ev(cat, name, ts, dur, tid=1, **args):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _launch(ts, corr, kernel, kernel_ts, kdur=2.0, tid=1):
    return [
        _ev("cuda_runtime", "cudaLaunchKernel", ts, 0.5, tid=tid, correlation=corr),
        {
            "ph": "X",
            "cat": "kernel",
            "name": kernel,
            "pid": 0,
            "tid": 7,
            "ts": kernel_ts,
            "dur": kdur,
            "args": {"correlation": corr, "device": 0},
        },
    ]


def _file(tmp_path, events, name="t", **meta):
    p = tmp_path / f"{name}.pt.trace.json"
    p.write_text(json.dumps(dict(meta, traceEvents=events)))
    past = time.time() - 3600
    os.utime(p, (past, past))
    return str(p)


def _rows(data):
    o = data.ops
    return {
        n: (c, f, b, k, s, p)
        for n, c, f, b, k, s, p in zip(
            o["operation"].tolist(),
            o["category"].tolist(),
            o["flops"].tolist(),
            o["bytes"].tolist(),
            o["flops_known"].tolist(),
            o["flops_source"].tolist(),
            o["precision"].tolist(),
        )
    }


def _interconnect(path):
    """Bytes over the links per op name, through the reader's own stages."""
    col = load_kineto(path)
    c = to_columns(col)
    order, parent = attribution.op_tree(c)
    ranks = comms.apply_facts(c, col, order, parent)
    ic = comms.op_interconnect(c, ranks, comms.world_size(col.meta))
    out = {}
    for name, v in zip(c.names[c.op_name].tolist(), ic.tolist()):
        out[name] = out.get(name, 0.0) + v
    return out


# ------------------------------------------------------------------------------ collectives


def test_bus_factors_are_nccl_tests_ones():
    # nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter,
    # all-to-all (n-1)/n; broadcast, reduce, send/recv 1.
    assert collective_bytes.bus_factor("all_reduce", 8) == 2 * 7 / 8
    for kind in ("all_gather", "reduce_scatter", "all_to_all"):
        assert collective_bytes.bus_factor(kind, 4) == 3 / 4
    for kind in ("broadcast", "reduce", "send", "recv"):
        assert collective_bytes.bus_factor(kind, 16) == 1
    assert collective_bytes.bus_factor("all_reduce", 0) == 0  # unknown ranks: not claimed


@pytest.mark.parametrize(
    "name, kind",
    [
        ("nccl:all_reduce", "all_reduce"),
        ("c10d::allreduce_", "all_reduce"),
        ("nccl:_all_gather_base", "all_gather"),
        ("_allgather_base", "all_gather"),
        ("nccl:_reduce_scatter_base", "reduce_scatter"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("All2All_Pooled_Req", "all_to_all"),
        ("c10d::broadcast_", "broadcast"),
        ("c10d::reduce_", "reduce"),
        ("symm_mem::multimem_all_reduce_", "all_reduce"),
        ("c10d::send", "send"),
        ("c10d::recv_", "recv"),
        ("aten::mm", ""),
    ],
)
def test_collective_kinds(name, kind):
    assert collective_bytes.kind_of(name) == kind


def test_an_allreduce_without_shapes_takes_its_size_from_the_nccl_annotation(tmp_path):
    # c10d::allreduce_ (a TensorList: no dims) > record_param_comms > nccl:all_reduce [[1024]]
    # f32; 8 ranks (distributedInfo): S = 4096 B, bus bytes 4096 × 2·7/8 = 7168.
    ev = [
        _ev(
            "cpu_op",
            "c10d::allreduce_",
            0,
            100,
            **{"Input Dims": [[], [], [], []], "Input type": ["TensorList", "", "", "Scalar"]},
        ),
        _ev("cpu_op", "record_param_comms", 5, 90, **{"Input Dims": [[]], "Input type": [""]}),
        _ev(
            "user_annotation",
            "nccl:all_reduce",
            10,
            80,
            **{"Input Dims": [[1024]], "Input type": ["float"]},
        ),
    ]
    ev += _launch(20, 1, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", 200, 50)
    path = _file(tmp_path, ev, distributedInfo={"rank": 0, "world_size": 8})
    rows = _rows(read_kineto_file(path, "h"))
    cat, flops, nbytes, known, source, _ = rows["c10d::allreduce_"]
    assert (cat, flops, nbytes, known, source) == ("communication", 0.0, 8192.0, True, "formula")
    assert "record_param_comms" not in rows
    assert _interconnect(path)["c10d::allreduce_"] == pytest.approx(4096 * 2 * 7 / 8)


def test_record_param_comms_gives_the_group_size(tmp_path):
    # c10d::_allgather_base_(out [8, 256], in [1, 256]) bf16 in a group of 4 (of 8 ranks):
    # S = the gathered output, 8·256·2 = 4096 B; bus bytes 4096 × 3/4; local bytes in + out.
    ev = [
        _ev(
            "cpu_op",
            "c10d::_allgather_base_",
            0,
            100,
            **{
                "Input Dims": [[8, 256], [1, 256], []],
                "Input type": ["c10::BFloat16", "c10::BFloat16", ""],
            },
        ),
        _ev(
            "cpu_op",
            "record_param_comms",
            5,
            90,
            **{
                "Collective name": "_allgather_base",
                "In msg nelems": 256,
                "Out msg nelems": 2048,
                "Group size": 4,
                "dtype": "BFloat16",
                "Input Dims": [[1, 256]],
                "Input type": ["c10::BFloat16"],
            },
        ),
    ]
    ev += _launch(
        20, 1, "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 200, 50
    )
    path = _file(tmp_path, ev, distributedInfo={"rank": 0, "world_size": 8})
    rows = _rows(read_kineto_file(path, "h"))
    assert rows["c10d::_allgather_base_"][:4] == ("communication", 0.0, 4096.0 + 512.0, True)
    assert _interconnect(path)["c10d::_allgather_base_"] == pytest.approx(4096 * 3 / 4)


def test_param_comms_fields_alone_cost_the_collective(tmp_path):
    # No c10d shapes, no annotation: record_param_comms' fields (reduce-scatter, 4096 f32 in,
    # 1024 out, group of 4) go to the enclosing c10d op. S = the input, 16384 B.
    ev = [
        _ev("cpu_op", "c10d::reduce_scatter_", 0, 100),
        _ev(
            "cpu_op",
            "record_param_comms",
            5,
            90,
            **{
                "Collective name": "reduce_scatter",
                "In msg nelems": 4096,
                "Out msg nelems": 1024,
                "Group size": 4,
                "dtype": "Float",
            },
        ),
    ]
    ev += _launch(20, 1, "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(x)", 200, 50)
    path = _file(tmp_path, ev)
    rows = _rows(read_kineto_file(path, "h"))
    assert rows["c10d::reduce_scatter_"][:4] == ("communication", 0.0, 16384.0 + 4096.0, True)
    assert _interconnect(path)["c10d::reduce_scatter_"] == pytest.approx(16384 * 3 / 4)


def test_all2all_pooled_is_communication_and_its_alltoall_carries_the_cost(tmp_path):
    # torchrec's All2All_Pooled_Req runs c10d::alltoall_base_(out [96], in [128]) f32 whose
    # NCCL kernel is charged to the collective; 4 ranks: S = 512 B, bus bytes 512 × 3/4.
    ev = [
        _ev(
            "cpu_op",
            "All2All_Pooled_Req",
            0,
            200,
            **{"Input Dims": [[8, 16]], "Input type": ["float"]},
        ),
        _ev(
            "cpu_op",
            "c10d::alltoall_base_",
            10,
            150,
            **{
                "Input Dims": [[96], [128], [], [], [], []],
                "Input type": ["float", "float", "", "", "", "Scalar"],
            },
        ),
        _ev(
            "user_annotation",
            "nccl:all_to_all",
            20,
            100,
            **{"Input Dims": [[128]], "Input type": ["float"]},
        ),
    ]
    ev += _launch(30, 1, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", 300, 40)
    ev += _launch(170, 2, "void at::native::vectorized_elementwise_kernel<4>(x)", 400, 5)
    path = _file(tmp_path, ev, distributedInfo={"rank": 0, "world_size": 4})
    data = read_kineto_file(path, "h")
    rows = _rows(data)
    assert rows["c10d::alltoall_base_"][:4] == ("communication", 0.0, 896.0, True)
    assert rows["All2All_Pooled_Req"][0] == "communication"
    k = data.kernels
    nccl = [c for n, c in zip(k["operation"].tolist(), k["category"].tolist()) if "nccl" in n]
    assert nccl == ["communication"]
    assert _interconnect(path)["c10d::alltoall_base_"] == pytest.approx(512 * 3 / 4)


def test_vllm_all_reduce_costs_its_buffer():
    cost = torch_custom_ops.op_cost(
        "vllm::all_reduce", {"Input Dims": [[888, 2880], []], "Input type": ["c10::BFloat16", ""]}
    )
    size = 888 * 2880 * 2
    assert (cost.category, cost.flops, cost.bytes, cost.source) == (
        "communication",
        0.0,
        2.0 * size,
        "formula",
    )
    assert cost.comm == ("all_reduce", float(size))


@pytest.mark.slow
def test_a100_collectives_match_the_raw_annotations():
    """Independent count: every nccl:all_reduce annotation in the raw file is one
    c10d::allreduce_ call reading and writing its buffer once."""
    raw = json.load(gzip.open(A100))
    want = sum(
        2 * 4 * int(np.prod(e["args"]["Input Dims"][0]))
        for e in raw["traceEvents"]
        if e.get("name") == "nccl:all_reduce"
    )
    assert want > 0
    data = read_kineto_file(A100, "h")
    o = data.ops
    got = sum(
        b for n, b in zip(o["operation"].tolist(), o["bytes"].tolist()) if n == "c10d::allreduce_"
    )
    assert got == pytest.approx(want)
    world = raw["distributedInfo"]["world_size"]
    ic = _interconnect(A100)["c10d::allreduce_"]
    assert ic == pytest.approx(want / 2 * 2 * (world - 1) / world)


@pytest.mark.parametrize(
    "kernel,algo,factor",
    [
        (
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "RING_LL",
            2 * 7 / 8,
        ),
        # NVLink SHARP: the switch reduces: S once per direction
        ("ncclDevKernel_AllReduce_Sum_bf16_NVLS(ncclDevKernelArgsStorage<4096ul>)", "NVLS", 1.0),
        ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "", 2 * 7 / 8),
    ],
)
def test_the_nccl_kernel_name_sets_the_bus_factor_and_is_kept(tmp_path, kernel, algo, factor):
    """vllm::all_reduce of bf16 [888, 2880] over the trace's 8 ranks, launching one NCCL
    kernel: its algorithm (or none) decides the bus factor, and the row says what it moved."""
    from tb_roofline.table.collective_info import parse

    ev = [
        _ev(
            "cpu_op",
            "vllm::all_reduce",
            0,
            100,
            **{"Input Dims": [[888, 2880], []], "Input type": ["c10::BFloat16", ""]},
        )
    ]
    ev += _launch(10, 1, kernel, 20, 50)
    data = read_kineto_file(_file(tmp_path, ev, distributedInfo={"world_size": 8}), "h")
    o = data.ops
    (i,) = [j for j, n in enumerate(o["operation"].tolist()) if n == "vllm::all_reduce"]
    size = 888 * 2880 * 2
    assert o["interconnect_bytes"][i] == pytest.approx(size * factor)
    info = parse(o["collective"][i])
    assert (info["kind"], info["S"], info["n"], info["algo"], info["assumed"]) == (
        "all-reduce",
        size,
        8,
        algo,
        1,
    )


def test_real_b200_all_gather_carries_its_ring_ll_kernel():
    """testdata b200_eager: c10d::_allgather_base_ launches ncclDevKernel_AllGather_RING_LL;
    the ring's bus factor (n-1)/n over its group of 8 is what nccl-tests' default gives too."""
    from tb_roofline.table.collective_info import parse

    raw = json.load(gzip.open(B200))
    assert any(
        e.get("name", "").startswith("ncclDevKernel_AllGather_RING_LL") for e in raw["traceEvents"]
    )
    o = read_kineto_file(B200, "h").ops
    infos = [
        parse(x)
        for n, x in zip(o["operation"].tolist(), o["collective"].tolist())
        if n == "c10d::_allgather_base_" and x
    ]
    assert infos and {i["algo"] for i in infos} == {"RING_LL"}
    assert {i["kind"] for i in infos} == {"all-gather"}


# ------------------------------------------------------------------------------ precision


def test_the_gemm_kernel_decides_the_precision_of_a_split_k_call(tmp_path):
    # aten::mm f32 launches a cast (longest), a CUTLASS TF32 tensor-op GEMM and a split-K
    # reduction longer than the GEMM: the GEMM kernel names what ran (TF32), and in the kernel
    # table the GEMM kernel carries all of the call's 2·64·4096·100 FLOPs.
    dims = {"Input Dims": [[64, 4096], [4096, 100]], "Input type": ["float", "float"]}
    ev = [_ev("cpu_op", "aten::mm", 0, 100, **dims)]
    ev += _launch(10, 1, "void at::native::elementwise_kernel<128, 2>(x)", 200, 23)
    ev += _launch(
        20, 2, "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn>(Params)", 230, 14
    )
    ev += _launch(30, 3, "void splitKreduce_kernel<float, float, float, float>(x)", 250, 19)
    data = read_kineto_file(_file(tmp_path, ev), "h")
    assert _rows(data)["aten::mm"][5] == "tf32"
    k = data.kernels
    flops = dict(zip(k["operation"].tolist(), k["flops"].tolist()))
    gemm = next(n for n in flops if "cutlass" in n)
    assert flops[gemm] == 2 * 64 * 4096 * 100
    assert sum(v for n, v in flops.items() if n != gemm) == 0


def test_integer_and_boolean_rows_say_so():
    from tb_roofline.costs.torch.flops import precision_label

    assert [precision_label(p) for p in ("s64", "s32", "u16", "pred", "s8", "bf16")] == [
        "int",
        "int",
        "int",
        "bool",
        "s8",
        "bf16",
    ]


def test_an_integer_fill_is_labelled_int(tmp_path):
    ev = [
        _ev(
            "cpu_op",
            "aten::fill_",
            0,
            10,
            **{"Input Dims": [[1000], []], "Input type": ["long int", "Scalar"]},
        )
    ]
    ev += _launch(2, 1, "void at::native::vectorized_elementwise_kernel<4>(x)", 20, 3)
    row = _rows(read_kineto_file(_file(tmp_path, ev), "h"))["aten::fill_"]
    assert row[:6] == ("copy", 0.0, 8000.0, True, "formula", "int")


# ------------------------------------------------------------------------------ attention


def _torch_sdpa_flops(b, h, sq, sk, dq, dv, backward=False):
    """torch.utils.flop_counter's sdpa_flop_count / sdpa_backward_flop_count, by hand: the
    forward is bmm(q, kᵀ) + bmm(scores, v); the backward recomputes the scores, bmm(q, kᵀ), then
    four more bmms (dscores, dv, dq, dk): "Step 1: We recompute the scores matrix"."""

    def bmm(bb, m, k, n):
        return 2 * bb * m * k * n

    if not backward:
        return bmm(b * h, sq, dq, sk) + bmm(b * h, sq, sk, dv)
    return (
        bmm(b * h, sq, dq, sk)
        + bmm(b * h, sq, dv, sk)
        + bmm(b * h, sk, sq, dv)
        + bmm(b * h, sq, sk, dq)
        + bmm(b * h, dq, sq, sk)
    )


def test_flash_attn_ops_count_as_torch_counts_sdpa():
    # flash_attn::_flash_attn_forward(q, k, v, ...) on [B, S, H, D] = [2, 512, 16, 64] with
    # GQA keys [2, 1024, 4, 64] bf16: 4·B·H·Sq·Skv·D; causal is not discounted (torch's rule).
    q, k = [2, 512, 16, 64], [2, 1024, 4, 64]
    args = {
        "Input Dims": [q, k, k, [], [], []],
        "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar", "Scalar"],
        "Concrete Inputs": ["", "", "", "0.0", "0.125", "True"],
    }
    fwd = torch_custom_ops.op_cost("flash_attn::_flash_attn_forward", args)
    want = _torch_sdpa_flops(2, 16, 512, 1024, 64, 64)
    assert want == 4 * 2 * 16 * 512 * 1024 * 64
    assert (fwd.category, fwd.flops) == ("attention", want)
    qb, kb = 2 * 512 * 16 * 64 * 2, 2 * 1024 * 4 * 64 * 2
    assert fwd.bytes == qb + 2 * kb + qb  # q, k, v read, out (q's shape) written
    back = torch_custom_ops.op_cost(
        "flash_attn::_flash_attn_backward",
        {
            "Input Dims": [q, q, k, k, q, [2, 16, 512]],
            "Input type": ["c10::BFloat16"] * 5 + ["float"],
        },
    )
    assert back.flops == _torch_sdpa_flops(2, 16, 512, 1024, 64, 64, backward=True) == 5 * want // 2
    assert back.bytes == qb + qb + 2 * kb + qb + 2 * kb  # dout, q, k, v; dq, dk, dv
    # varlen: q is [total tokens, H, D] and the sequence lengths are not recorded
    assert (
        torch_custom_ops.op_cost(
            "flash_attn::_flash_attn_varlen_forward",
            {"Input Dims": [[1000, 16, 64]] * 3, "Input type": ["c10::BFloat16"] * 3},
        )
        is None
    )


def test_aten_sdpa_backends_match_torchs_formula():
    from tb_roofline.costs.torch.flops import op_cost

    q = [4, 8, 256, 64]
    for name, backward in (
        ("_scaled_dot_product_flash_attention", False),
        ("_scaled_dot_product_efficient_attention", False),
        ("_scaled_dot_product_cudnn_attention", False),
        ("_scaled_dot_product_flash_attention_backward", True),
        ("_scaled_dot_product_efficient_attention_backward", True),
        ("_scaled_dot_product_cudnn_attention_backward", True),
    ):
        dims = [q] * 4 if backward else [q] * 3
        cost = op_cost("aten::" + name, dims, ["c10::Half"] * len(dims))
        assert cost.flops == _torch_sdpa_flops(4, 8, 256, 256, 64, 64, backward), name


# ------------------------------------------------------------------------------ triton


def test_triton_kernels_take_inductors_annotations_else_their_argument_bytes(tmp_path):
    annotated = {
        "Input Dims": [[1024, 1024], [1024, 1024], [1024, 1024]],
        "Input type": ["float"] * 3,
        "kernel_flop": 2147483648,
        "kernel_num_gb": 0.0126,
    }
    plain = {"Input Dims": [[4096], [4096], []], "Input type": ["c10::BFloat16"] * 2 + ["Scalar"]}
    ev = [
        _ev("cpu_op", "Torch-Compiled Region: 0/0", 0, 300),
        _ev("cpu_op", "triton_tem_fused_mm_0", 10, 20, **annotated),
        _ev("cpu_op", "triton_poi_fused_add_1", 40, 20, **plain),
    ]
    ev += _launch(15, 1, "triton_tem_fused_mm_0", 400, 30)
    ev += _launch(45, 2, "triton_poi_fused_add_1", 440, 5)
    ev += _launch(100, 3, "triton_red_fused_sum_2", 460, 7)  # no triton op of its own
    ev += _launch(150, 4, "void at::native::vectorized_elementwise_kernel<4>(x)", 480, 2)
    data = read_kineto_file(_file(tmp_path, ev), "h")
    o = data.ops
    rows = {
        n: (f, b, fk, bk, s)
        for n, f, b, fk, bk, s in zip(
            o["operation"].tolist(),
            o["flops"].tolist(),
            o["bytes"].tolist(),
            o["flops_known"].tolist(),
            o["bytes_known"].tolist(),
            o["flops_source"].tolist(),
        )
    }
    assert rows["triton_tem_fused_mm_0"] == (2147483648.0, 0.0126e9, True, True, "formula")
    assert rows["triton_poi_fused_add_1"] == (0.0, 2 * 4096 * 2.0, False, True, "bytes")
    # a Triton kernel of the region without a cost of its own: its own row, not the region's
    assert rows["triton_red_fused_sum_2"][2:] == (False, False, "none")
    time = dict(zip(o["operation"].tolist(), o["total_time_ps"].tolist()))
    assert time["Torch-Compiled Region: 0/0"] == 2e6  # only the aten kernel
    assert not any(d.code == "kernels_without_op" for d in data.diagnostics)


# ------------------------------------------------------------------------------ more ops


def test_foreach_ops_cost_their_tensor_lists():
    # _foreach_add_(params, grads, alpha) over [[128, 128], [128]] (f32: lists carry no dtype):
    # one add per element; reads both lists, writes the first.
    cost = torch_custom_ops.op_cost(
        "aten::_foreach_add_",
        {
            "Input Dims": [[[128, 128], [128]], [[128, 128], [128]], []],
            "Input type": ["TensorList", "TensorList", "Scalar"],
        },
    )
    n = 128 * 128 + 128
    assert (cost.category, cost.flops, cost.bytes, cost.source) == (
        "elementwise",
        n,
        3 * 4 * n,
        "formula",
    )
    lerp = torch_custom_ops.op_cost(
        "aten::_foreach_lerp_",
        {"Input Dims": [[[10]], [[10]], []], "Input type": ["TensorList", "TensorList", "Scalar"]},
    )
    assert lerp.flops == 20


def test_mse_loss_and_vllm_norms():
    mse = torch_custom_ops.op_cost(
        "aten::mse_loss",
        {
            "Input Dims": [[5, 128], [5, 128], []],
            "Input type": ["float", "float", "Scalar"],
            "Concrete Inputs": ["", "", "1"],
        },
    )
    assert (mse.flops, mse.bytes) == (3 * 640, 2 * 640 * 4 + 4)
    back = torch_custom_ops.op_cost(
        "aten::mse_loss_backward",
        {
            "Input Dims": [[], [5, 128], [5, 128], []],
            "Input type": ["float", "float", "float", "Scalar"],
            "Concrete Inputs": ["", "", "", "1"],
        },
    )
    assert (back.flops, back.bytes) == (3 * 640, 4 + 3 * 640 * 4)
    # fused_add_rms_norm(x, residual, w): add (1) + RMS norm with weights (4) per element;
    # reads x, residual and w, writes x and residual.
    x = [888, 2880]
    norm = torch_custom_ops.op_cost(
        "_C::fused_add_rms_norm",
        {"Input Dims": [x, x, [2880], []], "Input type": ["c10::BFloat16"] * 3 + ["Scalar"]},
    )
    n = 888 * 2880
    assert (norm.flops, norm.bytes) == (5 * n, 2 * (2 * n * 2) + 2880 * 2)


# ------------------------------------------------------------------------------ corrupt input


def test_negative_dims_give_no_negative_costs(tmp_path):
    ev = [
        _ev(
            "cpu_op",
            "aten::mm",
            0,
            10,
            **{"Input Dims": [[-2, 3], [3, 4]], "Input type": ["float", "float"]},
        ),
        _ev(
            "cpu_op",
            "aten::mm",
            20,
            10,
            **{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]},
        ),
    ]
    data = read_kineto_file(_file(tmp_path, ev), "h")
    o = data.ops
    assert (o["flops"] >= 0).all() and (o["bytes"] >= 0).all()
    assert sorted(o["flops"].tolist()) == [0.0, 2 * 2 * 3 * 4]
    (note,) = [d for d in data.diagnostics if d.code == "negative_shapes"]
    assert note.message.startswith("1 op calls")


def test_a_negative_cupti_counter_is_rejected(tmp_path):
    from tb_roofline.model.records.roofline import analyze

    metric = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
    ev = [
        _ev("cuda_profiler_range", "k1", 0, 1, **{metric: -1e12}),
        _ev("cuda_profiler_range", "k2", 1, 1, **{metric: 1000}),
    ]
    data = read_kineto_file(_file(tmp_path, ev), "h")
    assert data.hw_counters.total_flops == 2000
    assert all(v >= 0 for v in data.hw_counters.metric_sums.values())
    assert any(d.code == "negative_counters" for d in data.diagnostics)
    prog = analyze([data]).program[True]
    hw = [i for i, k in enumerate(prog.columns["record_type"].tolist()) if k == "total_hw"]
    assert hw and all(prog.columns["flops"][i] >= 0 for i in hw)


@pytest.mark.slow
def test_long_names_are_cut_and_memory_stays_bounded(tmp_path):
    """5,000 events with distinct 40 KB names (200 MB of JSON): before the cut the reader kept
    207 MB and peaked 970 MB above its start (78 s with the model); now it keeps the first
    1 KB of each name."""
    import subprocess
    import sys

    script = os.path.join(tmp_path, "bomb.py")
    path = os.path.join(tmp_path, "w.pt.trace.json.gz")
    with open(script, "w") as f:
        f.write("""
import gzip, json, os, resource, sys, time
path = sys.argv[1]
with gzip.open(path, "wt", compresslevel=1) as f:
    f.write('{"traceEvents": [')
    for i in range(5000):
        ev = {"ph": "X", "cat": "cpu_op", "name": f"op{i}_" + "x" * 40000, "pid": 1, "tid": 1,
              "ts": i * 10, "dur": 5, "args": {}}
        f.write(("," if i else "") + json.dumps(ev))
    f.write("]}")
past = time.time() - 3600
os.utime(path, (past, past))
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
from tb_roofline.readers.kineto import read_kineto_file
base, peak = rss(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
d = read_kineto_file(path, "h")
names = d.ops["operation"].tolist()
print(rss() - base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - peak,
      len(names), max(map(len, names)), [x.code for x in d.diagnostics])
""")
    done = subprocess.run(
        [sys.executable, script, path], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    kept, peak, n, longest, codes = done.stdout.split(" ", 4)
    assert int(n) == 5000 and int(longest) == 1025 and "long_names" in codes
    assert float(kept) < 120 and float(peak) < 300, done.stdout


def test_an_nccl_kernel_outside_any_op_is_costed_from_its_own_args(tmp_path):
    # newer traces write the collective on the kernel: all-reduce of 1,048,576 bf16 elements
    # in a group of 8: S = 2 MiB, local bytes 2 × S, bus bytes S × 2·7/8.
    kernel = {
        "ph": "X",
        "cat": "kernel",
        "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)",
        "pid": 0,
        "tid": 7,
        "ts": 100,
        "dur": 50,
        "args": {
            "correlation": 9,
            "device": 0,
            "Collective name": "allreduce",
            "In msg nelems": 1048576,
            "Out msg nelems": 1048576,
            "Group size": 8,
            "dtype": "BFloat16",
        },
    }
    path = _file(tmp_path, [kernel])
    data = read_kineto_file(path, "h")
    row = _rows(data)[kernel["name"]]
    assert row[:5] == ("communication", 0.0, 2.0 * 2**21, True, "formula")
    col = load_kineto(path)
    c = to_columns(col)
    nbytes, ic, known, coll = comms.kernel_costs(c, col)
    assert known.tolist() == [True] and ic[0] == pytest.approx(2**21 * 2 * 7 / 8)
    # the group its link roof is judged on: the 8 ranks the kernel's args name
    assert coll[0].startswith("all-reduce S=2097152 n=8")
    k = data.kernels
    assert k["bytes"].tolist() == [2.0 * 2**21] and k["flops_known"].tolist() == [True]


def test_pad_and_rotary_embedding():
    pad = torch_custom_ops.op_cost(
        "aten::pad",
        {
            "Input Dims": [[888, 2880], [], [], []],
            "Input type": ["c10::BFloat16", "ScalarList", "", "Scalar"],
            "Concrete Inputs": ["", "[0, 192]", "", "0."],
        },
    )
    assert (pad.flops, pad.bytes) == (0.0, 888 * 2880 * 2 + 888 * 3072 * 2)
    # vLLM rotary_embedding(positions [888], q [888, 512], k [888, 64], 64, cache [131072, 64]):
    # 8 query + 1 key heads of 64 per token, all 64 dims rotated: 3 FLOPs per rotated element;
    # q and k read and written, positions and one cache row per token read.
    rot = torch_custom_ops.op_cost(
        "_C::rotary_embedding",
        {
            "Input Dims": [[888], [888, 512], [888, 64], [], [131072, 64], []],
            "Input type": [
                "long int",
                "c10::BFloat16",
                "c10::BFloat16",
                "Scalar",
                "c10::BFloat16",
                "Scalar",
            ],
            "Concrete Inputs": ["", "", "", "64", "", "True"],
        },
    )
    assert rot.flops == 3 * 64 * 888 * 9
    assert rot.bytes == 888 * 8 + 2 * (888 * 512 * 2 + 888 * 64 * 2) + 888 * 64 * 2
