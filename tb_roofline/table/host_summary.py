"""A host's profile less its rows: what the client of a Dask cluster holds of a host whose
rows stay on the worker that read it (execute/cluster_held.py). Each table keeps its keys,
unit costs and per-key row sums (table/key_sums.py, made where the rows are), and its rows
become a `HeldRows` (table/held_rows.py): the row count, which keys have rows and the sums the
guidance reads of rows on devices that ran no program; the device, steps, spans, timeline
facts, shapes and diagnostics are the profile's own. Kilobytes where the rows are megabytes.

`summarize` runs where the host was read; `attach` gives the summary, here, the holder its
rows are fetched from; `held_fold` has the holders add a value host by host (a run's per-step
sums, model/records/row_sums.py `StepPass`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from tb_roofline.errors import RowsUnavailableError
from tb_roofline.table.held_rows import HeldRows, RowHolder, is_held, lost
from tb_roofline.table.key_sums import with_row_sums
from tb_roofline.table.op_table import OpTable, ProfileData, keys_with_rows
from tb_roofline.table.unspanned import summarized

TABLES = ("ops", "kernels", "hw_ops")


def summarize(p: ProfileData) -> ProfileData:
    """The host's profile with each op table's rows replaced by what stands for them."""
    tables: dict[str, Any] = {}
    for attr in TABLES:
        table = with_row_sums(getattr(p, attr))
        if table is None:
            continue
        rows = HeldRows(len(table), keys_with_rows(table), attr)
        if attr == "ops":
            summarized(p, rows)
        tables[attr] = OpTable(table.keys, rows, table.unit_costs, table.row_sums)
    return dataclasses.replace(p, **tables)


def attach(summary: ProfileData, holder: RowHolder) -> ProfileData:
    """The summary, its tables' rows fetched from `holder` when first asked for."""
    for attr in TABLES:
        table = getattr(summary, attr)
        if table is not None and isinstance(table.rows, HeldRows):
            table.rows.holder = holder
    return summary


def holder_of(p: ProfileData) -> RowHolder | None:
    """The holder of a profile's op rows when they are kept elsewhere (fetched here too, or
    not: a fold still runs where they are kept)."""
    rows = p.ops.rows
    return rows.holder if isinstance(rows, HeldRows) else None


def kept_elsewhere(p) -> bool:
    """Whether any of a profile's op tables has its rows kept where it was read."""
    tables = [getattr(p, a, None) for a in TABLES]
    return any(isinstance(t, OpTable) and is_held(t.rows) for t in tables)


def rows_lost(p) -> bool:
    """Whether a profile's rows were kept elsewhere and can no longer be fetched."""
    return any(lost(getattr(p, a, None)) for a in TABLES)


def all_held(profiles: list) -> bool:
    """Whether every profile's op rows are kept elsewhere."""
    return bool(profiles) and all(holder_of(p) is not None for p in profiles)


def held_fold(profiles: list, step: Callable, start):
    """`step(value, k, profiles[k])` over the profiles in order, each call where profile k's
    rows are kept (the holders'), when every profile's are kept elsewhere; None otherwise (the
    caller then passes over the rows here)."""
    if not all_held(profiles):
        return None
    holders: list = [holder_of(p) for p in profiles]
    try:
        return holders[0].fold(holders, step, start)
    except RowsUnavailableError:  # which host is gone is the cluster's to know: all read anew
        for p in profiles:
            p.ops.rows.mark_lost()
        raise
