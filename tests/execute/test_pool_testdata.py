"""Every real XSpace in testdata/ read on all cores gives exactly what one process reads: the
op table (keys, rows, unit costs), steps, core spans, device, diagnostics, op shapes and the
timeline facts, whether a file's TensorCore planes are split among the workers (a file read
alone) or whole files are (a batch of files)."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.execute import pool
from tb_roofline.table.op_table import ALL_COLUMNS, ProfileData

REPO = os.path.dirname(TESTS)
FILES = sorted(glob.glob(os.path.join(REPO, "testdata", "**", "*.xplane.pb"), recursive=True))


def _jobs(files):
    return [(p, "xplane", f"h{i}", None) for i, p in enumerate(files)]


def _read(monkeypatch, files, workers: int) -> list:
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", str(workers))
    return pool.read_files(_jobs(files))


def _same_arrays(a: dict, b: dict, what: str):
    assert sorted(a) == sorted(b), what
    for k in a:
        u, v = np.asarray(a[k]), np.asarray(b[k])
        assert u.dtype == v.dtype and u.shape == v.shape, f"{what} {k}"
        if u.dtype == object:
            assert u.tolist() == v.tolist(), f"{what} {k}"
        else:
            np.testing.assert_array_equal(u, v, err_msg=f"{what} {k}")


def _same(x, y, name: str):
    assert isinstance(x, ProfileData) and isinstance(y, ProfileData), (name, x, y)
    cols = ALL_COLUMNS + ("op",)
    _same_arrays({c: x.ops[c] for c in cols}, {c: y.ops[c] for c in cols}, f"{name} ops")
    assert (x.ops.unit_costs is None) == (y.ops.unit_costs is None), name
    if x.ops.unit_costs is not None:
        np.testing.assert_array_equal(x.ops.unit_costs, y.ops.unit_costs, err_msg=name)
    assert x.steps == y.steps and x.core_spans == y.core_spans, name
    assert x.device == y.device, name
    assert [d.to_json() for d in x.diagnostics] == [d.to_json() for d in y.diagnostics], name
    assert repr(x.op_shapes) == repr(y.op_shapes), name
    assert (x.timeline is None) == (y.timeline is None), name
    if x.timeline is not None:
        _same_arrays(x.timeline.windows, y.timeline.windows, f"{name} timeline windows")
        for field in ("pairs", "exposed_by_op", "idle_causes", "cause_span_ps"):
            assert repr(getattr(x.timeline, field)) == repr(getattr(y.timeline, field)), (
                name,
                field,
            )


@pytest.fixture
def two_workers(monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_PARALLEL_MIN_MB", "0")
    monkeypatch.setenv("TB_ROOFLINE_POOL_IDLE_S", "60")
    pool.shutdown()
    yield
    pool.shutdown()


def test_testdata_has_xspace_files_of_every_reader():
    names = "\n".join(FILES)
    assert len(FILES) >= 20
    assert "demo/v6e_train" in names and "xla_gpu_h200" in names and "jax_cpu" in names


def test_each_file_on_all_cores_is_the_serial_read(two_workers, monkeypatch):
    """A file alone: its TensorCore planes are units of their own, converted by the workers
    and this process and merged here."""
    split = 0
    for path in FILES:
        serial = _read(monkeypatch, [path], 1)
        assert not pool.pool_running()
        pooled = _read(monkeypatch, [path], 2)
        split += pool.pool_running()
        pool.shutdown()
        _same(serial[0], pooled[0], os.path.relpath(path, REPO))
    assert split >= 3  # the TPU files with several TensorCore planes went through the pool


def test_all_files_at_once_on_all_cores_are_the_serial_read(two_workers, monkeypatch):
    """A batch: each file is one unit, read whole (its planes merged where it ran)."""
    serial = _read(monkeypatch, FILES, 1)
    pooled = _read(monkeypatch, FILES, 2)
    assert pool.pool_running()
    for path, x, y in zip(FILES, serial, pooled):
        _same(x, y, os.path.relpath(path, REPO))
