"""Sliding-window attention clamped from the model's Hugging Face config
(readers/model_config.py, readers/kineto/attention_windows.py `layers_of_calls`,
costs/torch/serving_ops.py `windowed_sums`) on the real B200 gpt-oss-120b vLLM prefill step
(36 layers, alternate ones windowed to 128 keys). The expected counts are worked out here from
the raw trace (the step's sums, each attention call's recorded shapes, the config's JSON) with
vLLM's rule (tokens × min(context, window) per request), without the reader or the model;
which calls are windowed is checked against the kernels the trace says each call launched."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from test_serving_decode import B200, ROOFLINE_NAME, _load, _relabelled
from testpaths import TESTS

from tb_roofline import errors
from tb_roofline.model.records.roofline import analyze
from tb_roofline.readers import model_config
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.serve.service.core import RooflineService

CONFIG = os.path.join(TESTS, "model", "serving", "configs", "gpt_oss_120b.json")
OP = "vllm::unified_attention_with_output"
# the annotation of ROOFLINE_NAME: one prefill request of 888 tokens, Σ Sq·Sk = 888²
SQ, SK, SQSK = 888, 888, 788544
SIZES = {"c10::Float8_e4m3fn": 1, "c10::BFloat16": 2, "c10::Half": 2, "float": 4}


def _numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def _calls_in_order(events):
    return sorted(
        (e for e in events if e.get("cat") == "cpu_op" and e["name"] == OP), key=lambda e: e["ts"]
    )


def _expected(events, cfg, layers=None):
    """(FLOPs, bytes) of the step's attention calls: call i is layer i mod L; a windowed layer
    counts Sq·min(Sk, W) pairs and min(Sk, W) keys (one request), the others Sq·Sk and Sk."""
    layers = layers or cfg["num_hidden_layers"]
    windowed = ["sliding" in t for t in cfg["layer_types"][:layers]]
    w = cfg["sliding_window"]
    flops = nbytes = 0
    for i, e in enumerate(_calls_in_order(events)):
        dims, types = e["args"]["Input Dims"], e["args"]["Input type"]
        (_, hq, d), (_, hkv, _) = dims[0], dims[1]
        on_window = windowed[i % layers]
        pairs = SQ * min(SK, w) if on_window else SQSK
        keys = min(SK, w) if on_window else SK
        flops += 4 * hq * d * pairs
        nbytes += 2 * _numel(dims[0]) * SIZES[types[0]] + 2 * keys * hkv * d * SIZES[types[1]]
    return flops, nbytes


@pytest.fixture(scope="module")
def relabelled(tmp_path_factory):
    return _relabelled(tmp_path_factory.mktemp("window"), ROOFLINE_NAME)


@pytest.fixture(scope="module")
def cfg():
    with open(CONFIG, encoding="utf-8") as f:
        return json.load(f)


def test_windowed_layers_are_clamped_to_the_window(relabelled, cfg):
    data = read_kineto_file(relabelled, "h", windows=model_config.load(CONFIG))
    (s,) = analyze([data], "h").serving
    flops, nbytes = _expected(_load(B200)["traceEvents"], cfg)
    assert s["attention_flops"] == flops and s["attention_bytes"] == nbytes
    # 18 layers at 888·128 pairs instead of 888²: 43% of the unclamped count
    full = read_kineto_file(relabelled, "h")
    assert analyze([full], "h").serving[0]["attention_flops"] == 36 * 4 * 8 * 64 * SQSK
    note = next(d for d in data.diagnostics if d.code == "attention_sliding_window")
    assert note.message.startswith("sliding-window attention from gpt_oss_120b.json")
    assert (
        "window 128 keys" in note.message
        and f"18 {OP} calls on layers 0–34 every 2" in note.message
    )
    assert "exact" in note.message and "full attention" not in note.message


def test_the_config_layers_are_the_calls_that_ran_sliding_kernels(cfg):
    """Layer i = call index mod 36 puts the windowed layers exactly on the calls whose kernel
    is FlashInfer's `…SlidingOrChunkedCausal…` (each kernel's launch by correlation id, inside
    its op's span on the launching thread)."""
    ev = _load(B200)["traceEvents"]
    calls = _calls_in_order(ev)
    launch = {
        e["args"]["correlation"]: e
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    sliding = set()
    for k in (e for e in ev if e.get("cat") == "kernel" and "Sliding" in e["name"]):
        r = launch[k["args"]["correlation"]]
        owner = next(
            i
            for i, c in enumerate(calls)
            if c["tid"] == r["tid"] and c["ts"] <= r["ts"] <= c["ts"] + c["dur"]
        )
        sliding.add(owner)
    windowed = {i for i in range(len(calls)) if "sliding" in cfg["layer_types"][i % 36]}
    assert sliding == windowed and len(windowed) == 18


def test_a_call_count_that_is_no_multiple_of_the_layers_is_refused(relabelled, cfg, tmp_path):
    other = tmp_path / "model_config.json"
    other.write_text(json.dumps({**cfg, "num_hidden_layers": 24}))
    data = read_kineto_file(relabelled, "h", windows=model_config.load(str(other)))
    note = next(d for d in data.diagnostics if d.code == "attention_window_layers")
    assert "not a multiple of the 24 layers of model_config.json" in note.message
    assert "(step 0: 36)" in note.message and "full attention" in note.message
    assert analyze([data], "h").serving[0]["attention_flops"] == 36 * 4 * 8 * 64 * SQSK


def _logdir(tmp_path, relabelled, config=CONFIG):
    run = tmp_path / "logdir" / "gpt_oss"
    run.mkdir(parents=True)
    shutil.copy(relabelled, run / os.path.basename(relabelled))
    if config:
        shutil.copy(config, run / model_config.FILE_NAME)
    return str(tmp_path / "logdir")


def test_service_finds_the_config_beside_the_trace_and_sees_it_change(tmp_path, relabelled, cfg):
    logdir = _logdir(tmp_path, relabelled)
    service = RooflineService(logdir)
    run = service.list_runs()["runs"][0]["run"]
    flops, _ = _expected(_load(B200)["traceEvents"], cfg)
    assert service.analysis(run, "").serving[0]["attention_flops"] == flops
    # an edited config is a new cache key: no window now, the full count
    path = os.path.join(logdir, "gpt_oss", model_config.FILE_NAME)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**cfg, "sliding_window": None}, f)
    assert service.analysis(run, "").serving[0]["attention_flops"] == 36 * 4 * 8 * 64 * SQSK


def test_explicit_config_reaches_service_notebook_and_mcp(tmp_path, relabelled, cfg):
    import tb_roofline
    from tb_roofline.serve.mcp.tools import get_diagnostics

    logdir = _logdir(tmp_path, relabelled, config=None)
    plain = RooflineService(logdir)
    run = plain.list_runs()["runs"][0]["run"]
    assert plain.analysis(run, "").serving[0]["attention_flops"] == 36 * 4 * 8 * 64 * SQSK
    service = RooflineService(logdir, model_config_file=CONFIG)
    flops, _ = _expected(_load(B200)["traceEvents"], cfg)
    assert service.analysis(run, "").serving[0]["attention_flops"] == flops
    codes = [d["code"] for d in get_diagnostics(service, run)["diagnostics"]]
    assert "attention_sliding_window" in codes
    nb = tb_roofline.load(logdir, model_config_file=CONFIG)
    assert any("window 128 keys" in d["message"] for d in nb.diagnostics())


def _report(*args):
    return subprocess.run(
        [sys.executable, "-m", "tb_roofline.serve.cli.main", "report", *args, "--no-progress"],
        capture_output=True,
        text=True,
        cwd=os.path.join(TESTS, ".."),
    )


@pytest.mark.slow
def test_cli_model_config_flag_and_a_bad_file(tmp_path, relabelled):
    logdir = _logdir(tmp_path, relabelled, config=None)
    done = _report(logdir, "--model-config", CONFIG, "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert any(d["code"] == "attention_sliding_window" for d in report["diagnostics"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"num_hidden_layers": 36, "sliding_window": "128"}')
    err = _report(logdir, "--model-config", str(bad))
    assert err.returncode == 2
    assert "bad.json: sliding_window must be an integer or null" in err.stderr


# ----------------------------------------------------------------------------- config rules


def _windowed(cfg):
    return model_config.windows_of(cfg, "c.json").windowed_layers()


def test_layer_types_pattern_qwen2_uniform_and_text_config():
    assert _windowed(
        {
            "num_hidden_layers": 4,
            "sliding_window": 8,
            "layer_types": ["full", "sliding_attention"] * 2,
        }
    ) == [1, 3]
    # Gemma 3: every 6th layer full
    gemma3 = {"num_hidden_layers": 12, "sliding_window": 512, "sliding_window_pattern": 6}
    assert _windowed(gemma3) == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert _windowed({"model_type": "gemma2", "num_hidden_layers": 4, "sliding_window": 9}) == [
        0,
        2,
    ]
    qwen2 = {"num_hidden_layers": 6, "sliding_window": 64, "max_window_layers": 4}
    assert _windowed({**qwen2, "use_sliding_window": True}) == [4, 5]
    assert _windowed({**qwen2, "use_sliding_window": False}) == []
    assert _windowed({"num_hidden_layers": 3, "sliding_window": 4096}) == [0, 1, 2]  # Mistral
    assert _windowed({"num_hidden_layers": 3, "sliding_window": None}) == []
    multimodal = {"model_type": "gemma3", "text_config": gemma3, "vision_config": {}}
    w = model_config.windows_of(multimodal, "c.json")
    assert (w.window, w.layers, w.rule) == (512, 12, "sliding_window_pattern")


@pytest.mark.parametrize(
    "cfg, says",
    [
        ({}, "num_hidden_layers must be a positive integer"),
        ({"num_hidden_layers": 2, "sliding_window": 1.5}, "sliding_window must be an integer"),
        (
            {"num_hidden_layers": 4, "sliding_window": 8, "layer_types": ["sliding"]},
            "layer_types names 1 layers, num_hidden_layers 4",
        ),
        ({"num_hidden_layers": 2, "text_config": []}, "text_config is not an object"),
    ],
)
def test_bad_configs_say_what_is_wrong(cfg, says):
    with pytest.raises(model_config.ModelConfigError, match=says):
        model_config.windows_of(cfg, "c.json")


def test_a_bad_file_is_the_users_error(tmp_path, relabelled):
    bad = tmp_path / "model_config.json"
    bad.write_text("[1, 2]")
    service = RooflineService(
        _logdir(tmp_path, relabelled, config=None), model_config_file=str(bad)
    )
    run = service.list_runs()["runs"][0]["run"]
    with pytest.raises(
        errors.BadModelConfigFileError, match="model_config.json: not a JSON object"
    ):
        service.analysis(run, "")


def test_windowed_sums_exact_or_bound():
    """The clamp of one phase from its sums: exact for one request or when every context fits
    the window, else an upper bound (min of the two sums)."""
    from tb_roofline.costs.torch.serving_ops import windowed_sums
    from tb_roofline.readers.serving_steps import PhaseSums

    one = PhaseSums(1, sq=888, sk=888, sqsq=888**2, sqsk=888**2)
    assert windowed_sums(one, 128) == (888 * 128, 128, True)
    # 3 decode requests with contexts summing to 60: none can exceed 60 − 2 = 58 ≤ 64, exact
    small = PhaseSums(3, sq=3, sk=60, sqsq=3, sqsk=60)
    assert windowed_sums(small, 64) == (60, 60, True)
    # 4 with contexts 10, 20, 30, 40 (Σ 100): one of them could be 97 > 64, so only a bound
    assert windowed_sums(PhaseSums(4, sq=4, sk=100, sqsq=4, sqsk=100), 64) == (100, 100, False)
    # contexts 10 and 200 under window 64: true Σ min = 74; the sums give min(210, 128) = 128
    mixed = PhaseSums(2, sq=2, sk=210, sqsq=2, sqsk=210)
    assert windowed_sums(mixed, 64) == (128, 128, False)


def test_disk_cache_keys_hold_the_config(tmp_path, relabelled, cfg, monkeypatch):
    """A converted trace goes to the disk cache under its file's identity and its config's: a
    restart with the same config reads nothing, an edited config is a new conversion."""
    from tb_roofline.execute import pool

    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(tmp_path / "cache"))
    logdir = _logdir(tmp_path, relabelled)
    first = RooflineService(logdir)
    run = first.list_runs()["runs"][0]["run"]
    flops, _ = _expected(_load(B200)["traceEvents"], cfg)
    assert first.analysis(run, "").serving[0]["attention_flops"] == flops
    with monkeypatch.context() as m:  # only the disk cache can answer
        m.setattr(pool, "read_files", lambda *a, **k: pytest.fail("read a cached file"))
        again = RooflineService(logdir)
        assert again.analysis(run, "").serving[0]["attention_flops"] == flops
    path = os.path.join(logdir, "gpt_oss", model_config.FILE_NAME)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**cfg, "sliding_window": 64}, f)
    read = []
    real = pool.read_files
    monkeypatch.setattr(pool, "read_files", lambda jobs, **k: read.append(jobs) or real(jobs, **k))
    edited = RooflineService(logdir).analysis(run, "").serving[0]["attention_flops"]
    assert len(read) == 1 and edited == 18 * 4 * 8 * 64 * (SQSK + SQ * 64)


def test_the_service_looks_for_the_readers_file_name():
    from tb_roofline.serve.service import model_config_file

    assert model_config_file.FILE_NAME == model_config.FILE_NAME
