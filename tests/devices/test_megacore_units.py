"""A megacore TPU's figures are per TensorCore, said so, with the chip's beside them: on the
demo v4 run (megacore) the profile's planes and peaks are per TensorCore (137.5 TFLOP/s, 600
GB/s, read here from the raw plane stats), the answer names its unit "TensorCore", and its
per-chip figures are twice those: the 275 TFLOP/s and 1,200 GB/s Google's v4 documentation
gives per chip. A TPU without megacore (the demo v6e run) has no per-chip figures."""

from __future__ import annotations

import glob
import io
import os

import pytest
from testpaths import TESTS

from tb_roofline.protos import xplane_pb2
from tb_roofline.serve.cli.main import main
from tb_roofline.serve.service.core import RooflineService

DEMO = os.path.join(TESTS, "..", "testdata", "demo")
# Google Cloud TPU system architecture documentation, TPU v4: per chip 275 TFLOP/s (bf16),
# HBM 1,200 GB/s.
V4_CHIP_TFLOPS, V4_CHIP_HBM_GBS = 275.0, 1200.0


def _plane_stats(run_dir: str) -> list[dict]:
    """The stats of every TensorCore plane of a run, read with protobuf objects."""
    out = []
    for path in sorted(glob.glob(os.path.join(run_dir, "plugins/profile/*/*.xplane.pb"))):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            if plane.name.startswith("/device:TPU:") and "Core" not in plane.name:
                names = {k: m.name for k, m in plane.stat_metadata.items()}
                out.append(
                    {
                        names[s.metadata_id]: s.double_value or s.uint64_value or s.int64_value
                        for s in plane.stats
                    }
                )
    return out


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")


def _device(run_dir: str) -> dict:
    service = RooflineService(run_dir)
    run = service.list_runs()["runs"][0]["run"]
    return service.device(run, "")["device"]


def test_v4_megacore_figures_are_per_tensorcore_with_the_chip_s_beside():
    run_dir = os.path.join(DEMO, "v4_pod")
    stats = _plane_stats(run_dir)
    assert len(stats) == 4 and all(s["has_megacore"] == 1 for s in stats)
    tflops = {s["peak_teraflops_per_second"] for s in stats}
    hbm = {s["peak_hbm_bw_gigabytes_per_second"] for s in stats}
    assert tflops == {V4_CHIP_TFLOPS / 2} and hbm == {V4_CHIP_HBM_GBS / 2}  # per TensorCore

    device = _device(run_dir)
    assert device["unit"] == "TensorCore" and device["megacore"] is True
    assert device["num_cores"] == len(stats) and device["num_hosts"] == 2
    assert [c["peak_gflops"] for c in device["compute"]] == [1000 * V4_CHIP_TFLOPS / 2]
    chip = device["per_chip"]
    assert chip["tensor_cores"] == 2
    assert [c["peak_gflops"] for c in chip["compute"]] == [1000 * V4_CHIP_TFLOPS]
    assert chip["hbm_gbs"] == V4_CHIP_HBM_GBS

    out = io.StringIO()
    assert main(["report", run_dir, "--no-progress"], out) == 0
    text = out.getvalue()
    assert "4 TensorCore(s) on 2 host(s), megacore: yes; peaks per TensorCore" in text
    assert "per chip (megacore: 2 TensorCores as one device" in text
    assert "275,000.0 GFLOP/s [default], HBM 1,200.0 GB/s" in text


def test_a_tpu_without_megacore_has_no_chip_figures():
    device = _device(os.path.join(DEMO, "v6e_train"))
    assert device["unit"] == "TensorCore" and device["megacore"] is False
    assert device["per_chip"] is None
