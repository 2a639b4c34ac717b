"""The run comparison behind `/compare` and `tb-roofline diff`: resolve both sides (run, host,
step), compare them with the model, cache the result, filter and page it, answer JSON.

Both sides come from `RooflineService.analysis` (cached per run and host); a comparison is
cached by the identity of the two analyses it was made from, so a re-read profile is compared
again and an unchanged pair costs a dictionary look-up.
"""

from __future__ import annotations

from tb_roofline import errors
from tb_roofline.model.compare import MATCHED, PairTable, Side, compare
from tb_roofline.model.op_merge import merged_op_records
from tb_roofline.model.record_table import AVERAGE, TOTAL
from tb_roofline.model.roofline import scoped_op_records
from tb_roofline.serve.caches.memory import CompareCache  # noqa: F401  (the service keeps one)
from tb_roofline.serve.service import answers
from tb_roofline.serve.service.answers import SIGNIFICANT_DIGITS, columnar, round_significant  # noqa: F401
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


def comparison(
    service,
    base: str,
    run: str,
    base_host: str = "",
    host: str = "",
    base_step=None,
    step=None,
    include_io: bool = True,
    view: str = "op",
    top: int = 10,
    base_service=None,
):
    """(Comparison, base side info, candidate side info). `base_service`: where the base run
    lives when not in `service`'s logdir (the CLI comparing two logdirs)."""
    base_service = base_service or service
    a_base = base_service.analysis(base, base_host)
    a_cand = service.analysis(run, host)
    for which, a in (("base", a_base), ("run", a_cand)):
        if view != "op" and view not in a.views:
            raise errors.InvalidArgumentError(
                f"view {view!r} is not available for {which}; views: "
                + ", ".join(["op"] + sorted(a.views))
            )
    scope_b, scope_c = resolve_scopes(a_base, a_cand, base_step, step)
    key = (
        base,
        base_host or ALL_HOSTS,
        run,
        host or ALL_HOSTS,
        scope_b,
        scope_c,
        include_io,
        view,
        top,
    )
    cmp = service.compare_cache.get(key, a_base, a_cand)
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
        cmp = compare(*sides, top=top)
        service.compare_cache.put(key, a_base, a_cand, cmp)
    info = [
        {
            "run": r,
            "host": h or ALL_HOSTS,
            "step": s,
            "num_steps": a.num_steps,
            "format": svc.hosts(r)["format"],
            "device": a.device.to_json(),
        }
        for svc, r, h, s, a in (
            (base_service, base, base_host, scope_b, a_base),
            (service, run, host, scope_c, a_cand),
        )
    ]
    return cmp, info[0], info[1]


def _merger(analysis, scope: str, include_io: bool, view: str):
    """Side.merge of one side: its op-level records (model/op_merge.py)."""

    def merge(groups):
        return merged_op_records(analysis, scope, include_io, view, "fingerprint", groups)

    return merge


# A pair's `change` (model/compare.py), and `matched` for the first three together.
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


def compare_answer(
    service,
    base: str,
    run: str,
    base_host: str = "",
    host: str = "",
    base_step=None,
    step=None,
    level: str = "op",
    include_io: bool = True,
    view: str = "op",
    categories=(),
    bound_by=(),
    name: str = "",
    offset: int = 0,
    limit=None,
    base_service=None,
    change: str = "",
) -> dict:
    if base is None:
        raise errors.InvalidArgumentError("missing parameter 'base'")
    if level not in LEVELS:
        raise errors.InvalidArgumentError(f"level must be 'op' or 'program', not {level!r}")
    cmp, base_info, cand_info = comparison(
        service,
        base,
        run,
        base_host,
        host,
        base_step,
        step,
        include_io,
        view,
        base_service=base_service,
    )
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
