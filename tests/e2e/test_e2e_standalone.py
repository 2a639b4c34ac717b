"""`tb-roofline serve`: the Roofline page without TensorBoard, driven in Chromium.

The server is the real command started as a process; the page is the same frontend the
plugin serves, opened at the server's root.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.parse

import pytest
from e2e_helpers import READY, REPO, free_port, hover, point_count, shot, wait_js
from tb_server import get, server_process

DEMO = os.path.join(REPO, "testdata", "demo")


@pytest.fixture(scope="module")
def standalone():
    port = free_port()
    argv = [sys.executable, "-m", "tb_roofline.serve.cli.main", "serve", DEMO, "--port", str(port)]
    with server_process("serve", argv, port, "/runs", 90) as (base, _log):
        yield base


def api(base, route, **params):
    query = urllib.parse.urlencode(params, doseq=True)
    status, _, body = get(f"{base}/{route}" + (f"?{query}" if query else ""), timeout=120)
    return status, json.loads(body)


def count(page) -> int:
    return point_count(page, "ops")


def apply(page, action):
    before = int(page.evaluate("+(document.querySelector('#roofline-app').dataset.filterSeq || 0)"))
    action()
    wait_js(page, READY)
    wait_js(page, f"+(document.querySelector('#roofline-app').dataset.filterSeq || 0) > {before}")


def test_serve_opens_the_roofline_page_at_the_root(page, standalone):
    runs = api(standalone, "runs")[1]["runs"]
    assert {r["run"].split("/")[0] for r in runs} == {"v4_pod", "v6e_train"}
    page.goto(standalone + "/")
    wait_js(page, READY, timeout=120)
    assert page.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
    run = page.input_value("#run-select")
    assert run == runs[0]["run"]  # the newest, as in the tab
    options = page.eval_on_selector_all("#run-select option", "os => os.map(o => o.value)")
    assert options == [r["run"] for r in runs]
    # Both charts drew what the API answers (the Vega views' data sets, not the DOM).
    program = api(standalone, "program", run=run)[1]
    ops = api(standalone, "ops", run=run)[1]
    assert point_count(page, "records") == len(program["rows"]) > 0
    assert count(page) == ops["total_count"] > 0
    assert page.evaluate("window.__roofline.opChart.view.scale('x').domain()[1]") > 0
    # The device panel shows the API's peaks.
    device = api(standalone, "device", run=run)[1]["device"]
    rows = page.locator("#device-compute tbody tr[data-precision]")
    assert rows.count() == len(device["compute"])
    shot(page, "standalone_root")


def test_serve_filters_hover_and_run_switch(page, standalone):
    runs = [r["run"] for r in api(standalone, "runs")[1]["runs"]]
    run = runs[-1]
    page.goto(standalone + "/#" + urllib.parse.urlencode({"run": run}))
    wait_js(page, READY, timeout=120)
    assert page.input_value("#run-select") == run
    facets = api(standalone, "ops", run=run)[1]["facets"]
    category = facets["category"][0]
    page.click("#category-filter summary")
    apply(page, lambda: page.check(f"#category-options input[value='{category}']"))
    assert count(page) == api(standalone, "ops", run=run, category=category)[1]["total_count"]
    assert set(
        page.evaluate("window.__roofline.opChart.shownData('ops').map(r => r.category)")
    ) == {category}
    apply(page, lambda: page.uncheck(f"#category-options input[value='{category}']"))
    page.click("#category-filter summary")
    apply(page, lambda: page.fill("#name-filter", "fusion"))
    expected = api(standalone, "ops", run=run, name="fusion")[1]["total_count"]
    assert count(page) == expected > 0
    assert "name=fusion" in page.url  # the state is in the page's own URL hash
    apply(page, lambda: page.click("#clear-filters"))
    assert count(page) == api(standalone, "ops", run=run)[1]["total_count"]

    # A tooltip on a real mouse hover over the op chart's biggest point.
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
    assert page.evaluate("window.__roofline.tooltip.current.record_type") == "op"

    # Another run from the selector: the charts follow.
    before = int(page.evaluate("+document.querySelector('#roofline-app').dataset.loadSeq"))
    page.select_option("#run-select", runs[0])
    wait_js(page, f"+document.querySelector('#roofline-app').dataset.loadSeq > {before}")
    wait_js(page, READY)
    assert count(page) == api(standalone, "ops", run=runs[0])[1]["total_count"]


def test_serve_refuses_other_sites(standalone):
    import urllib.request

    port = urllib.parse.urlsplit(standalone).port

    def status(**headers):
        req = urllib.request.Request(standalone + "/runs", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert status() == 200
    assert status(Host=f"localhost:{port}") == 200
    assert status(Host=f"attacker.example:{port}") == 421  # DNS rebinding
    assert status(Origin="http://attacker.example") == 403  # a page on another site
    assert status(Origin=f"http://127.0.0.1:{port}") == 200
