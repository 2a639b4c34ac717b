"""Rules every reader applies, written once (docs/design.md: one rule per unit).

- `op_nesting`: which op encloses which on each thread, by one stack walk; `self_times` and
  `innermost_enclosing` answer from that one walk.
- `group_sums`: rows sharing a key summed column by column.
- `longest_markers`: a step's span is its longest marker (the first of equal ones), as XProf
  takes it.
- `kernel_unit_label` / `longest_matmul_unit`: what ran, by the unit the longest GEMM /
  convolution / attention kernel names; helper kernels (split-K reductions, fills, offsets)
  never decide it.
- `corrupt_value_notes`: the diagnostics for values a reader counted as 0 or skipped.
- `program_devices` / `copy_only_note`: a device whose only activity is copies (memcpy /
  memset) ran no program: no core span, no device time, no idle time of its own.

Keep the names stable: other readers import them.
"""

from __future__ import annotations

import collections

import numpy as np

from tb_roofline.devices.precision import KERNEL_PREFIX, with_input_type
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers import kernel_names, self_time

# Times and sums of durations (ps) beyond this would overflow int64: a corrupt profile.
TIME_LIMIT_PS = 1 << 62


# ------------------------------------------------------------------------------ devices


def program_devices(device, ran_program) -> tuple[list, list]:
    """(the devices that ran the program, the devices whose only activity is copies) from one
    entry per activity: its device and whether it is program work (a kernel, not a memcpy or
    memset). A device that only copied runs no program, so it has no span of its own and adds
    no device time or idle time (its copies stay in the op table). Without program work
    anywhere, every device counts."""
    device = np.asarray(device)
    ran_program = np.asarray(ran_program, bool)
    every = sorted(set(device.tolist()))
    ran = set(device[ran_program].tolist())
    if not ran:
        return every, []
    return [d for d in every if d in ran], [d for d in every if d not in ran]


def copy_only_note(devices: list) -> list:
    """The diagnostic naming the devices that only copied (`program_devices`), if any."""
    if not devices:
        return []
    return [
        Diagnostic(
            "info",
            "copy_only_devices",
            f"device(s) {', '.join(map(str, devices))} only copied memory (memcpy / memset, "
            "no kernel): their copies are in the op table, but they ran no program, so they "
            "add no device time or idle time",
        )
    ]


# ------------------------------------------------------------------------------ nesting


def op_nesting(thread, begin, dur) -> tuple[np.ndarray, np.ndarray]:
    """(order, parent): the ops sorted by (thread, begin, -duration) and each op's direct
    parent (the innermost op of its thread that encloses it; -1 at top level). Parents come
    before their children in `order`. Vectorised (readers/self_time.py `parents`): each
    thread's times are laid after the previous thread's, so ops nest only within a thread."""
    thread = np.asarray(thread)
    begin = np.asarray(begin, np.int64)
    dur = np.asarray(dur, np.int64)
    n = len(begin)
    order = np.lexsort((-dur, begin, thread))
    if not n:
        return order, np.zeros(0, np.int64)
    t, b, d = thread[order], begin[order], dur[order]
    cut = np.flatnonzero(np.concatenate(([True], t[1:] != t[:-1])))
    # Each thread's earliest time: its first begin, or an earlier end of a negative duration
    # (kept by the Kineto reader), which must not reach back into the previous thread.
    first = np.minimum.reduceat(np.minimum(b, b + d), cut)
    reach = np.maximum.reduceat(b + np.maximum(d, 0), cut) - first + 1  # each thread's extent
    if int(reach.astype(object).sum()) + int(np.abs(d).max()) >= 1 << 62:
        pos = np.concatenate(
            [  # absurd times: no shifting, each thread on its own
                np.where(p >= 0, p + i, -1)
                for i, p in (
                    (i, self_time.parents(b[i:j], d[i:j]))
                    for i, j in zip(cut.tolist(), cut[1:].tolist() + [n])
                )
            ]
        )
    else:
        offset = np.concatenate(([0], np.cumsum(reach)[:-1])) - first
        pos = self_time.parents(b + np.repeat(offset, np.diff(np.append(cut, n))), d)
    parent = np.full(n, -1, np.int64)
    inner = pos >= 0
    parent[order[inner]] = order[pos[inner]]
    return order, parent


def self_times(parent, dur) -> np.ndarray:
    """Each op's self time (`self_time.self_time`, the one definition) from its direct
    parents (`op_nesting`)."""
    parent = np.asarray(parent, np.int64)
    dur = np.asarray(dur, np.float64)
    nested = parent >= 0
    child = np.bincount(parent[nested], weights=dur[nested], minlength=len(dur))
    return self_time.self_time(dur, child)


def innermost_enclosing(order, parent, thread, begin, end, q_thread, q_begin, q_end):
    """For each query (thread, begin, end): the innermost op on that thread enclosing it (op
    begin <= query begin and query end <= op end), or -1. `order`/`parent` come from
    `op_nesting(thread, begin, end - begin)`; each query is searched within its own thread's
    ops only, comparing times exactly."""
    n_q = len(q_begin)
    out = np.full(n_q, -1, np.int64)
    if not len(order) or not n_q:
        return out
    thread_sorted = np.asarray(thread)[order]
    begin_sorted = np.asarray(begin, np.float64)[order]
    q_thread = np.asarray(q_thread, np.int64)
    q_begin = np.asarray(q_begin, np.float64)
    q_end = np.asarray(q_end, np.float64)
    # Candidate: the last op of the query's thread starting at or before the query.
    pos = np.full(n_q, -1, np.int64)
    lo_all = np.searchsorted(thread_sorted, q_thread, side="left")
    hi_all = np.searchsorted(thread_sorted, q_thread, side="right")
    q_order = np.argsort(q_thread, kind="stable")
    qt_sorted = q_thread[q_order]
    cuts = np.flatnonzero(np.r_[True, qt_sorted[1:] != qt_sorted[:-1], True])
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        qs = q_order[a:b]
        lo, hi = int(lo_all[qs[0]]), int(hi_all[qs[0]])
        if lo == hi:  # no ops on this thread
            continue
        p = np.searchsorted(begin_sorted[lo:hi], q_begin[qs], side="right") - 1
        pos[qs] = np.where(p >= 0, p + lo, -1)
    # Walk up from the candidate to the first op that encloses the query.
    par = np.asarray(parent).tolist()
    end_l = np.asarray(end, np.float64).tolist()
    start_l = np.asarray(begin, np.float64).tolist()
    o = np.asarray(order).tolist()
    qs_l, qe_l = q_begin.tolist(), q_end.tolist()
    for i, p in enumerate(pos.tolist()):
        if p < 0:
            continue
        op = o[p]
        qs, qe = qs_l[i], qe_l[i]
        while op >= 0 and not (start_l[op] <= qs and qe <= end_l[op]):
            op = par[op]
        out[i] = op
    return out


# ------------------------------------------------------------------------------ group sums


def group_codes(*keys) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first): per row the index of its group (groups numbered in order of first
    appearance) and per group its first row. `keys`: equal-length sequences of hashables."""
    n_rows = len(keys[0]) if keys else 0
    rows = list(zip(*(k.tolist() if isinstance(k, np.ndarray) else list(k) for k in keys)))
    index = {k: i for i, k in enumerate(dict.fromkeys(rows))}  # in order of first appearance
    codes = np.fromiter(map(index.__getitem__, rows), np.int64, count=n_rows)
    first = np.zeros(len(index), np.int64)
    first[codes[::-1]] = np.arange(n_rows)[::-1]
    return codes, first


def group_sums(codes: np.ndarray, n_groups: int, **weights) -> dict:
    """Each weight column summed per group (float64)."""
    return {
        k: np.bincount(codes, weights=np.asarray(w, np.float64), minlength=n_groups)
        for k, w in weights.items()
    }


# ------------------------------------------------------------------------------ steps


def longest_markers(step, begin, dur, skip=None):
    """(step, begin, duration) arrays, one per step ascending: the longest marker of each
    step, the first of equal ones (XProf's choice). Markers whose step equals `skip` are
    ignored."""
    step = np.asarray(step, np.int64)
    begin = np.asarray(begin, np.int64)
    dur = np.asarray(dur, np.int64)
    if skip is not None:
        keep = step != skip
        step, begin, dur = step[keep], begin[keep], dur[keep]
    if not len(step):
        return step, begin, dur
    order = np.lexsort((np.arange(len(step)), -dur, step))
    step, begin, dur = step[order], begin[order], dur[order]
    first = np.r_[True, step[1:] != step[:-1]]
    return step[first], begin[first], dur[first]


# ------------------------------------------------------------------------------ precision


def kernel_unit_label(name: str) -> str:
    """ "kernel:<unit>" when `name` is a GEMM/convolution/attention kernel whose name says which
    math unit and precision ran, else ""."""
    if kernel_names.is_matmul_kernel(name):
        unit = kernel_names.kernel_unit(name)
        if unit:
            return KERNEL_PREFIX + unit
    return ""


def kernel_unit_labels(names) -> np.ndarray:
    """`kernel_unit_label` of each name (an object array)."""
    out = np.full(len(names), "", dtype=object)
    for i, name in enumerate(list(names)):
        out[i] = kernel_unit_label(name)
    return out


def longest_matmul_unit(group, dur, unit) -> dict:
    """Per group (e.g. an op call): the unit label of its longest kernel that has one (a
    GEMM/convolution/attention kernel naming its unit). Helper kernels (split-K reductions,
    fills) carry no unit, so they never decide, however long they ran. `group` < 0: none."""
    group = np.asarray(group, np.int64)
    dur = np.asarray(dur, np.float64)
    unit = np.asarray(unit, dtype=object)
    idx = np.flatnonzero((group >= 0) & (unit != ""))
    if not len(idx):
        return {}
    o = idx[np.lexsort((-dur[idx], group[idx]))]
    main = o[np.r_[True, group[o][1:] != group[o][:-1]]]
    return dict(zip(group[main].tolist(), unit[main].tolist()))


# Op categories whose math no GEMM unit does: their kernels' names never decide the precision
# (a norm kernel templated on `_typeConvert`, a cache write named `..._flash`), their inputs do.
NO_GEMM_CATEGORIES = frozenset(
    {
        "elementwise",
        "reduction",
        "normalization",
        "copy",
        "embedding",
        "resample",
        "view",
        "memcpy",
        "memset",
        "communication",
        "data formatting",
    }
)


def op_call_precision(unit: str, input_type: str, category: str) -> str:
    """The precision label of an op call: a GEMM-like op's kernel-named unit with its recorded
    input type beside it (`kernel:tf32/f32`); any other op's recorded input type."""
    if category in NO_GEMM_CATEGORIES:
        return input_type
    return with_input_type(unit, input_type)


def longest_kernel_unit(kernel_time: dict) -> str:
    """The unit label of the longest GEMM/convolution kernel of {kernel name: time}, or ""."""
    best, best_t = "", -1.0
    for name, t in kernel_time.items():
        unit = kernel_unit_label(name)
        if unit and t > best_t:
            best, best_t = unit, t
    return best


# ------------------------------------------------------------------------------ diagnostics


def corrupt_value_notes(fixes: collections.Counter) -> list:
    """Diagnostics for the corrupt values a reader counted as 0 or skipped."""
    notes = []
    if fixes["negative_durations"]:
        notes.append(
            Diagnostic(
                "warning",
                "negative_durations",
                f"{fixes['negative_durations']} events have a negative duration "
                "(or DMA stall); they count as 0",
            )
        )
    if fixes["bad_occurrences"]:
        notes.append(
            Diagnostic(
                "warning",
                "bad_occurrences",
                f"{fixes['bad_occurrences']} events with a num_occurrences below "
                f"0 or above 2^32 were skipped",
            )
        )
    if fixes["negative_costs"]:
        notes.append(
            Diagnostic(
                "warning",
                "negative_costs",
                f"{fixes['negative_costs']} op rows have negative FLOPs or bytes "
                "in their metadata; they count as 0",
            )
        )
    return notes
