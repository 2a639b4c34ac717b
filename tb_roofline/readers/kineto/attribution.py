"""Stage 3 of the Kineto reader: who did what, and in which step.

Every op is charged to one "row op": the outermost op around it that has a FLOP formula, else
its outermost op that is not an autograd/compiled-graph wrapper. A row op's precision is the one
its innermost call of the same contraction ran in (`inner_precision`): under autocast the
profiler records the outer call with the caller's fp32 tensors around the bf16 call autocast
makes. A GPU activity belongs to the
innermost op enclosing its launch (the runtime event with its correlation id) on the launching
thread, else (newer traces only, where launches carry their op's id) to the op its `External
id` names; it is then charged to that op's row op. Steps are the `ProfilerStep#N` spans in CPU
time; an activity belongs to the step its launch ran in. Nesting comes from one stack walk
(readers/common.py).
"""

from __future__ import annotations

import dataclasses
import re
from itertools import repeat

import numpy as np

from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers import kernel_names
from tb_roofline.readers.common import innermost_enclosing, op_nesting
from tb_roofline.readers.kineto.columns import Columns
from tb_roofline.readers.kineto.events import KIND_KERNEL
from tb_roofline.table.op_table import NO_STEP

_WRAPPER = re.compile(r"^(autograd::|torch::autograd::)|Backward\d*$|^CompiledFunction")


def _is_wrapper(name: str) -> bool:
    """Autograd engine frames and graph nodes: they only call other ops, so rows skip them."""
    return bool(_WRAPPER.search(name))


@dataclasses.dataclass
class Nesting:
    """The ops' tree: `order` (by thread, start, -duration), `parent`, each op's `row_op` and
    `depth` (0: no parent)."""

    order: np.ndarray
    parent: np.ndarray
    row_op: np.ndarray
    depth: np.ndarray

    def enclosing(self, c: Columns, q_thread, q_ts, q_end) -> np.ndarray:
        """The innermost op enclosing each (thread, start, end), or -1."""
        return innermost_enclosing(
            self.order, self.parent, c.op_thread, c.op_ts, c.op_ts + c.op_dur, q_thread, q_ts, q_end
        )


def op_tree(c: Columns) -> tuple[np.ndarray, np.ndarray]:
    """(order, parent) of the ops, by one stack walk per thread."""
    return op_nesting(c.op_thread, c.op_ts, c.op_dur)


def nesting(c: Columns, order=None, parent=None) -> Nesting:
    """Each op's parent, row op (the rule in the module docstring) and depth, in one pass in
    tree order: not level by level, whose cost grows with the depth (a chain of nested ops of
    equal spans is as deep as it is long)."""
    n_ops = c.n_ops
    if order is None:
        order, parent = op_tree(c)
    row_op = np.arange(n_ops)
    depth = np.zeros(n_ops, np.int64)
    par_l = parent.tolist()
    formula_l = c.op_has_formula.tolist()
    wrapper_names = np.array([_is_wrapper(x) for x in c.names.tolist()] + [False], bool)
    wrap_l = wrapper_names[c.op_name].tolist() if n_ops else []
    row_l = [0] * n_ops
    top_l = [0] * n_ops  # outermost non-wrapper op (else the op itself)
    fanc_l = [-1] * n_ops
    depth_l = [0] * n_ops
    for i in order.tolist():  # parents come before their children in this order
        p = par_l[i]
        if p < 0:
            top_l[i] = i
            fanc_l[i] = i if formula_l[i] else -1
        else:
            top_l[i] = i if wrap_l[top_l[p]] else top_l[p]
            depth_l[i] = depth_l[p] + 1
            fanc_l[i] = fanc_l[p] if fanc_l[p] >= 0 else (i if formula_l[i] else -1)
        row_l[i] = fanc_l[i] if fanc_l[i] >= 0 else top_l[i]
    if n_ops:
        row_op = np.asarray(row_l, np.int64)
        depth = np.asarray(depth_l, np.int64)
    return Nesting(order, parent, row_op, depth)


# Categories whose precision picks the compute roof: the innermost call of one of them decides.
CONTRACTIONS = frozenset({"matmul", "convolution", "attention", "recurrent"})


def inner_precision(c: Columns, tree: Nesting, add_cost, cost_shapes: list) -> int:
    """Give each contraction row op the precision of its deepest nested call of the same
    category with a formula, where that differs: a new cost id (`add_cost(c, cost, base
    cost id)`, its input dims kept) with the row op's FLOPs, bytes and shapes (`cost_shapes`,
    by cost id, extended) and that precision. The FLOPs are the same; the bytes stay the
    outer call's. Returns the row ops changed."""
    n = c.n_ops
    if not n:
        return 0
    cats = np.array([k.category for k in c.costs], dtype=object)
    precs = np.array([k.precision for k in c.costs], dtype=object)
    row_cat = cats[c.op_cost[tree.row_op]]
    inner = (
        c.op_has_formula
        & (tree.row_op != np.arange(n))
        & (cats[c.op_cost] == row_cat)
        & np.isin(row_cat, list(CONTRACTIONS))
    )
    cand = np.flatnonzero(inner)
    if not len(cand):
        return 0
    rows = tree.row_op[cand]
    o = np.lexsort((tree.depth[cand], rows))  # by row, deepest last
    last = np.r_[rows[o][1:] != rows[o][:-1], True]
    rows, deepest = rows[o][last], cand[o][last]
    want = precs[c.op_cost[deepest]]
    change = want != precs[c.op_cost[rows]]
    made: dict = {}
    for r, p in zip(rows[change].tolist(), want[change].tolist()):
        key = (int(c.op_cost[r]), p)
        if key not in made:
            made[key] = add_cost(c, c.costs[key[0]]._replace(precision=p), key[0])
            shape = cost_shapes[key[0]] if key[0] < len(cost_shapes) else None
            cost_shapes.extend([None] * (made[key] - len(cost_shapes)) + [shape])
        c.op_cost[r] = made[key]
    return int(np.count_nonzero(change))


@dataclasses.dataclass
class Steps:
    """The ProfilerStep spans, sorted by start (relative ns)."""

    ids: np.ndarray
    begin: np.ndarray
    end: np.ndarray

    def of(self, t_ns: np.ndarray) -> np.ndarray:
        """The step each time falls in (NO_STEP outside every step)."""
        if not len(self.ids) or not len(t_ns):
            return np.full(len(t_ns), NO_STEP, np.int64)
        i = np.searchsorted(self.begin, t_ns, side="right") - 1
        ok = (i >= 0) & (t_ns <= self.end[np.maximum(i, 0)])
        return np.where(ok, self.ids[np.maximum(i, 0)], NO_STEP)

    def spans(self):
        return zip(self.ids.tolist(), self.begin.tolist(), self.end.tolist())


def steps(c: Columns, diagnostics: list) -> Steps:
    """The step spans; overlapping markers are said (each step then starts where the previous
    one ended)."""
    step_b, step_e = c.step_ts, c.step_ts + c.step_dur
    s_order = np.argsort(step_b, kind="stable")
    out = Steps(c.step_ids[s_order], step_b[s_order], step_e[s_order])
    if c.steps_clipped or c.steps_dropped:
        diagnostics.append(
            Diagnostic(
                "warning",
                "steps_clipped",
                f"{c.steps_clipped} ProfilerStep span(s) run past the trace's record window (its "
                "'Record Window End') and are cut there"
                + (f"; {c.steps_dropped} starting after it are left out" if c.steps_dropped else "")
                + ": the profiler recorded nothing later",
            )
        )
    overlapping = int(np.count_nonzero(out.begin[1:] < np.maximum.accumulate(out.end)[:-1]))
    if overlapping:
        diagnostics.append(
            Diagnostic(
                "warning",
                "steps_overlap",
                f"{overlapping} ProfilerStep spans start before an earlier step ends; each step is "
                "counted from the end of the previous one",
            )
        )
    return out


@dataclasses.dataclass
class GpuLinks:
    """Per GPU activity: its row op (-1: a row of its own, by name) and its step; `outside`:
    launched outside every op; `own_rows`: Triton kernels whose op has no cost (a compiled
    region), rows of their own instead of lumped into the region."""

    row: np.ndarray
    step: np.ndarray
    outside: int = 0
    own_rows: int = 0
    launch: np.ndarray | None = None  # launch time (relative ns; its own start when unmatched)


def no_links() -> GpuLinks:
    """The links of a trace without GPU activity: none."""
    return GpuLinks(np.zeros(0, np.int64), np.zeros(0, np.int64))


def gpu_links(c: Columns, tree: Nesting, step_spans: Steps) -> GpuLinks:
    """GPU activity → launching runtime event → enclosing op → row op; its step from the
    launch time (the activity's own start when no launch matches)."""
    corr = c.rt_corr.tolist()
    # each correlation id's first runtime event (the later of a pair is written last)
    rt_by_corr = dict(zip(reversed(corr), range(len(corr) - 1, -1, -1)))
    gpu_rt = np.fromiter(
        map(rt_by_corr.get, c.gpu_corr.tolist(), repeat(-1)), np.int64, count=len(c.gpu_corr)
    )
    linked = gpu_rt >= 0
    gpu_op = np.full(len(c.gpu_ts), -1, np.int64)
    if linked.any():
        r = gpu_rt[linked]
        gpu_op[linked] = tree.enclosing(c, c.rt_thread[r], c.rt_ts[r], c.rt_ts[r] + c.rt_dur[r])
    # External id fallback, only where launches carry op ids (not their correlation ids).
    new_style = len(c.rt_ext) and bool(np.any((c.rt_ext != c.rt_corr) & (c.rt_ext >= 0)))
    if new_style and c.n_ops:
        ext_to_op = {e: i for i, e in enumerate(c.op_ext.tolist()) if e >= 0}
        miss = np.flatnonzero((gpu_op < 0) & (c.gpu_ext >= 0))
        for i in miss.tolist():
            gpu_op[i] = ext_to_op.get(int(c.gpu_ext[i]), -1)
    gpu_row = np.where(gpu_op >= 0, tree.row_op[np.maximum(gpu_op, 0)] if c.n_ops else -1, -1)
    is_k = c.gpu_kind == KIND_KERNEL
    outside = int(np.count_nonzero(is_k & (gpu_row < 0)))
    triton = np.array([kernel_names.is_triton_kernel(x) for x in c.names.tolist()], bool)
    own = is_k & (gpu_row >= 0) & triton[c.gpu_name] if len(c.names) else is_k & False
    if c.n_ops and own.any():
        own &= ~c.op_has_formula[np.maximum(gpu_row, 0)]
        gpu_row = np.where(own, -1, gpu_row)
    launch_t = np.where(
        linked, c.rt_ts[np.maximum(gpu_rt, 0)] if len(c.rt_ts) else c.gpu_ts, c.gpu_ts
    )
    return GpuLinks(gpu_row, step_spans.of(launch_t), outside, int(np.count_nonzero(own)), launch_t)
