"""`tb-roofline html` without a browser: the inlined frontend, the embedded answers (the HTTP
API's, byte for byte as JSON), the op cap, and the command's errors. The report in Chromium:
tests/e2e/test_e2e_html_report.py."""

from __future__ import annotations

import io
import json
import os
import re
import urllib.parse

import pytest
from testpaths import TESTS
from werkzeug.test import Client

from tb_roofline.serve.cli import main as cli
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.web import html_report, report_bundle
from tb_roofline.serve.web.standalone import StandaloneApp

REPO = os.path.dirname(TESTS)
DEMO = os.path.join(REPO, "testdata", "demo")
STATIC = os.path.join(REPO, "tb_roofline", "static")


def embedded(page: str, element_id: str):
    return html_report.unpack(page, element_id)


def test_the_bundle_holds_every_module_dependencies_first():
    bundle = report_bundle.frontend_bundle()
    order = bundle["order"]
    assert bundle["entry"] == order[-1] == "static/app.js"
    position = {p: i for i, p in enumerate(order)}
    for path, (_kind, text) in bundle["files"].items():
        assert "import.meta.url" not in text, path
        assert not report_bundle.SPECIFIER.search(text), path  # every relative import a token
        for dep in re.findall(r"__ROOFLINE_MODULE__\(([^)]+)\)", text):
            assert position[dep] < position[path], (path, dep)
    # Every module of the tab is in (the entry points of the other hosts are not).
    on_disk = set()
    for folder, _, names in os.walk(STATIC):
        for name in names:
            if name.endswith((".js", ".css")):
                on_disk.add(
                    os.path.relpath(os.path.join(folder, name), os.path.dirname(STATIC)).replace(
                        os.sep, "/"
                    )
                )
    hosts = {"static/index.js", "static/standalone.js", "static/report_host.js"}
    assert on_disk - set(order) - hosts == set()
    assert {"static/vendor/vega.min.js", "static/style.css"} <= set(order)


@pytest.fixture(scope="module")
def demo():
    service = RooflineService(DEMO)
    run = service.list_runs()["runs"][-1]["run"]
    return service, run


def test_embedded_answers_are_the_http_api_answers(demo):
    service, run = demo
    page = html_report.single_report(service, [run])
    data = embedded(page, "roofline-data")
    answers = data["answers"]
    # What the tab asks for first (api.js's parameters) is there.
    for key in (
        "runs",
        f"hosts?run={run}",
        f"device?host=*&run={run}",
        f"diagnostics?host=*&run={run}",
        f"program?host=*&infeed_outfeed=include&run={run}",
        f"ops?host=*&infeed_outfeed=exclude&run={run}",
        f"guidance?infeed_outfeed=include&run={run}",
    ):
        assert key in answers, key
    client = Client(StandaloneApp(RooflineService(DEMO)))
    for key, (status, answer) in answers.items():
        if key == "runs":
            listed = answer["runs"]
            assert [r["run"] for r in listed] == [run]
            continue
        route, _, query = key.partition("?")
        resp = client.get(f"/{route}", query_string=dict(urllib.parse.parse_qsl(query)))
        assert (resp.status_code, answer) == (status, resp.get_json()), key
    assert data["hash"] == "run=" + urllib.parse.quote(run, safe="")
    # No URL of any kind to fetch: the CSP forbids requests, the page names none.
    head = page.split("<body>")[0]
    assert "default-src 'none'" in head and "connect-src blob: data:" in head
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_each_answer_is_encoded_once_with_the_page(demo, monkeypatch):
    """The report takes each answer as plain Python and encodes it once, inside the page's
    data: no JSON is decoded, and no answer is encoded whole apart from that one call (the
    service's size cap measures a paged answer's header while its rows are still empty)."""
    given = []  # (object, its rows then) of every json.dumps; kept alive, so ids stay theirs
    decoded = []
    real_dumps, real_loads = json.dumps, json.loads

    def dumps(obj, *args, **kwargs):
        given.append((obj, len(obj["rows"]) if isinstance(obj, dict) and "rows" in obj else None))
        return real_dumps(obj, *args, **kwargs)

    def loads(*args, **kwargs):
        decoded.append(args)
        return real_loads(*args, **kwargs)

    monkeypatch.setattr(json, "dumps", dumps)
    monkeypatch.setattr(json, "loads", loads)
    service, run = demo
    page = html_report.single_report(service, [run])
    monkeypatch.undo()
    assert not decoded
    (data,) = [o for o, _ in given if isinstance(o, dict) and "answers" in o]
    answers = {id(doc): doc for _, doc in data["answers"].values()}
    assert len(answers) > 10 and all(isinstance(doc, dict) for doc in answers.values())
    measured = [rows for o, rows in given if id(o) in answers]
    assert measured and set(measured) == {0}
    assert embedded(page, "roofline-data") == data


def test_op_rows_are_capped_longest_first(demo):
    service, run = demo
    full = service.ops(run, "")
    page = html_report.single_report(service, [run], max_ops=5)
    status, capped = embedded(page, "roofline-data")["answers"][
        f"ops?host=*&infeed_outfeed=include&run={run}"
    ]
    col = full["columns"].index("total_self_time_us")
    longest = sorted((r[col] for r in full["rows"]), reverse=True)[:5]
    assert sorted((r[col] for r in capped["rows"]), reverse=True) == longest
    assert capped["total_count"] == 5 and capped["capped_from"] == len(full["rows"]) > 5
    assert f'data-capped="5/{len(full["rows"])}"' in page


def run_cli(*args):
    import contextlib

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(list(args), out=io.StringIO())
    return code, err.getvalue()


def test_html_command_errors_are_one_line(tmp_path):
    code, err = run_cli(
        "html", DEMO, "--run", "nope", "-o", str(tmp_path / "r.html"), "--no-progress"
    )
    assert code == 2 and "unknown run 'nope'" in err
    code, err = run_cli("html", DEMO, "--max-ops", "0", "-o", str(tmp_path / "r.html"))
    assert code == 2 and "--max-ops" in err
    code, err = run_cli(
        "html", DEMO, "-o", str(tmp_path / "no" / "dir" / "r.html"), "--no-progress"
    )
    assert code == 2 and "cannot write" in err
    code, err = run_cli("html", str(tmp_path / "missing"), "-o", str(tmp_path / "r.html"))
    assert code == 2 and "not a directory" in err
    broken = tmp_path / "broken" / "b" / "plugins" / "profile" / "2020_01_01_00_00_00"
    broken.mkdir(parents=True)
    (broken / "h.xplane.pb").write_bytes(bytes((i * 7919 + 13) % 251 for i in range(6000)))
    os.utime(broken / "h.xplane.pb", (1e9, 1e9))  # old: not a file still being written
    code, err = run_cli(
        "html", str(tmp_path / "broken"), "-o", str(tmp_path / "b.html"), "--no-progress"
    )
    assert code == 1 and "not a valid XSpace" in err and not (tmp_path / "b.html").exists()
    code, err = run_cli("html", DEMO, "-o", str(tmp_path / "r.html"), "--no-progress")
    assert code == 0 and os.path.getsize(tmp_path / "r.html") > 500_000


def test_the_readme_states_the_demo_report_size(tmp_path):
    """README: "about X MB for a demo run" is what `tb-roofline html` writes for the newest
    demo run, within a quarter."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        (stated,) = re.findall(r"about ([0-9.]+) MB for a demo run", f.read())
    out = io.StringIO()
    path = str(tmp_path / "report.html")
    assert cli.main(["html", DEMO, "-o", path], out=out) == 0
    size_mb = os.path.getsize(path) / 1e6
    assert abs(size_mb - float(stated)) <= 0.25 * size_mb, (stated, size_mb)
