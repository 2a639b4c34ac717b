"""Build testdata/kineto/h200_block_labels: the real H200 training trace of
testdata/kineto/h200_block with vLLM's attention and `BLAS` scope labels
(tb_roofline/costs/torch/engine_labels.py) around the ops they would wrap.

Built, not captured. Each forward `aten::scaled_dot_product_attention` q [B, H, L, D],
k [B, H_kv, S, D] gets a `user_annotation` in the form of ROCm vLLM's
`create_attention_profiler_scope` (vllm/v1/utils.py): `attn_non_causal B= Q= S= H= D= KV_H=
DT= BE=` (is_causal as the call recorded it; DT the query's dtype as `str(dtype)` without
"torch."; BE=TORCH_SDPA, what ran); each `aten::linear` x [..., k] · W [m, k] gets
`BLAS {n}x{m}x{k}` (n the rows of x) as `rocm_unquantized_gemm_impl` writes its `F.linear`
fallback. Labels start 1 ns earlier and end 1 ns later than the op, on its thread. Two
variants: `shapes/` keeps every recorded shape (the `BLAS` labels' dtype is then known from
the op inside), `no_shapes/` drops them from every `cpu_op` as `record_shapes=False` would.

    python tools/build_block_label_fixture.py testdata/kineto/h200_block \\
        testdata/kineto/h200_block_labels
"""

from __future__ import annotations

import copy
import glob
import gzip
import json
import math
import os
import sys

SHAPE_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
DTYPES = {"c10::BFloat16": "bfloat16", "c10::Half": "float16", "float": "float32"}


def _name(ev: dict) -> str | None:
    args = ev.get("args", {})
    dims, types = args.get("Input Dims"), args.get("Input type")
    if ev.get("name") == "aten::scaled_dot_product_attention":
        (b, h, lq, d), (_, hk, s, _) = dims[0], dims[1]
        causal = args["Concrete Inputs"][5] == "True"
        return (
            f"attn_{'causal' if causal else 'non_causal'} B={b} Q={lq} S={s} H={h} D={d} "
            f"KV_H={hk} DT={DTYPES[types[0]]} BE=TORCH_SDPA"
        )
    if ev.get("name") == "aten::linear":
        x, w = dims[0], dims[1]
        return f"BLAS {math.prod(x[:-1])}x{w[0]}x{w[1]}"
    return None


def _label(ev: dict) -> dict | None:
    name = _name(ev) if ev.get("cat") == "cpu_op" else None
    if name is None:
        return None
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": name,
        "pid": ev["pid"],
        "tid": ev["tid"],
        "ts": round(ev["ts"] - 0.001, 3),
        "dur": round(ev["dur"] + 0.002, 3),
        "args": {},
    }


def _write(trace: dict, out_dir: str, base: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with gzip.GzipFile(os.path.join(out_dir, base), "wb", mtime=0) as f:
        f.write(json.dumps(trace).encode())


def main(src_dir: str, out_dir: str) -> None:
    (src,) = glob.glob(os.path.join(src_dir, "*.pt.trace.json.gz"))
    with gzip.open(src, "rt") as f:
        trace = json.load(f)
    labels = [x for x in map(_label, trace["traceEvents"]) if x is not None]
    trace["traceEvents"] += labels
    base = os.path.basename(src)
    _write(trace, os.path.join(out_dir, "shapes"), base)
    bare = copy.deepcopy(trace)
    for ev in bare["traceEvents"]:
        if ev.get("cat") == "cpu_op":
            for key in SHAPE_ARGS:
                ev.get("args", {}).pop(key, None)
    bare["record_shapes"] = 0
    _write(bare, os.path.join(out_dir, "no_shapes"), base)
    print(out_dir, len(labels), "labels")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
