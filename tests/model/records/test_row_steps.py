"""Each row's aligned step (model/records/steps.py `row_steps`, and `step_coder`, which the
per-step sums apply a block of rows at a time), against a dictionary of the complete steps
built here: step ids close together and far apart (ranked first), one host and several,
two profiles of one host name (the last one's steps win), rows outside complete steps."""

from __future__ import annotations

import numpy as np
import pytest

from tb_roofline.model.records import steps


def _expected(ids, host_of_profile, key_host, op, row_step) -> list:
    member = {}
    for j, host in enumerate(host_of_profile.tolist()):
        for i, step in enumerate(ids[j].tolist()):
            member[(host, step)] = i  # a later profile of the same host replaces it
    return [member.get((key_host[o], s), -1) for o, s in zip(op.tolist(), row_step.tolist())]


# (ids 9 * 2**59 apart make a (host, step) key wider than 2**62: ranked first)
@pytest.mark.parametrize("spread", [1, 2**59])
@pytest.mark.parametrize("hosts", [(0,), (0, 1, 2), (0, 1, 1)])
def test_rows_find_their_aligned_step(spread, hosts):
    rng = np.random.default_rng(len(hosts) + (spread > 1))
    host_of_profile = np.array(hosts, np.int64)
    k = 4
    ids = np.array([sorted(rng.choice(9, k, replace=False)) for _ in hosts], np.int64) * spread
    key_host = rng.choice(sorted(set(hosts)), 6).astype(np.int64)
    n = 200
    op = rng.integers(0, len(key_host), n)
    row_step = rng.integers(0, 10, n).astype(np.int64) * spread
    aligned = steps.Steps(ids, np.ones(k))
    expected = _expected(ids, host_of_profile, key_host, op, row_step)
    assert -1 in expected and any(e >= 0 for e in expected)
    assert steps.row_steps(aligned, host_of_profile, key_host, op, row_step).tolist() == expected
    coder = steps.step_coder(aligned, host_of_profile, key_host, row_step)
    blocks = [coder(op[lo : lo + 7], row_step[lo : lo + 7]) for lo in range(0, n, 7)]
    assert np.concatenate(blocks).tolist() == expected
