"""`tb-roofline html` / `diff --html`: the one-file report opened from file:// in Chromium with
every request that is not the file itself aborted and the browser offline. The numbers the
page holds are compared with the CLI's own export of the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from e2e_helpers import READY, REPO, hover, point_count, shot, wait_js

DEMO = os.path.join(REPO, "testdata", "demo")
COMPARE = os.path.join(REPO, "testdata", "compare", "jax_cpu")
SECTION = "document.querySelector('#compare-section')"


def cli(*args) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tb_roofline.serve.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def export(logdir, run, *extra):
    return json.loads(
        cli("export", logdir, "--run", run, "--format", "json", "-o", "-", "--no-progress", *extra)
    )


def open_offline(page, path):
    """Open the report with the network off; returns the list of requests other than it."""
    others = []

    def handle(route):
        url = route.request.url
        if url.startswith("file://"):
            route.continue_()
        else:
            others.append(url)
            route.abort()

    page.context.route("**/*", handle)
    page.context.set_offline(True)
    page.goto("file://" + path)
    wait_js(page, READY, timeout=120)
    return others


def runs_of(logdir):
    return [r["run"] for r in json.loads(cli("runs", logdir, "--json"))]


def app_rows(page, which):
    return page.evaluate(f"window.__roofline.data.{which}.map(r => ({{...r}}))")


KEYS = (
    "total_self_time_us",
    "flop_rate",
    "roofline_efficiency",
    "bound_by",
    "operational_intensity",
    "potential_time_saved_us",
    "caveat",
)


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    run = runs_of(DEMO)[-1]
    path = str(tmp_path_factory.mktemp("report") / "demo.html")
    cli("html", DEMO, "--run", run, "-o", path, "--no-progress")
    return run, path


def test_report_offline_shows_what_the_cli_exports(page, demo_report):
    run, path = demo_report
    others = open_offline(page, path)
    assert page.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
    assert page.input_value("#run-select") == run
    ops = export(DEMO, run)
    program = export(DEMO, run, "--level", "program")
    assert point_count(page, "ops") == len(ops) > 0
    assert point_count(page, "records") == len(program)
    # Every op row the page holds has the export's numbers (the same JSON, not re-derived).
    shown = {(r["operation"], r["program_id"]): r for r in app_rows(page, "ops")}
    assert len(shown) == len(ops)
    for row in ops:
        mine = shown[(row["operation"], row["program_id"])]
        for key in KEYS:
            if key in row:
                assert mine[key] == row[key], (row["operation"], key)
    records = app_rows(page, "program")
    assert [r["step"] for r in records] == [r["step"] for r in program]
    for mine, row in zip(records, program):
        for key in ("flop_rate", "hbm_bw", "roofline_efficiency", "total_time_per_core_us"):
            assert mine[key] == row[key], (row["step"], key)
    # Device, diagnostics and Opportunities as the CLI's report has them.
    report = json.loads(cli("report", DEMO, "--run", run, "--format", "json", "--no-progress"))
    assert page.locator("#device-compute tbody tr[data-precision]").count() == len(
        report["device"]["compute"]
    )
    page.click("#diagnostics-section summary")
    text = page.inner_text("#diagnostics")
    for d in report["diagnostics"]:
        assert d["message"][:40] in text
    wait_js(page, "document.querySelector('#opportunities').dataset.status === 'ready'")
    findings = report["guidance"]["findings"]
    assert findings and page.locator("#opportunities li.opp-item").count() == len(findings)

    # Filters work offline: the page holds every op and filters them itself.
    before = int(page.evaluate("+(document.querySelector('#roofline-app').dataset.filterSeq || 0)"))
    page.fill("#name-filter", "fusion")
    wait_js(page, f"+(document.querySelector('#roofline-app').dataset.filterSeq || 0) > {before}")
    assert point_count(page, "ops") == len(export(DEMO, run, "--name", "fusion")) > 0

    # A tooltip on hovering the biggest point of the op chart.
    def biggest():
        return page.evaluate("""() => {
          const view = window.__roofline.opChart.view;
          const d = window.__roofline.opChart.shownData('ops').filter((r) => !r.at_floor)
              .reduce((a, b) => (b.time_fraction > a.time_fraction ? b : a));
          const [ox, oy] = [view.origin()[0] + view.padding().left,
        view.origin()[1] + view.padding().top];
          const box = view.container().querySelector('canvas').getBoundingClientRect();
          return {x: box.left + ox + view.scale('x')(d.px),
                  y: box.top + oy + view.scale('y')(d.py)};
        }""")

    hover(page, "#op-chart", biggest)
    hovered = page.evaluate("window.__roofline.tooltip.current")
    assert hovered["record_type"] == "op"
    assert page.is_visible("#chart-tooltip")
    shot(page, "html_report_demo")
    assert others == []


def test_report_caps_op_rows_and_compares(page, tmp_path):
    runs = runs_of(COMPARE)
    cand = next(r for r in runs if r.startswith("mlp_b128/"))
    base = next(r for r in runs if r.startswith("mlp_b64/"))
    path = str(tmp_path / "compare.html")
    cli(
        "html",
        COMPARE,
        "--run",
        cand,
        "--compare",
        base,
        "--max-ops",
        "5",
        "-o",
        path,
        "--no-progress",
    )
    others = open_offline(page, path)
    wait_js(page, f"['ready', 'error'].includes({SECTION}.dataset.status)", timeout=120)
    assert page.evaluate(f"{SECTION}.dataset.status") == "ready"
    diff = json.loads(
        cli("diff", COMPARE, "--base-run", base, "--run", cand, "--format", "json", "--no-progress")
    )
    pairs = page.evaluate(
        "+document.querySelector('#compare-op-table-wrap .table-count').dataset.count"
    )
    assert pairs == len(diff["ops"]) > 5  # the comparison is not capped (one table of pairs)
    # The single-run op table holds the 5 longest ops, and the banner says so.
    ops = export(COMPARE, cand)
    banner = page.locator(f"#report-banner .capped[data-run='{cand}']")
    assert banner.get_attribute("data-capped") == f"5/{len(ops)}"
    kept = sorted(r["total_self_time_us"] for r in app_rows(page, "ops"))
    longest = sorted(sorted((r["total_self_time_us"] for r in ops), reverse=True)[:5])
    assert kept == longest
    shot(page, "html_report_compare")
    assert others == []


def test_diff_writes_an_html_comparison(page, tmp_path):
    """`diff --html` across two logdirs whose runs have one name (each shown as base: /
    candidate:), on one step as the diff itself compares."""
    import shutil

    session = "2026_01_01_00_00_00"
    for side, src in (("base", "mlp_b64"), ("cand", "mlp_b128")):
        profile = os.path.join(COMPARE, src, "plugins", "profile")
        shutil.copytree(
            os.path.join(profile, os.listdir(profile)[0]),
            tmp_path / side / "mlp" / "plugins" / "profile" / session,
        )
        shutil.copy(os.path.join(COMPARE, "roofline_device.json"), tmp_path / side)
    path = str(tmp_path / "diff.html")
    cli(
        "diff",
        str(tmp_path / "base"),
        str(tmp_path / "cand"),
        "--step",
        "Average",
        "--html",
        path,
        "--no-progress",
    )
    diff = json.loads(
        cli(
            "diff",
            str(tmp_path / "base"),
            str(tmp_path / "cand"),
            "--step",
            "Average",
            "--format",
            "json",
            "--no-progress",
        )
    )
    others = open_offline(page, path)
    wait_js(page, f"['ready', 'error'].includes({SECTION}.dataset.status)", timeout=120)
    assert page.evaluate(f"{SECTION}.dataset.status") == "ready"
    run = f"mlp/{session}"
    assert page.eval_on_selector_all("#run-select option", "os => os.map(o => o.value)") == [
        f"candidate: {run}",
        f"base: {run}",
    ]
    assert page.input_value("#compare-run") == f"base: {run}"
    assert page.input_value("#compare-step") == "Average"
    pairs = page.evaluate(
        "+document.querySelector('#compare-op-table-wrap .table-count').dataset.count"
    )
    assert pairs == len(diff["ops"]) > 0
    shot(page, "html_report_diff")
    assert others == []


def test_notebook_repr_renders_the_charts_in_a_frame(page, tmp_path):
    """What Jupyter / VS Code show for an Analysis: the report in a sandboxed srcdoc frame of
    the output cell, working without a server or network."""
    import tb_roofline

    a = tb_roofline.load(DEMO)
    path = tmp_path / "cell.html"
    path.write_text(
        '<!doctype html><html><head><meta charset="utf-8"></head><body>'
        f'<div class="output">{a._repr_html_()}</div></body></html>',
        encoding="utf-8",
    )
    others = []

    def handle(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            others.append(route.request.url)
            route.abort()

    page.context.route("**/*", handle)
    page.context.set_offline(True)
    page.goto(f"file://{path}")
    frame = page.wait_for_selector("iframe.tb-roofline-report").content_frame()
    wait_js(frame, READY, timeout=120)
    assert frame.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
    assert frame.evaluate("window.__roofline.opChart.pointCount('ops')") == len(a.ops()) > 0
    assert frame.evaluate("window.__roofline.programChart.pointCount('records')") == len(
        a.program()
    )
    shot(page, "html_report_notebook_cell")
    assert others == []


def test_report_of_a_pytorch_trace_switches_views_offline(page, tmp_path):
    """A Kineto GPU trace: the report holds every row grouping the run offers (ops, ops by
    input shapes, GPU kernels), each equal to the CLI's export of that view."""
    logdir = os.path.join(REPO, "testdata")
    run = "kineto/a100_80gb_shapes"
    path = str(tmp_path / "kineto.html")
    cli("html", logdir, "--run", run, "-o", path, "--no-progress")
    others = open_offline(page, path)
    assert point_count(page, "ops") == len(export(logdir, run)) > 0
    options = page.eval_on_selector_all("#view-select option", "os => os.map(o => o.value)")
    assert {"kernel", "shapes"} <= set(options)
    for view, flag in (("kernel", ["--view", "kernel"]), ("shapes", None), ("op", [])):
        before = int(page.evaluate("+document.querySelector('#roofline-app').dataset.loadSeq"))
        page.select_option("#view-select", view)
        wait_js(page, f"+document.querySelector('#roofline-app').dataset.loadSeq > {before}")
        wait_js(page, READY)
        assert page.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
        if flag is not None:
            assert point_count(page, "ops") == len(export(logdir, run, *flag)), view
        else:  # no CLI flag for shapes: the service's own answer
            from tb_roofline.serve.service.core import RooflineService

            shapes = RooflineService(logdir).ops(run, "", rows="shapes")
            assert point_count(page, "ops") == shapes["total_count"]
    assert others == []
