"""Capture small PyTorch CPU traces, one per op family case, with FlopCounterMode references.

Each case runs its calls twice on the same tensors: once under `torch.profiler.profile(
record_shapes=True)` whose trace `tensorboard_trace_handler(out, worker_name=case,
use_gzip=True)` writes as `<case>.<ts>.pt.trace.json.gz`, and once under
`torch.utils.flop_counter.FlopCounterMode`, whose totals go to `expected_flops.json`.
Tests read only the committed files (CI has no torch):

    pip install torch==2.13.0   # CPU build
    python tools/capture_torch_traces.py testdata/kineto_captured --clean
    python tools/capture_torch_traces.py testdata/guidance/torch --guidance --clean

`--compare` instead captures the run pairs the comparison is tested on (`COMPARE_CASES`): a small
CNN training step at batch 8 and 16, and at batch 8 in `channels_last` memory format, each in
its own directory (one run each), 3 profiled steps (`ProfilerStep#N`) after two warm-up steps, on
one thread (steadier timings on a shared machine):

    python tools/capture_torch_traces.py --compare testdata/compare/torch_cpu --clean

`--models` captures small whole models (tools/torch_cpu_models.py: a GPT-style decoder eager,
under bf16 autocast and compiled, a ResNet-style convnet, a prefill+decode loop, LSTM /
upsample / addmv / mv / ger), one run folder each; `--only a,b` captures only those cases (of the
op cases, `expected_flops.json` keeps the others' entries):

    python tools/capture_torch_traces.py --models testdata/torch_cpu
    python tools/capture_torch_traces.py testdata/kineto_captured --only lstm,upsample_bilinear
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys


def cases():
    import torch
    import torch.nn.functional as F

    def t(*shape, grad=False, dtype=None):
        x = torch.randn(*shape, dtype=dtype or torch.float32)
        return x.requires_grad_(grad)

    out = {}

    def case(name, note=""):
        def deco(fn):
            out[name] = (fn, note)
            return fn

        return deco

    a, b = t(24, 40), t(40, 16)
    case("mm")(lambda: torch.mm(a, b))
    bias = t(16)
    case("addmm")(lambda: torch.addmm(bias, a, b))
    ba, bb = t(3, 24, 40), t(3, 40, 16)
    case("bmm")(lambda: torch.bmm(ba, bb))
    bbias = t(3, 24, 16)
    case("baddbmm")(lambda: torch.baddbmm(bbias, ba, bb))
    m4a, m4b = t(2, 3, 24, 40), t(3, 40, 16)
    case("matmul_broadcast")(lambda: torch.matmul(m4a, m4b))
    va = t(40)
    case("matmul_vector")(lambda: torch.matmul(a, va))
    x3, w, wb = t(4, 6, 40), t(32, 40), t(32)
    case("linear")(lambda: F.linear(x3, w, wb))
    case("linear_nobias")(lambda: F.linear(x3, w))
    case("einsum")(lambda: torch.einsum("bij,bjk->bik", ba, bb))
    bf_a, bf_b = a.to(torch.bfloat16), b.to(torch.bfloat16)
    case("mm_bf16")(lambda: torch.mm(bf_a, bf_b))

    c1x, c1w = t(2, 4, 33), t(8, 4, 5)
    case("conv1d_stride_pad")(lambda: F.conv1d(c1x, c1w, None, stride=2, padding=2))
    c2x, c2w, c2b = t(2, 4, 17, 15), t(6, 4, 3, 3), t(6)
    case("conv2d")(lambda: F.conv2d(c2x, c2w, c2b))
    case("conv2d_stride_pad_dil")(
        lambda: F.conv2d(c2x, c2w, c2b, stride=(2, 1), padding=(1, 2), dilation=(2, 1))
    )
    g2w = t(6, 2, 3, 3)
    case("conv2d_groups")(lambda: F.conv2d(c2x, g2w, None, stride=2, padding=1, groups=2))
    dw = t(4, 1, 3, 3)
    case("conv2d_depthwise")(lambda: F.conv2d(c2x, dw, None, padding=1, groups=4))
    case("conv2d_same")(lambda: F.conv2d(c2x, c2w, None, padding="same"))
    c3x, c3w = t(1, 3, 6, 7, 8), t(4, 3, 2, 3, 3)
    case("conv3d")(lambda: F.conv3d(c3x, c3w, None, stride=(1, 2, 2), padding=1))
    tw = t(4, 3, 3, 3)
    case("conv_transpose2d")(
        lambda: F.conv_transpose2d(c2x, tw, None, stride=2, padding=1, output_padding=1)
    )
    tgw = t(4, 3, 3, 3)
    case("conv_transpose2d_groups")(
        lambda: F.conv_transpose2d(c2x, tgw, None, stride=2, groups=2, dilation=2)
    )
    t1w = t(4, 5, 4)
    case("conv_transpose1d")(lambda: F.conv_transpose1d(c1x, t1w, None, stride=3))

    q, k, v = t(2, 3, 16, 8), t(2, 3, 12, 8), t(2, 3, 12, 4)
    case("sdpa")(lambda: F.scaled_dot_product_attention(q, k, v))
    qc, kc, vc = t(2, 2, 16, 8), t(2, 2, 16, 8), t(2, 2, 16, 8)
    case("sdpa_causal")(lambda: F.scaled_dot_product_attention(qc, kc, vc, is_causal=True))

    x = t(8, 64)
    y = t(8, 64)
    case("add")(lambda: torch.add(x, y))
    case("mul_broadcast")(lambda: x * t(64))
    case("relu")(lambda: F.relu(x))
    case("gelu")(lambda: F.gelu(x))
    xi = t(8, 64)
    case("add_inplace")(lambda: xi.add_(y))
    case("addcmul")(lambda: torch.addcmul(x, x, y))
    case("sum_dim")(lambda: x.sum(dim=1))
    case("mean_all")(lambda: x.mean())
    case("amax_keepdim")(lambda: x.amax(dim=0, keepdim=True))
    case("softmax")(lambda: torch.softmax(x, dim=-1))
    ln_w, ln_b = t(64), t(64)
    case("layer_norm")(lambda: F.layer_norm(x, (64,), ln_w, ln_b))
    bn_x = t(4, 6, 5, 5)
    rm, rv = torch.zeros(6), torch.ones(6)
    bn_w, bn_b = t(6), t(6)
    case("batch_norm_train")(
        lambda: F.batch_norm(bn_x, rm.clone(), rv.clone(), bn_w, bn_b, training=True)
    )
    case("batch_norm_eval")(lambda: F.batch_norm(bn_x, rm, rv, bn_w, bn_b, training=False))
    emb_w = t(50, 16)
    idx = torch.randint(0, 50, (4, 7))
    case("embedding")(lambda: F.embedding(idx, emb_w))
    case("copy_clone")(lambda: x.clone())
    case("copy_to_bf16")(lambda: x.to(torch.bfloat16))
    case("cat")(lambda: torch.cat([x, y, x], dim=0))
    mv_a, mv_x, mv_y, mv_b = t(24, 40), t(40), t(24), t(24)
    case("addmv")(lambda: torch.addmv(mv_b, mv_a, mv_x))
    case("mv")(lambda: torch.mv(mv_a, mv_x))
    case("ger")(lambda: torch.ger(mv_y, mv_x))
    case("outer")(lambda: torch.outer(mv_y, mv_x))
    up = t(2, 3, 7, 9)
    case("upsample_bilinear")(
        lambda: F.interpolate(up, scale_factor=2, mode="bilinear", align_corners=False)
    )
    case("upsample_bilinear_size")(
        lambda: F.interpolate(up, size=(10, 20), mode="bilinear", align_corners=True)
    )
    lstm = torch.nn.LSTM(12, 20, num_layers=2, batch_first=True)
    lstm_x = t(3, 5, 12)
    case("lstm")(lambda: lstm(lstm_x))
    lstm_nb = torch.nn.LSTM(12, 20, bias=False)
    lstm_x2 = t(5, 3, 12)
    case("lstm_nobias")(lambda: lstm_nb(lstm_x2))
    # FlopCounterMode counts none of these on the CPU: the same products written with the ops
    # it counts (checked to give the same result) are their reference.
    DECOMPOSED["mv"] = lambda: torch.mm(mv_a, mv_x[:, None])
    DECOMPOSED["addmv"] = lambda: torch.addmm(mv_b[:, None], mv_a, mv_x[:, None])
    DECOMPOSED["lstm"] = lambda: lstm_by_linears(torch, lstm, lstm_x, batch_first=True)
    DECOMPOSED["lstm_nobias"] = lambda: lstm_by_linears(torch, lstm_nb, lstm_x2)

    # Backward cases: the forward runs outside the profiler; only backward is profiled.
    def backward_case(name, forward):
        def run():
            inputs, fn = forward()
            o = fn(*inputs)
            grad = torch.ones_like(o)
            return lambda: torch.autograd.grad(o, [i for i in inputs if i.requires_grad], grad)

        out[name] = (run, "backward")

    backward_case(
        "conv2d_backward",
        lambda: (
            (t(2, 4, 17, 15, grad=True), t(6, 4, 3, 3, grad=True)),
            lambda i, ww: F.conv2d(i, ww, stride=2, padding=1),
        ),
    )
    backward_case(
        "conv2d_groups_backward",
        lambda: (
            (t(2, 4, 17, 15, grad=True), t(6, 2, 3, 3, grad=True)),
            lambda i, ww: F.conv2d(i, ww, groups=2),
        ),
    )
    backward_case(
        "conv1d_backward",
        lambda: (
            (t(2, 4, 33, grad=True), t(8, 4, 5, grad=True)),
            lambda i, ww: F.conv1d(i, ww, dilation=2),
        ),
    )
    backward_case("mm_backward", lambda: ((t(24, 40, grad=True), t(40, 16, grad=True)), torch.mm))
    backward_case(
        "linear_backward",
        lambda: ((t(6, 40, grad=True), t(32, 40, grad=True), t(32, grad=True)), F.linear),
    )
    backward_case(
        "sdpa_backward",
        lambda: (
            (t(2, 3, 16, 8, grad=True), t(2, 3, 12, 8, grad=True), t(2, 3, 12, 4, grad=True)),
            F.scaled_dot_product_attention,
        ),
    )

    def flash_fwd(backend=None):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        qq, kk, vv = t(2, 3, 16, 8), t(2, 3, 12, 8), t(2, 3, 12, 8)

        def run():
            with sdpa_kernel(backend or SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(qq, kk, vv)

        return run

    out["sdpa_flash_forward"] = (flash_fwd, "lazy-forward")  # needs torch.nn.attention

    def flash_bwd(backend=None):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        qq, kk, vv = (
            t(2, 3, 16, 8, grad=True),
            t(2, 3, 12, 8, grad=True),
            t(2, 3, 12, 8, grad=True),
        )
        with sdpa_kernel(backend or SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(qq, kk, vv)
        return lambda: torch.autograd.grad(o, [qq, kk, vv], torch.ones_like(o))

    out["sdpa_flash_backward"] = (flash_bwd, "backward")
    return out


DECOMPOSED: dict = {}  # case -> the same products in ops FlopCounterMode counts


def lstm_by_linears(torch, lstm, x, batch_first=False):
    """An nn.LSTM (one direction, no projection) step by step with F.linear; asserts it gives
    the module's output, so that its FlopCounterMode count is the module's products."""
    F = torch.nn.functional
    seq = x.transpose(0, 1) if batch_first else x
    hidden = lstm.hidden_size
    for layer in range(lstm.num_layers):
        w_ih, w_hh = getattr(lstm, f"weight_ih_l{layer}"), getattr(lstm, f"weight_hh_l{layer}")
        b_ih = getattr(lstm, f"bias_ih_l{layer}", None)
        b_hh = getattr(lstm, f"bias_hh_l{layer}", None)
        h = c = torch.zeros(seq.shape[1], hidden)
        outs = []
        for step in seq:
            i, f, g, o = (F.linear(step, w_ih, b_ih) + F.linear(h, w_hh, b_hh)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        seq = torch.stack(outs)
    want = lstm(x)[0]
    assert torch.allclose(seq.transpose(0, 1) if batch_first else seq, want, atol=1e-5)
    return seq


def flop_counter(fn) -> dict:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as mode:
        fn()
    counts = mode.get_flop_counts().get("Global", {})
    return {
        "total": int(mode.get_total_flops()),
        "by_op": {str(k): int(v) for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))},
    }


def capture(out_dir: str, only=None):
    import torch
    from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

    torch.manual_seed(0)
    expected = {"torch_version": torch.__version__, "cases": {}}
    path = os.path.join(out_dir, "expected_flops.json")
    if only and os.path.exists(path):
        with open(path) as f:
            expected = json.load(f)
    for name, (fn, note) in cases().items():
        if only and name not in only:
            continue
        for old in glob.glob(os.path.join(out_dir, f"{name}.*.pt.trace.json*")):
            os.remove(old)  # the case's earlier capture
        lazy = note in ("backward", "lazy-forward")
        call = fn() if lazy else fn
        # FlopCounterMode first (a second call, same tensors and shapes).
        ref = flop_counter(call)
        if lazy:
            call = fn()  # autograd.grad frees the graph: build it again for the profiler
        handler = tensorboard_trace_handler(out_dir, worker_name=name, use_gzip=True)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, on_trace_ready=handler):
            call()
        entry = {"flop_counter": ref, "profiled": "backward" if note == "backward" else "forward"}
        if name.startswith("sdpa"):
            # FlopCounterMode does not count the CPU flash kernels: count the same call on the
            # math backend (the same matmuls) as the reference.
            from torch.nn.attention import SDPBackend, sdpa_kernel

            if name.startswith("sdpa_flash"):
                math_call = fn(SDPBackend.MATH)
            else:
                math_call = fn() if lazy else fn
            with sdpa_kernel(SDPBackend.MATH):
                entry["flop_counter_math_backend"] = flop_counter(math_call)
        if name in DECOMPOSED:
            entry["flop_counter_decomposed"] = flop_counter(DECOMPOSED[name])
        if only:
            entry["torch_version"] = torch.__version__
        expected["cases"][name] = entry
        print(f"{name:28s} FlopCounterMode {ref['total']}", file=sys.stderr)
    with open(path, "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


# case: (batch size, channels_last)
COMPARE_CASES = {
    "convnet_b8": (8, False),
    "convnet_b16": (16, False),
    "convnet_b8_channels_last": (8, True),
}


def capture_compare(out_dir: str, clean: bool):
    """One run directory per case: a CNN (conv-BN-ReLU ×2, max-pool, linear) training step."""
    import torch
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.set_num_threads(1)  # steadier timings on a shared machine
    for name, (batch, channels_last) in COMPARE_CASES.items():
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 16 * 16, 10),
        )
        x = torch.randn(batch, 3, 32, 32)
        y = torch.arange(batch) % 10
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        if clean:
            for f in glob.glob(os.path.join(d, "*.pt.trace.json*")):
                os.remove(f)
        handler = tensorboard_trace_handler(d, worker_name="vm", use_gzip=True)
        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
            on_trace_ready=handler,
        ) as prof:
            for _ in range(5):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                prof.step()
        print(f"{name:28s} batch {batch} channels_last {channels_last}", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--clean", action="store_true", help="remove earlier traces first")
    ap.add_argument(
        "--guidance",
        action="store_true",
        help="capture the guidance cases (one run folder each) instead",
    )
    ap.add_argument(
        "--case",
        action="append",
        help="with --guidance: capture only this case (repeatable)",
    )
    ap.add_argument(
        "--compare",
        action="store_true",
        help="capture the comparison pairs (COMPARE_CASES) instead",
    )
    ap.add_argument(
        "--models",
        action="store_true",
        help="capture the small whole-model runs (tools/torch_cpu_models.py) instead",
    )
    ap.add_argument("--only", default="", help="comma-separated cases to capture (the rest kept)")
    args = ap.parse_args(argv)
    only = {x for x in args.only.split(",") if x}
    os.makedirs(args.out_dir, exist_ok=True)
    if args.models:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from torch_cpu_models import capture_models

        capture_models(args.out_dir, only)
        return
    if args.compare:
        capture_compare(args.out_dir, args.clean)
        return
    if args.clean and not only:
        for f in glob.glob(os.path.join(args.out_dir, "**", "*.pt.trace.json*"), recursive=True):
            if not args.case or any(f"{os.sep}{c}{os.sep}" in f for c in args.case):
                os.remove(f)
    if args.guidance:
        capture_guidance(args.out_dir, args.case)
    else:
        capture(args.out_dir, only)


# ------------------------------------------------------------------------------------------
# Guidance cases (docs/guidance.md): small CPU training-like loops, one run folder each, with
# ProfilerStep spans, that trigger one rule each (and one clean case that triggers none).


def _profiled_steps(out_dir, worker, step_fn, steps=4):
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    handler = tensorboard_trace_handler(out_dir, worker_name=worker, use_gzip=True)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        on_trace_ready=handler,
        schedule=schedule(wait=0, warmup=1, active=steps),
    ) as prof:
        for _ in range(steps + 1):
            step_fn()
            prof.step()
    del torch


def guidance_cases():
    import time

    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    big = torch.randn(1 << 24)  # 64 MiB: larger than the last-level cache

    def elementwise_chain():
        y = big * 2.0
        y = y + 1.0
        y = F.relu(y)
        return y * y

    small = torch.randn(64)

    def tiny_ops():
        s = small
        for _ in range(200):
            s = s + 1.0
        return s

    w = torch.randn(512, 512)
    x = torch.randn(512, 512)

    def host_bound():
        y = torch.mm(x, w)
        time.sleep(0.03)  # the "input pipeline": the CPU does no op work meanwhile
        return y

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)

    def clean():
        return torch.mm(torch.mm(a, b), b)

    # Per-head q and k norms as a serving model runs them (SGLang's Qwen3 q/k norm): one op
    # name on two tensors of different shapes, back to back. Only clone → mul on one tensor
    # hands an intermediate on; mul(q) → clone(k) shares none.
    q, k = torch.randn(2048, 4096), torch.randn(2048, 1024)
    wq, wk = torch.randn(4096), torch.randn(1024)

    def qk_clone_norm():
        qn = q.clone() * wq
        kn = k.clone() * wk
        return qn, kn

    return {
        "elementwise_chain": elementwise_chain,
        "qk_clone_norm": qk_clone_norm,
        "tiny_ops": tiny_ops,
        "host_bound": host_bound,
        "clean_matmul": clean,
    }


def _ddp_worker(rank, world, out_dir, port):
    import time

    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    grad = torch.randn(1 << 22)
    x, w = torch.randn(256, 256), torch.randn(256, 256)

    def step():
        torch.mm(x, w)
        if rank == 1:
            time.sleep(0.04)  # the straggler: its peers wait for it in the all-reduce
        dist.all_reduce(grad)

    _profiled_steps(out_dir, f"rank{rank}", step)
    dist.destroy_process_group()


def capture_guidance(out_dir: str, only=None):
    import torch
    import torch.multiprocessing as mp

    torch.set_num_threads(1)
    for name, fn in guidance_cases().items():
        if only and name not in only:
            continue
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        _profiled_steps(d, name, fn)
        print(f"{name:20s} written", file=sys.stderr)
    if only and "ddp_straggler" not in only:
        return
    d = os.path.join(out_dir, "ddp_straggler")
    os.makedirs(d, exist_ok=True)
    mp.spawn(_ddp_worker, args=(2, d, 29517), nprocs=2, join=True)
    print("ddp_straggler        written", file=sys.stderr)


if __name__ == "__main__":
    main()
