"""The wire-format TPU reader (readers/xspace/wire.py, readers/xspace/tpu/plane.py,
readers/xspace/tpu/file.py) against the protobuf-object oracle (tests/tpu_oracle.py): every
column of random lines, whole op tables of generated and hand-made profiles, with windows and
segments small enough that events, nests and steps cross them."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import tpu_oracle
from test_line_decoding import _ids, _random_line, _varint

from tb_roofline.protos import xplane_pb2
from tb_roofline.readers.xspace import op_rows
from tb_roofline.readers.xspace import read as xspace
from tb_roofline.readers.xspace import wire as xwire
from tb_roofline.readers.xspace.tpu import file as tpu_file
from tb_roofline.readers.xspace.tpu import plane as tpu_plane
from tb_roofline.readers.xspace.tpu import plane_lines
from tb_roofline.readers.xspace.tpu.plane_lines import protobuf_line_events as _line_events
from tb_roofline.synthetic import SynthConfig, write_tpu_session, write_xspace
from tb_roofline.table.op_table import ALL_COLUMNS


@pytest.fixture(params=[96, 1 << 18], ids=["tiny-windows", "default-windows"])
def windows(request, monkeypatch):
    monkeypatch.setattr(xwire, "WINDOW", request.param)
    monkeypatch.setattr(op_rows, "SEGMENT_EVENTS", 7 if request.param < 1000 else 1 << 15)
    return request.param


def _wire_columns(data: bytes, ids: dict):
    chunks = []
    got = plane_lines.collect(xwire.Source(data), 0, len(data), ids, lambda *c: chunks.append(c))
    if got is None:
        return None
    if not chunks:
        return tuple(np.zeros(0, np.int64) for _ in range(6))
    return tuple(np.concatenate(c) for c in zip(*chunks))


@pytest.mark.slow
@pytest.mark.parametrize(
    "kinds", [("int64", "uint64", "ref"), ("int64", "uint64", "ref", "double", "str", "bytes")]
)
def test_random_lines_decode_exactly_or_not_at_all(kinds, windows):
    rng = random.Random(len(kinds))
    decoded = 0
    for _ in range(300):
        line = _random_line(rng, rng.randrange(0, 60), kinds)
        ids = _ids(rng)
        ref = _line_events(line, ids)
        got = _wire_columns(line.SerializeToString(), ids)
        if got is None:
            continue
        decoded += 1
        for r, g in zip(ref, got):
            assert g.dtype == np.int64
            np.testing.assert_array_equal(r, g)
    if "str" not in kinds:
        assert decoded > 50  # most varint-only lines take this path


def _canonical(data):
    cols = {k: data.ops[k] for k in ALL_COLUMNS}
    order = np.lexsort(
        (cols["step"], cols["core"], cols["operation"].astype(str), cols["program_id"].astype(str))
    )
    return {k: v[order] for k, v in cols.items()}


def _same_columns(ref, got):
    a, b = _canonical(ref), _canonical(got)
    for k in ALL_COLUMNS:
        if a[k].dtype == object:
            assert a[k].tolist() == b[k].tolist(), k
        else:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _same_as_reference(path):
    ref = tpu_oracle.read_file(path, "h")
    got = xspace.read_xspace_file(path, "h")
    _same_columns(ref, got)
    assert ref.steps == got.steps and ref.core_spans == got.core_spans
    assert ref.device == got.device
    assert [d.to_json() for d in ref.diagnostics] == [d.to_json() for d in got.diagnostics]
    _same_timeline(ref.timeline, got.timeline)
    assert _shapes(ref.op_shapes) == _shapes(got.op_shapes)
    return got


def _same_timeline(ref, got):
    """The guidance's timeline facts: the same windows, adjacent pairs and exposed times."""
    assert (ref is None) == (got is None)
    if ref is None:
        return
    order = [np.lexsort((t.windows["step"], t.windows["core"])) for t in (ref, got)]
    for c in ref.windows:
        np.testing.assert_allclose(ref.windows[c][order[0]], got.windows[c][order[1]], err_msg=c)
    pairs = [
        sorted((p.first, p.second, p.count, p.gap_ps, p.shorter_ps) for p in t.pairs)
        for t in (ref, got)
    ]
    assert pairs[0] == pairs[1]
    assert ref.exposed_by_op == pytest.approx(got.exposed_by_op)


def _shapes(shapes):
    return {
        k: sorted((u.kind, u.dims, u.text, u.calls, u.time_ps) for u in v)
        for k, v in (shapes or {}).items()
    }


CONFIGS = [
    SynthConfig(seed=1, num_cores=1),
    SynthConfig(seed=2, num_cores=2, with_infeed_outfeed=False, num_steps=6),
    SynthConfig(seed=3, num_cores=1, with_while=False),
    SynthConfig(seed=4, chip="v4", num_cores=2, ops_per_step=40),
    SynthConfig(seed=5, num_cores=2, with_steps=False),
    SynthConfig(seed=6, num_cores=3, with_device_timing=False),
    SynthConfig(seed=7, num_cores=2, host_offload_pairs=3, num_steps=5),
    SynthConfig(
        seed=8,
        num_cores=1,
        num_steps=30,
        ops_per_step=20,
        distinct_ops=20,
        op_order="cycle",
        with_sparse_core=False,
    ),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"seed{c.seed}")
def test_generated_profiles_match_the_reference(cfg, windows, tmp_path):
    path = write_tpu_session(str(tmp_path), "", "s", [cfg])[0]
    _same_as_reference(path)


def _plane(events, metadata=None, line_extra=None, stats=("group_id", "dma_stall_duration_ps")):
    """A one-TensorCore XSpace; events: (metadata id, offset, duration, {stat: value})."""
    space = xplane_pb2.XSpace(hostnames=["h"])
    plane = space.planes.add(id=0, name="/device:TPU:0")
    for i, name in enumerate(
        (
            "peak_teraflops_per_second",
            "peak_hbm_bw_gigabytes_per_second",
            "hlo_category",
            "flops",
            "bytes_accessed",
            "program_id",
        )
        + stats,
        start=1,
    ):
        plane.stat_metadata[i].id = i
        plane.stat_metadata[i].name = name
    sid = {m.name: k for k, m in plane.stat_metadata.items()}
    plane.stats.add(metadata_id=sid["peak_teraflops_per_second"], double_value=100.0)
    plane.stats.add(metadata_id=sid["peak_hbm_bw_gigabytes_per_second"], double_value=500.0)
    for mid, (name, category, flops) in (
        metadata
        or {
            1: ("fusion.1", "loop fusion", 1000),
            2: ("while.2", "while", 0),
            3: ("copy.3", "data formatting", 0),
        }
    ).items():
        md = plane.event_metadata[mid]
        md.id, md.name, md.display_name = mid, f"%{name} = f32[8] op()", name
        md.stats.add(metadata_id=sid["hlo_category"], str_value=category)
        md.stats.add(metadata_id=sid["flops"], uint64_value=flops)
        md.stats.add(metadata_id=sid["bytes_accessed"], uint64_value=64)
        md.stats.add(metadata_id=sid["program_id"], uint64_value=7)
    line = plane.lines.add(id=1, name="XLA Ops", timestamp_ns=10, **(line_extra or {}))
    for mid, offset, dur, st in events:
        ev = line.events.add(metadata_id=mid, duration_ps=dur)
        if offset is None:
            ev.num_occurrences = 3
        else:
            ev.offset_ps = offset
        for name, value in st.items():
            stat = ev.stats.add(metadata_id=sid.get(name, 99))
            if isinstance(value, str):
                stat.str_value = value
            else:
                stat.int64_value = value
    return space


def _events(rng, n, nested=True):
    out, t = [], 1000
    for i in range(n):
        if nested and i % 7 == 3:  # a loop around the next two ops
            out.append((2, t, 3000, {"group_id": i // 10}))
            out.append((1, t, 1000, {"group_id": i // 10}))
            out.append((1, t + 1000, 0, {"group_id": i // 10}))  # zero length, at a boundary
            out.append((3, t + 1000, 2000, {"group_id": i // 10, "dma_stall_duration_ps": 5}))
            t += 3000
        else:
            out.append((rng.choice((1, 3)), t, rng.randrange(1, 900), {"group_id": i // 10}))
            t += rng.choice((1000, 900))  # back to back, or with a gap
    return out


@pytest.mark.parametrize(
    "case",
    [
        "nested",
        "shuffled",
        "occurrences",
        "string_stat",
        "missing_metadata",
        "line_tail",
        "two_layouts",
    ],
)
def test_hand_made_planes_match_the_reference(case, windows, tmp_path):
    rng = random.Random(case)
    events = _events(rng, 60)
    extra = None
    if case == "shuffled":
        rng.shuffle(events)
    elif case == "occurrences":
        events[5] = (1, None, 10, {"group_id": 0})
    elif case == "string_stat":
        events[9][3]["other"] = "text"
    elif case == "missing_metadata":
        events[4] = (42, events[4][1], events[4][2], events[4][3])
    elif case == "line_tail":
        extra = {"duration_ps": 77, "display_name": "ops", "display_id": 3}
    elif case == "two_layouts":
        for e in events[20:40]:
            e[3].pop("group_id", None)
    path = write_xspace(_plane(events, line_extra=extra), str(tmp_path / "h.xplane.pb"))
    _same_as_reference(path)


def test_line_written_after_the_metadata(tmp_path):
    """Protobuf writes fields in number order; a plane whose line comes after its metadata
    is still read (from the rest's parse)."""
    space = _plane(_events(random.Random(1), 30))
    plane = space.planes[0]
    line = plane.lines[0].SerializeToString()
    del plane.lines[:]
    body = plane.SerializeToString() + b"\x1a" + _varint(len(line)) + line
    data = b"\x0a" + _varint(len(body)) + body + b"\x22\x01h"  # and the hostnames
    path = tmp_path / "h.xplane.pb"
    path.write_bytes(data)
    assert xplane_pb2.XSpace.FromString(data).planes[0].lines[0].SerializeToString() == line
    _same_as_reference(str(path))


def test_tpu_files_take_the_wire_path(tmp_path, monkeypatch):
    path = write_tpu_session(str(tmp_path), "", "s", [SynthConfig(seed=3, num_cores=2)])[0]

    def refuse(*args, **kwargs):
        raise AssertionError("parsed the whole file")

    monkeypatch.setattr(xspace, "parse_xspace", refuse)
    from tb_roofline.readers.xspace import xla_gpu_cpu  # imported when a file needs it

    monkeypatch.setattr(xla_gpu_cpu, "read_gpu_cpu_xspace", refuse)
    assert len(xspace.read_xspace_file(path, "h").ops)


def test_a_plane_is_read_piece_by_piece(tmp_path, monkeypatch):
    """Only a window of a line's events is in memory at once, not the plane."""
    cfg = SynthConfig(
        seed=9, num_cores=1, num_steps=40, ops_per_step=500, distinct_ops=10, with_sparse_core=False
    )
    path = write_tpu_session(str(tmp_path), "", "s", [cfg])[0]
    reads = []
    real = xwire.Source.read

    def read(self, pos, n, scratch=None):
        reads.append(n)
        return real(self, pos, n, scratch)

    monkeypatch.setattr(xwire.Source, "read", read)
    monkeypatch.setattr(xwire, "WINDOW", 1 << 14)
    assert _same_as_reference(path) is not None
    plan = tpu_file.plan_file(path, "h")
    plane = plan.cores[0][2] - plan.cores[0][1]
    assert max(reads) <= 1 << 14 < plane / 16, (max(reads), plane)


def test_hosts_of_one_program_decode_its_op_metadata_once(tmp_path, monkeypatch):
    """A pod's hosts run one program, so each op's metadata is decoded once per
    process among the files kept, not once per host; the hosts read exactly as one by one,
    and a host of another program (other costs under the same names) keeps its own."""
    from tb_roofline.execute import pool

    cfgs = [SynthConfig(seed=5, num_cores=1, hostname=f"h{i}") for i in range(3)] + [
        SynthConfig(seed=6, num_cores=1, hostname="other")
    ]
    paths = write_tpu_session(str(tmp_path), "", "s", cfgs)
    calls = []
    real = tpu_plane.op_info
    monkeypatch.setattr(tpu_plane, "op_info", lambda ps, md: calls.append(1) or real(ps, md))
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "1")  # this process: the calls are countable
    together = pool.read_files([(p, "xplane", os.path.basename(p), None) for p in paths])
    shared = len(calls)
    alone, per_file = [], []
    for p in paths:  # one by one: each file decodes its own
        calls.clear()
        alone.append(xspace.read_xspace_file(p, os.path.basename(p)))
        per_file.append(len(calls))
    assert per_file[0] == per_file[1] == per_file[2] > 0
    # Together: the first host's, then nothing for its two repeats, then the other program's.
    assert max(per_file) <= shared <= per_file[0] + per_file[3] < sum(per_file)
    for a, b in zip(together, alone):
        _same_columns(b, a)
    # The other program's costs are its own, not the first program's.
    assert not np.array_equal(_canonical(alone[0])["flops"], _canonical(alone[3])["flops"])


def test_an_op_info_holds_every_key_text():
    """A plane's op keys are read from its Infos by the KEY_TEXTS names (and the file's by
    the same names): each must be a field of the Info."""
    assert set(tpu_plane.KEY_TEXTS) <= set(tpu_plane.Info._fields)
