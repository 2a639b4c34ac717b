"""Which attention call of a serving step is which layer of the model, and what clamping the
sliding-window layers' context to the window says (docs/serving.md, "Sliding-window
attention"). The windows come from the model's config (readers/model_config.py); the clamp
itself is costs/torch/serving_ops.py `windowed_sums`.
"""

from __future__ import annotations

from tb_roofline.costs.torch import serving_ops
from tb_roofline.diagnostics import Diagnostic


def layers_of_calls(col, steps: list, step_of: dict, windows) -> tuple[dict, list[Diagnostic]]:
    """Op index → the model layer of each attention call of an annotated step: the step's
    outermost attention calls in launch order, layer = call index mod the config's layer count
    (a call nested in another attention call is its layer's). A step whose count of calls is
    not a multiple of the layer count gets no layers (its calls count full attention), and a
    diagnostic says why; no window in the config: no layers needed."""
    if windows is None or windows.window is None or not any(windows.windowed):
        return {}, []
    by_step: dict = {}
    for i, k in step_of.items():
        if k >= 0:
            by_step.setdefault(k, []).append(i)
    out: dict = {}
    refused = []
    for k, calls in sorted(by_step.items()):
        calls.sort(key=lambda i: (col.op_ts[i], -col.op_dur[i]))
        outer: list[int] = []
        end, index = -1, {}
        for i in calls:
            if col.op_ts[i] < end:  # inside the previous outer call: the same layer
                index[i] = len(outer) - 1
                continue
            outer.append(i)
            index[i] = len(outer) - 1
            end = col.op_ts[i] + col.op_dur[i]
        if len(outer) % windows.layers:
            refused.append((steps[k].step, len(outer)))
            continue
        out.update({i: n % windows.layers for i, n in index.items()})
    notes = []
    if refused:
        shown = ", ".join(f"step {s}: {n}" for s, n in refused[:5])
        notes.append(
            Diagnostic(
                "info",
                "attention_window_layers",
                f"{len(refused)} serving steps ran a count of attention calls that is not a "
                f"multiple of the {windows.layers} layers of {windows.source} ({shown}): which "
                "call is which layer is unknown there, so their attention counts assume full "
                "attention on every layer (upper bounds)",
            )
        )
    return out, notes


def count_clamp(clamped: dict, name: str, layer: int, facts, window: int) -> None:
    """Tally a clamped call: its op, its layer, whether the clamp is exact for its step."""
    entry = clamped.setdefault(name, {"calls": 0, "layers": set(), "bound": 0})
    entry["calls"] += 1
    entry["layers"].add(layer)
    phases = [p for p in (facts.context, facts.generation) if p is not None and p.requests]
    if not all(serving_ops.windowed_sums(p, window)[2] for p in phases):
        entry["bound"] += 1


def clamp_note(clamped: dict, windows) -> Diagnostic:
    """What was clamped: the window, the layers, the config file, exact or an upper bound."""
    parts = []
    for name, e in sorted(clamped.items()):
        layers = sorted(e["layers"])
        exact = (
            "exact (one request a phase, or every context within the window)"
            if not e["bound"]
            else f"{e['bound']} of them upper bounds (the annotation gives sums over several "
            "requests, not each request's context)"
        )
        parts.append(
            f"{e['calls']} {name} calls on layers {_ranges(layers)} of {windows.layers}: {exact}"
        )
    return Diagnostic(
        "info",
        "attention_sliding_window",
        f"sliding-window attention from {windows.source} ({windows.rule}): window "
        f"{windows.window} keys; each request's context clamped to it on the windowed layers "
        "(tokens × min(context, window), vLLM's rule), " + "; ".join(parts),
    )


def _ranges(layers: list[int]) -> str:
    """0, 2, 4, …, 34 as `0–34 step 2`; other sets listed."""
    if len(layers) > 2:
        step = layers[1] - layers[0]
        if step > 0 and all(b - a == step for a, b in zip(layers, layers[1:])):
            return f"{layers[0]}–{layers[-1]}" + (f" every {step}" if step > 1 else "")
    return ", ".join(str(x) for x in layers)
