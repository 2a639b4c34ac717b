"""Bad input cannot hurt the server (issue #11): bombs, limits, clean errors for damaged files,
writers that pause, and the export and CLI paths. Each test pins one finding."""
from __future__ import annotations

import gzip
import json
import os
import time

import pytest

from tb_roofline import errors
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.readers import read_profile_file
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.readers.xspace import read_xspace_file
from tb_roofline.synthetic import SynthConfig, make_tpu_xspace

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MI250 = os.path.join(REPO, "testdata", "kineto", "mi250")


def _age(path, seconds):
    past = time.time() - seconds
    os.utime(path, (past, past))
    return str(path)


def _kineto_text():
    name = next(f for f in os.listdir(MI250) if f.endswith(".gz"))
    return gzip.decompress(open(os.path.join(MI250, name), "rb").read())


# ------------------------------------------------------------------------------------------
# 9. A writer that pauses for more than 2 s: still being written (503), not corrupt (422).

def test_a_truncated_file_written_seconds_ago_is_still_being_written(tmp_path, monkeypatch):
    good = make_tpu_xspace(SynthConfig(seed=1, num_cores=1, num_steps=1)).SerializeToString()
    x = tmp_path / "h.xplane.pb"
    x.write_bytes(good[: len(good) // 2])
    k = tmp_path / "h.pt.trace.json"
    k.write_bytes(_kineto_text()[:5000])
    for path, fmt in ((x, "xplane"), (k, "kineto")):
        with pytest.raises(ProfileIncompleteError):  # the writer paused 5 s
            read_profile_file(_age(path, 5), fmt, "h")
        with pytest.raises(ProfileFormatError) as exc:  # nothing for 10 minutes: corrupt
            read_profile_file(_age(path, 600), fmt, "h")
        assert not isinstance(exc.value, ProfileIncompleteError)
    monkeypatch.setenv("TB_ROOFLINE_YOUNG_FILE_S", "2")
    for path, fmt in ((x, "xplane"), (k, "kineto")):
        with pytest.raises(ProfileFormatError) as exc:
            read_profile_file(_age(path, 5), fmt, "h")
        assert not isinstance(exc.value, ProfileIncompleteError)
    monkeypatch.setenv("TB_ROOFLINE_YOUNG_FILE_S", "bogus")  # a typo keeps the default
    with pytest.raises(ProfileIncompleteError):
        read_profile_file(_age(x, 5), "xplane", "h")
