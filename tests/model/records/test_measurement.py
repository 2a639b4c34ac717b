"""Whether a record is a roofline measurement is decided once (model/records/records.py
`measurements`, sent as `measurement`): each caveat on real profiles gives the answer the
rule in docs/http_api.md#caveats states, the time saved, the program answer, the exports and
the CLI report's left-out list all read the same column."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os

import numpy as np
from testpaths import TESTS

from tb_roofline.model.records import records
from tb_roofline.serve.cli.main import main as cli_main
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
TESTDATA = os.path.join(REPO, "testdata")
# (logdir, run): together they hold every caveat but peer_transfer (made below from a real trace)
CASES = [
    ("demo", "v6e_train/2026_11_29_10_00_00"),  # async_start, async_wait, container
    ("jax_cpu", "while_loop/2026_11_29_17_35_42"),  # container, no peaks known
    ("kineto", "a100_80gb_shapes"),  # no_cost, host_transfer under the A100's PCIe link
    ("kineto", "b200_eager"),  # host_transfer without a known link speed
    ("compare", "jax_cpu/mlp_b64/2026_11_30_14_13_09"),  # above_roof
]
# The rule, written out per caveat (docs/http_api.md#caveats); host_transfer depends on the link.
NOT_A_MEASUREMENT = {"async_start", "async_wait", "peer_transfer", "no_cost", "above_roof"}
MEASUREMENT = {None, "container"}


def _rows(answer) -> list[dict]:
    return [dict(zip(answer["columns"], r)) for r in answer["rows"]]


def _expected(r: dict, link) -> bool:
    """The rule by hand: a host copy is a measurement when the device has a host-link speed and
    the copy's rate over it (host bytes / time, computed here) is not above it."""
    if r["caveat"] in MEASUREMENT:
        return True
    if r["caveat"] in NOT_A_MEASUREMENT:
        return False
    assert r["caveat"] == "host_transfer", r["caveat"]
    if link is None:
        return False
    rate_gbs = r["host_bytes"] / (r["total_time_us"] * 1e3)
    return rate_gbs <= link["peak_gbs"] * records.ABOVE_ROOF


def _check(service: RooflineService, run: str) -> set:
    memories = service.device(run, "")["device"]["memories"]
    link = next((m for m in memories if m["id"] == "host" and m["peak_gbs"] > 0), None)
    seen = set()
    for answer in (service.ops(run, ""), service.program(run, "")):
        assert "measurement" in answer["columns"]
        for r in _rows(answer):
            want = _expected(r, link) if r["record_type"] == "op" else r["caveat"] is None
            assert r["measurement"] is want, (run, r["operation"], r["caveat"], r["measurement"])
            if not r["measurement"] and r["record_type"] == "op":  # time saved reads the rule
                assert r["potential_time_saved_us"] is None, (run, r["operation"])
            seen.add((r["caveat"], r["measurement"]))
    return seen


def test_each_caveat_on_real_profiles():
    seen = set()
    for logdir, run in CASES:
        seen |= _check(RooflineService(os.path.join(TESTDATA, logdir)), run)
    for caveat in ("async_start", "async_wait", "no_cost", "above_roof"):
        assert (caveat, False) in seen, caveat
    assert (None, True) in seen and ("container", True) in seen
    # host copies both ways: under the A100's known PCIe speed, and on a B200 without one
    assert ("host_transfer", True) in seen and ("host_transfer", False) in seen


def test_a_peer_copy_is_not_a_measurement(tmp_path):
    """The A100 AlexNet trace with its host copies renamed peer copies (`Memcpy PtoP`): the
    reader gives them `peer_transfer`, and they are not measurements, nor ranked."""
    src = os.path.join(TESTDATA, "kineto", "a100_alexnet")
    run = tmp_path / "peer"
    run.mkdir()
    for name in os.listdir(src):
        with gzip.open(os.path.join(src, name), "rt") as f:
            doc = json.load(f)
        for e in doc["traceEvents"]:
            if str(e.get("name", "")).startswith("Memcpy HtoD"):
                e["name"] = "Memcpy PtoP (Device -> Device)"
        with gzip.open(run / name, "wt") as f:
            json.dump(doc, f)
    service = RooflineService(str(tmp_path))
    ops = _rows(service.ops("peer", ""))
    peers = [r for r in ops if r["operation"].startswith("Memcpy PtoP")]
    assert peers and all(r["caveat"] == "peer_transfer" for r in peers)
    assert all(r["measurement"] is False and r["opportunity_rank"] is None for r in peers)
    assert ("peer_transfer", False) in _check(service, "peer")


def test_the_rule_on_hand_made_records():
    nan = float("nan")
    caveat = np.array(
        ["", "container", "async_start", "async_wait", "peer_transfer", "no_cost"]
        + ["above_roof", "host_transfer", "host_transfer", "host_transfer"],
        dtype=object,
    )
    eff = np.array([0.5, nan, nan, nan, 0.3, nan, 1.4, 0.8, 1.2, nan])
    bound = np.array(["HBM", "Unknown", "Async", "Async", "HBM", "Unknown"], dtype=object)
    bound = np.concatenate([bound, np.array(["Compute", "PCIe", "PCIe", "Unknown"], object)])
    got = records.measurements(caveat, eff, bound).tolist()
    assert got == [True, True, False, False, False, False, False, True, False, False]
    # a compared pair's missing side (no caveat, no bound-by) is neither
    side = records.measurements(np.array([None, ""], object), [nan, 0.5], [None, "HBM"])
    assert side.tolist() == [None, True]


def test_exports_and_the_cli_read_the_column(tmp_path):
    kineto = os.path.join(TESTDATA, "kineto")
    service = RooflineService(kineto)
    ops = _rows(service.ops("a100_80gb_shapes", ""))
    left_out = [r for r in ops if r["measurement"] is False]
    host = [r for r in ops if r["caveat"] == "host_transfer"]
    assert left_out and host and all(r["measurement"] for r in host)
    # the CSV export carries the column, equal to the answer's
    text, _, _ = service.export("a100_80gb_shapes", "", level="op", fmt="csv")
    header, *body = list(csv.reader(io.StringIO(text)))
    col = header.index("measurement")
    assert [r[col] for r in body] == [str(r["measurement"]) for r in ops]
    # the CLI report lists exactly the records that are not measurements (host copies are not)
    out = io.StringIO()
    args = ["report", kineto, "--run", "a100_80gb_shapes", "--top", "3", "--no-progress"]
    assert cli_main(args, out=out) == 0
    text = out.getvalue()
    assert f"\n{len(left_out)} ops (" in text and "are not roofline measurements (no_cost;" in text
