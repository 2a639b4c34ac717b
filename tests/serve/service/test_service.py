"""Discovery, caching, filters, exports and bad input through the service functions."""

from __future__ import annotations

import csv
import io
import json
import os
import time

import pytest
from tensorboard import errors as tb_errors
from testpaths import TESTS

from tb_roofline import errors
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.service.discovery import scan_logdir
from tb_roofline.synthetic import SynthConfig, write_tpu_session


@pytest.fixture
def logdir(tmp_path):
    write_tpu_session(str(tmp_path), "", "2026_01_01_00_00_00", [SynthConfig(seed=1)])
    write_tpu_session(
        str(tmp_path),
        "train/a",
        "2026_02_01_00_00_00",
        [
            SynthConfig(seed=2, hostname="h0", program_seed=2),
            SynthConfig(seed=3, hostname="h1", program_seed=2),
        ],
    )
    return tmp_path


def _age(path, seconds=60):
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_run_names_and_order_follow_xprof(logdir):
    runs = scan_logdir(str(logdir))
    assert [r.run for r in runs] == ["train/a/2026_02_01_00_00_00", "2026_01_01_00_00_00"]
    assert runs[0].hosts == ["h0", "h1"]
    assert runs[0].tb_run == "train/a" and runs[0].session == "2026_02_01_00_00_00"


def test_new_sessions_appear_without_restart(logdir):
    service = RooflineService(str(logdir))
    assert len(service.list_runs()["runs"]) == 2
    write_tpu_session(str(logdir), "", "2026_03_01_00_00_00", [SynthConfig(seed=4)])
    assert service.list_runs()["runs"][0]["run"] == "2026_03_01_00_00_00"
    assert service.hosts("2026_03_01_00_00_00")["hosts"] == ["host0"]


def test_is_active_is_instant_and_eventually_true(logdir):
    service = RooflineService(str(logdir))
    t0 = time.monotonic()
    service.has_profiles()
    assert time.monotonic() - t0 < 0.05
    deadline = time.monotonic() + 5
    while not service.has_profiles() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service.has_profiles()
    assert not RooflineService(str(logdir / "nothing_here")).list_runs()["runs"]


def test_hosts_aggregate_and_single(logdir):
    service = RooflineService(str(logdir))
    run = "train/a/2026_02_01_00_00_00"
    both = service.program(run, "", True)
    h0 = service.program(run, "h0", True)
    h1 = service.program(run, "h1", True)
    col = both["columns"].index("flops")
    assert both["rows"][0][col] == pytest.approx(h0["rows"][0][col] + h1["rows"][0][col])
    assert service.device(run, "h0")["device"]["num_cores"] == 2
    assert service.device(run, "*")["device"]["num_cores"] == 4


def test_filters_and_paging(logdir):
    service = RooflineService(str(logdir))
    run = "2026_01_01_00_00_00"
    everything = service.ops(run, "", True)
    cols = everything["columns"]
    assert everything["total_count"] == len(everything["rows"]) == everything["unfiltered_count"]
    cat = everything["facets"]["category"][0]
    only = service.ops(run, "", True, categories=[cat])
    assert only["rows"] and all(r[cols.index("category")] == cat for r in only["rows"])
    bound = service.ops(run, "", True, bound_by=["HBM"])
    assert all(r[cols.index("bound_by")] == "HBM" for r in bound["rows"])
    named = service.ops(run, "", True, name="FUSION")
    assert named["rows"] and all("fusion" in r[cols.index("operation")] for r in named["rows"])
    page = service.ops(run, "", True, offset=2, limit=3)
    assert page["rows"] == everything["rows"][2:5] and page["total_count"] == len(
        everything["rows"]
    )
    no_io = service.ops(run, "", False)
    assert not any(r[cols.index("is_infeed_outfeed")] for r in no_io["rows"])
    assert any(r[cols.index("is_infeed_outfeed")] for r in everything["rows"])


def test_exports_match_the_api(logdir):
    service = RooflineService(str(logdir))
    run = "2026_01_01_00_00_00"
    api = service.ops(run, "", True, name="fusion")
    body, ctype, filename = service.export(run, "", True, level="op", fmt="csv", name="fusion")
    assert ctype.startswith("text/csv") and filename.endswith(".csv")
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0] == api["columns"] and len(rows) - 1 == len(api["rows"])
    body, ctype, _ = service.export(run, "", True, level="program", fmt="json")
    data = json.loads(body)
    assert data[0]["step"] == "Total" and ctype == "application/json"
    with pytest.raises(tb_errors.InvalidArgumentError):
        service.export(run, "", True, level="nope")


@pytest.mark.parametrize("bad", ["../etc", "/etc/passwd", "a/../../b", "C:\\x", "x\x00y"])
def test_path_tricks_are_rejected(logdir, bad):
    service = RooflineService(str(logdir))
    with pytest.raises(tb_errors.InvalidArgumentError, match="not a valid name"):
        service.program(bad, "", True)
    with pytest.raises(tb_errors.InvalidArgumentError):
        service.program("2026_01_01_00_00_00", bad, True)


def test_unknown_run_and_host(logdir):
    service = RooflineService(str(logdir))
    with pytest.raises(tb_errors.NotFoundError, match="unknown run 'nope'; known runs"):
        service.program("nope", "", True)
    with pytest.raises(tb_errors.NotFoundError, match="unknown host 'zz'"):
        service.program("2026_01_01_00_00_00", "zz", True)


def test_corrupt_profile_fails_alone(logdir):
    bad = logdir / "broken" / "plugins" / "profile" / "2026_04_01_00_00_00" / "h.xplane.pb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
    _age(str(bad))
    service = RooflineService(str(logdir))
    with pytest.raises(
        errors.BadProfileError, match="broken/2026_04_01_00_00_00.*not a valid XSpace"
    ):
        service.program("broken/2026_04_01_00_00_00", "", True)
    assert service.program("2026_01_01_00_00_00", "", True)["rows"]


def test_one_bad_host_is_skipped_in_the_aggregate(logdir):
    run_dir = logdir / "train" / "a" / "plugins" / "profile" / "2026_02_01_00_00_00"
    (run_dir / "h1.xplane.pb").write_bytes(b"\x0a\xff\xff")
    _age(str(run_dir / "h1.xplane.pb"))
    service = RooflineService(str(logdir))
    run = "train/a/2026_02_01_00_00_00"
    assert service.device(run, "")["device"]["num_hosts"] == 1
    diags = service.diagnostics(run, "")["diagnostics"]
    assert diags[0]["severity"] == "error" and "h1" in diags[0]["message"]
    with pytest.raises(errors.BadProfileError):
        service.program(run, "h1", True)


def test_profile_being_written_and_size_limit(logdir):
    session = logdir / "live" / "plugins" / "profile" / "2026_05_01_00_00_00"
    session.mkdir(parents=True)
    from writer import being_written

    (session / "h.xplane.pb").write_bytes(b"\x0a\x05\x12")  # incomplete, and growing
    service = RooflineService(str(logdir))
    with (
        being_written(session / "h.xplane.pb"),
        pytest.raises(errors.ProfileIncompletePublicError, match="still being written"),
    ):
        service.program("live/2026_05_01_00_00_00", "", True)
    small = RooflineService(str(logdir), max_file_mb=0.001)
    with pytest.raises(errors.TooLargeError, match="TB_ROOFLINE_MAX_FILE_MB"):
        small.program("2026_01_01_00_00_00", "", True)


def test_cache_follows_file_changes_and_never_writes(logdir):
    before = sorted(p for p in logdir.rglob("*"))
    service = RooflineService(str(logdir))
    run = "2026_01_01_00_00_00"
    first = service.analysis(run, "")
    assert service.analysis(run, "") is first
    path = next(logdir.glob("plugins/profile/2026_01_01_00_00_00/*.xplane.pb"))
    write_tpu_session(str(logdir), "", "2026_01_01_00_00_00", [SynthConfig(seed=9)])
    _age(str(path), 5)
    second = service.analysis(run, "")
    assert second is not first
    assert sorted(p for p in logdir.rglob("*")) == before


def test_is_active_never_waits_for_a_slow_disk(logdir, monkeypatch):
    import tb_roofline.serve.service.discovery as discovery

    real_scan = discovery.scan_logdir

    def slow_scan(*args, **kwargs):
        time.sleep(1.5)
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(discovery, "scan_logdir", slow_scan)
    service = RooflineService(str(logdir))
    for _ in range(5):
        t0 = time.monotonic()
        service.has_profiles()
        assert time.monotonic() - t0 < 0.05


def test_large_logdir_scan(tmp_path):
    for i in range(300):  # many runs with event files around them
        d = tmp_path / f"run{i:03d}"
        d.mkdir()
        for j in range(10):
            (d / f"events.out.tfevents.{j}").write_bytes(b"")
    write_tpu_session(str(tmp_path), "run150", "2026_01_01_00_00_00", [SynthConfig(seed=1)])
    t0 = time.monotonic()
    runs = scan_logdir(str(tmp_path))
    assert [r.run for r in runs] == ["run150/2026_01_01_00_00_00"]
    assert time.monotonic() - t0 < 5


def test_concurrent_requests_share_one_conversion(logdir):
    """TensorBoard serves requests from threads: no errors, one answer, caches stay bounded."""
    import concurrent.futures

    service = RooflineService(str(logdir))
    runs = [r["run"] for r in service.list_runs()["runs"]]
    jobs = [
        (run, host)
        for run in runs
        for host in ("", "*", "h0", "host0")
        if host in ("", "*") or host in service.hosts(run)["hosts"]
    ] * 6
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda j: service.analysis(*j), jobs))
    by_key = {}
    for job, result in zip(jobs, results):
        by_key.setdefault(job, set()).add(id(result))
    assert all(len(ids) == 1 for ids in by_key.values())
    cache = service.analyses.cache
    assert 0 < cache.bytes <= cache.max_bytes


def test_caches_are_bounded_by_bytes(tmp_path, monkeypatch):
    from tb_roofline.serve.caches.memory import approx_size

    for i in range(4):
        write_tpu_session(
            str(tmp_path),
            "",
            f"2026_01_0{i + 1}_00_00_00",
            [SynthConfig(seed=i, num_steps=1, ops_per_step=4)],
        )
    probe = RooflineService(str(tmp_path))
    run0 = probe.list_runs()["runs"][0]["run"]
    one = approx_size(probe.analysis(run0, ""))
    # A budget whose analysis share holds two of these analyses, not four.
    from tb_roofline.serve.caches.memory import MEMORY_SHARES

    monkeypatch.setenv(
        "TB_ROOFLINE_MEMORY_CACHE_MB", str(2.5 * one / MEMORY_SHARES["analyses"] / 2**20)
    )
    service = RooflineService(str(tmp_path))
    for run in service.list_runs()["runs"]:
        service.program(run["run"], "", True)
    cache = service.analyses.cache
    assert len(cache) == 2 and cache.bytes <= cache.max_bytes
    assert service._host_cache.bytes <= service._host_cache.max_bytes


def test_twenty_runs_cycle_without_recomputing(tmp_path):
    """The default budgets hold many runs: going round twenty runs again recomputes nothing."""
    for i in range(20):
        write_tpu_session(
            str(tmp_path),
            f"r{i:02d}",
            "2026_01_01_00_00_00",
            [SynthConfig(seed=i, num_steps=2, ops_per_step=40, distinct_ops=30)],
        )
    service = RooflineService(str(tmp_path))
    runs = [r["run"] for r in service.list_runs()["runs"]]
    assert len(runs) == 20
    first = {run: service.analysis(run, "") for run in runs}
    for _ in range(2):
        for run in runs:
            assert service.analysis(run, "") is first[run]


def test_deleted_host_file_leaves_the_others(logdir):
    service = RooflineService(str(logdir))
    run = "train/a/2026_02_01_00_00_00"
    assert service.device(run, "")["device"]["num_hosts"] == 2
    os.remove(
        logdir / "train" / "a" / "plugins" / "profile" / "2026_02_01_00_00_00" / "h1.xplane.pb"
    )
    assert service.device(run, "")["device"]["num_hosts"] == 1
    (gone,) = [
        d for d in service.diagnostics(run, "")["diagnostics"] if d["code"] == "host_missing"
    ]
    # the host left out and how many the run has: what the tab's banner counts and names
    assert (gone["skipped_host"], gone["hosts_total"]) == ("h1", 2)


def test_a_corrupt_host_is_named_with_the_run_s_host_count(tmp_path):
    write_tpu_session(
        str(tmp_path),
        "pod",
        "2026_01_01_00_00_00",
        [
            SynthConfig(seed=i, hostname=f"h{i}", num_steps=2, ops_per_step=20, distinct_ops=10)
            for i in range(3)
        ],
    )
    bad = tmp_path / "pod" / "plugins" / "profile" / "2026_01_01_00_00_00" / "h2.xplane.pb"
    bad.write_bytes(bytes(range(256)) * 20)
    os.utime(bad, (time.time() - 3600,) * 2)
    service = RooflineService(str(tmp_path))
    run = "pod/2026_01_01_00_00_00"
    diags = service.diagnostics(run, "")["diagnostics"]
    skipped = [d for d in diags if "skipped_host" in d]
    assert [(d["skipped_host"], d["hosts_total"], d["severity"]) for d in skipped] == [
        ("h2", 3, "error")
    ]
    assert "'h2' skipped" in skipped[0]["message"]
    assert all("hosts_total" not in d for d in diags if d not in skipped)
    assert service.device(run, "")["device"]["num_hosts"] == 2
    # what `/progress` (the tab) and a command's exit status name: the host and why
    (why,) = service.reading(run)["hosts_not_read"].values()
    assert list(service.reading(run)["hosts_not_read"]) == ["h2"] and "not a valid XSpace" in why
    assert service.hosts_not_read() == {run: {"h2": why}}
    service.device(run, "h0")  # a whole answer of one host: the run's partial one still told
    assert list(service.hosts_not_read(run)[run]) == ["h2"]
    # what `/progress` (the tab) and a command's exit status name: the host and why
    (why,) = service.reading(run)["hosts_not_read"].values()
    assert list(service.reading(run)["hosts_not_read"]) == ["h2"] and "not a valid XSpace" in why
    assert service.hosts_not_read() == {run: {"h2": why}}
    service.device(run, "h0")  # a whole answer of one host: the run's partial one still told
    assert list(service.hosts_not_read(run)[run]) == ["h2"]


def test_bad_size_limit_variable_falls_back(logdir, monkeypatch):
    from tb_roofline import settings

    DEFAULT_MAX_FILE_MB = settings.MAX_FILE_MB.default
    monkeypatch.setenv("TB_ROOFLINE_MAX_FILE_MB", "lots")
    assert RooflineService(str(logdir)).max_file_bytes == DEFAULT_MAX_FILE_MB * (1 << 20)
    monkeypatch.setenv("TB_ROOFLINE_MAX_FILE_MB", "0.5")
    assert RooflineService(str(logdir)).max_file_bytes == (1 << 19)


def test_bad_device_file_is_a_clear_error_without_server_paths(tmp_path):
    shutil = __import__("shutil")
    repo = os.path.dirname(TESTS)
    shutil.copytree(os.path.join(repo, "testdata", "jax_cpu", "mlp"), tmp_path / "mlp")
    (tmp_path / "roofline_device.json").write_text("{not json")
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    with pytest.raises(errors.BadDeviceFileError) as info:
        service.device(run, "")
    assert "roofline_device.json" in str(info.value) and str(tmp_path) not in str(info.value)


def test_partial_scan_keeps_runs_it_did_not_reach(logdir, monkeypatch):
    import tb_roofline.serve.service.discovery as discovery

    index = discovery.RunIndex(str(logdir))
    full = index.refresh()
    assert len(full) == 2
    real = discovery.scan_logdir_bounded

    def cut_short(logdir, deadline=None):  # the bounded scan runs out of time at once
        return ([], False) if deadline is not None else real(logdir, deadline)

    monkeypatch.setattr(discovery, "scan_logdir_bounded", cut_short)
    assert [r.run for r in index.refresh()] == [r.run for r in full]


def test_symlinked_run_directories_are_followed_without_looping(tmp_path):
    """A run directory symlinked into the logdir is found (TensorBoard follows them too); a
    symlink back up the tree does not make the scan loop."""
    elsewhere = tmp_path / "elsewhere"
    write_tpu_session(str(elsewhere), "", "2026_01_01_00_00_00", [SynthConfig(seed=3)])
    logdir = tmp_path / "logdir"
    write_tpu_session(str(logdir), "local", "2026_01_02_00_00_00", [SynthConfig(seed=4)])
    os.symlink(elsewhere, logdir / "linked")
    os.symlink(logdir, logdir / "local" / "loop")  # a cycle
    runs = {r.run: r for r in scan_logdir(str(logdir))}
    assert set(runs) == {"local/2026_01_02_00_00_00", "linked/2026_01_01_00_00_00"}
    service = RooflineService(str(logdir))
    assert service.program("linked/2026_01_01_00_00_00", "", True)["rows"]


def test_progress_tells_how_many_hosts_are_read_while_they_are(tmp_path, monkeypatch):
    """`/progress` while a run's hosts are read: asked from the reader's own progress callback
    (so at a known point of the read), it counts the hosts read so far of the request's,
    the cached ones included; before and after, nothing is being read."""
    from werkzeug.test import Client
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.routes import RooflineRoutes

    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    write_tpu_session(
        str(tmp_path),
        "pod",
        "2026_01_01_00_00_00",
        [
            SynthConfig(seed=i, hostname=f"h{i}", num_steps=2, ops_per_step=20, distinct_ops=10)
            for i in range(4)
        ],
    )
    run = "pod/2026_01_01_00_00_00"
    seen = []

    def progress(host, done, total, hosts_done=None, hosts_total=None):
        if done >= total:  # a host finished: the route counts it
            seen.append((hosts_done, hosts_total, route()))

    service = RooflineService(str(tmp_path), progress=progress)
    app = RooflineRoutes(service).table()["/progress"]

    def route():
        r = Client(app, Response).get("/progress", query_string={"run": run})
        assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
        return json.loads(r.data)

    idle = {
        "run": run,
        "reading": False,
        "hosts_done": None,
        "hosts_total": None,
        "elapsed_s": None,
        "hosts_not_read": {},
        "cluster": None,
    }
    assert route() == idle
    service.analysis(run, "h0")  # one host read first: cached for the whole run's read
    seen.clear()
    service.analysis(run, "")
    assert [s[:2] for s in seen] == [(1, 3), (2, 3), (3, 3)]  # the reader's own count
    for k, (_, _, answer) in enumerate(seen):
        assert answer["reading"] is True and answer["hosts_total"] == 4
        assert answer["hosts_done"] == 1 + (k + 1)  # h0 was cached
        assert answer["elapsed_s"] >= 0
    assert route() == idle
    r = Client(app, Response).get("/progress", query_string={"run": "nope"})
    assert r.status_code == 404 and "unknown run" in json.loads(r.data)["error"]["message"]
