"""Collectives of real JAX programs sharded over 8 CPU devices (testdata/jax_cpu_collectives):
every replica-group form XLA writes, read from the HLO protos in the profile and from the HLO
text, against bytes derived by hand from each capture's `module.hlo.txt`.

nccl-tests' bus bytes (costs/collective_bytes.py): all-reduce S·2(n-1)/n, all-gather (S = the
gathered result) and reduce-scatter (S = the input) and all-to-all S·(n-1)/n, collective-permute S.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.costs.hlo import replica_groups
from tb_roofline.costs.hlo.collectives import transfer
from tb_roofline.costs.hlo.module import HloIndex
from tb_roofline.protos import hlo_pb2
from tb_roofline.readers.xspace.hlo_shapes import link_bus_bytes, text_link
from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace
from tb_roofline.readers.xspace.xplane import load_xspace

REPO = os.path.dirname(TESTS)
DATA = os.path.join(REPO, "testdata", "jax_cpu_collectives")
F32 = 4

# case -> {instruction: (kind, group size, group count, form, message S, bus bytes)}, from the
# instruction's line in module.hlo.txt.
EXPECTED = {
    # %all-reduce.3 = (f32[1024,256], f32[256,1024], f32[]) all-reduce(...),
    #   replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}: one group of 8.
    "jit_dp_1d": {
        "all-reduce.3": (
            "all-reduce",
            8,
            1,
            "mesh",
            (2 * 1024 * 256 + 1) * F32,
            (2 * 1024 * 256 + 1) * F32 * 2 * 7 / 8,
        )
    },
    # %all-reduce.3 = (f32[1024,256], f32[256,1024], f32[]) all-reduce(...),
    #   replica_groups=mesh['axis_0'=4,'axis_1'=1,'axis_2'=2], device_ids=([2,4]T(1,0))
    #   {'axis_0'}: the batch's mesh axis of 4, so 2 groups of 4 (not all 8 devices)
    "jit_dp_2d": {
        "all-reduce.3": (
            "all-reduce",
            4,
            2,
            "mesh",
            (2 * 1024 * 256 + 1) * F32,
            (2 * 1024 * 256 + 1) * F32 * 2 * 3 / 4,
        )
    },
    "jit_2d": {
        # %all-reduce = f32[16,256] all-reduce(...), replica_groups={{0,1},{2,3},{4,5},{6,7}}
        "all-reduce": ("all-reduce", 2, 4, "list", 16 * 256 * F32, 16 * 256 * F32 * 2 / 2),
        # %all-reduce.4 = (f32[512,256], f32[256,512], f32[]) all-reduce(...),
        #   replica_groups=[2,4]<=[4,2]T(1,0): 2 groups of 4
        "all-reduce.4": (
            "all-reduce",
            4,
            2,
            "iota",
            (2 * 512 * 256 + 1) * F32,
            (2 * 512 * 256 + 1) * F32 * 2 * 3 / 4,
        ),
    },
    "shard_map_1d": {
        # every op on an f32[128,256] shard (131,072 B), groups {{0,...,7}}
        "psum_invariant.7": ("all-reduce", 8, 1, "list", 131072, 131072 * 2 * 7 / 8),
        # all-gather of the shard to f32[1024,256]: S = 8 × the shard
        "all_gather.3": ("all-gather", 8, 1, "list", 8 * 131072, 8 * 131072 * 7 / 8),
        # reduce-scatter of f32[1024,256] back to f32[128,256]: S = its input
        "reduce_scatter.7": ("reduce-scatter", 8, 1, "list", 8 * 131072, 8 * 131072 * 7 / 8),
        # ring shift: source_target_pairs={{0,1},...,{7,0}}: 8 pairs, S once
        "ppermute.3": ("collective-permute", 2, 8, "pairs", 131072, 131072),
        # all-to-all of 8 operands f32[16,256] (= the shard)
        "all-to-all": ("all-to-all", 8, 1, "list", 131072, 131072 * 7 / 8),
    },
    "shard_map_2d": {
        # shard f32[64,128] = 32,768 B on a 2 x 4 mesh ('x', 'y')
        # psum over 'x': replica_groups={{0,4},{1,5},{2,6},{3,7}}
        "psum_invariant.14": ("all-reduce", 2, 4, "list", 32768, 32768 * 2 / 2),
        # psum over ('x','y'): {{0,...,7}}
        "psum_invariant.15": ("all-reduce", 8, 1, "list", 32768, 32768 * 2 * 7 / 8),
        # all_gather over 'y': {{0,1,2,3},{4,5,6,7}}, to f32[256,128]
        "all_gather.3": ("all-gather", 4, 2, "list", 4 * 32768, 4 * 32768 * 3 / 4),
        # ppermute over 'y': 8 pairs
        "ppermute.3": ("collective-permute", 2, 8, "pairs", 32768, 32768),
    },
}
EXECUTIONS = 5  # one per profiled step
EVENTS_PER_EXECUTION = 8  # one per CPU device (each its own core)


def _xplane(case):
    return glob.glob(os.path.join(DATA, case, "plugins", "profile", "*", "*.xplane.pb"))[0]


def _module(case):
    index = HloIndex.from_space(load_xspace(_xplane(case)))
    (module,) = [m for m in index.modules() if m.name in ("jit_step", "jit_body")]
    return module


def _text_lines(case):
    """instruction name -> its line in the capture's HLO text."""
    out = {}
    for line in open(os.path.join(DATA, case, "module.hlo.txt")):
        line = line.strip().removeprefix("ROOT ")
        if line.startswith("%") and " = " in line:
            out[line[1 : line.index(" = ")]] = line
    return out


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_groups_and_bytes_from_the_hlo_protos(case):
    module = _module(case)
    for name, (kind, n, count, form, message, bus) in EXPECTED[case].items():
        t = transfer(module.by_name[name], devices=1)  # the HLO names its groups: 1 is unused
        assert (t.kind, t.group, t.groups, t.form, t.group_known) == (kind, n, count, form, True)
        assert t.message_bytes == message and t.bus_bytes == pytest.approx(bus, rel=1e-12)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_groups_and_bytes_from_the_hlo_text(case):
    """The text form of the same instructions (as TPU op names carry them) gives the same."""
    lines = _text_lines(case)
    for name, (_kind, n, count, form, _message, bus) in EXPECTED[case].items():
        g = replica_groups.from_text(lines[name])
        assert (g.size, g.count, g.form) == (n, count, form), lines[name]
        got, assumed = link_bus_bytes(text_link(lines[name]), 1)
        assert got == pytest.approx(bus, rel=1e-12) and not assumed


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_reader_fills_link_bytes_and_assumes_nothing(case):
    data = read_gpu_cpu_xspace(load_xspace(_xplane(case)), "vm")
    assert not [d for d in data.diagnostics if d.code == "collective_groups_assumed"]
    t = data.ops
    link = t["interconnect_bytes"]
    names = t["operation"]
    for name, (*_, bus) in EXPECTED[case].items():
        rows = names == name
        assert t["occurrences"][rows].sum() == EXECUTIONS * EVENTS_PER_EXECUTION
        assert link[rows].sum() == pytest.approx(EXECUTIONS * EVENTS_PER_EXECUTION * bus, rel=1e-12)
    assert link[~np.isin(names, list(EXPECTED[case]))].sum() == 0


def test_the_mesh_form_with_sub_axes_and_a_device_order():
    """mesh['a'=4,'b'=2] grouped over the sub-axis a:(2)2 and b: 2 × 2 devices a group, 2 groups;
    the proto (field 93) and the text agree."""
    text = (
        "%ar = f32[8]{0} all-reduce(f32[8]{0} %x), channel_id=1, "
        "replica_groups=mesh['a'=4,'b'=2], device_ids=[0,2,4,6,1,3,5,7] {'a':(2)2,'b'}, "
        "use_global_device_ids=true, to_apply=%add"
    )
    g = replica_groups.from_text(text)
    assert (g.size, g.count, g.form, g.axes) == (4, 2, "mesh", ("a", "b"))
    p = hlo_pb2.HloInstructionProto()
    mesh = p.mesh_axes_replica_group_list
    mesh.mesh.axes.add(name="a", size=4)
    mesh.mesh.axes.add(name="b", size=2)
    mesh.mesh.device_ids.extend([0, 2, 4, 6, 1, 3, 5, 7])
    mesh.axes.add(mesh_axis_index=0).sub_axis_info.CopyFrom(
        hlo_pb2.AxisRefProto.SubAxis(pre_size=2, size=2)
    )
    mesh.axes.add(mesh_axis_index=1)
    assert replica_groups.from_proto(p) == g
    assert link_bus_bytes(text_link(text), 64) == (32 * 2 * 3 / 4, False)


def test_async_pairs_and_empty_groups_from_the_text():
    start = (
        "%ags = (f32[128]{0}, f32[1024]{0}) all-gather-start(f32[128]{0} %x), "
        "replica_groups=[1,8]<=[8], dimensions={0}"
    )
    assert replica_groups.from_text(start) == replica_groups.Groups(8, 1, "iota")
    assert link_bus_bytes(text_link(start), 2) == (128 * 4 * 8 * 7 / 8, False)
    assert (
        text_link("%agd = f32[1024]{0} all-gather-done((f32[128]{0}, f32[1024]{0}) %ags)") is None
    )
    # `replica_groups={}`: every device, which the caller supplies (and says it assumed).
    empty = "%ar = f32[8]{0} all-reduce(f32[8]{0} %x), replica_groups={}, to_apply=%add"
    assert replica_groups.from_text(empty) is None
    assert link_bus_bytes(text_link(empty), 4) == (32 * 2 * 3 / 4, True)
