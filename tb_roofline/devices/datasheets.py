"""The data-sheet table of accelerators and `lookup`, which finds a profile's device in it.

`lookup(name, compute_capability, memory_bytes, sm_count=..., clock_khz=...)` matches the name
a profile carries ("NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-16GB", "AMD Instinct MI250X / MI250",
"TPU v5 lite", ...); profiles that carry no useful name (TensorFlow's GPU planes, ROCm's
"AMD Radeon Graphics") are matched on their hardware signature (compute capability, SM/CU
count, memory size and clock) instead.

The entries live by vendor and family (`datasheets_nvidia_volta_ada.py`,
`datasheets_nvidia_hopper_blackwell.py`, `datasheets_amd.py`, `datasheets_tpu.py`); what an entry
holds and the peaks it gives are in `datasheet_entry.py`.
"""

from __future__ import annotations

import dataclasses
import re

from tb_roofline.devices.datasheet_entry import GIB, DeviceSpec
from tb_roofline.devices.datasheets_amd import AMD
from tb_roofline.devices.datasheets_nvidia_hopper_blackwell import NVIDIA_HOPPER_BLACKWELL
from tb_roofline.devices.datasheets_nvidia_volta_ada import NVIDIA_VOLTA_TO_ADA
from tb_roofline.devices.datasheets_tpu import TPU

# Order matters only where a name or signature matches several entries: the first is shown.
TABLE: tuple[DeviceSpec, ...] = NVIDIA_VOLTA_TO_ADA + NVIDIA_HOPPER_BLACKWELL + AMD + TPU
BY_KEY = {s.key: s for s in TABLE}
_GENERIC = re.compile(
    r"^(amd radeon graphics|radeon graphics|gpu|graphics device|"
    r"nvidia graphics device|unknown|)$"
)


def normalize_name(name: str | None) -> str:
    """Lower case, single spaces, vendor prefixes kept (patterns do not depend on them)."""
    return re.sub(r"\s+", " ", str(name or "")).strip().lower()


def _name_candidates(norm: str) -> list[DeviceSpec]:
    out = []
    for spec in TABLE:
        if any(re.search(p, norm) for p in spec.patterns) and not any(
            re.search(x, norm) for x in spec.excludes
        ):
            out.append(spec)
    return out


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def _same_peaks(a: DeviceSpec, b: DeviceSpec, tol: float = 0.01) -> bool:
    if set(a.compute) != set(b.compute):
        return False
    return (
        all(_rel(a.compute[p].value, b.compute[p].value) <= tol for p in a.compute)
        and _rel(a.memory_bw.value, b.memory_bw.value) <= tol
    )


def _narrow(
    cands: list[DeviceSpec], compute_capability, memory_bytes, sm_count, clock_khz, strict: bool
) -> list[DeviceSpec]:
    """Keep the candidates that agree with what the runtime reported.

    strict: every reported quantity the entry has must agree (signature matching); otherwise a
    quantity only breaks ties (a name match with an odd memory size still stands). The clock
    only ever breaks ties.
    """

    def keep(pred):
        nonlocal cands
        kept = [s for s in cands if pred(s)]
        if kept or strict:
            cands = kept

    if compute_capability is not None:  # a hard fact: a contradicting entry is never right
        cc = tuple(int(x) for x in compute_capability)
        cands = [s for s in cands if s.compute_capability is None or s.compute_capability == cc]
    if sm_count:
        keep(lambda s: s.sm_count is None or s.sm_count == int(sm_count))
    if memory_bytes:
        gib = memory_bytes / GIB
        keep(lambda s: s.memory_gib is None or _rel(gib, s.memory_gib) < 0.12)
    if clock_khz and len(cands) > 1:  # clocks can be set lower or higher: a tie-breaker only
        mhz = clock_khz / 1000.0
        kept = [s for s in cands if s.clock_mhz is None or _rel(mhz, s.clock_mhz) < 0.03]
        cands = kept or cands
    return cands


def lookup(
    name: str | None,
    compute_capability=None,
    memory_bytes: float | None = None,
    *,
    sm_count: int | None = None,
    clock_khz: float | None = None,
) -> DeviceSpec | None:
    """The table entry for a device, or None when it is not in the table.

    name: what the profile calls the device; compute_capability: (major, minor);
    memory_bytes: device memory in bytes (tells 40 GB from 80 GB parts); sm_count: SMs or CUs
    (tells an MI250 GCD from an MI250X GCD); clock_khz: SM clock (tells V100 SXM2 from PCIe).
    When the name is generic or empty, the entry is found by hardware signature, which needs at
    least the compute capability and the SM count. The returned spec's `match_note` says when
    the match was by signature or left alternatives open. MIG slices ("... MIG 1g.10gb") are
    never matched: their peaks are a fraction of the table's.
    """
    norm = normalize_name(name)
    if re.search(r"\bmig\b", norm):
        return None  # a MIG slice has a fraction of the SMs and memory: not a table device
    by_signature = False
    cands = _name_candidates(norm) if not _GENERIC.match(norm) else []
    if cands:
        cands = _narrow(cands, compute_capability, memory_bytes, sm_count, clock_khz, False)
    elif compute_capability is not None and sm_count:
        by_signature = True
        cands = _narrow(
            [s for s in TABLE if s.kind == "gpu"],
            compute_capability,
            memory_bytes,
            sm_count,
            clock_khz,
            True,
        )
    if not cands:
        return None
    best = cands[0]
    notes = []
    if by_signature:
        notes.append(
            f"matched {name or 'an unnamed device'!r} by compute capability, "
            "SM count"
            + (", memory size" if memory_bytes else "")
            + (" and clock" if clock_khz else "")
        )
    if len(cands) > 1:
        others = ", ".join(s.name for s in cands[1:])
        same = all(_same_peaks(s, best) for s in cands[1:])
        notes.append(
            f"could also be {others}"
            + (" (same peaks)" if same else "; the peaks shown are the first one's")
        )
    if notes:
        best = dataclasses.replace(best, match_note="; ".join(notes))
    return best


def table_as_json() -> list[dict]:
    return [s.to_json() for s in TABLE]
