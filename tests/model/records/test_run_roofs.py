"""The run's compute roofs (`/device`'s `run_compute`, model/records/peaks.py `run_compute_roofs`):
the roofs the run's ops sit under, highest first, checked against the `/ops` answer's own rows. The
device headline quotes the first: on an A100 trace whose ops never ran int8 it is not the chip's
int8 figure."""

from __future__ import annotations

import os

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
DATA = os.path.join(REPO, "testdata")


@pytest.mark.parametrize(
    "logdir,run",
    [
        ("kineto", "a100_80gb_shapes"),
        ("kineto", "sglang_qwen3_8b_decode"),
        ("kineto", "b200_eager"),
        ("demo", "v6e_train/2026_11_29_10_00_00"),
    ],
)
def test_run_roofs_are_the_ops_roofs(logdir, run):
    service = RooflineService(os.path.join(DATA, logdir))
    device = service.device(run, "")["device"]
    ops = service.ops(run, "", True, [], [], "", 0, None, "op", "")
    col = {c: i for i, c in enumerate(ops["columns"])}
    rows = [
        r
        for r in ops["rows"]
        if r[col["peak_flop_rate"]] and r[col["caveat"]] not in ("async_start", "async_wait")
    ]
    peaks = sorted({r[col["peak_flop_rate"]] for r in rows}, reverse=True)
    roofs = device["run_compute"]
    assert [r["peak_gflops"] for r in roofs] == peaks
    for roof in roofs:
        under = [r for r in rows if r[col["peak_flop_rate"]] == roof["peak_gflops"]]
        # named by the ceiling each row is judged under (`roof_precision`: a bf16 elementwise
        # op's is the vector units' fp32)
        named = {r[col["roof_precision"]] for r in under} - {"", None, "mixed"}
        time = sum(r[col["total_self_time_us"]] or 0 for r in under)
        assert roof["time_us"] == pytest.approx(time, rel=1e-9)
        if named:
            assert roof["named_by"] == "records" and set(roof["precisions"]) == named
        else:  # named by the device's precisions with that peak
            same = {
                c["precision"] for c in device["compute"] if c["peak_gflops"] == roof["peak_gflops"]
            }
            assert roof["named_by"] == "device" and set(roof["precisions"]) == same


def test_the_a100_headline_is_not_the_unused_int8_figure():
    service = RooflineService(os.path.join(DATA, "kineto"))
    device = service.device("a100_80gb_shapes", "")["device"]
    chip_top = max(c["peak_gflops"] for c in device["compute"])
    assert chip_top == 624_000.0  # int8 on the data sheet
    top = device["run_compute"][0]
    assert top["peak_gflops"] == 312_000.0 and top["peak_gflops"] < chip_top


def test_without_peaks_there_are_no_run_roofs():
    service = RooflineService(os.path.join(DATA, "compare", "torch_cpu"))
    device = service.device("convnet_b8", "")["device"]
    assert device["peaks_known"] is False and device["run_compute"] == []
