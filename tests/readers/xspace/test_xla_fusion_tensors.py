"""XLA fusion findings need a shared tensor: the XLA GPU/CPU and TPU readers give each
elementwise / fusion op its `tensor` shape (output, then operands, from the HLO), and a fusion
finding names a producer -> consumer pair only where the producer's output is an operand of the
consumer. Checked against the HLO protos inside the real JAX CPU profiles (testdata/jax_cpu,
testdata/compare/jax_cpu): every pair found is an HLO data edge of that shape, its saving is at
most the bound in its evidence, and ops that only write (or only read) the same shape are never
paired."""

from __future__ import annotations

import glob
import math
import os

import pytest
from testpaths import TESTS

from tb_roofline.costs.hlo.module import HloIndex
from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.xspace.hlo_shapes import text_tensor_shape
from tb_roofline.readers.xspace.read import read_xspace
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.synthetic import SynthConfig, make_tpu_xspace

TESTDATA = os.path.join(TESTS, "..", "testdata")
CASES = [
    (os.path.join(TESTDATA, "jax_cpu"), os.path.join(TESTDATA, "guidance", "roofline_device.json")),
    (
        os.path.join(TESTDATA, "compare", "jax_cpu"),
        os.path.join(TESTDATA, "compare", "jax_cpu", "roofline_device.json"),
    ),
]


def _modules(logdir, run):
    path = glob.glob(
        os.path.join(
            logdir, run.split("/")[0], "plugins", "profile", run.split("/")[1], "*.xplane.pb"
        )
    )[0]
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    return HloIndex.from_space(space)


def _dims(shape) -> tuple:
    return tuple(int(d) for d in shape.dimensions)


def _is_edge(index, producer: str, consumer: str, dims: tuple) -> bool:
    """`consumer` reads `producer`'s output (of `dims`) in some HLO module of the profile."""
    for m in index.modules():
        p, c = m.instruction(producer), m.instruction(consumer)
        if (
            p is not None
            and c is not None
            and any(o is p for o in c.operands)
            and _dims(p.proto.shape) == dims
        ):
            return True
    return False


def _runs():
    out = []
    for logdir, device in CASES:
        s = RooflineService(logdir, device_file=device)
        out += [(logdir, device, r["run"]) for r in s.list_runs()["runs"]]
    return out


@pytest.mark.parametrize("logdir,device,run", _runs())
def test_fusion_pairs_are_hlo_data_edges(logdir, device, run):
    s = RooflineService(logdir, device_file=device)
    g = s.guidance(run, "", True)
    index = _modules(logdir, run)
    for f in (f for f in g["findings"] if f["rule"] == "fusion"):
        a, b = (o["operation"] for o in f["ops"])
        facts = f["evidence"]["facts"]
        dims = tuple(facts["shared_shape"])
        assert _is_edge(index, a, b, dims), (run, a, b, dims)
        assert facts["intermediate_bytes"] == math.prod(dims) * 4  # f32 on these profiles
        bound = facts["pairs"] * 2 * facts["intermediate_bytes"] / (facts["memory_roof_gbs"] * 1e3)
        assert f["bound_us"] == pytest.approx(bound, rel=1e-9)
        assert f["time_saved_us"] <= f["bound_us"] + 1e-9


def test_pairs_found_where_the_hlo_links_them():
    """The mlp's tanh fusion feeds the multiply fusion that follows it (by hand from the HLO):
    one finding per such edge; the unfused compare run has more, none without an edge (above)."""
    logdir, device = CASES[0]
    s = RooflineService(logdir, device_file=device)
    run = next(r["run"] for r in s.list_runs()["runs"] if r["run"].startswith("mlp/"))
    pairs = {
        (f["ops"][0]["operation"], f["ops"][1]["operation"])
        for f in s.guidance(run, "", True)["findings"]
        if f["rule"] == "fusion"
    }
    assert ("multiply_tanh_fusion", "multiply_multiply_fusion") in pairs
    index = _modules(logdir, run)
    tanh = next(
        m.instruction("multiply_tanh_fusion")
        for m in index.modules()
        if m.instruction("multiply_tanh_fusion") is not None
    )
    assert any(u.name == "multiply_multiply_fusion" for u in tanh.users)


def test_ops_writing_the_same_shape_are_no_pair():
    """convnet's `wrapped_iota` ops each write an f32[16,32,32,16] and read nothing: by shape
    alone they would pair; no HLO edge links them, so no finding does."""
    logdir, device = CASES[0]
    s = RooflineService(logdir, device_file=device)
    run = next(r["run"] for r in s.list_runs()["runs"] if r["run"].startswith("convnet/"))
    found = [f for f in s.guidance(run, "", True)["findings"] if f["rule"] == "fusion"]
    assert found  # there are real pairs on this profile
    assert not any(
        f["ops"][0]["operation"].startswith("wrapped_iota")
        and f["ops"][1]["operation"].startswith("wrapped_iota")
        for f in found
    )


def test_same_shape_without_a_data_edge_is_no_pair():
    """mlp_b64_unfused: `wrapped_multiply.2` writes an f32[64,512] and `wrapped_multiply.30`,
    right after it, reads one, but not that one (the HLO: .30's operands are other ops): the
    operand names the reader gives rule the pair out."""
    logdir, device = CASES[1]
    s = RooflineService(logdir, device_file=device)
    run = next(r["run"] for r in s.list_runs()["runs"] if r["run"].startswith("mlp_b64_unfused"))
    index = _modules(logdir, run)
    assert not _is_edge(index, "wrapped_multiply.2", "wrapped_multiply.30", (64, 512))
    pairs = {
        (f["ops"][0]["operation"], f["ops"][1]["operation"])
        for f in s.guidance(run, "", True)["findings"]
        if f["rule"] == "fusion"
    }
    assert ("wrapped_multiply.2", "wrapped_multiply.30") not in pairs
    assert ("wrapped_multiply.1", "wrapped_multiply.2") in pairs  # a real edge stays


def test_xla_reader_gives_tensor_shapes_from_the_hlo():
    logdir, _ = CASES[0]
    path = glob.glob(os.path.join(logdir, "mlp", "plugins", "profile", "*", "*.xplane.pb"))[0]
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    data = read_xspace(space, "h")
    index = HloIndex.from_space(space)
    tensors = {
        label[1]: u for label, uses in data.op_shapes.items() for u in uses if u.kind == "tensor"
    }
    assert "multiply_tanh_fusion" in tensors
    for name, u in tensors.items():
        ins = next(m.instruction(name) for m in index.modules() if m.instruction(name))
        assert u.dims[0] == _dims(ins.proto.shape)
        assert list(u.dims[1:]) == [
            _dims(o.proto.shape) for o in ins.operands if _dims(o.proto.shape)
        ]
        assert u.text.split(" from ")[1].split() == [o.name for o in ins.operands]


def test_tpu_reader_gives_tensor_shapes_from_the_op_text():
    text = (
        "%fusion.3 = f32[8,128]{1,0} fusion(f32[8,128]{1,0} %a, bf16[128]{0} %b), "
        "kind=kLoop, calls=%fused"
    )
    assert text_tensor_shape(text, "loop fusion") == (
        "tensor",
        ((8, 128), (8, 128), (128,)),
        "f32[8,128] f32[8,128] bf16[128] from a b",
    )
    assert text_tensor_shape(text, "convolution") is None
    cfg = SynthConfig(
        seed=1, num_cores=1, op_text={"loop_fusion.2": text.replace("%fusion.3", "%loop_fusion.2")}
    )
    data = read_xspace(make_tpu_xspace(cfg), "h")
    uses = [u for label, us in data.op_shapes.items() if label[1] == "loop_fusion.2" for u in us]
    assert [u.kind for u in uses] == ["tensor"] and uses[0].dims[0] == (8, 128)


def test_matmul_then_tanh_share_the_matmul_output():
    """jax_cpu/matmul_tanh: `wrapped_tanh` reads the f32[256,1024] that the dot `ynn_fusion.2`
    writes (M=256, N=1024 by its GEMM shape): the reader says so (operand name and dims); the
    dot is no elementwise op, so the fusion rule (elementwise pairs) claims nothing there."""
    logdir, device = CASES[0]
    path = glob.glob(os.path.join(logdir, "matmul_tanh", "plugins", "profile", "*", "*.xplane.pb"))[
        0
    ]
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    shapes = {label[1]: uses for label, uses in read_xspace(space, "h").op_shapes.items()}
    (tanh,) = shapes["wrapped_tanh"]
    assert tanh.kind == "tensor" and tanh.text.endswith(" from ynn_fusion.2")
    (gemm,) = shapes["ynn_fusion.2"]
    assert gemm.kind == "gemm" and tanh.dims[1] == (gemm.dims[0], gemm.dims[1])
    s = RooflineService(logdir, device_file=device)
    run = next(r["run"] for r in s.list_runs()["runs"] if r["run"].startswith("matmul_tanh/"))
    assert not [f for f in s.guidance(run, "", True)["findings"] if f["rule"] == "fusion"]
