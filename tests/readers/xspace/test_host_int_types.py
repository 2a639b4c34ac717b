"""A TPU host's integer row columns are made at the types `op_table.narrow_ints` gives them
(int32 where the values fit, int64 where not), with the values of the planes' rows: checked on
a real host, as read and with one core's step ids moved past int32."""

from __future__ import annotations

import glob
import os

import numpy as np
from testpaths import REPO

from tb_roofline.readers.xspace.tpu import file as tpu_file
from tb_roofline.table.op_table import is_constant

HOST = "testdata/demo/v6e_train/plugins/profile/*/*.xplane.pb"


def _planes():
    (path,) = glob.glob(os.path.join(REPO, HOST))
    plan = tpu_file.plan_file(path, "h")
    got = [tpu_file.convert_plane_at(path, s, e, c, plan.size) for c, s, e in plan.cores]
    return plan, got


def _expected(results, name: str) -> list:
    return [v for r in sorted(results, key=lambda r: r.core) for v in r.rows[name].tolist()]


def test_columns_are_made_narrow_where_they_fit():
    for shift in (0, 2**31):
        plan, results = _planes()
        # one core's step ids (a plane sends int32 where they fit, int64 beyond)
        results[-1].rows["step"] = results[-1].rows["step"].astype(np.int64) + shift
        want = {"step": _expected(results, "step"), "occurrences": _expected(results, "occ")}
        rows = tpu_file.merge_planes(plan, results).ops.rows
        assert rows["op"].dtype == np.int32 and rows["core"].dtype == np.int32
        assert rows["step"].dtype == (np.int64 if shift else np.int32)
        assert rows["step"].tolist() == want["step"]
        occ = rows["occurrences"]
        assert occ.tolist() == want["occurrences"]
        assert occ.dtype == (np.int64 if is_constant(occ) else np.int32)
        assert max(want["step"]) >= 2**31 if shift else max(want["step"]) < 2**31
