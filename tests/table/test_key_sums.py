"""Row columns summed per key where a host is read (table/key_sums.py), carried with its table
to the analysis: each key's rows added in their order (checked against a plain Python loop
over the rows), a run's sums its hosts' side by side, and every record of the analysis the
same, bit for bit, whether the hosts carry their sums or the analysis passes over the rows."""

from __future__ import annotations

import pickle

import numpy as np
from testpaths import TESTS

from tb_roofline.readers import read_profile_file
from tb_roofline.readers.units import summed
from tb_roofline.synthetic import SynthConfig, write_tpu_session
from tb_roofline.table.key_sums import row_key_sums, summed_columns, with_row_sums
from tb_roofline.table.op_table import OpTable

TRACE = TESTS + "/../testdata/kineto/a100_alexnet/worker0.1695835535.pt.trace.json.gz"


def _hosts(tmp_path, n=3) -> list:
    cfgs = [
        SynthConfig(
            seed=11 + h,
            program_seed=11,
            hostname=f"h{h}",
            num_cores=2,
            num_steps=6,
            ops_per_step=50,
            distinct_ops=30,
        )
        for h in range(n)
    ]
    paths = write_tpu_session(str(tmp_path), "run", "2026_01_01_00_00_00", cfgs)
    return [read_profile_file(p, "xplane", f"h{i}") for i, p in enumerate(paths)]


def _widened(profile):
    """The profile with its integer row columns that vary made int64 (in place)."""
    rows = profile.ops.rows
    for c, v in rows.items():
        if v.dtype.kind == "i" and v.strides[0] != 0:
            rows[c] = v.astype(np.int64)
    return profile


def _loop_sums(table: OpTable, column: str) -> list:
    """Each key's rows of a column added one after another, in row order (the reference)."""
    out = [0.0] * table.num_keys
    for o, v in zip(table.rows["op"].tolist(), np.asarray(table[column]).tolist()):
        out[o] += float(v)
    return out


def _bits(a) -> bytes:
    return np.asarray(a, np.float64).tobytes()


def test_each_keys_rows_are_added_in_order(tmp_path):
    tables = [p.ops for p in _hosts(tmp_path, 1)] + [read_profile_file(TRACE, "kineto", "r").ops]
    for t in tables:
        got = with_row_sums(t).row_sums
        assert got is not None and set(got) == set(summed_columns(t))
        assert len(got["total_time_ps"]) == t.num_keys and got["total_time_ps"].sum() > 0
        for c in got:
            assert _bits(got[c]) == _bits(_loop_sums(t, c)), c


def test_a_runs_sums_are_its_hosts_side_by_side_and_travel_with_them(tmp_path):
    hosts = [summed(p) for p in _hosts(tmp_path)]
    hosts = pickle.loads(pickle.dumps(hosts))  # as a worker sends them back
    assert all(p.ops.row_sums is not None for p in hosts)
    for share in (False, True):
        run = OpTable.concat([p.ops for p in hosts], share=share)
        passed = row_key_sums(OpTable(run.keys, run.rows, run.unit_costs))  # over the rows
        assert run.row_sums is not None and run.row_sums.keys() == passed.keys()
        for c in passed:
            assert _bits(run.row_sums[c]) == _bits(passed[c]), c
    # A host's sums that do not fit its keys make its table unusable (the disk cache's check).
    bad = hosts[0].ops
    assert bad.consistent()
    bad.row_sums = {c: v[:-1] for c, v in bad.row_sums.items()}
    assert not bad.consistent()


def test_an_analysis_is_the_same_with_the_sums_carried_or_made_over_the_rows(tmp_path):
    from tb_roofline.model.guidance.findings import guidance
    from tb_roofline.model.records.roofline import analyze, scoped_op_records

    def answers(profiles) -> list:
        a = analyze(profiles)
        carried = all(p.ops.row_sums is not None for p in profiles)
        assert (a.scope_source().tables["op"].row_sums is not None) == carried
        out = [a.program[io].columns for io in (True, False)]
        out += [a.ops[io].columns for io in (True, False)]
        labels = a.scope_source().step_labels
        for scope in ["Average"] + labels[1:2]:  # the average step's and one step's records
            out.append(scoped_op_records(a, scope, True).columns)
        out.append(repr(guidance(a)))
        return out

    def same(x, y):
        assert len(x) == len(y)
        for a, b in zip(x, y):
            if isinstance(a, dict):
                assert a.keys() == b.keys()
                for c in a:
                    va, vb = np.asarray(a[c]), np.asarray(b[c])
                    if va.dtype.kind == "f":
                        assert _bits(va) == _bits(vb), c
                    else:
                        assert va.tolist() == vb.tolist(), c
            else:
                assert a == b

    carried = [summed(p) for p in _hosts(tmp_path / "a")]
    bare = _hosts(tmp_path / "b")
    assert all(p.ops.row_sums is None for p in bare)
    same(answers(carried), answers(bare))
    trace = [read_profile_file(TRACE, "kineto", "r")]
    same(answers([summed(read_profile_file(TRACE, "kineto", "r"))]), answers(trace))


def test_integer_columns_are_as_narrow_as_their_values_allow(tmp_path, monkeypatch):
    from tb_roofline.table import key_sums
    from tb_roofline.table.op_table import code_type, keys_with_rows

    read = _hosts(tmp_path / "w", 2)
    read_types = [{c: v.dtype for c, v in p.ops.rows.items()} for p in read]
    wide = [_widened(p) for p in read]  # as a reader that makes int64 columns gives them
    assert all(p.ops.rows["op"].dtype == np.int64 for p in wide)
    hosts = [summed(_widened(p)) for p in _hosts(tmp_path / "n", 2)]
    for types, h in zip(read_types, hosts):  # the TPU reader makes them narrow already
        assert types == {c: v.dtype for c, v in h.ops.rows.items()}  # (tpu/file.py)
    assert all(p.ops.rows["op"].dtype == np.int32 and p.ops.consistent() for p in hosts)
    for a, b in zip(wide, hosts):
        for c, v in a.ops.rows.items():  # the same values, integers that vary as int32
            assert v.tolist() == b.ops.rows[c].tolist(), c
            narrow = v.dtype.kind == "i" and v.strides[0] != 0
            assert b.ops.rows[c].dtype == (np.int32 if narrow else v.dtype), c
    assert {"op", "step", "occurrences"} <= {
        c for c, v in hosts[0].ops.rows.items() if v.dtype == np.int32
    }
    run = OpTable.concat([p.ops for p in hosts], share=True)
    assert run.rows["op"].dtype == np.int32
    assert run.rows["op"].tolist() == OpTable.concat([p.ops for p in wide]).rows["op"].tolist()
    assert code_type(2**31 - 1) is np.int32 and code_type(2**31) is np.int64
    # Keys with rows, a block at a time: those a plain count over the rows finds.
    monkeypatch.setattr(key_sums, "ROW_BLOCK", 7)
    some = run.select(run.rows["op"] % 3 == 0)
    counted = [0] * some.num_keys
    for o in some.rows["op"].tolist():
        counted[o] += 1
    assert keys_with_rows(some).tolist() == [n > 0 for n in counted]
    assert 0 < sum(keys_with_rows(some)) < some.num_keys


def test_blocks_of_rows_add_as_one_pass(tmp_path, monkeypatch):
    # Blocks of 7 rows, their op codes made numpy's index type (`_block`): each key's sums are
    # still its rows added in order, and every block's rows are the table's.
    from tb_roofline.table import key_sums

    monkeypatch.setattr(key_sums, "ROW_BLOCK", 7)
    seen: list = []
    table = _hosts(tmp_path, 1)[0].ops
    assert table.rows["op"].dtype == np.int32

    def column_of(part, c):
        seen.append(part.rows["op"])
        return key_sums.row_values(part, c)

    got = key_sums.block_sums(
        table, ["total_time_ps"], column_of, lambda part: part.rows["op"], table.num_keys
    )
    assert all(op.dtype == np.intp for op in seen) and len(seen) == -(-len(table) // 7)
    assert np.concatenate(seen).tolist() == table.rows["op"].tolist()
    assert _bits(got["total_time_ps"]) == _bits(_loop_sums(table, "total_time_ps"))
