"""The precision of ops costed from an engine's shape labels (costs/torch/engine_labels.py).

vLLM's GEMM labels name the shapes, not the dtype: its skinny kinds and the W4A16 MoE run in
bf16 or fp16, its `BLAS` fallback in any dtype. What the label wraps may say which, in this
order: the recorded dtype of the deepest GEMM call inside it, else of the nearest op inside it
that recorded one (`record_shapes=True`), else the names of the kernels launched inside it,
when they name one float type between them (`__hip_bfloat16`, `Cijk_…_BBS_…`, `__half`:
readers/kernel_names.py). A label then gets that precision (the roof
it is judged under); a `BLAS` label is costed only with one (its bytes depend on it). Runs on
the columns before row ops are chosen, since a `BLAS` label that gets a cost becomes one.
Attention labels carry their dtype and keep their cost; one of a batch of several sequences is
costed from the batch's longest query and KV length, an upper bound, which a note says.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.costs.torch import engine_labels
from tb_roofline.diagnostics import Diagnostic
from tb_roofline.readers import kernel_names
from tb_roofline.readers.common import innermost_enclosing
from tb_roofline.readers.kineto.columns import Columns
from tb_roofline.readers.kineto.events import KIND_KERNEL

# Float precisions a label may take: what bf16/fp16/fp32 GEMMs and their activations hold.
_FLOATS = frozenset({"bf16", "f16", "f32"})
# kernel_names.kernel_unit → precision (TF32 math and FP32 tensor cores read f32 tensors).
_UNITS = {"bf16": "bf16", "fp16": "f16", "fp32": "f32", "tf32": "f32", "fp32_tc": "f32"}


def _label_ops(c: Columns) -> dict[int, str]:
    """op → its name, for the ops whose name is a GEMM label (not attention)."""
    names = c.names.tolist()
    kinds = {
        i: n
        for i, n in enumerate(names)
        if (lab := engine_labels.parse(str(n))) is not None
        and lab.kind not in engine_labels.ATTENTION
    }
    if not kinds:
        return {}
    ops = np.flatnonzero(np.isin(c.op_name, list(kinds)))
    return {int(i): str(kinds[int(c.op_name[i])]) for i in ops}


def _label_above(parent: np.ndarray, is_label: np.ndarray, start: np.ndarray):
    """For each op of `start` (-1: none): the nearest label op at or above it (-1: none) and
    how many steps up it is; one vectorised step per nesting level."""
    cur, steps = start.astype(np.int64), np.zeros(len(start), np.int64)
    found = np.full(len(start), -1, np.int64)
    active = cur >= 0
    while active.any():
        hit = active & is_label[np.maximum(cur, 0)]
        found[hit] = cur[hit]
        active &= ~hit
        cur[active] = parent[cur[active]]
        steps[active] += 1
        active &= cur >= 0
    return found, steps


def _from_ops_inside(c: Columns, parent: np.ndarray, is_label: np.ndarray) -> dict[int, str]:
    """label op → the float precision recorded inside it: its deepest GEMM call's (under
    autocast the outer call records the caller's fp32 tensors around the bf16 call autocast
    makes), else its nearest descendant's that recorded one."""
    precs = np.array([k.precision for k in c.costs], dtype=object)[c.op_cost]
    gemm = np.array([k.category == "matmul" for k in c.costs], bool)[c.op_cost]
    ops = np.flatnonzero((parent >= 0) & np.isin(precs, list(_FLOATS)))
    label, steps = _label_above(parent, is_label, parent[ops])
    keep = label >= 0
    ops, label, steps = ops[keep], label[keep], steps[keep]
    out: dict[int, str] = {}
    # per label the winner comes last: nearest among the others, then deepest among GEMMs
    rank = np.where(gemm[ops], steps, -steps - (1 << 40))
    for i in np.lexsort((rank, label)).tolist():
        out[int(label[i])] = str(precs[ops[i]])
    return out


def _kernel_ops(c: Columns, order, parent) -> tuple[np.ndarray, np.ndarray]:
    """(kernels, the innermost op enclosing each one's launch) for the kernels whose launch is
    in the trace."""
    rt_by_corr: dict = {}
    for i, k in enumerate(c.rt_corr.tolist()):
        rt_by_corr.setdefault(k, i)
    ks = np.flatnonzero(c.gpu_kind == KIND_KERNEL)
    rt = np.array([rt_by_corr.get(k, -1) for k in c.gpu_corr[ks].tolist()], np.int64)
    ks, rt = ks[rt >= 0], rt[rt >= 0]
    end, q_ts = c.op_ts + c.op_dur, c.rt_ts[rt]
    op = innermost_enclosing(
        order, parent, c.op_thread, c.op_ts, end, c.rt_thread[rt], q_ts, q_ts + c.rt_dur[rt]
    )
    return ks, op


def _from_kernels(c: Columns, order, parent, is_label: np.ndarray) -> dict[int, str]:
    """label op → the one float precision the kernels launched inside it name (none when
    they name none or several)."""
    ks, op = _kernel_ops(c, order, parent)
    label, _ = _label_above(parent, is_label, op)
    names = c.gpu_name[ks[label >= 0]]
    units = {i: _UNITS.get(kernel_names.kernel_unit(str(c.names[i]))) for i in np.unique(names)}
    seen: dict[int, set] = {}
    for lab, n in zip(label[label >= 0].tolist(), names.tolist()):
        if units[n]:
            seen.setdefault(lab, set()).add(units[n])
    return {o: next(iter(u)) for o, u in seen.items() if len(u) == 1}


BLAS_NO_DTYPE = (
    "%d `BLAS n×m×k` scope label(s) of vLLM left without a cost: the label gives no dtype, and "
    "neither an op inside it recorded one (record_shapes) nor its kernels' names say one"
)
ATTENTION_BOUND = (
    "%d vLLM attention scope label(s) of batches of several sequences costed from the batch's "
    "longest query (Q) and KV length (S): their FLOPs and bytes are upper bounds unless every "
    "sequence has the same lengths"
)


def notes(c: Columns, order, parent, add_cost) -> list[Diagnostic]:
    """`apply`, and what it leaves uncosted or bounded, said."""
    _, uncosted = apply(c, order, parent, add_cost)
    out = []
    if uncosted:
        out.append(Diagnostic("info", "blas_label_no_dtype", BLAS_NO_DTYPE % uncosted))
    bounded = _bounded_attention(c)
    if bounded:
        out.append(Diagnostic("info", "attention_label_bound", ATTENTION_BOUND % bounded))
    return out


def _bounded_attention(c: Columns) -> int:
    """Costed attention label calls of more than one sequence (B > 1)."""
    batched = [
        i
        for i, n in enumerate(c.names.tolist())
        if (lab := engine_labels.parse(str(n))) is not None
        and lab.kind in engine_labels.ATTENTION
        and lab.fields["B"] > 1
    ]
    if not batched:
        return 0
    return int(np.count_nonzero(np.isin(c.op_name, batched) & c.op_has_formula))


def apply(c: Columns, order, parent, add_cost) -> tuple[int, int]:
    """Give label ops the precision found (module docstring): a new cost id (`add_cost(c, cost,
    base)`, with the input dims of the label op's own cost id `base`: a scope records none) per
    label name and precision. Returns (labels given a precision, `BLAS`
    labels left without a cost)."""
    labels = _label_ops(c)
    if not labels:
        return 0, 0
    is_label = np.zeros(c.n_ops, bool)
    is_label[list(labels)] = True
    found = _from_kernels(c, order, parent, is_label)
    found.update(_from_ops_inside(c, parent, is_label))  # a recorded dtype wins
    made: dict = {}
    given = 0
    for op, name in labels.items():
        p = found.get(op, "")
        cost = engine_labels.label_cost(name, p) if p else None
        if cost is None:
            continue
        key = (name, p)
        if key not in made:
            made[key] = add_cost(c, cost, int(c.op_cost[op]))
        c.op_cost[op] = made[key]
        c.op_has_formula[op] = True
        given += 1
    blas = {op for op, n in labels.items() if n.startswith("BLAS ")}
    uncosted = sum(1 for op in blas if not c.op_has_formula[op])
    return given, uncosted
