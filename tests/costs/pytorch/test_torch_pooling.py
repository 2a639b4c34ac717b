"""PyTorch pooling costs (costs/torch/pooling.py): output sizes as ATen computes them, FLOPs as
XLA counts the same window reduction (our HLO cost model, itself checked against XLA's
cost_analysis in tests/costs/hlo/test_hlo_cost_model.py), bytes by hand, and the real CPU
traces whose max-pools had no cost before."""

from __future__ import annotations

import os

import pytest
from test_hlo_cost_model import HloBuilder, _cost
from testpaths import TESTS

from tb_roofline.costs.hlo.shapes import F32
from tb_roofline.costs.torch.custom_ops import op_cost
from tb_roofline.costs.torch.pooling import pool_output_size
from tb_roofline.protos import hlo_pb2
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
SCALARS = ["ScalarList"] * 4 + ["Scalar"]


def call(name, dims, concrete, types=None):
    types = types or ["float"] + SCALARS[: len(dims) - 1]
    return op_cost(
        "aten::" + name, {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}
    )


@pytest.mark.parametrize(
    "size,k,s,p,d,ceil,expected",
    [
        (32, 2, 2, 0, 1, False, 16),
        (5, 2, 2, 0, 1, False, 2),
        (5, 2, 2, 0, 1, True, 3),  # ceil keeps the partial window
        (4, 3, 2, 1, 1, True, 3),  # ... that starts in the input
        (6, 3, 3, 1, 1, True, 3),  # (it starts at 5: in the input)
        (5, 2, 2, 1, 1, True, 3),  # not one in the right padding
        (10, 3, 1, 0, 2, False, 6),  # dilation 2: a 5-wide window
    ],
)
def test_output_size_is_atens(size, k, s, p, d, ceil, expected):
    # By hand from ATen's pooling_output_shape: floor/ceil((in + 2p - d(k-1) - 1)/s) + 1,
    # minus one when ceil mode's last window would start in the right padding.
    assert pool_output_size(size, k, s, p, d, ceil) == expected


def test_max_pool_flops_equal_xlas_reduce_window_count():
    """A 2x2 stride-2 max-pool of [8, 32, 32, 32]: the same reduce-window in HLO costs what
    the PyTorch formula gives (XLA: (window - 1) reductions per output element)."""
    b = HloBuilder()
    reducer = b.adder()  # one FLOP per application, as max's is
    entry = b.computation("main")
    x = b.param("x", (F32, (8, 32, 32, 32)), 0)
    init = b.add("init", "constant", (F32, ()))
    w = hlo_pb2.Window()
    for size, stride in ((1, 1), (1, 1), (2, 2), (2, 2)):
        w.dimensions.add(size=size, stride=stride, window_dilation=1, base_dilation=1)
    b.add("pool", "reduce-window", (F32, (8, 32, 16, 16)), [x, init], [reducer], window=w)
    xla = _cost(b.build(entry), "pool")[0]
    torch_side = call(
        "max_pool2d",
        [[8, 32, 32, 32], [], [], [], [], []],
        ["", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "False"],
    )
    assert torch_side.flops == xla.flops == 3 * 8 * 32 * 16 * 16
    # Bytes: the input read, the output written (XLA adds its 4-byte init value).
    assert torch_side.bytes == (8 * 32 * 32 * 32 + 8 * 32 * 16 * 16) * 4 == xla.bytes - 4
    assert torch_side.category == "reduction" and torch_side.precision == "f32"


def test_indices_gradients_and_average_pooling_by_hand():
    x = [[8, 32, 32, 32], [], [], [], [], []]
    window = ["", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "False"]
    out = 8 * 32 * 16 * 16
    with_indices = call("max_pool2d_with_indices", x, window)
    assert with_indices.bytes == (8 * 32 * 32 * 32 + out) * 4 + out * 8  # int64 indices written
    grad = call(
        "max_pool2d_with_indices_backward",
        [[8, 32, 16, 16], [8, 32, 32, 32], [], [], [], [], [], [8, 32, 16, 16]],
        ["", "", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "False", ""],
        ["float", "float"] + SCALARS + ["long int"],
    )
    assert grad.flops == out  # one add per gradient element, where its index says
    assert grad.bytes == out * 4 + out * 8 + 8 * 32 * 32 * 32 * 4
    # avg_pool2d(x, 3, stride 2, padding 1): out 16x16 from 32; 8 adds and a divide each.
    avg = call(
        "avg_pool2d",
        [[8, 32, 32, 32], [], [], [], [], [], []],
        ["", "[3, 3]", "[2, 2]", "[1, 1]", "False", "True", ""],
        ["float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", ""],
    )
    assert avg.flops == (9 - 1) * out + out
    # Stride omitted ([]): the kernel's, as PyTorch defaults it.
    assert call("max_pool2d", x, ["", "[2, 2]", "[]", "[0, 0]", "[1, 1]", "False"]).flops == 3 * out
    # Adaptive average to 1x1 (a global pool): in - out adds, out divides.
    ada = call("adaptive_avg_pool2d", [[8, 32, 7, 7], []], ["", "[1, 1]"], ["float", "ScalarList"])
    assert ada.flops == 8 * 32 * 49 and ada.bytes == (8 * 32 * 49 + 8 * 32) * 4


@pytest.mark.parametrize(
    "concrete",
    [
        ["", "", "[2, 2]", "[0, 0]", "[1, 1]", "False"],  # no kernel recorded
        ["", "[0, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "False"],  # a zero kernel
        ["", "[2, 2]", "[-1, 2]", "[0, 0]", "[1, 1]", "False"],  # a negative stride
        ["", "[64, 64]", "[2, 2]", "[0, 0]", "[1, 1]", "False"],  # a window larger than the input
    ],
)
def test_what_cannot_be_costed_has_no_cost(concrete):
    assert call("max_pool2d", [[8, 32, 32, 32], [], [], [], [], []], concrete) is None


def test_real_cpu_traces_cost_their_max_pools(monkeypatch):
    """The committed PyTorch CPU training steps: the max-pool rows (forward and gradient) now
    have FLOPs and bytes, and the run's coverage passes 0.9."""
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    service = RooflineService(os.path.join(REPO, "testdata"))
    for run in (
        "compare/torch_cpu/convnet_b8",
        "compare/torch_cpu/convnet_b16",
        "compare/torch_cpu/convnet_b8_channels_last",
    ):
        ops = service.ops(run, "")
        rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
        pools = [r for r in rows if "max_pool2d" in r["operation"]]
        assert pools and all(
            r["flops"] > 0 and r["bytes"] > 0 and r["caveat"] != "no_cost" for r in pools
        ), run
        program = service.program(run, "")
        total = dict(zip(program["columns"], program["rows"][0]))
        assert total["flop_coverage"] >= 0.9, (run, total["flop_coverage"])


def test_any_recorded_arguments_give_a_cost_or_none_never_an_error():
    """Whatever a trace holds in the window arguments (missing, empty, negative, floats,
    text, huge, lists with nulls), every pooling op answers a non-negative cost or None."""
    import itertools

    values = [
        "",
        "[2, 2]",
        "[]",
        "[-1]",
        "[0]",
        "3",
        "2.5",
        "True",
        "abc",
        "[1e30, 2]",
        "[999999999999, 2]",
        "[None, 7]",
    ]
    names = (
        "max_pool2d",
        "avg_pool2d",
        "adaptive_avg_pool2d",
        "adaptive_max_pool2d",
        "max_pool2d_with_indices_backward",
        "avg_pool2d_backward",
        "max_pool3d",
        "_adaptive_avg_pool2d_backward",
        "max_pool1d_with_indices",
    )
    shapes = (
        [[8, 3, 9, 9], [], [], [], [], []],
        [[8, 3, 9, 9], [8, 3, 18, 18], [], [], [], [], [], [8, 3, 9, 9]],
        [[3], []],
        [[2, 3, 9], []],
    )
    costed = 0
    for combo in itertools.product(values, repeat=3):
        for name in names:
            for dims in shapes:
                concrete = [""] + list(combo) + [""] * max(0, len(dims) - 4)
                cost = call(name, dims, concrete, ["float"] + ["ScalarList"] * (len(dims) - 1))
                if cost is not None:
                    costed += 1
                    assert cost.flops >= 0 and cost.bytes >= 0, (name, combo, dims)
    assert costed  # the sweep reaches the formulas, not only the refusals
