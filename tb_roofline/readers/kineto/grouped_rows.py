"""Rows added to an op or kernel table grouped by their key (`add_grouped`), and the bytes of
memcpy/memset activity by the memory they cross (`transfers`): what every Kineto table shares."""

from __future__ import annotations

import re

import numpy as np

from tb_roofline.readers.common import group_codes
from tb_roofline.readers.kineto.events import KIND_MEMCPY, KIND_MEMSET
from tb_roofline.table.op_table import HOST_TRANSFER, PEER_TRANSFER, ROW_COLUMNS

# The op table's column for bytes over the GPU links, when this version of it has one.
HAS_INTERCONNECT = "interconnect_bytes" in ROW_COLUMNS
KNOWN_SOURCES = frozenset({"formula", "measured", "counter"})
_HOST_COPY = re.compile(r"htod|dtoh|htoh|hosttodevice|devicetohost|hosttohost", re.I)
_PEER_COPY = re.compile(r"ptop|peer", re.I)


_DEVICE, _TO_HOST, _PEER = 0, 1, 2


def _copy_route(name: str) -> int:
    """Where a memcpy of this name copies: between host and device, between devices (peer),
    or within one device."""
    if _HOST_COPY.search(name):
        return _TO_HOST
    if _PEER_COPY.search(name):
        return _PEER
    return _DEVICE


def transfers(kind: np.ndarray, names: np.ndarray, nbytes: np.ndarray):
    """(HBM bytes, host-link bytes, caveat) of memcpy/memset activity: a host copy crosses the
    host link (never HBM), a device copy reads and writes HBM, a memset writes it, a peer copy
    crosses the GPU link. A row's `bytes` are the bytes it accesses (every read and write, as
    XLA's bytes_accessed counts them): at least each memory's bytes (`accessed_bytes`)."""
    n = len(kind)
    hbm, host = np.zeros(n), np.zeros(n)
    caveat = np.full(n, "", dtype=object)
    b = np.asarray(nbytes, np.float64)
    memset = np.asarray(kind) == KIND_MEMSET
    hbm[memset] = b[memset]
    copies = np.flatnonzero(np.asarray(kind) == KIND_MEMCPY)
    copy_names = np.asarray(names, dtype=object)[copies].tolist()
    routes = {x: _copy_route(x) for x in dict.fromkeys(copy_names)}  # once per distinct name
    route = np.fromiter(map(routes.__getitem__, copy_names), np.int8, len(copies))
    to_host, peer, device = (copies[route == r] for r in (_TO_HOST, _PEER, _DEVICE))
    host[to_host], caveat[to_host] = b[to_host], HOST_TRANSFER
    caveat[peer] = PEER_TRANSFER
    hbm[device] = 2 * b[device]
    return hbm, host, caveat


def accessed_bytes(nbytes: np.ndarray, hbm: np.ndarray) -> np.ndarray:
    """The bytes a memcpy/memset row accesses: a device-to-device copy of N bytes reads N and
    writes N of HBM, so its `bytes` are 2N, its HBM bytes (one convention: `bytes` is never
    below a memory's bytes)."""
    return np.maximum(np.asarray(nbytes, np.float64), hbm)


def add_grouped(
    builder,
    host,
    core,
    op,
    cat,
    prec,
    src,
    step,
    t_ps,
    flops,
    nbytes,
    occ,
    hbm=None,
    host_bytes=None,
    caveat=None,
    fingerprint=None,
    interconnect=None,
    collective=None,
    input_dims=None,
):
    """Sum rows sharing (core, op, category, precision, source, caveat, fingerprint, step) and
    add them. `hbm` defaults to all bytes; a cost source says whether FLOPs and bytes are
    known; `fingerprint`: input shapes (ops) or launch grid (kernels), "" when unknown;
    `input_dims`: the ops' input dims as data (one per fingerprint: the text renders them)."""
    if not len(op):
        return
    n_rows = len(op)
    hbm = nbytes if hbm is None else hbm
    host_bytes = np.zeros(n_rows) if host_bytes is None else host_bytes
    caveat = np.full(n_rows, "", dtype=object) if caveat is None else caveat
    fingerprint = np.full(n_rows, "", dtype=object) if fingerprint is None else fingerprint
    collective = np.full(n_rows, "", dtype=object) if collective is None else collective
    codes, first = group_codes(core, op, cat, prec, src, caveat, fingerprint, collective, step)
    n = len(first)

    def total(w):
        return np.bincount(codes, weights=w, minlength=n)

    t = total(t_ps)
    known = np.array([x in KNOWN_SOURCES for x in src[first].tolist()], bool)
    counted = src[first] == "counter"  # hardware counters: FLOPs, no memory traffic
    bytes_only = src[first] == "bytes"  # bytes from shapes, FLOPs unknown
    extra = {}
    if interconnect is not None and HAS_INTERCONNECT:
        extra["interconnect_bytes"] = total(interconnect)
    builder.add_columns(
        n,
        host=host,
        core=core[first],
        program_id="",
        program="",
        operation=op[first],
        category=cat[first],
        precision=prec[first],
        flops_source=src[first],
        caveat=caveat[first],
        fingerprint=fingerprint[first],
        input_dims=None if input_dims is None else input_dims[first],
        collective=collective[first],
        flops_known=known,
        bytes_known=(known & ~counted) | bytes_only,
        step=step[first],
        occurrences=total(occ).astype(np.int64),
        total_time_ps=t,
        self_time_ps=t,
        flops=total(flops),
        bytes=total(nbytes),
        hbm_bytes=total(hbm),
        host_bytes=total(host_bytes),
        **extra,
    )


def add_cost_rows(
    builder,
    host,
    core,
    op_names,
    cost_ids,
    costs,
    step,
    t_ps,
    flops,
    nbytes,
    occurrences,
    fingerprint=None,
    interconnect=None,
    collective=None,
    input_dims=None,
):
    """Rows labelled by their cost ids (category, precision, cost source), grouped."""
    cats = np.array([costs[c].category for c in cost_ids.tolist()], dtype=object)
    precs = np.array([costs[c].precision for c in cost_ids.tolist()], dtype=object)
    srcs = np.array([costs[c].source for c in cost_ids.tolist()], dtype=object)
    add_grouped(
        builder,
        host,
        np.asarray(core, np.int64),
        op_names,
        cats,
        precs,
        srcs,
        step,
        t_ps,
        flops,
        nbytes,
        occurrences,
        fingerprint=fingerprint,
        interconnect=interconnect,
        collective=collective,
        input_dims=input_dims,
    )


def div_safe(a, b):
    out = np.zeros(np.broadcast(a, b).shape)
    np.divide(a, b, out=out, where=b != 0)
    return out
