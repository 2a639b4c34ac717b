"""`tb-roofline serve`'s app without a browser: the plugin's route table and answers, the
page at `/`, and the Host/Origin checks (the MCP server's rules). In Chromium:
tests/e2e/test_e2e_standalone.py."""

from __future__ import annotations

import os

import pytest
from tensorboard.plugins import base_plugin
from testpaths import TESTS
from werkzeug.test import Client

from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.web.plugin import RooflinePlugin
from tb_roofline.serve.web.standalone import HeaderGuard, StandaloneApp

REPO = os.path.dirname(TESTS)
DEMO = os.path.join(REPO, "testdata", "demo")


@pytest.fixture(scope="module")
def app():
    return StandaloneApp(RooflineService(DEMO))


def test_the_plugin_and_the_server_mount_one_route_table(app):
    plugin = RooflinePlugin(base_plugin.TBContext(logdir=DEMO)).get_plugin_apps()
    assert set(app.routes) == set(plugin)
    assert all(type(app.routes[k]) is type(plugin[k]) for k in plugin)
    client, tb = Client(app), Client(plugin["/ops"])
    run = client.get("/runs").get_json()["runs"][0]["run"]
    for params in (
        {"run": run},
        {"run": run, "category": "convolution fusion"},
        {"run": run, "infeed_outfeed": "exclude"},
    ):
        mine = client.get("/ops", query_string=params)
        theirs = tb.get("/ops", query_string=params)
        assert mine.status_code == theirs.status_code == 200
        assert mine.get_data() == theirs.get_data()
    bad = client.get("/ops", query_string={"run": "nope"})
    assert bad.status_code == 404 and "unknown run 'nope'" in bad.get_json()["error"]["message"]


def test_root_page_loads_the_tab_under_a_strict_csp(app):
    client = Client(app)
    page = client.get("/", headers={"Host": "127.0.0.1:6007"})
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert b'src="static/standalone.js"' in page.get_data()
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-eval" not in csp
    js = client.get("/static/standalone.js")
    assert js.status_code == 200 and b"from '../index.js'" in js.get_data()
    assert client.get("/index.js").status_code == 200
    assert client.get("/static/../routes.py").status_code == 404
    missing = client.get("/nothing")
    assert missing.status_code == 404 and missing.get_json()["error"]["code"] == "not_found"
    assert client.post("/runs").status_code == 405


@pytest.mark.parametrize(
    "bind,host,origin,status",
    [
        ("127.0.0.1", "127.0.0.1:6007", None, None),
        ("127.0.0.1", "localhost:6007", "http://localhost:6007", None),
        ("127.0.0.1", "[::1]:6007", None, None),
        ("127.0.0.1", "localhost", None, None),
        ("127.0.0.1", "attacker.example:6007", None, 421),  # DNS rebinding
        ("127.0.0.1", "127.0.0.1.attacker.example:6007", None, 421),
        ("127.0.0.1", "", None, 421),
        ("127.0.0.1", "127.0.0.1:6007", "http://attacker.example", 403),
        ("127.0.0.1", "127.0.0.1:6007", "http://localhost.attacker.example:80", 403),
        ("10.1.2.3", "10.1.2.3:6007", "http://10.1.2.3:6007", None),
        ("10.1.2.3", "other:6007", None, 421),
        ("0.0.0.0", "myhost.corp:6007", "http://myhost.corp:6007", None),  # same origin
        ("0.0.0.0", "myhost.corp:6007", "http://attacker.example", 403),
    ],
)
def test_host_and_origin_checks(bind, host, origin, status):
    from werkzeug.test import EnvironBuilder

    headers = {"Host": host} if host else {}
    if origin:
        headers["Origin"] = origin
    env = EnvironBuilder(path="/runs", headers=headers).get_environ()
    if not host:
        env.pop("HTTP_HOST", None)
    from werkzeug.wrappers import Request

    refused = HeaderGuard(bind).refusal(Request(env))
    assert (refused[0] if refused else None) == status, refused


def test_serve_command_errors_are_one_line(tmp_path):
    import contextlib
    import io
    import socket

    from tb_roofline.serve.cli import main as cli

    def run(*args):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["serve", *args], out=io.StringIO())
        return code, err.getvalue()

    code, err = run(str(tmp_path / "missing"))
    assert code == 2 and "is not a directory" in err
    code, err = run(DEMO, "--port", "70000")
    assert code == 2 and "is not a port" in err
    with socket.socket() as busy:  # a port another server holds
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        code, err = run(DEMO, "--port", str(busy.getsockname()[1]))
    assert code == 2 and "cannot listen on 127.0.0.1" in err


def test_precision_and_caveat_filters_are_the_apis_rule_everywhere(app):
    """`precision` and `caveat` filter `/ops` and `/export` as the other filters do (one rule:
    serve/service/answers.py `filter_mask`; `none` keeps the rows without one), and the
    facets list the values there are."""
    import csv
    import io

    client = Client(app)
    run = [r["run"] for r in client.get("/runs").get_json()["runs"] if "v6e" in r["run"]][0]
    everything = client.get("/ops", query_string={"run": run}).get_json()
    cols = everything["columns"]
    p, c = cols.index("precision"), cols.index("caveat")
    facets = everything["facets"]
    assert facets["caveat"] and "none" in facets["caveat"] and facets["precision"]
    caveats = [v for v in facets["caveat"] if v != "none"]
    for params, keep in (
        ({"caveat": caveats[0]}, lambda r: r[c] == caveats[0]),
        ({"caveat": "none"}, lambda r: not r[c]),
        ({"caveat": f"none,{caveats[0]}"}, lambda r: not r[c] or r[c] == caveats[0]),
        (
            {"precision": facets["precision"][0], "caveat": "none"},
            lambda r: (r[p] or "none") == facets["precision"][0] and not r[c],
        ),
    ):
        want = [r for r in everything["rows"] if keep(r)]
        assert 0 < len(want) < len(everything["rows"]), params
        got = client.get("/ops", query_string={"run": run, **params}).get_json()
        assert got["rows"] == want and got["total_count"] == len(want), params
        assert got["unfiltered_count"] == len(everything["rows"])
        exported = client.get("/export", query_string={"run": run, "format": "csv", **params})
        table = list(csv.DictReader(io.StringIO(exported.get_data(as_text=True))))
        assert [t["operation"] for t in table] == [r[cols.index("operation")] for r in want]
    direct = RooflineService(DEMO).ops(
        run, "", precisions=[facets["precision"][0]], caveats=["none"]
    )
    assert (
        direct["rows"]
        == client.get(
            "/ops", query_string={"run": run, "precision": facets["precision"][0], "caveat": "none"}
        ).get_json()["rows"]
    )
