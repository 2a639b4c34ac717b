"""Stage 6 of the XLA GPU/CPU reader: what the reader says about the profile (diagnostics)."""

from __future__ import annotations

from tb_roofline.costs.hlo.module import METADATA_PLANE
from tb_roofline.diagnostics import Diagnostic


def program_notes(
    space, index, costing, unattributed_ps: float, all_ps: float, devices: int
) -> list:
    """Where the costs came from, and what they could not cover."""
    return (
        _cost_source(space, index, costing)
        + _unattributed(costing, unattributed_ps, all_ps)
        + _by_kernel_name(costing)
        + _copies(costing)
        + _uncovered(costing, all_ps)
        + _assumptions(costing, devices)
    )


def _cost_source(space, index, costing) -> list:
    """Whether the profile holds HLO programs to cost, how many were costed, decode errors."""
    out = []
    if not any(p.name == METADATA_PLANE for p in space.planes) or not len(index):
        out.append(
            Diagnostic(
                "warning",
                "no_hlo_protos",
                "this profile holds no HLO programs (no `Hlo Proto` on /host:metadata), so no "
                "FLOPs or bytes can be computed; kernel time is shown as unattributed",
            )
        )
    else:
        used = [pid for pid, (m, _) in costing.costs.items() if m is not None]
        out.append(
            Diagnostic(
                "info",
                "cost_model",
                f"FLOPs and bytes computed by tb-roofline's HLO cost model from {len(used)} of "
                f"{len(index)} programs' HLO (per execution, × executions); a while loop counts "
                "its body × the known trip count",
            )
        )
    for err in index.errors:
        out.append(Diagnostic("warning", "hlo_decode_error", err))
    return out


def _unattributed(costing, unattributed_ps: float, all_ps: float) -> list:
    """Events that match no HLO instruction, with why."""
    out = []
    reasons = costing.reasons
    if reasons:
        share = 100.0 * unattributed_ps / all_ps if all_ps else 0.0
        what = "kernels" if costing.gpu else "op events"
        out.append(
            Diagnostic(
                "warning",
                "unattributed_time",
                f"{sum(reasons.values())} {what} ({unattributed_ps / 1e6:.3f} µs, {share:.1f}% of "
                'op time) match no HLO instruction and are shown as category "unattributed" with '
                "no FLOPs: " + "; ".join(f"{n} {r}" for r, n in reasons.most_common()),
            )
        )
    return out


def _by_kernel_name(costing) -> list:
    """Kernels whose hlo_op the HLO lacks (command buffers) matched by their own names."""
    if not costing.by_kernel_name:
        return []
    return [
        Diagnostic(
            "info",
            "kernels_by_name",
            f"{costing.by_kernel_name} kernels name an op the HLO lacks (an XLA command buffer: "
            "the profile names the buffer, not the ops in it) and were matched to the "
            "instructions their kernel names are made from; a kernel XLA shares between "
            "identical fusions counts for the one it is named after (docs/hlo_cost_model.md)",
        )
    ]


def _copies(costing) -> list:
    """Runtime copies and fills without `hlo_op`: copies, said apart from unattributed kernels."""
    if not costing.copies:
        return []
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(costing.copies.items()))
    return [
        Diagnostic(
            "info",
            "runtime_copies",
            f"{sum(costing.copies.values())} runtime copies ({kinds}: memcpy_details / "
            "memset_details, or the ROCm runtime's copy kernels) carry no hlo_op: they are rows "
            'of category "memcpy" / "memset" with their time and no FLOPs or bytes',
        )
    ]


def _uncovered(costing, all_ps: float) -> list:
    """Operations no cost rule covers, and the op time they take."""
    out = []
    if costing.unknown:
        out.append(
            Diagnostic(
                "warning",
                "unknown_opcodes",
                "HLO operations with no cost rule count 0 FLOPs: "
                + ", ".join(f"{name} ×{n}" for name, n in costing.unknown.most_common()),
            )
        )
    if costing.uncosted_ps and all_ps:
        out.append(
            Diagnostic(
                "warning",
                "uncosted_time",
                "op time without FLOPs or bytes (no cost rule), by share of op time: "
                + ", ".join(
                    f"{name} {100.0 * t / all_ps:.1f}%"
                    for name, t in costing.uncosted_ps.most_common(8)
                ),
            )
        )
    return out


def _assumptions(costing, devices: int) -> list:
    """What the costs assume where the HLO does not say: replica groups, masks, trip counts."""
    out = []
    if costing.ungrouped:
        names = sorted(op for _, op in costing.ungrouped)
        out.append(
            Diagnostic(
                "info",
                "collective_groups_assumed",
                f"{len(names)} collective(s) name no replica groups, so every device takes part: "
                f"their bus bytes assume the {devices} device(s) of this profile "
                f"({', '.join(names[:5])}{' ...' if len(names) > 5 else ''})",
            )
        )
    if costing.masked:
        shown = sorted(costing.masked.items())[:5]
        out.append(
            Diagnostic(
                "info",
                "attention_mask_not_discounted",
                f"{len(costing.masked)} fused attention op(s) have a causal or windowed mask; "
                "their FLOPs are counted as torch.utils.flop_counter counts them, over every "
                "(query, key) pair (a causal mask does about half that work): "
                + "; ".join(f"{op} ({mask})" for (_, op), mask in shown)
                + (" ..." if len(costing.masked) > 5 else ""),
            )
        )
    if costing.no_trip:
        out.append(
            Diagnostic(
                "info",
                "while_without_trip_count",
                f"{costing.no_trip} while loop(s) have no known trip count; their cost is one "
                "iteration (their body ops are still timed and costed per execution)",
            )
        )
    return out
