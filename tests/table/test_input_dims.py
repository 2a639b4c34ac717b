"""The op table's `input_dims` key column (table/op_table.py): a tuple per key (None unknown)
that stays one value through every way a table is built, cut, joined and sent (worker and
cluster pickles, the disk cache's codec, the strings shared across hosts), and that readers
without recorded shapes leave None."""

from __future__ import annotations

import glob
import os
import pickle

import numpy as np
from testpaths import TESTS

from tb_roofline.serve.caches.codec import decode, encode
from tb_roofline.table.op_table import KEY_COLUMNS, OpTable, OpTableBuilder, keyed_table
from tb_roofline.table.shared_texts import share_texts

MM = ((8, 16), (16, 4))
LIST = (((2, 3), (2, 3)), (), None)  # a list of tensors, a non-tensor, a null


def _table() -> OpTable:
    b = OpTableBuilder()
    b.add(operation="aten::mm", category="matmul", input_dims=MM, total_time_ps=5.0)
    b.add(operation="aten::mm", category="matmul", input_dims=MM, total_time_ps=7.0)
    b.add(operation="aten::cat", category="other", input_dims=LIST, total_time_ps=1.0)
    b.add(operation="fusion.1", category="loop fusion", total_time_ps=2.0)
    b.add_columns(
        2,
        operation=np.array(["aten::mm", "aten::add"], dtype=object),
        category="matmul",
        input_dims=[((4, 4), (4, 4)), ((3,), (3,))],
        total_time_ps=np.array([1.0, 2.0]),
    )
    b.add_columns(2, operation="k", category="kernel", input_dims=MM, total_time_ps=3.0)
    return b.build()


def _dims_per_row(t: OpTable) -> list:
    return t["input_dims"].tolist()


def test_one_value_per_key_through_the_builder():
    t = _table()
    assert "input_dims" in KEY_COLUMNS and t.keys["input_dims"].dtype == object
    assert t.keys["input_dims"].shape == (t.num_keys,)
    assert _dims_per_row(t) == [MM, MM, LIST, None, ((4, 4), (4, 4)), ((3,), (3,)), MM, MM]
    # Equal dims of one op share a key; other dims are another key.
    ops = t.rows["op"].tolist()
    assert ops[0] == ops[1] and len(set(ops)) == 6
    assert t.consistent()


def test_select_concat_and_keyed_tables_keep_the_values():
    t = _table()
    mask = np.array([False, True, True, False, False, True, False, True])
    assert _dims_per_row(t.select(mask)) == [MM, LIST, ((3,), (3,)), MM]
    both = OpTable.concat([t, t.select(mask)])
    assert _dims_per_row(both) == _dims_per_row(t) + [MM, LIST, ((3,), (3,)), MM]
    keyed = keyed_table(
        {"operation": np.array(["a", "b"], dtype=object)}, {"op": np.array([1, 0, 1])}
    )
    assert _dims_per_row(keyed) == [None, None, None]  # a reader that has none: unknown


def test_pickle_codec_and_shared_texts_keep_the_values():
    t = _table()
    for back in (pickle.loads(pickle.dumps(t)), decode(encode(t))):
        assert back.consistent()
        assert back.keys["input_dims"].shape == (t.num_keys,)
        assert _dims_per_row(back) == _dims_per_row(t)
        assert all(type(d) is tuple for d in back.keys["input_dims"].tolist() if d is not None)


TESTDATA = os.path.join(os.path.dirname(TESTS), "testdata")


def test_a_real_trace_survives_the_disk_cache_and_sharing():
    from tb_roofline.readers.kineto import read_kineto_file

    (trace,) = glob.glob(os.path.join(TESTDATA, "kineto", "cpu_convnet", "*.json.gz"))
    data = read_kineto_file(trace, "h")
    dims = data.ops.keys["input_dims"].tolist()
    assert any(d is not None for d in dims)
    back = decode(encode(data))
    assert back.ops.keys["input_dims"].tolist() == dims
    share_texts(back, {})
    assert back.ops.keys["input_dims"].tolist() == dims
    assert back.ops.keys["input_dims"].shape == (back.ops.num_keys,)


def test_xspace_ops_have_no_input_dims():
    from tb_roofline.readers import read_profile_file

    (path,) = glob.glob(
        os.path.join(TESTDATA, "jax_cpu", "attention", "**", "*.xplane.pb"), recursive=True
    )
    data = read_profile_file(path, "xplane", "h")
    dims = data.ops.keys["input_dims"]
    assert data.ops.num_keys and dims.shape == (data.ops.num_keys,)
    assert all(d is None for d in dims.tolist())
