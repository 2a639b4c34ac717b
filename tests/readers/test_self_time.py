"""Self time has one definition (`readers/self_time.self_time`): the XSpace path (begin and
duration, `self_time.self_times`) and the Kineto / XLA GPU-CPU path (parents from
`common.op_nesting`, `common.self_times`) give the same times, hand-derived here, including
direct children that overlap each other (their overlap counted twice would go below 0)."""

from __future__ import annotations

import numpy as np

from tb_roofline.readers import common, self_time

# P [0, 20) holds A [0, 15) and B [5, 20) (overlapping siblings) and C [30, 40) holds D [32, 35)
BEGIN = np.array([0, 0, 5, 30, 32])
DUR = np.array([20, 15, 15, 10, 3])
WANT = {0: 0, 1: 15, 2: 15, 3: 7, 4: 3}  # P: 20 - 15 - 15 < 0 -> 0; C: 10 - 3


def _by_event(order, selft):
    return {int(i): int(s) for i, s in zip(order, selft)}


def test_both_paths_give_the_one_definition():
    assert _by_event(*self_time.self_times(BEGIN, DUR)) == WANT
    assert _by_event(*self_time.self_times_by_stack(BEGIN, DUR)) == WANT
    order, parent = common.op_nesting(np.zeros(len(BEGIN), np.int64), BEGIN, DUR)
    got = common.self_times(parent, DUR[order])
    assert _by_event(order, got) == WANT


def test_the_definition():
    got = self_time.self_time(np.array([20, 10, 5]), np.array([30, 3, 0]))
    assert got.tolist() == [0, 7, 5]
