"""The run comparison behind `/compare` and `tb-roofline diff`: resolve both sides (run, host,
step), compare them with the model, cache the result, filter and page it, answer JSON.

Plain functions of the two sides' analyses: `RooflineService.comparison` and `.compare` look
the sides up (each analysis cached per run and host) and hand them here; a comparison is
cached by the identity of the two analyses it was made from (the service's `CompareCache`),
so a re-read profile is compared again and an unchanged pair costs a dictionary look-up.
"""

from __future__ import annotations

import dataclasses

from tb_roofline import errors
from tb_roofline.model.compare.comparison import Side, compare
from tb_roofline.model.compare.op_merge import merged_op_records
from tb_roofline.model.compare.pairs import MATCHED, PairTable
from tb_roofline.model.records.record_table import AVERAGE, TOTAL
from tb_roofline.model.records.roofline import Analysis, scoped_op_records
from tb_roofline.serve.service import answers
from tb_roofline.serve.service.answers import columnar
from tb_roofline.serve.service.discovery import ALL_HOSTS

LEVELS = ("op", "program")
SIDES = ("base_", "cand_")  # a pair's column prefixes: the filters match either side


def resolve_scopes(base_analysis, cand_analysis, base_step, step):
    """(base scope, candidate scope): `step` alone applies to both sides; neither = Total."""
    base_step = base_step if base_step not in (None, "") else step
    step = step if step not in (None, "") else base_step
    scopes = []
    for which, analysis, value in (
        ("base", base_analysis, base_step),
        ("run", cand_analysis, step),
    ):
        scope = value if value not in (None, "") else TOTAL
        labels = analysis.scope.step_labels
        if scope != TOTAL and not labels:
            raise errors.NotFoundError(
                f"{which} has no complete steps: only step={TOTAL} is possible, not {scope!r}"
            )
        if scope not in (TOTAL, AVERAGE) and scope not in labels:
            shown = ", ".join(labels[:20]) + (" ..." if len(labels) > 20 else "")
            raise errors.NotFoundError(
                f"unknown step {scope!r} for {which}; steps: {TOTAL}, {AVERAGE}, {shown}"
            )
        scopes.append(scope)
    return scopes


@dataclasses.dataclass
class SideInput:
    """One side of a comparison as the service found it: the run, host and format it names
    and its analysis."""

    run: str
    host: str
    format: str
    analysis: Analysis


def comparison(
    base: SideInput,
    cand: SideInput,
    base_step=None,
    step=None,
    include_io: bool = True,
    view: str = "op",
    cache=None,
    top: int = 10,
):
    """(Comparison, base side info, candidate side info). `cache`: the service's
    `CompareCache`, keyed by the two analyses it was made from."""
    a_base, a_cand = base.analysis, cand.analysis
    for which, a in (("base", a_base), ("run", a_cand)):
        if view != "op" and view not in a.views:
            raise errors.InvalidArgumentError(
                f"view {view!r} is not available for {which}; views: "
                + ", ".join(["op"] + sorted(a.views))
            )
    scope_b, scope_c = resolve_scopes(a_base, a_cand, base_step, step)
    key = (
        base.run,
        base.host or ALL_HOSTS,
        cand.run,
        cand.host or ALL_HOSTS,
        scope_b,
        scope_c,
        include_io,
        view,
        top,
    )
    cmp = cache.get(key, a_base, a_cand) if cache is not None else None
    if cmp is None:
        sides = [
            Side(
                a.device,
                a.program[include_io],
                scoped_op_records(a, scope, include_io, view, split_by="fingerprint"),
                scope,
                a.num_steps,
                _merger(a, scope, include_io, view),
            )
            for a, scope in ((a_base, scope_b), (a_cand, scope_c))
        ]
        cmp = compare(sides[0], sides[1], top=top)
        if cache is not None:
            cache.put(key, a_base, a_cand, cmp)
    info = [
        {
            "run": side.run,
            "host": side.host or ALL_HOSTS,
            "step": scope,
            "num_steps": side.analysis.num_steps,
            "format": side.format,
            "device": answers.device_json(side.analysis),
        }
        for side, scope in ((base, scope_b), (cand, scope_c))
    ]
    return cmp, info[0], info[1]


def _merger(analysis, scope: str, include_io: bool, view: str):
    """Side.merge of one side: its op-level records (model/compare/op_merge.py)."""

    def merge(groups):
        return merged_op_records(analysis, scope, include_io, view, "fingerprint", groups)

    return merge


# A pair's `change` (model/compare/comparison.py), and `matched` for the first three together.
CHANGES = ("faster", "slower", "same", "new", "removed", MATCHED)


def filter_pairs(table: PairTable, categories=(), bound_by=(), name="", change="") -> PairTable:
    """The API's op filters on either side (serve/service/answers.py), then the pair's change:
    `matched` keeps the pairs both sides have, any other value those with that change. The
    comparison view's filter (static/compare_data.js filterPairs) is this rule."""
    if change and change not in CHANGES:
        raise errors.InvalidArgumentError(
            f"change must be one of {', '.join(CHANGES)}, not {change!r}"
        )
    table = answers.filtered(table, categories, bound_by, name, prefixes=SIDES)
    if not change:
        return table
    column = table.columns["status" if change == MATCHED else "change"]
    mask = column == change
    return table if mask.all() else table.select(mask)


def check_arguments(base, level: str) -> None:
    """The arguments a comparison cannot do without, told before any analysis is made."""
    if base is None:
        raise errors.InvalidArgumentError("missing parameter 'base'")
    if level not in LEVELS:
        raise errors.InvalidArgumentError(f"level must be 'op' or 'program', not {level!r}")


def compare_answer(
    cmp,
    base_info: dict,
    cand_info: dict,
    level: str = "op",
    include_io: bool = True,
    view: str = "op",
    categories=(),
    bound_by=(),
    name: str = "",
    offset: int = 0,
    limit=None,
    change: str = "",
) -> dict:
    """The `/compare` answer of a comparison (`comparison`): filtered, paged, columnar."""
    check_arguments(base_info["run"], level)
    full = cmp.ops if level == "op" else cmp.program
    table = filter_pairs(full, categories, bound_by, name, change) if level == "op" else full
    total = len(table)
    table = answers.page(table, offset, limit)
    facets = answers.facets(full.columns, SIDES) if level == "op" else {}
    return {
        "base": base_info,
        "cand": cand_info,
        "level": level,
        "view": view,
        "infeed_outfeed": "include" if include_io else "exclude",
        "summary": cmp.summary,
        "notes": cmp.notes,
        "program": columnar(cmp.program),
        **columnar(table),
        "total_count": total,
        "unfiltered_count": len(full),
        "offset": offset,
        "facets": facets,
    }
