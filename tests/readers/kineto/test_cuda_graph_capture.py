"""CUDA graph replays attributed to a CUDA capture trace, on the real H200 traces of
testdata/kineto/h200_graph_buckets: a 4-layer decode step captured at batch 8 and 16 (one
capture trace each) and replayed alternately, six steps.

A CUDA capture trace names no kernels (its `cudaLaunchKernel` / `cuLaunchKernelEx` calls carry
only a correlation id, and captured kernels do not run), so a window is matched to a replay by
its node count on one stream, in order; two windows of the same count with other shapes are
told apart only by the batch the capture file and the replaying serving step state, else none
is picked. The reference FLOPs come from the capture traces' own `aten::mm` calls (2·M·K·N),
read here without the reader.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import shutil

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.readers.kineto import read_kineto_file

RUN = os.path.join(TESTS, "..", "testdata", "kineto", "h200_graph_buckets")


def _json(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _capture_mm_flops(batch: int) -> float:
    """2·M·K·N over the `aten::mm` calls inside the capture window of the batch-`batch` file."""
    (path,) = glob.glob(os.path.join(RUN, "capture", f"*_bs{batch}.*.gz"))
    events = _json(path)["traceEvents"]
    calls = {e["name"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    begin, end = calls["cudaStreamBeginCapture"], calls["cudaStreamEndCapture"]
    total = 0.0
    for e in events:
        if e.get("cat") == "cpu_op" and e["name"] == "aten::mm" and begin < e["ts"] < end:
            (m, k), (_, n) = e["args"]["Input Dims"][:2]
            total += 2.0 * m * k * n
    return total


def _run(tmp_path, batches=(8, 16), steps_as_engine=True, keep_steps=None):
    """A copy of the run: the capture files of `batches`; the replay's `decode bs=N` step labels
    written as SGLang's `step[DECODE bs=N]` (the form the engines' steps are read in) when
    `steps_as_engine`; only the ProfilerSteps in `keep_steps` when given."""
    dst = tmp_path / "run"
    os.makedirs(dst / "capture")
    for b in batches:
        (src,) = glob.glob(os.path.join(RUN, "capture", f"*_bs{b}.*.gz"))
        shutil.copy(src, dst / "capture")
    (replay,) = glob.glob(os.path.join(RUN, "*.pt.trace.json.gz"))
    doc = _json(replay)
    events = doc["traceEvents"]
    if keep_steps is not None:
        drop = [
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e.get("cat") == "user_annotation"
            and e["name"].startswith("ProfilerStep#")
            and int(e["name"].split("#")[1]) not in keep_steps
        ]
        gone = {
            e["args"]["correlation"]
            for e in events
            if e.get("name") == "cudaGraphLaunch" and any(a <= e["ts"] <= b for a, b in drop)
        }
        events = [
            e
            for e in events
            if not any(a <= e.get("ts", -1) <= b for a, b in drop)
            and (e.get("args") or {}).get("correlation") not in gone
        ]
    for e in events:
        if steps_as_engine and e.get("name", "").startswith("decode bs="):
            e["name"] = "step[DECODE bs=%s]" % e["name"].split("=")[1]
    doc["traceEvents"] = events
    out = dst / os.path.basename(replay)
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    return read_kineto_file(str(out), "h")


def _matmul_flops(data) -> float:
    c = data.ops.columns
    return float(np.sum(c["flops"][c["category"] == "matmul"]))


def _codes(data):
    return {d.code: d.message for d in data.diagnostics}


def test_capture_trace_names_no_kernels():
    """The premise: the capture window launches as many nodes as each replay runs kernels, and
    none of its launch calls names a kernel."""
    for b in (8, 16):
        (path,) = glob.glob(os.path.join(RUN, "capture", f"*_bs{b}.*.gz"))
        events = _json(path)["traceEvents"]
        calls = sorted(
            (e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")),
            key=lambda e: e["ts"],
        )
        names = [e["name"] for e in calls]
        i, j = names.index("cudaStreamBeginCapture"), names.index("cudaStreamEndCapture")
        launches = [e for e in calls[i:j] if "LaunchKernel" in e["name"]]
        assert len(launches) == 53
        assert not any("kernel" in e["args"] for e in launches)
    replay = _json(glob.glob(os.path.join(RUN, "*.pt.trace.json.gz"))[0])["traceEvents"]
    graph = [e["args"]["correlation"] for e in replay if e.get("name") == "cudaGraphLaunch"]
    kernels = [e for e in replay if e.get("cat") == "kernel"]
    assert len(graph) == 6
    for corr in graph:
        assert sum(1 for k in kernels if k["args"]["correlation"] == corr) == 53


def test_buckets_told_apart_by_the_steps_batch(tmp_path):
    data = _run(tmp_path)
    assert "graph_capture" in _codes(data)
    assert "graph_replay_without_capture" not in _codes(data)
    expected = 3 * _capture_mm_flops(8) + 3 * _capture_mm_flops(16)
    assert _matmul_flops(data) == pytest.approx(expected, rel=1e-9)
    c = data.ops.columns
    shapes = set(c["fingerprint"][c["category"] == "matmul"])
    assert "shapes:[[8,4096],[4096,12288]]" in shapes
    assert "shapes:[[16,4096],[4096,12288]]" in shapes


def test_buckets_without_a_batch_tie(tmp_path):
    """The real trace's own step labels are no engine's: nothing states the replay's batch, so
    the two buckets tie and neither is picked."""
    data = _run(tmp_path, steps_as_engine=False)
    codes = _codes(data)
    assert "graph_capture_tie" in codes and "graph_replay_without_capture" in codes
    assert _matmul_flops(data) == 0


def test_one_capture_for_two_graphs_is_not_guessed(tmp_path):
    """Only the batch-8 capture beside a trace that replays two graphs of 53 kernels: the
    batch-16 replays must not be costed with batch-8 shapes; nothing states which is which
    without step labels, so neither is taken."""
    data = _run(tmp_path, batches=(8,), steps_as_engine=False)
    assert _matmul_flops(data) == 0
    assert "graph_replay_without_capture" in _codes(data)


def test_one_capture_for_the_one_graph_replayed(tmp_path):
    """The batch-8 steps alone (0, 2, 4) with the batch-8 capture: one graph of that size, one
    window: matched by position."""
    data = _run(tmp_path, batches=(8,), steps_as_engine=False, keep_steps={0, 2, 4})
    assert "graph_capture" in _codes(data)
    assert _matmul_flops(data) == pytest.approx(3 * _capture_mm_flops(8), rel=1e-9)
