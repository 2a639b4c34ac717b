"""An oracle for every finding's bound, independent of the model's rule code.

It imports nothing from `tb_roofline.model`: from the readers' op table (one key per distinct
op and shape — a PyTorch key holds one input-shape fingerprint, an XLA key one instruction —
with its calls' FLOPs and bytes) and the device's peaks, it recomputes each op's floor as the
sum of its calls' floors, Σ max(F_i / P, B_i / BW), and from it every op finding's bound, the
ops' time saved and the program's; from the readers' timeline windows the idle and exposed
bounds. Run on every committed profile, with and without infeed/outfeed.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

TESTDATA = os.path.join(TESTS, "..", "testdata")
GUIDANCE = os.path.join(TESTDATA, "guidance")
DEVICE_FILE = os.path.join(GUIDANCE, "roofline_device.json")
# The idle time each idle finding names, when the reader split it by launch.
IDLE_PARTS = {
    "idle": ("host_bound_us", "sync_us"),
    "idle_wait": ("event_wait_us", "sync_wait_us", "memcpy_wait_us"),
    "launch_latency": ("launch_latency_us",),
    "idle_undetermined": ("queued_us", "no_launch_us"),
}
REL = 1e-6

# (memory column, memory id) of the op table, as docs/http_api.md lists them.
MEMORIES = (
    ("hbm_bytes", "hbm"),
    ("cmem_read_bytes", "cmem_read"),
    ("cmem_write_bytes", "cmem_write"),
    ("vmem_read_bytes", "vmem_read"),
    ("vmem_write_bytes", "vmem_write"),
    ("host_bytes", "host"),
    ("interconnect_bytes", "interconnect"),
)


def _cases():
    cases = [
        (os.path.join(TESTDATA, "demo"), None),
        (GUIDANCE, DEVICE_FILE),
        (os.path.join(TESTDATA, "xla_gpu_mi300_conv"), None),
        (os.path.join(TESTDATA, "xla_gpu_mi300_copy_only"), None),
        (os.path.join(TESTDATA, "jax_cpu_collectives"), DEVICE_FILE),
    ]
    cases += [(d, None) for d in sorted(glob.glob(os.path.join(TESTDATA, "kineto", "*")))]
    cases += [(d, DEVICE_FILE) for d in sorted(glob.glob(os.path.join(TESTDATA, "jax_cpu", "*")))]
    cases += [
        (os.path.join(TESTDATA, "compare"), DEVICE_FILE),
        (os.path.join(TESTDATA, "kineto_captured"), DEVICE_FILE),
        (
            os.path.join(TESTDATA, "torch_cpu"),
            os.path.join(TESTDATA, "torch_cpu", "roofline_device_amx.json"),
        ),
        (os.path.join(TESTDATA, "xplane_tf_gpu_v100"), None),
    ]
    out = []
    for logdir, dev in cases:
        for r in RooflineService(logdir).list_runs()["runs"]:
            out.append(
                pytest.param(logdir, dev, r["run"], id=f"{os.path.basename(logdir)}:{r['run']}")
            )
    return out


def _bandwidths(device) -> dict:
    """Memory column -> GB/s of the memories that bound an op (CMEM / VMEM only where the chip
    has them; others where their speed is known)."""
    out = {}
    for col, mid in MEMORIES:
        if mid.startswith("cmem") and not device.has_cmem:
            continue
        if mid.startswith("vmem") and not device.has_merged_vmem:
            continue
        m = device.memory(mid)
        if m is not None and m.gbs > 0:
            out[col] = m.gbs
    return out


class Oracle:
    """Per distinct op: its time, FLOPs and bytes summed over its rows; per record identity:
    its keys."""

    def __init__(self, analysis):
        t = analysis.scope.tables["op"]
        self.device = analysis.device
        op, n = t.rows["op"], t.num_keys
        self.time_us = (
            np.bincount(op, weights=np.asarray(t["total_time_ps"], float), minlength=n) / 1e6
        )
        self.flops = np.bincount(op, weights=np.asarray(t["flops"], float), minlength=n)
        self.mem = {
            c: np.bincount(op, weights=np.asarray(t[c], float), minlength=n) for c, _ in MEMORIES
        }
        self.precision = t.keys["precision"]
        self.in_steps_us = (
            np.bincount(
                op[t.rows["step"] >= 0],
                weights=np.asarray(t.rows["total_time_ps"], float)[t.rows["step"] >= 0],
                minlength=n,
            )
            / 1e6
        )
        self.keys: dict = {}
        for k, ident in enumerate(
            zip(
                t.keys["program_id"].tolist(), t.keys["operation"].tolist(), self.precision.tolist()
            )
        ):
            self.keys.setdefault(ident, []).append(k)
        self.bw = _bandwidths(self.device)

    def floor_us(self, ident, peak=None) -> float:
        """Σ over the record's distinct ops of max(F / P, B_m / BW_m), µs."""
        total = 0.0
        for k in self.keys[ident]:
            p = peak if peak is not None else self.device.peak_for(str(self.precision[k]))
            parts = [self.flops[k] / p / 1e3 if p > 0 else 0.0]
            parts += [self.mem[c][k] / gbs / 1e3 for c, gbs in self.bw.items()]
            total += max(parts)
        return total

    def time(self, ident) -> float:
        return float(sum(self.time_us[k] for k in self.keys[ident]))


def _ident(op: dict):
    return (op["program_id"], op["operation"], op["precision"])


@pytest.mark.slow
@pytest.mark.parametrize("logdir,device_file,run", _cases())
def test_every_bound_recomputed_from_per_call_floors(logdir, device_file, run):
    s = RooflineService(logdir, device_file=device_file)
    a = s.analysis(run, "")
    oracle = Oracle(a)
    for io in (True, False):
        ops = {_ident(r): r for r in a.ops[io].row_dicts()}
        saved_sum = 0.0
        for ident, r in ops.items():
            saved = r["potential_time_saved_us"]
            if saved is None or r["caveat"] == "container":
                continue
            # The op's time saved: its time less its calls' floors.
            expected = max(oracle.time(ident) - oracle.floor_us(ident), 0.0)
            assert saved == pytest.approx(expected, rel=REL, abs=1e-6), ident
            saved_sum += saved
        total = a.program[io].row_dicts()[0]
        if total["potential_time_saved_us"] is not None:  # the program's: what its ops prove
            assert total["potential_time_saved_us"] == pytest.approx(saved_sum, rel=1e-6, abs=1e-6)
        g = s.guidance(run, "", io)
        assert g["ops_time_saved_us"] == total["potential_time_saved_us"]
        windows = a.facts.timeline.windows if a.facts and a.facts.timeline else None
        for f in g["findings"]:
            _check_finding(f, oracle, ops, g, windows, a)


def _check_finding(f, oracle, ops, g, windows, a):
    facts = f["evidence"]["facts"]
    assert f["time_saved_us"] <= f["bound_us"] * (1 + REL) + 1e-9, f["id"]
    if f["scope"] == "op":
        ident = _ident(f["ops"][0])
        t, floor = oracle.time(ident), oracle.floor_us(ident)
        gap = max(t - floor, 0.0)
        if f["rule"] in ("far_below_roof", "tiny_ops", "tiling"):
            assert f["bound_us"] == pytest.approx(gap, rel=REL, abs=1e-6), f["id"]
        if f["rule"] == "tiling":
            assert f["time_saved_us"] == pytest.approx(
                gap * facts["misaligned_time_share"], rel=REL
            )
        if f["rule"] == "precision":
            new = oracle.floor_us(ident, facts["target_peak_flop_rate"])
            assert facts["floor_us"] == pytest.approx(floor, rel=REL)
            assert f["bound_us"] == pytest.approx(max(floor - new, 0.0), rel=REL, abs=1e-6)
        if f["rule"] == "repeated_copy":  # within the op's own time in steps
            assert a.num_steps > 0
            in_steps = sum(oracle.in_steps_us[k] for k in oracle.keys[ident])
            assert f["bound_us"] <= in_steps * (1 + REL)
        if f["rule"] == "fusion":  # Σ over the tensors the pairs hand on: pairs × 2 × S ÷ BW
            hbm = a.device.memory("hbm").gbs
            tensors = facts["tensors"]
            assert sum(t["pairs"] for t in tensors) == facts["pairs"]
            assert f["bound_us"] == pytest.approx(
                sum(t["pairs"] * 2 * t["bytes"] / hbm / 1e3 for t in tensors), rel=REL
            )
        if f["rule"] != "fusion":
            assert f["time_saved_us"] <= t * (1 + REL)
        return
    if windows is None:
        return
    if f["rule"] in IDLE_PARTS:
        # Split by launch (PyTorch GPU traces): each class's bound is its own idle time, the
        # classes apart; else one finding bounded by the idle time less edges and captures.
        split = facts.get("launch_known") and "captured" not in f["title"]
        parts = IDLE_PARTS[f["rule"]] if split else ()
        whole = facts["idle_us"] - facts["profile_edges_us"] - facts["graph_capture_us"]
        assert f["bound_us"] == pytest.approx(
            sum(facts[k] for k in parts) if split else whole, rel=REL, abs=1e-6
        )
        assert f["bound_us"] <= whole * (1 + REL) + 1e-6
        assert (
            facts["idle_us"]
            <= float((windows["span_ps"] - windows["busy_ps"]).sum()) / 1e6 * (1 + REL) + 1e-6
        )
    if f["rule"] == "exposed_communication":
        exposed = float(windows["exposed_ps"].sum()) / 1e6
        assert facts["exposed_us"] <= exposed * (1 + REL) + 1e-6
        assert f["bound_us"] == pytest.approx(
            min(facts["exposed_us"], facts["overlap_work_us"]), rel=REL
        )
        # Contributors on the same basis as the total: a union, never more than it.
        assert sum(c["exposed_us"] for c in facts["contributors"]) <= exposed * (1 + REL) + 1e-6
