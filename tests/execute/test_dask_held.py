"""Hosts' tables kept on the Dask workers that read them (execute/cluster_held.py): the client
gets each host's summary (its profile less its rows: keys, key sums, steps, spans, device,
timeline facts; table/host_summary.py) and no rows; the per-step sums made host by host on
the workers (model/records/row_sums.py `StepPass`, the sums travelling from worker to worker
in the run's order) are local
conversion's bit for bit; a host's rows fetched for a drill-down are the ones read here; a
worker lost while it holds a host has that host read again; no worker left is a clear error
within the cluster's deadline. A real scheduler and two workers on 127.0.0.1, the hosts on
local disk (the workers share it)."""

from __future__ import annotations

import gc
import pickle
import time

import numpy as np
import pytest

pytest.importorskip("distributed")

from test_dask_cluster import _answers, _env, _local_answers, dask_cluster  # noqa: E402

from tb_roofline import errors  # noqa: E402
from tb_roofline.execute import cluster  # noqa: E402
from tb_roofline.execute.cluster_held import Held, _runs, fetch_held, fold_held  # noqa: E402
from tb_roofline.execute.pool import _call  # noqa: E402
from tb_roofline.model.records.roofline import analyze  # noqa: E402
from tb_roofline.model.records.row_sums import step_sums  # noqa: E402
from tb_roofline.readers import read_profile_file  # noqa: E402
from tb_roofline.readers import units as units_module  # noqa: E402
from tb_roofline.readers.units import summed  # noqa: E402
from tb_roofline.serve.service.core import RooflineService  # noqa: E402
from tb_roofline.synthetic import SynthConfig, write_tpu_session  # noqa: E402
from tb_roofline.table.held_rows import HeldRows, is_held  # noqa: E402
from tb_roofline.table.host_summary import summarize  # noqa: E402
from tb_roofline.table.op_table import OpTable, ProfileData  # noqa: E402
from tb_roofline.table.shared_texts import sharer  # noqa: E402

HOSTS = [f"held-host{h}" for h in range(6)]


@pytest.fixture(scope="module")
def pod(tmp_path_factory):
    local = tmp_path_factory.mktemp("held_pod")
    cfgs = [
        SynthConfig(
            seed=90 + h,
            program_seed=90,
            hostname=name,
            num_cores=1 + h % 2,
            num_steps=8,
            ops_per_step=120,
            distinct_ops=40,
        )
        for h, name in enumerate(HOSTS)
    ]
    paths = write_tpu_session(str(local), "pod", "2026_01_01_00_00_00", cfgs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TB_ROOFLINE_CACHE_DIR", "off")
        with dask_cluster(_env({})) as c:
            yield paths, c


RUN = "pod/2026_01_01_00_00_00"


def _logdir(paths) -> str:
    return paths[0].split("/pod/")[0]


def _host_data(service: RooflineService) -> list:
    run = service.resolve_run(RUN)
    return [e.data for e in service.hosts_reader.read(run, service.resolve_files(run, ""))]


def _held(paths, address) -> list:
    jobs = [(p, "xplane", h, None) for p, h in zip(paths, HOSTS)]
    conversion = units_module.plan(jobs, 1)  # one unit a host: the host's whole table
    units = conversion.units
    assert [u.job for u in units] == list(range(len(paths)))
    args = [(u.fn, u.args) for u in units]
    return cluster.run_units(
        address,
        _call,
        args,
        names=list(HOSTS),
        paths=[u.path for u in units],
        arrived=sharer(),  # the hosts' equal strings held once, as for whole tables
        summarize=summarize,
    )


def _local(paths) -> list:
    return [summed(read_profile_file(p, "xplane", h)) for p, h in zip(paths, HOSTS)]


def _tables_here() -> list:
    """The op tables with rows of this run's hosts that this process holds."""
    found = []
    for o in gc.get_objects():
        if isinstance(o, OpTable) and not is_held(o.rows) and len(o) and len(o.keys["host"]):
            if set(o.keys["host"].tolist()) & set(HOSTS):
                found.append(o)
    return found


def _bits(a) -> bytes:
    return np.ascontiguousarray(a, np.float64).tobytes()


def _step_pass(profiles):
    sp = analyze(profiles).scope_source().step_pass
    assert sp is not None and len(sp.aligned) == 8
    return sp


def test_hosts_held_on_workers_answer_as_local_conversion(pod):
    paths, c = pod
    gc.collect()
    assert _tables_here() == []
    held = _held(paths, c.address)
    assert all(isinstance(h, Held) for h in held), held
    summaries = [h.summary for h in held]
    assert all(isinstance(s, ProfileData) for s in summaries)
    assert all(isinstance(s.ops.rows, HeldRows) and is_held(s.ops.rows) for s in summaries)
    gc.collect()
    assert _tables_here() == []  # what came back holds no row
    local = _local(paths)
    for s, p in zip(summaries, local):  # (these hosts are small: 1,000 rows each)
        assert len(pickle.dumps(s)) < len(pickle.dumps(p))
    for s, p in zip(summaries, local):  # the keys and key sums made there are local ones
        assert len(s.ops) == len(p.ops) and s.ops.num_keys == p.ops.num_keys
        assert s.ops.keys["operation"].tolist() == p.ops.keys["operation"].tolist()
        for col, v in p.ops.row_sums.items():
            assert _bits(s.ops.row_sums[col]) == _bits(v), col
        assert s.core_spans == p.core_spans
    programs = [s.ops.keys["program"][0] for s in summaries]
    assert len(set(programs)) == 1 and all(p is programs[0] for p in programs)  # held once
    # Consecutive hosts one worker holds are added in one task there, in the run's order.
    runs = _runs(held[0].future.client, held)
    assert [k for k, _ in runs] == sorted(k for k, _ in runs)
    assert [f for _, fs in runs for f in fs] == [h.future for h in held]
    # The per-step sums: host by host on the workers = one pass over the run's table here.
    sp = _step_pass(local)
    run = OpTable.concat([p.ops for p in local])
    here = step_sums(run, sp.roofs, sp.aligned, sp.profile_host, sp.key_host)
    there = sp.finish(fold_held(held, sp.add_host, sp.start()))
    assert here.keys() == there.keys()
    for col in here:
        assert _bits(there[col]) == _bits(here[col]), col
    assert there["total_time_ps"].sum() > 0
    gc.collect()
    tables = _tables_here()
    assert all(t is run or any(t is p.ops for p in local) for t in tables)  # only local ones
    # A drill-down: one host's rows, fetched from its worker, are the ones read here.
    fetched = fetch_held(held[3])
    for k, v in local[3].ops.rows.items():
        assert np.asarray(fetched.ops.rows[k]).tolist() == np.asarray(v).tolist(), k


def _plain(service: RooflineService) -> list:
    out = []
    for host in [""] + HOSTS:
        out += [
            service.program(RUN, host, True),
            service.ops(RUN, host, True),
            service.device(RUN, host),
            service.diagnostics(RUN, host),
            service.guidance(RUN, host, True),
        ]
    return out


def test_a_pod_opened_through_the_cluster_keeps_its_rows_on_the_workers(pod, monkeypatch):
    """The service's default open of a pod through a cluster: every answer (the run's and
    each host's program, ops, device, diagnostics, guidance; then the drill-downs: steps
    compared, other row groupings) as local conversion's, with no op table holding rows in
    this process and every host's rows still on the workers; a host's rows asked for are
    fetched from its worker, the ones read here."""
    paths, c = pod
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "1")  # (a unit per file: the files are few)
    expected_plain = _plain(RooflineService(_logdir(paths)))
    expected = _local_answers(_logdir(paths), RUN, HOSTS, monkeypatch)
    gc.collect()
    cluster.configure(c.address, strict=True)
    try:
        service = RooflineService(_logdir(paths))
        service.list_runs()
        assert _plain(service) == expected_plain
        gc.collect()
        assert _tables_here() == []  # no row came here for these
        data = _host_data(service)
        assert all(is_held(d.ops.rows) for d in data)
        assert all(isinstance(d.ops.rows.holder, Held) for d in data)
        assert _answers(service, RUN, HOSTS) == expected  # the drill-downs too
        gc.collect()
        assert _tables_here() == []  # (their key sums made on the workers too)
        local = _local(paths)
        charged = service.hosts_reader.cache.bytes
        fetched = data[3].ops.rows  # rows asked for: fetched from the worker, then kept
        for k, v in local[3].ops.rows.items():
            assert np.asarray(fetched[k]).tolist() == np.asarray(v).tolist(), k
        assert not is_held(data[3].ops.rows) and is_held(data[2].ops.rows)
        service.program(RUN, "", True)  # the next request charges the rows fetched
        rows = sum(np.asarray(v).nbytes for v in data[3].ops.rows.values() if v.strides[0])
        assert service.hosts_reader.cache.bytes >= charged + rows
    finally:
        cluster.configure(None)


def test_rows_on_a_cluster_that_is_gone_are_a_503_then_read_again(pod, monkeypatch):
    """Every worker holding the pod's rows gone after the analysis: an answer that needs
    them (two steps compared) is a clear 503 within the cluster's deadline, never a hang or
    a 500; the next request, workers back, reads the hosts again and answers as local
    conversion does."""
    paths, c = pod
    monkeypatch.setenv("TB_ROOFLINE_WORKERS", "1")
    local = RooflineService(_logdir(paths))
    expected = local.compare(RUN, RUN, "", "", base_step="0", step="5")
    monkeypatch.setenv("TB_ROOFLINE_CLUSTER_CONNECT_S", "2")
    monkeypatch.setenv("TB_ROOFLINE_CLUSTER_STALL_S", "30")
    cluster.configure(c.address, strict=False)
    try:
        service = RooflineService(_logdir(paths))
        service.list_runs()
        service.program(RUN, "", True)
        for name in ("w1", "w2"):
            c.kill(name)
        t0 = time.monotonic()
        with pytest.raises(errors.RowsUnavailableError, match="read again on the next request"):
            service.compare(RUN, RUN, "", "", base_step="0", step="5")
        assert time.monotonic() - t0 < 20
        for name in ("w1", "w2"):
            c.start_worker(name, _env({}))
        c.wait_for({"w1", "w2"})
        assert service.compare(RUN, RUN, "", "", base_step="0", step="5") == expected
    finally:
        cluster.configure(None)


def _worker_of(c, held: Held) -> str:
    client = held.future.client
    where = client.who_has([held.future])[held.future.key]
    assert len(where) == 1
    names = {a: w["name"] for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}
    return names[where[0]]


def test_a_lost_workers_hosts_are_read_again(pod):
    paths, c = pod
    held = _held(paths, c.address)
    local = _local(paths)
    sp = _step_pass(local)
    run = OpTable.concat([p.ops for p in local])  # (here: a fold first may copy a host)
    expected = step_sums(run, sp.roofs, sp.aligned, sp.profile_host, sp.key_host)
    victim = _worker_of(c, held[2])
    c.kill(victim)
    try:
        fetched = fetch_held(held[2])  # read again by the worker left
        assert fetched.ops.rows["total_time_ps"].tolist() == (
            local[2].ops.rows["total_time_ps"].tolist()
        )
        again = sp.finish(fold_held(held, sp.add_host, sp.start()))
        for col in expected:
            assert _bits(again[col]) == _bits(expected[col]), col
    finally:
        c.start_worker(victim, _env({}))
        c.wait_for({"w1", "w2"})


def test_no_worker_left_is_a_clear_error_within_the_deadline(pod, monkeypatch):
    paths, c = pod
    held = _held(paths, c.address)
    monkeypatch.setenv("TB_ROOFLINE_CLUSTER_CONNECT_S", "2")
    monkeypatch.setenv("TB_ROOFLINE_CLUSTER_STALL_S", "30")
    for name in ("w1", "w2"):
        c.kill(name)
    t0 = time.monotonic()
    with pytest.raises(cluster.ClusterError, match="no worker left.*fetching held-host1"):
        fetch_held(held[1])
    assert time.monotonic() - t0 < 20
    del held  # (their futures, then the client of a cluster with no worker: let go now,
    gc.collect()  # not from a finalizer in the middle of a later import)
    cluster.close_clients()
