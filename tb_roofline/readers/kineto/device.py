"""The Kineto reader's device (data-sheet peaks for the GPU that ran) and its trace-level
diagnostics."""

from __future__ import annotations

import math

import numpy as np

from tb_roofline.costs.torch import flops as torch_flops
from tb_roofline.costs.torch import serving_ops
from tb_roofline.devices.gpu_peaks import kineto_device_peaks
from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers.kineto.event_fields import int_or
from tb_roofline.readers.kineto.events import MAX_NAME_CHARS


def device_properties(meta: dict) -> list:
    """The trace's `deviceProperties` entries (dicts), non-finite numbers dropped."""
    props = meta.get("deviceProperties")
    return (
        [
            {k: v for k, v in p.items() if not isinstance(v, float) or math.isfinite(v)}
            for p in props
            if isinstance(p, dict)
        ]
        if isinstance(props, list)
        else []
    )


def device_info(props, spans, gpu: bool) -> tuple[DeviceInfo, list]:
    """Data-sheet peaks for the GPU that ran the kernels (Kineto carries no clock); a CPU-only
    trace has no peaks (the service applies a device file when there is one)."""
    if gpu:
        used = {s.core for s in spans}
        prop = next((p for p in props if int_or(p.get("id"), None) in used), None)
        if prop is None and props:
            prop = props[0]
        if prop is None:
            return DeviceInfo(type="GPU", kind="gpu", num_cores=max(len(used), 1)), []
        peaks = kineto_device_peaks(prop, num_cores=max(len(used), 1))
        if prop.get("name"):  # the name the trace gives, not the data sheet's spelling
            peaks.device.type = str(prop["name"])
        return peaks.device, peaks.diagnostics
    return DeviceInfo(type="CPU", kind="cpu", num_cores=1), []


def trace_notes(col, c, has_gpu: bool, hw, unattributed: int) -> list:
    """What the reader says about the trace as a whole (shapes missing, kernels outside ops,
    counters without timing, skipped events)."""
    return _op_notes(col, c, unattributed) + _counter_notes(has_gpu, hw) + _cut_notes(col)


def _op_notes(col, c, unattributed: int) -> list:
    """Op costs unknown: shapes not recorded, kernels outside every op."""
    out = []
    if (
        c.n_ops
        and not any(c.costs[k].source == "formula" for k in set(c.op_cost.tolist()))
        and not col.meta.get("record_shapes")
    ):
        out.append(
            Diagnostic(
                "warning",
                "no_shapes",
                "the trace was recorded without record_shapes=True: op FLOPs and bytes are unknown "
                "(profile with torch.profiler.profile(record_shapes=True))",
            )
        )
    if unattributed:
        out.append(
            Diagnostic(
                "info",
                "kernels_without_op",
                f"{unattributed} kernels were launched outside any aten op; they are listed by "
                "kernel name without FLOPs",
            )
        )
    return out


def _counter_notes(has_gpu: bool, hw) -> list:
    """Hardware counters without kernel times."""
    out = []
    if hw is not None and not hw.kernel_time_known:
        out.append(
            Diagnostic(
                "info",
                "hw_counters_without_timing",
                f"{len(hw.kernels)} kernels carry CUPTI hardware counters, but the range profiler "
                "does not time kernels: hardware FLOPs are shown without rates",
            )
        )
    if not has_gpu and hw is not None:
        out.append(
            Diagnostic(
                "warning",
                "no_kernel_timing",
                "this GPU trace holds no kernel events (captured with the CUPTI range profiler), "
                "so op times on the device are unknown",
            )
        )
    return out


def _cut_notes(col) -> list:
    """Names cut, shapes recorded negative, events skipped."""
    out = []
    if col.long_names:
        out.append(
            Diagnostic(
                "warning",
                "long_names",
                f"{col.long_names} op or kernel names are longer than {MAX_NAME_CHARS:,} "
                "characters; they were cut there (names that differ only after that share a row)",
            )
        )
    negative = col.cost_negative and int(
        np.count_nonzero(np.array(col.cost_negative, bool)[np.asarray(col.op_cost, np.int64)])
    )
    if negative:
        out.append(
            Diagnostic(
                "warning",
                "negative_shapes",
                f"{negative} op calls record a negative dimension in 'Input Dims' (a corrupt "
                "shape); they count without FLOPs or bytes",
            )
        )
    if col.bad_events:
        out.append(
            Diagnostic(
                "warning",
                "bad_events",
                f"{col.bad_events} events were skipped: a required field was missing or malformed",
            )
        )
    return out


# Why an op row has no FLOP count, from what the trace recorded for it (the first that
# applies); each says what would give it one.
_COMPILED = ("CompiledFunction", "CompiledFunctionBackward", "Torch-Compiled Region")
WHY_NO_COST = {
    "compiled": "a torch.compile region: its kernels carry no Inductor annotations "
    "(kernel_flop, kernel_num_gb: torch._inductor.config.benchmark_kernel) and no "
    "shapes of their own",
    "kernel": "a kernel whose launch has no recorded op around it (launched before the trace "
    "began, from a thread without ops, or by a library the profiler does not see)",
    "bytes": "bytes known, FLOPs not",
    "graph_replay": "a kernel replayed from a CUDA/HIP graph: its op and shapes were recorded "
    "only when the graph was captured; put that capture trace beside this one "
    "(graph_replay_without_capture)",
    "no_shapes": "its calls recorded no shapes (profile with record_shapes=True)",
    "no_formula": "no formula for this op (recording shapes would not give it one)",
    "moe_no_weights": "a fused MoE layer that recorded no expert weights and no top-k (only "
    "its hidden states and router logits): its work cannot follow",
    "no_step_sums": "paged/varlen attention: its work is Σ Sq·Sk over the step's sequences, "
    "values no shape holds; the engine's step annotation (SGLang "
    "roofline_annotations) gives them",
}
_FORMULA_FAMILIES = frozenset(
    {
        "matmul",
        "convolution",
        "attention",
        "normalization",
        "elementwise",
        "reduction",
        "copy",
        "embedding",
        "recurrent",
        "resample",
    }
)


def why_no_cost(name: str, source: str, shapes: bool | None = None, replayed: bool = False) -> str:
    """The WHY_NO_COST key of an op row without FLOPs, from the real cause: `shapes` whether
    its calls recorded input shapes (None: not known, judged by the op's family); `replayed`
    a kernel row replayed from a graph whose capture is not there (whatever its name says:
    `kernel_unified_attention_3d` lacks its op, not its step's sums)."""
    if replayed:
        return "graph_replay"
    if source == "bytes":
        return "bytes"
    if name.startswith(_COMPILED):
        return "compiled"
    if "(" in name or name.startswith(
        ("void ", "nccl", "triton__", "cutlass", "ampere_", "sm80_", "sm90_", "Memcpy", "Memset")
    ):
        return "kernel"
    if (
        not shapes
        and name.startswith("aten::")
        and torch_flops.category_of(name) in _FORMULA_FAMILIES
    ):
        return "no_shapes"  # a family with formulas: shapes would have given it one
    if serving_ops.is_serving_attention(name):
        return "no_step_sums"
    if "moe" in name.lower() or "fused_experts" in name:
        return "moe_no_weights"
    return "no_formula"


def uncosted_ops(ops, top: int = 5, floor: float = 0.01, replayed=frozenset()) -> list:
    """The ops that still have no FLOP count, by their share of the op time (the largest few,
    each at least `floor` of it), each with why (WHY_NO_COST), so a reader knows where the
    roofline is blind and what would light it. `replayed`: names of kernels replayed from a
    CUDA/HIP graph with no op attributed (no capture trace for them)."""
    t = np.asarray(ops["total_time_ps"], np.float64)
    total = float(t.sum())
    if total <= 0:
        return []
    unknown = ~np.asarray(ops["flops_known"], bool)
    if not unknown.any():
        return []
    names = np.asarray(ops["operation"], dtype=object)[unknown]
    sources = np.asarray(ops["flops_source"], dtype=object)[unknown]  # "bytes": bytes only
    # Whether any call of a name recorded shapes (input dims known).
    recorded = {
        n
        for n, d in zip(names.tolist(), np.asarray(ops["input_dims"], dtype=object)[unknown])
        if d is not None
    }
    # (object arrays as they are: a fixed-width copy is as wide as the longest name, per row)
    name_u, name_i = np.unique(names, return_inverse=True)
    src_u, src_i = np.unique(sources, return_inverse=True)
    uniq, inverse = np.unique(
        name_i.reshape(-1) * len(src_u) + src_i.reshape(-1), return_inverse=True
    )
    share = np.bincount(inverse.reshape(-1), weights=t[unknown], minlength=len(uniq)) / total
    order = np.argsort(-share, kind="stable")
    worst = [i for i in order[:top].tolist() if share[i] >= floor]
    if not worst:
        return []
    parts, reasons = [], []
    for i in worst:  # the few listed (at most `top`), not every op
        name, source = str(name_u[uniq[i] // len(src_u)]), str(src_u[uniq[i] % len(src_u)])
        why = why_no_cost(name, source, name in recorded, name in replayed)
        reasons.append(why)
        parts.append(f"{name[:120]} {share[i] * 100:.1f}% ({why})")
    told = "; ".join(f"{k}: {WHY_NO_COST[k]}" for k in dict.fromkeys(reasons))
    return [
        Diagnostic(
            "info",
            "uncosted_ops",
            f"ops without a FLOP count, by share of op time: {'; '.join(parts)} "
            f"(all ops without one: {share.sum() * 100:.1f}%). Why: {told}",
        )
    ]
