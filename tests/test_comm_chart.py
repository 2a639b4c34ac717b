"""The communication roofline answer (`/comm`, model/comm.py) on real JAX captures over 8 CPU
devices (testdata/jax_cpu_collectives), with a device file that gives the host a link roof:
one point per collective at its message size (from the HLO, by hand) and bus bandwidth (its
bus bytes over its time, recomputed here from the op records), under the link's roof."""
from __future__ import annotations

import json
import shutil

import pytest

from test_jax_collectives import DATA, EXPECTED
from tb_roofline.serve.service import RooflineService

LINK_GBS = 50.0
DEVICE = {"tb_roofline_device_file": 1, "type": "test CPU with a link", "kind": "cpu",
          "num_cores": 1, "compute": {"fp32": 100.0},
          "memories": {"hbm": {"name": "DRAM", "gbs": 20.0},
                       "interconnect": {"name": "Interconnect (test link)", "gbs": LINK_GBS}}}


def _service(tmp_path, case, device=True):
    shutil.copytree(f"{DATA}/{case}", tmp_path / case)
    if device:
        (tmp_path / case / "roofline_device.json").write_text(json.dumps(DEVICE))
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    return service, run


def _ops(service, run):
    ops = service.ops(run, "")
    return {r[ops["columns"].index("operation")]: dict(zip(ops["columns"], r))
            for r in ops["rows"]}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_one_point_per_collective_at_its_size_and_bus_bandwidth(tmp_path, case):
    service, run = _service(tmp_path, case)
    answer = service.comm(run, "")
    assert answer["links"] == [{"id": "interconnect", "name": "Interconnect (test link)",
                                "gbs": LINK_GBS, "source": "user", "note": "",
                                "latency_us": None}]
    points = {p["operation"]: p for p in answer["points"]}
    assert set(points) == set(EXPECTED[case])
    ops = _ops(service, run)
    for name, (kind, n, count, form, message, bus) in EXPECTED[case].items():
        p, r = points[name], ops[name]
        assert (p["kind"], p["group_size"], p["groups"], p["group_form"]) == (kind, n, count, form)
        assert p["message_bytes"] == message and not p["group_assumed"]
        assert p["bus_bytes"] == pytest.approx(bus * r["occurrences"], rel=1e-9)
        assert p["bus_factor"] == pytest.approx(bus / message, rel=1e-9)
        # GB/s = bytes per ns; the record's time in µs
        assert p["bus_bw_gbs"] == pytest.approx(p["bus_bytes"] / (r["total_time_us"] * 1e3))
        assert p["algo_bw_gbs"] == pytest.approx(message * r["occurrences"]
                                                 / (r["total_time_us"] * 1e3))
        assert p["link_gbs"] == LINK_GBS and p["link_fraction"] == pytest.approx(
            p["bus_bw_gbs"] / LINK_GBS)
        # CPU collectives carry no NCCL kernel names: nccl-tests' factor, and it says so
        assert not p["algorithm_stated"] and "nccl-tests" in p["algorithm"]
        # under the link roof, judged there (not on DRAM)
        assert r["bound_by"] == "Interconnect" and p["bound_by"] == "Interconnect"
        assert p["exposed_us"] is not None and 0 <= p["exposed_us"] <= r["total_time_us"] * 1.001
    assert answer["kinds"] == sorted({k for k, *_ in EXPECTED[case].values()})


def test_no_link_roof_and_no_collectives(tmp_path):
    service, run = _service(tmp_path, "shard_map_2d", device=False)
    answer = service.comm(run, "")
    assert answer["links"] == [] and len(answer["points"]) == 4
    assert all(p["link_gbs"] is None and p["link_fraction"] is None for p in answer["points"])
    other = tmp_path / "other"
    shutil.copytree(f"{REPO_JAX_CPU}/matmul_tanh", other / "matmul_tanh")
    service = RooflineService(str(other))
    run = service.list_runs()["runs"][0]["run"]
    assert service.comm(run, "")["points"] == []


REPO_JAX_CPU = DATA.replace("jax_cpu_collectives", "jax_cpu")
