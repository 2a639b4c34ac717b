"""XSpace files cut short: real profiles from testdata cut at every plane boundary
and inside every plane. A file cut short that grows is still being written (503); one that
does not, just written or old, is read as far as its complete planes go, with a `truncated`
diagnostic naming what is missing."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from testpaths import TESTS
from writer import being_written

from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError
from tb_roofline.execute import pool
from tb_roofline.readers import read_profile_file
from tb_roofline.readers.xspace import wire as xwire
from tb_roofline.readers.xspace.read import read_xspace_file

REPO = os.path.dirname(TESTS)
V6E = os.path.join(
    REPO, "testdata/demo/v6e_train/plugins/profile/2026_11_29_10_00_00/tpu-v6e-host0.xplane.pb"
)
GPU = os.path.join(
    REPO, "testdata/xla_gpu_mi300_conv/plugins/profile/2026_01_01_00_00_00/tw003.xplane.pb"
)


def _fields(data: bytes):
    """(field number, start, end) of each top-level field, walked by hand."""
    out, pos = [], 0
    while pos < len(data):
        tag, p = xwire.varint(data, pos)
        n, p = xwire.varint(data, p)
        out.append((tag >> 3, pos, p + n))
        pos = p + n
    return out


def _write(tmp_path, data: bytes, age_s: float, name="h.xplane.pb"):
    path = tmp_path / name
    path.write_bytes(data)
    past = time.time() - age_s
    os.utime(path, (past, past))
    return str(path)


def _codes(data):
    return [d.code for d in data.diagnostics]


def _cores(data):
    return sorted(set(data.ops["core"].tolist()))


def test_whole_profiles_have_no_truncated_diagnostic(tmp_path):
    for src in (V6E, GPU):
        data = read_xspace_file(_write(tmp_path, open(src, "rb").read(), 3600), "h")
        assert "truncated" not in _codes(data)


def test_v6e_cut_at_each_plane_boundary_is_whole(tmp_path):
    """A file whose top-level fields end exactly at its end is complete, with or without the
    optional hostnames field (real profilers write files without it): read at once, young or
    old, with no `truncated` note (an XSpace cannot say that planes after its last are missing,
    and claiming it refused complete files for 30 s)."""
    raw = open(V6E, "rb").read()
    whole = read_xspace_file(_write(tmp_path, raw, 3600, "whole.xplane.pb"), "h")
    assert _cores(whole) == [0, 1, 2, 3]
    planes = [f for f in _fields(raw) if f[0] == 1]
    assert _fields(raw)[-1][0] == 4  # the hostnames field comes last
    for k, (_, _, end) in enumerate(planes, start=1):
        cut = raw[:end]
        for age in (1, 3600):
            data = read_xspace_file(_write(tmp_path, cut, age), "h")
            assert "truncated" not in _codes(data)
            cores = (k + 1) // 2  # TensorCore and SparseCore planes alternate, then the host's
            assert _cores(data) == list(range(min(cores, 4)))
        if cores >= 4:  # every TensorCore plane: the whole file's answer
            np.testing.assert_array_equal(data.ops["total_time_ps"], whole.ops["total_time_ps"])


def test_v6e_cut_inside_each_plane(tmp_path):
    raw = open(V6E, "rb").read()
    fields = _fields(raw)
    for k, (field, start, end) in enumerate(fields):
        cut = raw[: (start + end) // 2]
        growing = _write(tmp_path, cut, 1)
        with being_written(growing), pytest.raises(ProfileIncompleteError):
            read_xspace_file(growing, "h")
        if k == 0:  # not one complete plane: a format error (422), never an empty answer
            with pytest.raises(ProfileFormatError, match="truncated or corrupt") as exc:
                read_xspace_file(_write(tmp_path, cut, 3600), "h")
            assert not isinstance(exc.value, ProfileIncompleteError)
            continue
        data = read_xspace_file(_write(tmp_path, cut, 3600), "h")
        note = next(d for d in data.diagnostics if d.code == "truncated")
        what = "the hostnames field" if field == 4 else f"plane {k + 1}"
        assert f"ends inside {what}" in note.message, note.message
        if field == 1 and k % 2 == 0 and k < 8:  # a TensorCore plane cut: named
            assert f"'/device:TPU:{k // 2}'" in note.message
        assert _cores(data) == list(range(min((k + 1) // 2, 4)))


@pytest.mark.slow
def test_gpu_profile_cut_short(tmp_path):
    raw = open(GPU, "rb").read()
    whole = read_xspace_file(_write(tmp_path, raw, 3600, "whole.xplane.pb"), "h")
    planes = [f for f in _fields(raw) if f[0] == 1]
    _, start, end = planes[-1]
    for cut in (raw[: (start + end) // 2], raw[: start + 3]):
        growing = _write(tmp_path, cut, 1)
        with being_written(growing), pytest.raises(ProfileIncompleteError):
            read_xspace_file(growing, "h")
        for age in (1, 3600):  # not growing: cut short, just now or long ago
            data = read_xspace_file(_write(tmp_path, cut, age), "h")
            assert "truncated" in _codes(data)
            assert len(data.ops) <= len(whole.ops)
    for cut in (raw[:end], raw[:start]):  # ends at a field boundary: whole, young or old
        for age in (1, 3600):
            data = read_xspace_file(_write(tmp_path, cut, age), "h")
            assert "truncated" not in _codes(data)


def test_every_reading_path_says_the_same(tmp_path, monkeypatch):
    """The plane-by-plane readers of execute/pool.py (one process, and workers) give the same
    answer and diagnostics as read_xspace_file for a file cut inside a plane."""
    raw = open(V6E, "rb").read()
    planes = [f for f in _fields(raw) if f[0] == 1]
    cut = raw[: (planes[4][1] + planes[4][2]) // 2]
    path = _write(tmp_path, cut, 3600)
    ref = read_xspace_file(path, "h")
    monkeypatch.setenv("TB_ROOFLINE_PARALLEL_MIN_MB", "0")
    for workers in ("1", "2"):
        monkeypatch.setenv("TB_ROOFLINE_WORKERS", workers)
        got = pool.read_files([(path, "xplane", "h", None)])[0]
        assert not isinstance(got, Exception), got
        assert [d.to_json() for d in got.diagnostics] == [d.to_json() for d in ref.diagnostics]
        np.testing.assert_array_equal(got.ops["total_time_ps"], ref.ops["total_time_ps"])
    assert "truncated" in _codes(ref)
    pool.shutdown()
    young = _write(tmp_path, cut, 1, "young.xplane.pb")
    with being_written(young):
        assert isinstance(
            pool.read_files([(young, "xplane", "h", None)])[0], ProfileIncompleteError
        )
        with pytest.raises(ProfileIncompleteError):
            read_profile_file(young, "xplane", "h")
    # just written and not growing: cut short, the same answer as the old file's
    got = pool.read_files([(young, "xplane", "h", None)])[0]
    assert [d.message.replace("young.", "h.") for d in got.diagnostics] == [
        d.message for d in ref.diagnostics
    ]


def test_the_service_answers_503_then_a_diagnostic(tmp_path):
    from tb_roofline import errors
    from tb_roofline.serve.service.core import RooflineService

    raw = open(V6E, "rb").read()
    planes = [f for f in _fields(raw) if f[0] == 1]
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    path = _write(run, raw[: (planes[4][1] + planes[4][2]) // 2], 1, "host0.xplane.pb")
    service = RooflineService(str(tmp_path / "logs"))
    name = service.list_runs()["runs"][0]["run"]
    with being_written(path), pytest.raises(errors.ProfileIncompletePublicError, match="retry"):
        service.program(name, "")
    service = RooflineService(str(tmp_path / "logs"))  # it stopped growing: cut short
    got = service.diagnostics(name, "")
    assert "truncated" in [d["code"] for d in got["diagnostics"]]


def test_a_complete_file_without_hostnames_is_read_at_once(tmp_path):
    """A real XSpace without the optional hostnames field, just copied (young): read at once,
    no 503, no `truncated` note, the same answer as the file with hostnames."""
    from tb_roofline.serve.service.core import RooflineService

    raw = open(V6E, "rb").read()
    fields = _fields(raw)
    assert fields[-1][0] == 4
    bare = raw[: fields[-1][1]]  # every plane, no hostnames
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    _write(run, bare, 0, "host0.xplane.pb")
    service = RooflineService(str(tmp_path / "logs"))
    name = service.list_runs()["runs"][0]["run"]
    got = service.diagnostics(name, "")
    assert "truncated" not in [d["code"] for d in got["diagnostics"]]
    whole = read_xspace_file(_write(tmp_path, raw, 3600, "whole.xplane.pb"), "h")
    data = read_xspace_file(_write(tmp_path, bare, 0, "bare.xplane.pb"), "h")
    np.testing.assert_array_equal(data.ops["total_time_ps"], whole.ops["total_time_ps"])
