"""The roofline drawn exactly, on every committed profile in Chromium at 1440×900: each point
at its record's true intensity, axes that hold each point's roof and the top compute roof with
its ridge, the Total's tooltip with a bandwidth per memory, no box that cuts its content, the
op table's default columns within 1280 px. What a point should be and where its roof is are
worked out here from the API's answers (device, /program, /ops), not read from the page's own
geometry. Screenshots in test-output/screenshots/exact_*.png."""

from __future__ import annotations

import re

import pytest
from e2e_helpers import hover, open_frame, shot, wait_js

ASYNC = ("async_start", "async_wait")


def rows_of(answer):
    return [dict(zip(answer["columns"], r)) for r in answer["rows"]]


def positive(v):
    return isinstance(v, (int, float)) and v > 0


def placed(r):
    return positive(r.get("bottleneck_operational_intensity")) and positive(r.get("flop_rate"))


def bound_memory(device, bound_by):
    """The device memory a record's `bound_by` names (the op table's column names: "HBM",
    "Interconnect", "Host link"; the device may add the link's kind in brackets)."""
    for m in device.get("memories") or []:
        if m["peak_gbs"] > 0 and (
            m["name"] == bound_by or m["id"] == bound_by or m["name"].startswith(f"{bound_by} (")
        ):
            return m
    return None


def own_roof(device, r):
    """The roof a record is judged against at its intensity, in GFLOP/s."""
    if r["bound_by"] == "Compute":
        return r["peak_flop_rate"] if positive(r.get("peak_flop_rate")) else None
    m = bound_memory(device, r["bound_by"])
    return m["peak_gbs"] * r["bottleneck_operational_intensity"] if m else None


def chart_state(page, chart):
    """Domains of a chart and the data-space x of every drawn point (its inverted pixel)."""
    return page.evaluate(f"""(() => {{
      const c = window.__roofline.{chart};
      const v = c.view;
      const mark = c.findMark('points');
      const sx = v.scale('x');
      const sy = v.scale('y');
      return {{x: sx.domain(), y: v.scale('y').domain(),
        points: (mark.items || []).filter((i) => !i.datum.at_floor).map((i) => ({{
          x: sx.invert(i.x), y: sy.invert(i.y), key: i.datum.series || i.datum.operation,
          oi: i.datum.bottleneck_operational_intensity}}))}}; }})()""")


def check_chart(page, chart, records, device, what):
    state = chart_state(page, chart)
    lo, hi = state["y"]
    xlo, xhi = state["x"]
    want = sorted(r["bottleneck_operational_intensity"] for r in records if placed(r))
    drawn = sorted(p["x"] for p in state["points"])
    assert len(drawn) == len(want), (what, len(drawn), len(want))
    for d, w in zip(drawn, want):  # every point at its own intensity, nothing moved
        assert abs(d / w - 1) <= 0.01, (what, d, w)
    for r in records:
        if not placed(r):
            continue
        roof = own_roof(device, r)
        if roof is not None:  # its roof is on the chart, above it
            assert lo <= roof <= hi * (1 + 1e-9), (
                what,
                r.get("operation") or r["record_type"],
                roof,
                lo,
                hi,
            )
        assert lo <= r["flop_rate"] <= hi
    peaks = [
        r["peak_flop_rate"]
        for r in records
        if positive(r.get("peak_flop_rate")) and r.get("caveat") not in ASYNC
    ]
    if peaks:
        top = max(peaks)
        assert top <= hi, (what, top, hi)
        hbm = next((m for m in device["memories"] if m["id"] == "hbm" and m["peak_gbs"] > 0), None)
        if hbm:  # the ridge where HBM meets the top compute roof is inside the x range
            ridge = top / hbm["peak_gbs"]
            assert xlo <= ridge <= xhi, (what, ridge, xlo, xhi)
    return state


CLIPPED = """(() => {
  // Boxes that cut their content: more than a few px hidden, with no scrollbar meant for it
  // (the tables' scroll areas) and no full text on hover (cut names carry a title).
  const out = [];
  for (const el of document.querySelectorAll('#roofline-app *')) {
    if (!el.getClientRects().length || el.closest('.table-scroll') || el.closest('.chart') ||
        el.closest('.menu-list')) {
      continue;  // scroll areas meant as such: tables, charts, drop-down lists
    }
    const closed = el.closest('details:not([open])');
    if (closed && !el.closest('summary')) continue;  // not shown until opened
    const cs = getComputedStyle(el);
    const vy = el.scrollHeight - el.clientHeight;
    const vx = el.scrollWidth - el.clientWidth;
    const titled = el.title || (el.closest('[title]') && cs.textOverflow === 'ellipsis');
    if (cs.overflowY !== 'visible' && vy > 4 && !el.classList.contains('table-scroll')) {
      out.push(['y', el.tagName, el.id || el.className, vy]);
    }
    if (cs.overflowX !== 'visible' && vx > 4 && !titled &&
        !el.classList.contains('table-scroll')) {
      out.push(['x', el.tagName, el.id || el.className, vx]);
    }
  }
  return out; })()"""


def runs_of(server):
    return [r["run"] for r in server.api("runs")[1]["runs"]]


def test_every_run_drawn_exactly(page, tb_testdata):
    page.set_viewport_size({"width": 1440, "height": 900})
    checked = 0
    for run in runs_of(tb_testdata):
        open_frame(page, tb_testdata, run=run)
        status = page.evaluate("document.querySelector('#roofline-app').dataset.status")
        _, dev = tb_testdata.api("device", run=run)
        code_p, program = tb_testdata.api("program", run=run)
        code_o, ops = tb_testdata.api("ops", run=run)
        if status not in ("ready", "partial") or code_p != 200 or "device" not in dev:
            continue
        device = dev["device"]
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", run)
        prog_rows = rows_of(program)
        if prog_rows:
            check_chart(page, "programChart", prog_rows, device, f"{run} program")
            # The first screen shows the program chart with its axes.
            bottom = page.evaluate("""(() => { window.scrollTo(0, 0);
              const c = document.querySelector('#program-chart canvas');
              return c ? c.getBoundingClientRect().bottom : 1e9; })()""")
            assert bottom <= 900, (run, bottom)
        if code_o == 200 and ops["rows"]:
            check_chart(page, "opChart", rows_of(ops), device, f"{run} ops")
        clipped = page.evaluate(CLIPPED)
        assert not clipped, (run, clipped[:5])
        shot(page, f"exact_{name}")
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize(
    "run",
    [
        "kineto/a100_80gb_shapes",
        "demo/v4_pod/2026_11_29_11_30_00",
        "xla_gpu_mi300_conv/2026_01_01_00_00_00",
    ],
)
def test_total_tooltip_and_coincident_records(page, tb_testdata, run):
    page.set_viewport_size({"width": 1440, "height": 900})
    open_frame(page, tb_testdata, run=run)
    total = next(
        r for r in rows_of(tb_testdata.api("program", run=run)[1]) if r["record_type"] == "total"
    )
    device = tb_testdata.api("device", run=run)[1]["device"]
    locate = """(() => {
      const c = window.__roofline.programChart;
      const item = c.findMark('points').items.find((i) => i.datum.record_type === 'total');
      const [ox, oy] = c.view.origin();
      const pad = c.view.padding();
      const box = c.view.container().querySelector('canvas').getBoundingClientRect();
      return {x: box.left + pad.left + ox + item.x, y: box.top + pad.top + oy + item.y}; })()"""
    hover(page, "#program-chart", lambda: page.evaluate(locate))
    tip = page.locator("#chart-tooltip")
    # Which record the mouse is on: Total, or one drawn on top of it on the same spot.
    current = page.evaluate("window.__roofline.tooltip.current")
    if current["record_type"] == "total":
        moves = {
            k[: -len("_bw")]
            for k, v in total.items()
            if k.endswith("_bw") and k != "memory_bw" and k != "transfer_bw" and positive(v)
        }
        assert moves, "the Total moves bytes in some memory"
        shown = set(
            tip.locator("table.tooltip-memories tr[data-memory]").evaluate_all(
                "rs => rs.map((r) => r.dataset.memory)"
            )
        )
        assert shown == moves, (shown, moves)
        for mid in moves:  # in GB/s, as the roofs (the API's memory columns are GiB/s)
            text = tip.locator(f"tr[data-memory={mid}] td").first.inner_text()
            value, unit = text.split()
            assert unit == "GB/s", text
            gbs = total[f"{mid}_bw"] * (1 if mid == "interconnect" else 2**30 / 1e9)
            assert abs(float(value.replace(",", "")) - gbs) <= 0.005 * gbs, (mid, text, gbs)
        text = tip.inner_text()
        unit = {"gpu": "GPU", "tpu": "TensorCore"}.get(device["kind"], "core")
        assert unit == device["unit"]
        assert "Total time" in text and f"per {unit}" in text
    # Every record on that spot is listed (the points are not moved apart): those drawn at the
    # hovered point's place, and Total's when the hovered one is drawn over it.
    here = page.evaluate("""(() => {
      const c = window.__roofline.programChart;
      const items = c.findMark('points').items;
      const cur = window.__roofline.tooltip.current;
      const me = items.find((i) => i.datum === cur);
      return items.filter((i) => i !== me && Math.abs(i.x - me.x) <= 4 &&
        Math.abs(i.y - me.y) <= 4).map((i) => i.datum.series); })()""")
    listed = tip.locator(".tooltip-here")
    if current["record_type"] != "total":
        here.append("Total")
    if here:
        text = listed.inner_text()
        assert int(listed.get_attribute("data-count")) >= len(here)
        for series in here:
            assert series in text, (series, text)
    else:
        assert listed.count() == 0
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", run)
    shot(page, f"exact_tooltip_{name}", full_page=False)
    # A table row's selection rings its point; a click on a point gives the full record.
    page.locator("#program-table tbody tr").nth(0).click()
    wait_js(page, "window.__roofline.programChart.markData('selected').length === 1")
    key = page.evaluate("window.__roofline.programChart.view.data('selected')[0].series")
    assert key == page.evaluate("document.querySelector('#program-table tr.selected').dataset.key")
    assert page.locator("#program-selection .details-table tr").count() > 5


def test_default_op_table_fits_1280(page, tb_testdata):
    page.set_viewport_size({"width": 1280, "height": 900})
    for run in (
        "demo/v6e_train/2026_11_29_10_00_00",
        "kineto/a100_80gb_shapes",
        "xla_gpu_mi300_conv/2026_01_01_00_00_00",
    ):
        open_frame(page, tb_testdata, run=run)
        page.wait_for_timeout(300)
        widths = page.evaluate("""(() => {
          const t = document.querySelector('#op-table');
          const s = t.closest('.table-scroll');
          return [t.scrollWidth, s.clientWidth, document.documentElement.scrollWidth,
                  window.innerWidth]; })()""")
        assert widths[0] <= widths[1] + 1, (run, widths)
        assert widths[2] <= widths[3], (run, widths)
        # Headers say their full name on hover; the chooser has every other column.
        titles = page.eval_on_selector_all("#op-table thead th", "hs => hs.map((h) => h.title)")
        assert all(titles)
        all_keys = page.evaluate("window.__roofline.opTable.allColumns.map((c) => c.key)")
        shown = page.evaluate("window.__roofline.opTable.shownKeys()")
        assert set(shown) < set(all_keys)
        page.click("#op-table-columns summary")
        page.check("#op-table-columns input[data-key=hbm_bw]")
        assert "hbm_bw" in page.evaluate("window.__roofline.opTable.shownKeys()")
        # The identity column stays in view when the table scrolls sideways.
        page.evaluate(
            "document.querySelector('#op-table').closest('.table-scroll').scrollLeft = 400"
        )
        sticky = page.evaluate("""(() => {
          const s = document.querySelector('#op-table').closest('.table-scroll');
          const c = document.querySelector('#op-table tbody td[data-key=operation]');
          return [c.getBoundingClientRect().left - s.getBoundingClientRect().left,
                  s.scrollLeft]; })()""")
        assert sticky[1] == 0 or sticky[0] < 80, sticky
        shot(page, f"exact_table_{re.sub(r'[^A-Za-z0-9_.-]+', '_', run)}", full_page=False)


def test_dash_sorted_last_both_ways(page, tb_testdata):
    open_frame(page, tb_testdata, run="kineto/a100_80gb_shapes")
    header = page.locator("#op-table th[data-key=flop_rate]")
    for _ in range(2):
        header.click()
        cells = page.evaluate("""(() => { const t = window.__roofline.opTable;
          const c = t.columns.find((x) => x.key === 'flop_rate');
          return t.visibleRows().map((r) => c.format(r.flop_rate, r)); })()""")
        dashes = [i for i, c in enumerate(cells) if c == "—"]
        assert dashes and dashes == list(range(len(cells) - len(dashes), len(cells)))


def test_infeed_switch_always_there(page, tb_testdata):
    open_frame(page, tb_testdata, run="kineto/a100_80gb_shapes")
    assert page.is_visible("#infeed-toggle")
    assert page.is_disabled("#infeed-toggle")
    assert "no infeed/outfeed ops" in page.inner_text("#infeed-note")
    # No command lines in the page; terms explained on hover.
    text = page.inner_text("body")
    assert "--model-flops" not in text and "tb-roofline " not in text
    assert page.locator("abbr.explained[title]").count() >= 2


def test_compare_places_only_measurements_and_fits(page, tb_testdata):
    cand, base = "compare/torch_cpu/convnet_b16", "compare/torch_cpu/convnet_b8"
    page.set_viewport_size({"width": 1280, "height": 900})
    open_frame(page, tb_testdata, run=cand)
    page.select_option("#compare-run", base)
    wait_js(
        page, "document.querySelector('#compare-section').dataset.status === 'ready'", timeout=60
    )
    out = page.evaluate("""(() => {
      const v = window.__rooflineCompare;
      const pts = [...v.opChart.view.data('base_points'), ...v.opChart.view.data('cand_points')];
      const s = document.querySelector('#compare-op-table').closest('.table-scroll');
      return {points: pts.map((p) => [p.px, p.py,
          p.pair[p.side + '_bottleneck_operational_intensity'], p.pair[p.side + '_flop_rate']]),
        y: v.opChart.view.scale('y').domain(),
        widths: [document.querySelector('#compare-op-table').scrollWidth, s.clientWidth],
        unplaced: +document.querySelector('#compare-op-status').dataset.unplaced}; })()""")
    assert out["points"]
    for px, py, x, y in out["points"]:  # placed where measured, never on a floor or corner
        assert positive(x) and positive(y) and px == x and py == y
    # The pairs without a FLOP rate: listed in the table, counted in the status, not placed.
    status = page.inner_text("#compare-op-status")
    if out["unplaced"]:
        assert "without a FLOP rate listed, not placed" in status
    assert out["widths"][0] <= out["widths"][1] + 1, out["widths"]
    # A side without FLOPs reads "—", never "0 FLOP/s", and its Δ FLOP rate "—", never "Δ 0".
    cells = page.evaluate("""(() => {
      const t = window.__rooflineCompare.opTable;
      const cols = Object.fromEntries(t.allColumns.map((c) => [c.key, c]));
      return t.visibleRows().map((r) => [r.cand_flop_rate, cols.cand_flop_rate.format(
        r.cand_flop_rate, r), r.base_flop_rate, cols.delta_flop_rate.format(r.delta_flop_rate, r)]);
    })()""")
    for cand_rate, cand_text, base_rate, delta_text in cells:
        if cand_rate == 0:
            assert cand_text == "—"
        if cand_rate == 0 or base_rate == 0:
            assert delta_text == "—"
        assert cand_text not in ("0 FLOP/s",)
    shot(page, "exact_compare_1280", full_page=False)
