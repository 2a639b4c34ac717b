"""Per-call floors: the time an op's calls would take on their roofs, Σ max(F_i/P, B_i/BW).

A key of the op table is one distinct op whose calls share a shape (PyTorch keys hold their
input shapes, XLA keys are one instruction), so a key's floor from its summed FLOPs and bytes
is the sum of its calls' floors; a record's floor sums its keys' (records.call_floors). Summing
FLOPs and bytes first would undercut it whenever the calls differ in regime (some
compute-bound, some memory-bound). Here: what the model's per-row sums need (`Roofs`), which
keys' gaps are proven (`proven_keys`), records that mix regimes (`mixed_regimes`) and each
record's floor on another compute roof for the guidance rules (`KeyFloors`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.devices.precision_ceilings import roof_precisions
from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.model.records.link_roofs import link_scales
from tb_roofline.model.records.record_table import RecordTable
from tb_roofline.model.records.records import call_floors, compute_roof, div
from tb_roofline.table.op_table import OpTable, distinct
from tb_roofline.table.timeline import is_collective


@dataclasses.dataclass
class Roofs:
    """What the per-row floors need, per key of one table: the inverse of its compute roof,
    whether it is a collective (judged on the link), and whether its gap to the roof is proven
    (its op record has a time saved: not a container, caveat, no-cost or above-roof record)."""

    device: DeviceInfo
    inv_peak: np.ndarray
    link: np.ndarray
    proven: np.ndarray | None = None
    # the share of the link figure each key's group can use (model/records/link_roofs.py)
    link_scale: np.ndarray | None = None

    @staticmethod
    def of(table: OpTable, device: DeviceInfo) -> Roofs:
        cats = table.keys["category"]
        kinds = {c: is_collective(str(c)) for c in set(cats.tolist())}
        return Roofs(
            device,
            div(1.0, compute_roof(device, roof_precisions(table.keys, device))),
            np.array([kinds[c] for c in cats.tolist()], bool),
            link_scale=link_scales(table.keys["collective"], device),
        )

    def sliced(self, lo: int, hi: int) -> Roofs:
        """The roofs of keys lo..hi only (one host's keys of a run: its table's own codes)."""
        proven, scale = self.proven, self.link_scale
        return Roofs(
            self.device,
            self.inv_peak[lo:hi],
            self.link[lo:hi],
            None if proven is None else proven[lo:hi],
            None if scale is None else scale[lo:hi],
        )

    def floors(self, flops, mem: dict, keys) -> np.ndarray:
        """The floor (ns) of rows or keys (`keys`: each one's key, or None for every key)."""
        pick = (lambda a: a) if keys is None else (lambda a: a[keys])
        scale = None if self.link_scale is None else pick(self.link_scale)
        return call_floors(flops, mem, pick(self.inv_peak), self.device, pick(self.link), scale)[0]


@dataclasses.dataclass
class KeyFloors:
    """The parts of each distinct op's floor (its calls share one shape), for rules that move
    FLOPs to another roof: its FLOPs, the time its bytes take at their roofs (ns), and the op
    record each key belongs to (`records[include_io]`)."""

    flops: np.ndarray
    memory_ns: np.ndarray
    records: dict

    def keys_of(self, include_io: bool, record: int) -> np.ndarray:
        return np.flatnonzero(self.records[include_io] == record)

    def floor_us(self, include_io: bool, record: int, peak: float) -> float:
        """Σ max(F_k / P, M_k) over the record's distinct ops, on a compute roof P (GFLOP/s)."""
        k = self.keys_of(include_io, record)
        compute = self.flops[k] / peak if peak > 0 else np.zeros(len(k))
        return float(np.maximum(compute, self.memory_ns[k]).sum()) / 1e3


def proven_keys(ops: RecordTable, device: DeviceInfo) -> np.ndarray:
    """Keys whose op record has a time saved that is not 0 by construction (containers): the
    gaps a program record's time saved adds up (async halves, unknown costs, caveated records
    and, without peaks, everything left out)."""
    saved = ops.columns["potential_time_saved_us"].astype(float)
    ok = np.isfinite(saved) & (ops.columns["caveat"] != "container")
    if not device.peaks_known:
        ok[:] = False
    rec = ops.key_record
    if rec is None:
        raise ValueError("proven keys need op records made from keys (key_record)")
    return (
        np.where(rec >= 0, ok[np.maximum(rec, 0)], False) if len(ok) else np.zeros(len(rec), bool)
    )


def mixed_regimes(ksums: dict, key_rec: np.ndarray, keep: np.ndarray, n: int) -> np.ndarray:
    """Records whose distinct ops (shapes) are bound by different resources: their summed point
    hides calls in another regime, so their floor is the sum of their calls' floors."""
    code = ksums.get("bound_code")
    if code is None or not n:
        return np.zeros(n, bool)
    m = keep & (key_rec >= 0) & (code >= 0)
    if not m.any():
        return np.zeros(n, bool)
    # distinct (record, code) pairs, each as one integer (`distinct`, not `np.unique`, which
    # imports numpy.ma in a fresh process: 15 ms of a command's start)
    codes = code[m].astype(np.int64)
    width = int(codes.max()) + 1
    pairs = distinct(key_rec[m].astype(np.int64) * width + codes)
    return np.bincount(pairs // width, minlength=n) > 1
