"""The communication roofline in Chromium, on a real JAX capture over 8 CPU devices with a
device file that gives the host a 50 GB/s link: every collective drawn at its message size
(hand-derived from the HLO) and bus bandwidth (the API's), the link roof drawn at 50 GB/s, read
from the Vega view's scales and scenegraph; the kind and link filters, the CSV export and the
roof highlight on hover."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys

import pytest
from e2e_helpers import REPO, TensorBoard, hover, open_frame, shot, wait_js

sys.path.insert(0, os.path.join(REPO, "tests"))
from test_jax_collectives import EXPECTED  # noqa: E402

CASE = "shard_map_1d"
LINK = "Interconnect (test link)"
DEVICE = {
    "tb_roofline_device_file": 1,
    "type": "test CPU with a link",
    "kind": "cpu",
    "num_cores": 1,
    "compute": {"fp32": 100.0},
    "memories": {"hbm": {"name": "DRAM", "gbs": 20.0}, "interconnect": {"name": LINK, "gbs": 50.0}},
}
READY = "document.querySelector('#comm-section')?.dataset.status === 'ready'"

# The items of a named Vega-Lite layer ("<name>_marks"), with their scale positions.
ITEMS = """(name) => {
  const view = window.__roofline.commChart.view;
  const sx = view.scale('x'), sy = view.scale('y');
  const out = [];
  const walk = (node) => {
    if (!node) return;
    if (node.marktype && node.name === name + '_marks') {
      for (const it of node.items) {
        const d = it.datum;
        out.push({x: it.x, y: it.y, datum: d,
          sx: d.message_bytes !== undefined ? sx(d.message_bytes) : null,
          sy: sy(d.bus_bw_gbs !== undefined ? d.bus_bw_gbs : d.gbs)});
      }
      return;
    }
    (node.items || []).forEach(walk);
  };
  walk(view.scenegraph().root);
  return out;
}"""


@pytest.fixture(scope="module")
def tb_comm(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("comm_logdir")
    shutil.copytree(os.path.join(REPO, "testdata", "jax_cpu_collectives", CASE), logdir / CASE)
    (logdir / CASE / "roofline_device.json").write_text(json.dumps(DEVICE))
    server = TensorBoard(str(logdir), name="comm")
    yield server
    server.stop()


def _open(page, server):
    run = server.api("runs")[1]["runs"][0]["run"]
    open_frame(page, server, run=run)
    page.locator("#comm-section").scroll_into_view_if_needed()
    wait_js(page, READY, timeout=60)
    return run


def test_points_at_their_size_and_bus_bandwidth_under_the_link_roof(page, tb_comm):
    run = _open(page, tb_comm)
    _, answer = tb_comm.api("comm", run=run)
    api = {p["operation"]: p for p in answer["points"]}
    points = page.evaluate(f"({ITEMS})('points')")
    assert sorted(p["datum"]["operation"] for p in points) == sorted(EXPECTED[CASE])
    for p in points:
        name = p["datum"]["operation"]
        kind, n, count, form, message, bus = EXPECTED[CASE][name]
        assert p["datum"]["message_bytes"] == message  # S from the HLO text, by hand
        assert p["datum"]["bus_bw_gbs"] == pytest.approx(api[name]["bus_bw_gbs"])
        assert p["datum"]["group_size"] == n and p["datum"]["kind"] == kind
        # drawn where the scales put its size and bus bandwidth
        assert p["x"] == pytest.approx(p["sx"], abs=0.5)
        assert p["y"] == pytest.approx(p["sy"], abs=0.5)
    roofs = page.evaluate(f"({ITEMS})('roofs')")
    assert len(roofs) == 1 and roofs[0]["datum"]["gbs"] == 50.0
    assert roofs[0]["y"] == pytest.approx(roofs[0]["sy"], abs=0.5)
    # every point sits below its roof (bandwidth grows upwards: smaller y)
    assert all(p["y"] > roofs[0]["y"] for p in points)
    labels = page.evaluate(f"({ITEMS})('roof_labels')")
    assert [lb["datum"]["label"] for lb in labels] == [f"{LINK}: 50 GB/s"]
    exposed = page.eval_on_selector_all(
        "#comm-exposed-table tbody tr", "rs => rs.map(r => r.dataset.op)"
    )
    assert sorted(exposed) == sorted(EXPECTED[CASE])
    # The table spans the section under the chart, every column shown, and each row is named
    # by what tells collectives apart: kind, message size, ranks.
    box = page.evaluate(
        """() => {
        const t = document.querySelector('#comm-exposed-table');
        const sec = document.querySelector('#comm-section');
        const scroll = t.parentElement;
        return {table: t.getBoundingClientRect().width, section: sec.getBoundingClientRect().width,
                overflow: scroll.scrollWidth - scroll.clientWidth,
                names: [...t.querySelectorAll('td.comm-row-name')].map(td => td.textContent),
                ops: [...t.querySelectorAll('tbody tr')].map(r => r.dataset.op)};
    }"""
    )
    assert box["table"] >= 0.9 * box["section"] and box["overflow"] <= 1, box
    for name, op in zip(box["names"], box["ops"]):
        kind, n = EXPECTED[CASE][op][0], EXPECTED[CASE][op][1]
        assert name.startswith(f"{kind} ") and f"{n} ranks" in name, (name, op)
    shot(page, "comm_chart")


def test_filters_export_and_roof_highlight(page, tb_comm):
    run = _open(page, tb_comm)
    page.select_option("#comm-kind", "all-gather")
    wait_js(page, f"({ITEMS})('points').length === 1", timeout=30)
    (only,) = page.evaluate(f"({ITEMS})('points')")
    assert only["datum"]["operation"] == "all_gather.3"
    page.select_option("#comm-kind", "")
    page.select_option("#comm-link", LINK)
    wait_js(page, f"({ITEMS})('points').length === {len(EXPECTED[CASE])}", timeout=30)
    wait_js(page, READY)
    with page.expect_download() as info:
        page.click("#comm-export-csv")
    text = open(info.value.path(), encoding="utf-8").read()
    rows = list(csv.DictReader(io.StringIO(text)))
    _, answer = tb_comm.api("comm", run=run)
    assert sorted(r["operation"] for r in rows) == sorted(p["operation"] for p in answer["points"])
    for r in rows:
        assert float(r["message_bytes"]) == EXPECTED[CASE][r["operation"]][4]
    # hovering a point highlights its link's roof (the binding roof) and shows its tooltip
    target = "all_gather.3"
    locate = f"""() => {{
      const p = ({ITEMS})('points').find(q => q.datum.operation === '{target}');
      const box = document.querySelector('#comm-chart canvas').getBoundingClientRect();
      const view = window.__roofline.commChart.view;
      const o = [view.origin()[0] + view.padding().left, view.origin()[1] + view.padding().top];
      return {{x: box.left + o[0] + p.x, y: box.top + o[1] + p.y}};
    }}"""
    hover(page, "#comm-chart", lambda: page.evaluate(locate), tooltip_selector="#comm-tooltip")
    # by the link's id (the answer's `link_id`), never its name
    wait_js(page, "window.__roofline.commChart.view.signal('hovered_link') === 'interconnect'")
    assert "All-gather" in page.inner_text("#comm-tooltip").replace("all-gather", "All-gather")
