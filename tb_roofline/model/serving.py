"""Serving steps in the model: step labels by phase, the steps of each phase (for an Average per
phase), and the decode roofline: what a step's weights cost against HBM bandwidth and the
batch at which its GEMMs would turn compute-bound (docs/serving.md).

Input: the readers' `ProfileData.serving_steps` (readers/kineto/serving.py) and the op table
rows of each step. Only single-host analyses get serving facts: aligned steps of several
hosts have no one phase.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.model.records import compute_roof

AVERAGE_PREFIX = "Average · "


def _steps_of(profiles) -> list[dict]:
    if len(profiles) != 1:
        return []
    return list(getattr(profiles[0], "serving_steps", None) or [])


def step_labels(profiles, ids) -> list[str]:
    """The program record label of each aligned step: `134 · decode bs 32` where the step is a
    serving step, else its id."""
    by_id = {}
    for s in _steps_of(profiles):
        by_id.setdefault(int(s["step"]), s["label"])
    return [by_id.get(int(i), str(i)) for i in ids]


def phase_steps(profiles, ids) -> dict:
    """Phase → the aligned step indices of that phase (serving traces only)."""
    phase_of = {}
    for s in _steps_of(profiles):
        phase_of.setdefault(int(s["step"]), s["phase"])
    out: dict = {}
    for i, sid in enumerate(ids):
        p = phase_of.get(int(sid))
        if p is not None:
            out.setdefault(p, []).append(i)
    return out


def phase_average_blocks(phases: dict, step_sums: dict, step_ps, host_label: str) -> list:
    """One `Average · <phase>` program record per phase (roofline.program_records blocks):
    the phase's steps' sums over their count."""
    out = []
    for phase, idx in sorted(phases.items()):
        idx = np.asarray(idx, np.int64)
        n = len(idx)
        avg = {c: np.array([v[idx].sum() / n]) for c, v in step_sums.items()}
        out.append(
            (
                ["average"],
                [AVERAGE_PREFIX + phase],
                [float(step_ps[idx].sum() / n)],
                avg,
                [host_label],
            )
        )
    return out


def _hbm_gbs(device) -> float | None:
    m = device.memory("hbm")
    return m.gbs if m is not None and m.gbs > 0 else None


def _step_sums(p, step: int) -> dict:
    """FLOPs, bytes and time of one step's rows, by category."""
    t = p.ops
    rows = t.rows
    sel = np.asarray(rows["step"]) == step
    op = np.asarray(rows["op"])[sel]
    cat = np.asarray(t.keys["category"], dtype=object)[op]
    prec = np.asarray(t.keys["precision"], dtype=object)[op]
    flops, nbytes = np.asarray(t["flops"])[sel], np.asarray(t["bytes"])[sel]
    time = np.asarray(rows["total_time_ps"], np.float64)[sel]
    out = {}
    for c in set(cat.tolist()):
        m = cat == c
        out[c] = (float(flops[m].sum()), float(nbytes[m].sum()), float(time[m].sum()))
    mm = cat == "matmul"
    main = prec[mm][np.argmax(flops[mm])] if mm.any() else ""
    return {
        "by_category": out,
        "matmul_precision": str(main),
        "bytes": float(nbytes.sum()),
        "time_ps": float(time.sum()),
    }


def summary(profiles, device) -> list[dict]:
    """Per serving step: its facts, its GEMM and attention work, and for decode steps the
    memory-bound floor and the batch at which the GEMMs would reach the ridge point."""
    out = []
    bw = _hbm_gbs(device)
    for s in _steps_of(profiles):
        if int(s["step"]) < 0:  # outside every ProfilerStep: its ops are no step's
            out.append(dict(s))
            continue
        sums = _step_sums(profiles[0], int(s["step"]))
        mm = sums["by_category"].get("matmul", (0.0, 0.0, 0.0))
        att = sums["by_category"].get("attention", (0.0, 0.0, 0.0))
        rec = dict(
            s,
            matmul_flops=mm[0],
            matmul_bytes=mm[1],
            attention_flops=att[0],
            attention_bytes=att[1],
            op_bytes=sums["bytes"],
            op_time_ps=sums["time_ps"],
            tokens_per_s_busy=(
                s["tokens"] / (sums["time_ps"] * 1e-12)
                if s.get("tokens") and sums["time_ps"] > 0
                else None
            ),
        )
        rec.update(decode_roofline(s, mm, att, sums, device, bw))
        out.append(rec)
    return out


def decode_roofline(s: dict, mm, att, sums: dict, device, bw) -> dict:
    """The decode questions, for a decode step with known GEMM work and HBM bandwidth:
    - `weight_floor_us`: the GEMMs' bytes (in decode: the weights, read once a step) at the HBM
      bandwidth, a lower bound on the step's time whatever the batch;
    - `bytes_floor_us`: all of the step's op bytes at that bandwidth;
    - `ridge_batch`: B·R/I, R the ridge point (peak FLOP/s of the GEMMs' precision over HBM
      bandwidth), I the GEMMs' FLOPs per byte at this batch B. GEMM FLOPs grow with B while
      the weights do not, so I grows at most linearly with B: the GEMMs stay memory-bound
      below this batch (a lower bound on the batch that turns them compute-bound).
    - `kv_share`: the attention's share of the step's bytes (the KV cache read)."""
    if s.get("phase") != "decode" or not bw or mm[1] <= 0 or mm[0] <= 0:
        return {}
    peak = float(compute_roof(device, [sums["matmul_precision"]])[0])  # GFLOP/s
    ridge = peak / bw if peak > 0 else None
    intensity = mm[0] / mm[1]
    batch = s.get("batch")
    out = {
        "weight_floor_us": mm[1] / bw / 1e3,
        "bytes_floor_us": sums["bytes"] / bw / 1e3,
        "matmul_intensity": intensity,
        "ridge_flops_per_byte": ridge,
        "kv_share": att[1] / sums["bytes"] if sums["bytes"] > 0 else None,
    }
    if ridge and batch:
        out["ridge_batch"] = batch * ridge / intensity
    small = [sums["by_category"].get(c, (0.0, 0.0, 0.0)) for c in _SMALL]
    out["small_ops_us"] = sum(x[2] for x in small) / 1e6
    out["small_ops_floor_us"] = sum(x[1] for x in small) / bw / 1e3
    out["op_time_us"] = sums["time_ps"] / 1e6
    out["findings"] = findings(out, batch)
    return out


# The ops between the GEMMs of a layer: norms, activations, RoPE, KV-cache stores, casts.
_SMALL = ("normalization", "elementwise", "copy")


def findings(r: dict, batch) -> list[dict]:
    """Serving guidance with its bound: a batch below the ridge (the GEMMs cannot be faster
    than the weight floor: more requests per step are nearly free), KV reads dominating,
    unfused small ops (the time fusing could save is at most theirs)."""
    out = []
    rb = r.get("ridge_batch")
    if rb is not None and batch and batch < rb:
        out.append(
            {
                "code": "batch_below_ridge",
                "text": (
                    f"decode batch {batch} is below the {rb:.0f} at which its GEMMs would turn "
                    "compute-bound: they read the weights once a step "
                    f"({r['weight_floor_us']:.1f} µs at full HBM bandwidth) whatever the batch, "
                    "so larger batches raise tokens/s almost for free up to that size"
                ),
                "bound_us": r["weight_floor_us"],
            }
        )
    share = r.get("kv_share")
    if share is not None and share > 0.5:
        out.append(
            {
                "code": "kv_reads_dominate",
                "text": (
                    f"the KV cache reads are {share:.0%} of the step's bytes: attention, not the "
                    "weights, sets the memory floor (shorter contexts per step, KV quantisation or "
                    "fewer KV heads move it)"
                ),
                "bound_us": r["bytes_floor_us"] * share,
            }
        )
    t, floor, total = (
        r.get("small_ops_us", 0.0),
        r.get("small_ops_floor_us", 0.0),
        r.get("op_time_us", 0.0),
    )
    if total > 0 and t >= 0.1 * total and t > 2 * floor:
        out.append(
            {
                "code": "unfused_small_ops",
                "text": (
                    f"norm, activation, RoPE and KV-store ops take {t:.1f} µs ({t / total:.0%} of "
                    f"the step's op time) for bytes that need {floor:.1f} µs at full HBM "
                    "bandwidth: separate small kernels, bound by launches and latency rather than "
                    f"memory. Fusing them into their neighbours saves at most their {t:.1f} µs"
                ),
                "bound_us": t,
            }
        )
    return out
