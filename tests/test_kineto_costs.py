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

from tb_roofline.readers import collectives, torch_custom_ops
from tb_roofline.readers.kineto import (attribution, comms, load_kineto, read_kineto_file,
                                        to_columns)

HERE = os.path.dirname(__file__)
A100 = os.path.join(HERE, "..", "testdata", "kineto", "a100_80gb_shapes",
                    "rank0.pt.trace.json.gz")
B200 = os.path.join(HERE, "..", "testdata", "kineto", "b200_eager",
                    "worker0.1773700000000.pt.trace.json.gz")


def _ev(cat, name, ts, dur, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _launch(ts, corr, kernel, kernel_ts, kdur=2.0, tid=1):
    return [_ev("cuda_runtime", "cudaLaunchKernel", ts, 0.5, tid=tid, correlation=corr),
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": kernel_ts,
             "dur": kdur, "args": {"correlation": corr, "device": 0}}]


def _file(tmp_path, events, name="t", **meta):
    p = tmp_path / f"{name}.pt.trace.json"
    p.write_text(json.dumps(dict(meta, traceEvents=events)))
    past = time.time() - 3600
    os.utime(p, (past, past))
    return str(p)


def _rows(data):
    o = data.ops
    return {n: (c, f, b, k, s, p) for n, c, f, b, k, s, p in zip(
        o["operation"].tolist(), o["category"].tolist(), o["flops"].tolist(),
        o["bytes"].tolist(), o["flops_known"].tolist(), o["flops_source"].tolist(),
        o["precision"].tolist())}


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
    assert collectives.bus_factor("all_reduce", 8) == 2 * 7 / 8
    for kind in ("all_gather", "reduce_scatter", "all_to_all"):
        assert collectives.bus_factor(kind, 4) == 3 / 4
    for kind in ("broadcast", "reduce", "send", "recv"):
        assert collectives.bus_factor(kind, 16) == 1
    assert collectives.bus_factor("all_reduce", 0) == 0  # unknown ranks: not claimed


@pytest.mark.parametrize("name, kind", [
    ("nccl:all_reduce", "all_reduce"), ("c10d::allreduce_", "all_reduce"),
    ("nccl:_all_gather_base", "all_gather"), ("_allgather_base", "all_gather"),
    ("nccl:_reduce_scatter_base", "reduce_scatter"), ("c10d::alltoall_base_", "all_to_all"),
    ("All2All_Pooled_Req", "all_to_all"), ("c10d::broadcast_", "broadcast"),
    ("c10d::reduce_", "reduce"), ("symm_mem::multimem_all_reduce_", "all_reduce"),
    ("c10d::send", "send"), ("c10d::recv_", "recv"), ("aten::mm", "")])
def test_collective_kinds(name, kind):
    assert collectives.kind_of(name) == kind


def test_an_allreduce_without_shapes_takes_its_size_from_the_nccl_annotation(tmp_path):
    # c10d::allreduce_ (a TensorList: no dims) > record_param_comms > nccl:all_reduce [[1024]]
    # f32; 8 ranks (distributedInfo): S = 4096 B, bus bytes 4096 × 2·7/8 = 7168.
    ev = [_ev("cpu_op", "c10d::allreduce_", 0, 100, **{"Input Dims": [[], [], [], []],
              "Input type": ["TensorList", "", "", "Scalar"]}),
          _ev("cpu_op", "record_param_comms", 5, 90, **{"Input Dims": [[]], "Input type": [""]}),
          _ev("user_annotation", "nccl:all_reduce", 10, 80,
              **{"Input Dims": [[1024]], "Input type": ["float"]})]
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
    ev = [_ev("cpu_op", "c10d::_allgather_base_", 0, 100, **{
              "Input Dims": [[8, 256], [1, 256], []],
              "Input type": ["c10::BFloat16", "c10::BFloat16", ""]}),
          _ev("cpu_op", "record_param_comms", 5, 90, **{
              "Collective name": "_allgather_base", "In msg nelems": 256,
              "Out msg nelems": 2048, "Group size": 4, "dtype": "BFloat16",
              "Input Dims": [[1, 256]], "Input type": ["c10::BFloat16"]})]
    ev += _launch(20, 1, "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                  200, 50)
    path = _file(tmp_path, ev, distributedInfo={"rank": 0, "world_size": 8})
    rows = _rows(read_kineto_file(path, "h"))
    assert rows["c10d::_allgather_base_"][:4] == ("communication", 0.0, 4096.0 + 512.0, True)
    assert _interconnect(path)["c10d::_allgather_base_"] == pytest.approx(4096 * 3 / 4)


def test_param_comms_fields_alone_cost_the_collective(tmp_path):
    # No c10d shapes, no annotation: record_param_comms' fields (reduce-scatter, 4096 f32 in,
    # 1024 out, group of 4) go to the enclosing c10d op. S = the input, 16384 B.
    ev = [_ev("cpu_op", "c10d::reduce_scatter_", 0, 100),
          _ev("cpu_op", "record_param_comms", 5, 90, **{
              "Collective name": "reduce_scatter", "In msg nelems": 4096,
              "Out msg nelems": 1024, "Group size": 4, "dtype": "Float"})]
    ev += _launch(20, 1, "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(x)", 200, 50)
    path = _file(tmp_path, ev)
    rows = _rows(read_kineto_file(path, "h"))
    assert rows["c10d::reduce_scatter_"][:4] == ("communication", 0.0, 16384.0 + 4096.0, True)
    assert _interconnect(path)["c10d::reduce_scatter_"] == pytest.approx(16384 * 3 / 4)


def test_all2all_pooled_is_communication_and_its_alltoall_carries_the_cost(tmp_path):
    # torchrec's All2All_Pooled_Req runs c10d::alltoall_base_(out [96], in [128]) f32 whose
    # NCCL kernel is charged to the collective; 4 ranks: S = 512 B, bus bytes 512 × 3/4.
    ev = [_ev("cpu_op", "All2All_Pooled_Req", 0, 200,
              **{"Input Dims": [[8, 16]], "Input type": ["float"]}),
          _ev("cpu_op", "c10d::alltoall_base_", 10, 150, **{
              "Input Dims": [[96], [128], [], [], [], []],
              "Input type": ["float", "float", "", "", "", "Scalar"]}),
          _ev("user_annotation", "nccl:all_to_all", 20, 100,
              **{"Input Dims": [[128]], "Input type": ["float"]})]
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
    cost = torch_custom_ops.op_cost("vllm::all_reduce", {
        "Input Dims": [[888, 2880], []], "Input type": ["c10::BFloat16", ""]})
    size = 888 * 2880 * 2
    assert (cost.category, cost.flops, cost.bytes, cost.source) == \
        ("communication", 0.0, 2.0 * size, "formula")
    assert cost.comm == ("all_reduce", float(size))


def test_a100_collectives_match_the_raw_annotations():
    """Independent count: every nccl:all_reduce annotation in the raw file is one
    c10d::allreduce_ call reading and writing its buffer once."""
    raw = json.load(gzip.open(A100))
    want = sum(2 * 4 * int(np.prod(e["args"]["Input Dims"][0])) for e in raw["traceEvents"]
               if e.get("name") == "nccl:all_reduce")
    assert want > 0
    data = read_kineto_file(A100, "h")
    o = data.ops
    got = sum(b for n, b in zip(o["operation"].tolist(), o["bytes"].tolist())
              if n == "c10d::allreduce_")
    assert got == pytest.approx(want)
    world = raw["distributedInfo"]["world_size"]
    ic = _interconnect(A100)["c10d::allreduce_"]
    assert ic == pytest.approx(want / 2 * 2 * (world - 1) / world)
