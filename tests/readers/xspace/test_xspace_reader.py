"""The XSpace reader on small hand-built planes: every value derived by hand."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.protos import memory_access_pb2, xplane_pb2
from tb_roofline.readers.xspace.read import read_xspace
from tb_roofline.readers.xspace.xplane import load_xspace
from tb_roofline.synthetic import _Plane, _Ref


def _tpu_space(events, with_steps=True, plane_stats=None):
    """One TensorCore. `events`: (name, category, begin_ps, duration_ps, step, flops, bytes)."""
    space = xplane_pb2.XSpace()
    plane = _Plane(space.planes.add(id=0, name="/device:TPU:0"))
    for key, value in (
        plane_stats
        or {"peak_teraflops_per_second": 100.0, "peak_hbm_bw_gigabytes_per_second": 1000.0}
    ).items():
        plane.add_stat(plane.plane, key, value)
    ops = plane.plane.lines.add(id=1, name="XLA Ops", timestamp_ns=0)
    steps = plane.plane.lines.add(id=2, name="Steps", timestamp_ns=0)
    mds = {}
    for name, category, begin, dur, step, flops, nbytes in events:
        if name not in mds:
            mds[name] = plane.event_metadata(
                f"%{name} = ...",
                name,
                program_id=7,
                symbol_id=len(mds) + 1,
                hlo_category=_Ref(category),
                flops=flops,
                bytes_accessed=nbytes,
            )
        ev = ops.events.add(metadata_id=mds[name].id, offset_ps=begin, duration_ps=dur)
        if step is not None:
            plane.add_stat(ev, "group_id", step)
    if with_steps:
        for step in sorted({e[4] for e in events if e[4] is not None}):
            member = [e for e in events if e[4] == step]
            b = min(e[2] for e in member)
            end = max(e[2] + e[3] for e in member)
            md = plane.event_metadata(str(step))
            ev = steps.events.add(metadata_id=md.id, offset_ps=b, duration_ps=end - b)
            plane.add_stat(ev, "group_id", step)
    return space


def test_self_time_excludes_direct_children_only():
    # while [0, 100) holds fusion [10, 40) which holds nothing, and add [50, 60).
    space = _tpu_space(
        [
            ("while.1", "while", 0, 100, 0, 0, 0),
            ("fusion.2", "loop fusion", 10, 30, 0, 300, 30),
            ("add.3", "non-fusion elementwise", 50, 10, 0, 10, 40),
        ]
    )
    data = read_xspace(space, "h")
    t = data.ops
    by_name = {op: i for i, op in enumerate(t["operation"])}
    assert t["self_time_ps"][by_name["while.1"]] == 100 - 30 - 10
    assert t["self_time_ps"][by_name["fusion.2"]] == 30
    assert t["total_time_ps"][by_name["while.1"]] == 100
    assert bool(t["is_container"][by_name["while.1"]])
    assert data.core_spans[0].duration_ps == 100


def test_totals_multiply_per_execution_metadata():
    space = _tpu_space(
        [
            ("fusion.2", "loop fusion", 0, 10, 0, 300, 30),
            ("fusion.2", "loop fusion", 20, 12, 1, 300, 30),
        ]
    )
    t = read_xspace(space, "h").ops
    assert t["occurrences"].sum() == 2
    assert t["flops"].sum() == 600
    assert t["bytes"].sum() == 60
    assert t["hbm_bytes"].sum() == 60  # no breakdown: all bytes count as HBM
    assert sorted(t["step"].tolist()) == [0, 1]


def test_ref_value_stats_and_device_peaks():
    space = _tpu_space(
        [("fusion.2", "convolution fusion", 0, 10, 0, 1, 1)],
        plane_stats={
            "device_type_string": _Ref("TPU v9 Test"),
            "peak_teraflops_per_second": 200.0,
            "peak_hbm_bw_gigabytes_per_second": 2000.0,
            "peak_cmem_rd_bw_gigabytes_per_second": 50.0,
        },
    )
    data = read_xspace(space, "h")
    assert data.ops["category"][0] == "convolution fusion"  # hlo_category was a ref_value
    assert data.device.type == "TPU v9 Test"
    assert data.device.peak_gflops == 200_000.0
    assert data.device.has_cmem
    assert data.device.memory("hbm").gbs == 2000.0
    assert data.device.memory("cmem_read").gbs == 50.0


def test_memory_breakdown_is_split_by_space_and_direction():
    space = _tpu_space([("fusion.2", "loop fusion", 0, 10, 0, 100, 64)])
    plane = space.planes[0]
    msg = memory_access_pb2.MemoryAccessBreakdown()
    for op, mem, n in ((1, 1, 10), (2, 1, 6), (1, 2, 20), (2, 2, 5), (1, 3, 7), (2, 3, 3)):
        msg.memory_accessed.add(operation_type=op, memory_space=mem, bytes_accessed=n)
    md = next(iter(plane.event_metadata.values()))
    sid = max(plane.stat_metadata) + 1
    plane.stat_metadata[sid].id = sid
    plane.stat_metadata[sid].name = "memory_access_breakdown"
    md.stats.add(metadata_id=sid, bytes_value=msg.SerializeToString())
    t = read_xspace(space, "h").ops
    assert (
        t["hbm_bytes"][0],
        t["cmem_read_bytes"][0],
        t["cmem_write_bytes"][0],
        t["vmem_read_bytes"][0],
        t["vmem_write_bytes"][0],
    ) == (16, 20, 5, 7, 3)


def test_device_timing_overrides_event_offsets():
    space = _tpu_space([("fusion.2", "loop fusion", 0, 10, 0, 1, 1)])
    plane = _Plane(space.planes[0])
    plane._stat_ids = {m.name: k for k, m in space.planes[0].stat_metadata.items()}
    ev = space.planes[0].lines[0].events[0]
    plane.add_stat(ev, "device_offset_ps", 5)
    plane.add_stat(ev, "device_duration_ps", 40)
    t = read_xspace(space, "h").ops
    assert t["total_time_ps"][0] == 40


def test_sparsecore_planes_are_ignored_and_reported():
    space = _tpu_space([("fusion.2", "loop fusion", 0, 10, 0, 1, 1)])
    sc = space.planes.add(id=5, name="/device:TPU:0 SparseCore 0")
    sc.lines.add(name="XLA Ops")
    data = read_xspace(space, "h")
    assert len(data.core_spans) == 1
    assert [d.code for d in data.diagnostics] == ["sparsecore_ignored"]


def test_non_tpu_profile_says_what_is_missing():
    space = xplane_pb2.XSpace()
    space.planes.add(name="/host:CPU")
    data = read_xspace(space, "h")
    assert len(data.ops) == 0
    assert data.device.kind == "cpu"
    assert "no_xla_ops" in [d.code for d in data.diagnostics]


def _old(path):
    past = time.time() - 60
    os.utime(path, (past, past))
    return path


def test_corrupt_truncated_and_empty_files(tmp_path):
    good = _tpu_space([("fusion.2", "loop fusion", 0, 10, 0, 1, 1)]).SerializeToString()
    corrupt = tmp_path / "corrupt.xplane.pb"
    corrupt.write_bytes(b"\xff\xff\xff\xff garbage")
    with pytest.raises(ProfileFormatError, match="not a valid XSpace"):
        load_xspace(_old(str(corrupt)))
    truncated = tmp_path / "truncated.xplane.pb"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises(ProfileFormatError):
        load_xspace(_old(str(truncated)))
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    with pytest.raises(ProfileFormatError, match="empty"):
        load_xspace(_old(str(empty)))
    no_planes = tmp_path / "noplanes.xplane.pb"
    no_planes.write_bytes(xplane_pb2.XSpace(hostnames=["x"]).SerializeToString())
    with pytest.raises(ProfileFormatError, match="no planes"):
        load_xspace(_old(str(no_planes)))


def test_a_growing_unparsable_file_is_incomplete_and_size_limit(tmp_path):
    from writer import being_written

    good = _tpu_space([("fusion.2", "loop fusion", 0, 10, 0, 1, 1)]).SerializeToString()
    writing = tmp_path / "writing.xplane.pb"
    writing.write_bytes(good[:7])  # does not parse, and grows: still being written
    with being_written(writing), pytest.raises(ProfileIncompleteError):
        load_xspace(str(writing))
    with pytest.raises(ProfileFormatError) as exc:  # just written, not growing: damaged
        load_xspace(str(writing))
    assert not isinstance(exc.value, ProfileIncompleteError)
    big = tmp_path / "big.xplane.pb"
    big.write_bytes(good)
    with pytest.raises(ProfileTooLargeError, match="over the limit"):
        load_xspace(str(big), max_bytes=10)


def test_steps_need_markers_and_ops():
    space = _tpu_space([("fusion.2", "loop fusion", 0, 10, 3, 1, 1)], with_steps=False)
    data = read_xspace(space, "h")
    assert data.steps == []
    space = _tpu_space([("fusion.2", "loop fusion", 0, 10, 3, 1, 1)])
    data = read_xspace(space, "h")
    assert [(s.step, s.duration_ps) for s in data.steps] == [(3, 10)]
    assert np.all(data.ops["step"] == 3)


def test_ops_without_symbol_id_are_kept():
    """XProf drops ops whose metadata lacks symbol_id; their time is real, so we keep them."""
    space = _tpu_space([("fusion.2", "loop fusion", 0, 10, 0, 5, 1)])
    plane = space.planes[0]
    md = next(iter(plane.event_metadata.values()))
    sid = next(k for k, m in plane.stat_metadata.items() if m.name == "symbol_id")
    kept = [s for s in md.stats if s.metadata_id != sid]
    del md.stats[:]
    md.stats.extend(kept)
    t = read_xspace(space, "h").ops
    assert t["operation"].tolist() == ["fusion.2"] and t["flops"][0] == 5


def test_damaged_files_give_a_format_error_never_a_crash(tmp_path):
    """Seeded byte flips and truncations: each file reads, or fails as a ProfileFormatError."""
    import random

    from tb_roofline.readers.xspace.read import read_xspace_file
    from tb_roofline.synthetic import SynthConfig, make_tpu_xspace

    good = make_tpu_xspace(SynthConfig(seed=3, num_cores=2, num_steps=2, ops_per_step=30))
    good = good.SerializeToString()
    outcomes = {"read": 0, "error": 0}
    for seed in range(150):
        rng = random.Random(seed)
        data = bytearray(good)
        for _ in range(rng.choice([1, 3, 10])):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data))]
        path = tmp_path / f"{seed}.xplane.pb"
        path.write_bytes(bytes(data))
        try:
            read_xspace_file(_old(str(path)), "h")
            outcomes["read"] += 1
        except ProfileFormatError:
            outcomes["error"] += 1
    assert outcomes["read"] and outcomes["error"]


def test_non_finite_peaks_are_unknown_not_crashes():
    space = _tpu_space(
        [("fusion.2", "loop fusion", 0, 10, 0, 100, 64)],
        plane_stats={
            "peak_teraflops_per_second": float("inf"),
            "peak_hbm_bw_gigabytes_per_second": float("nan"),
        },
    )
    data = read_xspace(space, "h")
    assert data.device.peak_gflops == 0 and not data.device.peaks_known
    assert data.device.memory("hbm").gbs == 0


V6E = os.path.join(
    os.path.dirname(TESTS),
    "testdata/demo/v6e_train/plugins/profile/2026_11_29_10_00_00/tpu-v6e-host0.xplane.pb",
)


def _module_names(space) -> dict:
    """program id -> module name, read by hand from the `XLA Modules` lines' metadata."""
    names = {}
    for plane in space.planes:
        stat = {m.name: k for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            if line.name != "XLA Modules":
                continue
            for ev in line.events:
                md = plane.event_metadata[ev.metadata_id]
                pid = [
                    s.uint64_value or s.int64_value
                    for s in md.stats
                    if s.metadata_id == stat.get("program_id")
                ]
                names[str(pid[0])] = md.display_name
    return names


@pytest.mark.parametrize("big_id", [False, True])
def test_program_names_come_from_the_modules_line(tmp_path, big_id):
    """Programs are named by their `XLA Modules` events, `<name>(<program id>)`, also when
    the events' metadata has no program_id stat nor display name."""
    space = xplane_pb2.XSpace.FromString(open(V6E, "rb").read())
    expected = _module_names(space)
    assert expected == {"1011": "jit_train_step"}
    if big_id:  # a real profile's uint64 program id, on the ops and in the modules' names
        expected = {"12190760917235803885": "jit_train_step"}
    for plane in space.planes:
        stat = {m.name: k for k, m in plane.stat_metadata.items()}
        modules = {
            ev.metadata_id
            for line in plane.lines
            if line.name == "XLA Modules"
            for ev in line.events
        }
        for mid, md in plane.event_metadata.items():
            for s in md.stats:
                if big_id and s.metadata_id == stat.get("program_id"):
                    s.uint64_value = 12190760917235803885
            if mid in modules:  # the name alone says which program it is
                kept = [s for s in md.stats if s.metadata_id != stat["program_id"]]
                del md.stats[:]
                md.stats.extend(kept)
                md.name = f"jit_train_step({next(iter(expected))})"
                md.display_name = ""
    path = tmp_path / "h.xplane.pb"
    path.write_bytes(space.SerializeToString())
    from tb_roofline.readers.xspace.read import read_xspace_file

    ops = read_xspace_file(str(path), "h").ops
    assert len(ops) and set(zip(ops["program_id"].tolist(), ops["program"].tolist())) == set(
        expected.items()
    )
    # and as before where the stat is there: the demo profile as written
    ops = read_xspace_file(V6E, "h").ops
    assert set(ops["program"].tolist()) == {"jit_train_step"}
