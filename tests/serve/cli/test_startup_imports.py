"""Start-up: each entry point imports what its work needs, when it needs it.

Measured in a fresh interpreter (what a user starts): the modules in `sys.modules` after the
entry point's own imports, never a timing (docs/benchmarks.md has those). A regression here
is a module-level import added to a module on the listing path (the service, the caches,
discovery, the readers package), which costs every `tb-roofline runs` and every TensorBoard
start the whole model and numpy again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from testpaths import TESTS

REPO = os.path.dirname(TESTS)
HEAVY = (
    "numpy",
    "tb_roofline.model.records.roofline",
    "tb_roofline.model.compare.comparison",
    "tb_roofline.devices.datasheets",
    "tb_roofline.devices.datasheets_nvidia_volta_ada",
    "tb_roofline.devices.datasheets_nvidia_hopper_blackwell",
    "tb_roofline.devices.datasheets_amd",
    "tb_roofline.devices.datasheets_tpu",
    "tb_roofline.devices.gpu_peaks",
    "tb_roofline.devices.gpu_arch_rates",
    "tb_roofline.devices.precision_ceilings",
    "tb_roofline.table.op_table",
    "tb_roofline.serve.service.answers",
    "tb_roofline.serve.service.compare",
    "tb_roofline.serve.caches.codec",
    "google.protobuf",
)


def modules_after(code: str) -> set:
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=True,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_the_service_and_listing_runs_import_no_model_and_no_numpy(tmp_path):
    loaded = modules_after(
        "import os\nos.environ['TB_ROOFLINE_CACHE_DIR'] = 'off'\n"
        "from tb_roofline.serve.service.core import RooflineService\n"
        f"s = RooflineService({os.path.join(REPO, 'testdata', 'demo')!r})\n"
        "assert s.list_runs()['runs']"
    )
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_cli_runs_command_imports_no_model_and_no_numpy():
    loaded = modules_after(
        "import io\nfrom tb_roofline.serve.cli import main as cli\nout = io.StringIO()\n"
        f"assert cli.main(['runs', {os.path.join(REPO, 'testdata', 'demo')!r}], out=out) == 0\n"
        "assert 'v6e_train' in out.getvalue()"
    )
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert "tb_roofline.execute.cluster" not in loaded  # no --scheduler: no cluster switch


def test_a_tpu_read_imports_no_gpu_reader_no_hlo_protos_no_comparison():
    """A TPU profile is read by the wire reader: the XLA GPU/CPU reader, the HLO protos and
    cost model, the GPU peak tables and the run comparison stay unimported."""
    loaded = modules_after(
        "import os\nos.environ['TB_ROOFLINE_CACHE_DIR'] = 'off'\n"
        "from tb_roofline.serve.service.core import RooflineService\n"
        f"s = RooflineService({os.path.join(REPO, 'testdata', 'demo')!r})\n"
        "run = [r['run'] for r in s.list_runs()['runs'] if 'v6e' in r['run']][0]\n"
        "assert s.ops(run, '')['rows']"
    )
    assert (
        "numpy" in loaded and "tb_roofline.model.records.roofline" in loaded
    )  # the work needs them
    for name in (
        "tb_roofline.readers.xspace.xla_gpu_cpu",
        "tb_roofline.readers.xspace.xla_gpu_cpu",
        "tb_roofline.costs.hlo.cost_model",
        "tb_roofline.protos.hlo_pb2",
        "tb_roofline.devices.gpu_peaks",
        "tb_roofline.devices.gpu_arch_rates",
        "tb_roofline.model.compare.comparison",
        "tb_roofline.serve.service.compare",
        "numpy.ma",  # (numpy's plain `unique` imports it: 15 ms of a command's start)
    ):
        assert name not in loaded, name
    # ... nor, with no scheduler set, the cluster's networking (execute/cluster.py asks).
    for name in ("socket", "uuid", "queue", "distributed"):
        assert name not in loaded, name


def test_help_imports_no_dataclasses_and_no_logging():
    """`tb-roofline --help` (and an argument error): the parser and the settings it shows."""
    loaded = modules_after(
        "import contextlib, io\nfrom tb_roofline.serve.cli import main as cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n        cli.main(['--help'])\n    except SystemExit:\n        pass\n"
        "assert 'report' in out.getvalue()"
    )
    for name in ("dataclasses", "logging", "numpy", "tb_roofline.serve.service.core"):
        assert name not in loaded, name


def test_import_tb_roofline_is_instant_until_load_is_called():
    """`import tb_roofline` (a notebook's first cell) imports no service, numpy or pandas;
    `tb_roofline.load` brings what it needs when called."""
    loaded = modules_after("import tb_roofline\nassert callable(tb_roofline.load)")
    assert not {
        m
        for m in loaded
        if m.startswith(("tb_roofline.", "numpy", "pandas", "tensorboard", "werkzeug"))
    }
    loaded = modules_after(
        "import os\nos.environ['TB_ROOFLINE_CACHE_DIR'] = 'off'\nimport tb_roofline\n"
        f"a = tb_roofline.load({os.path.join(REPO, 'testdata', 'demo')!r})\n"
        "assert a.device['peaks_known']"
    )
    assert (
        "tb_roofline.serve.notebook" in loaded and "tb_roofline.serve.web.html_report" not in loaded
    )


def test_serve_and_html_help_import_no_model_and_no_numpy():
    for command in ("serve", "html"):
        loaded = modules_after(
            "import io, contextlib\nfrom tb_roofline.serve.cli import main as cli\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            f"    cli.main([{command!r}, '--help'])"
        )
        assert not loaded & set(HEAVY), (command, sorted(loaded & set(HEAVY)))
