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
"""

from __future__ import annotations

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


def interconnect(spec_key: str) -> Figure | None:
    """The link figure of a data-sheet entry (GB/s per direction), None when not listed."""
    link = LINKS.get(spec_key)
    return link[1] if link is not None else None


def link_name(spec_key: str) -> str:
    link = LINKS.get(spec_key)
    return f"{NAME} ({link[0]})" if link is not None else NAME
