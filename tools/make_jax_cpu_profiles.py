"""Capture small real JAX CPU profiles plus XLA's own cost_analysis() for each program.

Extended copy of shared/tools/make_jax_cpu_profiles.py (same output layout, more cases).

usage: python tools/make_jax_cpu_profiles.py OUTDIR [CASE ...]     (needs: pip install jax)
       python tools/make_jax_cpu_profiles.py --compare OUTDIR [CASE ...]
Writes OUTDIR/<case>/plugins/profile/<session>/<host>.xplane.pb,
OUTDIR/<case>/cost_analysis.json ({"flops": ..., "bytes accessed": ..., ...}, whole program,
one execution, exactly as `compiled.cost_analysis()` returns it) and OUTDIR/<case>/program.json
(the profiled module's name and the jax version). The profile holds 5 executions of the
program, one per step (jax.profiler.StepTraceAnnotation).

`--compare` captures the pairs the run comparison is tested on (`COMPARE_CASES`: one small MLP
train step at batch 64 and 128, the same at batch 64 compiled without XLA's fusion passes, and
two branches whose fusions XLA names the other way round when the code computes them in the
other order), 3 steps each, each case in a fresh process whose inputs come from numpy, so the
profile holds the one profiled program (small files).
"""

import json
import os
import sys
import time

import jax
import jax.numpy as jnp
from jax import lax


def mlp():
    k = jax.random.PRNGKey(0)
    sizes = [784, 1024, 1024, 10]
    ps = [
        (jax.random.normal(jax.random.fold_in(k, i), (a, b)) * 0.02, jnp.zeros(b))
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))
    ]
    x = jax.random.normal(k, (128, 784))
    y = jax.nn.one_hot(jnp.arange(128) % 10, 10)

    def loss(ps, x, y):
        for w, b in ps[:-1]:
            x = jax.nn.gelu(x @ w + b)
        w, b = ps[-1]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(x @ w + b) * y, -1))

    def train_step(ps, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        return [(w - 1e-3 * gw, b - 1e-3 * gb) for (w, b), (gw, gb) in zip(ps, g)], l

    return jax.jit(train_step), (ps, x, y)


def matmul_tanh():
    k = jax.random.PRNGKey(3)
    a = jax.random.normal(k, (512, 1024))
    b = jax.random.normal(k, (1024, 256))
    x = jax.random.normal(k, (256, 512))

    def f(a, b, x):
        h = jnp.tanh(x @ a)
        return jnp.sum((h @ b) ** 2) + jnp.mean(jnp.exp(h))

    return jax.jit(f), (a, b, x)


def convnet():
    """A small CNN train step: strided and grouped convolutions, max-pool, dense, softmax."""
    k = jax.random.PRNGKey(1)
    ks = jax.random.split(k, 6)
    ps = {
        "c1": jax.random.normal(ks[0], (3, 3, 3, 16)) * 0.1,
        "c2": jax.random.normal(ks[1], (3, 3, 4, 32)) * 0.1,  # 4 groups of 4 channels
        "c3": jax.random.normal(ks[2], (1, 1, 32, 32)) * 0.1,
        "w": jax.random.normal(ks[3], (8 * 8 * 32, 10)) * 0.01,
        "b": jnp.zeros(10),
    }
    x = jax.random.normal(ks[4], (16, 32, 32, 3))
    y = jax.nn.one_hot(jnp.arange(16) % 10, 10)
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(ps, x, y):
        h = jax.nn.relu(lax.conv_general_dilated(x, ps["c1"], (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = jax.nn.relu(
            lax.conv_general_dilated(
                h, ps["c2"], (2, 2), "SAME", dimension_numbers=dn, feature_group_count=4
            )
        )
        h = jax.nn.relu(
            lax.conv_general_dilated(h, ps["c3"], (1, 1), "VALID", dimension_numbers=dn)
        )
        logits = h.reshape(h.shape[0], -1) @ ps["w"] + ps["b"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, -1))

    def train_step(ps, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        return jax.tree.map(lambda p, gp: p - 1e-2 * gp, ps, g), l

    return jax.jit(train_step), (ps, x, y)


def attention():
    """One pre-norm transformer block forward: layer norm, 4-head attention, GELU MLP."""
    k = jax.random.PRNGKey(2)
    ks = jax.random.split(k, 6)
    d, h, s, b = 128, 4, 64, 4
    ps = {
        "qkv": jax.random.normal(ks[0], (d, 3 * d)) * 0.05,
        "o": jax.random.normal(ks[1], (d, d)) * 0.05,
        "up": jax.random.normal(ks[2], (d, 4 * d)) * 0.05,
        "down": jax.random.normal(ks[3], (4 * d, d)) * 0.05,
        "g": jnp.ones(d),
    }
    x = jax.random.normal(ks[4], (b, s, d))

    def norm(x, g):
        m = x.mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g

    def block(ps, x):
        q, kk, v = jnp.split(norm(x, ps["g"]) @ ps["qkv"], 3, axis=-1)
        heads = lambda t: t.reshape(b, s, h, d // h).transpose(0, 2, 1, 3)
        q, kk, v = heads(q), heads(kk), heads(v)
        att = jax.nn.softmax(jnp.einsum("bhqd,bhkd->bhqk", q, kk) / jnp.sqrt(d / h), axis=-1)
        o = jnp.einsum("bhqk,bhkd->bhqd", att, v).transpose(0, 2, 1, 3).reshape(b, s, d)
        x = x + o @ ps["o"]
        return x + jax.nn.gelu(norm(x, ps["g"]) @ ps["up"]) @ ps["down"]

    return jax.jit(block), (ps, x)


def while_loop():
    """A fori_loop with a known trip count (XLA's cost_analysis counts ONE iteration)."""
    k = jax.random.PRNGKey(4)
    w = jax.random.normal(k, (256, 256)) * 0.05
    x = jax.random.normal(k, (64, 256))

    def f(w, x):
        return lax.fori_loop(0, 6, lambda i, x: jnp.tanh(x @ w) + x, x)

    return jax.jit(f), (w, x)


def host_bound():
    """A step that waits on the host (a slow input pipeline) between two device programs."""
    k = jax.random.PRNGKey(5)
    w = jax.random.normal(k, (512, 512)) * 0.05
    x = jax.random.normal(k, (256, 512))
    f = jax.jit(lambda w, x: jnp.tanh(x @ w) @ w)

    def step(w, x):
        y = f(w, x).block_until_ready()
        time.sleep(0.02)  # the host prepares the next batch; the device has nothing to do
        return f(w, y)

    step.lower = f.lower  # cost_analysis of the program the step runs
    return step, (w, x)


def small_mlp(batch):
    """An MLP train step (256-512-512-10, GELU, softmax cross-entropy); inputs from numpy."""
    import numpy as np

    rng = np.random.default_rng(0)
    sizes = [256, 512, 512, 10]
    ps = [
        (jnp.asarray(rng.normal(size=(a, b)) * 0.02, jnp.float32), jnp.zeros(b, jnp.float32))
        for a, b in zip(sizes[:-1], sizes[1:])
    ]
    x = jnp.asarray(rng.normal(size=(batch, 256)), jnp.float32)
    y = jnp.asarray(np.eye(10)[np.arange(batch) % 10], jnp.float32)

    def loss(ps, x, y):
        for w, b in ps[:-1]:
            x = jax.nn.gelu(x @ w + b)
        w, b = ps[-1]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(x @ w + b) * y, -1))

    def train_step(ps, x, y):
        l, g = jax.value_and_grad(loss)(ps, x, y)
        return [(w - 1e-3 * gw, b - 1e-3 * gb) for (w, b), (gw, gb) in zip(ps, g)], l

    return jax.jit(train_step), (ps, x, y)


def branches(swap):
    """Two independent matmul-tanh-sum branches (256×512 and 256×384 weights). Computing them
    in the other order makes XLA name their fusions the other way round (`ynn_fusion` ↔
    `ynn_fusion.1`): the same work under swapped names."""
    import numpy as np

    rng = np.random.default_rng(5)
    w1 = jnp.asarray(rng.normal(size=(256, 512)) * 0.05, jnp.float32)
    w2 = jnp.asarray(rng.normal(size=(256, 384)) * 0.05, jnp.float32)
    x = jnp.asarray(rng.normal(size=(64, 256)), jnp.float32)

    def f(w1, w2, x):
        def branch(w):
            return jnp.sum(jnp.tanh(x @ w) * x.sum())

        return branch(w2) + branch(w1) if swap else branch(w1) + branch(w2)

    return jax.jit(f), (w1, w2, x)


# XLA CPU passes that fuse elementwise work (disabled for the unfused case).
NO_FUSION = {"xla_disable_hlo_passes": "cpu-instruction-fusion,fusion,loop-fusion"}
# case: (builder, compiler options)
COMPARE_CASES = {
    "mlp_b64": (lambda: small_mlp(64), None),
    "mlp_b128": (lambda: small_mlp(128), None),
    "mlp_b64_unfused": (lambda: small_mlp(64), NO_FUSION),
    "branches": (lambda: branches(False), None),
    "branches_swapped": (lambda: branches(True), None),
}


def capture_compare_case(out, name, steps=3):
    build, options = COMPARE_CASES[name]
    fn, args = build()
    lowered = fn.lower(*args)
    compiled = lowered.compile(options) if options else lowered.compile()
    ca = compiled.cost_analysis()
    ca = ca[0] if isinstance(ca, (list, tuple)) else ca
    module = compiled.runtime_executable().hlo_modules()[0].name
    for _ in range(3):  # warm up (first-run allocations, thread pools)
        jax.block_until_ready(compiled(*args))
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    jax.profiler.start_trace(d)
    for i in range(steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            jax.block_until_ready(compiled(*args))
    jax.profiler.stop_trace()
    with open(os.path.join(d, "program.json"), "w") as f:
        json.dump(
            {
                "module": module,
                "jax": jax.__version__,
                "executions": steps,
                "compiler_options": options or {},
                "flops": float(ca.get("flops", 0.0)),
            },
            f,
            indent=1,
        )
    print(name, module, {k: ca.get(k) for k in ("flops", "bytes accessed")})


CASES = {
    "mlp": mlp,
    "matmul_tanh": matmul_tanh,
    "convnet": convnet,
    "attention": attention,
    "while_loop": while_loop,
    "host_bound": host_bound,
}

if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        import subprocess

        out = sys.argv[2]
        names = sys.argv[3:] or list(COMPARE_CASES)
        if len(names) > 1:  # one fresh process per case: only its own program in the profile
            for name in names:
                subprocess.run([sys.executable, __file__, "--compare", out, name], check=True)
        else:
            capture_compare_case(out, names[0])
        sys.exit(0)
    out = sys.argv[1]
    for name in sys.argv[2:] or list(CASES):
        fn, args = CASES[name]()
        compiled = fn.lower(*args).compile()
        ca = compiled.cost_analysis()
        ca = ca[0] if isinstance(ca, (list, tuple)) else ca
        module = compiled.runtime_executable().hlo_modules()[0].name
        jax.block_until_ready(fn(*args))
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        jax.profiler.start_trace(d)
        for i in range(5):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                jax.block_until_ready(fn(*args))
        jax.profiler.stop_trace()
        with open(os.path.join(d, "cost_analysis.json"), "w") as f:
            json.dump(
                {k: float(v) for k, v in ca.items() if isinstance(v, (int, float))},
                f,
                indent=1,
                sort_keys=True,
            )
        with open(os.path.join(d, "program.json"), "w") as f:
            json.dump({"module": module, "jax": jax.__version__, "executions": 5}, f, indent=1)
        print(name, module, {k: ca.get(k) for k in ("flops", "bytes accessed", "transcendentals")})
