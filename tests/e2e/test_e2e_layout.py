"""Layout and reading on the committed real profiles (an A100 Kineto trace, the TPU v6e demo, a
torch CPU comparison), as an engineer who knows XProf's tool reads the tab: a chart on the first
screen, pages that fit the window, readable numbers, XProf's rule for memory roofs, the binding
roof named, "—" for what is not a measurement, program records each hoverable, PyTorch rows by
input shapes. Screenshots in test-output/screenshots/layout_*.png."""

from __future__ import annotations

import re

import pytest
from e2e_helpers import READY, filter_seq, hover, open_frame, point_count, shot, wait_js, wait_ready

A100 = "kineto/a100_80gb_shapes"
TPU = "demo/v6e_train/2026_11_29_10_00_00"
CAND = "compare/torch_cpu/convnet_b16"
BASE = "compare/torch_cpu/convnet_b8"
SCI_PERCENT = re.compile(r"\d(?:\.\d+)?e[+-]?\d+\s*%", re.I)
COMPARE_READY = "document.querySelector('#compare-section').dataset.status === 'ready'"


def rows_of(answer):
    return [dict(zip(answer["columns"], r)) for r in answer["rows"]]


def at_size(page, width, height=1000):
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_timeout(400)  # the charts re-fit (vega-embed's resize observer)


def page_width(page):
    return page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")


def first_chart_top(page, selector):
    return page.evaluate(f"""(() => {{
      window.scrollTo(0, 0);
      const c = document.querySelector('{selector} canvas');
      return c ? c.getBoundingClientRect().top + window.scrollY : 1e9; }})()""")


def screen_xy(page, chart, dataset, predicate):
    """Screen position of the first record of `dataset` drawn in `chart` passing `predicate`
    (a JS expression of `r`)."""
    return page.evaluate(f"""(() => {{
      const c = window.__roofline.{chart};
      const d = c.view.data('{dataset}').find((r) => {predicate});
      if (!d) return null;
      const [ox, oy] = [c.view.origin()[0] + c.view.padding().left,
        c.view.origin()[1] + c.view.padding().top];
      const box = c.view.container().querySelector('canvas').getBoundingClientRect();
      return {{x: box.left + ox + c.view.scale('x')(d.px),
               y: box.top + oy + c.view.scale('y')(d.py),
               key: d.series || d.operation}}; }})()""")


@pytest.mark.parametrize("run,name", [(A100, "a100"), (TPU, "tpu_v6e")])
def test_first_screen_fits_and_reads(page, tb_testdata, run, name):
    at_size(page, 1600)
    open_frame(page, tb_testdata, run=run)
    # XProf's order: device, program roofline, op roofline; a chart on the first screen.
    order = page.evaluate("""[...document.querySelectorAll('#content > *, #content .top-row > *')]
        .filter((e) => !e.hidden && e.id).map((e) => e.id)""")
    assert (
        order.index("device-section") < order.index("program-section") < order.index("op-section")
    )
    assert first_chart_top(page, "#program-chart") < 1000 - 200
    shot(page, f"layout_{name}_1600")
    shot(page, f"layout_{name}_1600_first_screen", full_page=False)
    for width in (1600, 900):
        at_size(page, width)
        scroll, inner = page_width(page)
        assert scroll <= inner, f"page {scroll}px wide in a {inner}px window"
        # The category bars fit their card.
        fits = page.evaluate("""(() => {
          const c = document.querySelector('#category-chart canvas');
          const s = document.querySelector('#op-section').getBoundingClientRect();
          return !c || c.getBoundingClientRect().right <= s.right + 1; })()""")
        assert fits
    shot(page, f"layout_{name}_900")
    # No percentage in scientific notation anywhere (tables, tooltips' sources, panels).
    text = page.inner_text("body")
    assert not SCI_PERCENT.search(text), SCI_PERCENT.search(text).group(0)
    # Long times read in ms/s, never nine-digit µs.
    assert not re.search(r"\d{1,3}(,\d{3}){2,}(\.\d+)? µs", text)
    # Plain axis titles (no "(column flop_rate)").
    titles = page.evaluate("""window.__roofline.opChart.view.scenegraph().root.items[0].items
        .filter((m) => m.role === 'axis').map((a) => JSON.stringify(a.items[0].items
        .filter((m) => m.role === 'axis-title').map((m) => m.items.map((i) => i.text))))""")
    assert titles and not [t for t in titles if "column" in t]


@pytest.mark.parametrize("run", [A100, TPU])
def test_memory_roofs_by_xprofs_rule(page, tb_testdata, run):
    open_frame(page, tb_testdata, run=run)
    _, device = tb_testdata.api("device", run=run)
    ops = rows_of(tb_testdata.api("ops", run=run)[1])
    bound = {r["bound_by"] for r in ops}
    memories = [m for m in device["device"]["memories"] if m["peak_gbs"] > 0]
    drawn = page.evaluate("window.__roofline.geometry.drawn.map((m) => m.id)")
    available = page.evaluate("window.__roofline.geometry.available.map((m) => m.id)")
    # HBM always; any other memory only when an op of the view is bound by it. The model
    # names a resource by the device's memory name ("Host link (PCIe)") or by its op-table
    # column (table/op_table.py MEMORY_COLUMNS: "Interconnect" for "Interconnect (ICI)").
    from tb_roofline.table.op_table import MEMORY_COLUMNS

    bound_ids = {mid for _, name, mid, _ in MEMORY_COLUMNS if name in bound}
    assert "hbm" in drawn
    if run == TPU:  # its all-reduces are bound by the ICI links: that roof is drawn
        assert "Interconnect" in bound and "interconnect" in drawn
    for m in memories:
        expected = m["id"] == "hbm" or m["id"] in bound_ids or m["name"] in bound
        assert (m["id"] in drawn) == expected, (m["id"], bound)
        assert (m["id"] in available) == (not expected)
    # The roof lines drawn are those roofs (and compute roofs), each labelled on its line.
    lines = page.evaluate("[...new Set(window.__roofline.geometry.lines.map((l) => l.roof))]")
    assert {x for x in lines if x.startswith("memory:")} == {f"memory:{i}" for i in drawn}
    labels = page.evaluate("window.__roofline.geometry.labels.map((l) => l.text)")
    assert len(labels) == len(lines)
    # One compute roof per precision peak the ops run at.
    peaks = {
        r["peak_flop_rate"]
        for r in ops
        if r["peak_flop_rate"] and r["caveat"] not in ("async_start", "async_wait")
    }
    computes = page.evaluate("window.__roofline.geometry.computes.map((c) => c.value)")
    assert sorted(computes) == sorted(peaks)
    # Not drawn: named in the legend as available.
    legend = page.inner_text("#op-roofs")
    for m in memories:
        if m["id"] in available:
            assert m["name"] in legend


def test_tooltip_names_the_binding_roof_and_highlights_it(page, tb_testdata):
    open_frame(page, tb_testdata, run=A100)
    hover(
        page,
        "#op-chart",
        lambda: screen_xy(page, "opChart", "ops", "r.bound_by === 'HBM' && !r.at_floor"),
    )
    tooltip = page.locator("#chart-tooltip")
    page.evaluate("window.__roofline.tooltip.current")
    roof = tooltip.locator("tr[data-key=binding_roof] td").inner_text()
    assert roof == "HBM (2.04 TB/s)", roof  # the A100's 2,039 GB/s
    # The trace has no hardware counters: the tab says why there is no "Total (HW)".
    assert not tb_testdata.api("program", run=A100)[1]["has_hw_counters"]
    assert page.is_visible("#no-hw-record")
    wait_js(page, "window.__roofline.opChart.view.signal('hl_roof') === 'memory:hbm'")
    # A compute-bound op names its precision's roof.
    _, ops = tb_testdata.api("ops", run=A100)
    compute = [r for r in rows_of(ops) if r["bound_by"] == "Compute"]
    if compute:
        r = compute[0]
        # one row per (op, precision): aten::mm ran tf32 (HBM-bound) and fp32 calls
        text = page.evaluate(
            """([op, prec]) => window.__roofline.opChart.view.data('ops')
            .find((d) => d.operation === op && d.precision === prec).binding_roof""",
            [r["operation"], r["precision"]],
        )
        assert text.startswith("Compute (") and "FLOP/s" in text
    shot(page, "layout_a100_tooltip")


def test_non_measurements_show_a_dash(page, tb_testdata):
    open_frame(page, tb_testdata, run=TPU)
    rows = rows_of(tb_testdata.api("ops", run=TPU)[1])
    starts = [r for r in rows if r["caveat"] == "async_start"]
    # An issue time over the whole transfer is no rate: the API answers null, the table "—".
    assert starts and all(r["memory_bw"] is None and r["flop_rate"] is None for r in starts)
    # Every column (the table shows the essential ones at first).
    page.evaluate(
        "window.__roofline.opTable.showColumns("
        "window.__roofline.opTable.allColumns.map((c) => c.key))"
    )
    page.fill("#name-filter", "copy-start")
    wait_js(
        page,
        "document.querySelector('#op-status').dataset.plotted === '%d'"
        % sum(1 for r in rows if "copy-start" in r["operation"]),
    )
    for key in ("hbm_bw", "flop_rate", "roofline_efficiency", "memory_bw"):
        cells = page.eval_on_selector_all(
            f"#op-table td[data-key={key}]", "els => els.map((e) => e.innerText)"
        )
        assert cells and all(c == "—" for c in cells), (key, cells)
    # No-cost ops on the A100: no "0%" and no "0 FLOP/s".
    open_frame(page, tb_testdata, run=A100)
    keys = page.eval_on_selector_all(
        "#op-table tbody tr",
        "els => els.map((e) => ["
        + "e.querySelector('[data-key=caveat]').innerText, "
        + "e.querySelector('[data-key=roofline_efficiency]').innerText, "
        "e.querySelector('[data-key=flop_rate]').innerText])",
    )
    no_cost = [k for k in keys if k[0] == "no_cost"]
    assert no_cost and all(k[1] == "—" and k[2] == "—" for k in no_cost)


def test_program_records_each_hoverable(page, tb_testdata):
    open_frame(page, tb_testdata, run=A100)
    pts = page.evaluate("""(() => {
      const c = window.__roofline.programChart;
      return c.view.data('records').map((d) => [d.series, d.px, d.py,
        d.bottleneck_operational_intensity, d.flop_rate]); })()""")
    assert len(pts) >= 3
    # Each record where it is measured (no record moved aside to make room): records on one
    # spot are told apart by marker and colour, and the hover lists them all.
    for series, px, py, x, y in pts:
        if x and y:
            assert px == x and py == y, series
    # Hovering Total shows the Total, or the record drawn over it with the Total listed as on
    # the same spot; a click selects the hovered record (table row, ring).
    target = hover(
        page,
        "#program-chart",
        lambda: screen_xy(page, "programChart", "records", "r.record_type === 'total'"),
    )
    current = page.evaluate("window.__roofline.tooltip.current.series")
    if current != "Total":
        assert "Total" in page.inner_text("#chart-tooltip .tooltip-here")
    page.mouse.click(target["x"], target["y"])
    wait_js(page, "document.querySelector('#program-section').dataset.selected === %r" % current)
    assert (
        page.evaluate("document.querySelector('#program-table tr.selected').dataset.key") == current
    )
    # One legend for the records (under the chart, marker and colour of each), none in it.
    legends = page.evaluate("""window.__roofline.programChart.view.scenegraph().root.items[0]
        .items.filter((m) => m.role === 'legend').length""")
    assert legends == 0
    assert page.eval_on_selector_all(
        "#program-legend .record-item", "els => els.map((e) => e.dataset.series)"
    ) == [p[0] for p in pts]


def test_pytorch_rows_by_shapes(page, tb_testdata):
    open_frame(page, tb_testdata, run=A100)
    options = page.eval_on_selector_all("#view-select option", "els => els.map((e) => e.value)")
    assert options[:2] == ["op", "shapes"] and "kernel" in options
    before = int(page.evaluate("+document.querySelector('#roofline-app').dataset.loadSeq"))
    page.select_option("#view-select", "shapes")
    wait_js(page, f"+document.querySelector('#roofline-app').dataset.loadSeq > {before}")
    wait_js(page, READY)
    _, answer = tb_testdata.api("ops", run=A100, rows="shapes")
    assert point_count(page, "ops") == answer["total_count"]
    headers = page.eval_on_selector_all("#op-table th", "els => els.map((e) => e.dataset.key)")
    assert headers.index("shapes") == headers.index("operation") + 1
    mm = page.eval_on_selector_all(
        "#op-table tbody tr",
        "els => els.map((e) => ["
        + "e.querySelector('[data-key=operation]').innerText, "
        + "e.querySelector('[data-key=shapes]').innerText])",
    )
    expected = {(r["operation"], r["shapes"]) for r in rows_of(answer)}
    assert mm and all((op, sh if sh != "—" else "") in expected for op, sh in mm)
    assert "view=shapes" in page.url
    shot(page, "layout_a100_shapes")


def test_top_opportunities_follow_filters(page, tb_testdata):
    open_frame(page, tb_testdata, run=A100)
    before = filter_seq(page)
    page.evaluate("window.__roofline.setFilter({categories: ['elementwise']})")
    wait_ready(page, before)
    box = page.locator("#top-ops-box")
    assert box.get_attribute("data-filtered") == "1"
    ranks = [
        int(x)
        for x in page.eval_on_selector_all(
            "#top-ops-box li", "els => els.map((e) => e.dataset.rank)"
        )
    ]
    ops = {r["rank"]: r for r in rows_of(tb_testdata.api("ops", run=A100)[1])}
    assert ranks and all(ops[r]["category"] == "elementwise" for r in ranks)


def test_infeed_toggle_keeps_steps_per_second(page, tb_testdata):
    open_frame(page, tb_testdata, run=TPU)
    wait_js(page, "document.querySelector('#opportunities').dataset.status === 'ready'")
    steps = page.get_attribute("#throughput-values", "data-steps")
    before = int(page.evaluate("+document.querySelector('#roofline-app').dataset.loadSeq"))
    page.click("#infeed-toggle")
    wait_js(page, f"+document.querySelector('#roofline-app').dataset.loadSeq > {before}")
    wait_js(page, "document.querySelector('#opportunities').dataset.status === 'ready'")
    assert page.get_attribute("#throughput-values", "data-steps") == steps


def test_compare_replaces_the_charts_at_the_top(page, tb_testdata):
    at_size(page, 1600)
    open_frame(page, tb_testdata, run=CAND)
    page.select_option("#compare-run", BASE)
    wait_js(page, COMPARE_READY, timeout=60)
    assert page.evaluate("document.querySelector('#roofline-app').classList.contains('comparing')")
    assert not page.is_visible("#program-section") and not page.is_visible("#op-section")
    assert first_chart_top(page, "#compare-program-chart") < 1000
    # Δ columns first; every pair named (removed ops by their base name).
    headers = page.evaluate("window.__rooflineCompare.opTable.allColumns.map((c) => c.key)")
    assert headers.index("delta_time_us") < headers.index("base_operation")
    assert headers.index("pair_operation") < headers.index("delta_time_us")
    names = page.eval_on_selector_all(
        "#compare-op-table td[data-key=pair_operation]", "els => els.map((e) => e.innerText)"
    )
    assert names and "—" not in names
    for width in (1600, 900):
        at_size(page, width)
        scroll, inner = page_width(page)
        assert scroll <= inner
    text = page.inner_text("body")
    assert not SCI_PERCENT.search(text)
    # Compare axes: SI ticks in the axis unit, no bare "100µ" / "10m".
    ticks = page.evaluate("""window.__rooflineCompare.opChart.view.scenegraph().root.items[0]
        .items.filter((m) => m.role === 'axis').flatMap((a) => a.items[0].items)
        .filter((m) => m.role === 'axis-label').flatMap((m) => m.items.map((i) => i.text))""")
    assert ticks and not [t for t in ticks if re.fullmatch(r"[\d.]+[µmk]", str(t))]
    at_size(page, 1600)
    shot(page, "layout_compare_1600")


def test_numbers_and_roofs_without_compute_peaks(page, tb_testdata):
    """The formatting and roof rules themselves (static/columns.js, static/roofs.js), on the
    figures the issue quotes."""
    open_frame(page, tb_testdata, run=A100)
    base = f"{tb_testdata.base}/data/plugin/roofline/static"
    out = page.evaluate(
        """async (base) => {
      const cols = await import(base + '/columns.js');
      const roofs = await import(base + '/roofs.js');
      const device = {compute: [], memories: [{id: 'hbm', name: 'HBM', peak_gbs: 1000},
        {id: 'l1', name: 'L1', peak_gbs: 19000}, {id: 'interconnect', name: 'Interconnect',
          peak_gbs: 300}]};
      const records = [{bottleneck_operational_intensity: 2, flop_rate: 500, bound_by: 'HBM'},
        {bottleneck_operational_intensity: 0, flop_rate: 0, bound_by: 'HBM'}];
      const g = roofs.roofGeometry(device, records, {});
      roofs.placePoints(records, g);
      return {pct: cols.fmtFrac(6.92e-8), pct2: cols.fmtPct(12.3456),
        time: cols.fmtTime(363729698.77),
        ms: cols.fmtTime(1234.5), us: cols.fmtTime(12.5),
        copy: cols.COLUMN.hbm_bw.format(null, {caveat: 'async_start', bytes: 528482400}),
        zero: cols.COLUMN.flop_rate.format(0, {flops: 0, flop_coverage: 0}),
        eff: cols.COLUMN.roofline_efficiency.format(0, {peak_flop_rate: 0}),
        drawn: g.drawn.map((m) => m.id), available: g.available.map((m) => m.id),
        computes: g.computes.length, hbmLine: g.lines.filter((l) => l.roof === 'memory:hbm').length,
        top: g.yDomain[1],
        strip: records[1].px <= g.xDomain[0] * (g.xDomain[1] / g.xDomain[0]) ** 0.3,
        colors: [roofs.memoryColor('hbm'), roofs.memoryColor('host'), roofs.memoryColor('l1')]};
    }""",
        base,
    )
    assert out["pct"] == "<0.01%" and out["pct2"] == "12.35%"
    assert out["time"] == "363.73 s" and out["ms"] == "1.23 ms" and out["us"] == "12.5 µs"
    assert out["copy"] == out["zero"] == out["eff"] == "—"
    # Unknown compute peaks: the HBM roof is still drawn (up to the top of the plot), no
    # compute roof; memories no record is bound by are listed, not drawn.
    assert out["drawn"] == ["hbm"] and out["available"] == ["l1", "interconnect"]
    assert out["computes"] == 0 and out["hbmLine"] == 2
    assert out["strip"]
    # Fixed roof colours, none of them a colour of the category palette (tableau20).
    tableau20 = {
        "#4c78a8",
        "#9ecae9",
        "#f58518",
        "#ffbf79",
        "#54a24b",
        "#88d27a",
        "#b79a20",
        "#f2cf5b",
        "#439894",
        "#83bcb6",
        "#e45756",
        "#ff9d98",
        "#79706e",
        "#bab0ac",
        "#d67195",
        "#fcbfd2",
        "#b279a2",
        "#d6a5c9",
        "#9e765f",
        "#d8b5a5",
    }
    assert len(set(out["colors"])) == 3 and not set(out["colors"]) & tableau20


def test_compare_chart_draws_one_compute_roof_per_precision(page, tb_testdata):
    """The comparison's roofs follow the single-run rule (roofs.js draws both): one compute roof
    per peak its records run under (an A100 run with fp32 and bf16 work: both), memory roofs up
    to the highest, chosen by the sides' `binding_roof_id`."""
    open_frame(page, tb_testdata, run=CAND)
    roofs = page.evaluate("""async () => {
        const m = await import('./static/compare_charts.js');
        const d = {compute: [{precision: 'bf16', peak_gflops: 312000},
                             {precision: 'fp32', peak_gflops: 19500}],
                   memories: [{id: 'hbm', name: 'HBM', peak_gbs: 2039}]};
        const rows = [{base_bottleneck_operational_intensity: 10, base_flop_rate: 1000,
                       base_bound_by: 'HBM', base_binding_roof_id: 'hbm',
                       base_peak_flop_rate: 19500,
                       cand_bottleneck_operational_intensity: 300, cand_flop_rate: 150000,
                       cand_bound_by: 'Compute', cand_binding_roof_id: 'compute',
                       cand_peak_flop_rate: 312000}];
        const g = m.compareGeometry(d, d, m.sidesXY(rows));
        return g.roofs.map((r) => [r.id, r.px, r.py]);
    }""")
    tops = {name: max(py for n, _, py in roofs if n == name) for name, _, _ in roofs}
    assert tops["memory:hbm"] == 312000  # the memory roof rises to the highest compute roof
    assert tops["compute:19500"] == 19500  # and the fp32 work has its own
    fp32 = sorted(px for n, px, _ in roofs if n == "compute:19500")
    assert abs(fp32[0] - 19500 / 2039) < 1e-9  # starting where HBM meets it
