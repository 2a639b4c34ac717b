"""Serving steps in the model: step labels by phase, the steps of each phase (for an Average per
phase), and the decode roofline: what a step's weights cost against HBM bandwidth and the
batch at which its GEMMs would turn compute-bound (docs/serving.md).

Input: the readers' `ProfileData.serving_steps` (readers/kineto/serving.py) and the op table
rows of each step. Only single-host analyses get serving facts: aligned steps of several
hosts have no one phase.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.costs.weight_formats import weight_bytes_per_element
from tb_roofline.model.records.records import compute_roof

AVERAGE_PREFIX = "Average · "


def _steps_of(profiles) -> list[dict]:
    if len(profiles) != 1:
        return []
    return list(getattr(profiles[0], "serving_steps", None) or [])


def step_labels(profiles, ids) -> list[str]:
    """The program record label of each aligned step: `134 · decode bs 32` where the step is a
    serving step, else its id."""
    by_id: dict[int, str] = {}
    for s in _steps_of(profiles):
        by_id.setdefault(int(s["step"]), s["label"])
    return [by_id.get(int(i), str(i)) for i in ids]


def phase_steps(profiles, ids) -> dict:
    """Phase → the aligned step indices of that phase (serving traces only)."""
    phase_of: dict[int, str] = {}
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
    """FLOPs, bytes and time of one step's rows, by category, and its GEMM rows' coverage."""
    t = p.ops
    rows = t.rows
    sel = np.asarray(rows["step"]) == step
    op = np.asarray(rows["op"])[sel]
    cat = np.asarray(t.keys["category"], dtype=object)[op]
    prec = np.asarray(t.keys["precision"], dtype=object)[op]
    flops, nbytes = np.asarray(t["flops"])[sel], np.asarray(t["bytes"])[sel]
    time = np.asarray(rows["total_time_ps"], np.float64)[sel]
    known = np.asarray(t.keys["flops_known"], bool)[op]
    out = {}
    for c in set(cat.tolist()):
        m = cat == c
        # a category none of whose rows has a known cost has unknown FLOPs and bytes, not 0
        f, b = (float(flops[m].sum()), float(nbytes[m].sum())) if known[m].any() else (None, None)
        out[c] = (f, b, float(time[m].sum()))
    mm = cat == "matmul"
    main = prec[mm][np.argmax(flops[mm])] if mm.any() else ""
    return {
        "by_category": out,
        "matmul_precision": str(main),
        "flops": float(flops.sum()),
        "bytes": float(nbytes.sum()),
        "time_ps": float(time.sum()),
        "gemm": gemm_coverage(t, sel, op, cat, nbytes, time),
    }


def _is_gemm_row(t, op, cat) -> np.ndarray:
    """GEMM rows: category `matmul` (an op with a GEMM formula, or a kernel row whose name is
    a GEMM's: a replay without its capture), or an op of no known category whose longest
    kernel is a GEMM naming its unit (its dtype `kernel:…`: a fused MoE without its weights)."""
    dtype = np.asarray(t.keys["dtype"], dtype=object)[op]
    named = np.array([str(d).startswith("kernel:") for d in dtype.tolist()], bool)
    return (cat == "matmul") | ((cat == "other") & named)


def gemm_coverage(t, sel, op, cat, nbytes, time) -> dict:
    """The step's GEMM device time and the share of it whose bytes (in decode: the weights)
    are counted; the uncounted rows, longest first."""
    gemm = _is_gemm_row(t, op, cat)
    known = np.asarray(t.keys["flops_known"], bool)[op] & (nbytes > 0)
    total = float(time[gemm].sum())
    covered = float(time[gemm & known].sum())
    names = np.asarray(t.keys["operation"], dtype=object)[op]
    missing = np.flatnonzero(gemm & ~known)
    by_name: dict = {}
    for i in missing.tolist():
        by_name[str(names[i])] = by_name.get(str(names[i]), 0.0) + float(time[i])
    return {
        "time_ps": total,
        "covered_ps": covered,
        "coverage": covered / total if total > 0 else None,
        "uncovered": sorted(by_name.items(), key=lambda kv: -kv[1]),
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
        # a step with no row of a category: its work there is unknown (attention always runs
        # in a serving step; its kernels may be rows of no category, e.g. replays)
        mm = sums["by_category"].get("matmul", (None, None, 0.0))
        att = sums["by_category"].get("attention", (None, None, 0.0))
        rec = dict(
            s,
            matmul_flops=mm[0],
            matmul_bytes=mm[1],
            attention_flops=att[0],
            attention_bytes=att[1],
            op_flops=sums["flops"],
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
    - `kv_share`: the attention's share of the step's bytes (the KV cache read);
    - `weight_coverage`: the share of the step's GEMM time whose bytes are counted. Below
      MIN_WEIGHT_COVERAGE the weight floor, ridge batch and KV share are None and
      `weight_floor_reason` says what is not counted: a floor from the few costed GEMMs would
      describe them, not the model."""
    if s.get("phase") != "decode" or not bw:
        return {}
    gemm = sums["gemm"]
    batch = s.get("batch")
    out: dict = {
        "weight_coverage": gemm["coverage"],
        "gemm_time_us": gemm["time_ps"] / 1e6,
        "covered_gemm_us": gemm["covered_ps"] / 1e6,
        "uncounted_gemms": _uncounted(gemm),
        "hbm_gbs": bw,
        "weight_bytes": None,
        "weight_floor_us": None,
        "ridge_batch": None,
        "matmul_intensity": None,
        "ridge_flops_per_byte": None,
        "bytes_floor_us": sums["bytes"] / bw / 1e3,
        "kv_share": att[1] / sums["bytes"] if att[1] is not None and sums["bytes"] > 0 else None,
    }
    refused = _floor_refused(gemm, mm)
    if refused:
        out["weight_floor_reason"] = refused
        out["kv_share"] = None  # a share of bytes whose weights are mostly not counted
    else:
        peak = float(compute_roof(device, [sums["matmul_precision"]])[0])  # GFLOP/s
        ridge = peak / bw if peak > 0 else None
        intensity = mm[0] / mm[1]
        out["weight_floor_us"] = mm[1] / bw / 1e3
        out["weight_bytes"] = mm[1]
        out["matmul_intensity"] = intensity
        out["ridge_flops_per_byte"] = ridge
        if ridge and batch:
            out["ridge_batch"] = batch * ridge / intensity
    small = [sums["by_category"].get(c, (0.0, 0.0, 0.0)) for c in _SMALL]
    out["small_ops_us"] = sum(x[2] for x in small) / 1e6
    floors = [x[1] for x in small]
    out["small_ops_floor_us"] = None if any(v is None for v in floors) else sum(floors) / bw / 1e3
    out["op_time_us"] = sums["time_ps"] / 1e6
    out["findings"] = findings(out, batch)
    return out


# The least share of the step's GEMM time whose weights must be counted for a weight floor and
# ridge batch to be the model's: below it they would describe the few GEMMs with a cost (an LM
# head), not the layers.
MIN_WEIGHT_COVERAGE = 0.8


def _floor_refused(gemm: dict, mm) -> str:
    """Why no weight floor is stated for this step ('' when one is)."""
    cov = gemm["coverage"]
    if cov is None:
        return "no GEMM ran in this step"
    if cov < MIN_WEIGHT_COVERAGE or not (mm[1] or 0) > 0 or not (mm[0] or 0) > 0:
        top = _uncounted(gemm)
        return (
            f"the GEMMs whose weights are counted ran {cov:.1%} of the step's GEMM time "
            f"({gemm['covered_ps'] / 1e6:,.0f} of {gemm['time_ps'] / 1e6:,.0f} µs), under the "
            f"{MIN_WEIGHT_COVERAGE:.0%} a floor of the model needs; not counted: {top} "
            "(uncosted_ops says why each has no cost)"
        )
    return ""


def _ridge_text(r: dict, batch, rb: float) -> str:
    """The batch-below-ridge finding's words: the weights are the model's only when every GEMM's
    are counted; otherwise the text names the share counted and the floor is a lower bound."""
    floor = f"{r['weight_floor_us']:.1f} µs at full HBM bandwidth"
    tail = " whatever the batch, so larger batches raise tokens/s almost for free up to that size"
    if r["weight_coverage"] >= 1.0:
        return (
            f"decode batch {batch} is below the {rb:.0f} at which its GEMMs would turn "
            f"compute-bound: they read their weights once a step ({floor}; every GEMM of the "
            "step counted)" + tail
        )
    return (
        f"decode batch {batch} is below the {rb:.0f} at which the GEMMs whose weights are "
        f"counted ({r['weight_coverage']:.1%} of the step's GEMM time) would turn compute-bound: "
        f"those GEMMs read their weights once a step ({floor}; a lower bound on the model's, "
        f"the uncounted GEMMs' weights only add to it: {r['uncounted_gemms']})" + tail
    )


def _uncounted(gemm: dict) -> str:
    """The GEMM rows whose weights are not counted, the three longest, with their time."""
    top = ", ".join(
        f"{n[:80]} ({t / 1e6:,.0f} µs{weight_format_note(n)})" for n, t in gemm["uncovered"][:3]
    )
    return top or "none"


def weight_format_note(kernel: str) -> str:
    """What a GEMM kernel's name says each of its weights costs (costs/weight_formats.py):
    its weights' count is what the trace lacks for the floor to include them."""
    b = weight_bytes_per_element(kernel)
    return "" if b is None else f"; its name says {b:g} B per weight, their count is not recorded"


# The ops between the GEMMs of a layer: norms, activations, RoPE, KV-cache stores, casts.
_SMALL = ("normalization", "elementwise", "copy")


def findings(r: dict, batch) -> list[dict]:
    """Serving guidance with its bound: a batch below the ridge (the GEMMs cannot be faster
    than the weight floor: more requests per step are nearly free), KV reads dominating,
    unfused small ops (the time fusing could save is at most theirs)."""
    out = []
    if r.get("weight_floor_reason"):
        out.append(
            {
                "code": "decode_floor_unknown",
                "text": "no weight floor or compute-bound batch for this decode step: "
                + r["weight_floor_reason"],
                "bound_us": None,
            }
        )
    rb = r.get("ridge_batch")
    if rb is not None and batch and batch < rb:
        out.append(
            {
                "code": "batch_below_ridge",
                "text": _ridge_text(r, batch, rb),
                "bound_us": r["weight_floor_us"],
                "formula": (
                    f"weight_floor_us = GEMM bytes / HBM bandwidth = {r['weight_bytes']:,.0f} B / "
                    f"{r['hbm_gbs']:,.0f} GB/s; ridge_batch = B·R/I = {batch}·"
                    f"{r['ridge_flops_per_byte']:.1f}/{r['matmul_intensity']:.2f}; "
                    f"coverage = {r['covered_gemm_us']:,.1f} / {r['gemm_time_us']:,.1f} µs"
                ),
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
    if floor is not None and total > 0 and t >= 0.1 * total and t > 2 * floor:
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
