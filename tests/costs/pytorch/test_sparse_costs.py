"""MoE expert GEMMs, grouped GEMMs and embedding bags: each formula of
costs/torch/sparse_ops.py pinned by a hand-derived count, through the Kineto reader's entry
(torch_custom_ops.op_cost, as a `cpu_op` event's args give it)."""

from __future__ import annotations

import pytest

from tb_roofline.costs.torch import custom_ops as torch_custom_ops
from tb_roofline.costs.torch.sparse_ops import experts_touched

BF16, F32, S64, S32 = "c10::BFloat16", "float", "long int", "int"


def _cost(name, dims, types, concrete=None):
    args = {"Input Dims": dims, "Input type": types}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    return torch_custom_ops.op_cost(name, args)


def test_fused_experts_by_hand():
    """vllm::outplace_fused_experts(hidden [T=8, H=16], w1 [E=4, 2N=12, H], w2 [E, H, N=6],
    topk_weights [8, 2] f32, topk_ids [8, 2] s32): 8 tokens × 2 experts each.
    FLOPs: per routed token 2·12·16 (w1) + 2·16·6 (w2) = 384 + 192 = 576; × 16 = 9,216.
    Bytes: hidden 8·16·2 = 256 read, output 256 written, ids 8·2·4 = 64, weights 64; experts
    touched min(4, 16) = 4, all weights: w1 4·12·16·2 = 1,536, w2 4·16·6·2 = 768.
    Total 256 + 256 + 64 + 64 + 1,536 + 768 = 2,944."""
    c = _cost(
        "vllm::outplace_fused_experts",
        [[8, 16], [4, 12, 16], [4, 16, 6], [8, 2], [8, 2]],
        [BF16, BF16, BF16, F32, S32],
    )
    assert c.flops == 9216 and c.bytes == 2944
    assert c.category == "matmul" and c.precision == "bf16" and c.source == "formula"


def test_few_tokens_touch_few_experts():
    """One token, top-2 of 4 experts: the weights of 2 experts are read, not 4.
    FLOPs 2·1·2·(12·16 + 16·6) = 1,152; bytes 2·32 (hidden in, out) + 8 (ids) + 8 (weights)
    + (1,536 + 768)·2/4 = 1,152 → 80 + 1,152 = 1,232."""
    c = _cost(
        "vllm::inplace_fused_experts",
        [[1, 16], [4, 12, 16], [4, 16, 6], [1, 2], [1, 2]],
        [BF16, BF16, BF16, F32, S32],
    )
    assert c.flops == 1152 and c.bytes == 1232
    assert experts_touched(1, 2, 4) == 2 and experts_touched(100, 2, 4) == 4


def test_moe_forward_without_weights_has_no_cost():
    """vllm::moe_forward(hidden [888, 3072], router logits [888, 128], layer) as the B200 trace
    records it: no expert weights, no top-k, so no formula applies (no guessed model config)."""
    assert _cost("vllm::moe_forward", [[888, 3072], [888, 128], []], [BF16, BF16, ""]) is None
    # mismatched hidden sizes: not a MoE layer this formula knows
    assert (
        _cost(
            "vllm::outplace_fused_experts",
            [[8, 16], [4, 12, 15], [4, 16, 6], [8, 2]],
            [BF16, BF16, BF16, S32],
        )
        is None
    )


def test_grouped_mm_by_hand():
    """_grouped_mm(a [M=10, K=8], b [G=3, K, N=4], offs [3] s32): 2·10·8·4 = 640 FLOPs;
    bytes a 160 + b 192 + offs 12 + out [10, 4] 80 = 444. 3-D × 3-D: [3, 5, 8] × [3, 8, 4]:
    2·3·5·8·4 = 960 FLOPs; bytes 240 + 192 + out 3·5·4·2 = 120 → 552."""
    c = _cost("aten::_grouped_mm", [[10, 8], [3, 8, 4], [3], [], []], [BF16, BF16, S32, "", ""])
    assert (c.flops, c.bytes, c.category, c.precision) == (640, 444, "matmul", "bf16")
    c = _cost("aten::_grouped_mm", [[3, 5, 8], [3, 8, 4], [], [], []], [BF16, BF16, "", "", ""])
    assert (c.flops, c.bytes) == (960, 552)


def test_embedding_bag_by_hand():
    """embedding_bag(weight [1000, 16] f32, indices [40] s64, offsets [9] s64, False, mode 0,
    False, None, include_last_offset True): 8 bags, 40 rows read.
    Bytes: rows 40·16·4 = 2,560; indices 320; offsets 72; output 8·16·4 = 512 → 3,464 (the
    64,000-byte table is not read whole). FLOPs 0 (sum pooling has no products)."""
    dims = [[1000, 16], [40], [9], [], [], [], [], [], []]
    types = [F32, S64, S64, "Scalar", "Scalar", "Scalar", "", "Scalar", "Scalar"]
    c = _cost(
        "aten::embedding_bag", dims, types, ["", "", "", "False", "0", "False", "", "True", "-1"]
    )
    assert (c.flops, c.bytes, c.category, c.precision) == (0, 3464, "embedding", "f32")
    # include_last_offset False: 9 bags → output 9·16·4 = 576 → 3,528
    assert (
        _cost(
            "aten::_embedding_bag",
            dims,
            types,
            ["", "", "", "False", "0", "False", "", "False", "-1"],
        ).bytes
        == 3528
    )
    # per-sample weights [40] f32: 40·16 multiplies, 160 more bytes
    dims2 = dims[:6] + [[40]] + dims[7:]
    c = _cost(
        "aten::embedding_bag",
        dims2,
        types[:6] + [F32] + types[7:],
        ["", "", "", "False", "0", "False", "", "True", "-1"],
    )
    assert (c.flops, c.bytes) == (640, 3624)
    # 2-D indices [B=5, L=3] (fixed bags): 15 rows 960 + idx 120 + out 5·16·4 = 320 → 1,400
    c = _cost(
        "aten::embedding_bag",
        [[1000, 16], [5, 3], [0], [], []],
        [F32, S64, S64, "Scalar", "Scalar"],
    )
    assert c.bytes == pytest.approx(960 + 120 + 320)


E4M3, FP4X2 = "c10::Float8_e4m3fn", "c10::Float4_e2m1fn_x2"


def test_scaled_grouped_mm_and_packed_fp4_by_hand():
    """_scaled_grouped_mm(a [M=10, K=8] e4m3, b [G=3, K, N=4] e4m3, scale_a [10] f32,
    scale_b [3, 4] f32, offs [3] s32, None, None, out_dtype 15 = bf16): 2·10·8·4 = 640 FLOPs;
    bytes a 80 + b 96 + scales 40 + 48 + offs 12 + out [10, 4] bf16 80 = 356.
    _scaled_mm(a [2, 16] fp4x2, b [16, 3] fp4x2, e8m0 scales [2, 1] and [1, 3], out_dtype
    bf16): two fp4 values per recorded element, K = 32: 2·2·32·3 = 384 FLOPs; bytes a 32 +
    b 48 + scales 2 + 3 + out 12 = 97. An out_dtype code not in the table: no cost."""
    dims = [[10, 8], [3, 8, 4], [10], [3, 4], [3], [], [], [], []]
    types = [E4M3, E4M3, F32, F32, S32, "", "", "Scalar", "Scalar"]
    conc = ["", "", "", "", "", "", "", "15", "False"]
    c = _cost("aten::_scaled_grouped_mm", dims, types, conc)
    assert (c.flops, c.bytes, c.category, c.precision) == (640, 356, "matmul", "f8e4m3")
    e8m0 = "c10::Float8_e8m0fnu"
    dims = [[2, 16], [16, 3], [2, 1], [1, 3], [], [], [], []]
    types = [FP4X2, FP4X2, e8m0, e8m0, "", "", "Scalar", "Scalar"]
    conc = ["", "", "", "", "", "", "15", "False"]
    c = _cost("aten::_scaled_mm", dims, types, conc)
    assert (c.flops, c.bytes, c.precision) == (384, 97, "f4e2m1")
    assert _cost("aten::_scaled_mm", dims, types, conc[:6] + ["99", "False"]) is None


def test_scaled_mm_without_concrete_inputs_is_not_costed():
    """Without `Concrete Inputs` the out_dtype is unknown, so is the output's size: no cost
    (never the input type guessed); recorded empty (None passed), the output is in a's type."""
    dims = [[16, 32], [32, 8], [], [], [], [], [], []]
    types = [E4M3, E4M3, F32, F32, "", "", "Scalar", "Scalar"]
    assert _cost("aten::_scaled_mm", dims, types) is None
    c = _cost("aten::_scaled_mm", dims, types, [""] * 6 + ["", "False"])
    assert (c.flops, c.bytes) == (2 * 16 * 32 * 8, 16 * 32 + 32 * 8 + 8 + 16 * 8)


def test_scaled_mm_v2_scales_sized_by_their_recipe():
    """_scaled_mm_v2(a [16, 64] e4m3, b [64, 32] e4m3, scale_a [[16, 2]], recipe [3] =
    BlockWise1x32 (e8m0 scales, 1 B), [], scale_b [[32, 2]], [3], [], None, 15 = bf16, [],
    False): 2·16·64·32 = 65,536 FLOPs; bytes a 1,024 + b 2,048 + scales 32 + 64 + out
    16·32·2 = 1,024 → 4,192. Tensorwise recipes (0) are fp32 scalars: 4 B each. A
    contraction_dim other than [] or an unknown recipe: no cost."""
    dims = [[16, 64], [64, 32], [[16, 2]], [], [], [[32, 2]], [], [], [], [], [], []]
    types = [E4M3, E4M3, "TensorList", "ScalarList", "ScalarList", "TensorList"]
    types += ["ScalarList", "ScalarList", "", "Scalar", "ScalarList", "Scalar"]
    conc = ["", "", "", "[3]", "[]", "", "[3]", "[]", "", "15", "[]", "False"]
    c = _cost("aten::_scaled_mm_v2", dims, types, conc)
    assert (c.flops, c.bytes, c.category, c.precision) == (65536, 4192, "matmul", "f8e4m3")
    tensorwise = dims[:2] + [[[]], [], [], [[]]] + dims[6:]
    c = _cost(
        "aten::_scaled_mm_v2", tensorwise, types, conc[:3] + ["[0]", "[]", "", "[0]"] + conc[7:]
    )
    assert c.bytes == 1024 + 2048 + 4 + 4 + 1024
    assert _cost("aten::_scaled_mm_v2", dims, types, conc[:10] + ["[0]", "False"]) is None
    assert _cost("aten::_scaled_mm_v2", dims, types, conc[:3] + ["[9]"] + conc[4:]) is None
