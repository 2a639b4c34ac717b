"""The analysis of hosts whose rows are kept where they were read (table/host_summary.py): each
host's profile less its rows, pickled as a Dask worker sends it, with a holder that keeps the
whole profile. Every record (program and ops, both infeed/outfeed choices), the diagnostics,
the guidance and the op records of the average step and of single steps (the step sums and
`ScopePass` folded host by host) equal those of the whole profiles, and no row is fetched
but a serving trace's (its phases' per-step sums). The same through a real cluster:
tests/execute/test_dask_held.py."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle

import numpy as np
import pytest
from testpaths import TESTS

from tb_roofline.model.guidance.findings import guidance
from tb_roofline.model.records.roofline import analyze, scoped_op_records
from tb_roofline.readers import read_profile_file
from tb_roofline.readers.units import summed
from tb_roofline.synthetic import SynthConfig, write_tpu_session
from tb_roofline.table.held_rows import is_held
from tb_roofline.table.host_summary import attach, summarize

DATA = os.path.join(TESTS, "..", "testdata")


class KeptHere:
    """A holder keeping a host's whole profile in this process, counting the fetches (the
    cluster's is `execute/cluster_held.py` `Held`)."""

    fetches = 0

    def __init__(self, profile):
        self.profile = profile

    def fetch(self):
        KeptHere.fetches += 1
        return self.profile

    def fold(self, holders, step, start):
        value = start
        for k, h in enumerate(holders):
            value = step(value, k, h.profile)
        return value


def _summaries(profiles) -> list:
    return [attach(pickle.loads(pickle.dumps(summarize(p))), KeptHere(p)) for p in profiles]


def _answers(a) -> str:
    out = []
    for io in (True, False):
        for rec in (a.program[io], a.ops[io]):
            out.append([[str(v) for v in r] for r in rec.rows()])
    out.append([str(d) for d in a.diagnostics])
    labels = a.scope.step_labels if a.scope is not None else []
    for scope in ["Average"] + list(labels[:3]):
        for io in (True, False):
            out.append([[str(v) for v in r] for r in scoped_op_records(a, scope, io).rows()])
    out.append(dataclasses.asdict(guidance(a)))
    return json.dumps(out, default=str)


def _tpu_pod(tmp_path) -> list:
    cfgs = [
        SynthConfig(
            seed=31 + h,
            program_seed=31,
            hostname=f"h{h}",
            num_cores=1 + h % 2,
            num_steps=6,
            ops_per_step=70,
            distinct_ops=30,
        )
        for h in range(4)
    ]
    paths = write_tpu_session(str(tmp_path), "run", "2026_01_01_00_00_00", cfgs)
    return [summed(read_profile_file(p, "xplane", f"h{i}")) for i, p in enumerate(paths)]


def _files(run: str, fmt: str) -> list:
    ext = ".xplane.pb" if fmt == "xplane" else ".pt.trace.json.gz"
    root = os.path.join(DATA, run)
    found = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(ext)]
    return [summed(read_profile_file(p, fmt, f"h{i}")) for i, p in enumerate(sorted(found))]


@pytest.mark.parametrize(
    "run, fmt",
    [
        ("pod", "xplane"),
        ("demo/v4_pod", "xplane"),
        ("jax_cpu_collectives/psum_while", "xplane"),
        ("xla_gpu_h200/mlp_pm_sampling", "xplane"),
        ("kineto/h200_block_labels", "kineto"),
        ("kineto/a100_alexnet", "kineto"),
    ],
)
def test_the_analysis_from_summaries_is_the_whole_profiles(tmp_path, run, fmt):
    profiles = _tpu_pod(tmp_path) if run == "pod" else _files(run, fmt)
    assert profiles
    expected = _answers(analyze(profiles))
    held = _summaries(profiles)
    assert all(is_held(p.ops.rows) for p in held)
    KeptHere.fetches = 0
    assert _answers(analyze(held)) == expected
    assert KeptHere.fetches == 0
    assert all(is_held(p.ops.rows) for p in held)


def test_a_serving_trace_fetches_its_rows_once_and_answers_the_same():
    profiles = _files("kineto/b200_eager", "kineto")
    assert profiles[0].serving_steps
    expected = _answers(analyze(profiles))
    held = _summaries(profiles)
    KeptHere.fetches = 0
    assert _answers(analyze(held)) == expected
    assert KeptHere.fetches == 1 and not is_held(held[0].ops.rows)


def test_rows_asked_for_are_the_hosts_and_a_summary_travels_without_them(tmp_path):
    profiles = _tpu_pod(tmp_path)
    summary = summarize(profiles[1])
    assert len(pickle.dumps(summary)) < len(pickle.dumps(profiles[1]))
    assert len(summary.ops) == len(profiles[1].ops)
    held = attach(pickle.loads(pickle.dumps(summary)), KeptHere(profiles[1]))
    assert is_held(held.ops.rows) and held.ops.rows.holder is not None
    for k, v in profiles[1].ops.rows.items():
        assert np.array_equal(np.asarray(held.ops.rows[k]), np.asarray(v)), k


def test_hosts_with_and_without_unit_costs_answer_the_same(tmp_path):
    """A run mixing a table of unit costs with one of explicit costs: the run's cost sums
    are then made from its rows (fetched), as concatenating the whole tables makes them."""
    profiles = _tpu_pod(tmp_path)[:2]
    profiles[1] = dataclasses.replace(profiles[1], ops=summed_explicit(profiles[1].ops))
    expected = _answers(analyze(profiles))
    assert _answers(analyze(_summaries(profiles))) == expected


def summed_explicit(table):
    """The table with its costs in its rows (no unit costs), its row sums made anew."""
    from tb_roofline.table.key_sums import with_row_sums

    return with_row_sums(table.explicit())
