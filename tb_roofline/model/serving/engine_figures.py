"""The serving engine's own FLOP and byte estimates (vLLM's / SGLang's `--enable-mfu-metrics`
counters, readers/metrics/engine.py) beside the project's, per step, and why they differ
(docs/serving.md, "Engine MFU figures").

Input: the engine's figures as a plain dict (`EngineMetrics.as_dict`) and the serving step
records of the analysis (model/serving/phases.py `summary`). Every figure here is made once:
`engine_per_step`, `ours_per_step`, `ratios`; front ends print them as they are.
"""

from __future__ import annotations

ENGINE_COUNTS = (
    "the engine counts, from its model config and the tokens it scheduled: the linear layers "
    "(QKV, output, FFN; MoE experts at perfect load balance) for every scheduled token, "
    "attention QK and AV as tokens × context per request (the context clamped to the sliding "
    "window on sliding-window layers), the LM head for the tokens that need logits; bytes as "
    "each weight read once a step, each layer's activations in and out, the KV cache read for "
    "the context and written for the new tokens. Norms, RoPE, sampling and collectives are not "
    "counted, and the batch is the one scheduled, not the one a CUDA graph was padded to"
)
OURS_COUNT = (
    "the profile counts every op it recorded, costed from its shapes: GEMMs at the batch they "
    "ran with (a replayed graph's captured, padded batch), attention from the step annotation's "
    "sums (clamped to the window on the layers a given model config makes sliding-window), "
    "and every norm, RoPE, activation, "
    "copy and KV store; bytes are each op's inputs and outputs, with no reuse across ops"
)


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _sum(steps: list[dict], key: str) -> float | None:
    values = [s.get(key) for s in steps]
    known = [float(v) for v in values if v is not None]
    return float(sum(known)) if known and len(known) == len(values) else None


def _model_flops(s: dict) -> float | None:
    """A step's FLOPs in the work the engine counts: its GEMMs and its attention."""
    mm, att = s.get("matmul_flops"), s.get("attention_flops")
    return None if mm is None or att is None else float(mm + att)


def _engine_bytes(engine: dict) -> float | None:
    r, w = engine.get("read_bytes"), engine.get("write_bytes")
    return None if r is None or w is None else float(r + w)


def ours_per_step(steps: list[dict]) -> dict:
    """The project's FLOPs (all ops; GEMMs and attention only) and bytes per serving step,
    averaged over the trace's serving steps."""
    n = len(steps)
    model = [_model_flops(s) for s in steps]
    known = [m for m in model if m is not None]
    return {
        "steps": n,
        "flops": _div(_sum(steps, "op_flops"), n),
        "model_flops": _div(float(sum(known)), n) if len(known) == n else None,
        "bytes": _div(_sum(steps, "op_bytes"), n),
    }


def engine_per_step(engine: dict, profiled_steps: int) -> dict:
    """The engine's figures per step: its window's counts over its own step count where it
    exports one (vLLM's iteration histogram); else over the profile's serving steps, the
    scrapes taken just before and after the profile; None from one scrape (totals since the
    engine started, no window)."""
    if engine.get("scrapes", 0) < 2:
        return {"steps": None, "steps_from": None, "flops": None, "bytes": None}
    steps, source = engine.get("steps"), "engine"
    if not steps:
        steps, source = profiled_steps, "profile"
    return {
        "steps": steps,
        "steps_from": source if steps else None,
        "flops": _div(engine.get("flops"), steps),
        "bytes": _div(_engine_bytes(engine), steps),
    }


def ratios(ours: dict, theirs: dict) -> dict:
    """Ours over the engine's, per step: all FLOPs, the GEMM and attention FLOPs, bytes."""
    return {
        "flops": _div(ours["flops"], theirs["flops"]),
        "model_flops": _div(ours["model_flops"], theirs["flops"]),
        "bytes": _div(ours["bytes"], theirs["bytes"]),
    }


def _notes(engine: dict, ours: dict, theirs: dict) -> list[str]:
    out = [ENGINE_COUNTS, OURS_COUNT]
    if engine.get("scrapes", 0) < 2:
        out.append(
            f"{engine.get('source')} holds one scrape: its counters are totals since the engine "
            "started, not this profile's window, so they are shown but not compared. Save "
            "/metrics just before and just after profiling, both in the one file"
        )
    elif theirs["steps_from"] == "profile":
        out.append(
            f"the engine exports no step count: its window's figures are divided by the "
            f"profile's serving steps ({ours['steps']}), which holds only if the two scrapes "
            "were taken just before and just after the profile"
        )
    elif theirs["steps"] != ours["steps"]:
        out.append(
            f"the engine counted {theirs['steps']:g} steps between its scrapes and the profile "
            f"holds {ours['steps']}: the per-step figures are each side's own average"
        )
    return out


def engine_comparison(engine: dict | None, serving: list[dict]) -> dict | None:
    """The engine's figures and the project's per serving step, their ratios and what each
    counts; None without engine figures or without serving steps to set them beside."""
    steps = [s for s in serving if int(s.get("step", -1)) >= 0 and "op_time_ps" in s]
    if engine is None or not steps:
        return None
    ours = ours_per_step(steps)
    theirs = engine_per_step(engine, len(steps))
    return {
        "engine": engine,
        "engine_per_step": theirs,
        "ours_per_step": ours,
        "ratio": ratios(ours, theirs),
        "notes": _notes(engine, ours, theirs),
    }
