"""Op-level records: every record of one op (program and op name) merged into one, across its
input shapes and precisions, made again from the op table's key sums by the model's own record
functions (op_records.op_records, records.build_records), never summed up from derived columns.

A run comparison pairs these when the shape records of an op present on both sides do not all
pair (docs/compare.md, rule `op`).
"""

from __future__ import annotations

import numpy as np

from tb_roofline.model.records.op_records import SPLIT_DATA, op_records
from tb_roofline.model.records.record_table import RecordTable
from tb_roofline.model.records.roofline import Analysis, per_step, scope_rows, scoped_op_records
from tb_roofline.model.records.row_sums import key_sums


def merged_op_records(
    analysis: Analysis, scope: str, include_io: bool, view: str, split_by: str, groups: list
) -> RecordTable:
    """One record per group, in the order of `groups`: each group lists records (indices) of
    `scoped_op_records(analysis, scope, include_io, view, split_by)`, and its record holds
    every call of those records (their time, FLOPs, bytes and occurrences add up). Ranks and
    self-time percentages are among these records only (a comparison reads neither)."""
    split = scoped_op_records(analysis, scope, include_io, view, split_by)
    if split.key_record is None:
        raise ValueError("op records without their key map cannot be merged")
    group_of_record = np.full(len(split), -1, np.int64)
    for g, members in enumerate(groups):
        members = np.asarray(members, np.int64)
        if not len(members) or (group_of_record[members] >= 0).any():
            raise ValueError("each group needs records of its own")
        group_of_record[members] = g
    kr = split.key_record
    group = (
        np.where(kr >= 0, group_of_record[np.maximum(kr, 0)], -1)
        if len(split)
        else np.full(len(kr), -1, np.int64)
    )
    table, denominator, n_steps = scope_rows(analysis, scope, include_io, view)
    src = analysis.scope_source()
    rec = op_records(
        table,
        key_sums(table, analysis.device),
        analysis.device,
        src.num_cores,
        src.host_label,
        include_io,
        denominator,
        split_by=split_by,
        group=group,
    )
    per_step(rec, scope, n_steps)
    # op_records ranks by self time: back to the order of the groups.
    first = np.full(len(groups), -1, np.int64)
    valid = np.flatnonzero(group >= 0)
    first[group[valid[::-1]]] = valid[::-1]
    if rec.key_record is None:
        raise ValueError("merged op records need records made from keys (key_record)")
    order = rec.key_record[first]
    rec = rec.select(order)
    # Several shapes: no one shape names the merged record.
    if split_by in rec.columns:
        rec.columns[split_by] = np.full(len(rec), "", dtype=object)
    for column in SPLIT_DATA.get(split_by, ()):
        rec.columns[column] = np.full(len(rec), None, dtype=object)
    return rec
