"""Pairs the op records of two runs (or hosts, or steps), and says which rule paired each.

Rules, tried in this order on the records not paired yet (docs/compare.md):
1. `name`: same program, op name and fingerprint (what it computes; see costs/hlo/fingerprint.py),
   first at the same precision, then at any precision (a precision change is shown, not hidden);
2. `fingerprint`: same program and fingerprint under another name, for fingerprints that alone
   identify the work (XLA: fusions renamed between compilations), same order of precisions;
3. `name_only`: same program and op name, but what it computes changed (other shapes: another
   batch size), first at the same precision, then at any.
Within one key, the k-th record of one side pairs with the k-th of the other, in natural name
order (`fusion.2` before `fusion.10`) for rules 1-2. For rule 3 (several calls of one PyTorch op
whose shapes all changed, e.g. every `aten::conv2d` of a model at another batch size), each
record pairs with the most similar one of the other side: the most input dimensions in common
(`[[8,16,32,32],[32,16,3,3]]` and `[[16,16,32,32],[32,16,3,3]]` share 7 of 8), ties by work per
execution (FLOPs, then bytes). Whatever is left is new (candidate only) or removed (base only):
nothing is dropped. The comparison (model/compare/comparison.py) then applies rule 4, `op`: the
records of an op left here while the other side runs it too are merged into one per side and paired.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from tb_roofline.costs.hlo.fingerprint import is_name_independent

NAME, FINGERPRINT, NAME_ONLY = "name", "fingerprint", "name_only"
OP = "op"  # the op-level pairs of what these rules leave (model/compare/comparison.py)
_DIGITS = re.compile(r"(\d+)")


@dataclasses.dataclass
class Matching:
    """Index arrays into the two record tables, one entry per pair: -1 on the base side for
    new records, -1 on the candidate side for removed ones; `rule` says how each was paired
    ("" for new and removed)."""

    base: np.ndarray
    cand: np.ndarray
    rule: np.ndarray


@dataclasses.dataclass
class MatchKeys:
    """What the matching reads of one side's records (arrays of equal length)."""

    program: np.ndarray
    operation: np.ndarray
    precision: np.ndarray
    fingerprint: np.ndarray
    input_dims: np.ndarray  # what a PyTorch record's fingerprint renders, as data (None: none)
    flops_per_call: np.ndarray
    bytes_per_call: np.ndarray

    @staticmethod
    def of(columns: dict) -> MatchKeys:
        """From record columns: the program by name (ids change between runs), else by id."""
        n = len(columns["operation"])
        names, ids = columns["program"], columns["program_id"]
        program = np.where(names != "", names, np.char.add("#", ids.astype(str))).astype(object)
        program[(names == "") & (ids == "")] = ""
        occ = np.maximum(np.asarray(columns["occurrences"], np.float64), 1e-300)
        fp, dims = columns.get("fingerprint"), columns.get("input_dims")
        return MatchKeys(
            program,
            columns["operation"],
            columns["precision"],
            fp if fp is not None else np.full(n, "", dtype=object),
            dims if dims is not None else np.full(n, None, dtype=object),
            np.nan_to_num(columns["flops"] / occ),
            np.nan_to_num(columns["bytes"] / occ),
        )


def match(base: MatchKeys, cand: MatchKeys) -> Matching:
    nb, nc = len(base.operation), len(cand.operation)
    left_b, left_c = np.arange(nb), np.arange(nc)
    pairs_b, pairs_c, rules = [], [], []
    name_order = (
        _LazyOrder(lambda: _natural_order(base.operation)),
        _LazyOrder(lambda: _natural_order(cand.operation)),
    )
    size_order = (
        _LazyOrder(lambda: _size_order(base, name_order[0].get())),
        _LazyOrder(lambda: _size_order(cand, name_order[1].get())),
    )
    rounds = [
        (NAME, ("program", "operation", "fingerprint", "precision"), name_order, False),
        (NAME, ("program", "operation", "fingerprint"), name_order, False),
        (FINGERPRINT, ("program", "fingerprint", "precision"), name_order, True),
        (FINGERPRINT, ("program", "fingerprint"), name_order, True),
        (NAME_ONLY, ("program", "operation", "precision"), size_order, False),
        (NAME_ONLY, ("program", "operation"), size_order, False),
    ]
    for rule, fields, (order_b, order_c), by_fingerprint in rounds:
        if not len(left_b) or not len(left_c):
            break
        cb, cc = left_b, left_c
        if by_fingerprint:  # only fingerprints that identify the work without the name
            cb = cb[_independent(base.fingerprint[cb])]
            cc = cc[_independent(cand.fingerprint[cc])]
        fb, fc = [getattr(base, f)[cb] for f in fields], [getattr(cand, f)[cc] for f in fields]
        if rule == NAME_ONLY:
            ib, ic = _pair_similar(
                fb,
                fc,
                base.input_dims[cb],
                cand.input_dims[cc],
                order_b.get()[cb],
                order_c.get()[cc],
            )
        else:
            ib, ic = _pair_round(fb, fc, order_b, order_c, cb, cc)
        if not len(ib):
            continue
        pairs_b.append(cb[ib])
        pairs_c.append(cc[ic])
        rules.append(np.full(len(ib), rule, dtype=object))
        left_b = np.setdiff1d(left_b, cb[ib], assume_unique=True)
        left_c = np.setdiff1d(left_c, cc[ic], assume_unique=True)
    pb = np.concatenate(pairs_b + [left_b, np.full(len(left_c), -1)]).astype(np.int64)
    pc = np.concatenate(pairs_c + [np.full(len(left_b), -1), left_c]).astype(np.int64)
    rule_of = np.concatenate(rules + [np.full(len(left_b) + len(left_c), "", dtype=object)])
    return Matching(pb, pc, rule_of.astype(object))


def _independent(fingerprints: np.ndarray) -> np.ndarray:
    return np.fromiter(
        (is_name_independent(f) for f in fingerprints.tolist()), bool, count=len(fingerprints)
    )


class _LazyOrder:
    """An order computed only if some key has several records (ties are rare)."""

    def __init__(self, make):
        self.make = make
        self.value = None

    def get(self) -> np.ndarray:
        if self.value is None:
            self.value = self.make()
        return self.value


def _pair_round(
    fields_b: list,
    fields_c: list,
    order_b: _LazyOrder,
    order_c: _LazyOrder,
    rows_b: np.ndarray,
    rows_c: np.ndarray,
):
    """(indices into side b, indices into side c) of the pairs with equal keys: the k-th of a
    key on one side (in `order`, of the records `rows`) with the k-th on the other."""
    index: dict = {}
    keys_b = list(zip(*[f.tolist() for f in fields_b]))
    keys_c = list(zip(*[f.tolist() for f in fields_c]))
    code_b = np.fromiter(
        (index.setdefault(k, len(index)) for k in keys_b), np.int64, count=len(keys_b)
    )
    code_c = np.fromiter((index.get(k, -1) for k in keys_c), np.int64, count=len(keys_c))
    width = max(len(keys_b), len(keys_c)) + 1
    ib_all = np.arange(len(keys_b))
    ic_all = np.flatnonzero(code_c >= 0)
    if not len(ic_all):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    sub_c = code_c[ic_all]
    tied = (len(code_b) and np.bincount(code_b).max() > 1) or np.bincount(sub_c).max() > 1
    if tied:
        comb_b = code_b * width + _rank_within(code_b, order_b.get()[rows_b])
        comb_c = sub_c * width + _rank_within(sub_c, order_c.get()[rows_c[ic_all]])
    else:
        comb_b, comb_c = code_b * width, sub_c * width
    _, ib, ic = np.intersect1d(comb_b, comb_c, assume_unique=True, return_indices=True)
    return ib_all[ib], ic_all[ic]


def _pair_similar(
    fields_b: list,
    fields_c: list,
    dims_b: np.ndarray,
    dims_c: np.ndarray,
    order_b: np.ndarray,
    order_c: np.ndarray,
):
    """Like `_pair_round`, but within a key of several records on both sides, the pairs with
    the most input dimensions in common first (ties: nearest in `order`)."""
    groups: dict = {}
    for i, k in enumerate(zip(*[f.tolist() for f in fields_b])):
        groups.setdefault(k, ([], []))[0].append(i)
    for j, k in enumerate(zip(*[f.tolist() for f in fields_c])):
        g = groups.get(k)
        if g is not None:
            g[1].append(j)
    pb, pc = [], []
    for bs, cs in groups.values():
        if not cs:
            continue
        if len(bs) == 1 and len(cs) == 1:
            pb.append(bs[0])
            pc.append(cs[0])
            continue
        bs = sorted(bs, key=lambda i: order_b[i])
        cs = sorted(cs, key=lambda j: order_c[j])
        scored = sorted(
            (
                (-_common_dims(dims_b[i], dims_c[j]), abs(x - y), x, y)
                for x, i in enumerate(bs)
                for y, j in enumerate(cs)
            )
        )
        used_b, used_c = set(), set()
        for _, _, x, y in scored:
            if x not in used_b and y not in used_c:
                used_b.add(x)
                used_c.add(y)
                pb.append(bs[x])
                pc.append(cs[y])
    return np.asarray(pb, np.int64), np.asarray(pc, np.int64)


def _common_dims(a, b) -> int:
    """How many input dimensions two shape lists share, position by position."""
    if a is None or b is None or len(a) != len(b):
        return 0
    n = 0
    for x, y in zip(a, b):
        if isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y):
            n += 1 + sum(1 for u, v in zip(x, y) if u == v)
    return n


def _rank_within(codes: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The position of each entry among the entries of its code, in `order`."""
    n = len(codes)
    if not n:
        return np.zeros(0, np.int64)
    idx = np.lexsort((order, codes))
    sorted_codes = codes[idx]
    starts = np.r_[0, np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1]
    ranks = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    out = np.empty(n, np.int64)
    out[idx] = ranks
    return out


def _pad(m) -> str:
    return m.group().zfill(20)


def _natural_order(names: np.ndarray) -> np.ndarray:
    """Each name's position in natural order (`fusion.2` before `fusion.10`): digit runs
    compare as numbers."""
    padded = np.array([_DIGITS.sub(_pad, str(n)) for n in names.tolist()] or [""])[: len(names)]
    idx = np.argsort(padded, kind="stable")
    out = np.empty(len(names), np.int64)
    out[idx] = np.arange(len(names))
    return out


def _size_order(keys: MatchKeys, name_order: np.ndarray) -> np.ndarray:
    """Each record's position by work per execution, largest first (ties by natural name)."""
    idx = np.lexsort((name_order, -keys.bytes_per_call, -keys.flops_per_call))
    out = np.empty(len(idx), np.int64)
    out[idx] = np.arange(len(idx))
    return out
