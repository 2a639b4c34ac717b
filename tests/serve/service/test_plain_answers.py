"""Answers are made once, as plain Python, by the service: the HTTP routes encode them
(`RooflineService.encoded`), the CLI and the MCP tools read them as they are (never a JSON body
decoded again), and the comparison and the report are plain functions of the analyses the
service hands them (serve/service/compare.py, serve/service/report.py)."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import os

import pytest
from testpaths import TESTS

from tb_roofline.model.records import roofline, row_grouping
from tb_roofline.serve.mcp import op_tools, shaping
from tb_roofline.serve.mcp import tools as mcp_tools
from tb_roofline.serve.service import answers
from tb_roofline.serve.service import compare as compare_api
from tb_roofline.serve.service import report as report_api
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
PACKAGE = os.path.join(REPO, "tb_roofline")
DEMO = os.path.join(REPO, "testdata", "demo")
TORCH = os.path.join(REPO, "testdata", "compare", "torch_cpu")
PLAIN = (dict, list, str, int, float, bool, type(None))


@pytest.fixture(scope="module")
def demo():
    service = RooflineService(DEMO)
    return service, [r["run"] for r in service.list_runs()["runs"]]


@pytest.fixture(scope="module")
def torch():
    service = RooflineService(TORCH)
    return service, [r["run"] for r in service.list_runs()["runs"]]


def _plain(value, where="answer"):
    """Only JSON's own types, exactly (no numpy scalar, no tuple): what json.loads gives."""
    assert type(value) in PLAIN, (where, type(value))
    if isinstance(value, dict):
        for k, v in value.items():
            assert type(k) is str, (where, k)
            _plain(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _plain(v, f"{where}[{i}]")


CASES = (
    ("device", {}),
    ("diagnostics", {}),
    ("comm", {"include_infeed_outfeed": True}),
    ("program", {"include_infeed_outfeed": False}),
    ("ops", {"include_infeed_outfeed": True}),
    ("ops", {"include_infeed_outfeed": True, "offset": 2, "limit": 3, "name": "o"}),
)


@pytest.mark.parametrize("fixture", ["demo", "torch"])
def test_the_plain_answer_is_what_the_route_encodes(fixture, request):
    service, runs = request.getfixturevalue(fixture)
    for run in runs[:2]:
        for kind, params in CASES:
            plain = service.answer(kind, run, "", capped=True, **params)
            _plain(plain)
            body, zipped = service.encoded(kind, run, "", False, **params)
            assert not zipped
            assert json.loads(body) == plain, (run, kind, params)


def test_rows_grouped_by_shapes_carry_their_column(torch):
    service, runs = torch
    a = service.analysis(runs[0], "")
    assert "shapes" in row_grouping.available_rows(a)
    got = service.answer("ops", runs[0], "", rows="shapes")
    grouped = row_grouping.grouped_records(a, True, "shapes")
    want = list(roofline.RECORD_COLUMNS) + list(answers.OPS_DERIVED) + ["shapes"]
    assert got["columns"] == want and got["rows_grouping"] == "shapes"
    assert len(got["rows"]) == len(grouped) and got["row_groupings"][:2] == ["op", "shapes"]
    shapes = got["columns"].index("shapes")
    assert sorted(r[shapes] for r in got["rows"]) == sorted(grouped.columns["shapes"].tolist())


def test_mcp_answers_are_the_service_answers_shaped(demo):
    service, runs = demo
    run = runs[0]
    assert mcp_tools.get_device(service, run, significant_digits=0)["device"] == shaping.shape(
        service.device(run, "")["device"], 0
    )
    prog = service.program(run, "")
    got = mcp_tools.get_program(
        service, run, limit=1000, columns=prog["columns"], significant_digits=0
    )
    assert got["records"] == [shaping.shape(dict(zip(prog["columns"], r)), 0) for r in prog["rows"]]
    ops = service.ops(run, "", offset=0, limit=10)
    got = op_tools.top_ops(service, run, columns=ops["columns"], significant_digits=0)
    assert got["ops"] == [shaping.shape(dict(zip(ops["columns"], r)), 0) for r in ops["rows"]]
    assert got["total_count"] == ops["total_count"] and got["facets"] == ops["facets"]
    want = service.ops(run, "")
    rank = want["columns"].index("opportunity_rank")
    ranked = sorted((r for r in want["rows"] if r[rank] is not None), key=lambda r: r[rank])
    got = op_tools.top_ops(
        service, run, order="time_saved", limit=1000, columns=["rank"], significant_digits=0
    )
    assert [o["rank"] for o in got["ops"]] == [r[want["columns"].index("rank")] for r in ranked]


class _Counted:
    """A real wrapper: calls the function it wraps and counts the calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


@pytest.fixture
def decodes(monkeypatch):
    """Counts of every JSON decode and every encoded answer the service makes meanwhile."""
    counted = {
        "json.loads": _Counted(json.loads),
        "json.load": _Counted(json.load),
        "encoded": _Counted(RooflineService.encoded),
        "encoded_guidance": _Counted(RooflineService.encoded_guidance),
    }
    monkeypatch.setattr(json, "loads", counted["json.loads"])
    monkeypatch.setattr(json, "load", counted["json.load"])
    monkeypatch.setattr(RooflineService, "encoded", counted["encoded"])
    monkeypatch.setattr(RooflineService, "encoded_guidance", counted["encoded_guidance"])
    return counted


def test_mcp_and_the_cli_never_decode_what_the_service_encoded(demo, decodes):
    """Every MCP tool and CLI report reads the service's plain answers: no answer is encoded
    and none decoded while they run (each still answers)."""
    import contextlib
    import io

    from tb_roofline.serve.cli import main as cli

    service, runs = demo
    run = runs[0]
    assert mcp_tools.get_summary(service, run)["run"] == run
    assert mcp_tools.get_guidance(service, run)["findings"] is not None
    assert mcp_tools.get_program(service, run)["records"]
    assert mcp_tools.get_diagnostics(service, run) is not None
    assert mcp_tools.get_comm(service, run) is not None
    top = op_tools.top_ops(service, run)["ops"]
    assert top and op_tools.get_op(service, run, top[0]["operation"])["records"]
    assert op_tools.compare(service, runs[1], run)["pairs"]
    assert mcp_tools.get_device(service, run)["device"]
    assert mcp_tools.list_hosts(service, run)["hosts"]
    assert mcp_tools.list_runs(service)["runs"]
    env = {"TB_ROOFLINE_CACHE_DIR": "off"}  # a profile read back from disk is no answer
    for args in (
        ["report", DEMO, "--run", run],
        ["report", DEMO, "--run", run, "--format", "json"],
    ):
        out = io.StringIO()
        with _environ(env), contextlib.redirect_stderr(io.StringIO()):
            assert cli.main(args, out=out) == 0, args
        assert out.getvalue()
    assert {k: c.calls for k, c in decodes.items()} == dict.fromkeys(decodes, 0)


@contextlib.contextmanager
def _environ(values: dict):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_compare_and_report_are_functions_of_analyses(torch):
    """Neither module takes the service: the service looks the sides up and hands them in."""
    for module in (compare_api, report_api):
        tree = ast.parse(open(module.__file__, encoding="utf-8").read())
        names = {
            a.arg
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef)
            for a in node.args.args + node.args.kwonlyargs
        }
        assert not names & {"service", "base_service"}, module.__name__
    service, runs = torch
    base, cand = runs[1], runs[0]
    cmp, base_info, cand_info = compare_api.comparison(
        compare_api.SideInput(base, "", "kineto", service.analysis(base, "")),
        compare_api.SideInput(cand, "", "kineto", service.analysis(cand, "")),
    )
    got = compare_api.compare_answer(cmp, base_info, cand_info, "op")
    assert got == service.compare(base, cand)
    a = service.analysis(cand, "")
    files = service.resolve_files(service.resolve_run(cand), "")
    report = report_api.full_report(a, service.guidance(cand, ""), cand, "", True, 20, files)
    assert json.dumps(report, sort_keys=True) == json.dumps(
        service.report(cand, ""), sort_keys=True
    )


def _numbers(value, out: list) -> list:
    """Every int and float in a nested answer or record (booleans are not numbers here)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        for v in value.values():
            _numbers(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _numbers(v, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(value)
    return out


# Runs with findings of many rules, and an H200 block whose findings are grouped.
GUIDANCE_RUNS = (
    os.path.join(REPO, "testdata", "guidance", "torch"),
    os.path.join(REPO, "testdata", "kineto", "h200_block"),
)


def test_the_model_gives_guidance_records_and_the_service_lays_them_out():
    """The model returns a record, never an answer; every number of the `/guidance` answer is
    one of the record's (the service computes none), and the answer is the route's."""
    from tb_roofline.model.guidance.findings import Guidance
    from tb_roofline.model.guidance.findings import guidance as model_guidance
    from tb_roofline.serve.service.guidance import guidance_answer

    found = grouped = 0
    for service, run in _runs(GUIDANCE_RUNS):
        record = model_guidance(service.analysis(run, ""))
        assert isinstance(record, Guidance)
        answer = service.guidance(run, "")
        assert json.loads(service.encoded_guidance(run, "")) == answer
        # Throughput depends on how many devices the run's view holds, which the service
        # tells the model; the engine's own figures are a record of their own
        # (model/serving/engine_figures.py) the service sets beside; the rest is the record laid
        # out.
        skip = ("run", "host", "throughput", "engine_figures")
        answer = {k: v for k, v in answer.items() if k not in skip}
        assert {k: v for k, v in guidance_answer(record).items() if k != "throughput"} == answer
        made = _numbers(record, [])
        missing = [x for x in _numbers(answer, []) if x not in made]
        assert not missing, (run, missing[:5])
        found += bool(answer["findings"])
        grouped += bool(answer["groups"])
    assert found and grouped  # findings and groups: their numbers are checked too


def _runs(logdirs):
    for logdir in logdirs:
        service = RooflineService(logdir)
        for entry in service.list_runs()["runs"]:
            yield service, entry["run"]
