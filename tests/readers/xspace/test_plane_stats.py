"""A plane's stat lookups (readers/xspace/xplane.py `PlaneStats`): the wanted stats of an op's
metadata read in one loop give what reading each stat with `value` gives."""

from __future__ import annotations

from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.xspace.xplane import PlaneStats


def _plane() -> xplane_pb2.XPlane:
    plane = xplane_pb2.XPlane(name="/device:TPU:0")
    for sid, name in enumerate(
        [
            "flops",
            "hlo_category",
            "source",
            "memory_access_breakdown",
            "program_id",
            "convolution",
            "unwanted",
            "bytes_accessed",
        ],
        1,
    ):
        plane.stat_metadata[sid].id = sid
        plane.stat_metadata[sid].name = name
    return plane


def test_wanted_stats_in_one_loop_equal_each_stat_read_alone():
    plane = _plane()
    ps = PlaneStats(plane)
    md = xplane_pb2.XEventMetadata(id=1, name="%dot.1 = f32[2]{0} dot()")
    md.stats.add(metadata_id=1, uint64_value=2**64 - 1)
    md.stats.add(metadata_id=2, ref_value=6)  # a category named by reference
    md.stats.add(metadata_id=3, str_value="model.py:3")
    md.stats.add(metadata_id=4, bytes_value=b"\x0a\x00")
    md.stats.add(metadata_id=5, int64_value=-7)
    md.stats.add(metadata_id=7, double_value=1.5)  # not wanted
    md.stats.add(metadata_id=8, double_value=3.25)
    md.stats.add(metadata_id=8)  # repeated, no value: the last wins
    md.stats.add(metadata_id=3, ref_value=999)  # a reference to nothing reads ""
    wanted = ps.wanted(
        (
            "flops",
            "hlo_category",
            "source",
            "memory_access_breakdown",
            "program_id",
            "bytes_accessed",
            "missing",
        )
    )
    reference = {}
    for st in md.stats:
        if st.metadata_id in wanted:
            reference[wanted[st.metadata_id]] = ps.value(st)
    got = ps.values_of(md.stats, wanted)
    assert got == reference
    assert [type(v) for v in got.values()] == [type(v) for v in reference.values()]
    assert got == {
        "flops": 2**64 - 1,
        "hlo_category": "convolution",
        "source": "",
        "memory_access_breakdown": b"\x0a\x00",
        "program_id": -7,
        "bytes_accessed": None,
    }
