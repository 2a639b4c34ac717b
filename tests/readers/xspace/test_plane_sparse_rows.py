"""A TensorCore plane's row columns sent narrow and sparse (readers/xspace/tpu/plane.py
`_narrow`, `Sparse`) make the same host table as the dense int64 columns they stand for
(readers/xspace/tpu/file.py `_put`)."""

from __future__ import annotations

import copy
import glob
import os

import numpy as np

from tb_roofline.readers.xspace.tpu import file as tpu_file
from tb_roofline.readers.xspace.tpu import plane as tpu_plane

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
HOST = "testdata/demo/v6e_train/plugins/profile/*/*.xplane.pb"


def _planes():
    (path,) = glob.glob(os.path.join(REPO, HOST))
    plan = tpu_file.plan_file(path, "h")
    return plan, [tpu_file.convert_plane_at(path, s, e, c, plan.size) for c, s, e in plan.cores]


def _dense(rows: dict) -> dict:
    """The plane's columns as int64 arrays, every one whole."""
    out = {}
    for k, v in rows.items():
        if isinstance(v, tpu_plane.Sparse):
            col = (
                np.array(rows[v.like], np.int64) if v.like else np.zeros(len(rows["op"]), np.int64)
            )
            col[v.at] = v.values
            out[k] = col
        else:
            out[k] = None if v is None else np.asarray(v, np.int64)
    return out


def test_sparse_and_narrow_columns_merge_as_the_dense_ones():
    plan, results = _planes()
    assert any(isinstance(v, tpu_plane.Sparse) for r in results for v in r.rows.values())
    assert all(r.rows["op"].dtype == np.int32 for r in results)
    dense = copy.deepcopy(results)
    for r in dense:
        r.rows = _dense(r.rows)
    got = tpu_file.merge_planes(plan, results).ops
    want = tpu_file.merge_planes(plan, dense).ops
    assert got.rows.keys() == want.rows.keys()
    for k in want.rows:
        np.testing.assert_array_equal(got.rows[k], want.rows[k], err_msg=k)
        assert got.rows[k].dtype == want.rows[k].dtype, k


def test_a_column_that_differs_on_most_rows_stays_whole():
    time = np.arange(10, dtype=np.int64)
    mostly = time.copy()
    mostly[:8] += 1
    assert tpu_plane._sparse(mostly, time, "time") is mostly
    few = time.copy()
    few[3] = 0
    got = tpu_plane._sparse(few, time, "time")
    assert isinstance(got, tpu_plane.Sparse)
    assert got.at.tolist() == [3] and got.values.tolist() == [0] and got.like == "time"
    assert tpu_plane._sparse(np.zeros(10, np.int64), None, None).at.tolist() == []


def test_narrow_keeps_values_beyond_int32():
    wide = np.array([0, 2**31], np.int64)
    assert tpu_plane._narrow(wide) is wide
    assert tpu_plane._narrow(np.array([-(2**31), 2**31 - 1], np.int64)).dtype == np.int32
