"""The top opportunities are ranked once (model/records/rankings.py): the HTTP answer the tab
reads, the CLI report (text and JSON) and MCP `top_ops order=time_saved` list the same ops in the
same
order, and host transfers (whose saving is won on the host link) are in none of them."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
from tensorboard.plugins import base_plugin
from testpaths import TESTS
from werkzeug.test import Client
from werkzeug.wrappers import Response

from tb_roofline.model.records import rankings
from tb_roofline.serve.cli import main as cli
from tb_roofline.serve.mcp import op_tools
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.web.plugin import RooflinePlugin

REPO = os.path.dirname(TESTS)
KINETO = os.path.join(REPO, "testdata", "kineto")
RUN = "a100_80gb_shapes"  # a PyTorch trace with host copies under a known PCIe link speed


def test_the_rule_and_the_order_on_hand_made_records():
    nan = float("nan")
    cols = {
        "potential_time_saved_us": np.array([5.0, nan, 9.0, 0.0, 7.0, 9.0, 3.0]),
        "caveat": np.array(
            ["", "", "", "container", "host_transfer", "", "above_roof"], dtype=object
        ),
    }
    assert rankings.opportunity_mask(cols).tolist() == [
        True,
        False,
        True,
        False,
        False,
        True,
        False,
    ]
    # largest saving first; the tie (rows 2 and 5, 9 us each) keeps the table's order
    assert rankings.opportunity_order(cols).tolist() == [2, 5, 0]
    ranks = rankings.opportunity_ranks(cols)
    assert ranks[[2, 5, 0]].tolist() == [1.0, 2.0, 3.0]
    assert np.isnan(ranks[[1, 3, 4, 6]]).all()


@pytest.fixture(scope="module")
def http_ops():
    apps = RooflinePlugin(base_plugin.TBContext(logdir=KINETO)).get_plugin_apps()
    r = Client(apps["/ops"], Response).get("/ops", query_string={"run": RUN})
    assert r.status_code == 200
    answer = json.loads(r.data)
    return [dict(zip(answer["columns"], row)) for row in answer["rows"]]


def _by_hand(rows) -> list:
    """The rule written out on the answer's rows: a saving above 0, no caveat, largest first."""
    kept = [
        r
        for r in rows
        if r["potential_time_saved_us"] is not None
        and r["potential_time_saved_us"] > 0
        and r["caveat"] is None
    ]
    return [r["rank"] for r in sorted(kept, key=lambda r: -r["potential_time_saved_us"])]


def _cli_text_ranks(top: int) -> list:
    out = io.StringIO()
    assert (
        cli.main(["report", KINETO, "--run", RUN, "--top", str(top), "--no-progress"], out=out) == 0
    )
    lines = out.getvalue().split("\nTop opportunities: ", 1)[1].splitlines()
    assert lines[2].startswith("----")
    ranks = []
    for line in lines[3:]:
        if not line.strip():
            break
        ranks.append(int(line.split()[0]))
    return ranks


def test_every_consumer_lists_the_same_ops_in_the_same_order(http_ops):
    assert len({r["rank"] for r in http_ops}) == len(http_ops)  # `rank` names a record
    ranked = sorted(
        (r for r in http_ops if r["opportunity_rank"] is not None),
        key=lambda r: r["opportunity_rank"],
    )
    want = [r["rank"] for r in ranked]
    assert [r["opportunity_rank"] for r in ranked] == list(range(1, len(ranked) + 1))
    assert want == _by_hand(http_ops) and len(want) > 20
    # a host copy with a measured saving (under the known link speed) is not ranked
    host = [
        r
        for r in http_ops
        if r["caveat"] == "host_transfer" and (r["potential_time_saved_us"] or 0) > 0
    ]
    assert host and all(r["opportunity_rank"] is None for r in host)

    top = 20
    assert _cli_text_ranks(top) == want[:top]
    out = io.StringIO()
    assert (
        cli.main(
            [
                "report",
                KINETO,
                "--run",
                RUN,
                "--format",
                "json",
                "--top",
                str(top),
                "--no-progress",
            ],
            out=out,
        )
        == 0
    )
    report = json.loads(out.getvalue())
    assert [r["rank"] for r in report["top_ops"]] == want[:top]
    assert report["opportunity_count"] == len(want) < report["op_count"] == len(http_ops)
    mcp = op_tools.top_ops(
        RooflineService(KINETO),
        RUN,
        order="time_saved",
        limit=1000,
        columns=["rank", "opportunity_rank"],
    )
    assert [r["rank"] for r in mcp["ops"]] == want and mcp["total_count"] == len(want)


def test_a_filtered_subset_keeps_its_own_order(http_ops):
    """The tab ranks the shown ops by `opportunity_rank`: for any filter that is the ranking
    of the kept ops alone (the rule applied to them)."""
    for category in {r["category"] for r in http_ops}:
        kept = [r for r in http_ops if r["category"] == category]
        shown = sorted(
            (r for r in kept if r["opportunity_rank"] is not None),
            key=lambda r: r["opportunity_rank"],
        )
        assert [r["rank"] for r in shown] == _by_hand(kept)
