"""Equal strings held once (table/shared_texts.py): the same values, fewer objects."""

from __future__ import annotations

import pickle

import numpy as np

from tb_roofline.readers import read_profile_file
from tb_roofline.synthetic import SynthConfig, write_tpu_session
from tb_roofline.table.shared_texts import share_texts


def _host(tmp_path, seed: int):
    cfg = SynthConfig(seed=seed, num_cores=2, num_steps=3, ops_per_step=40, distinct_ops=20)
    cfg.program_seed = 7
    path = write_tpu_session(str(tmp_path / f"h{seed}"), "r", "s", [cfg])[0]
    return read_profile_file(path, "xplane", "h")


def _values(data) -> str:
    """The values (types too: repr tells 1 from 1.0) of what `share_texts` touches."""
    keys = [(k, type(v), v.tolist()) for k, v in data.ops.keys.items()]
    return repr((keys, data.op_shapes, data.ops.rows["op"].tolist()))


def test_received_hosts_share_equal_strings_and_keep_their_values(tmp_path):
    a, b = _host(tmp_path, 1), _host(tmp_path, 2)
    # As another process sends them: every string its own object.
    a, b = pickle.loads(pickle.dumps(a)), pickle.loads(pickle.dumps(b))
    before = _values(a), _values(b)
    ops = a.ops.keys["operation"]
    assert ops[0] == b.ops.keys["operation"][0] and ops[0] is not b.ops.keys["operation"][0]
    canon: dict = {}
    share_texts(a, canon)
    share_texts(b, canon)
    assert (_values(a), _values(b)) == before  # the same values, in the same order and types
    for col, values in a.ops.keys.items():
        if values.dtype == object:
            for x, y in zip(values, b.ops.keys[col]):
                assert x != y or x is y, col
    labels = {k: k for k in b.op_shapes}
    shared = [k for k in a.op_shapes if k in labels]
    assert shared and all(labels[k] is k for k in shared)
    uses = {(u.kind, u.text): u for us in b.op_shapes.values() for u in us}
    for us in a.op_shapes.values():
        for u in us:
            other = uses.get((u.kind, u.text))
            if other is not None and other.dims == u.dims:
                assert other.text is u.text and other.dims is u.dims


def test_tuples_are_shared_only_with_items_of_the_same_types():
    from tb_roofline.table.op_table import OpTableBuilder, ProfileData
    from tb_roofline.table.timeline import ShapeUse

    def data(dims):
        builder = OpTableBuilder()
        builder.add(host="h", operation="dot", category="convolution", core=0, step=0)
        shapes = {("p", "dot", ""): [ShapeUse("array", dims, "f32[2]", 1, 1.0)]}
        return ProfileData(None, builder.build(), [], [], [], op_shapes=shapes)

    ints, floats = data(((2, 3),)), data(((2.0, 3.0),))
    canon: dict = {}
    share_texts(ints, canon)
    share_texts(floats, canon)
    (i,) = ints.op_shapes[("p", "dot", "")]
    (f,) = floats.op_shapes[("p", "dot", "")]
    assert type(i.dims[0][0]) is int and type(f.dims[0][0]) is float
    again = data(((2, 3),))
    share_texts(again, canon)
    assert again.op_shapes[("p", "dot", "")][0].dims is i.dims
    assert np.array_equal(again.ops.keys["operation"], ints.ops.keys["operation"])


def test_keys_of_texts_and_of_ints_never_stand_for_other_types():
    from tb_roofline.table.shared_texts import _one

    canon: dict = {}
    texts = _one(("p", "dot", ""), canon)
    assert _one(("p", "dot", ""), canon) is texts  # an equal key: the one held
    assert _one(("p", "dot", "" + ""), canon)[1] is texts[1]
    ints = _one((1, 2), canon)
    for other in ((True, 2), (1.0, 2), (1, 2.0), ("1", "2"), ((1, 2),)):
        got = _one(other, canon)
        assert got == other and [type(v) for v in got] == [type(v) for v in other]
        assert got is not ints
    assert _one((1, 2), canon) is ints
    assert _one((), canon) == ()
