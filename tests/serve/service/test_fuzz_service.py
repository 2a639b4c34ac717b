"""Seeded fuzzing of the whole service over damaged XSpace and Kineto files (fuzz_profiles.py):
every answer is served as strict JSON or is a public error (413 or 422), never another
exception (a 500); no file takes long; memory stays bounded; and one bad run never stops the
others from being served. test_fuzz_tensorboard.py drives a representative subset through a
real TensorBoard. `TB_ROOFLINE_FUZZ_SEEDS=<n>` runs more cases than the default.
"""

from __future__ import annotations

import json
import os
import resource
import time
import traceback

import pytest
from fuzz_profiles import XPLANE, damaged_kineto, damaged_xspace, xspace_bases
from tensorboard import errors as tb_errors

N = int(os.environ.get("TB_ROOFLINE_FUZZ_SEEDS", "300"))
# Fresh seeds each hardening round (from 17,000), besides the first N: a fixed
# range would only ever find what it found once. TB_ROOFLINE_FUZZ_SEED_BASE moves them.
NEW_SEED_BASE = int(os.environ.get("TB_ROOFLINE_FUZZ_SEED_BASE", "17000"))
SEEDS = list(range(N)) + list(range(NEW_SEED_BASE, NEW_SEED_BASE + N // 3))
TIME_LIMIT_S = 10.0
SESSION = "2026_01_01_00_00_00"


def _old(path):
    past = time.time() - 3600
    os.utime(path, (past, past))


def write_case(logdir, run: str, suffix: str, data: bytes) -> str:
    """Write one damaged file as its own run; returns the run name the service lists."""
    if suffix == XPLANE:
        folder = os.path.join(logdir, run, "plugins", "profile", SESSION)
        name = f"{run}/{SESSION}"
    else:
        folder = os.path.join(logdir, run)
        name = run
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, ("h" if suffix == XPLANE else "w") + suffix)
    with open(path, "wb") as f:
        f.write(data)
    _old(path)  # not "young": a damaged file must be judged, not taken as being written
    return name


def serve_everything(service, run: str) -> str:
    """Every endpoint of one run; 'ok' or the public error code. Anything else fails."""
    outcome = "ok"
    for call in (
        lambda: service.program(run, "", True),
        lambda: service.ops(run, "", False),
        lambda: service.device(run, ""),
        lambda: service.diagnostics(run, ""),
        lambda: service.ops(run, "", True, view="kernel"),
        lambda: service.export(run, "", True, level="op", fmt="csv")[0],
    ):
        try:
            answer = call()
        except tb_errors.PublicError as exc:
            if getattr(exc, "code", "") == "invalid_argument" and "view" in str(exc):
                continue  # no kernel view for this run
            assert exc.http_code in (413, 422), f"{run}: {exc.http_code} {exc}"
            outcome = exc.code
            continue
        except Exception:  # what the plugin would answer as a 500
            pytest.fail(f"{run}: {traceback.format_exc()}")
        json.dumps(answer, allow_nan=False)
    return outcome


def _fuzz(tmp_path, cases, service_kw=None):
    from tb_roofline.serve.service.core import RooflineService

    logdir = str(tmp_path)
    good = write_case(logdir, "good", XPLANE, xspace_bases()["tpu"])
    runs = [write_case(logdir, run, suffix, data) for run, suffix, data in cases]
    service = RooflineService(logdir, **(service_kw or {}))
    assert serve_everything(service, good) == "ok"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcomes = {}
    for run in runs:
        t = time.monotonic()
        outcome = serve_everything(service, run)
        elapsed = time.monotonic() - t
        assert elapsed < TIME_LIMIT_S, f"{run} took {elapsed:.1f} s"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert service.program(good, "", True)["rows"]  # the others are still served
    growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert growth_mb < 1024, f"peak memory grew by {growth_mb:.0f} MB"
    return outcomes


@pytest.mark.parametrize("base", ["tpu", "gpu", "cpu"])
def test_damaged_xspace_files(tmp_path, base):
    data = xspace_bases()[base]
    cases = [(f"x_{base}_{seed}", XPLANE, damaged_xspace(seed, base, data)) for seed in SEEDS]
    outcomes = _fuzz(tmp_path, cases)
    assert outcomes.get("ok") and outcomes.get("bad_profile"), outcomes


def test_damaged_kineto_files(tmp_path, monkeypatch):
    from test_kineto_fuzz import DOCS, _mutate_doc

    monkeypatch.setenv("TB_ROOFLINE_MAX_EVENTS", "200000")  # bombs stop early (see the
    # default limits in test_hostile_inputs.py::test_default_limits_bound_the_memory_of_a_bomb)
    cases = []
    for seed in SEEDS[: N // 2] + SEEDS[N : N + N // 6]:
        suffix, data = damaged_kineto(seed, DOCS, _mutate_doc)
        cases.append((f"k_{seed}", suffix, data))
    outcomes = _fuzz(tmp_path, cases, {"max_file_mb": 64})
    assert outcomes.get("ok") and outcomes.get("bad_profile") and outcomes.get("too_large"), (
        outcomes
    )


USER_JSON_CASES = max(30, N // 6)
DEVICE_DOC = {
    "tb_roofline_device_file": 1,
    "kind": "cpu",
    "num_cores": 2,
    "compute": {"fp32": 117.4, "fp64": {"gflops": 58.8, "source": "measured"}},
    "memories": {"hbm": {"name": "DRAM", "gbs": 24.7}, "l3": 300},
    "measurement": {"threads": 1, "stream": {"copy_gbs": 24.7, "runs": [1, 2.5]}},
}
WORKLOAD_DOC = {
    "tb_roofline_workload_file": 1,
    "model_flops_per_step": 3.1e15,
    "tokens_per_step": 65536,
    "samples_per_step": 32,
    "num_devices": 8,
}


def test_odd_numbers_in_device_and_workload_files(tmp_path, capsys):
    """Device and workload files whose numbers are NaN / Infinity spellings, 400- to
    20,000-digit integers or beyond the float range: every route answers strict JSON or a
    422 naming the file, and the CLI exits 0 or 2 with one line (never a 500 or traceback)."""
    import shutil

    from fuzz_profiles import REPO, damaged_user_json
    from test_user_numbers import _client, _query

    from tb_roofline.serve.cli.main import main

    routes = (
        "/device",
        "/program",
        "/ops",
        "/diagnostics",
        "/guidance",
        "/report",
        "/export",
        "/compare",
    )
    source = os.path.join(REPO, "testdata", "jax_cpu", "mlp")
    outcomes = {}
    for seed in range(USER_JSON_CASES):
        logdir = tmp_path / f"case{seed}"
        shutil.copytree(source, logdir / "mlp")
        device = damaged_user_json(seed, DEVICE_DOC, "device")
        workload = damaged_user_json(seed, WORKLOAD_DOC, "workload")
        (logdir / "roofline_device.json").write_text(device if seed % 3 else json.dumps(DEVICE_DOC))
        (logdir / "roofline_workload.json").write_text(
            workload if seed % 3 != 1 else json.dumps(WORKLOAD_DOC)
        )
        for folder, _, files in os.walk(logdir):
            for name in files:
                _old(os.path.join(folder, name))
        client = _client(logdir)
        run = client.get("/runs").json["runs"][0]["run"]
        for route in routes:
            t = time.monotonic()
            r = client.get(_query(route, run))
            assert time.monotonic() - t < TIME_LIMIT_S, (seed, route)
            assert r.status_code in (200, 422), (seed, route, r.status_code, r.data[:400])
            if r.status_code == 200 and "json" not in r.headers.get("Content-Type", ""):
                outcomes["ok"] = outcomes.get("ok", 0) + 1  # the CSV export
                continue
            body = json.loads(r.data, parse_constant=lambda c: pytest.fail(f"{c} in {route}"))
            if r.status_code == 422:
                code = body["error"]["code"]
                assert code in ("bad_device_file", "bad_workload_file"), (seed, body)
                assert (
                    "roofline_device.json"
                    if code == "bad_device_file"
                    else "roofline_workload.json"
                ) in body["error"]["message"]
                outcomes[code] = outcomes.get(code, 0) + 1
            else:
                outcomes["ok"] = outcomes.get("ok", 0) + 1
        rc = main(["report", str(logdir), "--run", run])
        err = capsys.readouterr().err
        assert rc in (0, 2) and "Traceback" not in err, (seed, rc, err[-2000:])
        shutil.rmtree(logdir)
    assert (
        outcomes.get("ok") and outcomes.get("bad_device_file") and outcomes.get("bad_workload_file")
    ), outcomes
