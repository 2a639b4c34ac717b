"""The answer cap (TB_ROOFLINE_MAX_ANSWER_MB): an `/ops` or `/program` answer longer than the cap
holds the first rows that fit and says so; pages with `offset` give every row exactly once."""

from __future__ import annotations

import gzip
import json

import pytest
from werkzeug.test import Client

from tb_roofline import settings
from tb_roofline.model.records import record_table
from tb_roofline.serve.service import answers
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.web.plugin import RooflinePlugin
from tb_roofline.synthetic import SynthConfig, write_tpu_session

RUN = "2026_01_01_00_00_00"
DISTINCT = 3000
CAP_MB = 0.25  # the whole op answer is ~2 MB: about 8 pages


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cap")
    # Every op once per step, each a distinct name: one row per op.
    write_tpu_session(
        str(root),
        "",
        RUN,
        [
            SynthConfig(
                seed=3,
                num_steps=1,
                num_cores=1,
                distinct_ops=DISTINCT,
                ops_per_step=DISTINCT,
                op_order="cycle",
                with_sparse_core=False,
            )
        ],
    )
    return root


@pytest.fixture
def service(logdir, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    return RooflineService(str(logdir))


def _dumps(value) -> bytes:
    return json.dumps(value, allow_nan=False, separators=(",", ":")).encode()


def _pages(service, kind, **params):
    """Every page of an encoded answer, following next_offset."""
    out, offset = [], 0
    while True:
        body, _ = service.encoded(kind, RUN, "", False, offset=offset, **params)
        answer = json.loads(body)
        out.append((body, answer))
        if answer["next_offset"] is None:
            return out
        assert answer["next_offset"] == offset + answer["returned_count"] > offset
        offset = answer["next_offset"]


def test_a_long_ops_answer_is_cut_to_the_cap_and_pages_give_every_row_once(service, monkeypatch):
    full = service.ops(RUN, "", True)  # the whole answer (CLI, exports): no cap
    assert full["total_count"] >= DISTINCT and full["capped_by"] is None
    assert len(_dumps(full)) > 4 * CAP_MB * 2**20  # the profile is large enough to cut
    monkeypatch.setenv(settings.MAX_ANSWER_MB.name, str(CAP_MB))
    cap = int(CAP_MB * 2**20)
    made = []  # rows turned into Python lists: never the whole table for one page
    real_rows = record_table.RecordTable.rows

    def counting(table):
        made.append(len(table))
        return real_rows(table)

    monkeypatch.setattr(record_table.RecordTable, "rows", counting)
    pages = _pages(service, "ops", include_infeed_outfeed=True)
    assert len(pages) >= 4
    rows = []
    for i, (body, answer) in enumerate(pages):
        assert len(body) <= cap
        assert answer["total_count"] == full["total_count"]
        assert answer["returned_count"] == len(answer["rows"]) > 0
        assert answer["offset"] == len(rows)
        last = i == len(pages) - 1
        assert answer["capped_by"] == (None if last else "TB_ROOFLINE_MAX_ANSWER_MB")
        if not last:  # the cut is tight: the next row would not have fit
            assert answer["max_answer_mb"] == CAP_MB
            following = full["rows"][answer["next_offset"]]
            assert len(body) + len(_dumps(following)) + 1 > cap
        rows.extend(answer["rows"])
    assert rows == full["rows"]  # in order, none lost, none twice
    keys = {
        (
            r[full["columns"].index("program_id")],
            r[full["columns"].index("operation")],
            r[full["columns"].index("precision")],
        )
        for r in rows
    }
    assert len(keys) == len(rows)
    # Each page encoded at most a chunk beyond its own rows.
    assert sum(made) <= len(rows) + len(pages) * answers.CHUNK_ROWS


def test_the_cap_keeps_filters_and_limits_and_an_answer_under_it_is_whole(service, monkeypatch):
    monkeypatch.setenv(settings.MAX_ANSWER_MB.name, str(CAP_MB))
    full = service.ops(RUN, "", True, name="fusion")
    assert 0 < full["total_count"] < DISTINCT
    pages = _pages(service, "ops", include_infeed_outfeed=True, name="fusion")
    assert [r for _, a in pages for r in a["rows"]] == full["rows"]
    # A page asked with a limit under the cap: whole, with where the next one starts.
    body, _ = service.encoded(
        "ops", RUN, "", False, include_infeed_outfeed=True, offset=10, limit=25
    )
    answer = json.loads(body)
    assert answer["capped_by"] is None and "max_answer_mb" not in answer
    assert answer["returned_count"] == 25 and answer["next_offset"] == 35
    assert answer["rows"] == service.ops(RUN, "", True)["rows"][10:35]
    # No cap hit at all (the default, 32 MB): the answer is the one the CLI gets.
    monkeypatch.delenv(settings.MAX_ANSWER_MB.name)
    body, _ = service.encoded("ops", RUN, "", False, include_infeed_outfeed=True)
    whole = json.loads(body)
    assert whole == service.ops(RUN, "", True) and whole["next_offset"] is None


def test_the_program_answer_is_capped_and_paged_too(service, monkeypatch):
    full = service.program(RUN, "", True)
    monkeypatch.setenv(settings.MAX_ANSWER_MB.name, "0.001")  # 1 KB: fewer rows than it has
    pages = _pages(service, "program", include_infeed_outfeed=True)
    assert len(pages) > 1 and pages[0][1]["capped_by"] == "TB_ROOFLINE_MAX_ANSWER_MB"
    assert [r for _, a in pages for r in a["rows"]] == full["rows"]
    assert all(a["total_count"] == len(full["rows"]) for _, a in pages)


def test_a_bad_cap_setting_uses_the_default(monkeypatch, caplog):
    for bad in ("0", "-3", "inf", "lots"):
        monkeypatch.setenv(settings.MAX_ANSWER_MB.name, bad)
        assert settings.number(settings.MAX_ANSWER_MB) == 32
    monkeypatch.setenv(settings.MAX_ANSWER_MB.name, "0.5")
    assert settings.mb(settings.MAX_ANSWER_MB) == 1 << 19


def test_the_http_routes_serve_capped_pages(logdir, monkeypatch):
    from tensorboard.plugins import base_plugin

    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    monkeypatch.setenv(settings.MAX_ANSWER_MB.name, str(CAP_MB))
    plugin = RooflinePlugin(base_plugin.TBContext(logdir=str(logdir)))
    client = Client(plugin.get_plugin_apps()["/ops"])
    first = client.get(f"/ops?run={RUN}", headers={"Accept-Encoding": "gzip"})
    assert first.status_code == 200 and first.headers["Content-Encoding"] == "gzip"
    body = gzip.decompress(first.data)
    assert len(body) <= CAP_MB * 2**20
    answer = json.loads(body)
    assert answer["capped_by"] == "TB_ROOFLINE_MAX_ANSWER_MB" and answer["next_offset"] > 0
    nxt = json.loads(client.get(f"/ops?run={RUN}&offset={answer['next_offset']}").data)
    assert nxt["offset"] == answer["next_offset"] and nxt["rows"][0] != answer["rows"][-1]
    whole = RooflineService(str(logdir)).ops(RUN, "", True)["rows"]
    assert answer["rows"] + nxt["rows"] == whole[: len(answer["rows"]) + len(nxt["rows"])]
    program = Client(plugin.get_plugin_apps()["/program"])
    paged = json.loads(program.get(f"/program?run={RUN}&offset=1&limit=2").data)
    assert paged["offset"] == 1 and paged["returned_count"] == 2
    bad = program.get(f"/program?run={RUN}&limit=-1")
    assert bad.status_code == 400 and json.loads(bad.data)["error"]["code"] == "invalid_argument"


def test_exports_give_every_row_whatever_the_cap(service, monkeypatch):
    from tb_roofline.serve.service.export import to_csv

    full = service.ops(RUN, "", True)
    monkeypatch.setenv(settings.MAX_ANSWER_MB.name, "0.01")
    chunks, ctype, _ = service.export_stream(RUN, "", True, level="op", fmt="csv")
    pieces = list(chunks)
    assert ctype.startswith("text/csv") and len(pieces) >= 3  # header, then page by page
    assert "".join(pieces) == to_csv(full["columns"], full["rows"])
    text, _, _ = service.export(RUN, "", True, level="op", fmt="json")
    assert [list(r.values()) for r in json.loads(text)] == full["rows"]
    # Through the route: streamed, every row.
    from tensorboard.plugins import base_plugin

    plugin = RooflinePlugin(base_plugin.TBContext(logdir=str(service.logdir)))
    got = Client(plugin.get_plugin_apps()["/export"]).get(f"/export?run={RUN}&format=csv")
    assert got.status_code == 200 and got.is_streamed
    assert got.get_data(as_text=True).count("\n") == full["total_count"] + 1


def test_the_html_report_of_a_capped_answer_offers_no_next_page(service, monkeypatch):
    from tb_roofline.serve.web import html_report

    monkeypatch.setenv(settings.MAX_ANSWER_MB.name, str(CAP_MB))
    page = html_report.single_report(service, [RUN])
    _, doc = html_report.unpack(page, "roofline-data")["answers"][
        f"ops?host=*&infeed_outfeed=include&run={RUN}"
    ]
    total = service.ops(RUN, "")["total_count"]
    assert doc["next_offset"] is None and doc["capped_by"] is None
    assert 0 < doc["returned_count"] == len(doc["rows"]) < total == doc["capped_from"]
    assert f'data-capped="{len(doc["rows"])}/{total}"' in page


def test_mcp_tools_that_sort_or_count_every_row_see_them_all(service, monkeypatch):
    from tb_roofline.serve.mcp import op_tools

    full = service.ops(RUN, "", True)
    monkeypatch.setenv(settings.MAX_ANSWER_MB.name, "0.01")
    rank = full["columns"].index("opportunity_rank")
    ranked = [r for r in full["rows"] if r[rank] is not None]  # the model's ranking's ops
    for order, count in (("self_time", full["total_count"]), ("time_saved", len(ranked))):
        got = op_tools.top_ops(service, RUN, order=order, limit=3)  # paged by the API
        assert got["total_count"] == count and len(got["ops"]) == 3
    saved = full["columns"].index("potential_time_saved_us")
    best = max(r[saved] for r in ranked)
    got = op_tools.top_ops(service, RUN, order="time_saved", limit=1)
    assert got["ops"][0]["potential_time_saved_us"] == pytest.approx(best, rel=1e-6)
