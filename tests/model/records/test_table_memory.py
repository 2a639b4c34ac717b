"""What keeps the op table's memory down (docs/benchmarks.md), checked as behaviour:
constant row columns hold one value and stay so through selection, concatenation, pickling
(worker processes, a cluster) and the disk cache; a run's table and its hosts' share one copy
of the rows; and the caches charge a shared buffer once, to every entry that keeps it alive."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.serve.caches import codec as cache_codec
from tb_roofline.serve.caches.memory import ByteLRU, approx_size, sized
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.synthetic import SynthConfig, write_tpu_session
from tb_roofline.table.op_table import OpTable, OpTableBuilder, constant, is_constant


def _table(n=1000, core=0, stall=0.0, seed=0) -> OpTable:
    rng = np.random.default_rng(seed)
    b = OpTableBuilder()
    b.add_keyed(
        {
            "operation": np.array(["a", "b", "c"], object),
            "category": np.array(["convolution", "copy", "loop fusion"], object),
        },
        rng.integers(0, 3, n),
        core=np.full(n, core),
        step=rng.integers(0, 9, n),
        occurrences=np.ones(n, np.int64),
        total_time_ps=rng.random(n) * 100,
        self_time_ps=rng.random(n) * 50,
        dma_stall_ps=np.full(n, stall),
    )
    return b.build()


def test_constant_columns_hold_one_value_and_keep_their_values():
    t = _table()
    held = {k for k, v in t.rows.items() if is_constant(v)}
    assert held >= {"core", "occurrences", "dma_stall_ps", "flops", "bytes"}
    assert "step" not in held and "total_time_ps" not in held and "op" not in held
    assert approx_size(t.rows["core"]) < 200  # one item, not 8,000 bytes
    assert t.rows["core"].dtype == np.int64 and t.rows["dma_stall_ps"].dtype == np.float64
    assert (t.rows["occurrences"] == 1).all() and len(t.rows["occurrences"]) == 1000
    with pytest.raises(ValueError):  # read-only: no caller can change every row by accident
        t.rows["core"][3] = 2
    # Sums, groupings and gathers see the same values as a full column.
    full = np.ones(1000)
    assert (
        np.bincount(t.rows["op"], weights=t.rows["occurrences"]).tolist()
        == np.bincount(t.rows["op"], weights=full).tolist()
    )


def test_selection_and_concatenation_keep_constants_constant():
    a, b, c = _table(500, core=0, seed=1), _table(300, core=0, seed=2), _table(200, core=3)
    part = a.select(a.rows["step"] > 4)
    assert is_constant(part.rows["core"]) and len(part.rows["core"]) == len(part)
    ab = OpTable.concat([a, b])
    assert is_constant(ab.rows["core"]) and len(ab) == 800
    abc = OpTable.concat([a, b, c])  # cores differ: a full column, with the right values
    assert not is_constant(abc.rows["core"])
    assert abc.rows["core"].tolist() == [0] * 800 + [3] * 200
    assert is_constant(abc.rows["dma_stall_ps"])
    assert (
        abc.rows["step"].tolist()
        == a.rows["step"].tolist() + b.rows["step"].tolist() + c.rows["step"].tolist()
    )


def test_constants_travel_as_one_value_by_pickle_and_the_disk_cache():
    t = _table(200_000)
    full = pickle.dumps(_table(200_000).copy())
    packed = pickle.dumps(t)
    assert len(packed) < len(full) - 4 * 8 * 200_000 + 1000  # four constant columns: nothing
    for back in (pickle.loads(packed), cache_codec.decode(cache_codec.encode(t))):
        for k, v in t.rows.items():
            assert is_constant(back.rows[k]) == is_constant(v), k
            assert back.rows[k].dtype == v.dtype
            assert np.array_equal(back.rows[k], v), k


def test_the_disk_cache_refuses_a_constant_that_claims_too_many_rows():
    data = bytearray(cache_codec.encode({"x": constant(np.float64(1.0), 5)}))
    text_len = int.from_bytes(data[:8], "big")
    text = bytes(data[8 : 8 + text_len]).replace(b'"len":5', b'"len":0')
    bad = len(text).to_bytes(8, "big") + text + bytes(data[8 + text_len :])
    with pytest.raises(cache_codec.CodecError):
        cache_codec.decode(bad)


def test_concat_shares_its_rows_with_its_inputs():
    a, b = _table(500, seed=1), _table(300, seed=2)
    steps_a, time_b = a.rows["step"].copy(), b.rows["total_time_ps"].copy()
    run = OpTable.concat([a, b], share=True)
    for k in ("step", "total_time_ps", "self_time_ps"):
        assert np.shares_memory(a.rows[k], run.rows[k]) and np.shares_memory(b.rows[k], run.rows[k])
    assert np.array_equal(a.rows["step"], steps_a) and np.array_equal(
        b.rows["total_time_ps"], time_b
    )
    assert run.rows["op"][500:].min() >= a.num_keys  # the run's op codes are offset: its own
    assert not np.shares_memory(b.rows["op"], run.rows["op"])


def test_a_shared_buffer_is_charged_once_and_until_its_last_holder_goes():
    buf = np.zeros(1 << 20)  # 8 MiB
    lru = ByteLRU(20 << 20)
    lru.put("a", {"v": buf[: 1 << 19]}, *sized({"v": buf[: 1 << 19]}))
    lru.put("b", {"v": buf[1 << 19 :]}, *sized({"v": buf[1 << 19 :]}))
    assert 8 << 20 <= lru.bytes < (8 << 20) + 20_000
    lru.pop("a")
    assert lru.bytes >= 8 << 20  # "b" still keeps all of it alive
    lru.pop("b")
    assert lru.bytes == 0
    # Without roots given, a view is charged the buffer it keeps (not its slice).
    assert approx_size(buf[:10]) >= buf.nbytes
    # A cache too small for the shared buffer keeps neither holder.
    small = ByteLRU(4 << 20)
    assert not small.put("a", buf[:10], *sized(buf[:10]))
    assert small.bytes == 0 and len(small) == 0


def test_a_runs_hosts_share_its_table_and_the_cache_charges_it_once(tmp_path, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    cfgs = [
        SynthConfig(
            seed=7 + h,
            program_seed=7,
            hostname=f"h{h}",
            num_cores=1,
            num_steps=40,
            ops_per_step=60,
            distinct_ops=60,
            op_order="cycle",
        )
        for h in range(3)
    ]
    write_tpu_session(str(tmp_path), "run", "2026_01_01_00_00_00", cfgs)
    alone = RooflineService(str(tmp_path))
    run = alone.list_runs()["runs"][0]["run"]
    want = {h: alone.ops(run, h, True)["rows"] for h in ("h0", "h1", "h2")}
    want["*"] = alone.ops(run, "", True)["rows"]

    s = RooflineService(str(tmp_path))
    run_table = s.analysis(run, "").scope.tables["op"]
    entries = [s.hosts_reader.cache.get(f.path) for f in s.resolve_files(s.resolve_run(run), "")]
    tables = [e.data.ops for e in entries]
    shared = [k for k, v in tables[0].rows.items() if k != "op" and not is_constant(v)]
    assert shared and all(
        np.shares_memory(t.rows[k], run_table.rows[k]) for t in tables for k in shared
    )
    run_bytes = sum(run_table.rows[k].nbytes for k in shared)
    own = sum(approx_size(e.data, roots={}) for e in entries)
    cache = s.hosts_reader.cache
    assert run_bytes + own <= cache.bytes + 1 <= run_bytes + own + len(entries) * 4096 + 1
    # The analysis gone, one host left: it still keeps the run's rows alive, and is charged so.
    s.analyses.cache = ByteLRU(s.analyses.cache.max_bytes)
    for e in entries[1:]:
        cache.pop(e.signature[0])
    assert cache.bytes >= run_bytes
    # Every host's answers, and the run's, are those of a service that never shared.
    for h in ("h0", "h1", "h2"):
        assert s.ops(run, h, True)["rows"] == want[h]
    assert s.ops(run, "", True)["rows"] == want["*"]


def test_sums_over_constant_columns_are_those_of_full_columns_bit_for_bit():
    from tb_roofline.devices.spec import DeviceInfo
    from tb_roofline.model.records.row_sums import key_sums

    t = _table(5000, stall=-0.0)
    device = DeviceInfo(type="test", kind="tpu", num_cores=1)
    full = OpTable(t.keys, {k: np.array(v) for k, v in t.rows.items()}, t.unit_costs)
    assert any(is_constant(v) for v in t.rows.values())
    assert not any(is_constant(v) for v in full.rows.values())
    a, b = key_sums(t, device), key_sums(full, device)
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k], equal_nan=True) and np.array_equal(
            np.signbit(a[k]), np.signbit(b[k])
        ), k


def test_freed_heap_pages_go_back_to_the_system(tmp_path):
    """What `OpTable.concat(share=True)` relies on between columns (allocator.py): blocks
    freed between blocks still in use are returned, not kept as holes (glibc only)."""
    import subprocess
    import sys

    script = r"""
import numpy as np
from tb_roofline.allocator import release_free_memory
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
a = np.ones(1 << 18)
del a  # a freed 2 MB mapping: glibc serves blocks under 2 MB from the heap from now on
big, live = [], []
for i in range(100):
    big.append(np.ones(1 << 16))  # 512 KiB each, 50 MB in all
    live.append(np.ones(1 << 13))  # 64 KiB between them, kept
del big
held = rss()
release_free_memory()
print(held - rss())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) > 30, done.stdout  # MB returned of the 50 freed


def _three_host_run(tmp_path, monkeypatch, hosts=3):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    cfgs = [
        SynthConfig(
            seed=7 + h,
            program_seed=7,
            hostname=f"h{h}",
            num_cores=1,
            num_steps=40,
            ops_per_step=60,
            distinct_ops=60,
            op_order="cycle",
        )
        for h in range(hosts)
    ]
    write_tpu_session(str(tmp_path), "run", "2026_01_01_00_00_00", cfgs)
    s = RooflineService(str(tmp_path))
    return s, s.list_runs()["runs"][0]["run"]


def test_a_single_host_analysis_keeps_its_own_rows_when_the_run_shares_later(tmp_path, monkeypatch):
    s, run = _three_host_run(tmp_path, monkeypatch)
    one = s.analysis(run, "h0").scope.tables["op"]
    charged = s.analyses.cache.bytes
    everything = s.analysis(run, "").scope.tables["op"]
    assert not any(
        np.shares_memory(one.rows[k], everything.rows[k])
        for k in one.rows
        if not is_constant(one.rows[k])
    )
    # What the single-host analysis holds is still what it was charged.
    assert approx_size(one) <= charged


def test_a_host_of_no_rows_is_charged_the_run_rows_it_keeps():
    run = np.arange(1000, dtype=np.float64)
    empty, single = run[1000:], run[999:]
    for view in (empty, single):
        roots: dict = {}
        approx_size({"x": view}, roots=roots)
        assert list(roots.values())[0] is run
        assert approx_size(view) >= run.nbytes


def test_hosts_are_charged_anew_even_when_the_analysis_fails(tmp_path, monkeypatch):
    from tb_roofline.model.records import roofline

    s, run = _three_host_run(tmp_path, monkeypatch)

    def fail(*args):
        raise MemoryError("out of memory in the model")

    monkeypatch.setattr(roofline, "_analyze", fail)
    with pytest.raises(Exception):
        s.analysis(run, "")
    cache = s.hosts_reader.cache
    entries = [cache.get(f.path) for f in s.resolve_files(s.resolve_run(run), "")]
    for e in entries[1:]:
        cache.pop(e.signature[0])
    assert cache.bytes >= approx_size(entries[0].data)  # the whole run's rows it keeps alive
    assert approx_size(entries[0].data) > 2 * approx_size(entries[0].data, roots={})


def test_hosts_that_fit_before_sharing_all_stay_after_it(tmp_path, monkeypatch):
    s, run = _three_host_run(tmp_path, monkeypatch, hosts=4)
    files = s.resolve_files(s.resolve_run(run), "")
    s.hosts_reader.read(s.resolve_run(run), files)
    cache = s.hosts_reader.cache
    assert len(cache) == 4
    cache.max_bytes = int(cache.bytes * 1.2)  # room for the hosts, not for them twice
    s.analysis(run, "")
    assert len(cache) == 4 and cache.bytes <= cache.max_bytes


def test_a_table_whose_columns_disagree_on_their_length_is_not_used():
    t = _table(100)
    assert t.consistent()
    t.rows["dma_stall_ps"] = constant(np.float64(0.0), 2**40)  # a forged disk entry's claim
    assert not t.consistent()
    from tb_roofline.model.records.row_sums import sum_by

    with pytest.raises(ValueError):  # a length that disagrees is never taken as counts
        sum_by(t.rows["op"], constant(np.float64(0.0), 150), 3)


def test_an_entry_that_cannot_stay_is_reported_not_kept():
    shared = np.zeros(1 << 17)  # 1 MiB
    lru = ByteLRU(2 << 20)
    assert lru.put("a", shared[:10], *sized(shared[:10]))
    b = (shared[10:], np.zeros(3 << 16))  # the same buffer and 1.5 MiB of its own: 2.5 alone
    assert not lru.put("b", b, *sized(b))
    assert "b" not in lru._items and lru.get("a") is not None and lru.bytes <= lru.max_bytes


def test_a_disk_entry_whose_table_lies_about_its_rows_is_a_miss(tmp_path, monkeypatch):
    import dataclasses

    from tb_roofline.serve.caches.disk import DiskCache
    from tb_roofline.serve.service.hosts import file_signature

    logdir, cache_dir = tmp_path / "logs", tmp_path / "cache"
    cfg = SynthConfig(seed=3, hostname="h0", num_cores=1, num_steps=20)
    write_tpu_session(str(logdir), "run", "2026_01_01_00_00_00", [cfg])
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(cache_dir))
    s = RooflineService(str(logdir))
    run = s.list_runs()["runs"][0]["run"]
    want = s.ops(run, "", True)["rows"]
    r = s.resolve_run(run)
    f = s.resolve_files(r, "")[0]
    key = DiskCache.key(file_signature(f), r.format, f.host)
    data = s.hosts_reader.disk_cache.get(key)
    forged = dataclasses.replace(
        data,
        ops=OpTable(
            data.ops.keys,
            dict(data.ops.rows, dma_stall_ps=constant(np.float64(5.0), 2**40)),
            data.ops.unit_costs,
        ),
    )
    assert s.hosts_reader.disk_cache.put(key, forged)
    fresh = RooflineService(str(logdir))
    assert fresh.ops(run, "", True)["rows"] == want  # converted again, not the forged rows


def test_review_cases_of_the_sharing_and_its_charges():
    # A host whose column is one value keeps it (not a view of the run's varied column).
    a, b = _table(500, core=0, seed=1), _table(300, core=2, seed=2)
    run = OpTable.concat([a, b], share=True)
    assert is_constant(a.rows["core"]) and is_constant(b.rows["core"])
    assert run.rows["core"].tolist() == [0] * 500 + [2] * 300
    # A view with an added axis of length one is still charged the buffer it keeps.
    big = np.zeros(1 << 20)
    for view in (big[None, :10], big[:10, None]):
        assert approx_size(view) >= big.nbytes
        assert len(sized(view)[1]) == 1
    # Re-measuring an entry that cannot stay even alone drops it, not the others.
    lru = ByteLRU(4 << 20)
    for i in range(5):
        lru.put(i, np.zeros(1 << 14), *sized(np.zeros(1 << 14)))
    holder = {"rows": np.zeros(10)}
    lru.put("run", holder, *sized(holder))
    holder["rows"] = big[:10]  # its arrays changed: now a view of 8 MiB
    lru.recharge(["run"], sized)
    assert "run" not in lru._items and len(lru) == 5 and lru.bytes <= lru.max_bytes
    # Tables a disk entry may forge: every column (op too) constant, op codes out of range,
    # a malformed state: none is consistent, none raises.
    t = _table(100)
    forged = OpTable(t.keys, {k: constant(v[0], 2**40) for k, v in t.rows.items()}, t.unit_costs)
    assert not forged.consistent()
    out_of_range = OpTable(t.keys, dict(t.rows, op=t.rows["op"] + 7), t.unit_costs)
    assert not out_of_range.consistent()
    assert not OpTable(t.keys, {"core": [1, 2]}, None).consistent()
    assert not OpTable(t.keys, {"op": [0, 1]}, None).consistent()


def _demo_answers(logdir: str) -> str:
    import json

    service = RooflineService(logdir)
    out = []
    for run in [r["run"] for r in service.list_runs()["runs"]]:
        for io in (True, False):
            out += [service.program(run, "", io), service.ops(run, "", io)]
    return json.dumps(out, sort_keys=True)


def test_columns_made_a_block_at_a_time_sum_as_the_whole_columns(monkeypatch):
    """The sums (`key_sums.block_sums`: per key where a host is read, per step in the model)
    and the rows' steps (`steps.row_steps`) work in blocks of ROW_BLOCK rows on long tables:
    the sums are those of the whole columns bit for bit, with varying occurrences (an
    integer column made float) and with the derived columns (FLOPs from unit costs, the
    roofline time)."""
    import os

    from tb_roofline.model.records import row_sums, steps
    from tb_roofline.model.records.floors import Roofs
    from tb_roofline.model.records.record_table import SUM_COLUMNS
    from tb_roofline.readers import read_profile_file
    from tb_roofline.table import key_sums
    from tb_roofline.table.op_table import ROW_BLOCK

    demo = os.path.join(TESTS, "..", "testdata", "demo")
    session = os.path.join(demo, "v4_pod", "plugins", "profile", "2026_11_29_11_30_00")
    p = read_profile_file(os.path.join(session, "tpu-v4-host0.xplane.pb"), "xplane", "h0")
    t = p.ops
    assert t.unit_costs is not None and not is_constant(t.rows["occurrences"])
    rng = np.random.default_rng(5)
    n = len(t)
    ones = OpTable(t.keys, dict(t.rows, occurrences=constant(1, n)), t.unit_costs)
    inv_peak = 1.0 / (1.0 + rng.random(t.num_keys))
    # (the per-row floors and proven gaps too: some keys collectives, some gaps proven)
    inv_peak = Roofs(p.device, inv_peak, rng.random(t.num_keys) < 0.2, rng.random(t.num_keys) < 0.5)

    def codes_of(part):  # a code per row from its own columns, so a block has its own
        return (part.rows["op"] * 3 + part.rows["step"]) % 7

    monkeypatch.setattr(key_sums, "ROW_BLOCK", 3)
    for table in (t, ones):
        codes = codes_of(table)
        blocks = row_sums.block_sums(table, SUM_COLUMNS, inv_peak, codes_of, 7)
        for c in SUM_COLUMNS:
            whole = row_sums.sum_by(codes, row_sums.row_column(table, c, inv_peak), 7)
            assert np.array_equal(whole, blocks[c]) and np.array_equal(
                np.signbit(whole), np.signbit(blocks[c])
            ), c
    # Whole answers of a two-host run and a one-host run, in blocks of 3 rows and as usual.
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    monkeypatch.setattr(key_sums, "ROW_BLOCK", ROW_BLOCK)
    usual = _demo_answers(demo)
    monkeypatch.setattr(key_sums, "ROW_BLOCK", 3)
    monkeypatch.setattr(steps, "ROW_BLOCK", 3)
    assert _demo_answers(demo) == usual
