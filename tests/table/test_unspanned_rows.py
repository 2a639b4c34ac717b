"""Which rows ran on a device with no core span (`table/unspanned.py` `unspanned_rows`): the
rows whose core is not among the profile's core spans, for small, sparse, negative and huge core
numbers and a constant core column, against membership worked out here in Python."""

from __future__ import annotations

import types

import numpy as np
import pytest

from tb_roofline.table.op_table import constant
from tb_roofline.table.spans import CoreSpan
from tb_roofline.table.unspanned import unspanned_rows as off_program_rows


def _profile(core: np.ndarray, spans: list):
    ops = types.SimpleNamespace(rows={"core": core})
    return types.SimpleNamespace(ops=ops, core_spans=[CoreSpan("h", c, 0, 1) for c in spans])


@pytest.mark.parametrize(
    ("core", "spans"),
    [
        (np.array([0, 1, 2, 3, 1, 0]), [0, 1, 2, 3]),  # every row on a spanned core
        (np.array([0, 5, 2, 7, 5]), [0, 2]),  # rows on cores 5 and 7 ran no program
        (np.array([3, 3, 4]), [0, 1, 9]),  # spans beyond the rows' cores
        (np.array([-1, 0, 2]), [0]),  # a negative core number
        (np.array([0, 2**40, 1]), [1, 2**40]),  # a huge one
        (constant(np.int64(2), 1000), [2]),
        (constant(np.int64(2), 1000), [0, 1]),
    ],
)
def test_off_program_rows_are_the_rows_of_unspanned_cores(core, spans):
    got = off_program_rows(_profile(core, spans))
    want = [int(c) not in set(spans) for c in np.asarray(core).tolist()]
    assert got.dtype == bool and got.tolist() == want


def test_no_spans_or_rows_mark_nothing():
    assert off_program_rows(_profile(np.array([0, 1]), [])).tolist() == [False, False]
    assert off_program_rows(_profile(np.zeros(0, np.int64), [0])).tolist() == []
