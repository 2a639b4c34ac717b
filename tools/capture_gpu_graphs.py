# ruff: noqa: E501, E701, E702  (a capture script run once on a lent GPU machine)
"""H200: graph capture traces (two batch buckets) and a replay trace of both, like a serving engine."""

import glob
import os
import shutil
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
dev = "cuda"
H, FF, LAYERS = 4096, 14336, 4
torch.manual_seed(0)
ws = [
    (
        torch.randn(H, 3 * H, device=dev, dtype=torch.bfloat16) * 0.02,
        torch.randn(H, H, device=dev, dtype=torch.bfloat16) * 0.02,
        torch.randn(H, FF, device=dev, dtype=torch.bfloat16) * 0.02,
        torch.randn(FF, H, device=dev, dtype=torch.bfloat16) * 0.02,
    )
    for _ in range(LAYERS)
]
lm_head = torch.randn(H, 32000, device=dev, dtype=torch.bfloat16) * 0.02


def step(x):
    for wqkv, wo, wu, wd in ws:
        qkv = x @ wqkv
        x = x + (qkv[:, :H] * torch.sigmoid(qkv[:, H : 2 * H]) + qkv[:, 2 * H :]) @ wo
        h = torch.nn.functional.rms_norm(x, (H,))
        x = x + torch.nn.functional.silu(h @ wu) @ wd
    return x @ lm_head


def prof(tmp):
    return profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        on_trace_ready=tensorboard_trace_handler(tmp, worker_name="h200", use_gzip=True),
    )


graphs = {}
with torch.no_grad():
    for bs in (8, 16):
        x = torch.randn(bs, H, device=dev, dtype=torch.bfloat16)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step(x)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with tempfile.TemporaryDirectory() as tmp:
            with prof(tmp):
                with torch.profiler.record_function(f"capture_bs{bs}"):
                    with torch.cuda.graph(g):
                        y = step(x)
            torch.cuda.synchronize()
            f = glob.glob(os.path.join(tmp, "*.pt.trace.json.gz"))[0]
            shutil.copy(f, f"{OUT}/capture_bs{bs}.pt.trace.json.gz")
        graphs[bs] = (g, x, y)
        print("captured", bs, os.path.getsize(f"{OUT}/capture_bs{bs}.pt.trace.json.gz"), flush=True)
    for g, _, _ in graphs.values():
        g.replay()
    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        with prof(tmp):
            for i in range(6):
                bs = 8 if i % 2 == 0 else 16
                with torch.profiler.record_function(f"ProfilerStep#{i}"):
                    with torch.profiler.record_function(f"decode bs={bs}"):
                        graphs[bs][0].replay()
                    torch.cuda.synchronize()
        f = glob.glob(os.path.join(tmp, "*.pt.trace.json.gz"))[0]
        shutil.copy(f, f"{OUT}/replay.pt.trace.json.gz")
        print("replay", os.path.getsize(f"{OUT}/replay.pt.trace.json.gz"), flush=True)
