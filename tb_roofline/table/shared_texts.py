"""Equal strings held once across the hosts of one read.

A host's table made in another process (a worker of the local pool, a Dask worker) arrives
with its own copy of every string in it: one object per op name, program, source line, HLO
fingerprint, shape and kernel name, per host. Converted in one process, the hosts of one
program share those objects (the decoded op metadata is reused from host to host:
`readers/xspace/tpu/plane.py` `info_cache`). `share_texts`, given each host's result as it arrives,
makes its strings the equal ones already held, so the copies are let go at once (before the
next host's arrive and are allocated beside them) and the client of a cluster holds what
local conversion holds (docs/cluster.md: ~15 MB of 64 hosts of 500 ops).
"""

from __future__ import annotations

import numpy as np

from tb_roofline.table.op_table import ProfileData


def sharer():
    """A function of one result (a host's ProfileData, its rows or not, or anything, returned as
    it is) that shares its strings with those of the results given before it (`share_texts`)."""
    canon: dict = {}

    def arrived(out):
        if isinstance(out, ProfileData):
            share_texts(out, canon)
        return out

    return arrived


def share_texts(data, canon: dict) -> None:
    """Replace, in place, the strings of `data` (a ProfileData) that equal one
    in `canon` by that one, and add the others to it: the key columns of its op tables, the
    labels of its op shapes and kernels and what those hold. Only which objects hold the
    values changes."""
    held = canon.setdefault
    for table in (data.ops, data.kernels, data.hw_ops):
        if table is None:
            continue
        for name, column in table.keys.items():
            if column.dtype == object and len(column):
                shared = np.empty(len(column), object)
                shared[:] = [
                    held(v, v) if type(v) is str else _one(v, canon) for v in column.tolist()
                ]
                table.keys[name] = shared
    for field in ("op_shapes", "op_kernels"):
        labelled = getattr(data, field, None)
        if not labelled:
            continue
        for uses in labelled.values():
            for use in uses:  # table.timeline.ShapeUse, KernelUse
                for attr in ("kind", "dims", "text", "name"):
                    value = getattr(use, attr, None)
                    if value is not None:
                        setattr(use, attr, _one(value, canon))
        setattr(data, field, {_one(k, canon): v for k, v in labelled.items()})


def _one(value, canon: dict):
    """The held object equal to `value`: a string, or a tuple of strings, numbers and such
    tuples (held once with its items; equal only with items of the same types, so `(1,)` never
    stands for `(1.0,)`); anything else as it is."""
    kind = type(value)
    if kind is str:
        return canon.setdefault(value, value)
    if kind is not tuple:
        return value
    kinds = set(map(type, value))
    # The two common shapes first (a key's texts, an array's dimensions), each keyed so that
    # no other shape's key can equal it: a tuple of texts by itself (no other key is a tuple
    # of texts only), a tuple of ints after `int`.
    if kinds <= _TEXT:
        return canon.setdefault(value, tuple([canon.setdefault(v, v) for v in value]))
    if kinds == _INT:
        return canon.setdefault((int, value), value)
    if not kinds <= _ATOMS:
        return value
    items = tuple([_one(v, canon) for v in value])
    # (a held inner tuple stands for itself: its identity, not its value, which `==` would
    # let match a tuple of other types)
    key = (tuple, tuple([id(v) if type(v) is tuple else (type(v), v) for v in items]))
    return canon.setdefault(key, items)


_ATOMS = frozenset({str, int, float, bool, type(None), tuple})
_TEXT, _INT = frozenset({str}), {int}
