"""Capture small real JAX CPU profiles of sharded programs on 8 host devices (collectives).

usage: python tools/make_jax_collective_profiles.py OUTDIR [CASE ...]     (needs: pip install jax)

Each case runs in a fresh process with XLA_FLAGS=--xla_force_host_platform_device_count=8, so
the profile holds its one program. Writes OUTDIR/<case>/plugins/profile/<session>/<host>.xplane.pb
(5 executions, one per step), OUTDIR/<case>/program.json (module name, jax version, mesh) and
OUTDIR/<case>/module.hlo.txt (the compiled module's HLO text, the reference the tests derive
the collectives' bytes from by hand).

Cases: `jit` + NamedSharding on a 1-D mesh (data parallel: XLA SPMD inserts the gradient
all-reduce), on a 2-D mesh with the batch over one axis (the all-reduce over that axis, in the
mesh form with a device order) and on a 2-D mesh (data x model: all-reduces over one axis);
`shard_map` with psum, all_gather, psum_scatter, ppermute and all_to_all on 1-D and 2-D meshes;
communication inside loops: a pipeline `ppermute` inside `lax.scan` and a `psum` inside a
`lax.while_loop` (XLA `while` ops whose events enclose the collectives and the compute of each
iteration); `shard_map` where each device relays out its shard once a step (a copy per device
per step).
"""

import json
import os
import subprocess
import sys

DEVICES = 8


def _auto(jax):
    """Auto axes: XLA's SPMD partitioner places the collectives (JAX's `jit` default path)."""
    return jax.sharding.AxisType.Auto


def _mlp_step(jax, jnp, mesh, batch_spec, w_specs):
    from jax.sharding import NamedSharding

    k = jax.random.PRNGKey(0)
    w1 = jax.random.normal(k, (256, 1024)) * 0.02
    w2 = jax.random.normal(jax.random.fold_in(k, 1), (1024, 256)) * 0.02
    x = jax.random.normal(jax.random.fold_in(k, 2), (64, 256))

    def loss(w, x):
        return jnp.mean((jnp.tanh(x @ w[0]) @ w[1]) ** 2)

    def step(w, x):
        l, g = jax.value_and_grad(loss)(w, x)
        return [a - 1e-3 * b for a, b in zip(w, g)], l

    ws = [jax.device_put(w, NamedSharding(mesh, s)) for w, s in zip((w1, w2), w_specs)]
    x = jax.device_put(x, NamedSharding(mesh, batch_spec))
    return jax.jit(step), (ws, x)


def jit_dp_1d(jax, jnp):
    """Data parallel over 8 devices: the weights replicated, the batch split."""
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((8,), ("data",), axis_types=(_auto(jax),))
    return _mlp_step(jax, jnp, mesh, P("data", None), (P(), P())) + ({"data": 8},)


def jit_2d(jax, jnp):
    """4 x 2 mesh: the batch over `data`, the hidden dimension over `model`."""
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(_auto(jax),) * 2)
    fn, args = _mlp_step(jax, jnp, mesh, P("data", None), (P(None, "model"), P("model", None)))
    return fn, args, {"data": 4, "model": 2}


def jit_dp_2d(jax, jnp):
    """2 x 4 mesh, the batch over the second axis only, weights replicated: the gradient
    all-reduce runs in 2 groups of 4, which XLA writes in the mesh form with a device order
    (`mesh[...], device_ids=([2,4]T(1,0)) {...}`)."""
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2, 4), ("replica", "data"), axis_types=(_auto(jax),) * 2)
    return _mlp_step(jax, jnp, mesh, P("data", None), (P(), P())) + ({"replica": 2, "data": 4},)


def shard_map_1d(jax, jnp):
    """psum, all_gather, psum_scatter, ppermute and all_to_all over one axis of 8."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((8,), ("i",))

    def body(x):
        s = jax.lax.psum(x, "i")  # all-reduce of f32[128,256]
        g = jax.lax.all_gather(x, "i", tiled=True)  # all-gather to f32[1024,256]
        r = jax.lax.psum_scatter(g, "i", tiled=True)  # reduce-scatter f32[1024,256] -> [128,256]
        p = jax.lax.ppermute(x, "i", [(j, (j + 1) % 8) for j in range(8)])  # ring shift
        a = jax.lax.all_to_all(x, "i", 0, 0, tiled=True)  # all-to-all of f32[128,256]
        return s + r + p + a

    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    x = jax.device_put(
        jax.random.normal(jax.random.PRNGKey(0), (1024, 256)), NamedSharding(mesh, P("i"))
    )
    return fn, (x,), {"i": 8}


def shard_map_2d(jax, jnp):
    """A 2 x 4 mesh: psum over `x` (groups of 2), all_gather and ppermute over `y` (groups of 4),
    psum over both (one group of 8)."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2, 4), ("x", "y"))

    def body(v):
        a = jax.lax.psum(v, "x")  # f32[64,128] in 4 groups of 2
        g = jax.lax.all_gather(v, "y", tiled=True)  # f32[64,128] -> [256,128] in 2 groups of 4
        p = jax.lax.ppermute(v, "y", [(j, (j + 1) % 4) for j in range(4)])
        t = jax.lax.psum(a + p, ("x", "y"))  # one group of 8
        return t + g[:64]

    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y")))
    v = jax.device_put(
        jax.random.normal(jax.random.PRNGKey(1), (128, 512)), NamedSharding(mesh, P("x", "y"))
    )
    return fn, (v,), {"x": 2, "y": 4}


def pipeline_scan(jax, jnp):
    """A pipeline over 8 stages: `lax.scan` over 16 micro-steps, each a matmul + tanh on the
    stage's own weights, then `ppermute` of the activations to the next stage (a ring)."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((8,), ("stage",))

    def body(w, x):
        def micro(h, _):
            h = jnp.tanh(h @ w[0])
            h = jax.lax.ppermute(h, "stage", [(j, (j + 1) % 8) for j in range(8)])
            return h, None

        h, _ = jax.lax.scan(micro, x[0], None, length=16)
        return h[None]

    fn = jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=(P("stage"), P("stage")), out_specs=P("stage"))
    )
    k = jax.random.PRNGKey(2)
    w = jax.device_put(jax.random.normal(k, (8, 256, 256)) * 0.05, NamedSharding(mesh, P("stage")))
    x = jax.device_put(
        jax.random.normal(jax.random.fold_in(k, 1), (8, 128, 256)), NamedSharding(mesh, P("stage"))
    )
    return fn, (w, x), {"stage": 8}


def psum_while(jax, jnp):
    """`lax.while_loop` of 12 iterations (the count carried as data, not a static trip count),
    each a matmul + tanh on the local shard and a `psum` of the result over all 8 devices (the
    carry stays per device: the shard less a tenth of the sum)."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((8,), ("i",))

    def body(w, x, n):
        def cond(c):
            return c[0] < n[0]

        def step(c):
            i, h = c
            h = jnp.tanh(h @ w)
            return i + 1, h - 0.1 * jax.lax.psum(h, "i")  # psum's result is device-invariant

        return jax.lax.while_loop(cond, step, (jnp.int32(0), x))[1]

    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), P("i"), P()), out_specs=P("i")))
    k = jax.random.PRNGKey(3)
    w = jax.device_put(jax.random.normal(k, (256, 256)) * 0.05, NamedSharding(mesh, P()))
    x = jax.device_put(
        jax.random.normal(jax.random.fold_in(k, 1), (1024, 256)), NamedSharding(mesh, P("i"))
    )
    n = jax.device_put(jnp.array([12], jnp.int32), NamedSharding(mesh, P()))
    return fn, (w, x, n), {"i": 8}


def shard_map_relayout(jax, jnp):
    """Each of the 8 devices transposes its f32[256,512] shard once a step (one copy per device
    per step: never a repeat within a step), then the shards are all-reduced."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((8,), ("i",))

    def body(v):
        return jax.lax.psum(jnp.transpose(v), "i")

    fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P()))
    v = jax.device_put(
        jax.random.normal(jax.random.PRNGKey(2), (2048, 512)), NamedSharding(mesh, P("i"))
    )
    return fn, (v,), {"i": 8}


CASES = {
    "jit_dp_1d": jit_dp_1d,
    "jit_dp_2d": jit_dp_2d,
    "jit_2d": jit_2d,
    "shard_map_1d": shard_map_1d,
    "shard_map_2d": shard_map_2d,
    "pipeline_scan": pipeline_scan,
    "psum_while": psum_while,
    "shard_map_relayout": shard_map_relayout,
}


def capture(out, name, steps=5):
    import jax
    import jax.numpy as jnp

    assert len(jax.devices()) == DEVICES, jax.devices()
    fn, args, mesh = CASES[name](jax, jnp)
    compiled = fn.lower(*args).compile()
    module = compiled.runtime_executable().hlo_modules()[0]
    for _ in range(3):  # warm up
        jax.block_until_ready(compiled(*args))
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    jax.profiler.start_trace(d)
    for i in range(steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            jax.block_until_ready(compiled(*args))
    jax.profiler.stop_trace()
    with open(os.path.join(d, "module.hlo.txt"), "w") as f:
        f.write(compiled.as_text())
    with open(os.path.join(d, "program.json"), "w") as f:
        json.dump(
            {
                "module": module.name,
                "jax": jax.__version__,
                "executions": steps,
                "devices": DEVICES,
                "mesh": mesh,
            },
            f,
            indent=1,
        )
    print(name, module.name)


if __name__ == "__main__":
    out, names = sys.argv[1], sys.argv[2:] or list(CASES)
    if len(names) > 1 or os.environ.get("_TB_ROOFLINE_CHILD") != "1":
        env = dict(
            os.environ,
            _TB_ROOFLINE_CHILD="1",
            XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}",
        )
        for name in names:  # one fresh process per case: only its own program in the profile
            subprocess.run([sys.executable, __file__, out, name], check=True, env=env)
    else:
        capture(out, names[0])
