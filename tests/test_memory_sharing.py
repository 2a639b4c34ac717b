"""What keeps a conversion's peak memory down (docs/benchmarks.md, issue #18), checked as
behaviour: a run's op table and its hosts' share one copy of the row columns
(`OpTable.concat(share=True)`), the timeline summary consumes the events it is handed
(`tpu_timeline.add_core_events`), and both give the answers they gave before."""
from __future__ import annotations

import os

import numpy as np

from tb_roofline.model import roofline
from tb_roofline.readers import tpu_timeline
from tb_roofline.readers.xspace import read_xspace_file
from tb_roofline.synthetic import SynthConfig, write_tpu_session
from tb_roofline.table.op_table import OpTable
from tb_roofline.table.timeline import TimelineBuilder, _Segments


def _hosts(tmp_path, n=3):
    cfgs = [SynthConfig(seed=40 + h, num_cores=2, num_steps=6, ops_per_step=60, distinct_ops=25,
                        hostname=f"h{h}", program_seed=3) for h in range(n)]
    files = write_tpu_session(str(tmp_path), "run", "2026_01_01_00_00_00", cfgs)
    return [read_xspace_file(f, os.path.basename(f).split(".")[0]) for f in files]


def test_a_runs_table_and_its_hosts_hold_one_copy_of_the_rows(tmp_path):
    profiles = _hosts(tmp_path)
    before = [{k: v.copy() for k, v in p.ops.rows.items()} for p in profiles]
    plain = OpTable.concat([p.ops.copy() for p in profiles])
    shared = OpTable.concat([p.ops for p in profiles], share=True)
    for k in plain.rows:  # the run's table is the one concat made before
        np.testing.assert_array_equal(shared.rows[k], plain.rows[k])
    for p, old in zip(profiles, before):
        for k, v in p.ops.rows.items():  # each host's rows: the same values...
            np.testing.assert_array_equal(v, old[k])
            if k != "op":  # ... held by the run's table
                assert np.shares_memory(v, shared.rows[k]), k
        assert not np.shares_memory(p.ops.rows["op"], shared.rows["op"])


def test_the_analysis_is_unchanged_by_sharing(tmp_path):
    a, b = _hosts(tmp_path / "a"), _hosts(tmp_path / "b")  # the same profiles, read twice
    first = roofline.analyze(a)  # a's hosts now hold views of this run's table
    for again in (roofline.analyze(a), roofline.analyze(b)):
        for io in (True, False):
            assert again.program[io].rows() == first.program[io].rows()
            assert again.ops[io].rows() == first.ops[io].rows()
    # A host alone, from its shared rows, answers as the same host read afresh.
    assert roofline.analyze([a[1]]).ops[True].rows() == roofline.analyze([b[1]]).ops[True].rows()
    assert len(first.ops[True]) > 10 and len(first.program[True]) > 3


def test_the_timeline_consumes_the_events_it_is_handed():
    facts = tpu_timeline.event_facts([(1, 0, "a", "copy", "", False),
                                      (2, 0, "b", "all-reduce", "", False),
                                      (3, 0, "c", "loop fusion", "", False)])
    md = np.array([1, 3, 2, 1, 3], np.int64)
    begin = np.array([0, 10, 20, 40, 45], np.int64)
    dur = np.array([10, 5, 30, 5, 5], np.int64)
    events = [(0, md, begin, dur)]
    builder = TimelineBuilder()
    tpu_timeline.add_core_events(builder, 0, (0, 60), [(0, 0, 60)], events, facts)
    assert events == []
    t = builder.build()
    assert float(t.windows["busy_ps"][0]) == 45.0  # [0, 15] and [20, 50]
    assert float(t.windows["compute_ps"][0]) == 25.0  # all but the all-reduce's 30 ps
    pairs = {(p.first[1], p.second[1]): (p.count, p.gap_ps, p.shorter_ps) for p in t.pairs}
    # a->c back to back at 10 and 45 (gaps 0 and 0; shorter 5 and 5); c->b is communication.
    assert pairs == {("a", "c"): (2, 0.0, 10.0)}


def test_segments_measure_unions_as_a_brute_force_does():
    rng = np.random.default_rng(5)
    for n in (0, 1, 7, 200):
        begin = rng.integers(0, 1000, n).astype(np.float64)
        end = begin + rng.integers(0, 60, n)
        if n > 3:
            begin[:3] = [0, 10, 20]  # some back-to-back, some nested
            end[:3] = [10, 20, 25]
        seg = _Segments(begin, end)
        grid = np.zeros(1200, bool)
        for b, e in zip(begin.astype(int), end.astype(int)):
            grid[b:e] = True
        assert seg.total() == grid.sum()
        for t in (0, 5, 333, 999, 1100):
            assert float(seg.covered([t])[0]) == grid[:t].sum()
    disjoint = _Segments(np.array([0.0, 10, 30]), np.array([10.0, 20, 31]))
    assert disjoint.total() == 21.0
