"""Complete steps, aligned across hosts, and the step of each op-table row, with arrays (a
profile of 1,000 steps costs a few sorts, not 1,000 dictionary entries per host).

XProf's rules: a step is complete on a host when every core of the host has a marker for it;
hosts are aligned by position (the i-th complete step of each host makes aligned step i), up
to the host with the fewest; a step's time on a host is its longest marker times the number of
markers (one per core).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.table.op_table import ROW_BLOCK, distinct
from tb_roofline.table.spans import StepSpans


@dataclasses.dataclass
class Steps:
    ids: np.ndarray  # hosts x steps: the step id each host contributes to each aligned step
    time_ps: np.ndarray  # per aligned step: the hosts' step times summed

    def __len__(self) -> int:
        return self.ids.shape[1]


def _host_complete(p) -> tuple[np.ndarray, np.ndarray]:
    """(sorted complete step ids, their step time) of one host."""
    empty = np.zeros(0, np.int64), np.zeros(0, np.float64)
    core, step, dur = StepSpans.columns(p.steps)
    cores = {c.core for c in p.core_spans}
    if not len(step):
        return empty
    ucores = distinct(core)
    if set(ucores.tolist()) != cores:
        return empty
    order = np.lexsort((core, step))
    core, step, dur = core[order], step[order], dur[order]
    start = np.flatnonzero(np.concatenate(([True], step[1:] != step[:-1])))
    new_core = np.concatenate(([True], (step[1:] != step[:-1]) | (core[1:] != core[:-1])))
    distinct_cores = np.add.reduceat(new_core.astype(np.int64), start)
    markers = np.diff(np.append(start, len(step)))
    time = markers * np.maximum.reduceat(dur, start).astype(np.float64)
    complete = distinct_cores == len(ucores)
    return step[start][complete], time[complete]


def align(profiles) -> Steps:
    """Complete steps of every host (profiles in host order), aligned by position."""
    per_host = [_host_complete(p) for p in profiles]
    k = min((len(ids) for ids, _ in per_host), default=0)
    ids = np.array([ids[:k] for ids, _ in per_host], np.int64).reshape(len(per_host), k)
    time = np.sum([t[:k] for _, t in per_host], axis=0) if per_host and k else np.zeros(k)
    return Steps(ids, np.asarray(time, np.float64))


def row_steps(
    steps: Steps,
    host_of_profile: np.ndarray,
    key_host: np.ndarray,
    op: np.ndarray,
    row_step: np.ndarray,
) -> np.ndarray:
    """The aligned step of each row (-1 when its (host, step) is not a complete step).
    `host_of_profile[j]`: the host code of profile j; `key_host`: the host code of each key
    (rows point at keys with `op`)."""
    return step_coder(steps, host_of_profile, key_host, row_step)(op, row_step)


def step_coder(steps: Steps, host_of_profile: np.ndarray, key_host: np.ndarray, row_step):
    """`row_steps` as a function of (op, row_step) for rows whose step ids are among those of
    `row_step` (a table's whole column; then blocks of it): the complete steps sorted once,
    not once per block (a profile of 55,000 steps: a sort of 55,000 per block)."""
    n_hosts, k = steps.ids.shape
    if not len(row_step) or not k:
        return lambda op, rs: np.full(len(rs), -1, np.int64)
    member_host = np.repeat(host_of_profile, k)
    member_step = steps.ids.reshape(-1)
    member_index = np.tile(np.arange(k), n_hosts)
    one_host = len(key_host) and bool((key_host == key_host[0]).all())
    lo = min(int(row_step.min()), int(member_step.min()))
    hi = max(int(row_step.max()), int(member_step.max()))
    width = hi - lo + 1
    top = int(max(key_host.max(initial=0), member_host.max(initial=0)))
    if width * (top + 1) >= 2**62:  # step ids too far apart for one key: rank them per call
        return lambda op, rs: _ranked_row_steps(
            member_host, member_step, member_index, key_host, op, rs
        )
    member = member_host * width + (member_step - lo)
    member, member_index = _last_members(member, member_index)
    index_of = _index_table(member, member_index, width * (top + 1), len(row_step))

    def codes(op: np.ndarray, rs: np.ndarray) -> np.ndarray:
        rows = np.subtract(rs, lo, dtype=np.int64)  # (a new array; the column may be int32)
        if not one_host:
            rows += key_host[op] * width
        elif key_host[0]:
            rows += int(key_host[0]) * width
        if index_of is not None:
            return index_of[rows]
        return _look_up(member, member_index, rows)

    return codes


def _ranked_row_steps(member_host, member_step, member_index, key_host, op, row_step):
    """`row_steps` with the step ids ranked first (ids too far apart to make one key)."""
    uniq, inv = np.unique(np.concatenate([member_step, row_step]), return_inverse=True)
    inv = inv.reshape(-1)
    width = len(uniq)
    member = member_host * width + inv[: len(member_step)]
    rows = key_host[op] * width + inv[len(member_step) :]
    member, member_index = _last_members(member, member_index)
    return _look_up(member, member_index, rows)


def _last_members(member: np.ndarray, member_index: np.ndarray):
    """The (host, step) keys sorted, with their aligned index; two profiles of one host name:
    the last one's step wins (as a dictionary would keep it)."""
    order = np.argsort(member, kind="stable")
    member, member_index = member[order], member_index[order]
    last = np.concatenate((member[1:] != member[:-1], [True]))
    return member[last], member_index[last]


def _index_table(member: np.ndarray, member_index: np.ndarray, size: int, n_rows: int):
    """The aligned index of every (host, step) key below `size`, -1 for non-members, when
    such a table is no longer than the rows it serves (a gather per row instead of
    `_look_up`'s binary search: 20,000 steps and 5.8 million rows, 3x faster);
    None when the keys are too spread out."""
    if size > max(n_rows, 1 << 16):
        return None
    table = np.full(size, -1, np.int64)
    table[member] = member_index
    return table


def _look_up(member: np.ndarray, member_index: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The aligned index of each row's (host, step) key, -1 where it is no member."""
    at = np.searchsorted(member, rows)
    np.minimum(at, len(member) - 1, out=at)
    # (in blocks: `member[at]` whole would be a third array as long as the table)
    found = np.empty(len(rows), bool)
    for lo in range(0, len(rows), ROW_BLOCK):
        part = slice(lo, lo + ROW_BLOCK)
        np.equal(member[at[part]], rows[part], out=found[part])
    del rows
    out = member_index[at]  # reuse: the result replaces the positions
    del at
    out[~found] = -1
    return out
