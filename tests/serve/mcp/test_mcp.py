"""The MCP server (`tb-roofline mcp`): a real MCP client session (the SDK's stdio client) starts
the server on copies of testdata profiles, lists the tools, calls each one and checks every
answer against the HTTP API (the plugin's WSGI routes through werkzeug's test client) and the
CLI's JSON; bad arguments, path tricks and a damaged profile give errors and the server keeps
serving; one session over streamable HTTP on localhost."""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from tb_server import free_port, stop
from tensorboard.plugins import base_plugin
from testpaths import TESTS
from werkzeug.test import Client
from werkzeug.wrappers import Response

import tb_roofline
from tb_roofline.serve.cli import main as cli
from tb_roofline.serve.mcp import envelope, op_tools, shaping
from tb_roofline.serve.mcp import tools as mcp_tools
from tb_roofline.serve.web.plugin import RooflinePlugin

REPO = os.path.dirname(TESTS)
DATA = os.path.join(REPO, "testdata")
TOOLS = {
    "list_runs",
    "get_summary",
    "list_hosts",
    "get_device",
    "get_program",
    "top_ops",
    "get_op",
    "get_guidance",
    "compare",
    "get_diagnostics",
    "get_comm",
}
# an op of the A100 trace that launched 12 distinct kernels
MANY_KERNELS = "torch::autograd::CppNode<SplitLookupFunction_rowwise_adagrad_Op>"
COMM_CASES = ("jit_2d", "jit_dp_1d", "jit_dp_2d", "shard_map_1d", "shard_map_2d")


def _age(path, seconds=300):
    past = time.time() - seconds
    os.utime(path, (past, past))


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp_logdir")
    for rel in (
        "guidance/torch/clean_matmul",
        "guidance/torch/elementwise_chain",
        "guidance/torch/ddp_straggler",
        "compare/jax_cpu/mlp_b64",
        "compare/jax_cpu/mlp_b128",
        "demo/v6e_train",
        "compare/torch_cpu/convnet_b8",
    ):
        shutil.copytree(os.path.join(DATA, rel), root / rel)
    for rel in ("guidance/roofline_device.json", "compare/jax_cpu/roofline_device.json"):
        shutil.copy(os.path.join(DATA, rel), root / rel)
    # the real 8-device JAX captures (a device file gives the CPU a link roof) and an A100 rank
    from test_comm_chart import DEVICE

    for case in COMM_CASES:
        shutil.copytree(os.path.join(DATA, "jax_cpu_collectives", case), root / "comm" / case)
    (root / "comm" / "roofline_device.json").write_text(json.dumps(DEVICE))
    shutil.copytree(os.path.join(DATA, "kineto", "a100_80gb_shapes"), root / "a100")
    # A damaged profile: the first half of a real trace (a truncated gzip), written long ago.
    src = os.path.join(DATA, "guidance/torch/elementwise_chain")
    name = next(f for f in os.listdir(src) if f.endswith(".pt.trace.json.gz"))
    data = open(os.path.join(src, name), "rb").read()
    (root / "damaged").mkdir()
    bad = root / "damaged" / name
    bad.write_bytes(data[: len(data) // 2])
    _age(bad)
    # and an XSpace that is not one (its wire format is corrupt)
    session = root / "junk" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    (session / "h.xplane.pb").write_bytes(bytes(range(256)) * 40)
    _age(session / "h.xplane.pb")
    return str(root)


@pytest.fixture(scope="module")
def http(logdir):
    """GET a plugin route: (status, JSON), as the HTTP API answers it."""
    apps = RooflinePlugin(base_plugin.TBContext(logdir=logdir)).get_plugin_apps()

    def get(route, **params):
        r = Client(apps[route], Response).get(route, query_string=params)
        return r.status_code, json.loads(r.data)

    return get


@pytest.fixture(scope="module")
def runs(http):
    status, answer = http("/runs")
    assert status == 200
    names = [r["run"] for r in answer["runs"]]

    def find(part):
        (match,) = [n for n in names if part in n]
        return match

    return {
        "clean": find("clean_matmul"),
        "chain": find("elementwise_chain"),
        "ddp": find("ddp_straggler"),
        "b64": find("mlp_b64"),
        "b128": find("mlp_b128"),
        "tpu": find("v6e_train"),
        "damaged": "damaged",
        "junk": find("junk"),
        "conv": find("convnet_b8"),
        "a100": find("a100"),
        **{case: find(f"comm/{case}/") for case in COMM_CASES},
    }


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    return env


def _versions(answer: dict) -> dict:
    """The answer without its versions, which every answer carries."""
    answer = dict(answer)
    assert answer.pop("server_version") == tb_roofline.__version__
    assert answer.pop("schema_version") == envelope.SCHEMA_VERSION
    return answer


async def _call(session, tool, args, progress=None):
    """("ok", answer) or ("tool_error", text, the error object or None when the SDK refused
    the arguments) or ("error", MCP error code, message, data): a JSON-RPC error."""
    try:
        result = await session.call_tool(tool, args, progress_callback=progress)
    except MCPError as exc:
        return ("error", exc.error.code, exc.error.message, exc.error.data)
    text = "".join(c.text for c in result.content if getattr(c, "text", None))
    if result.is_error:
        sc = result.structured_content
        if sc is None:  # refused by the SDK's check of the input schema
            return ("tool_error", text, None)
        assert json.loads(text) == sc
        return ("tool_error", text, _versions(sc)["error"])
    assert json.loads(text) == result.structured_content  # the text is the same JSON object
    return ("ok", _versions(result.structured_content))


async def _session(streams, calls):
    read, write = streams
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        out = {
            "instructions": init.instructions,
            "server_info": init.server_info,
            "tools": {t.name: t for t in tools.tools},
        }
        for key, tool, args in calls:
            out[key] = await _call(session, tool, args)
        return out


def _stdio_session(logdir, calls):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tb_roofline.serve.cli.main", "mcp", logdir],
        env=_env(),
        cwd=REPO,
    )

    async def main():
        async with stdio_client(params) as streams:
            return await _session(streams, calls)

    return _run(main)


def _run(main):
    """anyio.run(main) on a thread of its own: the main thread may hold another test's event
    loop (Playwright's sync API leaves one running there)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, main).result()


def _listing(root):
    return sorted(
        (os.path.relpath(os.path.join(d, f), root), os.stat(os.path.join(d, f)).st_mtime_ns)
        for d, _, files in os.walk(root)
        for f in files
    )


@pytest.fixture(scope="module")
def session(logdir, runs, http):
    r = runs
    _, ops_tpu = http("/ops", run=r["tpu"])
    cat = ops_tpu["facets"]["category"][0]
    calls = [
        ("runs", "list_runs", {}),
        ("summary", "get_summary", {"run": r["tpu"]}),
        ("summary_program", "get_program", {"run": r["tpu"], "limit": 1}),
        ("summary_guidance", "get_guidance", {"run": r["tpu"], "limit": 5}),
        (
            "summary_ops",
            "top_ops",
            {
                "run": r["tpu"],
                "order": "time_saved",
                "limit": mcp_tools.SUMMARY_TOP,
                "columns": list(mcp_tools.SUMMARY_OP_COLUMNS),
            },
        ),
        ("summary_device", "get_device", {"run": r["tpu"]}),
        ("ops_compact", "top_ops", {"run": r["a100"], "limit": 10}),
        ("op_compact", "get_op", {"run": r["a100"], "operation": MANY_KERNELS}),
        ("op_full", "get_op", {"run": r["a100"], "operation": MANY_KERNELS, "detail": "full"}),
        ("ops_full", "top_ops", {"run": r["a100"], "limit": 10, "detail": "FULL"}),
        ("hosts", "list_hosts", {"run": r["ddp"]}),
        ("device", "get_device", {"run": r["b64"], "significant_digits": 0}),
        ("device_rounded", "get_device", {"run": r["tpu"]}),
        (
            "program",
            "get_program",
            {
                "run": r["ddp"],
                "limit": 1000,
                "significant_digits": 0,
                "columns": [c for c in ops_tpu["columns"] if c != "opportunity_rank"],
            },
        ),
        ("program_default", "get_program", {"run": r["tpu"]}),
        ("ops_default", "top_ops", {"run": r["tpu"]}),
        (
            "ops_filtered",
            "top_ops",
            {
                "run": r["tpu"],
                "category": [cat],
                "name": "o",
                "offset": 1,
                "limit": 2,
                "significant_digits": 0,
            },
        ),
        (
            "ops_caveat",
            "top_ops",
            {
                "run": r["tpu"],
                "caveat": ["async_wait", "none"],
                "bound_by": ["HBM"],
                "limit": 1000,
                "significant_digits": 0,
            },
        ),
        (
            "ops_precision",
            "top_ops",
            {"run": r["conv"], "precision": ["none"], "limit": 1000, "significant_digits": 0},
        ),
        (
            "ops_saved",
            "top_ops",
            {
                "run": r["b64"],
                "order": "time_saved",
                "limit": 20,
                "significant_digits": 0,
                "columns": ops_tpu["columns"],
            },
        ),
        (
            "program_b64",
            "get_program",
            {
                "run": r["b64"],
                "limit": 1000,
                "significant_digits": 0,
                "columns": [c for c in ops_tpu["columns"] if c != "opportunity_rank"],
            },
        ),
        (
            "guidance_b64",
            "get_guidance",
            {"run": r["b64"], "limit": 1000, "significant_digits": 0, "detail": "full"},
        ),
        ("diagnostics_b64", "get_diagnostics", {"run": r["b64"]}),
        ("op_mm", "get_op", {"run": r["clean"], "operation": "aten::mm", "significant_digits": 0}),
        (
            "op_mul",
            "get_op",
            {"run": r["chain"], "operation": "aten::mul", "significant_digits": 0},
        ),
        (
            "guidance",
            "get_guidance",
            {"run": r["chain"], "limit": 1000, "significant_digits": 0, "detail": "full"},
        ),
        ("guidance_default", "get_guidance", {"run": r["chain"]}),
        (
            "compare",
            "compare",
            {"base": r["b64"], "run": r["b128"], "limit": 3, "significant_digits": 0},
        ),
        ("compare_default", "compare", {"base": r["b64"], "run": r["b128"]}),
        (
            "compare_program",
            "compare",
            {"base": r["b64"], "run": r["b128"], "level": "program", "significant_digits": 0},
        ),
        (
            "compare_hosts",
            "compare",
            {
                "base": r["ddp"],
                "run": r["ddp"],
                "base_host": "rank0.1796046409084906552",
                "host": "rank1.1796046409087992866",
                "significant_digits": 0,
            },
        ),
        ("diagnostics", "get_diagnostics", {"run": r["tpu"]}),
        ("diagnostics_warn", "get_diagnostics", {"run": r["tpu"], "severity": ["warning"]}),
        # errors the service gives, as the HTTP API gives them
        ("e_traversal", "list_hosts", {"run": "../../etc"}),
        ("e_abs", "get_device", {"run": "/etc/passwd"}),
        ("e_host", "get_device", {"run": r["ddp"], "host": "../rank0"}),
        ("e_unknown", "get_program", {"run": "nope"}),
        ("e_view", "top_ops", {"run": r["b64"], "view": "kernel"}),
        ("e_step", "compare", {"base": r["b64"], "run": r["b128"], "step": "42"}),
        ("e_damaged", "get_program", {"run": r["damaged"]}),
        ("e_junk", "top_ops", {"run": r["junk"]}),
        ("e_no_op", "get_op", {"run": r["chain"], "operation": "aten::nothing"}),
        ("after_damaged", "get_device", {"run": r["b64"], "significant_digits": 0}),
        # arguments the input schema refuses
        ("s_limit", "top_ops", {"run": r["tpu"], "limit": -1}),
        ("s_io", "top_ops", {"run": r["tpu"], "infeed_outfeed": "sideways"}),
        ("s_order", "top_ops", {"run": r["tpu"], "order": "fastest"}),
        ("s_extra", "top_ops", {"run": r["tpu"], "limt": 3}),
        ("s_missing", "list_hosts", {}),
        ("s_type", "get_program", {"run": r["tpu"], "offset": "many"}),
        ("s_op", "get_op", {"run": r["chain"], "operation": ""}),
        ("s_column", "top_ops", {"run": r["tpu"], "columns": ["flop_rate_gflops", "nope"]}),
        # a ranking that is empty says why (a CPU trace without a device file: no peaks)
        ("n_no_peaks", "top_ops", {"run": r["conv"], "order": "time_saved"}),
        ("n_no_match", "top_ops", {"run": r["tpu"], "order": "time_saved", "name": "zz_no"}),
        ("n_ranked", "top_ops", {"run": r["tpu"], "order": "time_saved", "limit": 1}),
        # choices in any case; values the run has not are errors naming those it has
        ("e_host_unknown", "get_device", {"run": r["ddp"], "host": "rank9"}),
        (
            "f_lower",
            "top_ops",
            {
                "run": r["tpu"],
                "caveat": ["ASYNC_WAIT", "None"],
                "bound_by": ["hbm"],
                "limit": 1000,
                "significant_digits": 0,
            },
        ),
        ("f_view_upper", "top_ops", {"run": r["tpu"], "view": "OP"}),
        ("f_bound_typo", "top_ops", {"run": r["tpu"], "bound_by": ["hmb"]}),
        ("f_category_typo", "top_ops", {"run": r["tpu"], "category": ["matmull"]}),
        ("f_precision_typo", "top_ops", {"run": r["conv"], "precision": ["fp33"]}),
        ("f_view_bad", "top_ops", {"run": r["tpu"], "view": "kernels"}),
        ("f_caveat_bad", "top_ops", {"run": r["tpu"], "caveat": ["async"]}),
        (
            "cmp_lower",
            "compare",
            {
                "base": r["b64"],
                "run": r["b128"],
                "bound_by": ["compute"],
                "limit": 1000,
                "significant_digits": 0,
            },
        ),
        ("cmp_typo", "compare", {"base": r["b64"], "run": r["b128"], "category": ["nope"]}),
        ("limit0", "top_ops", {"run": r["tpu"], "limit": 0}),
        ("diag_ddp", "get_diagnostics", {"run": r["ddp"], "limit": 1000}),
        ("diag_page", "get_diagnostics", {"run": r["ddp"], "limit": 1}),
        (
            "fp_ops",
            "top_ops",
            {
                "run": r["b64"],
                "limit": 1000,
                "columns": ["operation", "program_id", "fingerprints"],
            },
        ),
        (
            "fp_pairs",
            "compare",
            {
                "base": r["b64"],
                "run": r["b128"],
                "limit": 1000,
                "columns": [
                    "status",
                    "base_operation",
                    "cand_operation",
                    "base_fingerprint",
                    "cand_fingerprint",
                ],
            },
        ),
        (
            "fp_ops_b128",
            "top_ops",
            {"run": r["b128"], "limit": 1000, "columns": ["operation", "fingerprints"]},
        ),
        *[
            (f"comm_{case}", "get_comm", {"run": r[case], "limit": 1000, "significant_digits": 0})
            for case in COMM_CASES
        ],
        ("comm_a100", "get_comm", {"run": r["a100"], "limit": 1000, "significant_digits": 0}),
        (
            "comm_a100_io",
            "get_comm",
            {
                "run": r["a100"],
                "host": "rank0",
                "limit": 1000,
                "infeed_outfeed": "exclude",
                "significant_digits": 0,
            },
        ),
        ("comm_default", "get_comm", {"run": r["a100"]}),
        (
            "comm_page",
            "get_comm",
            {"run": r["a100"], "offset": 2, "limit": 3, "significant_digits": 0},
        ),
        (
            "comm_kind",
            "get_comm",
            {
                "run": r["a100"],
                "kind": ["ALL-to-all", "reduce-scatter"],
                "limit": 1000,
                "significant_digits": 0,
            },
        ),
        ("comm_kind_bad", "get_comm", {"run": r["a100"], "kind": ["allreduce"]}),
        ("comm_none", "get_comm", {"run": r["b64"], "significant_digits": 0}),
        ("comm_unknown", "get_comm", {"run": "nope"}),
        ("last", "list_runs", {"limit": 1}),
    ]
    before = _listing(logdir)
    out = _stdio_session(logdir, calls)
    out["written"] = [x for x in _listing(logdir) if x not in before]
    return out


def _ok(session, key):
    status, *rest = session[key]
    assert status == "ok", (key, rest)
    return rest[0]


def _named(record: dict) -> dict:
    """A record as the MCP answers name it (the HTTP name with its unit)."""
    return {shaping.unit_name(k): v for k, v in record.items()}


def _plain(ops):
    """top_ops records without their fingerprints (the HTTP API's /ops has none)."""
    return [{k: v for k, v in o.items() if k != "fingerprints"} for o in ops]


def _rows(answer, columns=None):
    cols = answer["columns"]
    keep = columns or cols
    return [_named({c: row[cols.index(c)] for c in keep}) for row in answer["rows"]]


# --- the session, the tools, the instructions ----------------------------------------------


@pytest.mark.slow
def test_tools_are_listed_with_validated_read_only_schemas(session):
    assert set(session["tools"]) == TOOLS
    for tool in session["tools"].values():
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.input_schema.get("additionalProperties") is False
        assert tool.annotations.read_only_hint is True
    for tool in session["tools"].values():  # every answer carries the versions
        assert tool.output_schema["type"] == "object"
        assert {"server_version", "schema_version"} <= set(tool.output_schema["required"])
    top = session["tools"]["top_ops"].input_schema["properties"]
    assert top["infeed_outfeed"]["enum"] == ["include", "exclude"]
    assert top["view"]["enum"] == ["op", "kernel", "kernel_hw"]
    assert top["caveat"]["items"]["enum"] == list(shaping.CAVEATS)
    assert top["detail"]["enum"] == ["compact", "full"] and top["detail"]["default"] == "compact"
    assert "run" in top and all("title" not in p for p in top.values())


def test_the_tool_listing_is_small(session):
    """The listing is read at every session's start: compact schemas, one-line descriptions
    (it was 20.8 KB before the schemas were compacted)."""
    listing = [t.model_dump(by_alias=True, exclude_none=True) for t in session["tools"].values()]
    assert len(json.dumps(listing)) < 17_000
    assert all("\n" not in t["description"] for t in listing)
    assert "roofline" in session["instructions"] and "ridge point" in session["instructions"]


def test_unit_names_and_rounding():
    assert shaping.unit_name("flop_rate") == "flop_rate_gflops"
    assert shaping.unit_name("delta_flop_rate") == "delta_flop_rate_gflops"
    assert shaping.unit_name("hbm_bw") == "hbm_bw_gibs"
    assert shaping.unit_name("interconnect_bw") == "interconnect_bw_gbs"  # links: GB/s
    assert (
        shaping.unit_name("bottleneck_operational_intensity")
        == "bottleneck_operational_intensity_flop_per_byte"
    )
    assert shaping.unit_name("ridge_point") == "ridge_point_flop_per_byte"
    for name in ("total_self_time_us", "peak_gflops", "roofline_efficiency", "flops"):
        assert shaping.unit_name(name) == name
    assert shaping.shape({"a": [1234567.891, 0.000123456789, 7, None, True]}, 6) == {
        "a": [1234570.0, 0.000123457, 7, None, True]
    }
    assert shaping.shape({"x": 1.23456789}, 0) == {"x": 1.23456789}


def test_runs_and_hosts_equal_the_http_api(session, http, runs):
    _, want = http("/runs")
    got = _ok(session, "runs")
    assert got["total_count"] == len(want["runs"]) == 9 + len(COMM_CASES) + 1
    assert got["runs"] == [{k: r[k] for k in ("run", "format", "hosts")} for r in want["runs"]]
    assert _ok(session, "last")["runs"] == got["runs"][:1]
    assert _ok(session, "hosts") == http("/hosts", run=runs["ddp"])[1]


def test_device_and_roofs_equal_the_http_api(session, http, runs):
    _, want = http("/device", run=runs["b64"])
    got = _ok(session, "device")
    assert got["device"] == json.loads(json.dumps(shaping.shape(want["device"], 0)))
    memory = got["device"]["memories"][0]
    assert memory["ridge_point_flop_per_byte"] == want["device"]["memories"][0]["ridge_point"]
    assert all(c["source"] == "measured" for c in got["device"]["compute"])
    # default: rounded to 6 significant digits, within 5e-6 of the exact figure
    _, tpu = http("/device", run=runs["tpu"])
    exact = tpu["device"]["compute"][0]["peak_gflops"]
    rounded = _ok(session, "device_rounded")["device"]["compute"][0]["peak_gflops"]
    assert rounded == pytest.approx(exact, rel=5e-6) and len(repr(rounded)) <= 9


def test_program_records_equal_the_http_api(session, http, runs):
    _, want = http("/program", run=runs["ddp"])
    got = _ok(session, "program")
    assert got["records"] == _rows(want) and got["num_steps"] == want["num_steps"]
    assert {r["record_type"] for r in got["records"]} >= {"total", "host"}
    default = _ok(session, "program_default")
    _, tpu = http("/program", run=runs["tpu"])
    assert len(default["records"]) == min(10, len(tpu["rows"]))
    assert default["total_count"] == len(tpu["rows"])
    for rec, row in zip(default["records"], _rows(tpu)):
        assert set(rec) < set(row)
        for k, v in rec.items():
            assert v == (pytest.approx(row[k], rel=5e-6) if isinstance(v, float) else row[k])


def test_top_ops_equal_the_http_api(session, http, runs):
    cols = list(shaping.OP_COLUMNS)
    _, everything = http("/ops", run=runs["tpu"])
    default = _ok(session, "ops_default")
    assert len(default["ops"]) == 10 and default["next_offset"] == 10
    assert default["total_count"] == everything["total_count"]
    for got, want in zip(_plain(default["ops"]), _rows(everything, cols)):
        assert got.keys() == want.keys()
        for k, v in got.items():
            assert v == (pytest.approx(want[k], rel=5e-6) if isinstance(v, float) else want[k])

    cat = everything["facets"]["category"][0]
    _, page = http("/ops", run=runs["tpu"], category=cat, name="o", offset=1, limit=2)
    got = _ok(session, "ops_filtered")
    assert _plain(got["ops"]) == _rows(page, cols)
    assert got["total_count"] == page["total_count"]

    # caveat and precision: the API's rule (`none`: rows without one), as a hand filter keeps
    _, hbm = http("/ops", run=runs["tpu"], bound_by="HBM")
    c = hbm["columns"].index("caveat")
    keep = [row for row in hbm["rows"] if row[c] in ("async_wait", None)]
    got = _ok(session, "ops_caveat")
    assert _plain(got["ops"]) == _rows(dict(hbm, rows=keep), cols)
    assert got["total_count"] == len(keep)
    assert {o["caveat"] for o in got["ops"]} <= {"async_wait", None}
    _, ddp = http("/ops", run=runs["conv"])  # a CPU trace: f32, int and rows without a dtype
    p = ddp["columns"].index("precision")
    keep = [row for row in ddp["rows"] if not row[p]]  # "none": the rows without a precision
    assert 0 < len(keep) < len(ddp["rows"])
    assert _plain(_ok(session, "ops_precision")["ops"]) == _rows(dict(ddp, rows=keep), cols)


def test_answers_equal_the_cli_report_json(session, logdir, runs):
    out = io.StringIO()
    assert (
        cli.main(
            [
                "report",
                logdir,
                "--run",
                runs["b64"],
                "--format",
                "json",
                "--top",
                "20",
                "--no-progress",
            ],
            out=out,
        )
        == 0
    )
    report = json.loads(out.getvalue())
    got = _ok(session, "ops_saved")
    # the report adds the time saved per unit of its guidance view
    # (serve/service/report.py); the rest of each row is the HTTP API's
    per_unit = "potential_time_saved_per_unit_us"
    assert all(per_unit in r for r in report["top_ops"])
    assert got["ops"] == [
        _named({k: v for k, v in r.items() if k != per_unit}) for r in report["top_ops"]
    ]
    assert got["total_count"] == report["opportunity_count"] < report["op_count"]
    assert _ok(session, "device")["device"] == _named_deep(report["device"])
    program = _ok(session, "program_b64")
    assert program["records"] == [_named(r) for r in report["program"]]
    assert program["num_steps"] == report["num_steps"]
    guidance = _ok(session, "guidance_b64")
    want = _named_deep(report["guidance"])
    assert guidance["findings"] == want.pop("findings")
    assert {k: v for k, v in guidance.items() if k in want} == want
    got = _ok(session, "diagnostics_b64")["diagnostics"]  # one host: one entry each
    assert [{k: d[k] for k in ("severity", "code", "message")} for d in got] == report[
        "diagnostics"
    ] and all(d["count"] == 1 for d in got)


def test_one_op_in_full(session, http, runs):
    _, ops = http("/ops", run=runs["clean"], name="aten::mm")
    want = [r for r in _rows(ops) if r["operation"] == "aten::mm"]
    got = _ok(session, "op_mm")
    assert got["records"] == want and len(want) == 1
    # the two 1024^3 matmuls of the capture (testdata/README.md): M = N = K = 1024
    (gemm,) = [s for s in got["shapes"] if s["kind"] == "gemm"]
    assert gemm["dims"] == [1024, 1024, 1024] and gemm["calls"] == 8
    _, guide = http("/guidance", run=runs["chain"])
    naming = [f for f in guide["findings"] if any(o["operation"] == "aten::mul" for o in f["ops"])]
    got = _ok(session, "op_mul")
    assert naming and got["findings"] == [_named_deep(f) for f in naming]
    assert got["findings"][0]["evidence"]["records"]


def _named_deep(value):
    return json.loads(json.dumps(shaping.shape(value, 0)))


def test_guidance_equals_the_http_api(session, http, runs):
    _, want = http("/guidance", run=runs["chain"])
    got = _ok(session, "guidance")
    assert got["findings"] == _named_deep(want["findings"]) and got["findings_count"] > 2
    assert {
        k: v
        for k, v in got.items()
        if k not in ("findings", "findings_count", "offset", "next_offset")
    } == _named_deep({k: v for k, v in want.items() if k != "findings"})
    default = _ok(session, "guidance_default")
    assert [f["id"] for f in default["findings"]] == [f["id"] for f in want["findings"]][:10]
    for f, full in zip(default["findings"], got["findings"]):  # compact: no records, counted
        ev, full_ev = f["evidence"], full["evidence"]
        assert "records" not in ev and ev["records_count"] == len(full_ev.get("records") or [])
        assert set(full_ev) - {"records", "bound_formula"} == set(ev) - {"records_count"}
        assert f["bound_formula"] == full["bound_formula"]  # said once, beside the bound


def _pairs(answer, keep):
    cols = answer["columns"]
    n = len(answer["values"][0]) if answer["values"] else 0
    return [_named({c: answer["values"][cols.index(c)][j] for c in keep}) for j in range(n)]


def test_compare_equals_the_http_api(session, http, runs):
    _, want = http("/compare", base=runs["b64"], run=runs["b128"], limit=3)
    got = _ok(session, "compare")
    assert got["summary"] == _named_deep(want["summary"]) and got["notes"] == want["notes"]
    assert got["pairs"] == _pairs(want, shaping.PAIR_COLUMNS)
    assert got["total_count"] == want["total_count"] == 32 and got["next_offset"] == 3
    assert (
        got["base"]["run"] == runs["b64"]
        and got["cand"]["device_type"] == want["cand"]["device"]["type"]
    )
    assert list(got)[:3] == ["base", "cand", "level"]  # the summary comes before the pairs
    assert list(got).index("summary") < list(got).index("pairs")
    _, want = http("/compare", base=runs["b64"], run=runs["b128"], level="program")
    got = _ok(session, "compare_program")
    assert got["pairs"] == _pairs(want, shaping.PROGRAM_PAIR_COLUMNS)[:10]
    _, want = http(
        "/compare",
        base=runs["ddp"],
        run=runs["ddp"],
        base_host="rank0.1796046409084906552",
        host="rank1.1796046409087992866",
    )
    got = _ok(session, "compare_hosts")
    assert got["summary"] == _named_deep(want["summary"])
    assert got["pairs"] == _pairs(want, shaping.PAIR_COLUMNS)[:10]


def _close(got, want, path="answer"):
    """`got` (rounded to 6 significant digits) against the exact `want`, field by field."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for k in want:
            _close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got == pytest.approx(want, rel=5e-6, abs=1e-12), path
    else:
        assert got == want, path


def test_compare_equals_the_cli_diff_json(session, logdir, runs):
    out = io.StringIO()
    assert (
        cli.main(
            [
                "diff",
                logdir,
                "--base-run",
                runs["b64"],
                "--run",
                runs["b128"],
                "--format",
                "json",
                "--no-progress",
            ],
            out=out,
        )
        == 0
    )
    doc = json.loads(out.getvalue())
    got = _ok(session, "compare")
    _close(got["summary"], _named_deep(doc["summary"]))
    assert got["notes"] == doc["notes"] and got["total_count"] == len(doc["ops"])
    want = [{k: v for k, v in _named(r).items() if k in got["pairs"][0]} for r in doc["ops"][:3]]
    _close(got["pairs"], want)


@pytest.mark.parametrize(
    "key",
    [
        "runs",
        "device_rounded",
        "program_default",
        "ops_default",
        "guidance_default",
        "compare_default",
        "diagnostics",
        "comm_default",
    ],
)
def test_default_answers_are_small(session, key):
    assert len(json.dumps(_ok(session, key))) < 12_000


def test_the_rounded_compare_is_the_exact_one_rounded(session):
    exact, rounded = _ok(session, "compare"), _ok(session, "compare_default")
    assert rounded["pairs"][:3] == json.loads(json.dumps(shaping.shape(exact["pairs"], 6)))
    assert len(rounded["pairs"]) == 10 and rounded["next_offset"] == 10


def _general(message, hosts):
    for h in sorted(hosts, key=len, reverse=True):
        message = message.replace(h, "<host>")
    return message


def test_diagnostics_equal_the_http_api_grouped_by_host(session, http, runs):
    for key, run in (("diagnostics", runs["tpu"]), ("diag_ddp", runs["ddp"])):
        _, want = http("/diagnostics", run=run)
        hosts = http("/hosts", run=run)[1]["hosts"]
        got = _ok(session, key)
        raw = want["diagnostics"]
        assert got["diagnostics_count"] == len(raw) == sum(g["count"] for g in got["diagnostics"])
        assert got["total_count"] == len(got["diagnostics"]) and got["next_offset"] is None
        for g in got["diagnostics"]:  # each group: the raw diagnostics that say the same
            same = [
                d
                for d in raw
                if (d["severity"], d["code"]) == (g["severity"], g["code"])
                and _general(d["message"], hosts) == _general(g["message"], hosts)
            ]
            assert same and same[0]["message"] == g["message"] and g["count"] == len(same)
            named = [h for d in same for h in hosts if h in d["message"]]
            assert g["hosts"] == list(dict.fromkeys(named))[: envelope.FIRST_HOSTS]
    _, want = http("/diagnostics", run=runs["tpu"])
    warnings = [d for d in want["diagnostics"] if d["severity"] == "warning"]
    got = _ok(session, "diagnostics_warn")["diagnostics"]
    assert [{k: d[k] for k in ("severity", "code", "message")} for d in got] == warnings
    page = _ok(session, "diag_page")
    assert page["diagnostics"] == _ok(session, "diag_ddp")["diagnostics"][:1]
    assert page["next_offset"] == (1 if page["total_count"] > 1 else None)


def test_hosts_left_out_are_one_entry_naming_them():
    """Each host not read is a diagnostic of its own with `skipped_host` (the tab's banner
    counts them); grouped, the entry names them in `hosts`, not one of them as the group's."""
    hosts = ["h0", "h1", "h2", "h3"]
    diags = [
        {
            "severity": "error",
            "code": "bad_profile",
            "skipped_host": h,
            "hosts_total": 4,
            "message": f"host {h!r} skipped: not an XSpace",
        }
        for h in ("h1", "h3")
    ]
    (entry,) = envelope.group_diagnostics(diags, hosts)
    assert (entry["count"], entry["hosts"], entry["hosts_total"]) == (2, ["h1", "h3"], 4)
    assert "skipped_host" not in entry


def test_a_pod_s_shared_diagnostics_are_one_entry():
    hosts = [f"host{i:03d}" for i in range(240)]
    diags = [
        {
            "severity": "warning",
            "code": "cluster_unavailable",
            "message": f"run 'r', host '{h}': converted by this server",
        }
        for h in hosts
    ]
    diags.append({"severity": "info", "code": "no_hw_counters", "message": "no counters"})
    (one, other) = envelope.group_diagnostics(diags, hosts)
    assert one["count"] == 240 and one["hosts"] == hosts[:5]
    assert one["message"] == diags[0]["message"]
    assert other == dict(diags[-1], count=1, hosts=[])


# --- errors, the damaged profile, read-only -------------------------------------------------


@pytest.mark.parametrize(
    "key,route,params",
    [
        ("e_traversal", "/hosts", {"run": "../../etc"}),
        ("e_abs", "/device", {"run": "/etc/passwd"}),
        ("e_host", "/device", {"run": "ddp", "host": "../rank0"}),
        ("e_unknown", "/program", {"run": "nope"}),
        ("e_view", "/ops", {"run": "b64", "view": "kernel"}),
        ("e_step", "/compare", {"base": "b64", "run": "b128", "step": "42"}),
        ("e_damaged", "/program", {"run": "damaged"}),
        ("e_junk", "/ops", {"run": "junk"}),
    ],
)
def test_errors_are_tool_results_with_the_http_api_message(session, http, runs, key, route, params):
    params = {k: runs.get(v, v) if k in ("run", "base") else v for k, v in params.items()}
    status, want = http(route, **params)
    kind, text, error = session[key]
    assert kind == "tool_error" and status >= 400  # isError: the model reads it
    assert error["message"] == want["error"]["message"] and want["error"]["message"] in text
    assert (error["status"], error["code"]) == (status, want["error"]["code"])


def test_errors_name_the_valid_values(session, runs, http):
    _, listed = http("/runs")
    error = session["e_unknown"][2]
    assert error["field"] == "run" and error["valid_values"] == [r["run"] for r in listed["runs"]]
    error = session["e_host_unknown"][2]
    assert error["code"] == "not_found" and error["field"] == "host"
    assert error["valid_values"] == http("/hosts", run=runs["ddp"])[1]["hosts"]
    assert session["e_view"][2]["field"] == "view"
    assert session["e_view"][2]["valid_values"] == ["op"]  # a JAX CPU run has no kernels
    assert session["e_no_op"][2]["field"] == "operation"
    assert session["e_damaged"][2].get("valid_values") is None  # nothing to choose


def test_filters_match_any_case_and_name_the_values_a_run_has(session, http, runs):
    assert _ok(session, "f_lower") == _ok(session, "ops_caveat")
    assert _ok(session, "f_view_upper") == _ok(session, "ops_default")
    _, ops = http("/ops", run=runs["tpu"])
    for key, field in (("f_bound_typo", "bound_by"), ("f_category_typo", "category")):
        kind, text, error = session[key]
        assert kind == "tool_error" and error["code"] == "invalid_argument"
        assert error["field"] == field and error["valid_values"] == ops["facets"][field]
        assert all(v in text for v in ops["facets"][field])
    kind, _, error = session["f_precision_typo"]
    assert error["field"] == "precision" and "f32" in error["valid_values"]
    assert "none" in error["valid_values"]
    # view and caveat are enums in the schema: the SDK names the allowed values
    for key, words in (
        ("f_view_bad", ("'op'", "'kernel'", "'kernel_hw'")),
        ("f_caveat_bad", ("'async_wait'", "'no_cost'", "'none'")),
    ):
        kind, text, _ = session[key]
        assert kind == "tool_error" and all(w in text for w in words), text
    _, want = http("/compare", base=runs["b64"], run=runs["b128"], bound_by="Compute", limit=1000)
    got = _ok(session, "cmp_lower")
    assert got["pairs"] == _pairs(want, shaping.PAIR_COLUMNS) and got["pairs"]
    error = session["cmp_typo"][2]
    assert error["field"] == "category" and error["valid_values"] == want["facets"]["category"]


def test_limit_zero_gives_the_counts_and_ends_paging(session, http, runs):
    got = _ok(session, "limit0")
    _, want = http("/ops", run=runs["tpu"])
    assert got["ops"] == [] and got["total_count"] == want["total_count"] > 0
    assert got["next_offset"] is None


def test_top_ops_fingerprints_are_compare_s(session):
    ops = {o["operation"]: o["fingerprints"] for o in _ok(session, "fp_ops")["ops"]}
    cand = {o["operation"]: o["fingerprints"] for o in _ok(session, "fp_ops_b128")["ops"]}
    pairs = _ok(session, "fp_pairs")["pairs"]
    matched = [p for p in pairs if p["status"] == "matched"]
    assert matched and all(fp is None or fp for fp in ops.values())
    for p in matched:
        assert ops[p["base_operation"]] == [p["base_fingerprint"]]
        assert cand[p["cand_operation"]] == [p["cand_fingerprint"]]


def test_every_answer_and_the_server_carry_versions(session):
    assert session["server_info"].version == tb_roofline.__version__
    assert _ok(session, "runs") and session["e_damaged"][0] == "tool_error"  # both checked


def test_a_damaged_profile_is_an_error_and_the_server_keeps_serving(session, http, runs):
    _, _, error = session["e_damaged"]
    assert error["code"] == "bad_profile" and "damaged" in error["message"]
    assert _ok(session, "after_damaged") == _ok(session, "device")
    error = session["e_junk"][2]
    assert error["code"] == "bad_profile" and "XSpace" in error["message"]
    assert (
        _ok(session, "last")["total_count"] == 9 + len(COMM_CASES) + 1
    )  # the last call of the session answered
    error = session["e_no_op"][2]
    assert error["code"] == "not_found" and "aten::nothing" in error["message"]


@pytest.mark.parametrize(
    "key,field",
    [
        ("s_limit", "limit"),
        ("s_io", "infeed_outfeed"),
        ("s_order", "order"),
        ("s_extra", "limt"),
        ("s_missing", "run"),
        ("s_type", "offset"),
        ("s_op", "operation"),
    ],
)
def test_the_input_schema_refuses_bad_arguments(session, key, field):
    """Refused by the SDK's check of the input schema, answered in the structure of every
    other error (never pydantic's raw text): code, status, the field at fault."""
    kind, text, error = session[key]
    assert kind == "tool_error", text
    assert error is not None, text  # structured, with the versions (_call checks them)
    assert (error["code"], error["status"], error["field"]) == ("invalid_argument", 400, field)
    assert field in error["message"] and "pydantic" not in text and "errors.pydantic" not in text


def test_schema_refusals_name_the_valid_values(session):
    assert session["s_io"][2]["valid_values"] == ["include", "exclude"]
    assert "time_saved" in session["s_order"][2]["valid_values"]
    extra = session["s_extra"][2]  # a misspelt argument: the tool's own arguments
    assert "takes no argument 'limt'" in extra["message"] and "limit" in extra["valid_values"]
    assert "run is required" in session["s_missing"][2]["message"]


def test_an_empty_ranking_says_why(session, runs, http):
    no_peaks = _ok(session, "n_no_peaks")
    assert no_peaks["ops"] == [] and no_peaks["total_count"] == 0
    assert "peaks are unknown" in no_peaks["note"]
    status, device = http("/device", run=runs["conv"])
    assert status == 200 and device["device"]["peaks_known"] is False  # the reason holds
    assert "no op matches the filters" in _ok(session, "n_no_match")["note"]
    ranked = _ok(session, "n_ranked")
    assert ranked["ops"] and "note" not in ranked


def test_an_unknown_column_names_the_columns(session):
    kind, text, error = session["s_column"]
    assert kind == "tool_error" and error["code"] == "invalid_argument"
    assert "'nope'" in error["message"] and "flop_rate_gflops" in error["valid_values"]


def test_a_bug_or_no_memory_fails_one_call_as_a_tool_error():
    from tb_roofline.serve.mcp import calls as mcp_calls

    def bug(service):
        raise KeyError("x")

    def hungry(service):
        raise MemoryError

    result = mcp_calls.call(None, bug)
    assert result.is_error
    assert result.structured_content["error"] == {
        "message": "internal error: KeyError: 'x'",
        "status": 500,
        "code": "internal",
    }
    result = mcp_calls.call(None, hungry)
    assert result.is_error and result.structured_content["error"]["code"] == "too_large"
    assert result.structured_content["error"]["status"] == 413
    result = mcp_calls.call(None, lambda service, x: {"x": x}, x=1)
    assert not result.is_error and _versions(result.structured_content) == {"x": 1}


def test_nothing_is_written_into_the_logdir(session):
    assert session["written"] == []


# --- streamable HTTP --------------------------------------------------------------------------


@contextlib.contextmanager
def _http_server(logdir, port):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tb_roofline.serve.cli.main",
            "mcp",
            logdir,
            "--http",
            "--port",
            str(port),
        ],
        env=_env(),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the MCP HTTP server did not start"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)
        proc.stderr.close()


def test_a_streamable_http_session_on_localhost(logdir, http, runs):
    port = free_port()
    with _http_server(logdir, port) as url:

        async def main():
            async with streamable_http_client(url) as streams:
                return await _session(
                    streams,
                    [
                        ("device", "get_device", {"run": runs["b64"], "significant_digits": 0}),
                        ("e_traversal", "list_hosts", {"run": "../x"}),
                    ],
                )

        out = _run(main)
        # A page on another site cannot reach it through DNS rebinding: other Host headers
        # are refused.
        req = urllib.request.Request(
            url,
            data=b"{}",
            method="POST",
            headers={
                "Host": f"evil.example:{port}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
            },
        )
        status = _status(req)
        assert 400 <= status < 500
    assert set(out["tools"]) == TOOLS
    _, want = http("/device", run=runs["b64"])
    assert _ok(out, "device")["device"] == _named_deep(want["device"])
    assert (
        out["e_traversal"][0] == "tool_error"
        and out["e_traversal"][2]["code"] == "invalid_argument"
    )


def _status(req) -> int:
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_cli_refuses_a_missing_logdir_and_a_bad_port(tmp_path, capsys):
    assert cli.main(["mcp", str(tmp_path / "nothing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert cli.main(["mcp", str(tmp_path), "--http", "--port", "0"]) == 2
    assert "not a port" in capsys.readouterr().err


def test_without_the_sdk_the_cli_says_which_extra_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)
    assert cli.main(["mcp", str(tmp_path)]) == 2
    assert "pip install 'tb-roofline[mcp]'" in capsys.readouterr().err


# --- progress and the byte cap, through the client -------------------------------------------


def test_progress_notifications_and_capped_pages(tmp_path):
    """A client that passes a progressToken hears "k of N hosts read" while a two-host run is
    read (no cache: read now); a server capped at 8 KB per answer cuts a long page to fit,
    and following next_offset gives every row once."""
    for rel in (
        "guidance/torch/ddp_straggler",
        "compare/jax_cpu/mlp_b64",
        "compare/jax_cpu/mlp_b128",
    ):
        shutil.copytree(os.path.join(DATA, rel), tmp_path / rel)
    env = dict(_env(), TB_ROOFLINE_CACHE_DIR="off", TB_ROOFLINE_MCP_MAX_ANSWER_KB="8")
    params = StdioServerParameters(
        command=sys.executable,
        env=env,
        cwd=REPO,
        args=["-m", "tb_roofline.serve.cli.main", "mcp", str(tmp_path)],
    )
    heard = []

    async def progress(done, total, message):
        heard.append((done, total, message))

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                runs = (await _call(session, "list_runs", {}))[1]["runs"]
                by = {r["run"].split("/")[-2 if "jax" in r["run"] else -1]: r["run"] for r in runs}
                out = {
                    "program": await _call(
                        session,
                        "get_program",
                        {"run": by["ddp_straggler"], "limit": 1000},
                        progress,
                    )
                }
                pages, offset = [], 0
                while offset is not None:
                    kind, page = await _call(
                        session,
                        "compare",
                        {
                            "base": by["mlp_b64"],
                            "run": by["mlp_b128"],
                            "offset": offset,
                            "limit": 1000,
                            "columns": list(shaping.PAIR_COLUMNS)
                            + ["base_fingerprint", "cand_fingerprint", "base_category"],
                        },
                    )
                    assert kind == "ok", page
                    pages.append(page)
                    offset = page["next_offset"]
                out["pages"] = pages
                return out

    out = _run(main)
    assert out["program"][0] == "ok"
    hosts = out["program"][1]["records"]
    assert heard and heard[-1][:2] == (2.0, 2.0) and "2 of 2 hosts read" in heard[-1][2]
    assert [h[0] for h in heard] == sorted(h[0] for h in heard) and len(hosts) > 2
    pages = out["pages"]
    assert len(pages) > 1 and all(p["truncated"]["max_answer_bytes"] == 8192 for p in pages[:-1])
    assert all(len(json.dumps(p, separators=(",", ":"))) <= 8192 for p in pages)
    assert f"offset={pages[0]['next_offset']}" in pages[0]["truncated"]["hint"]
    pairs = [x for p in pages for x in p["pairs"]]
    assert len(pairs) == pages[0]["total_count"] == 32
    assert [p["offset"] for p in pages] == [0] + [p["next_offset"] for p in pages[:-1]]


# --- shapes of custom calls ---------------------------------------------------------------------

FLASH = (
    "%loop_fusion.2 = bf16[8,1024,128]{2,1,0} custom-call(bf16[8,1024,128]{2,1,0} %q, "
    "bf16[8,1024,128]{2,1,0} %k, bf16[8,1024,64]{2,1,0} %v), "
    'custom_call_target="tpu_custom_call", backend_config="..."'
)


def test_get_op_gives_a_custom_call_s_arrays(tmp_path):
    """A TPU custom call (a Pallas flash-attention kernel's HLO text, as the op metadata
    carries it): get_op's shapes hold its output and operand arrays, as the text names them."""
    from tb_roofline.protos import xplane_pb2  # noqa: F401
    from tb_roofline.serve.service.core import RooflineService
    from tb_roofline.synthetic import SynthConfig, make_tpu_xspace

    session = tmp_path / "attn" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    space = make_tpu_xspace(SynthConfig(seed=1, num_cores=1, op_text={"loop_fusion.2": FLASH}))
    (session / "h.xplane.pb").write_bytes(space.SerializeToString())
    _age(session / "h.xplane.pb")
    service = RooflineService(str(tmp_path))
    got = op_tools.get_op(service, "attn/2026_01_01_00_00_00", "loop_fusion.2")
    (use,) = got["shapes"]
    assert use["kind"] == "custom_call"
    assert use["dims"] == [[8, 1024, 128], [8, 1024, 128], [8, 1024, 128], [8, 1024, 64]]
    assert use["shape"] == (
        "tpu_custom_call: bf16[8,1024,128] <- bf16[8,1024,128] bf16[8,1024,128] bf16[8,1024,64]"
    )
    assert use["calls"] == sum(r["occurrences"] for r in got["records"])


def test_an_xla_gpu_custom_call_s_arrays_from_its_hlo():
    """The same from an HLO instruction (XLA GPU: a cuDNN fused attention whose tuple output
    ends with an empty scratch buffer, left out)."""
    from tb_roofline.costs.hlo.module import HloModule
    from tb_roofline.costs.hlo.shapes import BF16
    from tb_roofline.costs.hlo.shapes import TUPLE as tup
    from tb_roofline.costs.hlo.shapes import U8 as u8
    from tb_roofline.protos import hlo_pb2
    from tb_roofline.readers.xspace.hlo_shapes import hlo_custom_call_shape

    bf16 = BF16
    m = hlo_pb2.HloModuleProto(name="m", entry_computation_id=1)
    c = m.computations.add(name="main", id=1, root_id=4)
    for i, name in ((1, "q"), (2, "k"), (3, "v")):
        c.instructions.add(
            name=name,
            opcode="parameter",
            id=i,
            parameter_number=i - 1,
            shape=hlo_pb2.ShapeProto(element_type=bf16, dimensions=[2, 16, 512, 64]),
        )
    c.instructions.add(
        name="fmha",
        opcode="custom-call",
        id=4,
        operand_ids=[1, 2, 3],
        custom_call_target="__cudnn$fmhaSoftmax",
        shape=hlo_pb2.ShapeProto(
            element_type=tup,
            tuple_shapes=[
                hlo_pb2.ShapeProto(element_type=bf16, dimensions=[2, 16, 512, 64]),
                hlo_pb2.ShapeProto(element_type=u8, dimensions=[0]),
            ],
        ),
    )
    kind, dims, text = hlo_custom_call_shape(HloModule(m).instruction("fmha"))
    assert kind == "custom_call" and dims == ((2, 16, 512, 64),) * 4
    assert text == (
        "__cudnn$fmhaSoftmax: bf16[2,16,512,64] <- bf16[2,16,512,64] "
        "bf16[2,16,512,64] bf16[2,16,512,64]"
    )


def test_get_op_over_the_cap_is_cut_with_a_hint(logdir, runs, monkeypatch):
    """get_op gives one record per program, precision and host an op ran in (a pod's can be
    many); over the byte cap the records are cut, and the hint says how to ask for less."""
    from tb_roofline.serve.service.core import RooflineService

    service = RooflineService(logdir)
    whole = op_tools.get_op(service, runs["conv"], "aten::add_")
    assert len(whole["records"]) >= 2 and "truncated" not in whole
    size = len(json.dumps(dict(whole, records=whole["records"][:1]), separators=(",", ":")))
    monkeypatch.setenv("TB_ROOFLINE_MCP_MAX_ANSWER_KB", str((size + 600) / 1024))
    cut = op_tools.get_op(service, runs["conv"], "aten::add_")
    assert cut["records"] == whole["records"][:1]
    assert cut["truncated"]["rows_returned"] == 1 and "one host" in cut["truncated"]["hint"]
    assert len(json.dumps(cut, separators=(",", ":"))) <= (size + 600)


def test_comm_equals_the_http_api_and_the_cli(session, http, runs, logdir):
    """get_comm's points are /comm's (and `tb-roofline comm --format json`'s), on the real
    JAX captures with the message sizes and bus bytes derived by hand from their HLO
    (test_jax_collectives), and on the A100 trace."""
    from test_jax_collectives import EXPECTED

    for key, run, params in [
        *[(f"comm_{c}", runs[c], {}) for c in COMM_CASES],
        ("comm_a100", runs["a100"], {}),
        ("comm_a100_io", runs["a100"], {"host": "rank0", "infeed_outfeed": "exclude"}),
    ]:
        status, want = http("/comm", run=run, **params)
        got = _ok(session, key)
        assert status == 200 and want["points"]
        assert got["points"] == [_named(p) for p in want["points"]]
        assert (got["links"], got["kinds"], got["latency_note"]) == (
            want["links"],
            want["kinds"],
            want["latency_note"],
        )
        assert got["total_count"] == got["unfiltered_count"] == len(want["points"])
        assert got["next_offset"] is None and got["run"] == run
        out = io.StringIO()
        argv = ["comm", logdir, "--run", run, "--format", "json"] + (
            ["--host", "rank0", "--exclude-infeed-outfeed"] if params else []
        )
        assert cli.main(argv, out=out) == 0
        assert json.loads(out.getvalue())["points"] == want["points"]
    for case in COMM_CASES:
        for p in _ok(session, f"comm_{case}")["points"]:
            kind, n, _, _, message, bus = EXPECTED[case][p["operation"]]
            assert (p["kind"], p["group_size"], p["message_bytes"]) == (kind, n, message)
            assert p["bus_bytes"] == pytest.approx(bus * p["occurrences"], rel=1e-9)
            assert p["bus_bw_gbs"] == pytest.approx(p["bus_bytes"] / (p["total_time_us"] * 1e3))


def test_comm_filters_pages_rounds_and_names_the_kinds(session, runs, http):
    whole = _ok(session, "comm_a100")["points"]
    assert len(whole) > 10
    default = _ok(session, "comm_default")
    assert default["points"] == json.loads(json.dumps(shaping.shape(whole[:10], 6)))
    assert default["next_offset"] == 10 and default["total_count"] == len(whole)
    page = _ok(session, "comm_page")
    assert page["points"] == whole[2:5] and page["next_offset"] == 5 and page["offset"] == 2
    kind = _ok(session, "comm_kind")
    assert kind["points"] == [p for p in whole if p["kind"] in ("all-to-all", "reduce-scatter")]
    assert kind["total_count"] == len(kind["points"]) and kind["unfiltered_count"] == len(whole)
    error = session["comm_kind_bad"][2]
    assert session["comm_kind_bad"][0] == "tool_error" and error["field"] == "kind"
    assert error["valid_values"] == http("/comm", run=runs["a100"])[1]["kinds"]
    none = _ok(session, "comm_none")  # a run without collectives: no points, no error
    assert none["points"] == [] and none["total_count"] == 0 and none["next_offset"] is None
    error = session["comm_unknown"][2]
    assert error["code"] == "not_found" and error["field"] == "run"


def test_comm_over_the_cap_is_cut_with_next_offset(logdir, runs, monkeypatch):
    from tb_roofline.serve.service.core import RooflineService

    service = RooflineService(logdir)
    whole = mcp_tools.get_comm(service, runs["a100"], limit=1000)
    size = len(json.dumps(dict(whole, points=whole["points"][:3]), separators=(",", ":")))
    monkeypatch.setenv("TB_ROOFLINE_MCP_MAX_ANSWER_KB", str((size + 600) / 1024))
    cut = mcp_tools.get_comm(service, runs["a100"], limit=1000)
    assert cut["points"] == whole["points"][:3] and cut["next_offset"] == 3
    assert "offset=3" in cut["truncated"]["hint"]
    assert len(json.dumps(cut, separators=(",", ":"))) <= size + 600


def test_the_run_summary_is_the_first_rows_of_each_tool(session):
    summary = _ok(session, "summary")
    program = _ok(session, "summary_program")
    assert summary["total"] == program["records"][0]
    assert summary["num_steps"] == program["num_steps"]
    guidance = _ok(session, "summary_guidance")
    assert summary["classes"] == guidance["classes"]
    assert summary["findings_count"] == guidance["findings_count"]
    assert [f["id"] for f in summary["top_findings"]] == [f["id"] for f in guidance["findings"]]
    for mine, full in zip(summary["top_findings"], guidance["findings"]):
        assert mine == {k: full.get(k) for k in mine}
    ops = _ok(session, "summary_ops")
    assert summary["top_ops"] == ops["ops"] and summary["ranked_ops_count"] == ops["total_count"]
    device = _ok(session, "summary_device")["device"]
    assert summary["device"]["type"] == device["type"]
    assert [m["peak_gbs"] for m in summary["device"]["memories"]] == [
        m["peak_gbs"] for m in device["memories"]
    ]
    assert len(json.dumps(summary)) < 6_000


def test_compact_pages_count_what_they_cut(session):
    compact, full = _ok(session, "ops_compact")["ops"], _ok(session, "ops_full")["ops"]
    assert [o["operation"] for o in compact] == [o["operation"] for o in full]
    cut = 0
    for c, f in zip(compact, full):
        fps = f["fingerprints"] or []
        assert c["fingerprints"] == (fps[: op_tools.COMPACT_FINGERPRINTS] or f["fingerprints"])
        if len(fps) > op_tools.COMPACT_FINGERPRINTS:
            cut += 1
            assert c["fingerprints_count"] == len(fps)
        else:
            assert "fingerprints_count" not in c
    assert cut  # the A100 trace has ops with many input shapes
    assert len(json.dumps(compact)) < len(json.dumps(full))


def test_a_compact_op_keeps_its_longest_kernels_and_counts_them(session):
    compact, full = _ok(session, "op_compact"), _ok(session, "op_full")
    assert len(full["kernels"]) == 12 and "kernels_count" not in full
    assert compact["kernels"] == full["kernels"][: op_tools.COMPACT_ITEMS]
    assert compact["kernels_count"] == 12
    times = [k["time_us"] for k in full["kernels"]]
    assert times == sorted(times, reverse=True)  # the ones kept are the longest
    assert compact["records"] == full["records"] and compact["findings"] == full["findings"]


def test_the_agent_skill_names_every_tool_and_only_tools():
    """skills/tb-roofline/SKILL.md: an Agent Skill (YAML front matter with a name and a
    description) whose tool names are the server's."""
    import re

    import yaml

    text = open(os.path.join(REPO, "skills", "tb-roofline", "SKILL.md"), encoding="utf-8").read()
    _, front, body = text.split("---", 2)
    meta = yaml.safe_load(front)
    assert meta["name"] == "tb-roofline" and 50 < len(meta["description"]) <= 1024
    quoted = set(re.findall(r"`([a-z_]+)`", body))
    looks_like_a_tool = {n for n in quoted if re.match(r"(list|get|top)_", n)} | {"compare"}
    assert looks_like_a_tool <= TOOLS, looks_like_a_tool - TOOLS  # no tool that is not there
    assert TOOLS <= quoted, TOOLS - quoted  # and every tool has its place


def test_a_scheduler_down_at_start_leaves_the_server_answering(tmp_path):
    """`tb-roofline mcp --scheduler` with nothing listening there: the server starts and
    answers every run, converted here, each answer's diagnostics saying so (a one-shot
    command exits 2 instead: tests/execute/test_dask_cluster.py)."""
    shutil.copytree(os.path.join(DATA, "compare/jax_cpu/mlp_b64"), tmp_path / "mlp_b64")
    env = dict(_env(), TB_ROOFLINE_CACHE_DIR="off", TB_ROOFLINE_CLUSTER_CONNECT_S="2")
    dead = f"tcp://127.0.0.1:{free_port()}"
    params = StdioServerParameters(
        command=sys.executable,
        env=env,
        cwd=REPO,
        args=["-m", "tb_roofline.serve.cli.main", "mcp", str(tmp_path), "--scheduler", dead],
    )

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                runs = (await _call(session, "list_runs", {}))[1]["runs"]
                return await _call(session, "get_diagnostics", {"run": runs[0]["run"]})

    kind, answer = _run(main)
    assert kind == "ok", answer
    notes = [d for d in answer["diagnostics"] if d["code"] == "cluster_unavailable"]
    assert notes and dead in notes[0]["message"]
