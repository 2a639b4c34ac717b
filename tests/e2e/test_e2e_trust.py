"""The tab tells measurements from records with a caveat, draws the roofs the table states, and
says what a view shows, on the committed test data in a real TensorBoard."""

from __future__ import annotations

from e2e_helpers import READY, open_frame, shot, wait_js

A100 = "kineto/a100_80gb_shapes"
V6E = "demo/v6e_train/2026_11_29_10_00_00"


def _rows(answer):
    return [dict(zip(answer["columns"], r)) for r in answer["rows"]]


def test_caveats_are_marked_and_the_mix_roof_is_drawn(page, tb_testdata):
    open_frame(page, tb_testdata, run=A100)
    ops = _rows(tb_testdata.api("ops", run=A100)[1])
    program = _rows(tb_testdata.api("program", run=A100)[1])
    shown = page.evaluate("window.__roofline.data.ops.map(r => [r.caveat, r.flag, r.at_floor])")
    for (caveat, flag, _), api in zip(shown, ops):
        assert caveat == api["caveat"]
        # the server's `measurement` (model/records/records.py measurements): host copies under the
        # A100's PCIe speed are measurements, no-cost ops are not
        assert (flag == "measured") == api["measurement"]
    assert {(r["caveat"], r["measurement"]) for r in ops if r["caveat"]} == {
        ("host_transfer", True),
        ("no_cost", False),
    }
    # Only the point kinds the run has are in the legend.
    domain = page.evaluate("window.__roofline.opChart.view.scale('shape').domain()")
    assert set(domain) == {f for _, f, _ in shown}
    # The program's FLOP-mix roof: the Total's peak_flop_rate, drawn, and in the table.
    total = next(r for r in program if r["record_type"] == "total")
    # Drawn on the program chart as its own labelled roof (the op chart draws the ops' roofs).
    pg = page.evaluate("window.__roofline.programGeometry")
    mix = [c for c in pg["computes"] if c["name"] == "program mix"]
    assert mix and abs(mix[0]["value"] / total["peak_flop_rate"] - 1) < 1e-12
    assert any(label["text"].startswith("program mix ") for label in pg["labels"])
    cell = page.locator("#program-table tbody tr").first.locator("td[data-key=peak_flop_rate]")
    # at most two decimals, trailing zeros dropped (static/columns.js fmtNum)
    want = ("%.2f" % (total["peak_flop_rate"] / 1e3)).rstrip("0").rstrip(".")
    assert cell.inner_text() == want + " TFLOP/s"
    assert total["peak_flop_rate"] not in [
        c["peak_gflops"] for c in tb_testdata.api("device", run=A100)[1]["device"]["compute"]
    ]  # a real mix, not one ceiling
    # Records without a FLOP rate sit in the box at the bottom left, each at its own place
    # (hoverable), not spread along the intensity axis.
    geometry = page.evaluate("window.__roofline.geometry")
    strip = page.evaluate(
        "window.__roofline.data.ops.filter(r => r.at_floor).map(r => [r.px, r.py])"
    )
    assert strip and len({(x, y) for x, y in strip}) == len(strip)
    assert all(y <= geometry["stripTop"] for _, y in strip)
    lo, hi = geometry["xDomain"]
    assert all(x <= lo * (hi / lo) ** 0.3 for x, _ in strip)
    # GPU run: no TPU-only columns or facts.
    headers = page.evaluate("window.__roofline.opTable.allColumns.map((c) => c.key)")
    assert "dma_stall_percent" not in headers and "include_infeed_outfeed" not in headers
    assert headers.index("caveat") < headers.index("category")  # actionable columns first
    assert page.locator("#device-panel tr[data-field=megacore]").count() == 0
    # No infeed/outfeed ops: the switch is there (as in XProf), disabled, and says why.
    assert page.locator("#infeed-toggle").is_disabled()
    assert page.locator("#infeed-note").is_visible()
    # Coverage stated next to the device, with a warning below 50%.
    cov = page.locator("#cost-coverage")
    assert abs(float(cov.get_attribute("data-flops")) - total["flop_coverage"]) < 1e-12
    want = "warning" if total["flop_coverage"] < 0.5 else "muted"
    assert want in cov.get_attribute("class").split()
    # The top opportunities leave caveated ops out.
    # Compact: the top 3 shown, up to 10 behind "more".
    assert page.locator("#top-ops-box > ol > li").count() == 3
    top = page.locator("#top-ops li")
    measured = sorted(
        (
            r
            for r in ops
            if r["potential_time_saved_us"] is not None
            and r["potential_time_saved_us"] > 0
            and not r["caveat"]
        ),
        key=lambda r: -r["potential_time_saved_us"],
    )
    shown = [int(top.nth(i).get_attribute("data-rank")) for i in range(top.count())]
    assert shown == [r["rank"] for r in measured[:10]]
    # ... in the server's order (model/records/rankings.py), which the tab reads rather than makes
    ranked = sorted(
        (r for r in ops if r["opportunity_rank"] is not None), key=lambda r: r["opportunity_rank"]
    )
    assert shown == [r["rank"] for r in ranked[:10]]
    shot(page, "trust_a100")


def test_caveat_tooltip_and_cell_say_why(page, tb_testdata):
    open_frame(page, tb_testdata, run=V6E)
    ops = _rows(tb_testdata.api("ops", run=V6E)[1])
    wait_rows = [r for r in ops if r["caveat"] == "async_wait"]
    assert wait_rows and all(r["potential_time_saved_us"] is None for r in wait_rows)
    page.fill("#name-filter", "copy-done")
    wait_js(
        page,
        "window.__roofline.filtered.length === "
        + str(sum("copy-done" in r["operation"] for r in ops)),
    )
    cell = page.locator("#op-table td[data-key=caveat]").first
    assert cell.inner_text() == "async_wait" and "waiting" in cell.get_attribute("title")
    # Hovering the point shows the reason in the compact tooltip.
    page.locator("#op-chart").scroll_into_view_if_needed()
    point = page.evaluate("""(() => {
      const view = window.__roofline.opChart.view;
      const d = window.__roofline.filtered[0];
      const [ox, oy] = [view.origin()[0] + view.padding().left,
        view.origin()[1] + view.padding().top];
      const box = view.container().querySelector('canvas').getBoundingClientRect();
      return {x: box.left + ox + view.scale('x')(d.px), y: box.top + oy + view.scale('y')(d.py)};
    })()""")
    hovered = None
    for dx, dy in [(0, 0)] + [
        (dx, dy) for r in (3, 6, 9) for dx in (-r, 0, r) for dy in (-r, 0, r) if dx or dy
    ]:  # a small diamond: search
        page.mouse.move(point["x"] + dx, point["y"] + dy)
        hovered = page.evaluate("window.__roofline.tooltip.current")
        if hovered:
            break
    assert hovered and "copy-done" in hovered["operation"]
    page.locator("#chart-tooltip").wait_for(state="visible")
    note = page.locator("#chart-tooltip .tooltip-note")
    assert note.get_attribute("data-caveat") == "async_wait"
    # A filter that keeps nothing says so instead of drawing empty axes.
    page.fill("#name-filter", "no op has this name")
    wait_js(page, "!document.querySelector('#no-match').hidden")
    assert page.locator("#category-chart").is_hidden()
    shot(page, "trust_no_match")


def test_kernel_view_says_kernels_and_exports_say_what_they_show(page, tb_testdata):
    open_frame(page, tb_testdata, run=A100, view="kernel")
    wait_js(page, READY)
    assert "kernels" in page.locator("#op-status").inner_text()
    with page.expect_download() as info:
        page.click("#op-export-svg")
    with open(info.value.path(), encoding="utf-8") as f:
        svg = f.read()
    device = tb_testdata.api("device", run=A100)[1]["device"]["type"]
    assert "Kernel-level roofline" in svg and A100 in svg and device in svg
    assert "all hosts" in svg
