"""Build testdata/engine_metrics/sglang_qwen3_8b_decode.prom: the `/metrics` an SGLang server
started with `--enable-metrics --enable-mfu-metrics` would export around the decode step of
testdata/kineto/sglang_qwen3_8b_decode (Qwen3-8B, bf16, one MI300X, batch 32 decode, the
step annotation's key lengths summing to 32,785), saved once before and once after the step.

Built, not captured: no such server was run. The per-GPU estimates are worked out with the
formulas of vLLM's estimator (vllm/v1/metrics/perf.py: AttentionMetrics, FfnMetrics,
UnembedMetrics; SGLang's counts the same components: linear layers, attention dot products,
weight, activation and KV-cache bytes), for the model's config and the step's scheduled tokens.
The counters' values before the step are an arbitrary earlier total; what the reader uses is
the difference. Labels are SGLang's scheduler labels (model_name, engine_type, tp_rank,
pp_rank).

    python tools/build_engine_metrics_fixture.py testdata/engine_metrics
"""

from __future__ import annotations

import os
import sys

# Qwen3-8B (the GEMM shapes in the capture trace: QKV 6144×4096, O 4096×4096, gate/up
# 24576×4096, down 4096×12288; 36 layers), bf16 weights, activations and KV cache
D, L, Q, KV, HD, DI, V, B = 4096, 36, 32, 8, 128, 12288, 151936, 2
T, CTX = 32, 32785  # decode tokens of the step; the sum of their requests' context lengths


def step_estimates() -> tuple[int, int, int]:
    """(FLOPs, bytes read, bytes written) of the step, per GPU (TP 1, PP 1)."""
    flops = (
        2 * T * D * (Q + 2 * KV) * HD * L  # qkv_proj
        + 2 * T * D * Q * HD * L  # out_proj
        + 2 * (2 * Q * CTX * HD * L)  # attn_qk + attn_av (decode: one token per request)
        + 2 * D * 3 * DI * T * L  # dense_ffn (SwiGLU)
        + 2 * T * D * V  # unembed, every decode token needs logits
    )
    read = (
        T * D * B * L  # qkv_input
        + D * (Q + 2 * KV) * HD * B * L  # qkv_weight
        + T * Q * HD * B * L
        + 2 * CTX * KV * HD * B * L  # attn_input: q, and the KV cache of the context
        + T * Q * HD * B * L  # out_input
        + Q * HD * D * B * L  # out_weight
        + T * D * B * L  # dense_up_gate_input
        + 2 * D * DI * B * L  # dense_up_gate_weights
        + 2 * T * DI * B * L  # dense_silu_input
        + T * DI * B * L  # dense_down_input
        + D * DI * B * L  # dense_down_weights
        + T * D * B  # unembed input
        + D * V * B  # unembed weight
    )
    write = (
        T * (Q + 2 * KV) * HD * B * L  # qkv_output
        + 2 * T * KV * HD * B * L  # kv_cache
        + T * D * B * L  # out_output
        + 2 * T * DI * B * L  # dense_up_gate_output
        + T * DI * B * L  # dense_silu_output
        + T * D * B * L  # dense_down_output
        + T * V * B  # unembed output
    )
    return flops, read, write


LABELS = 'engine_type="unified",model_name="Qwen/Qwen3-8B",pp_rank="0",tp_rank="0"'
HELP = {
    "flops": "Estimated number of floating point operations per GPU "
    "(for Model FLOPs Utilization calculations).",
    "read_bytes": "Estimated number of bytes read from memory per GPU "
    "(for Model FLOPs Utilization calculations).",
    "write_bytes": "Estimated number of bytes written to memory per GPU "
    "(for Model FLOPs Utilization calculations).",
}
EARLIER_STEPS = 417  # the counters before the step: this many such steps already counted


def scrape(values: dict) -> str:
    lines = [
        "# HELP sglang:num_running_reqs The number of running requests.",
        "# TYPE sglang:num_running_reqs gauge",
        f"sglang:num_running_reqs{{{LABELS}}} 32.0",
    ]
    for key, value in values.items():
        name = f"sglang:estimated_{key}_per_gpu"
        lines += [
            f"# HELP {name}_total {HELP[key]}",
            f"# TYPE {name}_total counter",
            f"{name}_total{{{LABELS}}} {float(value)!r}",
            f"{name}_created{{{LABELS}}} 1.7733e+09",
        ]
    return "\n".join(lines) + "\n"


def main(out_dir: str) -> None:
    step = dict(zip(("flops", "read_bytes", "write_bytes"), step_estimates()))
    before = {k: v * EARLIER_STEPS for k, v in step.items()}
    after = {k: before[k] + v for k, v in step.items()}
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "sglang_qwen3_8b_decode.prom")
    with open(path, "w", encoding="utf-8") as f:
        f.write(scrape(before) + scrape(after))
    print(path, step)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "testdata/engine_metrics")
