"""The link roof of a collective: the device's interconnect figure × the links a group of its
size can use ÷ the device's links (devices/interconnect.LinkTopology), with the topology it
assumes in words. One rule for the communication roofline (`/comm`, model/records/comm.py) and
every record's interconnect efficiency, bound and time saved (model/records/records.py
`derive`, `call_floors`): op and kernel records, and program records (Total, steps), whose
collectives of several groups each count at their own group's roof (`link_share`): a
collective is judged against the roof of its group, never the whole figure its group cannot
reach.
"""

from __future__ import annotations

import numpy as np

from tb_roofline.table.collective_info import parse

NO_TOPOLOGY = (
    "no link topology known for this device (a single PCIe link, a 3-D TPU torus, a device "
    "file's figure without one): the whole figure for every group"
)


def group_roof(memory, n) -> tuple[float, int | None, str]:
    """(GB/s per direction, links used or None, the assumption in words) of a group of n
    devices on a link roof (a MemoryPeak)."""
    topo = getattr(memory, "topology", None)
    if topo is None:
        return memory.gbs, None, NO_TOPOLOGY
    return topo.group_gbs(memory.gbs, n)


def _link(device):
    m = device.memory("interconnect") if device is not None else None
    return m if m is not None and m.gbs > 0 else None


def link_scales(collectives, device) -> np.ndarray:
    """Per op-table key (its `collective` text, "" for none): the share of the device's link
    figure its group can use (1 where it is no collective or the device has no link roof).
    One parse per distinct text."""
    texts = np.asarray(collectives, dtype=object)
    out = np.ones(len(texts))
    link = _link(device)
    if link is None or not len(texts):
        return out
    share = {}
    for t in set(texts.tolist()):
        info = parse(t)
        share[t] = group_roof(link, info["n"])[0] / link.gbs if info is not None else 1.0
    out[:] = [share[t] for t in texts.tolist()]
    return out


def link_share(link_bytes, roof_bytes) -> np.ndarray:
    """The share of the link figure a record's collectives can use together: Σ bytes ÷
    Σ (bytes_k ÷ share_k) over its distinct ops (`roof_bytes`, the `link_roof_bytes` sums): the
    rate at which all of them would run, each at its own group's roof; 1 without link bytes."""
    link_bytes = np.asarray(link_bytes, np.float64)
    roof_bytes = np.asarray(roof_bytes, np.float64)
    out = np.ones(np.broadcast(link_bytes, roof_bytes).shape)
    np.divide(link_bytes, roof_bytes, out=out, where=roof_bytes > 0)
    return out


PROGRAM_LINKS = (
    "its collectives together, each at its group's link roof (the op records' link_assumption "
    "says which links each group uses)"
)


def program_link_assumption(device) -> str | None:
    """What a program record's link roof assumes (None: the device has no link roof)."""
    link = _link(device)
    if link is None:
        return None
    return PROGRAM_LINKS if getattr(link, "topology", None) is not None else NO_TOPOLOGY


def link_assumption(collective: str, device) -> str | None:
    """The topology a collective's link roof assumes, in words (None: no collective or no
    link roof)."""
    info = parse(collective)
    link = _link(device)
    if info is None or link is None:
        return None
    gbs, used, why = group_roof(link, info["n"])
    size = f"group of {info['n']}" if info["n"] else "group size unknown"
    links = f"{used} of {link.topology.links} links, " if used is not None else ""
    return f"{size}: {links}{gbs:,.4g} GB/s ({why})"
