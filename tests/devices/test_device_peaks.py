"""Device peaks: derived from profiles, from the data-sheet table, from device files, measured.

Reference numbers below are the vendors' data-sheet figures as listed in the project's
docs/device_peaks.md (dense TFLOP/s, GB/s), typed in here independently of `device_table`.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import math
import os

import pytest
from testpaths import TESTS

from tb_roofline.devices import calibrate as calibrate_mod
from tb_roofline.devices.datasheets import TABLE, lookup
from tb_roofline.devices.device_file import (
    ENV_VAR,
    FILE_NAME,
    DeviceFileError,
    device_from_dict,
    find_device_file,
    load_device_file,
    write_device_file,
)
from tb_roofline.devices.gpu_peaks import (
    derive_gpu_peaks,
    device_from_kineto_properties,
    gpu_device_from_plane_stats,
    kineto_device_peaks,
)
from tb_roofline.devices.precision_ceilings import ceiling_precision
from tb_roofline.devices.spec import ComputePeak, DeviceInfo
from tb_roofline.readers.xspace.xplane import PlaneStats, load_xspace

HERE = TESTS
TESTDATA = os.path.join(HERE, "..", "testdata")
V100_FILE = os.path.join(
    TESTDATA,
    "xplane_tf_gpu_v100",
    "plugins",
    "profile",
    "2021_05_06",
    "34.83.195.179_6003.xplane.pb",
)
KINETO = os.path.join(TESTDATA, "kineto")

# The vendors' data-sheet figures (TFLOP/s dense; memory GB/s).
REF = {
    "V100 SXM2": {"fp64": 7.8, "fp32": 15.7, "fp16": 125, "hbm": 900},
    "T4": {"fp32": 8.1, "fp16": 65, "int8": 130, "hbm": 320},
    "A100 40GB": {
        "fp64": 9.7,
        "fp64_tc": 19.5,
        "fp32": 19.5,
        "tf32": 156,
        "bf16": 312,
        "int8": 624,
        "hbm": 1555,
    },
    "A100 80GB": {
        "fp64": 9.7,
        "fp64_tc": 19.5,
        "fp32": 19.5,
        "tf32": 156,
        "bf16": 312,
        "int8": 624,
        "hbm": 2039,
    },
    "L4": {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp8": 242.5, "int8": 242.5, "hbm": 300},
    "H100 SXM5": {
        "fp64": 33.5,
        "fp64_tc": 66.9,
        "fp32": 66.9,
        "tf32": 494.7,
        "bf16": 989.4,
        "fp8": 1978.9,
        "int8": 1978.9,
        "hbm": 3350,
    },
    "H200 SXM": {
        "fp32": 66.9,
        "tf32": 494.7,
        "bf16": 989.4,
        "fp8": 1978.9,
        "int8": 1978.9,
        "hbm": 4800,
    },
    # Whole package; each GCD is its own device, so per device it is half.
    "MI250X package": {"fp64": 47.9, "fp32": 47.9, "bf16": 383, "int8": 383, "hbm": 3277},
    "TPU v4": {"bf16": 275, "int8": 275, "hbm": 1200},
    "TPU v5e": {"bf16": 197, "int8": 394, "hbm": 819},
    "TPU v5p": {"bf16": 459, "int8": 918, "hbm": 2765},
    "TPU v6e": {"bf16": 918, "int8": 1836, "hbm": 1640},
}


def _rel(a, b):
    return abs(a - b) / b


def _peaks(device: DeviceInfo) -> dict:
    return {c.precision: c for c in device.compute}


def _v100_plane_stats():
    space = load_xspace(V100_FILE)
    gpus = [p for p in space.planes if p.name.startswith("/device:GPU:")]
    ps = PlaneStats(gpus[0])
    return ps.as_dict(gpus[0].stats), len(gpus)


# ------------------------------------------------------------------ XLA GPU plane stats


def test_v100_profile_peaks_agree_with_data_sheet_within_3_percent():
    stats, n = _v100_plane_stats()
    assert n == 8 and stats["clock_rate"] == 1530000 and stats["core_count"] == 80
    result = derive_gpu_peaks(stats, n)
    dev = result.device
    assert dev.kind == "gpu" and dev.num_cores == 8 and "V100" in dev.type
    peaks = _peaks(dev)
    ref = REF["V100 SXM2"]
    for p in ("fp64", "fp32", "fp16"):
        assert peaks[p].source == "profile"
        assert _rel(peaks[p].gflops, ref[p] * 1000) < 0.03, p
    hbm = dev.memory("hbm")
    assert hbm.source == "profile" and _rel(hbm.gbs, ref["hbm"]) < 0.03
    # Volta has no bf16 / tf32 / int8 tensor cores: no such ceilings are invented.
    assert not {"bf16", "tf32", "int8", "fp8"} & set(peaks)
    # The default (first) roof is the tensor-core one; XProf shows 0 for this profile.
    assert dev.compute[0].precision == "fp16" and dev.peaks_known
    # Derived and data-sheet numbers are both recorded and agree.
    assert {c.resource for c in result.checks} >= {"fp64", "fp32", "fp16", "hbm"}
    assert all(c.agrees for c in result.checks)
    assert not [d for d in result.diagnostics if d.severity == "warning"]
    assert gpu_device_from_plane_stats(stats, n).to_json() == dev.to_json()


def test_v100_shared_memory_roof_from_bank_width():
    stats, n = _v100_plane_stats()
    shared = gpu_device_from_plane_stats(stats, n).memory("shared")
    # 80 SMs x 1.53 GHz x 32 banks x 4 bytes
    assert shared.gbs == pytest.approx(80 * 1.53e9 * 128 / 1e9)


def _stats(clock_khz, sms, bw, mem_gib, major, minor, **extra):
    return {
        "clock_rate": clock_khz,
        "core_count": sms,
        "memory_bandwidth": bw,
        "memory_size": int(mem_gib * 2**30),
        "compute_cap_major": major,
        "compute_cap_minor": minor,
        **extra,
    }


def test_a100_derived_peaks_match_table_and_data_sheet():
    result = derive_gpu_peaks(_stats(1410000, 108, 2039e9, 79.2, 8, 0), 4)
    peaks = _peaks(result.device)
    for p, tflops in REF["A100 80GB"].items():
        if p == "hbm":
            assert _rel(result.device.memory("hbm").gbs, tflops) < 0.01
        else:
            assert _rel(peaks[p].gflops, tflops * 1000) < 0.01, p
    assert result.device.compute[0].precision == "bf16"
    assert "80GB" in result.device.type
    assert all(c.agrees for c in result.checks)


def test_h100_tensor_peaks_at_boost_clock_are_8_percent_over_the_whitepaper():
    # CUDA reports the 1980 MHz boost clock; NVIDIA's tensor figures imply ~1830 MHz.
    result = derive_gpu_peaks(_stats(1980000, 132, 3352e9, 79.6, 9, 0), 1)
    peaks = _peaks(result.device)
    assert _rel(peaks["fp32"].gflops, REF["H100 SXM5"]["fp32"] * 1000) < 0.01
    assert _rel(peaks["fp64"].gflops, REF["H100 SXM5"]["fp64"] * 1000) < 0.01
    bf16 = next(c for c in result.checks if c.resource == "bf16")
    assert 0.07 < bf16.relative_difference < 0.09 and bf16.agrees
    assert bf16.datasheet == pytest.approx(989.4e3)
    at_1830 = _peaks(derive_gpu_peaks(_stats(1830000, 132, 3352e9, 79.6, 9, 0), 1).device)
    for p in ("tf32", "bf16", "fp8", "int8"):
        assert _rel(at_1830[p].gflops, REF["H100 SXM5"][p] * 1000) < 0.005, p


def test_disagreement_over_10_percent_is_a_warning():
    result = derive_gpu_peaks(_stats(2300000, 108, 2039e9, 79.2, 8, 0), 1)  # overclocked A100
    codes = [d.code for d in result.diagnostics if d.severity == "warning"]
    assert "peak_datasheet_mismatch" in codes
    bad = [c for c in result.checks if c.agrees is False]
    assert bad and all(c.relative_difference > 0.10 for c in bad)
    assert _peaks(result.device)["bf16"].source == "profile"  # the profile's value is used


def test_unknown_gpu_gets_no_invented_compute_roof():
    result = derive_gpu_peaks(_stats(1500000, 10, 100e9, 8, 13, 0), 2)
    assert result.device.compute == [] and not result.device.peaks_known
    assert result.device.memory("hbm").gbs == pytest.approx(100.0)
    assert any(d.code == "peaks_unknown" and "device file" in d.message for d in result.diagnostics)


def test_profile_peak_override_is_used_and_noted():
    stats = _stats(1410000, 108, 1555e9, 39.4, 8, 0, peak_teraflops_per_second=250.0)
    result = derive_gpu_peaks(stats, 1)
    assert result.device.peak_gflops == pytest.approx(250e3)
    assert any(d.code == "peak_override" for d in result.diagnostics)


def test_amd_gcd_from_plane_stats():
    stats = {
        "clock_rate": 1700000,
        "core_count": 110,
        "memory_bandwidth": 1638.4e9,
        "memory_size": 64 * 2**30,
        "gpu_device_name": "gfx90a:sramecc+:xnack-",
        "device_vendor": "Advanced Micro Devices, Inc.",
    }
    dev = gpu_device_from_plane_stats(stats, 8)
    peaks = _peaks(dev)
    half = {k: v / 2 for k, v in REF["MI250X package"].items()}
    assert "MI250X" in dev.type
    for p in ("fp64", "fp32", "bf16", "int8"):
        assert _rel(peaks[p].gflops, half[p] * 1000) < 0.01, p
    assert _rel(dev.memory("hbm").gbs, half["hbm"]) < 0.01


# ------------------------------------------------------------------ Kineto deviceProperties


def _kineto_props(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["deviceProperties"]


def test_kineto_a100_pg509_is_the_40gb_sxm4_part():
    path = glob.glob(os.path.join(KINETO, "a100_alexnet", "*.pt.trace.json.gz"))[0]
    props = _kineto_props(path)
    assert props[0]["name"] == "NVIDIA A100-PG509-200"
    dev = device_from_kineto_properties(props[0])
    peaks = _peaks(dev)
    assert dev.kind == "gpu" and all(c.source == "datasheet" for c in dev.compute)
    assert _rel(peaks["bf16"].gflops, REF["A100 40GB"]["bf16"] * 1000) < 0.01
    assert _rel(peaks["tf32"].gflops, REF["A100 40GB"]["tf32"] * 1000) < 0.01
    assert _rel(dev.memory("hbm").gbs, REF["A100 40GB"]["hbm"]) < 0.01


def test_kineto_a100_80gb():
    props = _kineto_props(os.path.join(KINETO, "a100_80gb_shapes", "rank0.pt.trace.json.gz"))
    assert props[0]["name"] == "NVIDIA A100-SXM4-80GB"
    dev = device_from_kineto_properties(props[0])
    assert _rel(dev.memory("hbm").gbs, REF["A100 80GB"]["hbm"]) < 0.01
    assert _rel(dev.peak_gflops, REF["A100 80GB"]["bf16"] * 1000) < 0.01


def test_kineto_mi250_generic_name_matched_by_signature():
    props = _kineto_props(os.path.join(KINETO, "mi250", "worker0.pt.trace.json.gz"))
    assert props[0]["name"] == "AMD Radeon Graphics" and props[0]["numSms"] == 104
    result = kineto_device_peaks(props[0])
    dev = result.device
    assert "MI250" in dev.type and "MI250X" not in dev.type
    # MI250 data sheet: 362.1 TFLOP/s bf16, 45.3 fp64, 3276.8 GB/s per two-GCD package.
    assert _rel(_peaks(dev)["bf16"].gflops, 362.1e3 / 2) < 0.01
    assert _rel(_peaks(dev)["fp64"].gflops, 45.3e3 / 2) < 0.01
    assert _rel(dev.memory("hbm").gbs, 3276.8 / 2) < 0.01
    assert any(d.code == "device_match" for d in result.diagnostics)


def test_kineto_cpu_trace_has_no_device_properties():
    path = glob.glob(os.path.join(KINETO, "cpu_convnet", "*.pt.trace.json.gz"))[0]
    assert _kineto_props(path) == []


def test_kineto_unknown_gpu_gets_clear_state():
    result = kineto_device_peaks(
        {
            "name": "NVIDIA GeForce RTX 9090",
            "computeMajor": 13,
            "computeMinor": 0,
            "numSms": 200,
            "totalGlobalMem": 32 * 2**30,
        }
    )
    assert result.device.compute == [] and result.device.memories == []
    assert not result.device.peaks_known
    msg = " ".join(d.message for d in result.diagnostics if d.code == "peaks_unknown")
    assert "RTX 9090" in msg and "device file" in msg


# ------------------------------------------------------------------ table


@pytest.mark.parametrize(
    "name,kwargs,key",
    [
        ("Tesla V100-SXM2-16GB", {}, "v100-sxm2-16gb"),
        ("Tesla V100-SXM2-32GB", {}, "v100-sxm2-32gb"),
        ("Tesla V100-PCIE-16GB", {}, "v100-pcie"),
        ("Tesla T4", {}, "t4"),
        ("NVIDIA A100-SXM4-80GB", {}, "a100-sxm4-80gb"),
        ("NVIDIA A100-SXM4-40GB", {}, "a100-sxm4-40gb"),
        ("NVIDIA A100-PG509-200", {"memory_bytes": 42297524224}, "a100-sxm4-40gb"),
        ("NVIDIA A100 80GB PCIe", {}, "a100-pcie-80gb"),
        ("NVIDIA H100 80GB HBM3", {}, "h100-sxm"),
        ("NVIDIA H100 PCIe", {}, "h100-pcie"),
        ("NVIDIA H200", {}, "h200-sxm"),
        ("NVIDIA H200 NVL", {}, "h200-nvl"),
        ("NVIDIA L4", {}, "l4"),
        ("NVIDIA L40S", {}, "l40s"),
        ("AMD Instinct MI250X / MI250", {"sm_count": 104}, "mi250-gcd"),
        ("AMD Instinct MI250X / MI250", {"sm_count": 110}, "mi250x-gcd"),
        ("AMD Instinct MI300X", {}, "mi300x"),
        ("TPU v4", {}, "tpu-v4"),
        ("TPU v5 lite", {}, "tpu-v5e"),
        ("TPU v5p", {}, "tpu-v5p"),
        ("TPU v6 lite", {}, "tpu-v6e"),
        ("TPU7x", {}, "tpu-v7x"),
        ("NVIDIA B300 SXM6 AC", {}, "b300"),
        ("NVIDIA GB300", {}, "gb300"),
        ("NVIDIA H20", {}, "h20"),
        ("NVIDIA B200", {}, "b200"),
        (
            "",
            {
                "compute_capability": (7, 0),
                "sm_count": 80,
                "memory_bytes": 16945512448,
                "clock_khz": 1530000,
            },
            "v100-sxm2-16gb",
        ),
        ("", {"compute_capability": (7, 0), "sm_count": 80, "clock_khz": 1380000}, "v100-pcie"),
    ],
)
def test_lookup(name, kwargs, key):
    spec = lookup(name, **kwargs)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("NVIDIA A10G", {}),
        ("NVIDIA GeForce RTX 4090", {}),
        ("Some NPU", {}),
        ("AMD Radeon Graphics", {}),  # generic name and no signature
        ("", {"compute_capability": (8, 0), "sm_count": 7}),
        ("NVIDIA A100-SXM4-80GB", {"compute_capability": (9, 0)}),  # contradicts the name
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", {}),  # a slice: a fraction of the table's peaks
    ],
)
def test_lookup_misses(name, kwargs):
    assert lookup(name, **kwargs) is None


# The newest chips as their vendors publish them: (key, per-what divisor, {precision: (figure,
# sparse?)}); NVIDIA's board/rack tensor figures are 2:4-sparse unless marked dense.
NEWEST = [
    # NVIDIA HGX B300 (8 GPUs): FP4 108 PF dense, FP8/FP6 72 PF*, INT8 2 POPS*, FP16/BF16
    # 36 PF*, TF32 18 PF*, FP32 600 TF, FP64 10 TF; 8 TB/s per GPU.
    (
        "b300",
        8,
        {
            "fp4": (108000, False),
            "fp8": (72000, True),
            "fp6": (72000, True),
            "int8": (2000, True),
            "bf16": (36000, True),
            "tf32": (18000, True),
            "fp32": (600, False),
            "fp64": (10, False),
            "hbm": (64000, False),
        },
    ),
    # GB300 NVL72: FP4 1,080 PF dense, FP8/FP6 720 PF*, INT8 23 POPS*, BF16 360 PF*, TF32
    # 180 PF*, FP64 100 TF, HBM 576 TB/s.
    (
        "gb300",
        72,
        {
            "fp4": (1080000, False),
            "fp8": (720000, True),
            "int8": (23000, True),
            "bf16": (360000, True),
            "tf32": (180000, True),
            "fp64": (100, False),
            "hbm": (576000, False),
        },
    ),
    # HGX B200 (8 GPUs): FP4 144 PF*, FP8 72 PF*, BF16 36 PF*, FP32 600 TF, FP64 296 TF.
    (
        "b200",
        8,
        {
            "fp4": (144000, True),
            "fp8": (72000, True),
            "bf16": (36000, True),
            "fp32": (600, False),
            "fp64": (296, False),
            "hbm": (64000, False),
        },
    ),
    # H20: BF16 148, FP8 296, TF32 74, FP32 44, FP64 1 TFLOPS (dense), 4.0 TB/s.
    (
        "h20",
        1,
        {
            "bf16": (148, False),
            "fp8": (296, False),
            "tf32": (74, False),
            "fp32": (44, False),
            "fp64": (1, False),
            "hbm": (4000, False),
        },
    ),
    # TPU7x per chip (two devices): BF16 2,307, FP8 4,614 TFLOPS, HBM 7,380 GB/s.
    ("tpu-v7x", 2, {"bf16": (2307, False), "fp8": (4614, False), "hbm": (7380, False)}),
    # TPU v5p / v6e: FP8 as fast as BF16 (459 / 918 TFLOPS).
    ("tpu-v5p", 1, {"fp8": (459, False), "bf16": (459, False)}),
    ("tpu-v6e", 1, {"fp8": (918, False), "hbm": (1638, False)}),
    # MI355X / MI350X: FP4 = FP6 10.1 / 9.2 PF, FP8 5.0 / 4.6 PF, BF16 2.5 / 2.3 PF.
    (
        "mi355x",
        1,
        {
            "fp4": (10066, False),
            "fp6": (10066, False),
            "fp8": (5033, False),
            "bf16": (2517, False),
            "hbm": (8000, False),
        },
    ),
    (
        "mi350x",
        1,
        {
            "fp4": (9228, False),
            "fp6": (9228, False),
            "fp8": (4614, False),
            "bf16": (2307, False),
            "hbm": (8000, False),
        },
    ),
]


@pytest.mark.parametrize("key,per,figures", NEWEST, ids=[k for k, *_ in NEWEST])
def test_newest_chips_agree_with_their_published_figures(key, per, figures):
    spec = next(s for s in TABLE if s.key == key)
    for p, (value, sparse) in figures.items():
        got = spec.memory_bw.value if p == "hbm" else spec.tflops(p)
        assert got is not None, (key, p)
        want = value / per / (2 if sparse else 1)
        assert _rel(got, want) < 0.012, (key, p, got, want)
        if p != "hbm":
            assert spec.compute[p].source and spec.compute[p].basis in (
                "sparse_halved" if sparse else "dense",
                "derived",
            )


def test_unknown_newest_names_keep_peaks_unknown():
    """A chip the table lacks is never given another chip's peaks (a B300 is not a B200)."""
    for name in ("NVIDIA RTX PRO 6000 Blackwell", "NVIDIA Rubin", "TPU v8", "AMD Instinct MI400"):
        assert lookup(name) is None, name
    assert lookup("NVIDIA B300").key == "b300" and lookup("NVIDIA GB300").key == "gb300"
    assert lookup("NVIDIA H200").key == "h200-sxm"  # \bh20\b must not catch it


def test_ambiguous_mi250_name_says_so():
    spec = lookup("AMD Instinct MI250X / MI250")
    assert spec is not None and "MI250" in spec.match_note


@pytest.mark.parametrize(
    "ref_name,key,scale",
    [
        ("V100 SXM2", "v100-sxm2-16gb", 1),
        ("T4", "t4", 1),
        ("A100 40GB", "a100-sxm4-40gb", 1),
        ("A100 80GB", "a100-sxm4-80gb", 1),
        ("L4", "l4", 1),
        ("H100 SXM5", "h100-sxm", 1),
        ("H200 SXM", "h200-sxm", 1),
        ("MI250X package", "mi250x-gcd", 2),
        ("TPU v4", "tpu-v4", 1),
        ("TPU v5e", "tpu-v5e", 1),
        ("TPU v5p", "tpu-v5p", 1),
        ("TPU v6e", "tpu-v6e", 1),
    ],
)
def test_table_agrees_with_reference_data_sheets(ref_name, key, scale):
    spec = next(s for s in TABLE if s.key == key)
    for p, value in REF[ref_name].items():
        got = spec.memory_bw.value if p == "hbm" else spec.tflops(p)
        assert got is not None, (key, p)
        assert _rel(got * scale, value) < 0.01, (key, p, got * scale, value)


def test_every_table_number_has_a_source_and_basis():
    keys = set()
    for spec in TABLE:
        assert spec.key not in keys
        keys.add(spec.key)
        figures = (
            list(spec.compute.values()) + [spec.memory_bw] + ([spec.l2_bw] if spec.l2_bw else [])
        )
        for fig in figures:
            assert fig.value > 0 and len(fig.source) > 10
            assert fig.basis in ("dense", "sparse_halved", "derived")
        dev = spec.to_device_info()
        assert dev.compute and dev.peaks_known and dev.memory("hbm").source == "datasheet"
        assert dev.compute[0].precision == spec.default_precision()


# ------------------------------------------------------------------ ceilings


def test_ops_go_under_the_ceiling_of_their_own_precision():
    a100 = lookup("NVIDIA A100-SXM4-40GB").to_device_info()
    v100 = lookup("Tesla V100-SXM2-16GB").to_device_info()
    h100 = lookup("NVIDIA H100 80GB HBM3").to_device_info()
    tpu = DeviceInfo(kind="tpu", compute=[ComputePeak("default", 918e3, "profile")])
    assert ceiling_precision("f32", True, a100) == "tf32"
    assert ceiling_precision("float", True, a100, allow_tf32=False) == "fp32"
    assert ceiling_precision("bf16", True, a100) == "bf16"
    assert ceiling_precision("c10::BFloat16", True, a100) == "bf16"
    assert ceiling_precision("f64", True, a100) == "fp64_tc"
    assert ceiling_precision("f32", True, v100) == "fp32"
    assert ceiling_precision("f16", True, v100) == "fp16"
    assert ceiling_precision("bf16", True, v100) == "fp32"  # no bf16 units on Volta
    assert ceiling_precision("f8e4m3fn", True, h100) == "fp8"
    assert ceiling_precision("f8e5m2", True, a100) == "fp16"
    assert ceiling_precision("bf16", False, a100) == "fp32"
    assert ceiling_precision("pred", False, a100) == ""
    assert ceiling_precision("bf16", True, tpu) == ""
    # The model's lookup finds the roof by that name.
    assert a100.peak_for(ceiling_precision("f32", True, a100)) == pytest.approx(156e3)
    assert a100.peak_for(ceiling_precision("f32", False, a100)) == pytest.approx(19.5e3)
    assert a100.peak_for(ceiling_precision("f64", True, a100)) == pytest.approx(19.5e3)


# ------------------------------------------------------------------ device files


def _write(path, data):
    with open(path, "w", encoding="utf-8") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_device_file_round_trip(tmp_path):
    src = {
        "tb_roofline_device_file": 1,
        "type": "Test CPU",
        "kind": "cpu",
        "num_cores": 2,
        "source": "user",
        "compute": {"fp64": 500.0, "fp32": {"gflops": 1000.0, "source": "measured"}},
        "default_precision": "fp32",
        "memories": {"hbm": 120.5, "l3": {"name": "L3 cache", "gbs": 800}},
    }
    dev = load_device_file(_write(tmp_path / FILE_NAME, src))
    assert dev.type == "Test CPU" and dev.kind == "cpu" and dev.num_cores == 2
    assert [(c.precision, c.gflops, c.source) for c in dev.compute] == [
        ("fp32", 1000.0, "measured"),
        ("fp64", 500.0, "user"),
    ]
    assert dev.memory("hbm").name == "DRAM" and dev.memory("hbm").gbs == 120.5
    assert dev.memory("l3").name == "L3 cache"
    out = tmp_path / "again.json"
    write_device_file(str(out), dev, notes="copied")
    again = load_device_file(str(out))
    assert again.to_json() == dev.to_json()
    assert json.loads(out.read_text())["notes"] == "copied"


@pytest.mark.parametrize(
    "data,fragment",
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "top level must be a JSON object"),
        ({"compute": {"fp32": 1}}, "kind must be one of"),
        ({"kind": "cpu", "compute": {"fp32": 1}, "peak": 3}, "1 unknown key(s); allowed"),
        ({"kind": "cpu", "compute": {"fp32": -5}}, "compute.fp32: must be a positive"),
        ({"kind": "cpu", "compute": {"fp32": "fast"}}, "compute.fp32: must be a number"),
        ({"kind": "cpu", "compute": {"fp32": True}}, "compute.fp32: must be a number"),
        ('{"kind": "cpu", "compute": {"fp32": NaN}}', "compute.fp32: NaN is out of range"),
        ({"kind": "cpu", "compute": {"fp33": 1}}, "compute entry 1: unknown precision"),
        ({"kind": "cpu", "compute": {"fp32": {"gflop": 1}}}, "compute.fp32: 1 unknown key(s)"),
        ({"kind": "cpu", "compute": {"fp32": 1}, "source": "guess"}, "source must be one of"),
        (
            {"kind": "cpu", "compute": {"fp32": 1}, "default_precision": "bf16"},
            "default_precision is not one of",
        ),
        ({"kind": "cpu"}, "no peaks"),
        ({"kind": "cpu", "memories": {"l3": 100}}, "need an 'hbm' entry"),
        ({"kind": "cpu", "memories": {"HBM!": 100}}, "memory id"),
        ({"kind": "cpu", "num_cores": 0, "compute": {"fp32": 1}}, "num_cores"),
        ({"kind": "cpu", "compute": {"fp32": 1}, "tb_roofline_device_file": 7}, "format 1"),
    ],
)
def test_device_file_validation_errors(tmp_path, data, fragment):
    path = _write(tmp_path / "dev.json", data)
    with pytest.raises(DeviceFileError) as err:
        load_device_file(path)
    assert fragment in str(err.value) and "dev.json" in str(err.value)


def test_device_file_missing(tmp_path):
    with pytest.raises(DeviceFileError, match="cannot read"):
        load_device_file(str(tmp_path / "nope.json"))


def test_find_device_file(tmp_path, monkeypatch):
    logdir = tmp_path / "logs"
    session = logdir / "run1" / "plugins" / "profile" / "2026_01_01"
    session.mkdir(parents=True)
    profile = session / "host.xplane.pb"
    profile.write_bytes(b"x")
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert find_device_file(str(profile), str(logdir)) is None
    # Above the logdir does not count.
    _write(tmp_path / FILE_NAME, {"kind": "cpu", "compute": {"fp32": 1}})
    assert find_device_file(str(profile), str(logdir)) is None
    # In the logdir, then a nearer one wins.
    _write(logdir / FILE_NAME, {"kind": "cpu", "compute": {"fp32": 1}})
    assert find_device_file(str(profile), str(logdir)) == os.path.realpath(logdir / FILE_NAME)
    _write(logdir / "run1" / FILE_NAME, {"kind": "cpu", "compute": {"fp32": 2}})
    found = find_device_file(str(profile), str(logdir))
    assert found == os.path.realpath(logdir / "run1" / FILE_NAME)
    assert load_device_file(found).peak_gflops == 2
    # The environment variable applies when no file is beside the profile.
    other = tmp_path / "other_logs" / "run"
    other.mkdir(parents=True)
    env_file = _write(tmp_path / "machine.json", {"kind": "cpu", "compute": {"fp64": 3}})
    assert (
        find_device_file(str(other), str(tmp_path / "other_logs"), environ={ENV_VAR: env_file})
        == env_file
    )
    with pytest.raises(DeviceFileError, match=ENV_VAR):
        find_device_file(
            str(other),
            str(tmp_path / "other_logs"),
            environ={ENV_VAR: str(tmp_path / "missing.json")},
        )


def test_device_from_dict_default_order_is_file_order():
    dev = device_from_dict(
        {"kind": "gpu", "compute": {"bf16": 100, "fp32": 10}, "memories": {"hbm": 50}}
    )
    assert [c.precision for c in dev.compute] == ["bf16", "fp32"] and dev.peak_gflops == 100
    assert dev.memory("hbm").name == "HBM" and dev.memory("hbm").source == "user"


# ------------------------------------------------------------------ calibrate


@pytest.mark.slow
def test_calibrate_quick_writes_a_valid_measured_device_file(tmp_path, capsys):
    out = tmp_path / FILE_NAME
    assert calibrate_mod.main(["--quick", "-o", str(out)]) == 0
    dev = load_device_file(str(out))
    assert dev.kind == "cpu" and dev.num_cores == 1
    assert [c.precision for c in dev.compute] == ["fp32", "fp64"]
    for c in dev.compute:
        assert c.source == "measured" and math.isfinite(c.gflops) and c.gflops > 0
    hbm = dev.memory("hbm")
    assert hbm.source == "measured" and math.isfinite(hbm.gbs) and hbm.gbs > 0
    data = json.loads(out.read_text())
    assert "not measurable with numpy" in data["notes"]
    stream = data["measurement"]["stream"]
    assert stream["array_bytes"] >= min(data["measurement"]["last_level_cache_bytes"], 128 << 20)
    assert stream["copy_gbs"] > 0 and stream["triad_gbs"] > 0
    assert "wrote" in capsys.readouterr().out


def test_calibrate_subparser_wiring():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    calibrate_mod.add_calibrate_subparser(sub)
    args = parser.parse_args(["calibrate", "--quick", "-o", "x.json"])
    assert args.quick and args.output == "x.json"
    assert args.run_standalone is calibrate_mod.run_from_args


def test_measure_bandwidth_counts_bytes_like_stream():
    # Small arrays (cache-resident): only the bookkeeping is checked here, not the speed.
    r = calibrate_mod.measure_bandwidth(0.2, 8 << 20, 2)
    assert r["array_bytes"] >= 8 << 20 and r["repetitions"] >= 2
    assert r["copy_gbs"] > 0 and r["triad_gbs"] > 0


def test_calibrate_says_when_its_figures_are_implausible():
    """fp64 faster than fp32, or repetitions more than 20 % apart: a busy machine, said in the
    device file's notes and on the console (measured figures, checked by hand)."""
    quiet = calibrate_mod.plausibility(
        {"gflops": 41.0, "spread": 0.05}, {"gflops": 80.0, "spread": 0.1}, {"spread": 0.0}
    )
    assert quiet == []
    busy = calibrate_mod.plausibility(
        {"gflops": 91.0, "spread": 0.05}, {"gflops": 41.0, "spread": 0.35}, {"spread": 0.0}
    )
    assert any("fp64 measured faster than fp32 (91.0 > 41.0" in w for w in busy)
    assert any("fp32 matmul repetitions differ by 35%" in w for w in busy)
    assert "busy" in busy[-1]
    assert calibrate_mod.spread([10.0, 8.0, 9.5]) == pytest.approx(0.2)
    assert calibrate_mod.spread([5.0]) == 0.0
    import numpy as np

    r = calibrate_mod.measure_matmul(np.float32, 0.2, 256)
    assert 0.0 <= r["spread"] < 1.0
