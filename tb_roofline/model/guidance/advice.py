"""Which framework and runtime ran a profile, and each rule's advice written for it.

The rules prove what a change could save; what to change depends on what ran: XLA (JAX or
TensorFlow) on a TPU, GPU or CPU, PyTorch eager, torch.compile (Inductor / Triton), or a
vLLM-style server that replays CUDA / HIP graphs. `runtime()` tells them apart from the op
names the readers keep; `advice(rule, runtime, device kind)` gives the sentence. Sources of the
advice: docs/guidance.md.
"""

from __future__ import annotations

XLA, EAGER, COMPILE, GRAPHS = "xla", "pytorch_eager", "torch_compile", "cuda_graphs"
RUNTIME_LABELS = {
    XLA: "XLA",
    EAGER: "PyTorch eager",
    COMPILE: "torch.compile",
    GRAPHS: "CUDA/HIP graphs (vLLM-style)",
}

# Names of PyTorch CPU ops (aten and the libraries' ops), as opposed to kernels named by
# themselves when no CPU op launched them.
CPU_OP_PREFIXES = (
    "aten::",
    "vllm::",
    "c10d::",
    "_C::",
    "torch::",
    "CompiledFunction",
    "Torch-Compiled Region",
    "ProfilerStep",
    "autograd::",
    "Optimizer.",
    "fbgemm::",
    "record_param_comms",
    "nccl:",
    "gloo:",
)
_COMPILE_MARKS = ("Torch-Compiled Region", "CompiledFunction", "triton_", "inductor")
_GRAPH_MARKS = ("vllm::", "cudaGraphLaunch", "hipGraphLaunch", "_C::")


def runtime(operations, has_kernel_view: bool, captured: bool = False) -> str:
    """XLA, PyTorch eager, torch.compile or graph replay, from the op names (one pass over the
    distinct names). A PyTorch trace has a kernel view or aten / vllm ops; XLA ops do not."""
    names = [str(n) for n in operations]
    torch = has_kernel_view or any(
        n.startswith(("aten::", "vllm::", "c10d::", "_C::")) for n in names
    )
    if not torch:
        return XLA
    if captured or any(m in n for n in names for m in _GRAPH_MARKS):
        return GRAPHS
    if any(m in n for n in names for m in _COMPILE_MARKS):
        return COMPILE
    return EAGER


def framework(rt: str) -> str:
    return "xla" if rt == XLA else "pytorch"


def _gpu_word(kind: str) -> str:
    return "CUDA/HIP" if kind == "gpu" else ""


ADVICE = {
    "precision": {
        XLA: "jax.default_matmul_precision('tensorfloat32') (or precision=HIGH on the dot) for "
        "tf32, else bf16 operands (cast weights and activations)",
        EAGER: "torch.backends.cuda.matmul.allow_tf32 = True (or "
        "torch.set_float32_matmul_precision('high')) for tf32, else "
        "torch.autocast(device_type='cuda', dtype=torch.bfloat16)",
        COMPILE: "torch.set_float32_matmul_precision('high') before torch.compile (Inductor then "
        "picks tf32 GEMM templates), else torch.autocast(device_type='cuda', "
        "dtype=torch.bfloat16)",
        GRAPHS: "serve the model in bf16 / fp16 (the engine's dtype setting); the captured graphs "
        "replay the kernels chosen at capture time",
    },
    "fusion": {
        XLA: "XLA left them as two kernels: look for what breaks the fusion between them (a "
        "reduction or custom call in between, a layout change, an optimization_barrier, a "
        "host callback) in the HLO after optimizations",
        EAGER: "torch.compile fuses chains of elementwise ops into one Triton kernel (or use a "
        "fused implementation of the pair)",
        COMPILE: "these ran outside the compiled region: a graph break splits them (see "
        "torch._dynamo.explain / TORCH_LOGS=graph_breaks) and removing it lets Inductor "
        "fuse them",
        GRAPHS: "a custom fused kernel (or torch.compile of the layer before capture) writes the "
        "intermediate once less; graph replay removes launches, not passes over memory",
    },
    "tiny_ops": {
        XLA: "batch the work into fewer, larger ops (jax.vmap instead of a Python loop, lax.scan "
        "instead of unrolling) or raise the batch size",
        EAGER: "capture the step in a CUDA graph (torch.compile(mode='reduce-overhead') or "
        "torch.cuda.graphs), fuse the small ops (torch.compile), or raise the batch size",
        COMPILE: "torch.compile(mode='reduce-overhead') replays the compiled region as a CUDA "
        "graph; graph breaks leave small eager ops between regions",
        GRAPHS: "these launches are outside the captured graphs (or captured one by one): widen "
        "the captured region or batch more requests per step",
    },
    "repeated_copy": {
        XLA: "check the transposes / reshapes around it: XLA inserts a copy where producers and "
        "consumers disagree on layout",
        EAGER: "keep tensors in the layout their consumers want (e.g. channels_last for "
        "convolutions) instead of .contiguous() / .to() / .permute() copies in the step",
        COMPILE: "a layout change the compiled graph keeps: permute once outside the loop, or "
        "let Inductor see both sides (no graph break between them)",
        GRAPHS: "the same copy is recorded in the graph every step: keep the buffer in the layout "
        "its consumer wants",
    },
    "far_below_roof": {
        XLA: "look at it in XProf's Op Profile / trace viewer: its fusion's HLO, its shapes (tile "
        "padding) and whether it waits on memory it could reuse",
        EAGER: "look at its kernels in the kernel view (Nsight Compute for one of them): the "
        "shapes it ran with, the kernel cuBLAS/cuDNN picked, and launch gaps between calls",
        COMPILE: "look at the Triton kernel or GEMM template Inductor generated for it "
        "(TORCH_LOGS=output_code) and try mode='max-autotune'",
        GRAPHS: "look at its kernels in the kernel view: the shapes the graph was captured with "
        "(padded batch sizes) and the kernel chosen for them",
    },
    "exposed_communication": {
        XLA: "let XLA overlap them with compute: the latency-hiding scheduler and async "
        "collectives (XLA flags), collective matmul / sharding that keeps the next layer's "
        "work independent; for host transfers, prefetch (pipelining) instead of "
        "synchronous copies",
        EAGER: "overlap them with compute: DDP bucketing (bucket_cap_mb) / FSDP prefetch, "
        "non_blocking copies from pinned memory on a side stream",
        COMPILE: "overlap them with compute: DDP/FSDP with torch.compile (compiled_autograd, "
        "bucketing), non_blocking copies from pinned memory",
        GRAPHS: "overlap them with compute: the engine's async scheduling / communication streams;"
        " fewer, larger collectives per step",
    },
    "idle": {
        XLA: "the device waits for the host between programs: keep the input pipeline ahead "
        "(tf.data / grain prefetch, jax.device_put one step early), avoid host syncs "
        "(block_until_ready, printing device arrays) inside the step, and jit larger "
        "regions so fewer dispatches separate the programs",
        EAGER: "the device waits for the host: feed it ahead of time (DataLoader num_workers / "
        "pin_memory / prefetch), keep .item() / printing out of the step, and cut launch "
        "gaps with CUDA graphs or torch.compile",
        COMPILE: "the device waits for the host: graph breaks and recompilations run Python "
        "between compiled regions (TORCH_LOGS=recompiles), the input pipeline "
        "(DataLoader workers, pin_memory), and host syncs in the step",
        GRAPHS: "the device waits for the scheduler: host work between graph replays (sampling, "
        "request batching); overlap the scheduler with the replay (async output "
        "processing) or batch more requests per step",
    },
    "idle_wait": {
        XLA: "find what the program waits for: a host callback, a transfer from the host or a "
        "collective with another device",
        EAGER: "a stream waiting for an event recorded on another stream waits for that "
        "stream's work (record the event right after the work it guards, or drop the wait); "
        "a host blocked in .item() / .cpu() / .tolist() or a synchronous copy waits for the "
        "whole queue (copy non_blocking into pinned memory and read it a step later)",
        COMPILE: "a stream waiting for an event recorded on another stream, or the host "
        "blocked in a synchronous copy (.item(), .cpu()): record events right after the "
        "work they guard, copy non_blocking into pinned memory and read the result later",
        GRAPHS: "in a serving engine this is scheduling: the next batch waits for the previous "
        "one (its outputs copied back to the host for sampling and the scheduler): overlap "
        "the scheduler with the device (SGLang's overlap scheduler, vLLM's async scheduling "
        "and async output processing) so the next batch is launched before the previous one's "
        "results are read",
    },
    "launch_latency": {
        XLA: "fewer, larger programs (jit larger regions)",
        EAGER: "fewer launches: CUDA/HIP graphs (torch.cuda.graphs, torch.compile "
        "mode='reduce-overhead') or fused kernels (torch.compile); a launch call of "
        "milliseconds is a first launch loading its kernel's code (lazy loading): warm up "
        "before profiling",
        COMPILE: "fewer launches: mode='reduce-overhead' (CUDA graphs) or fewer graph breaks; "
        "a launch call of milliseconds is a first launch loading its code: warm up before "
        "profiling",
        GRAPHS: "the graph launch itself (a hipGraphLaunch submits its nodes one by one on "
        "ROCm): fewer nodes per graph (fused kernels) or one graph for more of the step",
    },
}


# Where the device changes the advice (rule, runtime, device kind). A CPU runs no CUDA: no
# Nsight, cuBLAS/cuDNN, TF32, Triton or pinned-memory advice on a CPU trace.
ADVICE_BY_DEVICE = {
    ("precision", EAGER, "cpu"): "torch.autocast(device_type='cpu', dtype=torch.bfloat16) "
    "around the forward pass (oneDNN runs bf16 matmuls and convolutions on the CPU's bf16 "
    "units, AMX or AVX-512 BF16)",
    ("precision", COMPILE, "cpu"): "torch.autocast(device_type='cpu', dtype=torch.bfloat16) "
    "around the compiled model's forward pass (Inductor's CPU backend keeps the bf16 "
    "matmuls on oneDNN)",
    ("fusion", EAGER, "cpu"): "torch.compile fuses chains of elementwise ops into one C++ "
    "loop (Inductor's CPU backend), or use a fused implementation of the pair",
    ("far_below_roof", EAGER, "cpu"): "profile it alone with the shapes it ran with "
    "(torch.profiler, record_shapes=True): check the threads it ran on "
    "(torch.get_num_threads()), the memory format (channels_last for convolutions), and "
    "the oneDNN primitive it used (ONEDNN_VERBOSE=1)",
    ("far_below_roof", COMPILE, "cpu"): "look at the C++ kernel Inductor generated for it "
    "(TORCH_LOGS=output_code) and the threads it ran on (torch.get_num_threads())",
    ("exposed_communication", EAGER, "cpu"): "overlap them with compute: DDP bucketing "
    "(bucket_cap_mb) / FSDP prefetch, so the gloo collectives run while the backward "
    "pass computes",
    ("exposed_communication", COMPILE, "cpu"): "overlap them with compute: DDP/FSDP with "
    "torch.compile (compiled_autograd, bucketing)",
    ("idle", COMPILE, "cpu"): "no op runs on the CPU threads: graph breaks and "
    "recompilations run Python between compiled regions (TORCH_LOGS=recompiles), data "
    "preparation in the step (DataLoader workers), and waits",
    ("precision", XLA, "tpu"): "bf16 operands (the MXU multiplies bf16; f32 dots run as several "
    "bf16 passes): jax.default_matmul_precision('bfloat16') or cast "
    "the weights and activations",
    # A CPU trace has no kernel launches, so no launch-latency class; said for completeness.
    ("launch_latency", EAGER, "cpu"): "fewer, larger ops: torch.compile fuses small ops into "
    "one loop; a first call of milliseconds is one-time set-up (oneDNN primitive creation): "
    "warm up before profiling",
    ("launch_latency", COMPILE, "cpu"): "fewer graph breaks between compiled regions; a first "
    "call of milliseconds is one-time set-up: warm up before profiling",
    ("tiny_ops", EAGER, "cpu"): "fuse the small ops (torch.compile) or raise the batch size so "
    "each call does more work",
    ("tiny_ops", COMPILE, "cpu"): "remove the graph breaks that leave small eager ops between "
    "compiled regions, or raise the batch size",
    ("idle", XLA, "tpu"): "the TensorCores wait for the host between programs: keep the input "
    "pipeline ahead (tf.data / grain prefetch, jax.device_put one step "
    "early), avoid host syncs (block_until_ready, printing device arrays) "
    "in the step, and keep host-offloaded arrays off the step's critical "
    "path",
    ("idle", XLA, "cpu"): "the XLA CPU threads wait between programs: Python work and "
    "dispatch between jitted calls; jax.jit larger regions and keep host "
    "syncs out of the step",
    ("idle", EAGER, "cpu"): "no op runs on the CPU threads: Python work between ops (data "
    "preparation, logging) and sleeps or waits in the step; move data "
    "loading to DataLoader workers and fuse the step (torch.compile)",
    ("exposed_communication", XLA, "tpu"): "overlap them with compute: the latency-hiding "
    "scheduler and async collectives over ICI, and for "
    "host offload, prefetch the next arrays while the "
    "current step computes",
}


def advice(rule: str, rt: str, kind: str = "") -> str:
    """The suggestion of a rule for the runtime that ran, on this kind of device."""
    if (rule, rt, kind) in ADVICE_BY_DEVICE:
        return ADVICE_BY_DEVICE[(rule, rt, kind)]
    by = ADVICE.get(rule, {})
    return by.get(rt) or by.get(EAGER if rt != XLA else XLA, "")


# What a profile needs so that the rules can say more (diagnostics the guidance adds).
CAPTURE_NOTES = {
    "graph_capture": (
        "this trace records CUDA/HIP graphs being captured (hipStreamBeginCapture / "
        "cudaStreamBeginCapture .. EndCapture): launches inside a capture are recorded, not run, "
        "so the device looks idle. Profile the replay instead: start the profiler after warm-up "
        "(vLLM: after the engine has captured its graphs, e.g. with the profiler's schedule "
        "skipping the first iterations)"
    ),
    "no_cpu_ops": (
        "this PyTorch trace has device activity but no CPU ops: kernels cannot be named by the "
        "aten op that launched them, so no FLOPs or shapes are known. Record CPU activity too: "
        "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], "
        "record_shapes=True)"
    ),
    "no_shapes": (
        "this PyTorch trace has no input shapes: FLOPs, bytes, tensor sizes for the fusion rule "
        "and GEMM tile checks are unknown. Record them: torch.profiler.profile(record_shapes=True)"
    ),
}
