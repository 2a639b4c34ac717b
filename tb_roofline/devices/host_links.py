"""The host link of each accelerator (PCIe), per direction, from its data sheet.

Data sheets give the link's two-direction figure ("PCIe Gen4: 64 GB/s"); a copy runs in one
direction, so the roof of a host transfer is half of it. Devices whose data sheet gives no
figure are left out: their host transfers are then shown without a roof (caveat
`host_transfer`), never judged against HBM. A device file can give any device's (`host` memory).
"""

from __future__ import annotations

from tb_roofline.devices.sources import (
    A100_DS,
    H100_WP,
    H200_DS,
    MI100_DS,
    MI210_DS,
    MI300X_DS,
    MI325X_DS,
    V100_DS,
    Figure,
)

NAME = "Host link (PCIe)"
_HALF = "per direction: half of the data sheet's two-direction figure"


def _link(two_way_gbs: float, source: str) -> Figure:
    return Figure(
        two_way_gbs / 2.0, f"{source}: host interface {two_way_gbs:g} GB/s", "derived", False, _HALF
    )


HOST_LINKS = {
    **{
        k: _link(32, V100_DS)
        for k in ("v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie", "v100s-pcie")
    },
    **{
        k: _link(64, A100_DS)
        for k in ("a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-40gb", "a100-pcie-80gb")
    },
    **{k: _link(128, H100_WP) for k in ("h100-sxm", "h100-pcie", "h100-nvl")},
    **{k: _link(128, H200_DS) for k in ("h200-sxm", "h200-nvl")},
    "mi100": _link(64, MI100_DS),
    "mi210": _link(64, MI210_DS),
    "mi300x": _link(128, MI300X_DS),
    "mi325x": _link(128, MI325X_DS),
}


def host_link(spec_key: str) -> Figure | None:
    return HOST_LINKS.get(spec_key)
