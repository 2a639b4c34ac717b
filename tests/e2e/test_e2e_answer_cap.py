"""An `/ops` answer cut at TB_ROOFLINE_MAX_ANSWER_MB: the op section says so, the chart and
the table hold the loaded rows, and "Load more" appends the next page."""

from __future__ import annotations

import json
import os

import pytest
from e2e_helpers import TensorBoard, open_frame, point_count, shot, wait_js

RUN = "2026_02_02_00_00_00"
CAP_MB = "0.2"  # the whole answer is ~0.7 MB: a few pages


@pytest.fixture(scope="module")
def tb_capped(tmp_path_factory):
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    logdir = str(tmp_path_factory.mktemp("capped_logdir"))
    write_tpu_session(
        logdir,
        "",
        RUN,
        [
            SynthConfig(
                seed=5,
                num_steps=1,
                num_cores=1,
                distinct_ops=1000,
                ops_per_step=1000,
                op_order="cycle",
                with_sparse_core=False,
            )
        ],
    )
    saved = os.environ.get("TB_ROOFLINE_MAX_ANSWER_MB")
    os.environ["TB_ROOFLINE_MAX_ANSWER_MB"] = CAP_MB  # the server process inherits it
    try:
        server = TensorBoard(logdir, name="capped")
    finally:
        if saved is None:
            del os.environ["TB_ROOFLINE_MAX_ANSWER_MB"]
        else:
            os.environ["TB_ROOFLINE_MAX_ANSWER_MB"] = saved
    yield server
    server.stop()


def drawn_ops(page) -> list:
    """The operations of the op points in the Vega scenegraph (what the chart drew)."""
    return page.evaluate("""(() => {
      const mark = window.__roofline.opChart.findMark('points');
      return (mark.items || []).filter((i) => i.datum.record_type === 'op')
          .map((i) => i.datum.operation); })()""")


def test_the_capped_answer_is_noted_and_its_rows_are_drawn(page, tb_capped):
    status, first = tb_capped.api("ops", run=RUN)
    assert status == 200 and first["capped_by"] == "TB_ROOFLINE_MAX_ANSWER_MB"
    n, total = first["returned_count"], first["total_count"]
    assert 0 < n < total
    open_frame(page, tb_capped, run=RUN)
    note = page.locator("#op-cap")
    note.scroll_into_view_if_needed()
    text = note.inner_text()
    assert f"Showing the first {n:,} of {total:,} ops by time" in text
    assert "capped at 0.2 MB (TB_ROOFLINE_MAX_ANSWER_MB)" in text
    href = page.locator("#op-cap-export").get_attribute("href")
    assert "/export?" in href and "format=csv" in href
    ops_col = first["columns"].index("operation")
    loaded = [r[ops_col] for r in first["rows"]]
    wait_js(page, f"window.__roofline.opChart.pointCount('ops') === {n}", timeout=60)
    assert point_count(page, "ops") == n
    assert sorted(drawn_ops(page)) == sorted(loaded)
    assert page.evaluate("document.querySelector('#op-status').dataset.total") == str(n)
    shot(note, "answer_cap_note")

    status, second = tb_capped.api("ops", run=RUN, offset=first["next_offset"])
    assert status == 200 and second["offset"] == n
    page.locator("#op-load-more").click()
    more = n + second["returned_count"]
    wait_js(page, f"window.__roofline.opChart.pointCount('ops') === {more}", timeout=60)
    assert sorted(drawn_ops(page)) == sorted(loaded + [r[ops_col] for r in second["rows"]])
    if second["next_offset"] is None:
        assert page.locator("#op-cap").count() == 0
    else:
        wait_js(page, f"document.querySelector('#op-cap').dataset.loaded === '{more}'")


def test_the_infeed_toggle_refetches_a_capped_answer(page, tb_capped):
    status, excluded = tb_capped.api("ops", run=RUN, infeed_outfeed="exclude")
    assert status == 200 and excluded["capped_by"] == "TB_ROOFLINE_MAX_ANSWER_MB"
    open_frame(page, tb_capped, run=RUN)
    page.locator("#op-cap").scroll_into_view_if_needed()
    toggle = page.locator("#infeed-toggle")
    toggle.scroll_into_view_if_needed()
    toggle.uncheck()
    n = excluded["returned_count"]
    ops_col = excluded["columns"].index("operation")
    expected = sorted(r[ops_col] for r in excluded["rows"])
    # The counts alone cannot tell the two answers apart (both may hold n rows): wait for the
    # drawn points to be the excluded answer's.
    wait_js(
        page,
        "document.querySelector('#op-cap') && "
        f"document.querySelector('#op-cap').dataset.loaded === '{n}' && "
        f"window.__roofline.opChart.pointCount('ops') === {n} && "
        "JSON.stringify((window.__roofline.opChart.findMark('points').items || [])"
        ".filter((i) => i.datum.record_type === 'op').map((i) => i.datum.operation).sort()) === "
        f"{json.dumps(json.dumps(expected, separators=(',', ':')))}",
        timeout=60,
    )
    assert sorted(drawn_ops(page)) == expected
