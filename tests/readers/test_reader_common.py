"""The shared reader rules (tb_roofline/readers/common.py) against hand-made cases."""

import collections

import numpy as np
import pytest

from tb_roofline.readers import common


def test_nesting_self_times_and_enclosing_ops_from_one_walk():
    # thread 0: A [0,10) holds B [1,4) holds C [2,3); D [5,9). thread 1: E [0,10).
    thread = np.array([0, 0, 0, 0, 1])
    begin = np.array([0, 1, 2, 5, 0.0])
    dur = np.array([10, 3, 1, 4, 10.0])
    order, parent = common.op_nesting(thread, begin, dur)
    assert parent.tolist() == [-1, 0, 1, 0, -1]
    assert common.self_times(parent, dur).tolist() == [3, 2, 1, 4, 10]
    got = common.innermost_enclosing(
        order,
        parent,
        thread,
        begin,
        begin + dur,
        [0, 0, 1, 0, 2],
        [2.5, 6, 3, 9.5, 1],
        [2.6, 7, 4, 9.6, 2],
    )
    assert got.tolist() == [2, 3, 4, 0, -1]


def test_group_sums_follow_first_appearance():
    codes, first = common.group_codes(["a", "b", "a", "c"], [1, 1, 1, 2])
    assert codes.tolist() == [0, 1, 0, 2] and first.tolist() == [0, 1, 3]
    sums = common.group_sums(codes, 3, t=[1, 2, 3, 4])
    assert sums["t"].tolist() == [4, 2, 4]


def test_the_longest_marker_of_a_step_wins_the_first_of_equal_ones():
    s, b, d = common.longest_markers(
        [2, 1, 2, 2, -1], [10, 0, 20, 30, 5], [5, 3, 7, 7, 99], skip=-1
    )
    assert s.tolist() == [1, 2] and b.tolist() == [0, 20] and d.tolist() == [3, 7]


def test_the_gemm_kernel_decides_the_precision_not_a_longer_split_k_reduction():
    names = [
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
        "void splitKreduce_kernel<32, 16, int, float, float>(...)",
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
    ]
    units = common.kernel_unit_labels(names)
    assert units.tolist() == ["kernel:tf32", "", "kernel:bf16"]
    got = common.longest_matmul_unit([0, 0, 1, -1], [1.0, 9.0, 2.0, 5.0], np.r_[units, units[:1]])
    assert got == {0: "kernel:tf32", 1: "kernel:bf16"}
    assert common.longest_kernel_unit({names[0]: 1.0, names[1]: 9.0}) == "kernel:tf32"
    assert common.longest_kernel_unit({names[1]: 9.0}) == ""


def test_corrupt_value_notes():
    fixes = collections.Counter(negative_durations=2, negative_costs=1)
    codes = [n.code for n in common.corrupt_value_notes(fixes)]
    assert codes == ["negative_durations", "negative_costs"]


@pytest.mark.parametrize(
    "name,unit",
    [
        # NVIDIA/CUTLASS FP4 (E2M1) and FP8 block-scaled GEMMs, FP6, and the older rules.
        ("nvjet_sm100_tst_128x256_64x4_2x1_v_bz_e2m1_e2m1_bf16", "fp4"),
        ("cutlass3x_sm100_bstensorop_s256x128x64gemm_block_scaled_ue4m3xe2m1_ue4m3xe2m1", "fp4"),
        ("sm100_xmma_gemm_mxfp6_e3m2", "fp6"),
        ("sm90_xmma_gemm_e4m3e4m3_e4m3_f32_tn_n_tilesize128x128x128", "fp8"),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn", "bf16"),
        ("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4", "tf32"),
        ("ampere_sgemm_128x64_nn", "fp32"),
    ],
)
def test_kernel_names_say_the_unit(name, unit):
    from tb_roofline.readers import kernel_names

    assert kernel_names.kernel_unit(name) == unit


def _nesting_by_stack(thread, begin, dur):
    """The definition, one op at a time: sorted by (thread, begin, -duration), each op's
    parent is the innermost open op of its thread that contains it."""
    thread, begin, dur = np.asarray(thread), np.asarray(begin), np.asarray(dur)
    order = np.lexsort((-dur, begin, thread))
    par = [-1] * len(begin)
    stack, current = [], None
    for i in order.tolist():
        if thread[i] != current:
            stack, current = [], thread[i]
        while stack and not (
            begin[i] >= begin[stack[-1]] and begin[i] + dur[i] <= begin[stack[-1]] + dur[stack[-1]]
        ):
            stack.pop()
        if stack:
            par[i] = stack[-1]
        stack.append(i)
    return order, np.asarray(par, np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_nesting_is_the_stack_walk(seed):
    """op_nesting (vectorised: threads laid end to end, self_time.parents) nests exactly as
    the stack walk: random ops on a few threads, ties, zero and negative durations (the Kineto
    reader keeps them: none may reach into another thread), epoch-ns times, times near 2^62
    (no shifting then) and nesting too deep to peel."""
    rng = np.random.default_rng(seed)
    for trial in range(300):
        n, threads = int(rng.integers(0, 60)), int(rng.integers(1, 4))
        thread = rng.integers(0, threads, n)
        begin = rng.integers(0, 50, n) * int(rng.choice([1, 10**6]))
        begin += [0, 1_795_971_109_908_564_283, (1 << 62) - 10**9][trial % 3]
        dur = rng.integers(-8 if trial % 2 else 0, 30, n)
        for got, want in zip(
            common.op_nesting(thread, begin, dur), _nesting_by_stack(thread, begin, dur)
        ):
            assert got.tolist() == want.tolist()
    deep = np.arange(400)
    for got, want in zip(
        common.op_nesting(np.zeros(400, int), deep, 800 - 2 * deep),
        _nesting_by_stack(np.zeros(400, int), deep, 800 - 2 * deep),
    ):
        assert got.tolist() == want.tolist()
