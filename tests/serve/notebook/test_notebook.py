"""The Python API (`tb_roofline.load`) against the CLI's export of every run in testdata/: the
same rows, columns and numbers, as DataFrames (pandas) and as numpy record arrays."""

from __future__ import annotations

import io
import json
import math
import os
import sys

import pytest
from testpaths import TESTS

import tb_roofline
from tb_roofline.serve.cli import main as cli

REPO = os.path.dirname(TESTS)
TESTDATA = os.path.join(REPO, "testdata")


def _runs():
    out = io.StringIO()
    assert cli.main(["runs", TESTDATA, "--json"], out=out) == 0
    return [r["run"] for r in json.loads(out.getvalue())]


RUNS = _runs()


def cli_export(*args):
    out = io.StringIO()
    assert (
        cli.main(
            ["export", TESTDATA, "--format", "json", "-o", "-", "--no-progress", *args], out=out
        )
        == 0
    )
    return json.loads(out.getvalue())


def same(value, expected) -> bool:
    if expected is None:
        return value is None or (isinstance(value, float) and math.isnan(value))
    if isinstance(expected, float) and isinstance(value, (int, float)):
        return value == expected
    return value == expected


def assert_table_equals(table, rows, columns_of):
    """`table` (DataFrame or record array) holds exactly the export's rows, in its order."""
    assert len(table) == len(rows)
    if not rows:
        return
    columns = list(rows[0])
    assert columns_of(table) == columns
    for i, row in enumerate(rows):
        for col in columns:
            cell = table[col][i] if not hasattr(table, "iloc") else table[col].iloc[i]
            if hasattr(cell, "item"):
                cell = cell.item()
            assert same(cell, row[col]), (i, col, cell, row[col])


def facets_views(a, run):
    """The op views besides `op` the run offers (kernel, kernel_hw for PyTorch GPU traces)."""
    return [v for v in a.service.ops(run, "").get("views", ["op"]) if v != "op"]


@pytest.fixture(scope="module")
def analyses():
    return {run: tb_roofline.load(TESTDATA, run=run) for run in RUNS}


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS)
def test_api_tables_equal_the_cli_export(run, analyses):
    pd = pytest.importorskip("pandas")
    a = analyses[run]
    ops = a.ops()
    assert isinstance(ops, pd.DataFrame)
    assert_table_equals(ops, cli_export("--run", run), lambda t: list(t.columns))
    assert_table_equals(
        a.program(), cli_export("--run", run, "--level", "program"), lambda t: list(t.columns)
    )
    # Filters as the export's.
    facets = a.service.ops(run, "")["facets"]
    if facets["category"]:
        category = facets["category"][0]
        assert_table_equals(
            a.ops(category=category),
            cli_export("--run", run, "--category", category),
            lambda t: list(t.columns),
        )
    for view in facets_views(a, run):
        assert_table_equals(
            a.ops(view), cli_export("--run", run, "--view", view), lambda t: list(t.columns)
        )
    assert_table_equals(
        a.ops(name="fusion", infeed_outfeed=False),
        cli_export("--run", run, "--name", "fusion", "--exclude-infeed-outfeed"),
        lambda t: list(t.columns),
    )


@pytest.mark.parametrize("run", RUNS[::4])
def test_without_pandas_tables_are_record_arrays(run, analyses, monkeypatch):
    import numpy as np

    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    a = analyses[run]
    ops = a.ops()
    assert isinstance(ops, np.recarray)
    assert_table_equals(ops, cli_export("--run", run), lambda t: list(t.dtype.names))
    assert_table_equals(
        a.program(), cli_export("--run", run, "--level", "program"), lambda t: list(t.dtype.names)
    )


def test_device_guidance_diagnostics_and_compare_match_the_cli_report():
    run = next(r for r in RUNS if r.startswith("demo/v4_pod"))
    a = tb_roofline.load(os.path.join(TESTDATA, "demo"))  # the newest run by default
    assert a.run == run.split("/", 1)[1]
    out = io.StringIO()
    assert (
        cli.main(["report", TESTDATA, "--run", run, "--format", "json", "--no-progress"], out=out)
        == 0
    )
    report = json.loads(out.getvalue())
    assert a.device == report["device"]
    assert a.diagnostics() == report["diagnostics"]
    assert a.guidance()["findings"] == report["guidance"]["findings"]
    # compare: this run against another, as `tb-roofline diff` answers it.
    base = tb_roofline.load(TESTDATA, run="compare/jax_cpu/mlp_b64/2026_11_30_14_13_09")
    cand = tb_roofline.load(TESTDATA, run="compare/jax_cpu/mlp_b128/2026_11_30_14_13_10")
    cmp = cand.compare(base)
    out = io.StringIO()
    cli.main(
        [
            "diff",
            TESTDATA,
            "--base-run",
            base.run,
            "--run",
            cand.run,
            "--format",
            "json",
            "--no-progress",
        ],
        out=out,
    )
    diff = json.loads(out.getvalue())
    assert len(cmp.ops()) == len(diff["ops"]) > 0
    assert math.isclose(
        cmp.summary["time_change_us"], diff["summary"]["time_change_us"], rel_tol=1e-5
    )
    # A run name of the same logdir works as the base too.
    assert len(cand.compare(base.run).ops()) == len(diff["ops"])


def test_load_errors_name_the_problem(tmp_path):
    from tensorboard import errors as tb_errors

    with pytest.raises(tb_errors.NotFoundError, match="not a directory"):
        tb_roofline.load(str(tmp_path / "nowhere"))
    with pytest.raises(tb_errors.NotFoundError, match="no profiles"):
        tb_roofline.load(str(tmp_path))
    with pytest.raises(tb_errors.NotFoundError, match="unknown run 'nope'; known runs: [^ ]"):
        tb_roofline.load(TESTDATA, run="nope")


def test_repr_html_is_the_self_contained_report_in_a_frame():
    a = tb_roofline.load(os.path.join(TESTDATA, "demo"))
    shown = a._repr_html_()
    assert shown.startswith("<iframe") and 'sandbox="allow-scripts' in shown
    assert shown.isascii()
    assert "roofline-report:" in shown and "http://" not in shown.split("srcdoc=")[0]


def test_comm_equals_the_http_api_and_filters_by_kind():
    """`Analysis.comm()` holds `/comm`'s points, row for row; `comm_links()` its roofs."""
    run_dir = os.path.join(TESTDATA, "jax_cpu_collectives", "jit_2d")
    a = tb_roofline.load(run_dir)
    answer = a.service.comm(a.run, a.host)
    table = a.comm()
    assert_table_equals(table, answer["points"], lambda t: list(t.columns))
    assert a.comm_links() == {k: answer[k] for k in ("links", "kinds", "latency_note")}
    (kind,) = answer["kinds"]
    assert len(a.comm(kind=kind.upper())) == len(answer["points"])  # any case
    with pytest.raises(ValueError, match="not among this run's collectives"):
        a.comm(kind="all-to-all-nope")
