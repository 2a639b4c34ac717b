"""TPU collectives under the ICI roof: their interconnect bytes are nccl-tests' bus bytes of the
message in their HLO text (hand-derived below), the device gets the chip's ICI figure from its
data sheet, and the model judges them under that roof only."""

from __future__ import annotations

import numpy as np
import pytest

from tb_roofline.readers.xspace.hlo_shapes import link_bus_bytes, text_link
from tb_roofline.readers.xspace.read import read_xspace
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.synthetic import SynthConfig, make_tpu_xspace, write_tpu_session

GROUPED = (
    "%all-reduce.5 = bf16[64,1024]{1,0} all-reduce(bf16[64,1024]{1,0} %p.1), "
    "replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=%add"
)


@pytest.mark.parametrize(
    "text, devices, bus, assumed",
    [
        # S = 64·1024·2 B, n = 4: S × 2·3/4
        (GROUPED, 2, 131072 * 1.5, False),
        # operands not in the text: S is the output's (128·1024·4 B); n = the 2 cores, assumed
        ("%all-reduce.5 = f32[128,1024]{1,0} all-reduce(...)", 2, 524288 * 1.0, True),
        # all-gather: S = operand × n = 4 KiB × 4, × 3/4 (iota groups: 2 groups of 4)
        (
            "%ag = f32[4096]{0} all-gather(f32[1024]{0} %p), replica_groups=[2,4]<=[8], "
            "dimensions={0}",
            1,
            16384 * 0.75,
            False,
        ),
        # reduce-scatter from its output only: S = 1 KiB × 4, × 3/4
        (
            "%rs = f32[256]{0} reduce-scatter(...), replica_groups={{0,1,2,3}}",
            1,
            4096 * 0.75,
            False,
        ),
        # all-to-all: S × (n-1)/n
        (
            "%a2a = f32[64,16]{1,0} all-to-all(f32[64,16]{1,0} %x), replica_groups={{0,1}}",
            8,
            4096 * 0.5,
            False,
        ),
        # a permute moves its message once
        (
            "%cp = f32[8]{0} collective-permute-start(f32[8]{0} %x), source_target_pairs={{0,1}}",
            4,
            32.0,
            False,
        ),
        # the -done half moves nothing of its own
        ("%d = bf16[4]{0} all-reduce-done(bf16[4]{0} %s)", 4, 0.0, False),
        ("%f = f32[8]{0} fusion(f32[8]{0} %x), kind=kLoop", 4, 0.0, False),
    ],
)
def test_bus_bytes_from_the_hlo_text(text, devices, bus, assumed):
    assert link_bus_bytes(text_link(text), devices) == (pytest.approx(bus), assumed)


def _ops(service, run):
    ops = service.ops(run, "", True)
    return {r[ops["columns"].index("operation")]: dict(zip(ops["columns"], r)) for r in ops["rows"]}


def test_grouped_all_reduce_sits_under_the_ici_roof(tmp_path):
    cfg = SynthConfig(seed=6, num_cores=4, op_text={"all-reduce.5": GROUPED})
    data = read_xspace(make_tpu_xspace(cfg), "h")
    link = data.device.memory("interconnect")
    assert link.gbs == pytest.approx(800 / 2)  # v6e ICI 800 GB/s both directions
    t = data.ops
    k = int(np.flatnonzero(t.keys["operation"] == "all-reduce.5")[0])
    assert t.unit_costs[k, -1] == pytest.approx(131072 * 1.5)
    # what the communication roofline plots: S = 64·1024·2 B, 2 groups of 4, named as lists
    assert t.keys["collective"][k] == "all-reduce S=131072 n=4 groups=2 form=list"
    rows = t.rows["op"] == k
    assert t["interconnect_bytes"][rows].sum() == pytest.approx(
        131072 * 1.5 * t.rows["occurrences"][rows].sum()
    )
    assert t["interconnect_bytes"][~rows].sum() == 0  # no other op moves link bytes
    assert not any(d.code == "collective_group_assumed" for d in data.diagnostics)

    write_tpu_session(str(tmp_path), "", "s", [cfg])
    r = _ops(RooflineService(str(tmp_path)), "s")["all-reduce.5"]
    eff = r["interconnect_bytes"] / (r["total_time_us"] * 1e-6) / (link.gbs * 1e9)
    assert r["roofline_efficiency"] == pytest.approx(eff)
    assert 0 < eff < 1 and r["bound_by"] == "Interconnect"
    assert r["potential_time_saved_us"] == pytest.approx(r["total_time_us"] * (1 - eff))


def test_group_assumed_is_said():
    data = read_xspace(make_tpu_xspace(SynthConfig(seed=1, num_cores=2)), "h")
    notes = [d for d in data.diagnostics if d.code == "collective_group_assumed"]
    assert len(notes) == 1 and "2 TensorCore" in notes[0].message


def test_v4_gets_its_ici_roof_and_unknown_chips_none():
    v4 = read_xspace(make_tpu_xspace(SynthConfig(seed=4, chip="v4", num_cores=1)), "h")
    assert v4.device.memory("interconnect").gbs == pytest.approx(2400 / 8)
    from tb_roofline.readers.xspace.tpu.rules import ici_peak

    assert ici_peak("TPU v9 Ultra") is None and ici_peak("") is None


def test_ragged_all_to_all_moves_its_input_and_send_needs_no_group():
    """By hand: ragged-all-to-all(input, output, 4 offset/size arrays) moves its input
    (4 KiB), not its output buffer and index arrays: S·(n−1)/n = 4096·3/4 over 4 devices. A
    send moves its operand once whatever the group: no group is assumed for it."""
    ragged = text_link(
        "%ra = f32[1024]{0} ragged-all-to-all(f32[1024]{0} %in, f32[1024]{0} "
        "%out, s64[4]{0} %io, s64[4]{0} %ss, s64[4]{0} %oo, s64[4]{0} %rs), "
        "replica_groups={{0,1,2,3}}"
    )
    assert ragged == ("all-to-all", 4096.0, 4, 1, "list")
    assert link_bus_bytes(ragged, 8) == (4096.0 * 3 / 4, False)
    send = text_link(
        "%s = (f32[1024]{0}, u32[], token[]) send(f32[1024]{0} %x, token[] %t), channel_id=1"
    )
    assert link_bus_bytes(send, 8) == (4096.0, False)
