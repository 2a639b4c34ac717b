"""The communication roofline answer (`/comm`, model/records/comm.py) on real JAX captures over 8
CPU
devices (testdata/jax_cpu_collectives), with a device file that gives the host a link roof:
one point per collective at its message size (from the HLO, by hand) and bus bandwidth (its
bus bytes over its time, recomputed here from the op records), under the link's roof."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest
from test_jax_collectives import DATA, EXPECTED
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
LINK_GBS = 50.0
DEVICE = {
    "tb_roofline_device_file": 1,
    "type": "test CPU with a link",
    "kind": "cpu",
    "num_cores": 1,
    "compute": {"fp32": 100.0},
    "memories": {
        "hbm": {"name": "DRAM", "gbs": 20.0},
        "interconnect": {"name": "Interconnect (test link)", "gbs": LINK_GBS},
    },
}


def _service(tmp_path, case, device=True):
    shutil.copytree(f"{DATA}/{case}", tmp_path / case)
    if device:
        (tmp_path / case / "roofline_device.json").write_text(json.dumps(DEVICE))
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    return service, run


def _ops(service, run):
    ops = service.ops(run, "")
    return {r[ops["columns"].index("operation")]: dict(zip(ops["columns"], r)) for r in ops["rows"]}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_one_point_per_collective_at_its_size_and_bus_bandwidth(tmp_path, case):
    service, run = _service(tmp_path, case)
    answer = service.comm(run, "")
    assert answer["links"] == [
        {
            "id": "interconnect",
            "name": "Interconnect (test link)",
            "gbs": LINK_GBS,
            "source": "user",
            "note": "",
            "latency_us": None,
        }
    ]
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
        assert p["algo_bw_gbs"] == pytest.approx(
            message * r["occurrences"] / (r["total_time_us"] * 1e3)
        )
        assert p["link_gbs"] == LINK_GBS and p["link_fraction"] == pytest.approx(
            p["bus_bw_gbs"] / LINK_GBS
        )
        # CPU collectives carry no NCCL kernel names: nccl-tests' factor, and it says so
        assert not p["algorithm_stated"] and "nccl-tests" in p["algorithm"]
        # under the link roof, judged there (not on DRAM)
        assert r["bound_by"] == "Interconnect" and p["bound_by"] == "Interconnect"
        assert p["exposed_us"] is not None and 0 <= p["exposed_us"] <= r["total_time_us"] * 1.001
        # one unit for link bandwidth: the op table's interconnect_bw is /comm's GB/s
        assert r["interconnect_bw"] == pytest.approx(
            bus * r["occurrences"] / (r["total_time_us"] * 1e3)
        )
        assert r["interconnect_bw"] == pytest.approx(p["bus_bw_gbs"], rel=1e-9)
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


@pytest.mark.slow
def test_an_op_at_several_sizes_is_a_point_per_size(tmp_path):
    """Real A100 trace (rank 0 of 16): c10d::allreduce_ ran 5 times on 1,465,344 B and 5 times
    on 1,791,693,584 B (the raw `nccl:all_reduce` annotations' f32 Input Dims, counted here):
    two points at those sizes, the bus bytes S × 2·15/16 each. Its calls launched only
    `ncclKernel_SendRecv_RING_SIMPLE_…` kernels (the trace's only NCCL kernels): no all-reduce
    kernel states its algorithm, so nccl-tests' factor stands and the point says so."""
    import gzip
    import os

    import numpy as np

    folder = os.path.join(os.path.dirname(DATA), "kineto", "a100_80gb_shapes")
    raw = json.load(gzip.open(os.path.join(folder, "rank0.pt.trace.json.gz")))
    sizes: dict = {}
    for e in raw["traceEvents"]:
        if e.get("name") == "nccl:all_reduce":
            s = 4 * int(np.prod(e["args"]["Input Dims"][0]))
            sizes[s] = sizes.get(s, 0) + 1
    world = raw["distributedInfo"]["world_size"]
    shutil.copytree(folder, tmp_path / "a100")
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    points = [p for p in service.comm(run, "")["points"] if p["operation"] == "c10d::allreduce_"]
    assert {p["message_bytes"]: p["occurrences"] for p in points} == sizes
    for p in points:
        assert p["bus_bytes"] == pytest.approx(
            p["message_bytes"] * p["occurrences"] * 2 * (world - 1) / world
        )
        assert p["group_size"] == world and p["group_assumed"]  # the trace's world size
        assert not p["algorithm_stated"] and "nccl-tests" in p["algorithm"]
        assert p["link"] == "Interconnect (NVLink 3)" and p["link_gbs"] == 300
        assert p["exposed_shared"]  # the timeline keeps one exposed time per op
    assert sum(p["exposed_us"] for p in points) <= sum(p["total_time_us"] for p in points)
    # all-to-all runs as grouped send/recv: its SendRecv kernels state its algorithm
    a2a = [p for p in service.comm(run, "")["points"] if p["kind"] == "all-to-all"]
    assert a2a and {p["algorithm"] for p in a2a} == {"RING_SIMPLE"}


# A v6e-like torus link (4 ICI ports) given by a device file: each point's roof is the link's
# figure × the ports its group can use ÷ 4, worked out here from the group sizes of the HLO
# (test_jax_collectives.EXPECTED, by hand), never from the model's topology code.
TORUS_PORTS = 4
PORTS_BY_GROUP = {2: 1, 4: TORUS_PORTS, 8: TORUS_PORTS}


def test_link_roof_is_the_links_a_group_can_use(tmp_path):
    device = json.loads(json.dumps(DEVICE))
    device["memories"]["interconnect"].update(topology="torus", links=TORUS_PORTS)
    shutil.copytree(f"{DATA}/shard_map_2d", tmp_path / "shard_map_2d")
    (tmp_path / "shard_map_2d" / "roofline_device.json").write_text(json.dumps(device))
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    points = {p["operation"]: p for p in service.comm(run, "")["points"]}
    for name, (_, n, *_) in EXPECTED["shard_map_2d"].items():
        p = points[name]
        ports = PORTS_BY_GROUP[n]
        assert p["group_size"] == n
        assert p["link_gbs"] == pytest.approx(LINK_GBS * ports / TORUS_PORTS, rel=1e-12)
        assert (p["link_count"], p["link_count_of"]) == (ports, TORUS_PORTS)
        assert p["link_fraction"] == pytest.approx(p["bus_bw_gbs"] / p["link_gbs"], rel=1e-12)
        assert "ICI torus" in p["link_assumption"]
    # a pair of chips: one port, and the answer says why
    assert "share one of the 4 ports" in points["ppermute.3"]["link_assumption"]


def test_op_records_are_judged_on_the_links_their_group_can_use(tmp_path):
    """The op table judges a collective as /comm does: its interconnect utilisation, bound,
    time on the roof and time saved are against its group's link roof (the figure × the
    ports the group can use ÷ 4, from the HLO's group sizes by hand), and the row says which
    topology it assumed. A pair's all-reduce on one of 4 ports reaches a quarter of the figure
    at most: against the whole figure it would read 4× further from its roof."""
    device = json.loads(json.dumps(DEVICE))
    device["memories"]["interconnect"].update(topology="torus", links=TORUS_PORTS)
    shutil.copytree(f"{DATA}/shard_map_2d", tmp_path / "shard_map_2d")
    (tmp_path / "shard_map_2d" / "roofline_device.json").write_text(json.dumps(device))
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    ops = _ops(service, run)
    points = {p["operation"]: p for p in service.comm(run, "")["points"]}
    for name, (_, n, _count, _form, _message, bus) in EXPECTED["shard_map_2d"].items():
        r = ops[name]
        roof = LINK_GBS * PORTS_BY_GROUP[n] / TORUS_PORTS
        link_bytes = bus * r["occurrences"]
        time_ns = r["total_time_us"] * 1e3
        assert r["link_roof_gbs"] == pytest.approx(roof, rel=1e-12)
        assert r["interconnect_bw"] == pytest.approx(link_bytes / time_ns, rel=1e-9)  # GB/s
        assert r["bound_by"] == "Interconnect"
        assert r["roofline_efficiency"] == pytest.approx(link_bytes / time_ns / roof, rel=1e-9)
        assert r["roof_time_us"] == pytest.approx(link_bytes / roof / 1e3, rel=1e-9)
        assert r["potential_time_saved_us"] == pytest.approx(
            r["total_time_us"] - link_bytes / roof / 1e3, rel=1e-9
        )
        assert r["link_assumption"].startswith(f"group of {n}: {PORTS_BY_GROUP[n]} of 4 links")
        assert "ICI torus" in r["link_assumption"]
        # one rule: the op record's efficiency is the /comm point's share of its link
        assert r["roofline_efficiency"] == pytest.approx(points[name]["link_fraction"], rel=1e-9)
        assert r["link_roof_gbs"] == pytest.approx(points[name]["link_gbs"], rel=1e-12)
    # rows without link bytes have no link roof
    assert all(r["link_roof_gbs"] is None for r in ops.values() if not r["interconnect_bytes"])


def test_program_records_weigh_each_collective_at_its_groups_links(tmp_path):
    """The Total and the Average hold collectives of groups of 2, 4 and 8: their link roof is
    the rate at which all their link bytes would move, each collective at its own group's
    roof (Σ bytes ÷ Σ bytes_k / roof_k, the HLO's group sizes and bus bytes by hand), never
    the whole figure the pairs cannot reach; the record says what it assumes."""
    device = json.loads(json.dumps(DEVICE))
    device["memories"]["interconnect"].update(topology="torus", links=TORUS_PORTS)
    shutil.copytree(f"{DATA}/shard_map_2d", tmp_path / "shard_map_2d")
    (tmp_path / "shard_map_2d" / "roofline_device.json").write_text(json.dumps(device))
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    ops = _ops(service, run)
    on_link = at_roof = 0.0
    for name, (_, n, _count, _form, _message, bus) in EXPECTED["shard_map_2d"].items():
        link_bytes = bus * ops[name]["occurrences"]
        on_link += link_bytes
        at_roof += link_bytes / (LINK_GBS * PORTS_BY_GROUP[n] / TORUS_PORTS)
    roof = on_link / at_roof
    assert LINK_GBS / 4 < roof < LINK_GBS  # pairs on one port pull it below the figure
    prog = service.program(run, "")
    records = {
        r[prog["columns"].index("step")]: dict(zip(prog["columns"], r)) for r in prog["rows"]
    }
    total, average = records["Total"], records["Average"]
    assert total["interconnect_bytes"] == pytest.approx(on_link, rel=1e-12)
    for r in (total, average):
        assert r["link_roof_gbs"] == pytest.approx(roof, rel=1e-12)
        assert "each at its group's link roof" in r["link_assumption"]
        assert r["interconnect_bw"] == pytest.approx(
            r["interconnect_bytes"] / (r["total_time_us"] * 1e3), rel=1e-9
        )


def test_without_a_topology_the_whole_link_and_the_assumption_says_so(tmp_path):
    service, run = _service(tmp_path, "shard_map_2d")
    for p in service.comm(run, "")["points"]:
        assert p["link_gbs"] == LINK_GBS and p["link_count"] is None
        assert "whole figure for every group" in p["link_assumption"]
    ops = _ops(service, run)
    for name in EXPECTED["shard_map_2d"]:
        assert ops[name]["link_roof_gbs"] == LINK_GBS
        assert "whole figure for every group" in ops[name]["link_assumption"]


B200 = os.path.join(
    REPO, "testdata", "kineto", "b200_eager", "worker0.1773700000000.pt.trace.json.gz"
)
# A device file for the B200 trace whose link is a full mesh of 16 links: a group of 8 reaches
# its 7 peers over 7 of them (B200's own NVSwitch gives every group all 18: no difference to
# see). The figure and links are the file's; the group size the trace's.
MESH_GBS, MESH_LINKS = 800.0, 16


def test_kineto_collectives_are_judged_on_their_groups_links(tmp_path):
    """The real B200 vLLM trace's collectives (NCCL all-gather, vLLM's custom all-reduce): the
    group size each call recorded (`record_param_comms` `Group size`, read here from the raw
    events) sets the links its op record is judged on, as its /comm points are."""
    with gzip.open(B200, "rt") as f:
        events = json.load(f)["traceEvents"]
    sizes = {e["args"]["Group size"] for e in events if e.get("name") == "record_param_comms"}
    assert sizes == {8}
    roof = MESH_GBS * min(8 - 1, MESH_LINKS) / MESH_LINKS
    device = {
        "tb_roofline_device_file": 1,
        "type": "test GPU with a 16-link mesh",
        "kind": "gpu",
        "num_cores": 1,
        "compute": {"bf16": 2.25e6, "fp32": 8e4},
        "memories": {
            "hbm": {"name": "HBM", "gbs": 8000.0},
            "interconnect": {
                "name": "Interconnect (mesh)",
                "gbs": MESH_GBS,
                "topology": "full_mesh",
                "links": MESH_LINKS,
            },
        },
    }
    run_dir = tmp_path / "b200"
    run_dir.mkdir()
    shutil.copy(B200, run_dir / os.path.basename(B200))
    device_file = tmp_path / "mesh_device.json"
    device_file.write_text(json.dumps(device))
    service = RooflineService(str(tmp_path), device_file=str(device_file))  # (B200 known: forced)
    run = service.list_runs()["runs"][0]["run"]
    ops = _ops(service, run)
    points = service.comm(run, "")["points"]
    comm = {n: r for n, r in ops.items() if r["interconnect_bytes"]}
    assert (
        set(comm)
        == {p["operation"] for p in points}
        == {
            "vllm::all_reduce",
            "c10d::_allgather_base_",
        }
    )
    for name, r in comm.items():
        bw = r["interconnect_bytes"] / (r["total_time_us"] * 1e3)
        assert r["interconnect_bw"] == pytest.approx(bw, rel=1e-9)
        assert r["link_roof_gbs"] == pytest.approx(roof, rel=1e-12)
        assert r["roofline_efficiency"] == pytest.approx(bw / roof, rel=1e-9)
        assert r["link_assumption"].startswith("group of 8: 7 of 16 links")
        mine = [p for p in points if p["operation"] == name]
        assert [p["link_gbs"] for p in mine] == pytest.approx([roof] * len(mine), rel=1e-12)
        # an op at several sizes: its record's bytes over its time, as its points' together
        both = sum(p["bus_bytes"] for p in mine) / sum(p["total_time_us"] * 1e3 for p in mine)
        assert r["roofline_efficiency"] == pytest.approx(both / roof, rel=1e-9)
    # the kernel view judges each collective kernel on the same group's links (its op's, or
    # its own args'), and so does the program's Total
    kernels = service.ops(run, "", view="kernel")
    rows = [dict(zip(kernels["columns"], r)) for r in kernels["rows"]]
    linked = [r for r in rows if r["interconnect_bytes"]]
    names = sorted(r["operation"] for r in linked)
    assert len(names) == 2 and names[0].startswith("ncclDevKernel_AllGather_RING_LL")
    assert "multimem_all_reduce_kernel" in names[1]
    assert sum(r["interconnect_bytes"] for r in linked) == pytest.approx(
        sum(r["interconnect_bytes"] for r in comm.values()), rel=1e-12
    )
    for r in linked:
        assert r["link_roof_gbs"] == pytest.approx(roof, rel=1e-12)
        assert r["link_assumption"].startswith("group of 8: 7 of 16 links")
        bw = r["interconnect_bytes"] / (r["total_time_us"] * 1e3)
        assert r["roofline_efficiency"] == pytest.approx(bw / roof, rel=1e-9)
    prog = service.program(run, "")
    total = dict(zip(prog["columns"], prog["rows"][0]))
    assert total["step"] == "Total" and total["link_roof_gbs"] == pytest.approx(roof, rel=1e-12)


@pytest.mark.parametrize(
    ("device", "n", "gbs", "links", "words"),
    [
        # DGX-1V hybrid cube-mesh: 6 NVLink 2 links of 25 GB/s per direction (150 in all)
        ("Tesla V100-SXM2-16GB", 2, 50.0, 2, "1 or 2 of the 6 NVLinks"),
        ("Tesla V100-SXM2-16GB", 4, 100.0, 4, "one quad"),
        ("Tesla V100-SXM2-16GB", 8, 150.0, 6, "both quads"),
        # NVSwitch: all 18 NVLink 4 links (450 GB/s per direction) for any group
        ("NVIDIA H100 80GB HBM3", 2, 450.0, 18, "NVSwitch"),
        # MI300X: 7 Infinity Fabric links of 64 GB/s per direction, one to each peer
        ("AMD Instinct MI300X", 2, 64.0, 1, "1 of the 7 links"),
        ("AMD Instinct MI300X", 8, 448.0, 7, "7 of the 7 links"),
        # TPU v6e: 4 ICI ports, 400 GB/s per direction in all
        ("TPU v6e", 2, 100.0, 1, "one of the 4 ports"),
    ],
)
def test_data_sheet_group_roofs(device, n, gbs, links, words):
    from tb_roofline.devices import datasheets
    from tb_roofline.devices.interconnect import interconnect, topology
    from tb_roofline.devices.spec import MemoryPeak
    from tb_roofline.model.records.comm import group_roof

    spec = datasheets.lookup(device)
    link = MemoryPeak("interconnect", "", interconnect(spec.key).value, "datasheet")
    link.topology = topology(spec.key)
    got, used, why = group_roof(link, n)
    assert got == pytest.approx(gbs, rel=1e-12) and used == links and words in why


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"topology": "ring", "links": 4}, "topology must be one of switch, bridge"),
        ({"topology": "torus", "links": 0}, "links must be a positive whole number"),
        ({"topology": "torus"}, "links must be a positive whole number"),
    ],
)
def test_a_bad_link_topology_in_a_device_file_is_named(tmp_path, entry, words):
    from tb_roofline.devices.device_file import DeviceFileError, load_device_file

    device = json.loads(json.dumps(DEVICE))
    device["memories"]["interconnect"].update(entry)
    path = tmp_path / "roofline_device.json"
    path.write_text(json.dumps(device))
    with pytest.raises(DeviceFileError, match="memories.interconnect: " + words):
        load_device_file(str(path))


DDP = os.path.join(REPO, "testdata", "guidance", "torch", "ddp_straggler")
DDP_DEVICE = os.path.join(REPO, "testdata", "guidance", "roofline_device.json")


def test_ddp_allreduce_is_judged_on_its_pairs_link(tmp_path):
    """The real 2-rank PyTorch DDP trace (gloo `c10d::allreduce_`), with its measured CPU
    device file given a fully connected link of 4 links: a pair (its one process group's
    size, `distributedInfo` `pg_config`, read here from the raw files) reaches its one peer
    over one of them, a quarter of the figure, and its op record says so."""
    sizes = set()
    for name in os.listdir(DDP):
        with gzip.open(os.path.join(DDP, name), "rt") as f:
            info = json.load(f)["distributedInfo"]
        sizes |= {g["pg_size"] for g in info["pg_config"]}
    assert sizes == {2}
    device = json.loads(open(DDP_DEVICE).read())
    device["memories"]["interconnect"] = {
        "name": "Interconnect (mesh)",
        "gbs": 400.0,
        "topology": "full_mesh",
        "links": 4,
    }
    path = tmp_path / "device.json"
    path.write_text(json.dumps(device))
    service = RooflineService(DDP, device_file=str(path))
    run = service.list_runs()["runs"][0]["run"]
    r = _ops(service, run)["c10d::allreduce_"]
    bw = r["interconnect_bytes"] / (r["total_time_us"] * 1e3)
    assert r["link_roof_gbs"] == pytest.approx(400.0 / 4, rel=1e-12)
    assert r["interconnect_bw"] == pytest.approx(bw, rel=1e-9)
    assert r["bound_by"] == "Interconnect"
    assert r["roofline_efficiency"] == pytest.approx(bw / 100.0, rel=1e-9)
    assert r["link_assumption"].startswith("group of 2: 1 of 4 links")
    (p,) = service.comm(run, "")["points"]
    assert p["link_gbs"] == pytest.approx(100.0, rel=1e-12) and p["link_count"] == 1
