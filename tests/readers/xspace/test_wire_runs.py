"""Long runs of one event layout through the wire decoder (readers/xspace/wire.py): the layout
checks made over every event of a window at once (`_tags_hold`, the lengths), the stat ids
compared once where every event names the same stat (`_hits`), and the op lines' windows
handed on in batches (readers/xspace/tpu/plane.py `_Batches`), each against protobuf's
reading of the same bytes (`plane_lines.protobuf_line_events`)."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from test_line_decoding import _varint

from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.xspace import wire as xwire
from tb_roofline.readers.xspace.tpu import file as tpu_file
from tb_roofline.readers.xspace.tpu import plane as tpu_plane
from tb_roofline.readers.xspace.tpu import plane_lines
from tb_roofline.readers.xspace.tpu.plane_lines import protobuf_line_events

IDS = {"group_id": 1, "device_offset_ps": 2, "device_duration_ps": 3, "dma_stall_duration_ps": 4}


def _line(rng, n: int, stat_ids) -> xplane_pb2.XLine:
    """n events of one layout (metadata id, offset, duration, three int64 stats); the stat at
    place i names one of `stat_ids[i]`, values of every width."""
    line = xplane_pb2.XLine(timestamp_ns=5)
    for _ in range(n):
        ev = line.events.add(
            metadata_id=rng.choice([1, 2, 300]),
            offset_ps=rng.randrange(1, 2 ** rng.randrange(1, 62)),
            duration_ps=rng.randrange(1, 2 ** rng.randrange(1, 40)),
        )
        for choices in stat_ids:
            value = rng.randrange(1, 2 ** rng.randrange(1, 63))
            ev.stats.add(metadata_id=rng.choice(choices), int64_value=value)
    return line


def _decoded(data: bytes):
    """The wire decoder's columns of a serialized line, or None where it does not take it."""
    chunks: list = []
    got = plane_lines.collect(xwire.Source(data), 0, len(data), IDS, lambda *c: chunks.append(c))
    if got is None:
        return None
    return tuple(np.concatenate(c) for c in zip(*chunks))


def _same(ref, got):
    for r, g in zip(ref, got):
        assert g.dtype == np.int64
        np.testing.assert_array_equal(r, g)


@pytest.mark.parametrize("window", [64, 1000, xwire.WINDOW])
@pytest.mark.parametrize(
    "stat_ids",
    [
        ([1], [2], [3]),  # every event names the same stats (one comparison each)
        ([1, 4], [2], [3, 9]),  # mixed: some events name another stat, or none wanted
        ([2, 2, 130], [3], [1]),  # an id of two bytes among one-byte ids
        ([200], [2], [3]),  # every id two bytes long
    ],
)
def test_long_runs_decode_as_protobuf_reads_them(stat_ids, window, monkeypatch):
    monkeypatch.setattr(xwire, "WINDOW", window)
    rng = random.Random(repr((stat_ids, window)))
    line = _line(rng, 3000, stat_ids)
    got = _decoded(line.SerializeToString())
    assert got is not None  # one layout throughout: the wire path takes it
    _same(protobuf_line_events(line, IDS), got)


def _event(tag: bytes, md: int) -> bytes:
    body = tag + _varint(md) + b"\x18" + _varint(7)
    return b"\x22" + _varint(len(body)) + body


@pytest.mark.parametrize("where", [0, 1, 500, 999])
@pytest.mark.parametrize(
    "tag",
    [
        b"\x88\x00",  # field 1, varint, in two bytes: the same field to protobuf
        b"\x80\x08",  # ends in the layout's tag byte, but is field 128 (unknown: skipped)
    ],
)
def test_a_tag_of_two_bytes_stops_the_run(where, tag, monkeypatch):
    # Not the layout's single tag byte: the run stops before that event, and the event is
    # read as protobuf reads it.
    monkeypatch.setattr(xwire, "WINDOW", 512)
    events = [_event(tag if i == where else b"\x08", i % 5 + 1) for i in range(1000)]
    data = b"".join(events)
    line = xplane_pb2.XLine.FromString(data)
    got = plane_lines.line(xwire.Source(data), (0, len(data)), IDS)[1]
    _same(protobuf_line_events(line, IDS), got)


@pytest.mark.parametrize("where", [0, 333, 999])
def test_a_wrong_length_stops_the_run(where):
    # An event whose stat length covers one byte more than the stat: the bytes then parse
    # as something else, or not at all; never as the layout's event.
    events = []
    for i in range(1000):
        stat = b"\x08\x01\x20" + _varint(i + 1)
        size = len(stat) + (1 if i == where else 0)
        body = b"\x08\x01\x22" + _varint(size) + stat
        events.append(b"\x22" + _varint(len(body)) + body)
    data = b"".join(events)
    try:
        line = xplane_pb2.XLine.FromString(data)
    except DecodeError:
        with pytest.raises(xwire.WireError):
            plane_lines.line(xwire.Source(data), (0, len(data)), IDS)
        return
    got = plane_lines.line(xwire.Source(data), (0, len(data)), IDS)[1]
    _same(protobuf_line_events(line, IDS), got)


@pytest.mark.parametrize("batch", [1, 700, 1 << 30])
def test_batches_of_windows_give_the_same_plane(batch, monkeypatch):
    # A real profile's planes converted with the op lines' windows handed on one at a time,
    # in batches, and all at once: the same rows and timeline.
    path = "testdata/demo/v6e_train/plugins/profile/2026_11_29_10_00_00/tpu-v6e-host0.xplane.pb"
    plan = tpu_file.plan_file(path, "host")
    monkeypatch.setattr(xwire, "WINDOW", 4096)
    reference = [tpu_file.convert_plane_at(path, s, e, c, plan.size) for c, s, e in plan.cores]
    monkeypatch.setattr(tpu_plane, "BATCH_EVENTS", batch)
    for ref, (c, s, e) in zip(reference, plan.cores):
        got = tpu_file.convert_plane_at(path, s, e, c, plan.size)
        assert got.rows.keys() == ref.rows.keys()
        for k, v in ref.rows.items():
            assert type(got.rows[k]) is type(v)
            for a, b in zip(_arrays(v), _arrays(got.rows[k])):
                np.testing.assert_array_equal(a, b)
                assert a.dtype == b.dtype
        assert pickle.dumps(got.timeline) == pickle.dumps(ref.timeline)  # bit for bit
        assert got.fixes == ref.fixes and (got.lo, got.hi) == (ref.lo, ref.hi)


def _arrays(column) -> list:
    """The arrays of a plane's row column (none, one, or a `Sparse`'s index and values)."""
    if column is None:
        return []
    if isinstance(column, tpu_plane.Sparse):
        return [column.at, column.values, np.array([column.like or ""])]
    return [column]
