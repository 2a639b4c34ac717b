"""The device-to-device link of each accelerator (NVLink, Infinity Fabric, PCIe, TPU ICI).

One convention for every link: the roof of collectives and peer copies (memory id
"interconnect") is in GB/s PER DIRECTION per device, summed over all of the device's links —
the figure nccl-tests' bus bandwidth is compared with (its bus bytes count what one device
sends). Data sheets give the two-direction total ("NVLink 900 GB/s", "bidirectional ICI
bandwidth per chip 1200 GBps", "7 links × 128 GB/s"): half of it is stored. Parts without a
device link move peer traffic over PCIe (their host link's figure, also per direction).
TPU v4's documentation gives only a per-chip "Gbps" figure; for v5e and v5p the same kind of
figure (1,600 / 4,800 Gbps) is exactly half the bidirectional GB/s now documented, so it is
read as per direction. Devices not listed have no interconnect roof: their collectives are
then shown without one.

A group of devices reaches its peers over only some of those links (`TOPOLOGY`,
`LinkTopology.group_links`): behind an NVSwitch every GPU reaches any peer over all its
NVLinks; in a DGX-1V hybrid cube-mesh (V100 SXM2, 6 NVLinks) a pair is joined by 1 or 2 links;
an 8-GPU AMD platform (MI300X and later, 7 Infinity Fabric links) is fully connected, one link
to each peer; a v5e / v6e chip (2-D torus) has an ICI port to each of 4 neighbours, two
neighbours sharing one. The roof of a group is the figure × links it can use ÷ the
device's links, with the topology it assumes stated (an upper bound: never below what the
group could reach).
"""

from __future__ import annotations

import dataclasses

from tb_roofline.devices.host_links import HOST_LINKS
from tb_roofline.devices.sources import (
    A100_DS,
    B200_DS,
    B300_DS,
    GB200_DS,
    GB300_DS,
    H20_DS,
    H100_NVL_DS,
    H100_WP,
    H200_DS,
    H200_NVL_DS,
    MI300X_DS,
    MI325X_DS,
    MI350X_DS,
    MI355X_DS,
    TPU_DOC,
    TPU_ICI_DOC,
    V100_DS,
    Figure,
)

NAME = "Interconnect"
_HALF = "per direction: half of the data sheet's two-direction figure"


def _link(tech: str, two_way_gbs: float, source: str, uncertain: bool = False) -> tuple:
    return tech, Figure(
        two_way_gbs / 2.0, f"{source}: {tech} {two_way_gbs:g} GB/s", "derived", uncertain, _HALF
    )


def _pcie(key: str) -> tuple:
    fig = HOST_LINKS[key]
    return "PCIe", Figure(
        fig.value,
        fig.source,
        fig.basis,
        fig.uncertain,
        "no device link: peer traffic over PCIe (an NVLink bridge, when "
        "fitted, is faster); " + fig.note,
    )


def _ici(version: str, two_way_gbs: float, uncertain: bool = False) -> tuple:
    return "ICI", Figure(
        two_way_gbs / 2.0,
        f"{TPU_ICI_DOC.format(v=version)}: {two_way_gbs:g} GB/s",
        "derived",
        uncertain,
        _HALF,
    )


def _ici_gbps(version: str, gbps: float) -> tuple:
    return "ICI", Figure(
        gbps / 8.0,
        f"{TPU_DOC.format(v=version)}: inter-chip interconnect {gbps:,.0f} Gbps",
        "derived",
        True,
        "per direction: the documentation's per-chip Gbps figure, which for "
        "v5e and v5p is half the bidirectional figure documented since",
    )


LINKS = {
    **{k: _link("NVLink 2", 300, V100_DS) for k in ("v100-sxm2-16gb", "v100-sxm2-32gb")},
    **{k: _link("NVLink 3", 600, A100_DS) for k in ("a100-sxm4-40gb", "a100-sxm4-80gb")},
    "h100-sxm": _link("NVLink 4", 900, H100_WP),
    "h100-nvl": _link("NVLink bridge", 600, H100_NVL_DS),
    "h200-sxm": _link("NVLink 4", 900, H200_DS),
    "h200-nvl": _link("NVLink bridge", 900, H200_NVL_DS),
    "b200": _link("NVLink 5", 1800, B200_DS),
    "gb200": _link("NVLink 5", 1800, GB200_DS),
    "b300": _link("NVLink 5", 1800, B300_DS),
    "gb300": _link("NVLink 5", 1800, GB300_DS),
    "h20": _link("NVLink 4", 900, H20_DS, True),
    **{
        k: _pcie(k)
        for k in ("v100-pcie", "v100s-pcie", "a100-pcie-40gb", "a100-pcie-80gb", "h100-pcie")
    },
    "mi300x": _link("Infinity Fabric (7 links x 128 GB/s)", 896, MI300X_DS),
    "mi325x": _link("Infinity Fabric (7 links x 128 GB/s)", 896, MI325X_DS),
    "mi350x": _link("Infinity Fabric (7 links x 153.6 GB/s)", 1075.2, MI350X_DS, True),
    "mi355x": _link("Infinity Fabric (7 links x 153.6 GB/s)", 1075.2, MI355X_DS, True),
    "tpu-v4": _ici_gbps("v4", 2400),
    "tpu-v5e": _ici("v5e", 400),
    "tpu-v5p": _ici("v5p", 1200),
    "tpu-v6e": _ici("v6e", 800),
    "tpu-v7x": _ici("TPU7x", 1200 / 2, uncertain=True),  # one of the chip's two chiplets
}


TOPOLOGY_KINDS = ("switch", "bridge", "cube_mesh", "full_mesh", "torus")


@dataclasses.dataclass(frozen=True)
class LinkTopology:
    """How a device's `links` links (the figure's sum) reach its peers: `kind` one of
    "switch" (any peer over every link), "bridge" (an NVLink bridge: its GPUs over every
    link), "cube_mesh" (DGX-1V), "full_mesh" (one link to each of `links` peers), "torus"
    (`links` ICI ports, one per neighbour)."""

    kind: str
    links: int

    def group_links(self, n: int | None) -> tuple[int, str]:
        """(links a group of n devices can use, the assumption in words)."""
        k = self.links
        if not n or n < 2:
            return k, f"group size unknown: all {k} links"
        if self.kind == "switch":
            return k, f"NVSwitch: every GPU reaches any peer over all its {k} NVLinks"
        if self.kind == "bridge":
            return k, "NVLink bridge: assumes the group's GPUs share one bridge"
        if self.kind == "cube_mesh":
            if n == 2:
                return 2, (
                    "DGX-1V hybrid cube-mesh: a pair is joined by 1 or 2 of the 6 NVLinks; "
                    "the roof takes 2 (a pair on one link peaks at half of it)"
                )
            if n <= 4:
                return 4, (
                    "DGX-1V hybrid cube-mesh: a group within one quad reaches its peers over "
                    "4 of the 6 NVLinks"
                )
            return k, "DGX-1V hybrid cube-mesh: a group over both quads uses all 6 NVLinks"
        if self.kind == "full_mesh":
            used = min(n - 1, k)
            return used, (
                f"fully connected platform, one link to each peer: a group of {n} uses "
                f"{used} of the {k} links"
            )
        if self.kind == "torus":
            if n == 2:
                return 1, f"ICI torus: two neighbouring chips share one of the {k} ports"
            return k, (
                f"ICI torus: all {k} ports (the upper bound: a group along one torus axis uses 2)"
            )
        return k, f"all {k} links"

    def group_gbs(self, total_gbs: float, n: int | None) -> tuple[float, int, str]:
        """(the group's roof in GB/s per direction, links used, the assumption)."""
        used, why = self.group_links(n)
        return total_gbs * used / self.links, used, why


TOPOLOGY = {
    **{k: LinkTopology("cube_mesh", 6) for k in ("v100-sxm2-16gb", "v100-sxm2-32gb")},
    **{k: LinkTopology("switch", 12) for k in ("a100-sxm4-40gb", "a100-sxm4-80gb")},
    **{k: LinkTopology("switch", 18) for k in ("h100-sxm", "h200-sxm", "h20")},
    **{k: LinkTopology("switch", 18) for k in ("b200", "gb200", "b300", "gb300")},
    **{k: LinkTopology("bridge", 1) for k in ("h100-nvl", "h200-nvl")},
    **{k: LinkTopology("full_mesh", 7) for k in ("mi300x", "mi325x", "mi350x", "mi355x")},
    # 2-D tori of 4 ICI ports. v4 and v5p slices are 3-D tori wired by optical switches
    # (wraparound and twisted links can join a pair by several ports): without the slice's
    # shape their groups keep the chip's whole figure.
    **{k: LinkTopology("torus", 4) for k in ("tpu-v5e", "tpu-v6e")},
}


def topology(spec_key: str) -> LinkTopology | None:
    """How the device's links reach its peers, None when not known (PCIe parts: one link)."""
    return TOPOLOGY.get(spec_key)


def interconnect(spec_key: str) -> Figure | None:
    """The link figure of a data-sheet entry (GB/s per direction), None when not listed."""
    link = LINKS.get(spec_key)
    return link[1] if link is not None else None


def link_name(spec_key: str) -> str:
    link = LINKS.get(spec_key)
    return f"{NAME} ({link[0]})" if link is not None else NAME
