"""The Roofline tab driven in headless Chromium against a real TensorBoard (frame opened on its
own: /data/plugin_entry.html?name=roofline, the document TensorBoard puts in the iframe)."""

from __future__ import annotations

import csv
import io
import json
import re
import time

import pytest
from e2e_helpers import _CSP_PROBE as CSP_PROBE
from e2e_helpers import (
    BROKEN_RUN,
    MAIN_RUN,
    READY,
    V4_RUN,
    filter_seq,
    hover,
    open_frame,
    point_count,
    shot,
    wait_js,
    wait_ready,
)


def load_seq(frame) -> int:
    return int(frame.evaluate("+(document.querySelector('#roofline-app').dataset.loadSeq || 0)"))


def wait_load(frame, before: int):
    wait_js(frame, f"+(document.querySelector('#roofline-app').dataset.loadSeq || 0) > {before}")
    wait_js(frame, READY)


def select_run(frame, run, host=None):
    before = load_seq(frame)
    frame.select_option("#run-select", run)
    wait_load(frame, before)
    if host is not None:
        before = load_seq(frame)
        frame.select_option("#host-select", host)
        wait_load(frame, before)


def apply(frame, action):
    """Run a filter action and wait until the views were updated."""
    before = filter_seq(frame)
    action()
    wait_ready(frame, before)


def op_point_screen_xy(frame, rank=None):
    """Screen position of an op's point (by default the biggest circle)."""
    return frame.evaluate(
        """(rank) => {
      const view = window.__roofline.opChart.view;
      const items = window.__roofline.opChart.shownData('ops');
      let d = rank === null ? null : items.find((r) => r.rank === rank);
      if (!d) {
        // The biggest circle among the ops not on the axis floor.
        d = items.filter((r) => !r.at_floor)
            .reduce((a, b) => (b.time_fraction > a.time_fraction ? b : a));
      }
      const [ox, oy] = [view.origin()[0] + view.padding().left,
        view.origin()[1] + view.padding().top];
      const canvas = view.container().querySelector('canvas');
      const box = canvas.getBoundingClientRect();
      return {x: box.left + ox + view.scale('x')(d.px), y: box.top + oy + view.scale('y')(d.py),
              rank: d.rank, operation: d.operation};
    }""",
        rank,
    )


# ----------------------------------------------------------------------------- selection


def test_run_and_host_selectors_follow_api_and_url(page, tb):
    status, runs = tb.api("runs")
    assert status == 200
    names = [r["run"] for r in runs["runs"]]
    open_frame(page, tb)
    # Newest session first, all runs listed, newest selected by default.
    options = page.eval_on_selector_all("#run-select option", "os => os.map(o => o.value)")
    assert options == names
    assert page.input_value("#run-select") == names[0]

    select_run(page, MAIN_RUN, "host1")
    hosts = page.eval_on_selector_all("#host-select option", "os => os.map(o => o.value)")
    assert hosts == ["*"] + tb.api("hosts", run=MAIN_RUN)[1]["hosts"]
    # The state is in the URL: a link reproduces the view.
    assert "run=" + re.sub("/", "%2F", MAIN_RUN) in page.url
    assert "host=host1" in page.url
    page.reload()
    wait_js(page, READY)
    assert page.input_value("#run-select") == MAIN_RUN
    assert page.input_value("#host-select") == "host1"
    assert page.evaluate("window.__roofline.state.host") == "host1"
    shot(page, "frame_main_host1")


def test_device_panel_matches_api(page, tb):
    for run in (MAIN_RUN, V4_RUN):
        open_frame(page, tb, run=run)
        _, answer = tb.api("device", run=run, host="*")
        device = answer["device"]
        panel = page.locator("#device-panel")
        # One line at once, every number behind the labelled expander.
        assert device["type"] in panel.locator("#device-summary").inner_text()
        page.click("#device-details summary")
        assert panel.locator("td[data-field=type]").inner_text() == device["type"]
        megacore = panel.locator("td[data-field=megacore]").inner_text()
        assert megacore == ("yes" if device["megacore"] else "no")
        compute_rows = panel.locator("#device-compute tbody tr[data-precision]")
        assert compute_rows.count() == len(device["compute"])
        for c in device["compute"]:
            row = panel.locator(f"#device-compute tr[data-precision='{c['precision']}']")
            assert (
                float(row.locator("td[data-field=peak_gflops]").get_attribute("data-value"))
                == c["peak_gflops"]
            )
            assert row.locator("[data-field=source]").inner_text() == {
                "datasheet": "data sheet"
            }.get(c["source"], c["source"])
        mem_rows = panel.locator("#device-memories tbody tr[data-memory]")
        assert mem_rows.count() == len(device["memories"]) > 0
        for m in device["memories"]:
            row = panel.locator(f"#device-memories tr[data-memory='{m['id']}']")
            assert row.locator("td").first.inner_text() == m["name"]
            for field in ("peak_gibs", "peak_gbs", "ridge_point"):
                value = row.locator(f"td[data-field={field}]").get_attribute("data-value")
                assert float(value) == pytest.approx(m[field], rel=1e-12), (run, m["id"], field)
            assert row.locator("[data-field=source]").inner_text() in (m["source"], "data sheet")
        # TPU v4 has CMEM read/write, v6e VMEM read/write.
        ids = {m["id"] for m in device["memories"]}
        assert (
            ({"cmem_read", "cmem_write"} <= ids)
            if run == V4_RUN
            else ({"vmem_read", "vmem_write"} <= ids)
        )
        # Diagnostics: every entry the API reports is listed.
        _, diags = tb.api("diagnostics", run=run, host="*")
        items = page.locator("#diagnostics li")
        assert items.count() == len(diags["diagnostics"])
        for i, d in enumerate(diags["diagnostics"]):
            assert items.nth(i).get_attribute("data-code") == d["code"]
        shot(page, f"frame_device_{run.split('/')[0]}")


def test_points_match_api(page, tb):
    open_frame(page, tb, run=MAIN_RUN)
    for host in ("*", "host0"):
        if host != "*":
            select_run(page, MAIN_RUN, host)
        _, program = tb.api("program", run=MAIN_RUN, host=host)
        _, ops = tb.api("ops", run=MAIN_RUN, host=host)
        # Program chart: Total, (Total (HW)), Average and every step.
        kinds = [r[0] for r in program["rows"]]
        assert (
            "total" in kinds and "average" in kinds and kinds.count("step") == program["num_steps"]
        )
        assert point_count(page, "records") == len(program["rows"])
        assert page.locator("#program-table tbody tr").count() == len(program["rows"])
        # Op chart: every op (no top-N cut), the Program point marked.
        assert ops["total_count"] == ops["unfiltered_count"] == len(ops["rows"]) > 0
        assert point_count(page, "ops") == ops["total_count"]
        assert point_count(page, "program") == 1
        assert page.locator("#op-status").get_attribute("data-plotted") == str(ops["total_count"])
        assert page.locator("#op-table-wrap .table-count").get_attribute("data-count") == str(
            ops["total_count"]
        )
        # Category bars: self time per category adds up to the ops' self time.
        cats = page.evaluate("window.__roofline.catChart.view.data('cats')")
        cols = ops["columns"]
        total_self = sum(r[cols.index("total_self_time_us")] for r in ops["rows"])
        assert sum(c["self_time_us"] for c in cats) == pytest.approx(total_self, rel=1e-6)
        assert {c["category"] for c in cats} == set(ops["facets"]["category"])


def test_each_filter_matches_api(page, tb):
    open_frame(page, tb, run=MAIN_RUN)
    _, unfiltered = tb.api("ops", run=MAIN_RUN)
    facets = unfiltered["facets"]

    def count():
        return point_count(page, "ops")

    # Infeed/outfeed: a server-side variant (percentages change), prefetched after the load and
    # swapped in without a re-render; the rows, the program records and the chart must be
    # exactly the API's answer for that variant.
    _, excluded = tb.api("ops", run=MAIN_RUN, infeed_outfeed="exclude")
    _, program_excluded = tb.api("program", run=MAIN_RUN, infeed_outfeed="exclude")
    before = load_seq(page)
    page.uncheck("#infeed-toggle")
    wait_load(page, before)
    assert count() == excluded["total_count"] < unfiltered["total_count"]
    assert "infeed=exclude" in page.url
    assert page.evaluate("window.__roofline.timings.lastInfeedMs") is not None  # no reload
    cols = excluded["columns"]
    shown = page.evaluate(f"window.__roofline.data.ops.map(r => {json.dumps(cols)}.map(c => r[c]))")
    assert shown == excluded["rows"]
    assert page.evaluate("window.__roofline.data.program.map(r => r.flop_rate)") == [
        r[program_excluded["columns"].index("flop_rate")] for r in program_excluded["rows"]
    ]
    assert point_count(page, "records") == len(program_excluded["rows"])
    assert not any(
        page.evaluate("window.__roofline.opChart.shownData('ops').map(r => r.is_infeed_outfeed)")
    )
    before = load_seq(page)
    page.check("#infeed-toggle")
    wait_load(page, before)
    assert count() == unfiltered["total_count"]

    # Category (each value), then two at once.
    page.click("#category-filter summary")
    for category in facets["category"]:
        apply(page, lambda: page.check(f"#category-options input[value='{category}']"))
        expected = tb.api("ops", run=MAIN_RUN, category=category)[1]["total_count"]
        assert count() == expected, category
        assert set(
            page.evaluate("window.__roofline.opChart.shownData('ops').map(r => r.category)")
        ) == {category}
        apply(page, lambda: page.uncheck(f"#category-options input[value='{category}']"))
    two = facets["category"][:2]
    for c in two:
        apply(page, lambda: page.check(f"#category-options input[value='{c}']"))
    assert count() == tb.api("ops", run=MAIN_RUN, category=",".join(two))[1]["total_count"]
    apply(page, lambda: page.click("#clear-filters"))
    assert count() == unfiltered["total_count"]
    page.click("#category-filter summary")

    # Bound by.
    page.click("#bound-filter summary")
    for bound in facets["bound_by"]:
        apply(page, lambda: page.check(f"#bound-options input[value='{bound}']"))
        assert count() == tb.api("ops", run=MAIN_RUN, bound_by=bound)[1]["total_count"], bound
        apply(page, lambda: page.uncheck(f"#bound-options input[value='{bound}']"))
    page.click("#bound-filter summary")

    # Op name (case-insensitive substring), combined with a bound-by filter.
    apply(page, lambda: page.fill("#name-filter", "FUSION"))
    assert count() == tb.api("ops", run=MAIN_RUN, name="FUSION")[1]["total_count"] > 0
    page.click("#bound-filter summary")
    bound = facets["bound_by"][0]
    apply(page, lambda: page.check(f"#bound-options input[value='{bound}']"))
    assert count() == tb.api("ops", run=MAIN_RUN, name="FUSION", bound_by=bound)[1]["total_count"]
    assert page.locator("#op-table-wrap .table-count").get_attribute("data-count") == str(count())
    shot(page, "frame_filtered")
    # Filters are in the URL too.
    assert "name=FUSION" in page.url and "bound=" in page.url
    apply(page, lambda: page.click("#clear-filters"))
    assert count() == unfiltered["total_count"]


def test_hover_tooltip_and_click_selection(page, tb):
    open_frame(page, tb, run=MAIN_RUN)
    page.locator("#op-chart").scroll_into_view_if_needed()
    _, ops = tb.api("ops", run=MAIN_RUN)
    cols = ops["columns"]
    by_name = {r[cols.index("operation")]: dict(zip(cols, r)) for r in ops["rows"]}

    target = hover(page, "#op-chart", lambda: op_point_screen_xy(page))
    tooltip = page.locator("#chart-tooltip")
    hovered = page.evaluate("window.__roofline.tooltip.current")
    assert hovered["record_type"] == "op"
    api_row = by_name[hovered["operation"]]
    text = tooltip.inner_text()
    assert hovered["operation"] in text
    # The key numbers at once (what binds it, how far from its roof, what it is worth).
    bound_row = tooltip.locator("tr[data-key=bound_by] td")
    assert bound_row.inner_text() == api_row["bound_by"]
    for key in (
        "roofline_efficiency",
        "flop_rate",
        "potential_time_saved_us",
        "self_time_percent",
        "bottleneck_operational_intensity",
        "category",
    ):
        assert tooltip.locator(f"tr[data-key={key}]").count() == 1, key
    assert tooltip.locator("table.tooltip-main tr").count() <= 14  # compact: details on click
    shot(page, "frame_tooltip")

    # Clicking the point selects its table row (and shows its page), by op identity (in the
    # URL too), and lists every metric.
    page.mouse.click(target["x"], target["y"])
    key = json.dumps(
        [hovered[k] for k in ("program_id", "operation", "precision", "host")],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    wait_js(page, "!!document.querySelector('#op-table tr.selected')")
    assert page.evaluate("document.querySelector('#op-table tr.selected').dataset.key") == key
    assert page.get_attribute("#op-selection", "data-key") == key
    assert page.get_attribute("#op-selection", "data-rank") == str(hovered["rank"])
    details = page.locator("#op-selection .details-table")
    for k in ("hbm_bw", "total_self_time_us", "flops", "bytes"):
        assert details.locator(f"tr[data-key={k}]").count() == 1, k
    assert "op=" in page.url
    # ... and clicking a row selects its point: the chart's highlight layer shows that op.
    page.mouse.move(5, 5)
    row = page.locator("#op-table tbody tr").nth(2)
    key = row.get_attribute("data-key")
    row.click()
    wait_js(page, "document.querySelector('#op-selection').dataset.key === " + json.dumps(key))
    rank = page.evaluate("window.__roofline.opChart.view.data('selected').map(r => r.rank)")
    assert len(rank) == 1
    highlighted = page.evaluate("window.__roofline.opChart.markData('selected').map(r => r.rank)")
    assert highlighted == rank
    # A reload keeps the selection (by identity, from the URL).
    page.reload()
    wait_js(page, READY)
    wait_js(page, "document.querySelector('#op-selection').dataset.key === " + json.dumps(key))
    shot(page, "frame_selected")


def test_zoom_and_pan(page, tb):
    open_frame(page, tb, run=MAIN_RUN)
    chart = page.locator("#op-chart canvas")
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    domain = "window.__roofline.opChart.view.scale('x').domain()"
    before = page.evaluate(domain)
    cx, cy = box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5
    page.mouse.move(cx, cy)
    page.mouse.wheel(0, -400)
    wait_js(page, f"{domain}[0] !== {before[0]}")
    zoomed = page.evaluate(domain)
    assert zoomed[0] > before[0] and zoomed[1] < before[1], (before, zoomed)  # zoomed in
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx + 150, cy, steps=5)
    page.mouse.up()
    panned = page.evaluate(domain)
    assert panned[0] < zoomed[0]  # dragged right: the view moved to smaller x
    shot(page, "frame_zoomed")


PIXELS = """() => {
  const canvas = window.__roofline.opChart.view.container().querySelector('canvas');
  return Array.from(canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data);
}"""


def test_prerendered_bitmaps_after_zoom(page, tb):
    """After a zoom settles, the bitmaps of every op and of the other infeed/outfeed variant are
    drawn in idle time; showing them gives the same picture as drawing the points anew."""
    open_frame(page, tb, run=MAIN_RUN)
    page.evaluate("window.__roofline.data.variantsReady")
    chart = page.locator("#op-chart canvas")
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    cat = page.evaluate("window.__roofline.categories[0]")
    apply(page, lambda: page.evaluate(f"window.__roofline.setFilter({{categories: ['{cat}']}})"))
    page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.5)
    page.mouse.wheel(0, -200)
    wanted = ["", '["exclude",["%s"],[],""]' % cat]
    wait_js(
        page,
        "(() => { const s = window.__roofline.opChart.cachedSubsets(); "
        f"return {json.dumps(wanted)}.every((k) => s.includes(k)) && "
        "!window.__roofline.opChart.prerendering(); })()",
    )
    apply(page, lambda: page.uncheck("#infeed-toggle"))
    shown = page.evaluate(PIXELS)
    # The same state drawn from scratch (bitmaps dropped, full redraw).
    page.evaluate("""async () => {
      const chart = window.__roofline.opChart;
      chart.dropLayerCache();
      chart.view._renderer._redraw = true;
      await chart.view.runAsync();
    }""")
    fresh = page.evaluate(PIXELS)
    assert len(shown) == len(fresh)
    diffs = [abs(a - b) for a, b in zip(shown, fresh) if a != b]
    # Bitmaps recorded in chunks may differ in a few anti-aliased edge pixels, by a few levels.
    assert len(diffs) < len(shown) / 1000 and max(diffs, default=0) <= 16, (
        len(diffs),
        max(diffs, default=0),
    )
    apply(page, lambda: page.check("#infeed-toggle"))
    apply(page, lambda: page.evaluate("window.__roofline.setFilter({categories: []})"))
    assert point_count(page, "ops") == page.evaluate("window.__roofline.data.ops.length")


def test_op_table_sort_search_paginate(page, tb):
    open_frame(page, tb, run=MAIN_RUN)
    _, ops = tb.api("ops", run=MAIN_RUN)
    n = ops["total_count"]
    table = page.locator("#op-table")
    # Ranked by self time by default.
    ranks = page.evaluate("window.__roofline.opTable.visibleRows().slice(0, 50).map(r => r.rank)")
    assert ranks == sorted(ranks) and ranks[0] == 1
    # Sort by potential time saved, descending then ascending.
    header = table.locator("th[data-key=potential_time_saved_us]")
    header.click()
    values = page.evaluate(
        "window.__roofline.opTable.visibleRows().map(r => r.potential_time_saved_us)"
    )
    known = [v for v in values if v is not None]  # unknown (collectives, async) last either way
    assert values == sorted(known, reverse=True) + [None] * (len(values) - len(known))
    assert header.get_attribute("aria-sort") == "descending"
    header.click()
    values = page.evaluate(
        "window.__roofline.opTable.visibleRows().map(r => r.potential_time_saved_us)"
    )
    known = [v for v in values if v is not None]
    assert values == sorted(known) + [None] * (len(values) - len(known))
    # Source file:line column (XProf's columns plus time saved and source).
    # Every column is in the chooser (the table shows the essential ones at first).
    headers = page.evaluate("window.__roofline.opTable.allColumns.map((c) => c.key)")
    for key in (
        "rank",
        "category",
        "operation",
        "occurrences",
        "total_time_us",
        "total_self_time_us",
        "self_time_percent",
        "cumulative_self_time_percent",
        "flop_rate",
        "hbm_bw",
        "operational_intensity",
        "bound_by",
        "roofline_efficiency",
        "compute_efficiency",
        "max_mem_bw_utilization",
        "potential_time_saved_us",
        "source",
    ):
        assert key in headers, key
    # Pagination: 50 rows a page.
    pages = -(-n // 50)
    assert page.locator(".page-info").get_attribute("data-pages") == str(pages)
    if pages > 1:
        page.click("#op-table-wrap .page-next")
        assert page.locator(".page-info").get_attribute("data-page") == "2"
    # Search (operation, category, source, ...).
    page.fill("#op-table-wrap .table-search", "layers.py:1")
    expected = sum(
        1
        for r in ops["rows"]
        if "layers.py:1" in (r[ops["columns"].index("source")] or "")
        or "layers.py:1" in r[ops["columns"].index("operation")]
    )
    wait_js(
        page,
        f"document.querySelector('#op-table-wrap .table-count').dataset.count === '{expected}'",
    )


def test_exports(page, tb):
    open_frame(page, tb, run=MAIN_RUN)
    _, ops = tb.api("ops", run=MAIN_RUN)
    _, program = tb.api("program", run=MAIN_RUN)

    def download(button):
        with page.expect_download() as info:
            page.click(button)
        d = info.value
        with open(d.path(), "rb") as f:
            return d.suggested_filename, f.read()

    name, body = download("#op-export-csv")
    assert name.endswith("_ops.csv")
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows[0] == ops["columns"]
    assert len(rows) - 1 == ops["total_count"]
    assert [r[ops["columns"].index("operation")] for r in rows[1:]] == [
        r[ops["columns"].index("operation")] for r in ops["rows"]
    ]

    name, body = download("#program-export-csv")
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows[0] == program["columns"] and len(rows) - 1 == len(program["rows"])

    # JSON of what is shown: with a filter applied, only the filtered rows.
    page.click("#category-filter summary")
    category = ops["facets"]["category"][0]
    apply(page, lambda: page.check(f"#category-options input[value='{category}']"))
    name, body = download("#op-export-json")
    doc = json.loads(body)
    assert doc["filters"]["category"] == [category]
    assert len(doc["rows"]) == tb.api("ops", run=MAIN_RUN, category=category)[1]["total_count"]
    assert all(r["category"] == category for r in doc["rows"])

    # The op chart's SVG draws only the ops the filter keeps.
    name, body = download("#op-export-svg")
    group = re.search(
        r'<g class="mark-symbol role-mark points_marks"[^>]*>(.*?)</g>', body.decode(), re.S
    )
    assert group and group.group(1).count("<path") == len(doc["rows"])

    for button, kind in (
        ("#op-export-png", "png"),
        ("#op-export-svg", "svg"),
        ("#program-export-png", "png"),
        ("#program-export-svg", "svg"),
        ("#category-export-png", "png"),
        ("#category-export-svg", "svg"),
    ):
        name, body = download(button)
        assert name.endswith("." + kind), name
        if kind == "png":
            assert body[:8] == b"\x89PNG\r\n\x1a\n" and len(body) > 5000
        else:
            text = body.decode()
            assert text.lstrip().startswith("<svg") and "</svg>" in text
            assert text.count("<path") > (10 if "category" not in button else 3), button


def test_loading_indicator_on_slow_answers(page, tb):
    # Slow the real backend's /ops answer down (the request still goes to TensorBoard).
    def slow(route):
        time.sleep(1.5)
        route.continue_()

    page.route(re.compile(r".*/data/plugin/roofline/ops\?.*"), slow)
    page.goto(tb.frame_url(run=MAIN_RUN))
    indicator = page.locator("#loading")
    indicator.wait_for(state="visible", timeout=5000)
    assert "Loading" in indicator.inner_text()
    shot(page, "frame_loading")
    wait_js(page, READY)
    indicator.wait_for(state="hidden")
    page.unroute(re.compile(r".*/data/plugin/roofline/ops\?.*"))


def test_corrupt_profile_error_in_place(page, tb):
    # The API answers 422 for the corrupt run; Chromium logs every 4xx fetch as a console error.
    page.log.allow(lambda text, url: "status of 422" in text and "/data/plugin/roofline/" in url)
    open_frame(page, tb, run=BROKEN_RUN)
    assert page.evaluate("document.querySelector('#roofline-app').dataset.status") == "error"
    box = page.locator("#run-error .error-box")
    assert box.get_attribute("data-code") == "bad_profile"
    _, answer = tb.api("program", run=BROKEN_RUN)
    assert answer["error"]["message"] in box.inner_text()
    assert page.locator("#content").is_hidden()
    shot(page, "frame_corrupt")
    # Other runs keep working from the same page.
    select_run(page, MAIN_RUN)
    assert page.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
    assert page.locator("#run-error .error-box").count() == 0
    assert point_count(page, "ops") == tb.api("ops", run=MAIN_RUN)[1]["total_count"]


def test_empty_logdir(page, tb_empty):
    open_frame(page, tb_empty)
    assert page.evaluate("document.querySelector('#roofline-app').dataset.status") == "empty"
    empty = page.locator("#empty-state")
    text = empty.inner_text()
    assert "No profiles in this logdir" in text
    assert "jax.profiler" in text and "tf.profiler" in text
    shot(page, "frame_empty")


def test_strict_csp_without_unsafe_eval(browser, page, tb):
    """TensorBoard's CSP allows 'unsafe-eval' today; the tab must not need it (vega-interpreter)."""

    def strict(route):
        response = route.fetch()
        headers = dict(response.headers)
        csp = headers.get("content-security-policy", "")
        assert "script-src" in csp
        headers["content-security-policy"] = csp.replace("'unsafe-eval'", "")
        route.fulfill(response=response, headers=headers)

    pattern = re.compile(r".*/data/plugin_entry\.html.*")
    # The rewrite really forbids eval: `new Function` throws there.
    probe_ctx = browser.new_context()
    probe_ctx.add_init_script(CSP_PROBE)
    probe = probe_ctx.new_page()
    probe.route(pattern, strict)
    probe.goto(tb.frame_url(run=MAIN_RUN))
    # (From a timer: code run by DevTools' evaluate itself is exempt from the eval check.)
    probe.evaluate("""() => setTimeout(() => {
      try { new Function('return 1'); window.__evalProbe = 'allowed'; }
      catch (e) { window.__evalProbe = 'blocked'; }
    }, 0)""")
    wait_js(probe, "window.__evalProbe !== undefined")
    assert probe.evaluate("window.__evalProbe") == "blocked"
    # ... and the probe every test page carries reports it as a violation.
    wait_js(probe, "window.__cspViolations.length >= 1")
    assert "script-src" in probe.evaluate("window.__cspViolations[0].directive")
    probe_ctx.close()

    page.route(pattern, strict)
    open_frame(page, tb, run=MAIN_RUN)
    assert page.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
    # Exercise the expression-heavy paths: hover, zoom, filter, selection.
    target = hover(page, "#op-chart", lambda: op_point_screen_xy(page))
    page.mouse.wheel(0, -200)
    page.mouse.click(target["x"], target["y"])
    apply(page, lambda: page.fill("#name-filter", "fusion"))
    select_run(page, V4_RUN)  # The name filter stays when the run changes.
    assert point_count(page, "ops") == tb.api("ops", run=V4_RUN, name="fusion")[1]["total_count"]
    # The `page` fixture asserts: no console errors, no CSP violation.
