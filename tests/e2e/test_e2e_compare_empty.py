"""The compare view of two real runs none of whose records can be placed (CUDA-graph replays:
no op has a known cost, so no FLOP rate) shows no empty full-size charts: each chart shrinks to
nothing and a line says why, the tables still list the pairs; a comparison with points keeps
its charts. Read from the Vega views' data sets and the page's boxes."""

from __future__ import annotations

from e2e_helpers import READY, open_frame, shot, wait_js

SECTION = "document.querySelector('#compare-section')"
EMPTY_A, EMPTY_B = "kineto/h200_decode_graph", "kineto/mi300x_vllm_graph_capture"


def _wait(page):
    wait_js(page, READY)
    wait_js(page, f"['ready', 'error'].includes({SECTION}.dataset.status)")
    return page.evaluate(f"{SECTION}.dataset.status")


def _chart(page, which: str) -> dict:
    return page.evaluate(
        f"""(() => {{
      const el = document.querySelector('#compare-{which}-chart');
      const note = document.querySelector('#compare-{which}-empty');
      const chart = window.__rooflineCompare['{which}Chart'];
      const v = chart && chart.view;
      return {{height: el.getBoundingClientRect().height, empty: el.classList.contains(
        'chart-empty'), points: +el.dataset.points, note: note.hidden ? null : note.textContent,
        drawn: v ? v.data('base_points').length + v.data('cand_points').length : null}};
    }})()"""
    )


def test_runs_without_placeable_records_draw_no_empty_charts(page, tb_testdata):
    page.set_viewport_size({"width": 1440, "height": 900})
    for run in (EMPTY_A, EMPTY_B):
        _, ops = tb_testdata.api("ops", run=run)
        rate = ops["columns"].index("flop_rate")
        assert ops["rows"] and not any(r[rate] for r in ops["rows"]), run
    open_frame(page, tb_testdata, run=EMPTY_A, compare=EMPTY_B)
    assert _wait(page) == "ready"
    for which, what in (("program", "record"), ("op", "op")):
        c = _chart(page, which)
        assert c["empty"] and c["points"] == 0 and c["drawn"] == 0, (which, c)
        assert c["height"] == 0, (which, c)
        assert c["note"] and c["note"].startswith(f"No {what} of either run has a FLOP rate"), c
    rows = page.locator("#compare-op-table-wrap tbody tr").count()
    assert rows > 0  # the pairs are still listed
    shot(page, "compare_empty", full_page=False)


def test_a_comparison_with_points_keeps_its_charts(page, tb_testdata):
    page.set_viewport_size({"width": 1440, "height": 900})
    open_frame(
        page,
        tb_testdata,
        run="demo/v4_pod/2026_11_29_11_30_00",
        compare="demo/v6e_train/2026_11_29_10_00_00",
    )
    assert _wait(page) == "ready"
    for which in ("program", "op"):
        c = _chart(page, which)
        assert not c["empty"] and c["points"] > 0 and c["drawn"] > 0, (which, c)
        assert c["height"] > 200 and c["note"] is None, (which, c)


def test_a_change_within_one_call_quotes_no_speedup(page, tb_testdata):
    """Steps 2 and 4 of the real H200 decode trace differ by less than its longest op call:
    the summary gives the change against that call (the API's within_one_call), no speedup."""
    run = "kineto/h200_decode_eager"
    _, answer = tb_testdata.api("compare", base=run, run=run, base_step="2", step="4")
    s = answer["summary"]
    assert s["within_one_call"] is True, s
    open_frame(page, tb_testdata, run=run, compare=run, compare_base_step="2", compare_step="4")
    assert _wait(page) == "ready"
    text = page.locator("#compare-facts tr[data-key=change] td").inner_text()
    assert "within one op call's time" in text and "×" not in text, text  # no "speedup 1.001×"
    assert f"{s['time_change_per_core_us']:.2f} µs" in text, (text, s)
    notes = page.locator("#compare-notes").inner_text()
    assert "no more than the longest single op call" in notes, notes
