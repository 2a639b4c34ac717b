"""Op records: one per (program, op, precision) over all cores, hosts and steps, grouped from
the key sums (model/records/row_sums.py), ranked by self time.

Each derived part has its own function: which record each key belongs to, the key that
labels each record, its caveat, the self-time order, the labels, the precisions of a merged
record; `op_records` composes them and `records.build_records` derives the numbers.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.devices.precision import split_kernel_type
from tb_roofline.devices.precision_ceilings import roof_precisions
from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.model.records.floors import mixed_regimes
from tb_roofline.model.records.link_roofs import link_assumption
from tb_roofline.model.records.record_table import RecordTable
from tb_roofline.model.records.records import (
    CONTAINER_CAVEAT,
    build_records,
    compute_roof,
    div,
    mixed_roof,
)
from tb_roofline.model.records.row_sums import group_sums
from tb_roofline.table.op_table import OpTable, distinct, factorize, keys_with_rows

# What records split by a key column carry besides it: the data its text stands for (a
# `fingerprint` renders its key's `input_dims`, so one fingerprint has one value of them).
SPLIT_DATA = {"fingerprint": ("input_dims",)}
# Key columns an op record takes from the key that labels it.
_LABEL_COLUMNS = (
    "category",
    "operation",
    "program",
    "program_id",
    "is_infeed_outfeed",
    "source",
    "tf_op",
    "flops_source",
    "precision",
)


def op_records(
    table: OpTable,
    ksums: dict,
    device: DeviceInfo,
    num_cores: int,
    host_label: str,
    include_io: bool,
    span_ps: float,
    split_by: str | None = None,
    group: np.ndarray | None = None,
) -> RecordTable:
    """One record per (program, op, precision) over all cores, hosts and steps; ranked by self
    time, ties by name. A row merges only calls that ran in one precision (its roof).
    `ksums`: `key_sums` of the table. `split_by`: a key column that splits records further;
    its values are then in the records (an extra column, with those SPLIT_DATA names).
    `group`: a record code per key (-1: left out) in place of that key (`merged_op_records`);
    a record whose keys ran in several precisions is labelled with all of them (`bf16+f32`)
    and sits under their mixed roof."""
    keys = table.keys
    keep, key_rec, n = record_of_key(table, include_io, split_by, group)
    sums = group_sums(ksums, key_rec, n, keep) if n else {c: np.zeros(0) for c in ksums}
    assumed = record_links(keys, ksums, key_rec, keep, n, device)
    mixed = mixed_regimes(ksums, key_rec, keep, n)
    first_key = labelling_keys(key_rec, n)
    cav = record_caveats(keys, key_rec, first_key, n)
    order = self_time_order(keys, first_key, sums, n)
    first_key, sums, cav = first_key[order], {k: v[order] for k, v in sums.items()}, cav[order]
    labels = record_labels(keys, first_key, mixed[order], host_label, n)
    labels["link_assumption"] = assumed[order]
    labels["roof_precision"] = roof_precisions(keys, device)[first_key]
    if group is not None:
        sums = _mixed_precisions(sums, labels, keys["precision"], key_rec, order, device)
    rec = build_records(
        sums,
        device,
        num_cores,
        labels,
        n,
        include_io,
        np.full(n, span_ps),
        cav,
        containers=keys["is_container"][first_key] if n else np.zeros(0, bool),
    )
    # Percentages of all ops' self time in this view: they sum to 100.
    self_pct = div(sums["self_time_ps"], np.full(n, sums["self_time_ps"].sum())) * 100.0
    rec.columns["self_time_percent"] = self_pct
    rec.columns["cumulative_self_time_percent"] = np.cumsum(self_pct)
    if split_by:
        for column in (split_by,) + SPLIT_DATA.get(split_by, ()):
            rec.columns[column] = keys[column][first_key]
    rec.key_record = key_records(key_rec, order, n)
    return rec


def record_of_key(
    table: OpTable, include_io: bool, split_by: str | None, group: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """(keys kept, the record of each key (-1: none), the number of records): a record per
    program id, op name and precision (not the host), split further by `split_by`; or per
    `group` code. Keys without rows, and infeed/outfeed without `include_io`, are left out."""
    keys = table.keys
    keep = np.ones(table.num_keys, bool) if include_io else ~keys["is_infeed_outfeed"]
    keep &= keys_with_rows(table)
    if group is not None:
        keep &= group >= 0
        rec_of_key = np.where(group >= 0, group, 0)
    else:  # record id of each key: program id, op name and precision (not the host)
        split = (factorize(keys[split_by]),) if split_by else ()
        rec_of_key = _combine(
            factorize(keys["program_id"]),
            factorize(keys["operation"]),
            factorize(keys["precision"]),
            *split,
        )
    present = distinct(rec_of_key[keep])
    remap = np.full(int(rec_of_key.max()) + 1 if len(rec_of_key) else 0, -1, np.int64)
    remap[present] = np.arange(len(present))
    key_rec = remap[rec_of_key] if group is None else np.where(keep, remap[rec_of_key], -1)
    return keep, key_rec, len(present)


def record_links(keys: dict, ksums: dict, key_rec, keep, n: int, device) -> np.ndarray:
    """The topology each record's link roof assumes, in words (None for records without link
    bytes). The roof itself is its keys' `link_roof_bytes` sums' share (records.py `derive`,
    model/records/link_roofs.py `link_share`): the rate at which all of them would run, each
    at its own group's roof."""
    assumed = np.full(n, None, dtype=object)
    link_bytes = ksums.get("interconnect_bytes")
    if link_bytes is None or not n:
        return assumed
    m = keep & (key_rec >= 0) & (link_bytes > 0)
    texts: dict = {}
    for k in np.flatnonzero(m & (keys["collective"] != "")).tolist():
        words = link_assumption(str(keys["collective"][k]), device)
        if words:
            texts.setdefault(int(key_rec[k]), []).append(words)
    for r, words in texts.items():
        assumed[r] = "; ".join(dict.fromkeys(words))
    return assumed


def labelling_keys(key_rec: np.ndarray, n: int) -> np.ndarray:
    """The first key of each record: it labels the record."""
    first_key = np.full(n, -1, np.int64)
    valid = np.flatnonzero(key_rec >= 0)
    first_key[key_rec[valid[::-1]]] = valid[::-1]
    return first_key


def record_caveats(keys: dict, key_rec: np.ndarray, first_key: np.ndarray, n: int) -> np.ndarray:
    """Each record's reader caveat (the first of its keys that has one), `container` for a
    record of containers without one."""
    caveat = keys["caveat"]
    has_caveat = np.flatnonzero((caveat != "") & (key_rec >= 0))
    cav = np.full(n, "", dtype=object)
    cav[key_rec[has_caveat[::-1]]] = caveat[has_caveat[::-1]]
    container = keys["is_container"][first_key] if n else np.zeros(0, bool)
    cav[container & (cav == "")] = CONTAINER_CAVEAT
    return cav


def self_time_order(keys: dict, first_key: np.ndarray, sums: dict, n: int) -> np.ndarray:
    """The records in rank order: self time, largest first; ties by name, then precision."""
    if not n:
        return np.zeros(0, np.int64)
    name = keys["operation"][first_key]
    return np.lexsort(
        (keys["precision"][first_key].astype(str), name.astype(str), -sums["self_time_ps"])
    )


def record_labels(keys: dict, first_key: np.ndarray, mixed: np.ndarray, host_label, n) -> dict:
    """The label columns of the records (in rank order): their labelling key's names, the
    data type its inputs had, a program name for programs without one."""
    labels = {
        "record_type": "op",
        "step": "Total",
        "rank": np.arange(1, n + 1),
        "host": host_label,
        "mixed_regimes": mixed,
    }
    for col in _LABEL_COLUMNS:
        labels[col] = keys[col][first_key]
    # The data type its inputs had (the precision names the roof it sits under: a bf16
    # elementwise op runs on the vector units, under their roof).
    labels["dtype"] = _data_types(keys["dtype"][first_key])
    # A program without a module name (no `XLA Modules` event for it) is named by its id.
    unnamed = np.flatnonzero((labels["program"] == "") & (labels["program_id"] != ""))
    if len(unnamed):
        labels["program"] = labels["program"].copy()
        labels["program"][unnamed] = [
            "program " + str(p) for p in labels["program_id"][unnamed].tolist()
        ]
    return labels


def key_records(key_rec: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """The record (its index in rank order) of each key; -1 for keys left out."""
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    return np.where(key_rec >= 0, rank[np.maximum(key_rec, 0)] if n else -1, -1)


def _mixed_precisions(
    sums: dict,
    labels: dict,
    precision: np.ndarray,
    key_rec: np.ndarray,
    order: np.ndarray,
    device: DeviceInfo,
) -> dict:
    """Records of keys in several precisions: every precision in the label, and the roof of
    the mix (records.mixed_roof); the others keep their own precision's ceiling."""
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    seen: dict = {}
    for r, p in zip(key_rec.tolist(), precision.tolist()):
        if r >= 0:
            seen.setdefault(int(rank[r]), set()).add(str(p))
    label, roof = labels["precision"].copy(), labels["roof_precision"].copy()
    peak = compute_roof(device, roof)
    mix = mixed_roof(sums["flops"], sums["roof_time"], device)
    for i, ps in seen.items():
        if len(ps) > 1:
            label[i], roof[i] = "+".join(sorted(ps)), ""
            peak[i] = mix[i]
    labels["precision"], labels["roof_precision"] = label, roof
    return dict(sums, peak=peak)


def _data_types(dtypes: np.ndarray) -> np.ndarray:
    """Data types as named in the API: the recorded input type, also of a row whose kernel
    named its unit (`kernel:tf32/f32` -> f32); "" when none was recorded (`kernel:tf32`)."""
    names = {d: split_kernel_type(d)[1] for d in set(dtypes.tolist())}
    out = np.empty(len(dtypes), dtype=object)
    out[:] = [names[d] for d in dtypes.tolist()]
    return out


def _combine(*codes: np.ndarray) -> np.ndarray:
    """One code per combination of several integer codes (equal combinations, equal codes)."""
    out = np.zeros(len(codes[0]), np.int64)
    for c in codes:
        width = int(c.max()) + 1 if len(c) else 1
        if int(out.max(initial=0)) * width + width >= 2**62:
            out = np.unique(out, return_inverse=True)[1].reshape(-1)
        out = out * width + c
    return np.unique(out, return_inverse=True)[1].reshape(-1) if len(out) else out
