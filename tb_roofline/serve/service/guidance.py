"""The `/guidance` answer: the model's `Guidance` record (model/guidance/findings.py, where every
number is made) laid out as the JSON docs/guidance.md describes: finding ids, each finding's ops and
evidence, its group, the notes that say how the totals are made. Nothing is computed here."""

from __future__ import annotations

from tb_roofline.model.guidance.findings import FindingRecord, GroupRecord, Guidance

SCHEMA = "tb-roofline-guidance/1"

UNION_NOTE = (
    "the union of the findings: an op counts once (its largest claim), op savings "
    "within the time non-communication ops ran, overlap within the work left beside "
    "the communication, idle time apart from both; a straggler's wait is counted 0"
)

OPS_SAVED_NOTE = (
    "the program record's time saved on the roof: every op's proven gap to its "
    "roofs summed, t − Σ max(F_i/P, B_i/BW) per op (async halves, ops of unknown "
    "cost and idle time left out); the findings' total counts the gaps and "
    "savings its rules name, each op once, plus idle and exposed communication"
)

IDENTITY = ("program_id", "operation", "precision", "host")


def guidance_answer(g: Guidance) -> dict:
    """The answer's fields in the order the schema gives them."""
    findings = [_finding(f, n) for n, f in enumerate(g.findings)]
    groups = [_group(grp, findings) for grp in g.groups]
    return {
        "schema": SCHEMA,
        "framework": g.framework,
        "runtime": g.runtime,
        "runtime_label": g.runtime_label,
        "unit": {"name": g.unit_name, "label": g.unit_label, "time_us": g.step_us},
        "time": {
            "total_time_us": g.total_time_us,
            "step_time_us": g.step_us,
            "num_steps": g.num_steps,
            "timeline": g.timeline,
        },
        "classes": [
            {"class": c.key, "label": c.label, "time_us": c.time_us, "percent": c.percent}
            for c in g.classes
        ],
        "findings": findings,
        "groups": groups,
        "total_time_saved_us": g.total_time_saved_us,
        "total_time_saved_per_step_us": g.total_time_saved_per_step_us,
        "total_percent_of_step": g.total_percent_of_step,
        "total_note": UNION_NOTE,
        "ops_time_saved_us": g.ops_time_saved_us,
        "ops_time_saved_note": OPS_SAVED_NOTE,
        "diagnostics": g.diagnostics,
        "throughput": g.throughput,
    }


def _finding(f: FindingRecord, n: int) -> dict:
    return {
        "id": f"{f.rule}-{n + 1}",
        "rule": f.rule,
        "title": f.title,
        "scope": "op" if f.records else "program",
        "ops": [{k: r[k] for k in IDENTITY} for r in f.records],
        "evidence": {"records": f.records, "facts": f.facts, "bound_formula": f.formula},
        "time_saved_us": f.time_saved_us,
        "time_saved_per_step_us": f.time_saved_per_unit_us,
        "time_saved_per_unit_us": f.time_saved_per_unit_us,
        "percent_of_step": f.percent_of_step,
        "counted_us": f.counted_us,
        "counted_per_unit_us": f.counted_per_unit_us,
        "bound_us": f.bound_us,
        "bound_formula": f.formula,
        "group": None,
        "suggestion": f.suggestion,
    }


def _group(grp: GroupRecord, findings: list) -> dict:
    """The group's entry; its members' `group` names it."""
    gid = f"group-{grp.rule}"
    for n in grp.members:
        findings[n]["group"] = gid
    return {
        "id": gid,
        "rule": grp.rule,
        "title": grp.title,
        "findings": [findings[n]["id"] for n in grp.members],
        "counted_us": grp.counted_us,
        "counted_per_unit_us": grp.counted_per_unit_us,
        "time_saved_us": grp.time_saved_us,
    }
