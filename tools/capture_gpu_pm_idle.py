# ruff: noqa: E501, E402  (a capture script whose child program is source text)
"""Second H200 capture: JAX PM-sampling retries with stderr kept; a PyTorch trace whose idle has
known causes (host sleep before launch, cross-stream event wait, blocking copy) with sync events on."""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
LOG = []


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    LOG.append(s)


src = open(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "capture_gpu_profiles.py")
).read()
ns = {}
exec(src.split("JAX_CHILD = r'''")[0], ns)
child = src.split("JAX_CHILD = r'''")[1].split("'''")[0]
open("/tmp/child.py", "w").write(child)
sets = {
    "a": "sm__cycles_active.avg,dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "b": "sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum",
    "c": "sm__inst_executed_pipe_tensor.sum,dram__bytes_read.sum,dram__bytes_write.sum",
}
for k, m in sets.items():
    out_pb = f"{OUT}/jax_mlp_pm_{k}.xplane.pb"
    r = subprocess.run(
        [sys.executable, "/tmp/child.py", "mlp", out_pb, f"/tmp/cost_{k}.json"],
        env=dict(os.environ, XLA_FLAGS="--xla_gpu_enable_command_buffer=", PM_COUNTERS=m),
        capture_output=True,
        text=True,
        timeout=120,
    )
    size = os.path.getsize(out_pb) if os.path.exists(out_pb) else None
    log(f"pm {k} {m} rc={r.returncode} size={size}")
    log(
        "  stderr:",
        "\n".join(
            l
            for l in r.stderr.splitlines()
            if any(w in l.lower() for w in ("pm", "cupti", "sampl", "counter", "error", "fail"))
        )[-1500:],
    )
    if size and size < 20000:
        os.remove(out_pb)
    shutil.rmtree(out_pb + ".dir", ignore_errors=True)

import torch
from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

dev = "cuda"
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
small = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
side = torch.cuda.Stream()
host = torch.empty(64 << 20, dtype=torch.uint8, pin_memory=False)
big = torch.empty(64 << 20, dtype=torch.uint8, device=dev)


def step():
    time.sleep(0.003)  # host-bound: nothing launched for 3 ms
    y = a @ a  # long GEMM (~1.4 ms)
    ev = torch.cuda.Event()
    ev.record()
    with torch.cuda.stream(side):
        side.wait_event(ev)  # side stream waits on the GEMM
        z = small @ small
    big.copy_(host)  # pageable H2D copy: blocking memcpy
    torch.cuda.current_stream().wait_stream(side)
    w = (y[:1024, :1024] + z).sum().item()  # sync to host
    return w


for _ in range(3):
    step()
torch.cuda.synchronize()
cfg = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
with tempfile.TemporaryDirectory() as tmp:
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        experimental_config=cfg,
        on_trace_ready=tensorboard_trace_handler(tmp, worker_name="h200", use_gzip=True),
    ) as p:
        for i in range(5):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                step()
    f = glob.glob(os.path.join(tmp, "*.pt.trace.json.gz"))[0]
    shutil.copy(f, f"{OUT}/torch_idle_causes.pt.trace.json.gz")
    log("torch idle ok", os.path.getsize(f))
open(f"{OUT}/capture2_log.txt", "w").write("\n".join(LOG) + "\n")
