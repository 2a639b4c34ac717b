"""`tb-roofline diff` compares per core (per chip, GPU, ...): on the real two-host demo v4 pod,
each op's self time per core, the change in percent and the faster/slower verdicts equal the
ones derived here by hand from the raw XSpace events (protobuf objects and a stack walk, no
tb_roofline reader or model), and a candidate with a host dropped is refused naming what
differs."""

from __future__ import annotations

import glob
import io
import json
import os
import shutil

import pytest
from testpaths import TESTS

from tb_roofline.protos import xplane_pb2
from tb_roofline.serve.cli.main import main

HERE = TESTS
POD = os.path.join(HERE, "..", "testdata", "demo", "v4_pod")
SESSION = os.path.join(POD, "plugins", "profile", "2026_11_29_11_30_00")


def _run(argv, capsys) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv + ["--no-progress"], out)
    return code, out.getvalue(), capsys.readouterr().err


def _self_times(events) -> dict[str, float]:
    """Self time (µs) per op metadata id on one line: duration minus the durations of the
    events wholly inside it, directly (a stack walk over events sorted by start, longest
    first; an event that only overlaps the one before it, as on this pod, is not inside it)."""
    spans = sorted(
        ((e.offset_ps, e.offset_ps + e.duration_ps, e.metadata_id) for e in events),
        key=lambda s: (s[0], -s[1]),
    )
    own = [float(b - a) for a, b, _ in spans]
    stack: list[int] = []
    for i, (a, b, _) in enumerate(spans):
        while stack and spans[stack[-1]][1] <= a:
            stack.pop()
        if stack and b <= spans[stack[-1]][1]:
            own[stack[-1]] -= b - a
        stack.append(i)
    out: dict = {}
    for (_, _, md), t in zip(spans, own):
        out[md] = out.get(md, 0.0) + t / 1e6
    return out


def _host_per_core(path: str) -> dict[str, float]:
    """{op name: self time summed over the host's TensorCore planes / their number} (µs)."""
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    cores = [p for p in space.planes if p.name.startswith("/device:TPU:") and "Core" not in p.name]
    total: dict[str, float] = {}
    for plane in cores:
        line = next(ln for ln in plane.lines if ln.name == "XLA Ops")
        for md, t in _self_times(line.events).items():
            name = plane.event_metadata[md].display_name or plane.event_metadata[md].name
            total[name] = total.get(name, 0.0) + t
    return {k: v / len(cores) for k, v in total.items()}


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")


def test_two_hosts_compare_per_core_as_derived_by_hand(capsys):
    base = _host_per_core(os.path.join(SESSION, "tpu-v4-host0.xplane.pb"))
    cand = _host_per_core(os.path.join(SESSION, "tpu-v4-host1.xplane.pb"))
    argv = ["diff", POD, "--base-host", "tpu-v4-host0", "--host", "tpu-v4-host1"]
    code, out, err = _run(argv + ["--format", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    pairs = [p for p in doc["ops"] if p["status"] == "matched"]
    assert len(pairs) == len(base) == len(cand) >= 40
    faster = slower = 0
    for p in pairs:
        b, c = base[p["base_operation"]], cand[p["cand_operation"]]
        assert p["base_self_time_per_core_us"] == pytest.approx(b, rel=1e-9)
        assert p["cand_self_time_per_core_us"] == pytest.approx(c, rel=1e-9)
        assert p["delta_time_per_core_us"] == pytest.approx(c - b, rel=1e-9, abs=1e-9)
        assert p["delta_time_percent"] == pytest.approx(100 * (c - b) / b, rel=1e-9)
        assert p["change"] == ("faster" if c < b else "slower" if c > b else "same")
        faster, slower = faster + (c < b), slower + (c > b)
    assert (doc["summary"]["faster"], doc["summary"]["slower"]) == (faster, slower)
    assert faster and slower
    # the table prints the same per-core times
    code, table, _ = _run(argv, capsys)
    assert code == 0 and "Time per core (Total):" in table
    assert "self time per core, µs" in table


def test_a_candidate_with_a_host_dropped_is_refused_naming_it(tmp_path, capsys):
    cand_dir = tmp_path / "cand" / "plugins" / "profile" / "2026_11_29_11_30_00"
    shutil.copytree(SESSION, cand_dir)
    os.remove(cand_dir / "tpu-v4-host1.xplane.pb")
    gate = ["--fail-if-slower", "5", "--fail-if-op-slower", "5"]
    code, out, err = _run(["diff", POD, str(tmp_path / "cand")] + gate, capsys)
    assert code == 3 and out == "", err
    assert "base 2 host(s), 4 device(s); candidate 1 host(s), 2 device(s)" in err
    assert "hosts only in the base: tpu-v4-host1" in err
    # the same data on both sides, but whole: compared, nothing slower
    shutil.copy(os.path.join(SESSION, "tpu-v4-host1.xplane.pb"), cand_dir)
    code, out, err = _run(["diff", POD, str(tmp_path / "cand")] + gate, capsys)
    assert code == 0, err
    assert glob.glob(str(cand_dir / "*.xplane.pb"))
