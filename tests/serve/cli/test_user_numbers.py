"""Numbers in the user's JSON files (roofline_device.json, roofline_workload.json) that no field
can hold: 400-digit integers, NaN / Infinity spellings, floats beyond the float range. Each is a
422 naming the file and the field on every route of the run, and a one-line CLI error with exit
code 2 (never a 500 or a traceback). The CLI's own per-step flags are bounded the same way.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from testpaths import TESTS

REPO = os.path.dirname(TESTS)
ROUTES = (
    "/device",
    "/program",
    "/ops",
    "/diagnostics",
    "/guidance",
    "/report",
    "/export",
    "/compare",
)
BIG = "1" + "0" * 399  # 400 digits: beyond the float range (float() overflows)
HUGE = "7" * 5000  # beyond Python's int-from-text limit (a ValueError, not an overflow)
BAD_NUMBERS = [BIG, "-" + BIG, HUGE, "NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 40]


def _cpu_logdir(tmp_path):
    root = tmp_path / "logs"
    shutil.copytree(os.path.join(REPO, "testdata", "jax_cpu", "mlp"), root / "mlp")
    past = 1_700_000_000
    for folder, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(folder, name), (past, past))
    return root


def _client(logdir):
    from tensorboard.plugins import base_plugin
    from werkzeug import test as wtest
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.plugin import RooflinePlugin

    apps = RooflinePlugin(base_plugin.TBContext(logdir=str(logdir))).get_plugin_apps()
    return wtest.Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)


def _query(route, run):
    return f"{route}?run={run}" + (f"&base={run}" if route == "/compare" else "")


DEVICE_FIELDS = {  # template with the bad number as X -> the field the message must name
    '{"kind": "cpu", "compute": {"fp32": X}, "memories": {"hbm": 10}}': "compute.fp32",
    '{"kind": "cpu", "compute": {"fp32": {"gflops": X}}}': "compute.fp32.gflops",
    '{"kind": "cpu", "compute": {"fp32": 5}, "memories": {"hbm": {"gbs": X}}}': "memories.hbm.gbs",
    '{"kind": "cpu", "num_cores": X, "compute": {"fp32": 5}}': "num_cores",
    '{"kind": "cpu", "compute": {"fp32": 5}, "measurement": {"secret_key": [1, X]}}': (
        "measurement.entry 1.item 2"
    ),
}


def _routes_answer(client, run, code, *needles, routes=ROUTES):
    for route in routes:
        r = client.get(_query(route, run))
        assert r.status_code == 422, (route, r.status_code, r.data[:300])
        error = r.json["error"]
        assert error["code"] == code, (route, error)
        for needle in needles:
            assert needle in error["message"], (route, needle, error["message"])
        assert "Traceback" not in error["message"]


@pytest.mark.parametrize("template", list(DEVICE_FIELDS))
@pytest.mark.parametrize("number", BAD_NUMBERS, ids=lambda n: n[:12] + f"..{len(n)}")
def test_device_file_numbers_out_of_range(tmp_path, capsys, template, number):
    logdir = _cpu_logdir(tmp_path)
    (logdir / "roofline_device.json").write_text(template.replace("X", number))
    field = DEVICE_FIELDS[template]
    client = _client(logdir)
    run = client.get("/runs").json["runs"][0]["run"]
    _routes_answer(client, run, "bad_device_file", "roofline_device.json", field)
    assert "secret_key" not in client.get(_query("/program", run)).json["error"]["message"]
    from tb_roofline.serve.cli.main import main

    assert main(["report", str(logdir), "--run", run]) == 2
    err = capsys.readouterr().err
    assert "roofline_device.json" in err and field in err and "Traceback" not in err


WORKLOAD_FIELDS = ("model_flops_per_step", "tokens_per_step", "samples_per_step", "num_devices")


@pytest.mark.parametrize("key", WORKLOAD_FIELDS)
@pytest.mark.parametrize("number", BAD_NUMBERS, ids=lambda n: n[:12] + f"..{len(n)}")
def test_workload_file_numbers_out_of_range(tmp_path, capsys, key, number):
    logdir = _cpu_logdir(tmp_path)
    shutil.copy(
        os.path.join(REPO, "testdata", "guidance", "roofline_device.json"),
        logdir / "roofline_device.json",
    )
    text = '{"tokens_per_step": 1024, "%s": %s}' % (key, number)
    if key == "tokens_per_step":
        text = '{"tokens_per_step": %s}' % number
    (logdir / "roofline_workload.json").write_text(text)
    client = _client(logdir)
    run = client.get("/runs").json["runs"][0]["run"]
    _routes_answer(
        client,
        run,
        "bad_workload_file",
        "roofline_workload.json",
        key,
        routes=("/guidance", "/report"),
    )
    assert client.get(_query("/program", run)).status_code == 200
    from tb_roofline.serve.cli.main import main

    assert main(["report", str(logdir), "--run", run]) == 2
    err = capsys.readouterr().err
    assert "roofline_workload.json" in err and key in err and "Traceback" not in err


@pytest.mark.parametrize(
    "flag", ["--model-flops-per-step", "--tokens-per-step", "--samples-per-step", "--num-devices"]
)
@pytest.mark.parametrize("number", BAD_NUMBERS + ["0", "-3"], ids=lambda n: n[:12] + f"..{len(n)}")
def test_cli_per_step_flags_out_of_range_exit_2(tmp_path, capsys, flag, number):
    logdir = _cpu_logdir(tmp_path)
    from tb_roofline.serve.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["report", str(logdir), flag, number])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err and len(err) < 2000


def test_in_range_numbers_still_work(tmp_path, capsys):
    """The bounds leave every real figure alone: integers of 19 digits, floats like 3.1e18."""
    logdir = _cpu_logdir(tmp_path)
    (logdir / "roofline_device.json").write_text(
        json.dumps(
            {
                "kind": "cpu",
                "num_cores": 64,
                "compute": {"fp32": 2150.0},
                "memories": {"hbm": 180},
                "measurement": {"big": 10**25, "ratio": 1e300},
            }
        )
    )
    (logdir / "roofline_workload.json").write_text(
        '{"model_flops_per_step": 3100000000000000000, "tokens_per_step": 65536, "num_devices": 8}'
    )
    client = _client(logdir)
    run = client.get("/runs").json["runs"][0]["run"]
    for route in ROUTES:
        r = client.get(_query(route, run))
        assert r.status_code in (200, 404), (route, r.status_code, r.data[:300])
    guide = client.get(_query("/guidance", run)).json
    assert "3100000000000000000" in json.dumps(guide) or "3.1e+18" in json.dumps(guide)
