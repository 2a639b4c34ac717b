"""Shapes as values: the Kineto reader makes the `shapes:` and `grid:` text of each distinct
recorded value once (not once per call or kernel), and the model reads a `shapes:` text back
through one function (`costs/hlo/fingerprint.recorded_dims`), each distinct text parsed once
(texts up to `SHAPES_CACHED_CHARS`; the cache's memory stays bounded).
Checked on a real A100 trace against its raw events, read here with gzip and json alone."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.costs.hlo import fingerprint
from tb_roofline.costs.hlo.fingerprint import SHAPES, recorded_dims, shapes_fingerprint
from tb_roofline.model.guidance.rule_context import recorded_arrays
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
A100 = os.path.join(REPO, "testdata", "kineto", "a100_80gb_shapes")
TRACE = os.path.join(A100, "rank0.pt.trace.json.gz")


@pytest.fixture(scope="module")
def raw():
    """The trace's complete events: the distinct launch grids of its kernels and the distinct
    `Input Dims` of its CPU ops, as JSON text."""
    with gzip.open(TRACE, "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    grids = {
        json.dumps(e["args"]["grid"], separators=(",", ":"))
        for e in events
        if e.get("cat") == "kernel" and "grid" in e.get("args", {})
    }
    dims = {
        json.dumps(e["args"]["Input Dims"], separators=(",", ":"))
        for e in events
        if e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {})
    }
    kernels = sum(e.get("cat") == "kernel" for e in events)
    return grids, dims, kernels


@pytest.mark.slow
def test_each_distinct_grid_and_shape_is_written_once(raw, monkeypatch):
    grids, dims, kernels = raw
    written = []
    real = json.dumps

    def dumps(value, *args, **kwargs):
        text = real(value, *args, **kwargs)
        written.append(text)
        return text

    monkeypatch.setattr(json, "dumps", dumps)
    data = read_kineto_file(TRACE, "h")
    monkeypatch.undo()
    assert kernels > 10 * len(grids)  # many kernels share a grid: once per kernel is far more
    assert sorted(written) == sorted(grids | dims)
    texts = set(data.kernels.columns["fingerprint"].tolist())
    assert {t for t in texts if t} == {"grid:" + g for g in grids}
    shapes = {t for t in data.ops.columns["fingerprint"].tolist() if t.startswith(SHAPES)}
    assert shapes and shapes <= {SHAPES + d for d in dims}


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def test_recorded_dims_read_back_what_was_written(raw):
    _, dims, _ = raw
    for text in dims:
        value = json.loads(text)
        got = recorded_dims(SHAPES + text)
        assert got == _tuples(value) and shapes_fingerprint(got) == SHAPES + text
    assert recorded_dims("grid:[1,1,1]") is None and recorded_dims("shapes:[[1,") is None
    # A long text is read each time it is asked, never kept: the cache's memory is bounded.
    long = [[4096] * 300]
    held = fingerprint._cached_dims.cache_info().currsize
    assert recorded_dims(shapes_fingerprint(long)) == ((4096,) * 300,)
    assert fingerprint._cached_dims.cache_info().currsize == held
    assert recorded_arrays("shapes:[[8,3],[[2],[4,4]],[],null]") == [(8, 3), (2,), (4, 4)]


def test_the_model_parses_each_shape_text_once(monkeypatch):
    service = RooflineService(A100)
    run = service.list_runs()["runs"][0]["run"]
    analysis = service.analysis(run, "")
    shapes = {
        str(t)
        for t in analysis.scope.tables["op"].keys["fingerprint"].tolist()
        if str(t).startswith(SHAPES)
    }
    parsed = []
    real = json.loads

    def loads(text, *args, **kwargs):
        parsed.append(text)
        return real(text, *args, **kwargs)

    fingerprint._cached_dims.cache_clear()
    monkeypatch.setattr(json, "loads", loads)
    service.guidance(run, "")
    service.guidance(run, "", False)
    service.compare(run, run)
    monkeypatch.undo()
    kept = [p for p in parsed if len(SHAPES + p) <= fingerprint.SHAPES_CACHED_CHARS]
    assert kept and len(kept) == len(set(kept))  # longer texts are read each time, not kept
    assert {SHAPES + p for p in parsed} <= shapes
