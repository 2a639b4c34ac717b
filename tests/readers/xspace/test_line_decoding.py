"""Self times (readers/self_time.py), and the token decoder and plain sums of the test oracle
(tests/tpu_oracle.py), against the per-event protobuf decoding
(plane_lines.protobuf_line_events)."""

import random

import numpy as np
import pytest
import tpu_oracle as xf

from tb_roofline.protos import xplane_pb2, xplane_view_pb2
from tb_roofline.readers import self_time
from tb_roofline.readers.self_time import self_times_by_stack as _self_times
from tb_roofline.readers.xspace.tpu.plane_lines import protobuf_line_events as _line_events
from tb_roofline.readers.xspace.xplane import PlaneStats
from tb_roofline.synthetic import SynthConfig, make_tpu_xspace


def _same(ref, got):
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        assert g.dtype == np.int64
        np.testing.assert_array_equal(r, g)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _line_bytes(raws, timestamp_ns=0) -> bytes:
    """An XLine holding these serialized events exactly as given (non-canonical ones too)."""
    head = b"\x18" + _varint(timestamp_ns) if timestamp_ns else b""
    return head + b"".join(b"\x22" + _varint(len(r)) + r for r in raws)


def _check_raw(data: bytes, ids):
    """The token path is exact whenever it decodes; else it says None (or the packed parse
    refuses the bytes) and the reader takes the per-event path. Returns the reference."""
    full = xplane_pb2.XLine.FromString(data)
    ref = _line_events(full, ids)
    try:
        tok = xplane_view_pb2.XLineTokens.FromString(data)
    except Exception as exc:  # not varints: the caller falls back
        assert "DecodeError" in type(exc).__name__ or "Error parsing" in str(exc), exc
        return ref, None
    got = xf.decode_tokens(tok.event_tokens, tok.timestamp_ns, ids, len(full.events))
    if got is not None:
        _same(ref, got)
    return ref, got


def _check_space(space):
    n = 0
    for plane in space.planes:
        ids = PlaneStats(plane).ids
        for line in plane.lines:
            ref, got = _check_raw(line.SerializeToString(), ids)
            assert got is not None, "synthetic TPU lines must take the token path"
            _same(_self_times(ref[1], ref[2]), self_time.self_times(got[1], got[2]))
            n += len(ref[0])
    return n


@pytest.mark.parametrize(
    "cfg",
    [
        SynthConfig(seed=1),
        SynthConfig(seed=2, with_device_timing=False),
        SynthConfig(seed=3, with_steps=False, with_while=False),
        SynthConfig(
            seed=4,
            num_cores=1,
            num_steps=2,
            ops_per_step=200,
            distinct_ops=50,
            with_infeed_outfeed=False,
        ),
        SynthConfig(seed=5, with_device_timing=False, with_steps=False),
    ],
)
def test_synthetic_profiles(cfg):
    assert _check_space(make_tpu_xspace(cfg)) > 0


STAT_NAMES = [
    "group_id",
    "device_offset_ps",
    "device_duration_ps",
    "dma_stall_duration_ps",
    "other",
]


def _random_line(rng, n, kinds):
    """An XLine with n random events; kinds: the stat value kinds allowed."""
    line = xplane_pb2.XLine(timestamp_ns=rng.choice([0, 1, 5_000_000_000]))
    for _ in range(n):
        ev = line.events.add()
        if rng.random() < 0.9:
            ev.metadata_id = rng.choice([0, 1, 2, 300, 2**40, -7])
        r = rng.random()
        if r < 0.6:
            ev.offset_ps = rng.choice([0, 1, 127, 128, 10**12, -5, rng.randrange(-(2**62), 2**62)])
        elif r < 0.8:
            ev.num_occurrences = rng.choice([0, 1, 3, 1000])
        if rng.random() < 0.8:
            ev.duration_ps = rng.choice([0, 1, 10**6, -1, rng.randrange(0, 2**62)])
        for _ in range(rng.choice([0, 0, 1, 2, 3, 5])):
            st = ev.stats.add()
            if rng.random() < 0.95:
                st.metadata_id = rng.choice([0, 1, 2, 3, 4, 5, 9])
            kind = rng.choice(kinds)
            if kind == "int64":
                st.int64_value = rng.choice(
                    [0, 1, -1, -(2**63), 2**63 - 1, rng.randrange(-(2**40), 2**40)]
                )
            elif kind == "uint64":
                st.uint64_value = rng.choice([0, 1, 2**32, 2**63 - 1, rng.randrange(0, 2**50)])
            elif kind == "ref":
                st.ref_value = rng.choice([0, 1, 7])
            elif kind == "double":
                st.double_value = rng.random()
            elif kind == "str":
                st.str_value = rng.choice(["", "x", "\u00e9t\u00e9"])
            elif kind == "bytes":
                st.bytes_value = bytes(rng.randrange(256) for _ in range(rng.randrange(4)))
    return line


def _ids(rng):
    ids = {name: i + 1 for i, name in enumerate(STAT_NAMES)}
    if rng.random() < 0.2:
        del ids[rng.choice(STAT_NAMES)]
    return ids


def _check_line(line, ids):
    return _check_raw(line.SerializeToString(), ids)[0]


@pytest.mark.parametrize("seed", range(30))
def test_random_varint_lines(seed):
    rng = random.Random(seed)
    line = _random_line(rng, rng.choice([1, 2, 10, 300]), ["int64", "uint64", "ref", "none"])
    _check_line(line, _ids(rng))


@pytest.mark.parametrize("seed", range(15))
def test_random_lines_with_fallback_kinds(seed):
    rng = random.Random(1000 + seed)
    line = _random_line(
        rng, rng.choice([1, 5, 100]), ["int64", "uint64", "double", "str", "bytes", "ref"]
    )
    _check_line(line, _ids(rng))


def test_empty_line_and_empty_events():
    ids = {"group_id": 1}
    got = _check_line(xplane_pb2.XLine(timestamp_ns=3), ids)
    assert all(len(a) == 0 for a in got)
    line = xplane_pb2.XLine(timestamp_ns=3)
    line.events.add()
    line.events.add()
    got = _check_line(line, ids)
    assert got[1].tolist() == [3000, 3000] and got[5].tolist() == [1, 1]


def test_hand_built_values():
    ids = {
        "group_id": 1,
        "device_offset_ps": 2,
        "device_duration_ps": 3,
        "dma_stall_duration_ps": 4,
    }
    line = xplane_pb2.XLine(timestamp_ns=10)
    e = line.events.add(metadata_id=5, offset_ps=-3, duration_ps=7)
    e.stats.add(metadata_id=1, uint64_value=2**63 - 1)  # uint64 group id
    e.stats.add(metadata_id=4, int64_value=-9)  # negative int64: 10-byte varint
    e = line.events.add(metadata_id=6, num_occurrences=4, duration_ps=2)
    e.stats.add(metadata_id=2, int64_value=123456789012345)  # absolute begin
    e.stats.add(metadata_id=3, uint64_value=11)
    e.stats.add(metadata_id=1, int64_value=-1)
    e.stats.add(metadata_id=1, int64_value=8)  # the last one wins
    e = line.events.add(metadata_id=7, offset_ps=1)
    e.stats.add(metadata_id=1, ref_value=3)  # a ref reads 0
    e.stats.add(metadata_id=1)  # no value: 0
    got = _check_line(line, ids)
    assert got[3].tolist() == [2**63 - 1, 8, 0]
    assert got[4].tolist() == [-9, 0, 0]
    assert got[5].tolist() == [1, 4, 1]
    assert got[1].tolist() == [10_000 - 3, 123456789012345, 10_001]


def test_repeated_scalar_fields_last_wins():
    ids = {"group_id": 1}
    # metadata_id twice, offset then num_occurrences (oneof: the last one wins), a stat whose
    # metadata id and value appear twice.
    stat = b"\x08\x01\x20\x05\x08\x01\x18\x06"
    raw = b"\x08\x02\x08\x03\x10\x05\x28\x02\x18\x04" + b"\x22" + bytes([len(stat)]) + stat
    ref, _ = _check_raw(_line_bytes([raw]), ids)
    assert ref[0].tolist() == [3] and ref[3].tolist() == [6] and ref[5].tolist() == [2]


def test_long_stats_and_non_canonical_varints():
    ids = {"group_id": 1, "dma_stall_duration_ps": 2}
    stat = b"".join([b"\x08\x01\x20" + bytes([k]) for k in range(1, 12)])  # 11 pairs
    raw = b"\x08\x85\x00" + b"\x22" + bytes([len(stat)]) + stat  # metadata id 5, non-minimal
    _check_raw(_line_bytes([raw, b"\x08\x01\x22\x00", raw]), ids)


def test_unknown_fields_fall_back():
    ids = {"group_id": 1}
    raws = [
        b"\x08\x01\x30\x05",
        b"\x08\x02\x3a\x01x",
    ]  # unknown varint field 6, unknown LEN field 7
    assert _check_raw(_line_bytes(raws), ids)[1] is None


def _random_intervals(rng, n):
    begin, dur = [], []
    for _ in range(n):
        r = rng.random()
        if begin and r < 0.3:  # nested in, equal to or sharing an edge with an earlier one
            k = rng.randrange(len(begin))
            b0, d0 = begin[k], dur[k]
            b = rng.choice([b0, b0 + rng.randrange(0, d0 + 1)])
            d = rng.choice([0, b0 + d0 - b, rng.randrange(0, b0 + d0 - b + 1)])
        else:
            b = rng.randrange(0, 100)
            d = rng.choice([0, 0, 1, rng.randrange(0, 50), rng.randrange(0, 500)])
        begin.append(b)
        dur.append(d)
    return np.array(begin, np.int64), np.array(dur, np.int64)


@pytest.mark.parametrize("seed", range(60))
def test_self_times_random_intervals(seed):
    rng = random.Random(seed)
    begin, dur = _random_intervals(rng, rng.choice([1, 2, 5, 50, 400]))
    _same(_self_times(begin, dur), self_time.self_times(begin, dur))
    order = np.lexsort((-dur, begin))  # already sorted input takes the no-sort path
    _same(_self_times(begin[order], dur[order]), self_time.self_times(begin[order], dur[order]))


def test_self_times_deep_nesting_and_edges():
    n = 300  # deeper than the peeling limit: the stack fallback
    begin = np.arange(n, dtype=np.int64)
    dur = np.arange(2 * n, 0, -2, dtype=np.int64)
    _same(_self_times(begin, dur), self_time.self_times(begin, dur))
    for b, d in (
        ([], []),
        ([5], [0]),
        ([0, 0, 0], [3, 3, 3]),
        ([0, 3, 3, 10], [10, 0, 7, 0]),
        ([0, 1, 2], [-1, 5, -3]),
    ):
        b, d = np.array(b, np.int64), np.array(d, np.int64)
        _same(_self_times(b, d), self_time.self_times(b, d))


@pytest.mark.parametrize("seed", range(10))
def test_group_sums(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 2000))
    md = rng.integers(0, 30, n)
    group = (
        rng.choice(np.array([-1, 0, 3, 2**62, -(2**62)]), n) if seed % 2 else rng.integers(-1, 5, n)
    )
    w1 = rng.integers(-(10**12), 10**12, n)
    w2 = rng.integers(0, 5, n)
    umd, ug, (s1, s2) = xf.group_sums(md, group, w1, w2)
    uniq, inv = np.unique(np.stack([md, group], axis=1), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    np.testing.assert_array_equal(umd, uniq[:, 0])
    np.testing.assert_array_equal(ug, uniq[:, 1])
    ref1 = np.zeros(len(uniq), np.int64)
    np.add.at(ref1, inv, w1)
    np.testing.assert_array_equal(s1, ref1)
    np.testing.assert_array_equal(s2, np.bincount(inv, weights=w2).astype(np.int64))


# ----------------------------------------------------------------------------------------------
# decode_tokens: the packed-varint view (XSpaceTokens)


def _check_tokens(line, ids, must_decode=False):
    ref = _line_events(line, ids)
    tok = xplane_view_pb2.XLineTokens.FromString(line.SerializeToString())
    got = xf.decode_tokens(tok.event_tokens, tok.timestamp_ns, ids, len(line.events))
    if got is None:
        assert not must_decode, "a varint-only line must take the fast path"
        return None
    _same(ref, got)
    return got


@pytest.mark.parametrize(
    "cfg",
    [
        SynthConfig(seed=1),
        SynthConfig(seed=2, with_device_timing=False),
        SynthConfig(seed=3, with_steps=False, with_while=False),
    ],
)
def test_tokens_on_synthetic_profiles(cfg):
    space = make_tpu_xspace(cfg)
    for plane in space.planes:
        ids = PlaneStats(plane).ids
        for line in plane.lines:
            _check_tokens(line, ids, must_decode=True)


@pytest.mark.parametrize("seed", range(40))
def test_tokens_on_random_lines(seed):
    """Exact whenever decoded; anything it cannot prove well-formed comes back as None."""
    rng = random.Random(5000 + seed)
    kinds = ["int64", "uint64", "ref", "none"] if seed % 2 else ["int64", "double", "str", "bytes"]
    line = _random_line(rng, rng.choice([1, 2, 10, 300]), kinds)
    try:
        _check_tokens(line, _ids(rng))
    except Exception as exc:  # packed parsing of non-varint bytes may fail: the caller falls back
        assert "DecodeError" in type(exc).__name__ or "Error parsing" in str(exc), exc


def test_tokens_hand_built():
    ids = {
        "group_id": 1,
        "device_offset_ps": 2,
        "device_duration_ps": 3,
        "dma_stall_duration_ps": 4,
    }
    line = xplane_pb2.XLine(timestamp_ns=10)
    e = line.events.add(metadata_id=5, offset_ps=-3, duration_ps=7)
    e.stats.add(metadata_id=1, uint64_value=2**62)
    e.stats.add(metadata_id=4, int64_value=-9)
    e = line.events.add(metadata_id=6, num_occurrences=4, duration_ps=2)
    e.stats.add(metadata_id=2, int64_value=123456789012345)
    e.stats.add(metadata_id=3, uint64_value=11)
    e.stats.add(metadata_id=1, int64_value=-1)
    e.stats.add(metadata_id=1, int64_value=8)
    got = _check_tokens(line, ids, must_decode=True)
    assert got[3].tolist() == [2**62, 8]
    line.events.add(offset_ps=5)  # metadata id 0 is not written: cannot be split safely
    assert _check_tokens(line, ids) is None


def test_tokens_without_count_never_merge_events():
    """With the count only on demand, a line with an id-less event must still come out exact."""
    ids = {"group_id": 1}
    line = xplane_pb2.XLine(timestamp_ns=1)
    for i in range(6):
        e = line.events.add(metadata_id=0 if i == 3 else 4, offset_ps=10 * i, duration_ps=5)
        e.stats.add(metadata_id=1, int64_value=i)
    tok = xplane_view_pb2.XLineTokens.FromString(line.SerializeToString())
    asked = []
    got = xf.decode_tokens(tok.event_tokens, 1, ids, lambda: asked.append(1) or len(line.events))
    assert asked, "a non-uniform line must check the event count"
    assert got is None or all(np.array_equal(a, b) for a, b in zip(got, _line_events(line, ids)))
    uniform = xplane_pb2.XLine(timestamp_ns=1)
    for i in range(6):
        uniform.events.add(metadata_id=4, offset_ps=10 * i, duration_ps=5).stats.add(
            metadata_id=1, int64_value=i
        )
    tok = xplane_view_pb2.XLineTokens.FromString(uniform.SerializeToString())
    got = xf.decode_tokens(tok.event_tokens, 1, ids, lambda: pytest.fail("count not needed"))
    _same(_line_events(uniform, ids), got)


def test_self_times_deep_nesting_uses_the_stack_walk():
    # 100 events each inside the one before (deeper than the peeling rounds), plus siblings.
    begin = np.array([i for i in range(100)] + [200 + i for i in range(80)], np.int64)
    dur = np.array([1000 - 2 * i for i in range(100)] + [1] * 80, np.int64)
    _same(_self_times(begin, dur), self_time.self_times(begin, dur))
