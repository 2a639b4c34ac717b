"""What the server makes once, read the same everywhere in the tab, in Chromium: the compare
chart's roofs are the main chart's (one module, roofs.js, chooses and draws them by the
server's memory ids), the filters keep exactly the rows the API's filter keeps, and the Top
opportunities list is the model's ranking. Each is read from the Vega views' scenegraph and
checked against the API's own answers (/device, /ops, /compare), never against the page's
geometry. Whether a record is a roofline measurement is the server's `measurement` column: the
chart's point shapes and the counts of ops left out follow it."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
from e2e_helpers import REPO, filter_seq, open_frame, wait_js, wait_ready

sys.path.insert(0, REPO)
from tb_roofline.serve.service.answers import filter_mask  # noqa: E402

V4 = "demo/v4_pod/2026_11_29_11_30_00"  # HBM, CMEM, interconnect and compute roofs
A100 = "kineto/a100_80gb_shapes"  # four compute roofs, host link and interconnect
V6E = "demo/v6e_train/2026_11_29_10_00_00"  # async halves and a container
ABOVE = "compare/jax_cpu/mlp_b64/2026_11_30_14_13_09"  # records above their roofs
COMPARE = "document.querySelector('#compare-section')"
ASYNC = ("async_start", "async_wait")
SAME_ROOF = 5e-3  # roofs.js: compute peaks this close are one roof


def rows_of(answer):
    return [dict(zip(answer["columns"], r)) for r in answer["rows"]]


def pairs_of(answer):
    return [dict(zip(answer["columns"], r)) for r in zip(*answer["values"])]


# Every point of every roof line a view draws, read from its scenegraph: {roof id: [(x, y)]}
# (the single-run lines carry their id as `roof`, the comparison's as `id`).
ROOF_LINES = """(view) => {
  const out = {};
  const walk = (node) => {
    if (!node) return;
    if (node.marktype === 'line') {
      for (const item of node.items || []) {
        const d = item.datum;
        if (!d || d.px === undefined) continue;
        const id = d.id || d.roof;
        (out[id] = out[id] || []).push([d.order, d.px, d.py]);
      }
    }
    for (const child of node.items || []) if (child.items) walk(child);
  };
  walk(view.scenegraph().root);
  return out;
}"""


def roofs_drawn(page, view_expr):
    """{('memory', id) | ('compute', value): (slope or value, the x where the line starts
    rising to / running along the top)} of the roof lines a view draws."""
    lines = page.evaluate(f"({ROOF_LINES})({view_expr})")
    out = {}
    for rid, pts in lines.items():
        pts = sorted(pts)
        if rid.startswith("memory:"):
            (_, x0, y0), (_, x1, y1) = pts[0], pts[-1]
            out[("memory", rid[7:])] = (y0 / x0, x1, y1)  # bandwidth, where it meets the top
        else:
            (_, x0, y0) = pts[0]
            out[("compute", float(rid.split(":", 1)[1]))] = (y0, x0, y0)
    return out


def expected_roofs(device, records):
    """The roofs XProf's rule draws for these records, from the API alone: HBM and every
    memory a record is bound by (its `binding_roof_id`), one compute roof per distinct peak the
    records run at; each memory meets the top compute roof, each compute roof starts on HBM."""
    mems = {m["id"]: m["peak_gbs"] for m in device["memories"] if m["peak_gbs"] > 0}
    ids = {"hbm"} | {r["binding_roof_id"] for r in records} - {None, "compute"}
    peaks = []
    for r in records:
        v = r["peak_flop_rate"]
        if v and v > 0 and r["caveat"] not in ASYNC:
            if not any(abs(v / p - 1) < SAME_ROOF for p in peaks):
                peaks.append(v)
    top = max(peaks)
    out = {("memory", i): (mems[i], top / mems[i], top) for i in ids if i in mems}
    for p in peaks:
        out[("compute", p)] = (p, p / mems["hbm"], p)
    return out


def assert_same_roofs(got, want, what):
    def norm(d):
        return {(k, round(v, 4) if isinstance(v, float) else v): w for (k, v), w in d.items()}

    got, want = norm(got), norm(want)
    assert sorted(got) == sorted(want), (what, sorted(got), sorted(want))
    for key, values in want.items():
        for g, w in zip(got[key], values):
            assert math.isclose(g, w, rel_tol=1e-5), (what, key, got[key], values)


def wait_compare(page):
    wait_js(page, f"['ready', 'error'].includes({COMPARE}.dataset.status)", timeout=120)
    assert page.evaluate(f"{COMPARE}.dataset.status") == "ready"


@pytest.mark.parametrize("run", [V4, A100])
def test_compare_chart_roofs_are_the_main_charts(page, tb_testdata, run):
    """A run compared with itself: the comparison's op chart draws exactly the roofs of the
    main op chart (same ids, bandwidths, peaks, meeting points), and both are what the API's
    device and records say."""
    device = tb_testdata.api("device", run=run)[1]["device"]
    ops = rows_of(tb_testdata.api("ops", run=run)[1])
    open_frame(page, tb_testdata, run=run)
    page.locator("#op-chart").scroll_into_view_if_needed()
    main = roofs_drawn(page, "window.__roofline.opChart.view")
    assert_same_roofs(main, expected_roofs(device, ops), "main chart")
    page.select_option("#compare-run", run)
    wait_compare(page)
    page.locator("#compare-op-chart").scroll_into_view_if_needed()
    compared = roofs_drawn(page, "window.__rooflineCompare.opChart.view")
    assert_same_roofs(compared, main, "compare chart vs main chart")
    # The pairs' own binding roofs, as the server sends them, give the same set.
    answer = tb_testdata.api("compare", base=run, run=run)[1]
    sides = [
        {k: p[f"{s}_{k}"] for k in ("binding_roof_id", "peak_flop_rate", "caveat")}
        for p in pairs_of(answer)
        for s in ("base", "cand")
        if p[f"{s}_bound_by"] is not None
    ]
    assert_same_roofs(compared, expected_roofs(device, sides), "compare chart vs /compare")
    # The ridge markers sit where the roofs meet.
    ridges = page.evaluate(
        "window.__rooflineCompare.opGeometry.ridges.map((r) => [r.roof, r.px, r.py])"
    )
    assert len(ridges) == len(compared) - 1  # every roof but the top compute roof meets one
    for rid, px, py in ridges:
        kind, value = rid.split(":", 1)
        key = (kind, value if kind == "memory" else float(value))
        assert math.isclose(px, compared[key][1], rel_tol=1e-9)
        assert math.isclose(py, compared[key][2], rel_tol=1e-9)


# Rows that tell filter rules apart: case, missing names and categories, names with brackets.
RULE_ROWS = [
    {"operation": "Fusion.1", "category": "fusion", "bound_by": "HBM", "precision": "bf16"},
    {"operation": "fusion.2", "category": "loop fusion", "bound_by": "Compute", "caveat": ""},
    {"operation": None, "category": "fusion", "bound_by": "HBM", "precision": ""},
    {"operation": "", "category": None, "bound_by": "Unknown", "caveat": "no_cost"},
    {"operation": "ÄRGER.copy", "category": "copy", "bound_by": "Host link (PCIe)"},
    {"operation": "all-reduce.7", "category": None, "bound_by": "Interconnect", "precision": "f32"},
    {"operation": "convolution", "category": "convolution", "bound_by": "VMEM Read"},
]
RULE_FILTERS = [
    {},
    {"name": "FUSION"},
    {"name": "ärger"},
    {"name": "."},
    {"categories": ["fusion"]},
    {"categories": ["fusion", "copy"], "boundBy": ["HBM", "Host link (PCIe)"]},
    {"boundBy": ["Host link"]},
    {"categories": ["convolution"], "name": "conv"},
    {"categories": ["missing"]},
    {"precisions": ["bf16", "none"]},
    {"precisions": ["f32"], "caveats": ["none"]},
    {"caveats": ["no_cost"], "boundBy": ["Unknown"]},
]


def _python_rule(rows, f, prefixes=("",)):
    cols = {}
    for p in prefixes:
        for k in ("operation", "category", "bound_by", "precision", "caveat"):
            cols[p + k] = np.array([r.get(p + k) for r in rows], dtype=object)
    mask = filter_mask(
        cols,
        len(rows),
        f.get("categories", ()),
        f.get("boundBy", ()),
        f.get("name", ""),
        prefixes,
        f.get("precisions", ()),
        f.get("caveats", ()),
    )
    return [i for i, keep in enumerate(mask.tolist()) if keep]


def test_the_tabs_filter_is_the_servers_rule(page, tb_testdata):
    """filter_rule.js (the tab's and the comparison's filter) keeps, row for row, what the
    server's `filter_mask` keeps, for records and for pairs (either side)."""
    open_frame(page, tb_testdata, run=V4)
    script = """async ([rows, filters, prefixes]) => {
      const m = await import('./static/filter_rule.js');
      return filters.map((f) => m.filterRows(rows.map((r, i) => ({...r, _i: i})), f, prefixes)
          .map((r) => r._i));
    }"""
    got = page.evaluate(script, [RULE_ROWS, RULE_FILTERS, [""]])
    for f, kept in zip(RULE_FILTERS, got):
        assert kept == _python_rule(RULE_ROWS, f), f
    # Pairs: the base of each row beside the candidate of the next one.
    pairs = [
        {
            **{f"base_{k}": v for k, v in a.items()},
            **{f"cand_{k}": v for k, v in b.items()},
        }
        for a, b in zip(RULE_ROWS, RULE_ROWS[1:] + RULE_ROWS[:1])
    ]
    prefixes = ["base_", "cand_"]
    got = page.evaluate(script, [pairs, RULE_FILTERS, prefixes])
    for f, kept in zip(RULE_FILTERS, got):
        assert kept == _python_rule(pairs, f, tuple(prefixes)), f


def _shown_keys(page):
    """(op table rows, chart points) the tab shows, each as the op's identity."""
    return page.evaluate("""(() => {
      const key = (r) => JSON.stringify([r.program_id, r.operation, r.precision, r.host]);
      const mark = window.__roofline.opChart.findMark('points');
      return {table: window.__roofline.ops.table.visibleRows().map(key),
              chart: (mark.items || []).map((i) => key(i.datum))};
    })()""")


def _api_keys(server, run, **filters):
    answer = server.api("ops", run=run, **filters)[1]
    return [
        json.dumps([r["program_id"], r["operation"], r["precision"], r["host"]])
        for r in rows_of(answer)
    ], answer


def _filtered(page, action):
    before = filter_seq(page)
    action()
    wait_ready(page, before)


def test_filters_in_the_tab_keep_the_apis_rows(page, tb_testdata):
    """Filtering in the tab (the real menus and the name box) shows exactly the rows /ops
    answers for the same filter, in the table and on the chart."""
    open_frame(page, tb_testdata, run=V4)
    all_keys, answer = _api_keys(tb_testdata, V4)
    category = answer["facets"]["category"][0]
    bound = [b for b in answer["facets"]["bound_by"] if b != "HBM"][0]
    norm = lambda keys: sorted(json.dumps(json.loads(k)) for k in keys)  # noqa: E731
    steps = [
        (lambda: page.fill("#name-filter", "Fusion"), {"name": "Fusion"}),
        (lambda: page.fill("#name-filter", ""), {}),
        (
            lambda: (
                page.click("#category-filter summary"),
                page.check(f"#category-options input[value='{category}']"),
            ),
            {"category": [category]},
        ),
        (
            lambda: (
                page.click("#bound-filter summary"),
                page.check(f"#bound-options input[value='{bound}']"),
            ),
            {"category": [category], "bound_by": [bound]},
        ),
        (lambda: page.click("#clear-filters"), {}),
        (lambda: page.check(f"#bound-options input[value='{bound}']"), {"bound_by": [bound]}),
        (
            lambda: page.check("#bound-options input[value='HBM']"),
            {"bound_by": [bound, "HBM"]},
        ),
        (lambda: page.fill("#name-filter", "a"), {"bound_by": [bound, "HBM"], "name": "a"}),
    ]
    sizes = set()
    for action, filters in steps:
        _filtered(page, action)
        want, _ = _api_keys(tb_testdata, V4, **filters)
        shown = _shown_keys(page)
        table = page.evaluate("window.__roofline.ops.table.visibleRows().length")
        assert norm(shown["table"]) == norm(want), filters
        assert table == len(want), filters
        # On the chart: the same ops (every op is placed: the no-FLOP box holds the others).
        assert norm(shown["chart"]) == norm(want), filters
        sizes.add(len(want))
    assert len(sizes) >= 4 and len(all_keys) in sizes  # the filters did tell rows apart


def test_compare_filters_keep_the_apis_pairs(page, tb_testdata):
    """The comparison's filters keep the pairs /compare keeps for the same filter."""
    base = "compare/jax_cpu/mlp_b64/2026_11_30_14_13_09"
    run = "compare/jax_cpu/mlp_b128/2026_11_30_14_13_10"
    open_frame(page, tb_testdata, run=run, compare=base)
    wait_compare(page)
    full = tb_testdata.api("compare", base=base, run=run)[1]
    bound = full["facets"]["bound_by"][0]
    category = full["facets"]["category"][-1]
    index = {
        json.dumps([p["program"], p["base_operation"], p["cand_operation"], p["match_rule"]]): i
        for i, p in enumerate(pairs_of(full))
    }
    assert len(index) == full["unfiltered_count"]  # each pair named once
    cases = [
        {"name": "DOT"},
        {"bound_by": [bound]},
        {"category": [category], "name": "."},
        {"change": "slower"},
        {"change": "faster", "bound_by": [bound]},
        {"change": "matched", "name": "fusion"},
    ]
    sizes = set()
    for f in cases:
        state = {
            "name": f.get("name", ""),
            "categories": f.get("category", []),
            "boundBy": f.get("bound_by", []),
            "change": f.get("change", ""),
        }
        before = int(page.evaluate(f"+({COMPARE}.dataset.filterSeq || 0)"))
        page.evaluate(f"window.__rooflineCompare.setFilter({json.dumps(state)})")
        wait_js(page, f"+({COMPARE}.dataset.filterSeq || 0) > {before}")
        shown = sorted(page.evaluate("window.__rooflineCompare.filtered.map((p) => p._i)"))
        want = sorted(
            index[
                json.dumps(
                    [p["program"], p["base_operation"], p["cand_operation"], p["match_rule"]]
                )
            ]
            for p in pairs_of(tb_testdata.api("compare", base=base, run=run, **f)[1])
        )
        assert shown == want, f
        assert page.evaluate("window.__rooflineCompare.filtered.length") == len(want)
        sizes.add(len(want))
    assert len(sizes) >= 4  # the filters did tell pairs apart


@pytest.mark.parametrize("run", [V4, A100])
def test_top_opportunities_are_the_models_ranking(page, tb_testdata, run):
    """The Top opportunities box lists the model's ranking (`opportunity_rank`), unfiltered and
    filtered: the ranked ops of the filter, in rank order."""
    open_frame(page, tb_testdata, run=run)
    listed = "els => els.map((e) => +e.dataset.rank)"

    def ranking(**filters):
        rows = [
            r
            for r in rows_of(tb_testdata.api("ops", run=run, **filters)[1])
            if r["opportunity_rank"] is not None
        ]
        return [r["rank"] for r in sorted(rows, key=lambda r: r["opportunity_rank"])]

    want = ranking()
    assert len(want) > 3
    assert page.eval_on_selector_all("#top-ops-box li", listed) == want[:10]
    ops = rows_of(tb_testdata.api("ops", run=run)[1])
    category = max(
        {r["category"] for r in ops if r["opportunity_rank"] is not None},
        key=lambda c: sum(1 for r in ops if r["category"] == c),
    )
    _filtered(
        page,
        lambda: page.evaluate(
            f"window.__roofline.setFilter({{categories: [{json.dumps(category)}]}})"
        ),
    )
    want = ranking(category=[category])
    assert want and page.eval_on_selector_all("#top-ops-box li", listed) == want[:10]


# Each point of the op chart as drawn: the record's `rank`, its flag and the symbol Vega drew.
POINTS = """(() => {
  const mark = window.__roofline.opChart.findMark('points');
  return (mark && mark.items || []).map((i) => [i.datum.rank, i.datum.flag, i.shape]);
})()"""
SHAPES = {"measured": "circle", "not a measurement (caveat)": "diamond"}
SHAPES["above its roof"] = "triangle-up"


@pytest.mark.parametrize("run", [A100, V6E, ABOVE])
def test_point_flags_and_left_out_counts_are_the_models_column(page, tb_testdata, run):
    """Every point's flag and symbol, the status line's count of non-measurements and the Top
    opportunities box's count of ops left out follow the server's `measurement` column (host
    copies under a known link speed and containers are measurements; async halves, no-cost and
    above-roof records are not)."""
    ops = rows_of(tb_testdata.api("ops", run=run)[1])
    by_rank = {r["rank"]: r for r in ops}
    left_out = [r for r in ops if r["measurement"] is False]
    assert left_out and len(left_out) < len(ops)
    open_frame(page, tb_testdata, run=run)
    page.locator("#op-chart").scroll_into_view_if_needed()
    wait_js(page, f"({POINTS}).length === {len(ops)}", timeout=60)
    points = page.evaluate(POINTS)
    assert sorted(p[0] for p in points) == sorted(by_rank)
    for rank, flag, shape in points:
        r = by_rank[rank]
        want = "measured" if r["measurement"] else "not a measurement (caveat)"
        if not r["measurement"] and r["caveat"] == "above_roof":
            want = "above its roof"
        assert flag == want and shape == SHAPES[want], (r["operation"], r["caveat"], flag, shape)
    # The counts the page states: the status line and the Top opportunities box.
    status = page.inner_text("#op-status")
    assert f" · {len(left_out)} not a roofline measurement" in status, status
    share = page.locator("#caveated-share")
    share.scroll_into_view_if_needed()
    assert share.inner_text().startswith(f"{len(left_out)} ops ("), share.inner_text()
