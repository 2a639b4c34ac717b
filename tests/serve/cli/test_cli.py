"""The command line prints and exports the same numbers as the API."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
from testpaths import TESTS

from tb_roofline.serve.cli.main import main
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
DEMO = os.path.join(REPO, "testdata", "demo")


def test_report_shows_device_program_and_top_ops():
    out = io.StringIO()
    assert main([DEMO, "--top", "5"], out=out) == 0
    text = out.getvalue()
    assert "Device: TPU v4" in text and "peak CMEM Read" in text
    assert "Program records" in text and "Average" in text
    assert "Top opportunities: 5 of" in text and "potential_time_saved_us" in text
    assert "1 other run in this logdir" in text
    assert "host tpu-v4-host0" in text  # each host's own Total is labelled with its host


def test_report_lists_caveated_ops_apart_and_kernel_view():
    """Async halves of host-offload copies are not opportunities: they are listed apart."""
    out = io.StringIO()
    assert main([DEMO, "--run", "v6e_train/2026_11_29_10_00_00", "--top", "100"], out=out) == 0
    text = out.getvalue()
    top, caveats = text.split("Top opportunities", 1)[1].split("are not roofline measurements", 1)
    assert "copy-start" not in top and "copy-done" not in top
    assert "async_wait" in caveats and "copy-done" in caveats
    kernel = os.path.join(REPO, "testdata", "kineto", "a100_80gb_shapes")
    out = io.StringIO()
    assert main([kernel, "--view", "kernel", "--top", "3"], out=out) == 0
    assert "kernels by potential time saved" in out.getvalue()
    out = io.StringIO()
    assert main(["export", kernel, "--view", "kernel", "--format", "json", "-o", "-"], out=out) == 0
    rows = json.loads(out.getvalue())
    assert any(
        "cutlass_80_tensorop_s1688gemm" in r["operation"] and r["precision"] == "tf32" for r in rows
    )


def test_export_is_what_the_api_serves(tmp_path):
    run = "v6e_train/2026_11_29_10_00_00"
    target = tmp_path / "ops.json"
    assert (
        main(
            [
                "export",
                DEMO,
                "--run",
                run,
                "--format",
                "json",
                "--name",
                "fusion",
                "-o",
                str(target),
            ]
        )
        == 0
    )
    api, _, _ = RooflineService(DEMO).export(run, "", True, level="op", fmt="json", name="fusion")
    assert target.read_text() == api
    assert all("fusion" in r["operation"] for r in json.loads(api))


def test_console_script_and_errors():
    done = subprocess.run(
        [sys.executable, "-m", "tb_roofline.serve.cli.main", "runs", DEMO],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "v4_pod/2026_11_29_11_30_00" in done.stdout
    err = subprocess.run(
        [sys.executable, "-m", "tb_roofline.serve.cli.main", DEMO, "--run", "nope"],
        capture_output=True,
        text=True,
    )
    assert err.returncode == 1 and "unknown run 'nope'" in err.stderr


@pytest.mark.slow
def test_calibrate_then_cpu_profile_gets_a_roof(tmp_path):
    """`calibrate` writes a device file; a CPU profile beside it gets peaks and efficiencies."""
    import shutil

    logdir = tmp_path / "logdir"
    shutil.copytree(os.path.join(REPO, "testdata", "jax_cpu", "mlp"), logdir / "mlp")
    service = RooflineService(str(logdir))
    run = service.list_runs()["runs"][0]["run"]
    assert not service.device(run, "")["device"]["peaks_known"]
    codes = [d["code"] for d in service.diagnostics(run, "")["diagnostics"]]
    assert "peaks_unknown" in codes
    out = io.StringIO()
    device_file = logdir / "roofline_device.json"
    assert main(["calibrate", "--quick", "--seconds", "2", "-o", str(device_file)], out=out) == 0
    dev = service.device(run, "")["device"]  # the cache notices the new device file
    assert dev["peaks_known"] and dev["compute"][0]["source"] == "measured"
    prog = service.program(run, "", True)
    total = dict(zip(prog["columns"], prog["rows"][0]))
    assert 0 < total["roofline_efficiency"] and total["bound_by"] != "Unknown"
    assert "device_file" in [d["code"] for d in service.diagnostics(run, "")["diagnostics"]]
    text = io.StringIO()
    assert main([str(logdir), "--device-file", str(device_file), "--top", "3"], out=text) == 0
    assert "(measured)" in text.getvalue()


def test_device_file_places_rows_under_its_own_ceilings(tmp_path):
    """A device file applied later places each op under that file's ceiling of its precision."""
    import shutil

    from tb_roofline.devices.device_file import write_device_file
    from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak

    shutil.copytree(os.path.join(REPO, "testdata", "jax_cpu", "mlp"), tmp_path / "mlp")
    device = DeviceInfo(
        type="test cpu",
        kind="cpu",
        num_cores=1,
        compute=[ComputePeak("fp64", 50.0, "user"), ComputePeak("fp32", 100.0, "user")],
        memories=[MemoryPeak("hbm", "DRAM", 20.0, "user")],
    )
    write_device_file(str(tmp_path / "roofline_device.json"), device)
    service = RooflineService(str(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    ops = service.ops(run, "", True)
    cols = ops["columns"]
    placed = {(r[cols.index("precision")], r[cols.index("peak_flop_rate")]) for r in ops["rows"]}
    assert placed == {("fp32", 100.0)}  # f32 work under the fp32 roof, not the first (fp64)


def test_report_json_names_its_run_or_covers_every_run():
    """`report --format json` on a logdir of two runs names the run it picked (the newest)
    and the one it leaves out; `--all-runs` gives one report per run."""
    out = io.StringIO()
    assert main(["report", DEMO, "--format", "json", "--top", "2"], out=out) == 0
    one = json.loads(out.getvalue())
    runs = [r["run"] for r in RooflineService(DEMO).list_runs()["runs"]]
    assert len(runs) == 2 and one["run"] == runs[0]
    assert one["run_choice"]["other_runs"] == runs[1:]
    assert one["run_choice"]["picked_by"].startswith("newest")
    out = io.StringIO()
    assert main(["report", DEMO, "--format", "json", "--top", "2", "--all-runs"], out=out) == 0
    every = json.loads(out.getvalue())
    assert every["schema"] == "tb-roofline-reports/1" and every["runs"] == runs
    assert [r["run"] for r in every["reports"]] == runs
    assert all(r["schema"] == "tb-roofline-report/1" for r in every["reports"])


def _pod(tmp_path, hosts=4) -> tuple[str, str]:
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    cfgs = [
        SynthConfig(
            seed=h,
            num_cores=1,
            num_steps=3,
            ops_per_step=20,
            distinct_ops=8,
            hostname=f"host{h}",
            program_seed=1,
        )
        for h in range(hosts)
    ]
    write_tpu_session(str(tmp_path), "pod", "2026_01_01_00_00_00", cfgs)
    return str(tmp_path), "pod/2026_01_01_00_00_00"


def test_progress_off_a_terminal_is_k_of_n_host_lines(tmp_path, capsys, monkeypatch):
    """Off a terminal (a CI log, a Kubernetes Job) the CLI's progress is whole lines
    "reading: k of N hosts", the last one when every host is read."""
    from tb_roofline.serve.cli.main import _Progress

    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    logdir, run = _pod(tmp_path)
    progress = _Progress(enabled=True, tty=False)
    progress.FIRST_S = progress.EVERY_S = 0.0  # every host's line (a real read takes seconds)
    RooflineService(logdir, progress=progress).analysis(run, "")
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("tb-roofline: reading: ") for line in lines)
    assert lines[-1].startswith("tb-roofline: reading: 4 of 4 hosts (")
    counts = [int(line.split()[2]) for line in lines]
    assert counts == sorted(counts) and "\r" not in "".join(lines)


def test_tensorboard_logs_progress_at_its_default_verbosity(tmp_path, caplog, monkeypatch):
    """TensorBoard keeps loggers at WARNING; the plugin's progress logger is set to INFO, so
    "read k of N hosts" shows there."""
    import logging

    from tb_roofline.serve.service.progress import LoggedProgress

    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    logdir, run = _pod(tmp_path)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)  # what TensorBoard's default verbosity does (absl)
    try:
        progress = LoggedProgress()
        progress.FIRST_S = progress.EVERY_S = 0.0
        RooflineService(logdir, progress=progress).analysis(run, "")
        logging.getLogger("tb_roofline.other").info("not shown at this verbosity")
    finally:
        root.setLevel(level)
    assert not [r for r in caplog.records if r.name == "tb_roofline.other"]
    lines = [r.getMessage() for r in caplog.records if r.name == "tb_roofline.progress"]
    assert lines and lines[-1].startswith("tb-roofline: read 4 of 4 hosts")
    assert all(
        r.levelno == logging.INFO for r in caplog.records if r.name == "tb_roofline.progress"
    )


def _comm_logdir(tmp_path):
    """The real 8-device JAX captures (one run each, a device file giving the host a link
    roof) and the real A100 trace, in one logdir."""
    import shutil

    from test_comm_chart import DEVICE
    from test_jax_collectives import DATA, EXPECTED

    root = tmp_path / "comm"
    for case in sorted(EXPECTED):  # the captures whose collectives are derived by hand
        shutil.copytree(os.path.join(DATA, case), root / "jax" / case)
    (root / "jax" / "roofline_device.json").write_text(json.dumps(DEVICE))
    shutil.copytree(os.path.join(REPO, "testdata", "kineto", "a100_80gb_shapes"), root / "a100")
    return str(root)


def _http_comm(logdir, run, **params):
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.plugin import RooflinePlugin

    app = RooflinePlugin(base_plugin.TBContext(logdir=logdir)).get_plugin_apps()["/comm"]
    r = Client(app, Response).get("/comm", query_string=dict(run=run, **params))
    assert r.status_code == 200
    return json.loads(r.data)


@pytest.mark.slow
def test_comm_is_the_http_answer_in_json_csv_and_text(tmp_path):
    """`tb-roofline comm` gives /comm's values: its JSON is the HTTP answer, its CSV the
    points in the tab's columns, its text each point; on the JAX captures the message sizes
    and bus bytes are the ones derived by hand from their HLO (test_jax_collectives)."""
    import csv

    from test_jax_collectives import EXPECTED

    from tb_roofline.serve.cli.comm import CSV_COLUMNS

    logdir = _comm_logdir(tmp_path)
    runs = [r["run"] for r in RooflineService(logdir).list_runs()["runs"]]
    assert len(runs) == len(EXPECTED) + 1
    for run in runs:
        out = io.StringIO()
        assert main(["comm", logdir, "--run", run, "--format", "json"], out=out) == 0
        got = json.loads(out.getvalue())
        assert got == _http_comm(logdir, run) and got["points"]
        case = run.split("/")[1] if run.startswith("jax/") else None
        if case is not None:  # hand-derived S and bus bytes per execution
            for p in got["points"]:
                kind, n, _, _, message, bus = EXPECTED[case][p["operation"]]
                assert (p["kind"], p["group_size"], p["message_bytes"]) == (kind, n, message)
                assert p["bus_bytes"] == pytest.approx(bus * p["occurrences"], rel=1e-9)
                assert p["link_gbs"] == 50.0
        target = tmp_path / "comm.csv"
        assert main(["comm", logdir, "--run", run, "--format", "csv", "-o", str(target)]) == 0
        rows = list(csv.reader(target.read_text().splitlines()))
        assert rows[0] == CSV_COLUMNS and len(rows) == len(got["points"]) + 1
        for row, p in zip(rows[1:], got["points"]):
            for c, cell in zip(CSV_COLUMNS, row):
                want = p[c]
                if want is None:
                    assert cell == ""
                elif isinstance(want, bool):
                    assert cell == str(want).lower()
                elif isinstance(want, (int, float)):
                    assert float(cell) == want
                else:
                    assert cell == want
        out = io.StringIO()
        assert main(["comm", logdir, "--run", run], out=out) == 0
        text = out.getvalue()
        assert f"{len(got['points'])} collective point(s)" in text
        assert all(p["operation"][:60] in text for p in got["points"])
        link = got["links"][0]
        assert f"Link roof {link['name']}" in text


def test_comm_excludes_infeed_outfeed_as_the_api_and_refuses_a_bad_format(tmp_path, capsys):
    logdir = _comm_logdir(tmp_path)
    run = "a100"
    out = io.StringIO()
    assert (
        main(
            [
                "comm",
                logdir,
                "--run",
                run,
                "--host",
                "rank0",
                "--format",
                "json",
                "--exclude-infeed-outfeed",
            ],
            out=out,
        )
        == 0
    )
    assert json.loads(out.getvalue()) == _http_comm(
        logdir, run, host="rank0", infeed_outfeed="exclude"
    )
    with pytest.raises(SystemExit):
        main(["comm", logdir, "--format", "xml"])
    assert main(["comm", logdir, "--run", "nope"], out=io.StringIO()) == 1
    assert "nope" in capsys.readouterr().err
