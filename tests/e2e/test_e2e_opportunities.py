"""The Opportunities panel on committed profiles: findings as /guidance ranks them,
a link from each finding to its op in the chart and table, the class bar, the throughput line,
collapse and export."""

from __future__ import annotations

import json

from e2e_helpers import open_frame, shot, wait_js

READY = "document.querySelector('#opportunities').dataset.status === 'ready'"


def test_findings_link_to_their_ops(page, tb_testdata):
    run = "guidance/torch/elementwise_chain"
    open_frame(page, tb_testdata, run=run)
    wait_js(page, READY)
    _, g = tb_testdata.api("guidance", run=run)
    items = page.eval_on_selector_all(
        "#opportunities-list > li", "els => els.map(e => [e.dataset.rule, e.dataset.id])"
    )
    assert items == [[f["rule"], f["id"]] for f in g["findings"]] and items
    # The class bar: one part per class with time, widths = the API's percentages.
    parts = page.eval_on_selector_all(
        ".opp-bar-part", "els => els.map(e => [e.dataset.class, +e.dataset.percent])"
    )
    assert parts == [[c["class"], c["percent"]] for c in g["classes"] if c["percent"]]
    # The first op finding's first op: click it, the op is selected in the chart and the table.
    nth = next(i for i, f in enumerate(g["findings"]) if f["ops"]) + 1
    first = g["findings"][nth - 1]["ops"][0]
    _, ops = tb_testdata.api("ops", run=run)
    rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
    rank = next(
        r["rank"]
        for r in rows
        if (r["program_id"], r["operation"], r["precision"])
        == (first["program_id"], first["operation"], first["precision"])
    )
    page.click(f"#opportunities-list > li:nth-child({nth}) .opp-op")
    wait_js(page, f"document.querySelector('#op-selection').dataset.rank === '{rank}'")
    assert page.evaluate(
        "document.querySelector('#op-table tr.selected').dataset.key"
    ) == page.get_attribute("#op-selection", "data-key")
    assert page.evaluate("window.__roofline.opChart.view.data('selected')[0].rank") == rank
    # The throughput line in the program section: steps/s, HFU; MFU needs a workload.
    t = g["throughput"]
    values = page.evaluate("document.querySelector('#throughput-values').dataset.steps")
    assert float(values) == t["steps_per_second"]
    assert "MFU —" in page.inner_text("#program-section #throughput-line")
    shot(page, "opportunities_elementwise_chain")
    # Collapsible, and exportable as JSON (what /guidance answered).
    page.click("#opportunities-details > summary")
    assert not page.evaluate("document.querySelector('#opportunities-details').open")
    page.click("#opportunities-details > summary")
    with page.expect_download() as dl:
        page.click("#opportunities-export-json")
    with open(dl.value.path()) as f:
        exported = json.load(f)
    assert [f["id"] for f in exported["findings"]] == [f["id"] for f in g["findings"]]


def test_mfu_with_a_workload_file(page, tb_testdata):
    run = "guidance/torch/clean_matmul"
    open_frame(page, tb_testdata, run=run)
    wait_js(page, READY)
    _, g = tb_testdata.api("guidance", run=run)
    # A clean matmul loop: only its matmul named as far below its roof (every big
    # op under half its roof is in a finding).
    assert {f["rule"] for f in g["findings"]} <= {"far_below_roof"}
    assert page.eval_on_selector_all("#opportunities-list > li", "els => els.length") == len(
        g["findings"]
    )
    mfu = page.evaluate("document.querySelector('#throughput-values').dataset.mfu")
    assert float(mfu) == g["throughput"]["mfu"] > 0
    assert "MFU " in page.inner_text("#throughput-line")
