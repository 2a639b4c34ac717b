"""Extra H200 captures: a decode step eager and as CUDA-graph replays, with fp8 GEMMs.

Writes into OUTDIR: torch_decode_eager.pt.trace.json.gz, torch_decode_graph.pt.trace.json.gz,
torch_decode_ref.json (FlopCounterMode totals, shapes, dtypes), probe.txt (profiler options seen).
"""

import glob
import json
import os
import shutil
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler
from torch.utils.flop_counter import FlopCounterMode

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
probe = []


def note(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    probe.append(s)


note("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
try:
    note("ExperimentalConfig doc:", torch._C._profiler._ExperimentalConfig.__init__.__doc__)
except Exception as e:  # noqa: BLE001
    note("ExperimentalConfig doc failed", e)
note("ProfilerActivity:", [a for a in dir(ProfilerActivity) if not a.startswith("_")])
note(
    "profile params:",
    list(profile.__init__.__code__.co_varnames[: profile.__init__.__code__.co_argcount]),
)

dev = "cuda"
B, H, FF, LAYERS = 16, 4096, 14336, 4
torch.manual_seed(0)
ws = [
    (
        torch.randn(H, 3 * H, device=dev, dtype=torch.bfloat16) * 0.02,
        torch.randn(H, H, device=dev, dtype=torch.bfloat16) * 0.02,
    )
    for _ in range(LAYERS)
]
# fp8 MLP weights (e4m3), column-major second operand as _scaled_mm requires
w_up = [(torch.randn(FF, H, device=dev) * 0.02).to(torch.float8_e4m3fn) for _ in range(LAYERS)]
w_dn = [(torch.randn(H, FF, device=dev) * 0.02).to(torch.float8_e4m3fn) for _ in range(LAYERS)]
one = torch.ones((), device=dev, dtype=torch.float32)
lm_head = torch.randn(H, 32000, device=dev, dtype=torch.bfloat16) * 0.02
x0 = torch.randn(B, H, device=dev, dtype=torch.bfloat16)


def step(x):
    for (wqkv, wo), wu, wd in zip(ws, w_up, w_dn):
        qkv = x @ wqkv
        x = x + (qkv[:, :H] * torch.sigmoid(qkv[:, H : 2 * H]) + qkv[:, 2 * H :]) @ wo
        h = torch.nn.functional.rms_norm(x, (H,))
        u = torch._scaled_mm(
            h.to(torch.float8_e4m3fn), wu.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
        )
        u = torch.nn.functional.silu(u)
        x = x + torch._scaled_mm(
            u.to(torch.float8_e4m3fn), wd.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
        )
    return x @ lm_head


with torch.no_grad():
    for _ in range(3):
        step(x0)
    torch.cuda.synchronize()
    with FlopCounterMode(display=False) as fc:
        step(x0)
    ref = {
        "total_flops": fc.get_total_flops(),
        "by_op": {str(k): v for k, v in fc.get_flop_counts().get("Global", {}).items()},
        "batch": B,
        "hidden": H,
        "ffn": FF,
        "layers": LAYERS,
        "vocab": 32000,
        "weights": {
            "qkv": "bf16 [4096,12288]",
            "o": "bf16 [4096,4096]",
            "up": "float8_e4m3fn [14336,4096]",
            "down": "float8_e4m3fn [4096,14336]",
            "lm_head": "bf16 [4096,32000]",
        },
    }

    def trace(name, body, steps=5):
        with tempfile.TemporaryDirectory() as tmp:
            t = time.time()
            with profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                record_shapes=True,
                with_flops=True,
                on_trace_ready=tensorboard_trace_handler(tmp, worker_name="h200", use_gzip=True),
            ):
                for i in range(steps):
                    with torch.profiler.record_function(f"ProfilerStep#{i}"):
                        body()
                    torch.cuda.synchronize()
            f = glob.glob(os.path.join(tmp, "*.pt.trace.json.gz"))[0]
            shutil.copy(f, os.path.join(OUT, name))
            note(name, "ok", f"{time.time() - t:.1f}s", os.path.getsize(f))

    trace("torch_decode_eager.pt.trace.json.gz", lambda: step(x0))
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step(x0)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        y = step(x0)
    g.replay()
    torch.cuda.synchronize()
    trace("torch_decode_graph.pt.trace.json.gz", g.replay)
    # the decode step's wall time from CUDA events, to compare with the trace
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(20):
        g.replay()
    e1.record()
    torch.cuda.synchronize()
    ref["graph_replay_ms_mean_of_20"] = e0.elapsed_time(e1) / 20
    json.dump(ref, open(os.path.join(OUT, "torch_decode_ref.json"), "w"), indent=1)
    note("ref", json.dumps({k: ref[k] for k in ("total_flops", "graph_replay_ms_mean_of_20")}))

open(os.path.join(OUT, "probe.txt"), "w").write("\n".join(probe) + "\n")
