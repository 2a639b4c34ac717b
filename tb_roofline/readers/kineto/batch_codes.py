"""A prepared batch (fast_batch.Prepared) made in a worker process, and its ids in this one.

A worker prepares its batch against an empty collector (it cannot see the one the batch goes
to): its lists of threads, names, cost keys and grids then hold every distinct one of the
batch, in the order of its first event, and each event holds a code into them (`coded`),
where its key would be a Python object per event (slow to send between processes). Committed
in file order (fast_batch.commit), those not met before are registered in that order, as the
per-event path registers them, and the codes become the collector's ids with one look-up per
distinct key and a numpy take (`decode_ids`): the same ids and columns as one process makes.
"""

from __future__ import annotations

import operator
from itertools import compress

import numpy as np


def coded(p):
    """The prepared batch with each event's keys replaced by codes into its own lists."""
    threads, names = _index(p.threads), _index(p.names)
    costs, grids = _index(k for k, _, _ in p.new_costs), _index(k for k, _ in p.new_grids)
    c, r, g = p.cpu, p.rt, p.gpu
    c["thread_codes"] = _codes(threads, c.pop("keys"))
    c["name_codes"] = _codes(names, c.pop("names"))
    c["cost_codes"] = _codes(costs, c.pop("cost_keys"))
    r["thread_codes"] = _codes(threads, compress(r.pop("keys"), r["registers"].tolist()))
    r["name_list"], r["name_codes"] = _interned(r.pop("names"))
    g["name_codes"] = _codes(names, g.pop("names"))
    g["grid_codes"] = _codes(grids, g.pop("grids"))
    p.coded = True
    return p


def decode_ids(col, p) -> None:
    """The codes of a batch from `coded` as the ids of `col` (its keys registered already)."""
    threads = _ids(col.threads, p.threads)
    names = _ids(col.names, p.names)
    costs = _ids(col.raw_costs, [k for k, _, _ in p.new_costs])
    grids = _ids(col.raw_grids, [k for k, _ in p.new_grids])
    c, r, g = p.cpu, p.rt, p.gpu
    c["thread_ids"] = threads[c.pop("thread_codes")]
    c["name_ids"] = names[c.pop("name_codes")]
    c["cost_ids"] = costs[c.pop("cost_codes")]
    r["thread_ids"] = threads[r.pop("thread_codes")]
    r["names"] = _expanded(r.pop("name_list"), r.pop("name_codes"))
    g["name_ids"] = names[g.pop("name_codes")]
    g["grid_ids"] = grids[g.pop("grid_codes")]
    c["keys"] = c["names"] = c["cost_keys"] = r["keys"] = g["names"] = g["grids"] = None
    p.coded = False


def _index(keys) -> dict:
    return {k: i for i, k in enumerate(keys)}


def _codes(index: dict, keys) -> np.ndarray:
    return np.fromiter(map(index.__getitem__, keys), np.int64)


def _interned(values: list) -> tuple[list, np.ndarray]:
    """The distinct values (in the order first met) and each value's code into them."""
    distinct = list(dict.fromkeys(values))
    return distinct, _codes(_index(distinct), values)


def _expanded(values: list, codes: np.ndarray) -> list:
    """values[code] for each code, as a list (C-level)."""
    if len(codes) == 0:
        return []
    got = operator.itemgetter(*codes.tolist())(values)
    return list(got) if len(codes) > 1 else [got]


def _ids(table: dict, keys: list) -> np.ndarray:
    return np.fromiter(map(table.__getitem__, keys), np.int64, len(keys))
