"""Real profiles from JAX (CPU) and TensorFlow (V100 GPU) load and say what they lack."""

from __future__ import annotations

import os

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)


@pytest.mark.parametrize("folder", ["jax_cpu", "xplane_tf_gpu_v100"])
def test_real_profiles_load_and_report_what_is_missing(folder):
    service = RooflineService(os.path.join(REPO, "testdata", folder))
    runs = service.list_runs()["runs"]
    assert runs
    for run in runs:
        name = run["run"]
        device = service.device(name, "")["device"]
        assert device["kind"] in ("cpu", "gpu")
        prog = service.program(name, "", True)
        assert prog["rows"][0][prog["columns"].index("step")] == "Total"
        service.ops(name, "", True)
        diags = service.diagnostics(name, "")["diagnostics"]
        assert diags, "a CPU/GPU profile must say what it lacks"
        assert all(d["message"] for d in diags)
