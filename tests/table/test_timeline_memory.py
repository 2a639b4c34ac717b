"""What keeps the timeline summary's memory down (docs/benchmarks.md), checked as
behaviour: `tpu_timeline.add_core_events` consumes the events it is handed, and the lighter
segments and per-core pair sums give the hand-derived and brute-force answers."""

from __future__ import annotations

import numpy as np

from tb_roofline.readers.xspace.tpu import timeline as tpu_timeline
from tb_roofline.table.timeline_builder import TimelineBuilder, _Segments


def test_the_timeline_consumes_the_events_it_is_handed():
    facts = tpu_timeline.event_facts(
        [
            (1, 0, "a", "copy", "", False),
            (2, 0, "b", "all-reduce", "", False),
            (3, 0, "c", "loop fusion", "", False),
        ]
    )
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
