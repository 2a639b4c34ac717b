"""Peaks of the newer chips (CDNA 4, H200, B200/GB200 with FP6/FP4), the interconnect roofs and
the L1/shared roof, each against figures worked out here from the vendors' published numbers.

- gfx950 (MI355X): 256 CUs x 2.4 GHz x 4096 FLOP/clock/CU = 2,516,582.4 GFLOP/s bf16, what
  XProf derives for the same profile (it shows 2,516,580); data sheet 2.5 PFLOPS.
- L1/shared: SMs x clock x 128 B (NVIDIA: 32 banks x 4 B per clock).
- Interconnect: per direction, half the data sheet's two-direction figure (NVLink 4: 900 GB/s).
"""

from __future__ import annotations

import pytest

from tb_roofline.devices.datasheets import BY_KEY, lookup
from tb_roofline.devices.gpu_peaks import (
    derive_gpu_peaks,
    device_from_kineto_properties,
)
from tb_roofline.devices.precision_ceilings import ceiling_precision

GIB = 1 << 30
GFX950 = {
    "gpu_device_name": "gfx950:sramecc+:xnack-",
    "core_count": 256,
    "clock_rate": 2_400_000,
    "memory_bandwidth": 4.096e12,
    "memory_size": 288 * GIB,
    "device_vendor": "AMD",
}


def test_gfx950_peaks_are_derived_as_xprof_derives_them():
    peaks = derive_gpu_peaks(GFX950, 1)
    d = peaks.device
    assert d.peak_for("bf16") == pytest.approx(2_516_582.4)
    assert round(d.peak_for("bf16"), -1) == 2_516_580  # XProf's figure
    assert d.peak_for("fp8") == pytest.approx(2 * 2_516_582.4)
    assert d.peak_for("fp4") == pytest.approx(4 * 2_516_582.4)
    assert d.peak_for("fp32") == pytest.approx(256 * 2.4 * 256)  # 157,286 (data sheet 157.3 T)
    assert peaks.spec is not None and peaks.spec.key == "mi355x"
    # The profile's 4,096 GB/s is kept, the data sheet's 8 TB/s beside it for the model.
    hbm = d.memory("hbm")
    assert (hbm.gbs, hbm.source, hbm.fallback.value) == (4096.0, "profile", 8000.0)
    assert [c.code for c in peaks.diagnostics].count("peak_datasheet_mismatch") == 1  # HBM
    link = d.memory("interconnect")
    assert link.gbs == pytest.approx(7 * 153.6 / 2) and "Infinity Fabric" in link.name
    shared = d.memory("shared")
    assert shared.gbs == pytest.approx(256 * 2.4e9 * 256 / 1e9)
    assert "CDNA 4" in shared.note


def test_mi350x_is_told_from_the_mi355x_by_its_clock():
    peaks = derive_gpu_peaks(dict(GFX950, clock_rate=2_200_000), 1)
    assert peaks.spec.key == "mi350x"
    assert peaks.device.peak_for("bf16") == pytest.approx(256 * 2.2 * 4096)  # 2,306,867


@pytest.mark.parametrize(
    "key,clock,rates",
    [
        ("mi355x", 2.4, {"fp64": 128, "fp32": 256, "bf16": 4096, "fp8": 8192, "fp4": 16384}),
        ("mi350x", 2.2, {"fp64": 128, "fp32": 256, "bf16": 4096, "fp8": 8192, "fp6": 16384}),
    ],
)
def test_cdna4_data_sheets_equal_cus_times_clock_times_rate(key, clock, rates):
    spec = BY_KEY[key]
    for p, r in rates.items():
        assert spec.compute[p].value == pytest.approx(256 * clock * r / 1000, rel=1e-3), p


def test_blackwell_fp4_and_fp6_ceilings():
    b200 = lookup("NVIDIA B200")
    # HGX B200: FP4 144 PFLOPS sparse per 8 GPUs = 18 per GPU, 9 dense; FP6 as FP8.
    assert b200.compute["fp4"].value == 9000 and b200.compute["fp6"].value == 4500
    gb200 = lookup("NVIDIA GB200")
    assert gb200.key == "gb200" and gb200.compute["fp4"].value == 10000
    dev = b200.to_device_info()
    assert ceiling_precision("f4e2m1fn", True, dev) == "fp4"
    assert ceiling_precision("f6e2m3fn", True, dev) == "fp6"
    assert ceiling_precision("f64", True, dev) == "fp64"  # never mistaken for f6
    assert dev.memory("interconnect").gbs == 900  # NVLink 5: 1.8 TB/s both ways


def test_h200_has_nvlink_and_pcie_roofs():
    dev = lookup("NVIDIA H200").to_device_info()
    assert dev.peak_for("bf16") == pytest.approx(1979 / 2 * 1000)
    assert dev.memory("interconnect").gbs == 450 and dev.memory("host").gbs == 64
    assert "NVLink 4" in dev.memory("interconnect").name
    # A PCIe part moves peer traffic over PCIe.
    pcie = lookup("NVIDIA H100 PCIe").to_device_info()
    assert pcie.memory("interconnect").gbs == pcie.memory("host").gbs == 64


def test_data_sheet_devices_show_the_l1_shared_roof_with_its_source():
    dev = device_from_kineto_properties(
        {
            "name": "NVIDIA A100-SXM4-80GB",
            "computeMajor": 8,
            "computeMinor": 0,
            "numSms": 108,
            "totalGlobalMem": 80 * GIB,
        }
    )
    shared = dev.memory("shared")
    assert shared.gbs == pytest.approx(108 * 1.41e9 * 128 / 1e9)  # 19,491.8 GB/s
    assert shared.source == "datasheet" and "32 banks x 4 bytes" in shared.note
    assert dev.memory("interconnect").gbs == 300  # NVLink 3: 600 GB/s both ways
    assert [m["id"] for m in dev.to_json()["memories"]] == [
        "hbm",
        "shared",
        "l2",
        "host",
        "interconnect",
    ]


def test_tpu_ici_roofs_are_per_direction_like_every_link():
    """One convention: GB/s per direction per device. The TPU documentation's bidirectional
    per-chip figures (v5e 400, v5p 1200, v6e 800, TPU7x 1200 GB/s) are halved as NVLink's are;
    v4's per-chip "2,400 Gbps" is read as per direction (the same kind of figure, 1,600 and
    4,800 Gbps for v5e and v5p, is exactly half their bidirectional GB/s)."""
    dev = lookup("TPU v6 lite").to_device_info()
    link = dev.memory("interconnect")
    assert link.gbs == 800 / 2 and "ICI" in link.name
    for name, gbs in (("TPU v5 lite", 400 / 2), ("TPU v5p", 1200 / 2), ("TPU v4", 2400 / 8)):
        assert lookup(name).to_device_info().memory("interconnect").gbs == gbs
    # TPU7x: each of the chip's two chiplets is a device: half the chip's 600 GB/s a direction.
    assert lookup("TPU7x").to_device_info().memory("interconnect").gbs == 1200 / 2 / 2
    # NVLink and Infinity Fabric: half the data sheets' two-direction totals.
    for name, two_way in (
        ("NVIDIA H100 80GB HBM3", 900),
        ("NVIDIA B300", 1800),
        ("NVIDIA GB300", 1800),
        ("NVIDIA H20", 900),
        ("AMD Instinct MI300X", 896),
    ):
        assert lookup(name).to_device_info().memory("interconnect").gbs == two_way / 2, name
