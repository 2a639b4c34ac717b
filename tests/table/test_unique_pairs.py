"""`unique_pairs` is numpy's row-wise unique, order and inverse included, on the shapes the
timeline's adjacent pairs take (empty, one row, repeats, codes using all 64 bits)."""

from __future__ import annotations

import numpy as np
import pytest

from tb_roofline.table.timeline_builder import unique_pairs


@pytest.mark.parametrize("n", [0, 1, 7, 5000])
def test_rows_as_numpy_unique_gives_them(n):
    rng = np.random.default_rng(n)
    codes = rng.integers(0, 9, (n, 2)).astype(np.int64) << 32 | rng.integers(0, 3, (n, 2))
    if n:
        codes[0] = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
    want, want_inv = np.unique(codes, axis=0, return_inverse=True)
    got, got_inv = unique_pairs(codes)
    np.testing.assert_array_equal(got, want.reshape(-1, 2))
    np.testing.assert_array_equal(got_inv, want_inv.reshape(-1))
