"""The per-step sums made host by host (model/records/row_sums.py `StepPass`): each host's rows
added onto the sums so far, in the run's order, as a Dask worker holding that host's table
would, are the sums of one pass over the run's table (`step_sums`), bit for bit; and the
block sums that add a table onto others' sums (table/key_sums.py `block_sums`, `onto`) are
those of the tables concatenated, whichever of them hold a column as one repeated value."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.model.records.roofline import analyze
from tb_roofline.model.records.row_sums import StepPass, step_sums
from tb_roofline.readers import read_profile_file
from tb_roofline.readers.units import summed
from tb_roofline.synthetic import SynthConfig, write_tpu_session
from tb_roofline.table.key_sums import block_sums, row_values
from tb_roofline.table.op_table import OpTable, OpTableBuilder

TRACE = TESTS + "/../testdata/kineto/a100_80gb_shapes/rank0.pt.trace.json.gz"


def _bits(a) -> bytes:
    return np.ascontiguousarray(a, np.float64).tobytes()


def _tpu_hosts(tmp_path, n=4) -> list:
    cfgs = [
        SynthConfig(
            seed=21 + h,
            program_seed=21,
            hostname=f"h{h}",
            num_cores=1 + h % 2,  # hosts of one core and of two: columns constant in some
            num_steps=7,
            ops_per_step=60,
            distinct_ops=25,
        )
        for h in range(n)
    ]
    paths = write_tpu_session(str(tmp_path), "run", "2026_01_01_00_00_00", cfgs)
    return [summed(read_profile_file(p, "xplane", f"h{i}")) for i, p in enumerate(paths)]


def _folded(step_pass: StepPass, tables: list) -> dict:
    sums = step_pass.start()
    for h, t in enumerate(tables):
        step_pass.add(sums, h, t)
    return step_pass.finish(sums)


@pytest.mark.parametrize("kind", ["tpu", "kineto"])
def test_host_by_host_step_sums_are_the_runs_bit_for_bit(tmp_path, kind):
    if kind == "tpu":
        profiles = _tpu_hosts(tmp_path)
    else:
        profiles = [summed(read_profile_file(TRACE, "kineto", f"r{i}")) for i in range(3)]
    hosts = [p.ops for p in profiles]
    a = analyze(profiles)
    src = a.scope_source()
    sp = src.step_pass
    assert sp is not None and len(sp.aligned) > 0
    run = src.tables["op"]
    assert sp.bounds.tolist()[-1] == run.num_keys
    one_pass = step_sums(run, sp.roofs, sp.aligned, sp.profile_host, sp.key_host)
    by_host = _folded(sp, hosts)
    assert one_pass.keys() == by_host.keys()
    for c in one_pass:
        assert _bits(by_host[c]) == _bits(one_pass[c]), c
    assert by_host["total_time_ps"].sum() > 0 and by_host["roof_time"].sum() > 0
    # Independently of the model: each step's summed time is its hosts' rows in that step.
    rows_time = 0.0
    for h, t in enumerate(hosts):
        inside = np.isin(t.rows["step"], sp.aligned.ids[h]) & ~t.keys["is_container"][t.rows["op"]]
        rows_time += float(np.asarray(t.rows["total_time_ps"], np.float64)[inside].sum())
    assert by_host["total_time_ps"].sum() == pytest.approx(rows_time, rel=1e-12)


def test_a_host_of_other_keys_is_refused(tmp_path):
    profiles = _tpu_hosts(tmp_path, 2)
    hosts = [p.ops for p in profiles]
    sp = analyze(profiles).scope_source().step_pass
    assert sp is not None
    with pytest.raises(ValueError, match="keys"):
        sp.add(sp.start(), 0, OpTable.concat([hosts[0], hosts[1]]))


def _table(times, occ, seed) -> OpTable:
    rng = np.random.default_rng(seed)
    n = len(times)
    b = OpTableBuilder()
    b.add_keyed(
        {"operation": np.array(["a", "b", "c"], object)},
        rng.integers(0, 3, n),
        step=rng.integers(0, 4, n),
        occurrences=occ,
        total_time_ps=times,
    )
    return b.build()


def test_tables_added_onto_others_sums_are_their_concatenation(tmp_path):
    rng = np.random.default_rng(5)
    n = 3000
    tables = [
        _table(rng.random(n) * 7.3, np.ones(n, np.int64), 1),  # fractions; one execution a row
        _table(np.ones(n), rng.integers(1, 4, n), 2),  # every time 1: a counted column
        _table(np.zeros(n), np.ones(n, np.int64), 3),  # every time 0
        _table(np.ones(n), np.ones(n, np.int64), 4),
        _table(rng.random(n) * 1e14, np.ones(n, np.int64), 5),  # sums past 2**53: ones round
    ]
    for order in ([0, 1, 2, 3], [3, 1, 0, 2], [1, 3, 2], [2, 3], [4, 3, 1], [3, 4, 1]):
        picked = [tables[i] for i in order]
        run = OpTable.concat(picked)
        cols = ("total_time_ps", "occurrences")

        def codes(part):
            return np.asarray(part.rows["step"], np.int64) * 3 + part.rows["op"] % 3

        whole = block_sums(run, cols, row_values, codes, 12)
        sums = {c: np.zeros(12) for c in cols}
        for t in picked:
            block_sums(t, cols, row_values, codes, 12, sums)
        for c in cols:
            assert _bits(sums[c]) == _bits(whole[c]), (order, c)


def test_sums_that_came_pickled_are_added_onto_as_numpys_own_float64():
    t = _table(np.ones(10) / 3, np.ones(10, np.int64), 7)
    sums = pickle.loads(pickle.dumps({c: np.zeros(12) for c in ("total_time_ps",)}))
    assert sums["total_time_ps"].dtype is not np.dtype(np.float64)  # (what pickling gives)
    block_sums(t, ("total_time_ps",), row_values, lambda p: p.rows["step"] * 3, 12, sums)
    assert sums["total_time_ps"].dtype is np.dtype(np.float64)
    assert sums["total_time_ps"].sum() == pytest.approx(10 / 3)
