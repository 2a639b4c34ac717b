"""`op_rows.Grouping` by sorting (ranges too wide for a dense table, or a line's segments'
rows merged): rows of distinct (metadata id, group) pairs in ascending order and exact sums
per row, against a plain Python dictionary; with ranges that fit one int64 key and ranges
that do not, pairs that repeat and pairs that do not; and a real host read with its lines in
many segments against the same host read in one."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from testpaths import REPO

from tb_roofline.readers.xspace import op_rows
from tb_roofline.readers.xspace.op_rows import Grouping
from tb_roofline.readers.xspace.tpu.file import convert_plan, plan_file

HOST = "testdata/demo/v6e_train/plugins/profile/*/*.xplane.pb"
MERGE = op_rows._merge


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


def _runs(rng, n_runs: int, repeat: bool):
    """Pieces of rows sorted by (md, group), as a line's segments give them: the step at each
    piece's end runs on into the next piece; with `repeat`, some pairs occur twice in a piece."""
    md, group = [], []
    g0 = 0
    for _ in range(n_runs):
        m = rng.integers(0, 50, 400)
        g = rng.integers(g0, g0 + 20, 400)
        if not repeat:
            pairs = np.unique(np.stack([m, g]), axis=1)
            m, g = pairs[0], pairs[1]
        order = np.lexsort((g, m))
        md.append(m[order])
        group.append(g[order])
        g0 += 19
    return np.concatenate(md), np.concatenate(group)


@pytest.mark.parametrize("repeat", [True, False], ids=["pairs-repeat", "pairs-once"])
def test_merged_runs_match_a_dictionary_and_the_dense_table(repeat):
    rng = np.random.default_rng(2)
    md, group = _runs(rng, 12, repeat)
    w = rng.integers(-(10**12), 10**12, len(md))
    merged = Grouping(md, group, runs=True)
    assert merged.key is None and merged.first is not None  # the sorting path
    assert (len(merged.more) == 0) == (len(merged.md) == len(md))
    want_md, want_group, want_sum = _reference(md, group, w)
    assert merged.md.tolist() == want_md and merged.group.tolist() == want_group
    assert merged.sum(w).tolist() == want_sum
    dense = Grouping(md, group)
    assert dense.key is not None  # the same pairs counted into a table
    for a, b in ((merged.md, dense.md), (merged.group, dense.group), (merged.sum(w), dense.sum(w))):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()


def test_pairs_already_in_order_are_not_sorted():
    md = np.repeat(np.arange(30), 40)
    group = np.tile(np.arange(-1, 39), 30)
    w = np.arange(len(md), dtype=np.int64) * 3 - 7
    g = Grouping(md, group, runs=True)
    assert g.first is not None and g.first.tolist() == list(range(len(md)))
    assert g.sum(w).tolist() == w.tolist() and g.sum(w) is not w  # (a copy: w is the caller's)
    assert g.md.tolist() == md.tolist() and g.group.tolist() == group.tolist()


def test_a_real_host_reads_the_same_in_many_segments(monkeypatch):
    """A real TPU host (every op line's segments merged into rows) gives the table it gives
    when each line is reduced in one piece (no merge)."""
    (path,) = glob.glob(os.path.join(REPO, HOST))
    whole = _rows(monkeypatch, path, 1 << 30)
    pieces = _rows(monkeypatch, path, 16)
    assert whole.keys() == pieces.keys()
    for c in whole:
        assert whole[c].dtype == pieces[c].dtype and whole[c].tobytes() == pieces[c].tobytes(), c


def _rows(monkeypatch, path: str, segment: int) -> dict:
    monkeypatch.setattr(op_rows, "SEGMENT_EVENTS", segment)
    calls: list = []
    monkeypatch.setattr(op_rows, "_merge", lambda parts: calls.append(len(parts)) or MERGE(parts))
    table = convert_plan(plan_file(path, "h")).ops
    # one piece per line and the async spans' rows, or segments merged (a step's loop
    # spans the step: the lines cut only between steps)
    assert max(calls) <= 2 if segment > 1 << 20 else max(calls) >= 3
    return {c: np.asarray(v) for c, v in table.rows.items()}
