"""Small PyTorch CPU model captures: whole models, one run folder each, with FlopCounterMode
references (tools/capture_torch_traces.py `--models` runs them).

Each case is profiled for 3 steps (`ProfilerStep#N`) after one warm-up step, `record_shapes=True`,
one intra-op thread (steadier timings on a shared machine); beside the trace,
`flop_counter.json` holds `torch.utils.flop_counter.FlopCounterMode`'s counts of one more step
(the same calls on the same shapes), so a test can compare the reader's FLOPs per step:

- `gpt_eager`: a GPT-style decoder (token and position embeddings, pre-norm blocks with causal
  `scaled_dot_product_attention` and a GELU MLP, tied output head), a training step;
- `gpt_autocast_bf16`: the same step under `torch.autocast(device_type="cpu",
  dtype=torch.bfloat16)` (the profiler records an outer fp32 `aten::linear` around the bf16
  call autocast makes);
- `gpt_compiled`: the forward through `torch.compile` (when Inductor works on the machine);
- `convnet`: a ResNet-style convnet (conv-BN-ReLU stem, `max_pool2d`, two residual blocks,
  dropout, global average pool, linear), a training step;
- `prefill_decode`: the decoder's inference loop with a KV cache: one prefill of 32 tokens,
  then 8 decode steps of one token (each `ProfilerStep` is one prefill+decode request);
- `extras`: an LSTM layer, bilinear upsampling (`F.interpolate`), `addmv`, `mv` and `ger`.
"""

from __future__ import annotations

import json
import os
import sys


def _gpt(torch, vocab=256, d=128, heads=4, layers=2, ctx=64):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def attend(self, x, cache=None):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (t.view(b, s, heads, d // heads).transpose(1, 2) for t in (q, k, v))
            if cache is not None:
                if cache:
                    k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                cache[:] = [k, v]
            causal = cache is None or s > 1
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return self.proj(y.transpose(1, 2).reshape(b, s, d))

        def forward(self, x, cache=None):
            x = x + self.attend(x, cache)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d)

        def forward(self, idx, caches=None, start=0):
            pos = torch.arange(start, start + idx.shape[1])
            x = self.tok(idx) + self.pos(pos)
            for i, blk in enumerate(self.blocks):
                x = blk(x, None if caches is None else caches[i])
            return F.linear(self.ln(x), self.tok.weight)

    return GPT()


def _convnet(torch):
    nn = torch.nn

    class Res(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(x + self.b2(self.c2(y)))

    return nn.Sequential(
        nn.Conv2d(3, 32, 5, stride=2, padding=2, bias=False),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
        Res(32),
        Res(32),
        nn.Dropout(0.2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def _train_step(torch, model, make_batch, autocast=False):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = make_batch()

    def step():
        opt.zero_grad()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()

    return step


def model_cases(torch):
    """name -> a function returning one step (a callable), or None when it cannot run here."""
    F = torch.nn.functional

    def tokens(batch=4, seq=64):
        def make():
            idx = torch.randint(0, 256, (batch, seq))
            return idx, torch.roll(idx, -1, 1)

        return make

    def gpt(autocast):
        return lambda: _train_step(torch, _gpt(torch), tokens(), autocast)

    def compiled():
        model = torch.compile(_gpt(torch))
        idx = torch.randint(0, 256, (4, 64))

        def step():
            with torch.no_grad():
                model(idx)

        return step

    def convnet():
        def make():
            return torch.randn(8, 3, 64, 64), torch.randint(0, 10, (8,))

        return _train_step(torch, _convnet(torch), make)

    def prefill_decode():
        model = _gpt(torch).eval()
        prompt = torch.randint(0, 256, (2, 32))

        def step():
            caches = [[] for _ in model.blocks]
            with torch.no_grad():
                logits = model(prompt, caches)
                nxt = logits[:, -1:].argmax(-1)
                for i in range(8):
                    logits = model(nxt, caches, start=prompt.shape[1] + i)
                    nxt = logits[:, -1:].argmax(-1)

        return step

    def extras():
        lstm = torch.nn.LSTM(32, 64, batch_first=True)
        seq, img = torch.randn(4, 16, 32), torch.randn(2, 8, 24, 24)
        mat, vec, vec2, bias = (
            torch.randn(96, 80),
            torch.randn(80),
            torch.randn(96),
            torch.randn(96),
        )

        def step():
            with torch.no_grad():
                lstm(seq)
                F.interpolate(img, scale_factor=2, mode="bilinear", align_corners=False)
                torch.addmv(bias, mat, vec)
                torch.mv(mat, vec)
                torch.ger(vec2, vec)

        return step

    return {
        "gpt_eager": gpt(False),
        "gpt_autocast_bf16": gpt(True),
        "gpt_compiled": compiled,
        "convnet": convnet,
        "prefill_decode": prefill_decode,
        "extras": extras,
    }


def _flop_counts(torch, step) -> dict:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as mode:
        step()
    counts = mode.get_flop_counts().get("Global", {})
    return {
        "total": int(mode.get_total_flops()),
        "by_op": {str(k): int(v) for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))},
    }


def capture_models(out_dir: str, only=None, steps: int = 3) -> None:
    import torch
    from capture_torch_traces import _profiled_steps  # the one profiling loop of the captures

    torch.set_num_threads(1)
    for name, make in model_cases(torch).items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        try:
            step = make()
            step()  # compiles / warms up outside the profile
        except Exception as e:  # torch.compile needs a working C++ toolchain
            print(f"{name:20s} skipped: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        _profiled_steps(d, name, step, steps=steps)
        ref = {
            "torch_version": torch.__version__,
            "steps": steps,
            "flop_counter_per_step": _flop_counts(torch, step),
        }
        with open(os.path.join(d, "flop_counter.json"), "w") as f:
            json.dump(ref, f, indent=1, sort_keys=True)
            f.write("\n")
        print(
            f"{name:20s} FlopCounterMode {ref['flop_counter_per_step']['total']}", file=sys.stderr
        )
