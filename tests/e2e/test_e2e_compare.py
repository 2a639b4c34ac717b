"""The compare view in a real TensorBoard and Chromium, on the committed comparison pairs
(testdata/compare): selector and URL state, what the charts draw vs /compare, hover and click,
filters vs the API's, sorting, exports, two devices, and TensorBoard's own page."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import urllib.parse

import pytest
from e2e_helpers import READY, REPO, TensorBoard, hover, open_frame, shot, wait_js

SECTION = "document.querySelector('#compare-section')"


@pytest.fixture(scope="module")
def tb_compare():
    server = TensorBoard(os.path.join(REPO, "testdata", "compare"), name="compare")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def runs(tb_compare):
    return {r["run"].split("/")[1]: r["run"] for r in tb_compare.api("runs")[1]["runs"]}


def compare_seq(frame) -> int:
    return int(frame.evaluate(f"+({SECTION}.dataset.seq || 0)"))


def wait_compare(frame, seq_before=None):
    wait_js(frame, READY)
    if seq_before is not None:
        wait_js(frame, f"+({SECTION}.dataset.seq || 0) > {seq_before}")
    wait_js(frame, f"['ready', 'error'].includes({SECTION}.dataset.status)")
    return frame.evaluate(f"{SECTION}.dataset.status")


def pairs(answer):
    return [dict(zip(answer["columns"], row)) for row in zip(*answer["values"])]


def drawn(frame, data_name):
    return frame.evaluate(f"window.__rooflineCompare.opChart.view.data('{data_name}').length")


def has_rate(p, side):
    """Whether a side of a pair has a place on a roofline (a FLOP rate and an intensity)."""
    x = p[f"{side}_bottleneck_operational_intensity"]
    y = p[f"{side}_flop_rate"]
    return bool(x and x > 0 and y and y > 0)


def placeable(answer):
    """(grey base points, coloured points) the op chart must draw for an answer: sides that are
    not roofline measurements (`measurement` false) or without a FLOP rate are listed, never
    placed."""
    grey = coloured = 0
    for p in pairs(answer):
        for side in ("base", "cand"):
            if (
                p[f"{side}_total_self_time_us"] is None
                or p[f"{side}_measurement"] is False
                or not has_rate(p, side)
            ):
                continue
            if side == "base" and p["status"] == "matched":
                grey += 1
            else:
                coloured += 1
    return grey, coloured


def hash_state(frame) -> dict:
    raw = frame.evaluate("window.location.hash").lstrip("#")
    return dict(urllib.parse.parse_qsl(raw))


def point_xy(frame, data_name="cand_points"):
    """Screen position of the biggest point of a data set not on the axis floor."""
    return frame.evaluate(
        """(name) => {
      const view = window.__rooflineCompare.opChart.view;
      const d = view.data(name).filter((r) => !r.at_floor).reduce((a, b) => (b.t > a.t ? b : a));
      const [ox, oy] = [view.origin()[0] + view.padding().left,
        view.origin()[1] + view.padding().top];
      const box = view.container().querySelector('canvas').getBoundingClientRect();
      return {x: box.left + ox + view.scale('x')(d.px), y: box.top + oy + view.scale('y')(d.py),
              index: d.pair._i, operation: d.pair.cand_operation || d.pair.base_operation};
    }""",
        data_name,
    )


def test_comparison_from_the_url_draws_what_the_api_answers(page, tb_compare, runs):
    base, cand = runs["mlp_b64"], runs["mlp_b128"]
    open_frame(page, tb_compare, run=cand, compare=base)
    assert wait_compare(page) == "ready"
    status, answer = tb_compare.api("compare", base=base, run=cand)
    assert status == 200
    # The comparison takes the place of the single-run sections.
    assert page.is_visible("#compare-section")
    assert not page.is_visible("#op-section") and not page.is_visible("#program-section")
    assert page.input_value("#compare-run") == base
    # Every pair in the table, the largest time change first.
    assert (
        page.evaluate(
            "+document.querySelector('#compare-op-table-wrap .table-count').dataset.count"
        )
        == answer["unfiltered_count"]
    )
    first = page.eval_on_selector(
        "#compare-op-table tbody tr td[data-key=pair_operation]", "td => td.textContent"
    )
    assert first == (pairs(answer)[0]["cand_operation"] or pairs(answer)[0]["base_operation"])
    # Both sides placed (those not roofline measurements are not), and the arrows of the largest
    # changes.
    grey, coloured = placeable(answer)
    assert (drawn(page, "base_points"), drawn(page, "cand_points")) == (grey, coloured)
    arrows = page.evaluate(
        "window.__rooflineCompare.opChart.view.data('arrows').map((a) => a.pair._i)"
    )
    assert 0 < len(arrows) <= 200
    drawable = [
        i
        for i, p in enumerate(pairs(answer))
        if p["status"] == "matched"
        and p["base_measurement"] is not False
        and p["cand_measurement"] is not False
        and has_rate(p, "base")
        and has_rate(p, "cand")
    ]
    assert arrows == drawable[: len(arrows)]
    status_el = page.evaluate("({...document.querySelector('#compare-op-status').dataset})")
    assert int(status_el["caveated"]) == sum(
        p[f"{s}_measurement"] is False for p in pairs(answer) for s in ("base", "cand")
    )
    assert int(status_el["unplaced"]) == sum(
        1
        for p in pairs(answer)
        for s in ("base", "cand")
        if p[f"{s}_total_self_time_us"] is not None
        and p[f"{s}_measurement"] is not False
        and not has_rate(p, s)
    )
    # Program records: one arrow per matched pair (Total, Average, each step).
    program = answer["program"]
    assert page.evaluate("window.__rooflineCompare.programChart.view.data('arrows').length") == len(
        program["values"][0]
    )
    # The summary says what the API says.
    change = page.text_content("#compare-facts tr[data-key=change] td")
    shown = float(re.match(r"([+-]?[0-9.,]+)%", change).group(1).replace(",", ""))
    assert shown == pytest.approx(answer["summary"]["time_change_percent"], abs=0.006)
    assert "Top contributors" in page.text_content("#compare-summary")
    assert len(page.query_selector_all("#compare-top li")) == len(
        answer["summary"]["top_contributors"]
    )
    # Hover: the pair's values; click: its table row.
    target = hover(page, "#compare-op-chart", lambda: point_xy(page), "#compare-tooltip")
    tip = page.text_content("#compare-tooltip")
    assert (
        "Δ self time" in tip and " µs" in tip and target["operation"] in tip and "candidate" in tip
    )
    page.mouse.click(target["x"], target["y"])
    wait_js(page, f"{SECTION}.dataset.selected === '{target['index']}'")
    assert page.is_visible("#compare-op-table tr.selected")
    shot(page, "compare_mlp_batch")


def test_selector_filters_sort_url_and_exports(page, tb_compare, runs):
    base, cand = runs["convnet_b8"], runs["convnet_b16"]
    open_frame(page, tb_compare, run=cand)
    assert page.evaluate(f"{SECTION}.dataset.status") == "off"
    assert page.is_visible("#op-section")
    seq = compare_seq(page)
    page.select_option("#compare-run", base)
    assert wait_compare(page, seq) == "ready"
    assert hash_state(page)["compare"] == base
    _, answer = tb_compare.api("compare", base=base, run=cand)
    count = "+document.querySelector('#compare-op-table-wrap .table-count').dataset.count"

    def filtered(fn):
        before = int(page.evaluate(f"+({SECTION}.dataset.filterSeq || 0)"))
        fn()
        wait_js(page, f"+({SECTION}.dataset.filterSeq || 0) > {before}")

    # The name filter applies to both sides, as the API's does.
    filtered(lambda: page.fill("#compare-name-filter", "conv"))
    expected = tb_compare.api("compare", base=base, run=cand, name="conv")[1]["total_count"]
    assert page.evaluate(count) == expected > 0
    assert hash_state(page)["compare_name"] == "conv"
    grey = drawn(page, "base_points") + drawn(page, "cand_points")
    kept = [
        p
        for p in pairs(answer)
        if "conv" in ((p["base_operation"] or "") + "|" + (p["cand_operation"] or "")).lower()
    ]
    assert grey == sum(
        1
        for p in kept
        for s in ("base", "cand")
        if p[f"{s}_total_self_time_us"] is not None and p[f"{s}_measurement"] is not False
    )
    filtered(lambda: page.select_option("#compare-change-filter", "slower"))
    assert page.evaluate(count) == sum(1 for p in kept if p["change"] == "slower")
    filtered(lambda: page.click("#compare-clear-filters"))
    assert page.evaluate(count) == answer["unfiltered_count"]
    # Category (either side), as the API's filter.
    category = answer["facets"]["category"][0]
    page.click("#compare-category-filter summary")
    filtered(lambda: page.check(f"#compare-category-options input[value='{category}']"))
    assert (
        page.evaluate(count)
        == tb_compare.api("compare", base=base, run=cand, category=category)[1]["total_count"]
    )
    filtered(lambda: page.click("#compare-clear-filters"))
    # Sort by Δ self time (%), largest first.
    page.click("#compare-op-table th[data-key=delta_time_percent]")
    top = [p["delta_time_percent"] for p in pairs(answer) if p["delta_time_percent"] is not None]
    cell = page.eval_on_selector(
        "#compare-op-table tbody tr td[data-key=delta_time_percent]", "td => td.textContent"
    )
    assert float(re.sub(r"[^0-9.\-]", "", cell)) == pytest.approx(max(top), rel=1e-3)

    def download(button):
        with page.expect_download() as info:
            page.click(button)
        d = info.value
        with open(d.path(), "rb") as f:
            return d.suggested_filename, f.read()

    name, body = download("#compare-export-csv")
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert name.endswith("_ops.csv") and rows[0] == answer["columns"]
    assert len(rows) - 1 == answer["unfiltered_count"]
    name, body = download("#compare-export-json")
    doc = json.loads(body)
    assert doc["base"]["run"] == base and len(doc["rows"]) == answer["unfiltered_count"]
    name, body = download("#compare-op-export-svg")
    svg = body.decode()
    assert name.endswith("_ops.svg") and svg.count("<path") >= drawn(page, "cand_points")
    name, body = download("#compare-program-export-png")
    assert name.endswith("_program.png") and body[:8] == b"\x89PNG\r\n\x1a\n"
    # Steps: the average step of both sides.
    seq = compare_seq(page)
    page.select_option("#compare-step", "Average")
    assert wait_compare(page, seq) == "ready"
    assert "per step" in page.text_content("#compare-cand-label")
    assert hash_state(page)["compare_step"] == "Average"
    # Comparing nothing gives the single-run view back.
    seq = compare_seq(page)
    page.select_option("#compare-run", "")
    wait_js(page, f"{SECTION}.dataset.status === 'off'")
    assert page.is_visible("#op-section") and not page.is_visible("#compare-section")
    assert "compare" not in hash_state(page)


def test_two_devices_and_a_missing_run(page, tb_testdata):
    """The demo's v6e and v4 runs: each side under its own roofs, said in a note; a link to a
    run that does not exist leaves the single-run view."""
    v6e, v4 = "demo/v6e_train/2026_11_29_10_00_00", "demo/v4_pod/2026_11_29_11_30_00"
    open_frame(page, tb_testdata, run=v4, compare=v6e)
    assert wait_compare(page) == "ready"
    assert "different devices" in page.text_content("#compare-notes")
    roofs = page.evaluate(
        "[...new Set(window.__rooflineCompare.opGeometry.roofs.map((r) => r.side))]"
    )
    assert sorted(roofs) == ["base", "cand"]
    shot(page, "compare_two_devices")
    open_frame(page, tb_testdata, run=v4, compare="nope/2020")
    wait_js(page, f"{SECTION}.dataset.status === 'off'")
    assert page.is_visible("#op-section")


def test_comparison_in_tensorboards_page(page, tb_compare, runs):
    """The state lives in TensorBoard's own URL: a shared link opens the comparison."""
    base, cand = runs["branches"], runs["branches_swapped"]
    state = {"p.roofline.run": cand, "p.roofline.compare": base}
    page.goto(f"{tb_compare.base}/#roofline&" + urllib.parse.urlencode(state))
    frame = page.frame_locator("iframe").first
    frame.locator("#compare-section[data-status=ready]").wait_for(timeout=60000)
    labels = frame.locator("#compare-op-table tbody td[data-key=match_rule]").all_text_contents()
    assert sorted(labels).count("fingerprint") == 2  # the renamed fusions
    shot(page, "compare_tensorboard_page")


def test_compare_view_under_a_strict_csp(page, tb_compare, runs):
    """The arrowheads' angle is an expression (scale() of both ends): like every other one it is
    interpreted, so the view works without 'unsafe-eval' (the page fixture fails on any CSP
    violation or console error)."""

    def strict(route):
        response = route.fetch()
        headers = dict(response.headers)
        headers["content-security-policy"] = headers.get("content-security-policy", "").replace(
            "'unsafe-eval'", ""
        )
        route.fulfill(response=response, headers=headers)

    page.route(re.compile(r".*/data/plugin_entry\.html.*"), strict)
    open_frame(page, tb_compare, run=runs["mlp_b64_unfused"], compare=runs["mlp_b64"])
    assert wait_compare(page) == "ready"
    # Each arrowhead points from the base point to the candidate point on screen.
    heads = page.evaluate("""() => {
      const view = window.__rooflineCompare.opChart.view;
      const x = view.scale('x');
      const y = view.scale('y');
      const out = [];
      const walk = (node) => {
        if (node.marktype === 'symbol') for (const item of node.items || []) {
          const d = item.datum;
          if (d && d.cx !== undefined) out.push([item.angle, x(d.cx) - x(d.bx), y(d.cy) - y(d.by)]);
        }
        for (const child of node.items || []) if (child.items) walk(child);
      };
      walk(view.scenegraph().root);
      return out;
    }""")
    assert heads
    for angle, dx, dy in heads:
        expected = 90 + math.degrees(math.atan2(dy, dx))
        assert angle == pytest.approx(expected, abs=1e-6)
    hover(page, "#compare-op-chart", lambda: point_xy(page), "#compare-tooltip")
