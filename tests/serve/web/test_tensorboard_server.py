"""A real `tensorboard` process serving the plugin: listing, every endpoint, errors as JSON."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.parse

import pytest
from tb_server import get, get_json, tensorboard
from testpaths import TESTS

REPO = os.path.dirname(TESTS)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("logdir")
    shutil.copytree(os.path.join(REPO, "testdata", "demo"), logdir, dirs_exist_ok=True)
    shutil.copytree(os.path.join(REPO, "testdata", "jax_cpu", "mlp"), logdir / "jax_mlp")
    bad = logdir / "broken" / "plugins" / "profile" / "2026_01_01_00_00_00" / "h.xplane.pb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f not an xspace")
    past = time.time() - 60
    os.utime(bad, (past, past))
    with tensorboard(str(logdir)) as base:
        yield base + "/data/plugin/roofline", base, logdir


def q(**params):
    return "?" + urllib.parse.urlencode(params)


def test_plugin_listed_beside_xprof(server):
    api, base, _ = server
    status, listing = get_json(base + "/data/plugins_listing")
    assert status == 200
    assert listing["roofline"]["tab_name"] == "Roofline"
    assert (
        listing["roofline"]["loading_mechanism"]["module_path"] == "/data/plugin/roofline/index.js"
    )
    # is_active answers from a background scan started with the plugin: by the time the page
    # asks, it knows (a user's first page load shows the tab as active).
    assert listing["roofline"]["enabled"]
    pytest.importorskip("xprof")
    assert "profile" in listing  # XProf's plugin, installed in the same environment


def test_every_endpoint_answers(server):
    api, _, _ = server
    status, runs = get_json(api + "/runs")
    assert status == 200
    names = [r["run"] for r in runs["runs"]]
    assert "v4_pod/2026_11_29_11_30_00" in names and "jax_mlp/2026_11_29_16_58_17" in names
    run = "v4_pod/2026_11_29_11_30_00"
    assert get_json(api + "/hosts" + q(run=run))[1]["hosts"] == ["tpu-v4-host0", "tpu-v4-host1"]
    dev = get_json(api + "/device" + q(run=run, host="tpu-v4-host0"))[1]["device"]
    assert dev["type"] == "TPU v4" and dev["has_cmem"]
    status, prog = get_json(api + "/program" + q(run=run))
    assert status == 200 and prog["rows"][0][1] == "Total" and prog["num_steps"] == 5
    status, ops = get_json(api + "/ops" + q(run=run, infeed_outfeed="exclude", bound_by="HBM"))
    assert status == 200 and ops["total_count"] == len(ops["rows"]) > 0
    status, diags = get_json(api + "/diagnostics" + q(run=run))
    assert status == 200 and isinstance(diags["diagnostics"], list)
    status, headers, body = get(api + "/export" + q(run=run, level="op", format="csv"))
    assert status == 200 and "attachment" in headers["Content-Disposition"]
    assert body.decode().splitlines()[0].startswith("record_type,step,rank")
    status, headers, body = get(api + "/index.js")
    assert status == 200 and "javascript" in headers["Content-Type"]


def test_cpu_profile_reports_what_is_missing(server):
    api, _, _ = server
    status, diags = get_json(api + "/diagnostics" + q(run="jax_mlp/2026_11_29_16_58_17"))
    assert status == 200
    codes = {d["code"] for d in diags["diagnostics"]}
    assert {"cost_model", "peaks_unknown"} <= codes  # FLOPs from the HLO; CPU peaks not in it
    status, prog = get_json(api + "/program" + q(run="jax_mlp/2026_11_29_16_58_17"))
    total = dict(zip(prog["columns"], prog["rows"][0]))
    assert total["flops"] > 0 and total["flops_source"] == "cost_model"


@pytest.mark.parametrize(
    "path,status,code",
    [
        ("/program" + q(run="nope"), 404, "not_found"),
        ("/program" + q(run="../../etc"), 400, "invalid_argument"),
        ("/program" + q(run="/etc/passwd"), 400, "invalid_argument"),
        ("/program" + q(run="v4_pod/2026_11_29_11_30_00", host="zz"), 404, "not_found"),
        ("/program", 400, "invalid_argument"),
        (
            "/program" + q(run="v4_pod/2026_11_29_11_30_00", infeed_outfeed="maybe"),
            400,
            "invalid_argument",
        ),
        ("/ops" + q(run="v4_pod/2026_11_29_11_30_00", limit="x"), 400, "invalid_argument"),
        ("/program" + q(run="broken/2026_01_01_00_00_00"), 422, "bad_profile"),
        ("/static/../plugin.py", 404, "not_found"),
    ],
)
def test_errors_are_json(server, path, status, code):
    api, _, _ = server
    got, headers, body = get(api + path)
    assert got == status
    assert headers["Content-Type"].startswith("application/json")
    err = json.loads(body)["error"]
    assert err["code"] == code and err["message"]


def test_bad_run_does_not_break_others(server):
    api, _, _ = server
    assert get(api + "/program" + q(run="broken/2026_01_01_00_00_00"))[0] == 422
    assert get(api + "/program" + q(run="v6e_train/2026_11_29_10_00_00"))[0] == 200


def test_static_files_are_compressed_revalidated_and_nosniff(server):
    import urllib.request

    api, _, _ = server
    url = api + "/static/vendor/vega.min.js"
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["Content-Encoding"] == "gzip"
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        etag = r.headers["ETag"]
        zipped = r.read()
    import gzip as _gzip

    plain = get(url)[2]
    assert _gzip.decompress(zipped) == plain and len(zipped) < len(plain) / 2
    req = urllib.request.Request(url, headers={"If-None-Match": etag})
    try:
        urllib.request.urlopen(req, timeout=30)
        raise AssertionError("expected 304")
    except urllib.error.HTTPError as e:
        assert e.code == 304
        # TensorBoard's security middleware wants a Content-Type on every response.
        assert e.headers["Content-Type"] == "text/javascript"
        assert e.headers["X-Content-Type-Options"] == "nosniff"
    port = api.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    log = os.path.join(TESTS, "..", "test-output", f"tensorboard_{port}.log")
    with open(log, encoding="utf-8", errors="replace") as f:
        assert "Content-Type is required" not in f.read()
    status, headers, _ = get(api + "/runs")
    assert headers["X-Content-Type-Options"] == "nosniff"
