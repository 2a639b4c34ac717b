"""The documents device figures come from, and `Figure`: one number with its document.

The data-sheet tables (`datasheets_*.py`: compute, memory), `host_links.py` (PCIe) and
`interconnect.py` (NVLink, Infinity Fabric, ICI) all cite these; they import this module and
nothing of each other's tables, so the devices package has no import cycle.
"""

from __future__ import annotations

import dataclasses

BASES = ("dense", "sparse_halved", "derived")


@dataclasses.dataclass(frozen=True)
class Figure:
    """One number from a document."""

    value: float
    source: str
    basis: str = "dense"  # dense | sparse_halved | derived
    uncertain: bool = False
    note: str = ""

    def __post_init__(self):
        if self.basis not in BASES:
            raise ValueError(f"basis {self.basis!r} not in {BASES}")
        if not self.value > 0:
            raise ValueError("a table figure must be positive")


V100_DS = "NVIDIA Tesla V100 GPU datasheet (2018); Volta has no sparsity, all figures dense"
V100_L2 = (
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): V100 L2 read bandwidth "
    "2048 bytes/clock; times the 1530 MHz boost clock"
)
T4_DS = "NVIDIA T4 Tensor Core GPU datasheet (2019); Turing has no sparsity, all figures dense"
A100_DS = (
    "NVIDIA A100 Tensor Core GPU datasheet (2021), dense column "
    "(the datasheet gives dense and 2:4-sparse figures)"
)
A100_L2 = (
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): L2 read bandwidth "
    "5120 bytes/clock; times the 1410 MHz boost clock"
)
A10_DS = "NVIDIA A10 Tensor Core GPU datasheet (2021), figures without sparsity"
H100_WP = (
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), H100 SXM5 column, dense figures"
)
H100_PCIE_WP = (
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), H100 PCIe column, dense figures"
)
H100_NVL_DS = (
    "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 NVL column; tensor figures "
    "there are 2:4-sparse, halved here"
)
H200_DS = (
    "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column; tensor figures there "
    "are 2:4-sparse, halved here"
)
H200_NVL_DS = (
    "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 NVL column; tensor figures "
    "there are 2:4-sparse, halved here"
)
L4_DS = (
    "NVIDIA L4 Tensor Core GPU datasheet (2023); tensor figures there are 2:4-sparse, halved here"
)
L40S_DS = "NVIDIA L40S GPU datasheet (2023), figures without sparsity"
B200_DS = (
    "NVIDIA HGX B200 datasheet (2024), per-GPU share of the 8-GPU board; tensor figures "
    "there are 2:4-sparse, halved here"
)
MI100_DS = "AMD Instinct MI100 accelerator data sheet (2020); no sparsity, all figures dense"
MI210_DS = "AMD Instinct MI210 accelerator data sheet (2022); no sparsity, all figures dense"
MI250_DS = "AMD Instinct MI250 accelerator data sheet (2021), package figures halved per GCD"
MI250X_DS = "AMD Instinct MI250X accelerator data sheet (2021), package figures halved per GCD"
MI300X_DS = "AMD Instinct MI300X accelerator data sheet (2023), figures without sparsity"
MI325X_DS = "AMD Instinct MI325X accelerator data sheet (2024), figures without sparsity"
TPU_DOC = "Google Cloud TPU system architecture documentation ({v}), per chip"
B200_FP4 = (
    "NVIDIA HGX B200 datasheet (2024): FP4 tensor 144 PFLOPS and FP8/FP6 72 PFLOPS per "
    "8-GPU board, 2:4-sparse; per GPU and halved here"
)
GB200_DS = (
    "NVIDIA GB200 NVL72 datasheet (2024), per-GPU share of the 72-GPU rack; tensor figures "
    "there are 2:4-sparse, halved here"
)
MI350X_DS = (
    "AMD Instinct MI350X accelerator data sheet (2025), figures without sparsity "
    "(256 CUs, 2200 MHz peak engine clock)"
)
MI355X_DS = (
    "AMD Instinct MI355X accelerator data sheet (2025), figures without sparsity "
    "(256 CUs, 2400 MHz peak engine clock)"
)
CDNA4_WP = (
    "AMD CDNA 4 Architecture whitepaper (2025), Table 1: peak FLOP per clock per CU; "
    "times 256 CUs and the peak engine clock"
)
HGX_PAGE = (
    "NVIDIA HGX platform specifications (nvidia.com/en-us/data-center/hgx, 2025): "
    "per 8-GPU board; figures marked there as 2:4-sparse are halved here"
)
B300_DS = (
    "NVIDIA HGX B300 specifications (nvidia.com HGX page, 2025), per-GPU share of the "
    "8-GPU board; tensor figures there are 2:4-sparse, halved here"
)
GB300_DS = (
    "NVIDIA GB300 NVL72 specifications (nvidia.com, 2025), per-GPU share of the 72-GPU "
    "rack; tensor figures there are 2:4-sparse, halved here"
)
H20_DS = (
    "NVIDIA H20 product brief as published by OEMs and the press (2024; NVIDIA posts no "
    "public datasheet): dense tensor figures"
)
TPU_ICI_DOC = (
    "Google Cloud TPU documentation ({v}): bidirectional inter-chip interconnect bandwidth per chip"
)
