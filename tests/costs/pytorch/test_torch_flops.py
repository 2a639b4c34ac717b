"""The FLOP/byte formula table, against numbers derived by hand from the definitions."""

import pytest

from tb_roofline.costs.torch import flops as torch_flops


def cost(name, dims, types, concrete=None):
    return torch_flops.op_cost(name, dims, types, concrete)


F32, BF16 = "float", "c10::BFloat16"


def test_parse_concrete():
    assert torch_flops.parse_concrete("[1, 2]") == [1, 2]
    assert torch_flops.parse_concrete("[]") == []
    assert torch_flops.parse_concrete("3") == 3
    assert torch_flops.parse_concrete("0.5") == 0.5
    assert torch_flops.parse_concrete("False") is False
    assert torch_flops.parse_concrete("[True, True, False]") == [True, True, False]
    assert torch_flops.parse_concrete("") is None


def test_mm_addmm_bmm_baddbmm():
    # mm [24,40]x[40,16]: 2*24*40*16 = 30720; bytes (24*40 + 40*16 + 24*16) * 4 = 7936
    c = cost("aten::mm", [[24, 40], [40, 16]], [F32, F32])
    assert (c.category, c.flops, c.bytes, c.precision, c.source) == (
        "matmul",
        30720,
        7936,
        "f32",
        "formula",
    )
    # addmm adds the bias read (16 floats) but no FLOPs (FlopCounterMode's convention)
    c = cost("aten::addmm", [[16], [24, 40], [40, 16], [], []], [F32, F32, F32, "Scalar", "Scalar"])
    assert (c.flops, c.bytes) == (30720, 7936 + 64)
    c = cost("aten::bmm", [[3, 24, 40], [3, 40, 16]], [BF16, BF16])
    assert (c.flops, c.bytes, c.precision) == (3 * 30720, 3 * (960 + 640 + 384) * 2, "bf16")
    c = cost(
        "aten::baddbmm",
        [[3, 24, 16], [3, 24, 40], [3, 40, 16], [], []],
        [F32, F32, F32, "Scalar", "Scalar"],
    )
    assert c.flops == 92160
    assert cost("aten::mm", [[24, 40], [41, 16]], [F32, F32]) is None  # shapes don't fit


def test_matmul_broadcast_and_vectors():
    # [2,3,24,40] @ [3,40,16]: batch 6 → 2*6*24*40*16
    assert cost("aten::matmul", [[2, 3, 24, 40], [3, 40, 16]], [F32, F32]).flops == 184320
    # matrix @ vector: [24,40] @ [40] → 2*24*40; output 24 floats
    c = cost("aten::matmul", [[24, 40], [40]], [F32, F32])
    assert (c.flops, c.bytes) == (1920, (960 + 40 + 24) * 4)
    assert cost("aten::matmul", [[40], [40]], [F32, F32]).flops == 80  # dot


def test_linear():
    # x [4,6,40], w [32,40], b [32]: 2*24*40*32 = 61440; out [4,6,32]
    c = cost("aten::linear", [[4, 6, 40], [32, 40], [32]], [F32, F32, F32])
    assert (c.flops, c.bytes) == (61440, (960 + 1280 + 32 + 768) * 4)
    c = cost("aten::linear", [[4, 6, 40], [32, 40], []], [F32, F32, ""])
    assert c.bytes == (960 + 1280 + 768) * 4


def test_einsum_needs_the_equation():
    ops = [[3, 24, 40], [3, 40, 16]]
    assert cost("aten::einsum", [[], ops, []], ["", "TensorList", ""], ["", "", ""]) is None
    c = cost("aten::einsum", [[], ops, []], ["", "TensorList", ""], ['"bij,bjk->bik"', "", ""])
    assert c.flops == 2 * 3 * 24 * 40 * 16
    # a letter summed inside one operand ('x') is reduced before the product
    c = cost(
        "aten::einsum",
        [[], [[5, 7, 2], [7, 3]], []],
        ["", "TensorList", ""],
        ["ijx,jk->ik", "", ""],
    )
    assert c.flops == 2 * 5 * 7 * 3


def conv_args(x, w, b, stride, pad, dil, groups):
    dims = [x, w, b, [], [], [], []]
    types = [F32, F32, F32 if b else "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]
    conc = ["", "", "", str(stride), str(pad), str(dil), str(groups)]
    return dims, types, conc


def test_conv2d_forward():
    # x [2,4,17,15], w [6,4,3,3], no padding: out 15x13; 2*N*Hout*Wout*Kh*Kw*Cin*Cout
    c = cost(
        "aten::conv2d", *conv_args([2, 4, 17, 15], [6, 4, 3, 3], [6], [1, 1], [0, 0], [1, 1], 1)
    )
    assert c.flops == 2 * 2 * 15 * 13 * 9 * 4 * 6 == 168480
    assert c.bytes == (2 * 4 * 17 * 15 + 6 * 4 * 9 + 6 + 2 * 6 * 15 * 13) * 4
    # stride (2,1), padding (1,2), dilation (2,1): H = (17+2-4-1)//2+1 = 8, W = (15+4-2-1)+1 = 17
    c = cost(
        "aten::conv2d", *conv_args([2, 4, 17, 15], [6, 4, 3, 3], [6], [2, 1], [1, 2], [2, 1], 1)
    )
    assert c.flops == 2 * 2 * 8 * 17 * 9 * 4 * 6
    # groups=2: w [6,2,3,3], stride 2, pad 1 → 9x8 out; Cin/groups = 2
    c = cost(
        "aten::conv2d", *conv_args([2, 4, 17, 15], [6, 2, 3, 3], [], [2, 2], [1, 1], [1, 1], 2)
    )
    assert c.flops == 2 * 2 * 9 * 8 * 9 * 2 * 6 == 31104
    # padding="same" is not recorded (empty text): no formula, the nested op is used
    dims, types, conc = conv_args([2, 4, 17, 15], [6, 4, 3, 3], [], [1, 1], [0, 0], [1, 1], 1)
    types[4], conc[4] = "", ""
    assert cost("aten::conv2d", dims, types, conc) is None


def test_conv1d_3d_and_convolution():
    # conv1d x [2,4,33], w [8,4,5], stride 2, pad 2: L = (33+4-4-1)//2+1 = 17
    c = cost("aten::conv1d", *conv_args([2, 4, 33], [8, 4, 5], [], [2], [2], [1], 1))
    assert c.flops == 2 * 2 * 17 * 5 * 4 * 8 == 10880
    # conv3d x [1,3,6,7,8], w [4,3,2,3,3], stride (1,2,2), pad 1 → (7, 4, 4)
    c = cost(
        "aten::conv3d",
        *conv_args([1, 3, 6, 7, 8], [4, 3, 2, 3, 3], [], [1, 2, 2], [1, 1, 1], [1, 1, 1], 1),
    )
    assert c.flops == 2 * 1 * (7 * 4 * 4) * 18 * 3 * 4 == 48384
    # aten::convolution carries transposed and output_padding
    dims = [[2, 4, 17, 15], [6, 4, 3, 3], [], [], [], [], [], [], []]
    types = [
        F32,
        F32,
        "",
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "Scalar",
        "ScalarList",
        "Scalar",
    ]
    conc = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    assert cost("aten::convolution", dims, types, conc).flops == 2 * 2 * 17 * 15 * 9 * 4 * 6


def test_conv_transpose():
    # conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
    # x [2,4,17,15], w [4,3,3,3] (Cin, Cout/groups, kh, kw); FLOPs run over input positions:
    # 2 * N * Hin * Win * Kh * Kw * Cin * Cout/groups
    dims = [[2, 4, 17, 15], [4, 3, 3, 3], [], [], [], [], [], []]
    types = [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList"]
    c = torch_flops.op_cost(
        "aten::conv_transpose2d",
        dims,
        types,
        ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1", "[1, 1]"],
    )
    assert c.flops == 2 * 2 * 17 * 15 * 9 * 4 * 3 == 110160
    # output: (17-1)*2 - 2 + 2 + 1 + 1 = 34, (15-1)*2 - 2 + 2 + 1 + 1 = 30, channels 3
    assert c.bytes == (2 * 4 * 17 * 15 + 4 * 3 * 9 + 2 * 3 * 34 * 30) * 4
    # groups=2: output channels = 3 * 2
    c = torch_flops.op_cost(
        "aten::conv_transpose2d",
        dims,
        types,
        ["", "", "", "[2, 2]", "[0, 0]", "[0, 0]", "2", "[2, 2]"],
    )
    assert c.flops == 110160  # w[0] * w[1] = Cin * Cout/groups, the same product


def test_convolution_backward():
    # grad_out [2,6,9,8], input [2,4,17,15], weight [6,4,3,3], stride 2, pad 1, mask [T,T,F]
    dims = [[2, 6, 9, 8], [2, 4, 17, 15], [6, 4, 3, 3], [], [], [], [], [], [], [], []]
    types = [
        F32,
        F32,
        F32,
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "Scalar",
        "ScalarList",
        "Scalar",
        "ScalarList",
    ]
    conc = [
        "",
        "",
        "",
        "[0]",
        "[2, 2]",
        "[1, 1]",
        "[1, 1]",
        "False",
        "[0, 0]",
        "1",
        "[True, True, False]",
    ]
    fwd = 2 * 2 * 9 * 8 * 9 * 4 * 6
    c = cost("aten::convolution_backward", dims, types, conc)
    assert c.flops == 2 * fwd == 124416
    conc[-1] = "[True, False, False]"
    assert cost("aten::convolution_backward", dims, types, conc).flops == fwd
    # grad_bias: no FLOPs counted (as FlopCounterMode), 6 output floats written
    conc[-1], conc[3] = "[False, False, True]", "[6]"
    c = cost("aten::convolution_backward", dims, types, conc)
    assert (c.flops, c.bytes) == (0, (2 * 6 * 9 * 8 + 2 * 4 * 17 * 15 + 6 * 4 * 9 + 6) * 4)


def test_attention():
    # q [2,3,16,8], k [2,3,12,8], v [2,3,12,4]: 2*b*h*Lq*Lk*(Dqk+Dv)
    dims = [[2, 3, 16, 8], [2, 3, 12, 8], [2, 3, 12, 4], [], [], [], [], []]
    types = [F32, F32, F32, "", "Scalar", "Scalar", "", "Scalar"]
    c = cost("aten::scaled_dot_product_attention", dims, types)
    assert c.flops == 2 * 2 * 3 * 16 * 12 * (8 + 4) == 27648
    assert c.bytes == (768 + 576 + 288 + 2 * 3 * 16 * 4) * 4
    # flash layout [B, S, H, D]
    c = cost(
        "aten::_flash_attention_forward", [[2, 16, 3, 8], [2, 12, 3, 8], [2, 12, 3, 8]], [BF16] * 3
    )
    assert (c.flops, c.precision) == (2 * 2 * 3 * 16 * 12 * 16, "bf16")
    # backward (torch.utils.flop_counter's sdpa_backward_flop_count): the recomputed scores
    # q·kᵀ and four more bmms: 2·b·h·Lq·Lk·(3·Dqk + 2·Dv) = 2.5× the forward with equal dims;
    # argument 0 is grad_out
    c = cost(
        "aten::_scaled_dot_product_flash_attention_backward",
        [[2, 3, 16, 8], [2, 3, 16, 8], [2, 3, 12, 8], [2, 3, 12, 8]],
        [F32] * 4,
    )
    bmm = 2 * (2 * 3) * 16 * 12 * 8  # one [16, 8] x [8, 12] product per batch and head
    assert c.flops == 5 * bmm == 2 * 2 * 3 * 16 * 12 * (3 * 8 + 2 * 8)


def test_elementwise_and_reductions():
    c = cost("aten::add", [[8, 64], [8, 64], []], [F32, F32, "Scalar"])
    assert (c.category, c.flops, c.bytes) == ("elementwise", 512, 3 * 512 * 4)
    c = cost("aten::mul", [[8, 64], [64]], [F32, F32])  # broadcast
    assert (c.flops, c.bytes) == (512, (512 + 64 + 512) * 4)
    c = cost("aten::add_", [[8, 64], [8, 64], []], [F32, F32, "Scalar"])  # in place: self r+w
    assert (c.flops, c.bytes) == (512, 3 * 512 * 4)
    assert cost("aten::addcmul", [[8, 64]] * 3 + [[]], [F32] * 3 + ["Scalar"]).flops == 1024
    c = cost("aten::gt", [[8, 64], []], [F32, "Scalar"])
    assert c.bytes == 512 * 4 + 512  # bool output
    c = cost(
        "aten::sum",
        [[8, 64], [], [], []],
        [F32, "ScalarList", "Scalar", ""],
        ["", "[1]", "False", ""],
    )
    assert (c.category, c.flops, c.bytes) == ("reduction", 512, (512 + 8) * 4)
    c = cost("aten::mean", [[8, 64], []], [F32, ""])
    assert (c.flops, c.bytes) == (512, (512 + 1) * 4)
    c = cost("aten::softmax", [[8, 64], [], []], [F32, "Scalar", ""], ["", "-1", ""])
    assert (c.flops, c.bytes) == (512, 2 * 512 * 4)


def test_normalization():
    # layer norm with weight and bias: stats 3 + normalise 2 + affine 2 = 7 per element
    c = cost(
        "aten::layer_norm",
        [[8, 64], [], [64], [64], [], []],
        [F32, "ScalarList", F32, F32, "Scalar", "Scalar"],
    )
    assert (c.category, c.flops) == ("normalization", 7 * 512)
    assert c.bytes == (512 + 64 + 64 + 512) * 4
    # batch norm(input, weight, bias, running_mean, running_var, training, ...): eval skips stats
    dims = [[4, 6, 5, 5], [6], [6], [6], [6], [], [], [], []]
    types = [F32] * 5 + ["Scalar"] * 4
    assert (
        cost("aten::batch_norm", dims, types, [""] * 5 + ["True", "0.1", "1e-05", "True"]).flops
        == 7 * 600
    )
    assert (
        cost("aten::batch_norm", dims, types, [""] * 5 + ["False", "0.1", "1e-05", "True"]).flops
        == 4 * 600
    )


def test_embedding_and_copies():
    c = cost(
        "aten::embedding",
        [[50, 16], [4, 7], [], [], []],
        ["float", "long int", "Scalar", "Scalar", "Scalar"],
    )
    # reads 28 rows of 16 floats and 28 indices, writes 28x16 floats
    assert (c.category, c.flops, c.bytes) == ("embedding", 0, 28 * 8 + 2 * 28 * 16 * 4)
    c = cost("aten::copy_", [[16, 4], [16, 4], []], [F32, BF16, "Scalar"])
    assert (c.category, c.flops, c.bytes) == ("copy", 0, 64 * 4 + 64 * 2)
    c = cost(
        "aten::_to_copy",
        [[8, 64], [], [], [], [], [], []],
        [F32, "Scalar", "", "", "", "Scalar", ""],
        ["", "15", "", "", "", "False", ""],
    )
    assert c.bytes == 512 * 4 + 512 * 2  # to bf16 (ScalarType 15)
    c = cost("aten::cat", [[[8, 64], [8, 64]], []], ["TensorList", "Scalar"], ["", "0"])
    assert c.bytes == 2 * 2 * 512 * 4


def test_unknown_ops_and_categories():
    assert cost("aten::max_pool2d", [[1, 2, 4, 4]], [F32]) is None
    assert cost("aten::mm", [], []) is None
    assert torch_flops.category_of("aten::max_pool2d") == "other"
    assert torch_flops.category_of("aten::view") == "view"
    assert torch_flops.category_of("c10d::allreduce_") == "communication"
    assert torch_flops.category_of("aten::cudnn_convolution") == "convolution"
    assert torch_flops.precision_of(["long int", "c10::Half"]) == "f16"


@pytest.mark.parametrize(
    "shapes,expected",
    [(((2, 1, 3), (4, 1)), (2, 4, 3)), (((3,), (2, 3)), (2, 3)), (((2, 3), (4, 3)), None)],
)
def test_broadcast(shapes, expected):
    assert torch_flops.broadcast(*shapes) == expected
