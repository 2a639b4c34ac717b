"""An op is labelled by the precision of the data it moved and computed; the roof it is judged
under is named beside it (`roof_precision`). On the real H200 decode trace
(testdata/kineto/h200_decode_eager): the elementwise ops and the RMS norm on bf16 tensors are
labelled bf16 and judged under the H200's fp32 (CUDA-core) roof, the bf16 GEMMs under the bf16
tensor-core roof and the fp8 `_scaled_mm` under the fp8 one. Expected types come from the raw
events' `Input type`, the roofs from the device's data sheet figures."""

from __future__ import annotations

import glob
import gzip
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

KINETO = os.path.join(TESTS, "..", "testdata", "kineto")
RUN = "h200_decode_eager"
PRECISION = {"c10::BFloat16": "bf16", "c10::Float8_e4m3fn": "fp8"}
VECTOR_OPS = ("aten::add", "aten::mul", "aten::sigmoid", "aten::silu", "aten::rms_norm")


def _raw_first_types() -> dict:
    """Operation -> the set of its calls' first tensor `Input type`."""
    (path,) = glob.glob(os.path.join(KINETO, RUN, "*.pt.trace.json.gz"))
    with gzip.open(path, "rt") as f:
        ev = json.load(f)["traceEvents"]
    out: dict = {}
    for e in ev:
        if e.get("cat") == "cpu_op":
            out.setdefault(e["name"], set()).add(e["args"]["Input type"][0])
    return out


@pytest.fixture(scope="module")
def answer():
    service = RooflineService(KINETO)
    ops = service.ops(RUN, "", True, [], [], "", 0, None, "op", "")
    col = {c: i for i, c in enumerate(ops["columns"])}
    rows = {r[col["operation"]]: {c: r[i] for c, i in col.items()} for r in ops["rows"]}
    peaks = {c["precision"]: c["peak_gflops"] for c in service.device(RUN, "")["device"]["compute"]}
    return rows, peaks, service.device(RUN, "")["device"]["run_compute"]


def test_vector_ops_labelled_by_their_data_under_the_vector_roof(answer):
    rows, peaks, _ = answer
    raw = _raw_first_types()
    for name in VECTOR_OPS:
        assert raw[name] == {"c10::BFloat16"}, name
        r = rows[name]
        assert (r["precision"], r["roof_precision"], r["dtype"]) == ("bf16", "fp32", "bf16"), name
        assert r["peak_flop_rate"] == peaks["fp32"] == 67_000.0
    # the GEMMs: their tensor-core roofs, named the same as their data
    assert raw["aten::matmul"] == {"c10::BFloat16"}
    assert raw["aten::_scaled_mm"] == {"c10::Float8_e4m3fn"}
    for name, p in (("aten::matmul", "bf16"), ("aten::_scaled_mm", "fp8")):
        assert (rows[name]["precision"], rows[name]["roof_precision"]) == (p, p)
        assert rows[name]["peak_flop_rate"] == peaks[p]


def test_run_roofs_named_by_the_ceilings(answer):
    """The run's compute roofs are named by the ceilings its ops sit under: the fp32 roof
    carries the bf16 elementwise ops' time, and is not called bf16."""
    rows, peaks, run_compute = answer
    by_peak = {r["peak_gflops"]: r for r in run_compute}
    assert by_peak[peaks["fp32"]]["precisions"] == ["fp32"]
    vector_time = sum(
        r["total_self_time_us"] for r in rows.values() if r["roof_precision"] == "fp32"
    )
    assert by_peak[peaks["fp32"]]["time_us"] == pytest.approx(vector_time, rel=1e-9)
    assert {by_peak[peaks[p]]["precisions"][0] for p in ("bf16", "fp8")} == {"bf16", "fp8"}
