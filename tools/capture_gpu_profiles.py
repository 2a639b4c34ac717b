# ruff: noqa: E501, E402  (a capture script whose child program is source text)
"""Capture real GPU profiles (JAX/XLA XSpace and PyTorch Kineto traces) in one run.

Meant for a machine with an NVIDIA GPU, JAX (CUDA) and PyTorch: run, e.g.

    PYTHONUNBUFFERED=1 python3 capture_gpu_profiles.py "$OUT"

It writes at most 9 flat files into OUTDIR:
  jax_mlp.xplane.pb, jax_mlp.cost.json          JAX train step, XLA command buffers off
  jax_attention.xplane.pb, jax_attention.cost.json
  jax_attention_cmdbuf.xplane.pb                 same program, XLA defaults (command buffers on)
  jax_mlp_pm.xplane.pb                           the MLP with CUPTI PM sampling (hardware counters on
                                                 each GPU plane's "_counters_" line; may be refused)
  torch_block.pt.trace.json.gz                   PyTorch transformer block, record_shapes
  torch_block_counters.pt.trace.json.gz          same, CUPTI range-profiler FLOP counters (may fail)
  capture_log.txt                                what ran, versions, device names, failures
Each *.cost.json is XLA's own compiled.cost_analysis() for one execution of the program.
Runs on CPU too (for a dry run), then the files describe the CPU.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

OUT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "gpu_profiles")
LOG = []


def log(*a):
    line = " ".join(str(x) for x in a)
    print(line, flush=True)
    LOG.append(line)


JAX_CHILD = r"""
import json, os, sys, glob
import jax, jax.numpy as jnp
case, out_pb, out_cost = sys.argv[1], sys.argv[2], sys.argv[3]

def mlp():
    k = jax.random.PRNGKey(0)
    sizes = [4096, 8192, 8192, 1024]
    ps = [(jax.random.normal(jax.random.fold_in(k, i), (a, b), jnp.bfloat16) * 0.02, jnp.zeros(b, jnp.bfloat16))
          for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]
    x = jax.random.normal(k, (2048, 4096), jnp.bfloat16)
    def loss(ps, x):
        for w, b in ps[:-1]:
            x = jax.nn.gelu(x @ w + b)
        w, b = ps[-1]
        return jnp.mean((x @ w + b).astype(jnp.float32) ** 2)
    def step(ps, x):
        l, g = jax.value_and_grad(loss)(ps, x)
        return [(w - 1e-3 * gw, b - 1e-3 * gb) for (w, b), (gw, gb) in zip(ps, g)], l
    return jax.jit(step), (ps, x)

def attention():
    k = jax.random.PRNGKey(1)
    B, T, D, H = 8, 1024, 1024, 16
    x = jax.random.normal(k, (B, T, D), jnp.bfloat16)
    ws = [jax.random.normal(jax.random.fold_in(k, i), (D, D), jnp.bfloat16) * 0.03 for i in range(4)]
    def f(x, wq, wk, wv, wo):
        q = (x @ wq).reshape(B, T, H, D // H); kk = (x @ wk).reshape(B, T, H, D // H)
        v = (x @ wv).reshape(B, T, H, D // H)
        s = jnp.einsum("bthd,bshd->bhts", q, kk).astype(jnp.float32) / (D // H) ** 0.5
        p = jax.nn.softmax(s, axis=-1).astype(jnp.bfloat16)
        o = jnp.einsum("bhts,bshd->bthd", p, v).reshape(B, T, D)
        return jnp.mean((o @ wo).astype(jnp.float32) ** 2)
    return jax.jit(jax.value_and_grad(f, argnums=(1, 2, 3, 4))), (x, *ws)

fn, args = {"mlp": mlp, "attention": attention}[case]()
ca = fn.lower(*args).compile().cost_analysis()
ca = ca[0] if isinstance(ca, (list, tuple)) else ca
jax.block_until_ready(fn(*args))
d = out_pb + ".dir"
pm = os.environ.get("PM_COUNTERS", "")
if pm:  # CUPTI PM sampling: counters land on each GPU plane's "_counters_" line
    opts = jax.profiler.ProfileOptions()
    opts.advanced_configuration = {"gpu_pm_sample_counters": pm, "gpu_pm_sample_interval_us": 100}
    jax.profiler.start_trace(d, profiler_options=opts)
else:
    jax.profiler.start_trace(d)
for i in range(5):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        jax.block_until_ready(fn(*args))
jax.profiler.stop_trace()
pb = glob.glob(os.path.join(d, "plugins", "profile", "*", "*.xplane.pb"))[0]
os.replace(pb, out_pb)
json.dump({"cost_analysis": {k: float(v) for k, v in ca.items() if isinstance(v, (int, float))},
           "devices": [str(x) for x in jax.devices()], "jax": jax.__version__,
           "xla_flags": os.environ.get("XLA_FLAGS", "")}, open(out_cost, "w"), indent=1)
print("ok", case, [str(x) for x in jax.devices()], {k: ca.get(k) for k in ("flops", "bytes accessed")})
"""


def run_jax(case, pb_name, cost_name, flags, pm_counters=""):
    env = dict(os.environ, XLA_FLAGS=flags, PM_COUNTERS=pm_counters)
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")
        open(script, "w").write(JAX_CHILD)
        out_pb = os.path.join(OUT, pb_name)
        out_cost = os.path.join(OUT, cost_name) if cost_name else os.path.join(tmp, "cost.json")
        t = time.time()
        r = subprocess.run(
            [sys.executable, script, case, out_pb, out_cost],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        log(
            f"jax {case} flags={flags!r} rc={r.returncode} {time.time() - t:.1f}s",
            r.stdout.strip()[-400:],
            r.stderr.strip()[-600:] if r.returncode else "",
        )
        shutil.rmtree(out_pb + ".dir", ignore_errors=True)


def run_torch(name, counters):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, device=dev, dtype=dt)
    opt = torch.optim.SGD(layer.parameters(), lr=1e-3)
    x = torch.randn(8, 512, 1024, device=dev, dtype=dt)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    kw = {}
    if counters:
        metrics = [
            f"smsp__sass_thread_inst_executed_op_{p}{o}_pred_on.sum"
            for p in "dfh"
            for o in ("add", "mul", "fma")
        ]
        kw["experimental_config"] = torch._C._profiler._ExperimentalConfig(
            profiler_metrics=metrics, profiler_measure_per_kernel=True
        )
    with tempfile.TemporaryDirectory() as tmp:
        t = time.time()
        try:
            with profile(
                activities=acts,
                record_shapes=True,
                with_flops=True,
                schedule=schedule(wait=1, warmup=1, active=3),
                on_trace_ready=tensorboard_trace_handler(tmp, worker_name="h200", use_gzip=True),
                **kw,
            ) as p:
                for _ in range(6):
                    loss = layer(x).float().pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    p.step()
            files = glob.glob(os.path.join(tmp, "*.pt.trace.json.gz"))
            shutil.copy(files[0], os.path.join(OUT, name))
            log(
                f"torch {name} ok {time.time() - t:.1f}s device={dev}",
                torch.cuda.get_device_name() if dev == "cuda" else "cpu",
                torch.__version__,
            )
        except Exception as e:  # the counter variant may be refused by the sandbox
            log(f"torch {name} FAILED: {type(e).__name__}: {e}"[:600])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    log("python", sys.version.split()[0], "out", OUT)
    off = "--xla_gpu_enable_command_buffer="
    run_jax("mlp", "jax_mlp.xplane.pb", "jax_mlp.cost.json", off)
    run_jax("attention", "jax_attention.xplane.pb", "jax_attention.cost.json", off)
    run_jax("attention", "jax_attention_cmdbuf.xplane.pb", None, "")
    run_jax(
        "mlp",
        "jax_mlp_pm.xplane.pb",
        None,
        off,
        pm_counters=",".join(
            [
                "sm__inst_executed_pipe_tensor.sum",
                "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
                "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed",
                "dramc__write_throughput.avg.pct_of_peak_sustained_elapsed",
                "gpc__cycles_elapsed.avg.per_second",
            ]
        ),
    )
    try:
        run_torch("torch_block.pt.trace.json.gz", counters=False)
        run_torch("torch_block_counters.pt.trace.json.gz", counters=True)
    except ImportError as e:
        log("torch unavailable:", e)
    for f in sorted(os.listdir(OUT)):
        log(f, os.path.getsize(os.path.join(OUT, f)))
    open(os.path.join(OUT, "capture_log.txt"), "w").write("\n".join(LOG) + "\n")
