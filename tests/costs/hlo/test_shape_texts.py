"""Shapes as data: the Kineto reader carries each op's recorded `Input Dims` into the op table
as tuples (`input_dims`), the `shapes:` and `grid:` fingerprints are rendered from values by
one function each (costs/hlo/fingerprint.py, no JSON encoder call), and the model reads the
dims, never the text (no JSON decoder call while it answers).
Checked on a real A100 trace against its raw events, read here with gzip and json alone."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.costs.hlo.fingerprint import SHAPES, dims_text, input_dims, shapes_fingerprint
from tb_roofline.model.guidance.rule_context import recorded_arrays
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
A100 = os.path.join(REPO, "testdata", "kineto", "a100_80gb_shapes")
TRACE = os.path.join(A100, "rank0.pt.trace.json.gz")


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@pytest.fixture(scope="module")
def raw():
    """The trace's complete events: the distinct launch grids of its kernels (JSON text) and,
    per CPU op name, the distinct `Input Dims` it recorded (JSON text)."""
    with gzip.open(TRACE, "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    grids = {
        _compact(e["args"]["grid"])
        for e in events
        if e.get("cat") == "kernel" and "grid" in e.get("args", {})
    }
    dims: dict = {}
    for e in events:
        if e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {}):
            dims.setdefault(e["name"], set()).add(_compact(e["args"]["Input Dims"]))
    return grids, dims


@pytest.fixture(scope="module")
def read(raw):
    """The trace read with json.dumps counted (the reader renders texts from values)."""
    written = []
    real = json.dumps

    def dumps(value, *args, **kwargs):
        written.append(value)
        return real(value, *args, **kwargs)

    json.dumps = dumps
    try:
        data = read_kineto_file(TRACE, "h")
    finally:
        json.dumps = real
    return data, written


@pytest.mark.slow
def test_input_dims_are_the_recorded_values_as_tuples(raw, read):
    _, dims = raw
    data, _ = read
    keys = data.ops.keys
    known = 0
    for name, fp, d in zip(
        keys["operation"].tolist(), keys["fingerprint"].tolist(), keys["input_dims"].tolist()
    ):
        if d is None:
            assert not fp.startswith(SHAPES), name
            continue
        known += 1
        text = fp[len(SHAPES) :]
        assert fp.startswith(SHAPES) and text in dims[name], name  # the call's own dims
        assert d == _tuples(json.loads(text)), name  # the data is what the text says
    assert known > 100
    # Every op name that recorded dims keeps all of them, as data.
    mm = {
        d
        for n, d in zip(keys["operation"].tolist(), keys["input_dims"].tolist())
        if n == "aten::mm"
    }
    assert {_tuples(json.loads(t)) for t in dims["aten::mm"]} <= mm


@pytest.mark.slow
def test_fingerprints_are_rendered_without_json(raw, read):
    grids, _ = raw
    data, written = read
    assert written == []  # each text is rendered from its value (dims_text), not encoded
    texts = {t for t in data.kernels.keys["fingerprint"].tolist() if t}
    assert texts == {"grid:" + g for g in grids}


def test_dims_text_is_compact_json():
    for value in (
        [[8, 3, 32, 32], [16, 3, 3, 3], [16]],
        [[], [[2], [4, 4]], None, 1.5, 'a"b', True, -0.0],
        [],
        [[1e300, float("inf")]],
    ):
        dims = input_dims(value)
        assert dims == _tuples(value)
        assert dims_text(dims) == _compact(value)
        assert shapes_fingerprint(dims) == SHAPES + _compact(value)
    assert input_dims("[[1]]") is None and input_dims([{"a": 1}]) is None
    assert input_dims(None) is None


def test_recorded_arrays_flatten_tensor_lists():
    dims = input_dims([[8, 3], [[2], [4, 4]], [], None])
    assert recorded_arrays(dims) == [(8, 3), (2,), (4, 4)]
    assert recorded_arrays(None) == []


@pytest.mark.slow
def test_the_model_decodes_no_shape_text(monkeypatch):
    service = RooflineService(A100)
    run = service.list_runs()["runs"][0]["run"]
    analysis = service.analysis(run, "")
    assert any(d is not None for d in analysis.scope.tables["op"].keys["input_dims"].tolist())
    parsed = []
    real = json.loads

    def loads(text, *args, **kwargs):
        parsed.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", loads)
    shapes = service.ops(run, "", True, rows="shapes")
    service.guidance(run, "")
    service.guidance(run, "", False)
    service.compare(run, run)
    monkeypatch.undo()
    assert parsed == []
    rows = [dict(zip(shapes["columns"], r)) for r in shapes["rows"]]
    assert any(r["shapes"].startswith("[[") for r in rows)
