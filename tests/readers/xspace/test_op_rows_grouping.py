"""`op_rows.Grouping` by sorting (ranges too wide for a dense table): rows of distinct
(metadata id, group) pairs in ascending order and exact sums per row, against a plain Python
dictionary; with ranges that fit one int64 key and ranges that do not."""

from __future__ import annotations

import numpy as np
import pytest

from tb_roofline.readers.xspace.op_rows import Grouping


def _reference(md, group, w):
    sums: dict = {}
    for m, g, x in zip(md.tolist(), group.tolist(), w.tolist()):
        sums[(m, g)] = sums.get((m, g), 0) + x
    pairs = sorted(sums)
    return [p[0] for p in pairs], [p[1] for p in pairs], [sums[p] for p in pairs]


@pytest.mark.parametrize(
    ("md_range", "group_range"),
    [
        ((0, 400), (-1, 200_000)),  # one key per pair
        ((5, 9), (-(2**40), 2**40)),  # a wide but keyable range
        ((0, 2**40), (-(2**40), 2**40)),  # too wide for one key: sorted as pairs
    ],
)
def test_sorted_grouping_matches_a_dictionary(md_range, group_range):
    rng = np.random.default_rng(1)
    n = 5000
    md = rng.integers(*md_range, n)
    group = rng.integers(*group_range, n)
    dup = rng.integers(0, n, n // 2)  # repeated pairs, so rows gather several events
    md[: n // 2], group[: n // 2] = md[dup], group[dup]
    w = rng.integers(-(10**12), 10**12, n)
    g = Grouping(md, group)
    assert g.key is None  # the dense table is too large: the sorting path
    want_md, want_group, want_sum = _reference(md, group, w)
    assert g.md.tolist() == want_md and g.group.tolist() == want_group
    assert g.sum(w).tolist() == want_sum
    assert g.sum(None) is None
