"""A serving engine's own FLOP and byte counters (`--enable-mfu-metrics`, the Prometheus text
format: readers/metrics/engine.py) beside the profile's per serving step
(model/serving/engine_figures.py) on the real SGLang Qwen3-8B decode trace. The engine's figures
are worked out here from the
model's config and the step annotation, with vLLM's estimator formulas (vllm/v1/metrics/perf.py),
without the reader or the model; the fixture was built by tools/build_engine_metrics_fixture.py."""

import os
import shutil
import subprocess
import sys

import pytest
from testpaths import TESTS

from tb_roofline.readers.metrics import engine as engine_metrics
from tb_roofline.serve.service.core import RooflineService

HERE = TESTS
REPO = os.path.join(HERE, "..")
DECODE = os.path.join(REPO, "testdata", "kineto", "sglang_qwen3_8b_decode")
FIXTURE = os.path.join(REPO, "testdata", "engine_metrics", "sglang_qwen3_8b_decode.prom")

# Qwen3-8B: hidden, layers, heads, KV heads, head dim, FFN, vocab; bf16 (2 B) everywhere
D, L, Q, KV, HD, DI, V = 4096, 36, 32, 8, 128, 12288, 151936
# the step annotation `…generation_32(sq32sk32785sqsq32sqsk32785)`: 32 decode tokens whose
# query × key lengths sum to 32,785
TOKENS, QK = 32, 32785


def _engine_step():
    """(FLOPs, bytes read + written) the estimator gives the step, per token and layer."""
    per_token_layer = 2 * D * (Q * HD + 2 * KV * HD) + 2 * Q * HD * D + 3 * 2 * D * DI
    flops = TOKENS * L * per_token_layer + 2 * 2 * Q * HD * QK * L + 2 * TOKENS * D * V
    weights = L * (D * (Q + 2 * KV) * HD + Q * HD * D + 3 * D * DI) + D * V
    kv_read = 2 * QK * KV * HD * L
    acts_read = TOKENS * L * (D + Q * HD + Q * HD + D + 2 * DI + DI) + TOKENS * D
    acts_written = TOKENS * L * ((Q + 2 * KV) * HD + 2 * KV * HD + D + 2 * DI + DI + D)
    return flops, 2 * (weights + kv_read + acts_read + acts_written + TOKENS * V)


def _logdir(tmp_path, prom=FIXTURE):
    run = tmp_path / "logdir" / "decode"
    shutil.copytree(DECODE, run)
    if prom:
        shutil.copy(prom, run / engine_metrics.FILE_NAME)
    return str(tmp_path / "logdir")


def test_grammar_scrapes_and_labels():
    text = (
        "# HELP vllm:estimated_flops_per_gpu_total Estimated FLOPs.\n"
        "# TYPE vllm:estimated_flops_per_gpu_total counter\n"
        'vllm:estimated_flops_per_gpu_total{engine="0",model_name="m \\"x\\", y"} 1e12\n'
        'vllm:estimated_read_bytes_per_gpu_total{engine="0",model_name="m \\"x\\", y"} 10\n'
        'vllm:estimated_write_bytes_per_gpu_total{engine="0",model_name="m \\"x\\", y",} 4\n'
        'vllm:iteration_tokens_total_count{engine="0",model_name="m \\"x\\", y"} 7\n'
        'vllm:iteration_tokens_total_bucket{le="+Inf"} 7\n'
        "vllm:num_requests_running NaN\n"
        "\n"
        'vllm:estimated_flops_per_gpu_total{model_name="m \\"x\\", y",engine="0"} 3e12 1700\n'
        'vllm:estimated_read_bytes_per_gpu_total{engine="0",model_name="m \\"x\\", y"} 25\n'
        'vllm:estimated_write_bytes_per_gpu_total{engine="0",model_name="m \\"x\\", y"} 9\n'
        'vllm:iteration_tokens_total_count{engine="0",model_name="m \\"x\\", y"} 11\n'
    )
    m = engine_metrics.parse(text, "t.prom")
    assert (m.engine, m.scrapes) == ("vllm", 2)
    assert (m.flops, m.read_bytes, m.write_bytes, m.steps) == (2e12, 15.0, 5.0, 4.0)
    assert m.labels == {"engine": "0", "model_name": 'm "x", y'}
    once = engine_metrics.parse(text.split("\n\n")[0], "t.prom")
    assert (once.scrapes, once.flops, once.steps) == (1, 1e12, None)


@pytest.mark.parametrize(
    "text, says",
    [
        ("vllm:estimated_flops_per_gpu_total{engine=0} 1\n", "line 1: a label set"),
        ("# c\nvllm:estimated_flops_per_gpu_total 1 2 3\n", "line 2: not a Prometheus sample"),
        ("sglang:estimated_flops_per_gpu_total -1\n", "line 1: a counter must be"),
        ("sglang:estimated_flops_per_gpu_total NaN\n", "line 1: a counter must be"),
        ("vllm:estimated_flops_per_gpu_total x\n", "line 1: 'x' is not a number"),
        ("vllm:num_requests_running 1\n", "no vllm:/sglang: estimated_"),
        (
            'vllm:estimated_flops_per_gpu_total{engine="0"} 1\n'
            'vllm:estimated_flops_per_gpu_total{engine="1"} 1\n',
            "2 engines' counters",
        ),
    ],
)
def test_bad_files_say_where(text, says):
    with pytest.raises(engine_metrics.EngineMetricsError, match=says):
        engine_metrics.parse(text, "t.prom")


def test_a_restart_between_scrapes_is_unknown():
    text = "sglang:estimated_flops_per_gpu_total 9\nsglang:estimated_flops_per_gpu_total 2\n"
    assert engine_metrics.parse(text, "t.prom").flops is None


def test_fixture_holds_the_estimators_step():
    m = engine_metrics.load(FIXTURE)
    flops, nbytes = _engine_step()
    assert (m.engine, m.scrapes, m.steps) == ("sglang", 2, None)
    assert m.flops == flops == 503_695_605_760
    assert m.read_bytes + m.write_bytes == nbytes


def test_guidance_sets_the_engine_beside_the_profile(tmp_path):
    service = RooflineService(_logdir(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    e = service.guidance(run, "")["engine_figures"]
    flops, nbytes = _engine_step()
    theirs, ours = e["engine_per_step"], e["ours_per_step"]
    assert (theirs["steps"], theirs["steps_from"]) == (1, "profile")
    assert (theirs["flops"], theirs["bytes"]) == (flops, nbytes)
    # the profile's GEMMs (from the capture's shapes) and attention (from the annotation) count
    # exactly the work the estimator counts; the rest are norms, RoPE, copies
    assert ours["model_flops"] == flops
    assert flops < ours["flops"] < 1.001 * flops
    steps = service.program(run, "")["serving_steps"]
    assert ours["bytes"] == steps[0]["op_bytes"]
    assert e["ratio"]["bytes"] == pytest.approx(ours["bytes"] / nbytes)
    assert e["ratio"]["model_flops"] == 1.0
    assert any("just before and just after the profile" in n for n in e["notes"])


def test_without_engine_metrics_there_is_nothing_to_compare(tmp_path):
    service = RooflineService(_logdir(tmp_path, prom=None))
    run = service.list_runs()["runs"][0]["run"]
    assert service.guidance(run, "")["engine_figures"] is None


def test_one_scrape_is_shown_not_compared(tmp_path):
    one = tmp_path / "one.prom"
    with open(FIXTURE, encoding="utf-8") as f:
        text = f.read()
    one.write_text(text[: text.index("# HELP sglang:num_running_reqs", 10)])
    service = RooflineService(_logdir(tmp_path), engine_metrics_file=str(one))
    run = service.list_runs()["runs"][0]["run"]
    e = service.guidance(run, "")["engine_figures"]
    assert e["engine"]["scrapes"] == 1 and e["engine"]["source"] == "one.prom"
    assert e["engine_per_step"]["flops"] is None and e["ratio"]["flops"] is None
    assert any("totals since the engine started" in n for n in e["notes"])


def _report(*args):
    return subprocess.run(
        [sys.executable, "-m", "tb_roofline.serve.cli.main", "report", *args, "--no-progress"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def test_cli_engine_metrics_flag_and_a_bad_file(tmp_path):
    logdir = _logdir(tmp_path, prom=None)
    done = _report(logdir, "--engine-metrics", FIXTURE)
    assert done.returncode == 0, done.stderr
    assert "Engine figures (sglang, sglang_qwen3_8b_decode.prom), per step:" in done.stdout
    assert "engine  503.70 GFLOP" in done.stdout
    assert "profile / engine: FLOPs 1.000 (GEMMs and attention 1.000)" in done.stdout
    bad = tmp_path / "bad.prom"
    bad.write_text("sglang:estimated_flops_per_gpu_total{tp_rank=0} 1\n")
    err = _report(logdir, "--engine-metrics", str(bad))
    assert err.returncode == 2
    assert "bad.prom line 1: a label set" in err.stderr


def test_plugin_routes_say_what_is_wrong_with_the_file(tmp_path):
    """The TensorBoard plugin reads the logdir's engine_metrics.prom: the guidance carries its
    figures; a broken one is a 422 naming the file and line, and the records still load."""
    from tensorboard.plugins import base_plugin
    from werkzeug import test as wtest
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.plugin import RooflinePlugin

    logdir = _logdir(tmp_path)

    def client():
        apps = RooflinePlugin(base_plugin.TBContext(logdir=logdir)).get_plugin_apps()
        return wtest.Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)

    c = client()
    run = c.get("/runs").json["runs"][0]["run"]
    good = c.get(f"/guidance?run={run}").json["engine_figures"]
    assert good["engine_per_step"]["flops"] == _engine_step()[0]
    prom = os.path.join(logdir, "decode", engine_metrics.FILE_NAME)
    with open(prom, "a", encoding="utf-8") as f:
        f.write('sglang:estimated_flops_per_gpu_total{tp_rank="0"} oops\n')
    r = client().get(f"/guidance?run={run}")
    assert r.status_code == 422
    assert r.json["error"]["code"] == "bad_engine_metrics_file"
    assert "engine_metrics.prom line 31: 'oops' is not a number" in r.json["error"]["message"]
    assert client().get(f"/program?run={run}").status_code == 200


def test_mcp_and_the_json_report_carry_the_same_figures(tmp_path):
    from tb_roofline.serve.mcp.tools import get_guidance

    service = RooflineService(_logdir(tmp_path))
    run = service.list_runs()["runs"][0]["run"]
    plain = service.guidance(run, "")["engine_figures"]
    mcp = get_guidance(service, run)["engine_figures"]
    # MCP rounds numbers to significant digits (docs/mcp.md)
    assert mcp["engine_per_step"]["flops"] == pytest.approx(plain["engine_per_step"]["flops"], 1e-5)
    assert mcp["notes"] == plain["notes"]
    report = service.report(run, "")
    assert report["guidance"]["engine_figures"] == plain


def test_vllm_step_count_divides_the_window(tmp_path):
    """vLLM exports its step count (the iteration histogram): the window's figures are per
    engine step, and a count other than the profile's serving steps is said."""
    flops, nbytes = _engine_step()
    labels = '{engine="0",model_name="Qwen/Qwen3-8B"}'

    def scrape(steps: int, n: int) -> str:
        return (
            f"vllm:estimated_flops_per_gpu_total{labels} {float(flops * n)}\n"
            f"vllm:estimated_read_bytes_per_gpu_total{labels} {float(nbytes * n)}\n"
            f"vllm:estimated_write_bytes_per_gpu_total{labels} 0.0\n"
            f"vllm:iteration_tokens_total_count{labels} {float(steps)}\n"
        )

    prom = tmp_path / "vllm.prom"
    prom.write_text(scrape(10, 10) + scrape(13, 13))
    service = RooflineService(_logdir(tmp_path), engine_metrics_file=str(prom))
    run = service.list_runs()["runs"][0]["run"]
    e = service.guidance(run, "")["engine_figures"]
    theirs = e["engine_per_step"]
    assert (theirs["steps"], theirs["steps_from"]) == (3, "engine")
    assert (theirs["flops"], theirs["bytes"]) == (flops, nbytes)
    assert any("the engine counted 3 steps" in n and "holds 1" in n for n in e["notes"])
