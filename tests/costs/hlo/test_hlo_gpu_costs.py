"""GPU-only HLO costs, each against numbers derived by hand in the test: fused attention custom
calls (Transformer Engine, cuDNN), Triton gemm fusions' operand reads, collectives' bus bytes.

Attention FLOPs follow torch.utils.flop_counter's SDPA count: forward Q·Kᵀ + P·V =
2·B·H·Sq·Skv·(Dqk + Dv); backward 2·B·H·Sq·Skv·(3·Dqk + 2·Dv) (2.5× for Dqk = Dv); masks are
not discounted.
"""

from __future__ import annotations

import json

import pytest
from test_hlo_cost_model import HloBuilder, _cost, _single

from tb_roofline.costs.hlo.attention import attention_flops, attention_of
from tb_roofline.costs.hlo.collectives import transfer
from tb_roofline.costs.hlo.shapes import BF16, F32, U8
from tb_roofline.protos import hlo_pb2

SHAPE = HloBuilder.shape

# Transformer Engine, as JAX + TE writes it: an MLIR attribute dictionary.
TE_CONFIG = (
    b"{attn_heads = 16 : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, "
    b"bias_type = 0 : i64, deterministic = false, dropout_probability = 1.000000e-01 "
    b": f64, input_batch = 2 : i64, is_training = true, kv_max_seqlen = 2048 : i64, "
    b"mask_type = 2 : i64, max_segments_per_seq = 1 : i64, num_gqa_groups = 16 : i64, "
    b"q_max_seqlen = 2048 : i64, qk_head_dim = 128 : i64, qkv_layout = 5 : i64, "
    b"scaling_factor = 0.0883883461 : f64, v_head_dim = 128 : i64, "
    b"window_size_left = -1 : i64, window_size_right = -1 : i64}"
)
# 4·B·H·Sq·Skv·D = 4 × 2 × 16 × 2048 × 2048 × 128, worked out by hand:
# 2 × 16 = 32; 2048 × 2048 = 4,194,304; × 128 = 536,870,912; × 32 = 17,179,869,184; × 4.
TE_FORWARD_FLOPS = 68_719_476_736
TE_BACKWARD_FLOPS = 171_798_691_840  # × 2.5
QKV_BYTES = 2 * 2048 * 3 * 16 * 128 * 2  # bf16[2, 2048, 3, 16, 128] = 50,331,648
OUT_BYTES = 2 * 2048 * 16 * 128 * 2  # bf16[2, 2048, 16, 128] = 16,777,216
STATS_BYTES = 2 * 16 * 2048 * 4  # f32[2, 16, 2048, 1] = 262,144


def _te(target, operands, results):
    out = SHAPE(0, tuple_shapes=[SHAPE(*r) for r in results])
    return _single(
        "custom-call", out, operands, custom_call_target=target, backend_config=TE_CONFIG
    )


def test_te_fused_attention_forward():
    m = _te(
        "te_fused_attn_forward_ffi",
        [(BF16, (2, 2048, 3, 16, 128))],
        [(BF16, (2, 2048, 16, 128)), (F32, (2, 16, 2048, 1)), (U8, (1 << 20,))],
    )
    c, model = _cost(m, "op")
    assert c.flops == TE_FORWARD_FLOPS
    assert c.read == QKV_BYTES and c.written == OUT_BYTES + STATS_BYTES  # workspace left out
    assert (c.category, c.precision) == ("attention", "bf16") and not model.unknown
    att = attention_of(m.by_name["op"])
    assert att.mask == "causal" and not att.backward
    assert _cost(m, "op", xla_compatible=True)[0].flops == -1


def test_te_fused_attention_backward_is_2_5_times_the_forward():
    # Operands: qkv, softmax stats, rng state, output, d_output; results: d_qkv, workspace.
    ops = [
        (BF16, (2, 2048, 3, 16, 128)),
        (F32, (2, 16, 2048, 1)),
        (U8, (16,)),
        (BF16, (2, 2048, 16, 128)),
        (BF16, (2, 2048, 16, 128)),
    ]
    m = _te("te_fused_attn_backward_ffi", ops, [(BF16, (2, 2048, 3, 16, 128)), (U8, (4096,))])
    c, _ = _cost(m, "op")
    assert c.flops == TE_BACKWARD_FLOPS == 2.5 * TE_FORWARD_FLOPS
    assert c.read == QKV_BYTES + STATS_BYTES + 16 + 2 * OUT_BYTES
    assert c.written == QKV_BYTES


def test_te_attention_with_gqa_window_and_different_head_dims():
    cfg = (
        b"{attn_heads = 32 : i64, input_batch = 1 : i64, kv_max_seqlen = 1024 : i64, "
        b"mask_type = 0 : i64, num_gqa_groups = 8 : i64, q_max_seqlen = 512 : i64, "
        b"qk_head_dim = 192 : i64, v_head_dim = 128 : i64, window_size_left = 256 : i64, "
        b"window_size_right = 0 : i64}"
    )
    m = _single(
        "custom-call",
        (BF16, (1, 512, 32, 128)),
        [(BF16, (1, 512, 32, 192))],
        custom_call_target="te_fused_attn_forward_ffi",
        backend_config=cfg,
    )
    c, _ = _cost(m, "op")
    # 2·B·H·Sq·Skv·(Dqk + Dv) = 2 × 32 × 512 × 1024 × 320 (query heads; GQA shares K/V only)
    assert c.flops == 2 * 32 * 512 * 1024 * (192 + 128) == 10_737_418_240
    assert attention_of(m.by_name["op"]).mask == "window (256, 0)"


def test_te_attention_without_sizes_is_reported_not_guessed():
    m = _single(
        "custom-call",
        (BF16, (4,)),
        [(BF16, (4,))],
        custom_call_target="te_fused_attn_forward_ffi",
        backend_config=b"{}",
    )
    c, model = _cost(m, "op")
    assert c.flops == 0 and model.unknown == {"custom-call te_fused_attn_forward_ffi": 1}


def _dn(lb, lc, rb, rc):
    return {
        "lhs_batch_dimensions": [str(x) for x in lb],
        "lhs_contracting_dimensions": [str(x) for x in lc],
        "rhs_batch_dimensions": [str(x) for x in rb],
        "rhs_contracting_dimensions": [str(x) for x in rc],
    }


def test_cudnn_fmha_forward_from_its_dot_dimension_numbers():
    # Q, K, V as [B, S, H, D] = [4, 256, 8, 64]; bmm1 = Q·Kᵀ over D with batch (B, H);
    # bmm2 = P·V over Skv. Operand 3 is a bias; result: output and workspace.
    cfg = {
        "cudnn_fmha_backend_config": {
            "bmm1_dot_dimension_numbers": _dn((0, 2), (3,), (0, 2), (3,)),
            "bmm2_dot_dimension_numbers": _dn((0, 1), (3,), (0, 2), (1,)),
            "mask_type": "CAUSAL",
        }
    }
    qkv = (BF16, (4, 256, 8, 64))
    out = SHAPE(0, tuple_shapes=[SHAPE(BF16, (4, 256, 8, 64)), SHAPE(U8, (0,))])
    m = _single(
        "custom-call",
        out,
        [qkv, qkv, qkv],
        custom_call_target="__cudnn$fmhaSoftmax",
        backend_config=json.dumps(cfg).encode(),
    )
    c, _ = _cost(m, "op")
    # 4·B·H·S·S·D = 4 × 4 × 8 × 256 × 256 × 64
    assert c.flops == 4 * 4 * 8 * 256 * 256 * 64 == 536_870_912
    assert c.read == 3 * 4 * 256 * 8 * 64 * 2 and c.written == 4 * 256 * 8 * 64 * 2
    assert attention_of(m.by_name["op"]).mask == "causal"


def test_cudnn_fmha_backward_from_the_gradient_gemms():
    # Sq = 128, Skv = 512, D = 64, B·H = 2·4, layout [B, H, S, D].
    cfg = {
        "cudnn_fmha_backend_config": {
            "bmm1_grad_gemm1_dot_dimension_numbers": _dn((0, 1), (2,), (0, 1), (2,)),  # dSᵀ·Q
            "bmm1_grad_gemm2_dot_dimension_numbers": _dn((0, 1), (3,), (0, 1), (2,)),  # dS·K
            "bmm2_grad_gemm1_dot_dimension_numbers": _dn((0, 1), (2,), (0, 1), (2,)),
            "bmm2_grad_gemm2_dot_dimension_numbers": _dn((0, 1), (3,), (0, 1), (3,)),
        }
    }  # dO·Vᵀ
    q, kv = (BF16, (2, 4, 128, 64)), (BF16, (2, 4, 512, 64))
    out = SHAPE(0, tuple_shapes=[SHAPE(*q), SHAPE(*kv), SHAPE(*kv), SHAPE(U8, (0,))])
    m = _single(
        "custom-call",
        out,
        [q, kv, kv, (F32, (2, 4, 128, 1)), q],
        custom_call_target="__cudnn$fmhaSoftmaxBackward",
        backend_config=json.dumps(cfg).encode(),
    )
    c, _ = _cost(m, "op")
    # 2·(B·H)·Sq·Skv·(3·Dqk + 2·Dv) = 2 × 8 × 128 × 512 × 320
    assert c.flops == 2 * 8 * 128 * 512 * 320 == 335_544_320
    assert attention_flops(2, 4, 128, 512, 64, 64, True) == c.flops


def test_triton_gemm_fusion_reads_its_operands():
    """The generic Triton emitter wraps each gemm operand in a pass-through nested fusion
    (`ROOT p = parameter(0)`): the fusion still reads both operands (XProf counts them)."""
    b = HloBuilder("jit_gemm")
    tiles = []
    for i, dims in enumerate(((8192, 2560), (2560, 6144))):
        comp = b.computation(f"tile_{i}", fusion=True)
        b.param("t", (BF16, dims), 0)
        tiles.append(comp)
    gemm = b.computation("gemm_fusion_dot.5_computation", fusion=True)
    p0 = b.param("p0", (BF16, (8192, 2560)), 0)
    p1 = b.param("p1", (BF16, (2560, 6144)), 1)
    cfg = b'{"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion"}}'
    f0 = b.add(
        "block_fusion",
        "fusion",
        (BF16, (8192, 2560)),
        [p0],
        [tiles[0]],
        fusion_kind="kCustom",
        backend_config=cfg,
    )
    f1 = b.add(
        "block_fusion.1",
        "fusion",
        (BF16, (2560, 6144)),
        [p1],
        [tiles[1]],
        fusion_kind="kCustom",
        backend_config=cfg,
    )
    dn = hlo_pb2.DotDimensionNumbers(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
    b.add("dot", "dot", (F32, (8192, 6144)), [f0, f1], dot_dimension_numbers=dn)
    entry = b.computation("main")
    a = b.param("a", (BF16, (8192, 2560)), 0)
    w = b.param("w", (BF16, (2560, 6144)), 1)
    b.add(
        "gemm_fusion_dot.5",
        "fusion",
        (F32, (8192, 6144)),
        [a, w],
        [gemm],
        fusion_kind="kCustom",
        backend_config=b'{"fusion_backend_config":{"kind":"__triton_gemm"}}',
    )
    m = b.build(entry)
    c, _ = _cost(m, "gemm_fusion_dot.5", gpu=True)
    out = 8192 * 6144 * 4  # 201,326,592: all the fusion counted before
    reads = 8192 * 2560 * 2 + 2560 * 6144 * 2  # 41,943,040 + 31,457,280
    assert c.written == out and c.read == reads
    assert c.bytes == 274_726_912
    assert c.flops == 2 * 8192 * 6144 * 2560 and c.category == "convolution fusion"


def _collective(opcode, out, operands, groups=None, **fields):
    if groups is not None:
        fields["replica_groups"] = [hlo_pb2.ReplicaGroup(replica_ids=g) for g in groups]
    return _single(opcode, out, operands, **fields).by_name["op"]


@pytest.mark.parametrize(
    "opcode,out,factor",
    [
        ("all-reduce", (F32, (1024, 256)), 2 * 3 / 4),
        ("all-reduce-start", (F32, (1024, 256)), 2 * 3 / 4),
        ("reduce-scatter", (F32, (256, 256)), 3 / 4),
        ("all-to-all", (F32, (1024, 256)), 3 / 4),
        ("collective-permute", (F32, (1024, 256)), 1.0),
    ],
)
def test_collective_bus_bytes_as_nccl_tests(opcode, out, factor):
    ins = _collective(opcode, out, [(F32, (1024, 256))], groups=[[0, 1, 2, 3], [4, 5, 6, 7]])
    t = transfer(ins, devices=8)
    assert t.message_bytes == 1024 * 256 * 4 and t.group == 4 and t.group_known
    assert t.bus_bytes == pytest.approx(1024 * 256 * 4 * factor)


def test_all_gather_message_is_the_gathered_result():
    ins = _collective("all-gather", (F32, (64, 128)), [(F32, (8, 128))], groups=[list(range(8))])
    t = transfer(ins, devices=2)
    # S = the gathered f32[64, 128] = 8 operands of f32[8, 128]; bus = S × 7/8
    assert (t.message_bytes, t.bus_bytes) == (64 * 128 * 4, 64 * 128 * 4 * 7 / 8)


def test_iota_groups_and_no_groups():
    iota = hlo_pb2.IotaReplicaGroupListProto(
        num_replica_groups=2,
        num_devices_per_group=2,
        iota_reshape_dims=[4],
        iota_transpose_perm=[0],
    )
    ins = _collective(
        "all-reduce",
        (F32, (100,)),
        [(F32, (100,))],
        collective_device_list=hlo_pb2.CollectiveDeviceListProto(iota_replica_group_list=iota),
    )
    t = transfer(ins, devices=8)
    assert (t.group, t.group_known, t.bus_bytes) == (2, True, 400 * 2 * 1 / 2)
    t = transfer(_collective("all-reduce", (F32, (100,)), [(F32, (100,))]), devices=8)
    assert (t.group, t.group_known, t.bus_bytes) == (8, False, 400 * 2 * 7 / 8)


def test_done_halves_and_other_ops_move_nothing_over_links():
    start = _collective("all-reduce-start", (F32, (100,)), [(F32, (100,))])
    b = HloBuilder()
    entry = b.computation("main")
    x = b.param("x", (F32, (100,)), 0)
    s = b.add("s", "all-reduce-start", (F32, (100,)), [x])
    b.add("op", "all-reduce-done", (F32, (100,)), [s])
    m = b.build(entry)
    assert transfer(m.by_name["op"], 8) is None and transfer(start, 8) is not None
    assert (
        transfer(_single("add", (F32, (4,)), [(F32, (4,)), (F32, (4,))]).by_name["op"], 8) is None
    )


def test_cudnn_fmha_with_dimension_numbers_outside_its_operands_is_reported():
    cfg = {
        "cudnn_fmha_backend_config": {
            "bmm1_dot_dimension_numbers": _dn((0, 7), (3,), (0, 2), (3,)),
            "bmm2_dot_dimension_numbers": _dn((0, 1), (-1,), (0, 2), (1,)),
        }
    }
    qkv = (BF16, (4, 256, 8, 64))
    m = _single(
        "custom-call",
        qkv,
        [qkv, qkv, qkv],
        custom_call_target="__cudnn$fmhaSoftmax",
        backend_config=json.dumps(cfg).encode(),
    )
    c, model = _cost(m, "op")
    assert c.flops == 0 and model.unknown == {"custom-call __cudnn$fmhaSoftmax": 1}
