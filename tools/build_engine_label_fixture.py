"""Build testdata/kineto/h200_decode_labels: the real H200 decode trace of
testdata/kineto/h200_decode_eager as if recorded without shapes but with ROCm vLLM's GEMM scope
labels (tb_roofline/costs/torch/engine_labels.py).

Built, not captured: every `cpu_op` loses its recorded shapes (`Input Dims`, `Input type`,
`Input Strides`, `Concrete Inputs`: what `record_shapes=False` leaves out), and each bf16
`aten::matmul` x [n, k] · W [k, m] gets a `user_annotation` `wvSplitKrc {n}x{m}x{k}` around it
(1 ns earlier, 2 ns longer, on its thread) in the form vLLM's `rocm_unquantized_gemm_impl`
writes (the n, m, k order and the name of its skinny bf16 path). Every other event is unchanged.

    python tools/build_engine_label_fixture.py testdata/kineto/h200_decode_eager \\
        testdata/kineto/h200_decode_labels
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import sys

SHAPE_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


def _label(ev: dict) -> dict | None:
    args = ev.get("args", {})
    dims, types = args.get("Input Dims"), args.get("Input type")
    if ev.get("name") != "aten::matmul" or types != ["c10::BFloat16", "c10::BFloat16"]:
        return None
    (n, k), (k2, m) = dims
    assert k == k2, dims
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": f"wvSplitKrc {n}x{m}x{k}",
        "pid": ev["pid"],
        "tid": ev["tid"],
        "ts": round(ev["ts"] - 0.001, 3),
        "dur": round(ev["dur"] + 0.002, 3),
        "args": {},
    }


def main(src_dir: str, out_dir: str) -> None:
    (src,) = glob.glob(os.path.join(src_dir, "*.pt.trace.json.gz"))
    with gzip.open(src, "rt") as f:
        trace = json.load(f)
    labels = [x for x in map(_label, trace["traceEvents"]) if x is not None]
    for ev in trace["traceEvents"]:
        if ev.get("cat") == "cpu_op":
            for key in SHAPE_ARGS:
                ev.get("args", {}).pop(key, None)
    trace["traceEvents"] += labels
    trace["record_shapes"] = 0
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, os.path.basename(src))
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write(json.dumps(trace).encode())
    print(out, len(labels), "labels")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
