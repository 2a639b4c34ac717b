"""Inside TensorBoard's own page (its header above the plugin's frame), the first screen shows
the program roofline with both axes at 1440×900 and at 1280×800, on every committed run that
has program records (docs/frontend.md, "Layout")."""

from __future__ import annotations

import urllib.parse

import pytest
from test_e2e_tensorboard_ui import roofline_frame

SIZES = [(1440, 900), (1280, 800)]

BOTTOM = """(() => {
  window.scrollTo(0, 0);
  const c = document.querySelector('#program-chart canvas');
  return c ? c.getBoundingClientRect().bottom : null; })()"""


def _settled_bottom(frame):
    """The chart's bottom once the panels above it have their content (the Opportunities
    answer comes after the charts) and the chart was re-fitted: two equal reads in a row."""
    frame.wait_for_function(
        "(() => { const o = document.querySelector('#opportunities');"
        " return !o || ['ready', 'error', 'empty'].includes(o.dataset.status); })()",
        timeout=60_000,
    )
    last = None
    for _ in range(40):
        frame.wait_for_timeout(150)
        now = frame.evaluate(BOTTOM)
        if now == last:
            return now
        last = now
    return last


def _runs(server):
    return [r["run"] for r in server.api("runs")[1]["runs"]]


@pytest.mark.parametrize("width,height", SIZES)
def test_program_chart_axes_on_the_first_screen_inside_tensorboard(
    page, tb_testdata, width, height
):
    page.set_viewport_size({"width": width, "height": height})
    below = []
    checked = 0
    for run in _runs(tb_testdata):
        code, program = tb_testdata.api("program", run=run)
        if code != 200 or not program.get("rows"):
            continue
        page.goto("about:blank")  # a new TensorBoard page per run, not a hash change
        page.goto(f"{tb_testdata.base}/#roofline&p.roofline.run={urllib.parse.quote(run)}")
        frame = roofline_frame(page)
        if frame.evaluate("document.querySelector('#roofline-app').dataset.status") != "ready":
            continue
        assert frame.input_value("#run-select") == run
        inner = _settled_bottom(frame)
        if inner is None:
            continue
        top = page.evaluate(
            """(() => { const f = [...document.querySelectorAll('iframe')].find(
                 f => f.src.includes('plugin_entry.html?name=roofline'));
               return f.getBoundingClientRect().top; })()"""
        )
        checked += 1
        if top + inner > height:
            why = frame.evaluate(
                "[window.innerHeight, window.__roofline.programChart.view.height(),"
                " document.querySelector('#program-chart canvas').getBoundingClientRect().top]"
            )
            below.append((run, round(top + inner), why))
    assert checked >= 10
    assert not below, below
