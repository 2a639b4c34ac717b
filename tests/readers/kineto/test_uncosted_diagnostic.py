"""The diagnostic that names the ops still without a cost, by share of op
time, says why each has none (readers/kineto/device.py WHY_NO_COST), on the real traces."""

from __future__ import annotations

import os
import re

import pytest
from testpaths import TESTS

from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)


@pytest.fixture(scope="module")
def service():
    with pytest.MonkeyPatch.context() as mp:  # no disk cache, and nothing left for others
        mp.setenv("TB_ROOFLINE_CACHE_DIR", "off")
        yield RooflineService(os.path.join(REPO, "testdata"))


def uncosted(service, run):
    notes = [d for d in service.diagnostics(run, "")["diagnostics"] if d["code"] == "uncosted_ops"]
    assert len(notes) == 1, run
    return notes[0]["message"]


@pytest.mark.parametrize(
    "run,op,why",
    [
        ("kineto/a100_80gb_shapes", "CompiledFunctionBackward", "compiled"),
        ("kineto/a100_80gb_shapes", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "kernel"),
        ("kineto/a100_alexnet", "aten::conv2d", "no_shapes"),
        ("kineto/b200_eager", "vllm::moe_forward", "moe_no_weights"),
        ("kineto/b200_eager", "vllm::unified_attention_with_output", "no_step_sums"),
    ],
)
def test_each_uncosted_op_says_why(service, run, op, why):
    message = uncosted(service, run)
    match = re.search(re.escape(op) + r"[^;]* ([0-9.]+)% \((\w+)\)", message)
    assert match and match.group(2) == why, message
    assert f"{why}: " in message.split("Why: ", 1)[1]  # the reason spelled out once
    # Its share is the op table's: that op's rows without FLOPs over all ops' time.
    ops = service.ops(run, "")
    rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
    total = sum(r["total_time_us"] for r in rows)
    mine = sum(
        r["total_time_us"]
        for r in rows
        if r["operation"].startswith(op) and r["caveat"] == "no_cost"
    )
    assert float(match.group(1)) == pytest.approx(100 * mine / total, abs=0.051)


def test_a_fully_costed_run_has_no_such_note(service):
    notes = [d["code"] for d in service.diagnostics("kineto/mi250", "")["diagnostics"]]
    assert "uncosted_ops" not in notes


def test_bytes_only_ops_say_so():
    """A row whose cost source is `bytes` (FLOPs unknown: a fused optimizer step, a Triton
    kernel without kernel_flop) is told as such, from the row's cost source."""
    import numpy as np

    from tb_roofline.readers.kineto.device import uncosted_ops
    from tb_roofline.readers.kineto.grouped_rows import add_grouped
    from tb_roofline.table.op_table import OpTableBuilder

    builder = OpTableBuilder()
    names = np.array(["aten::_fused_adamw_", "my::custom_op"], dtype=object)
    add_grouped(
        builder,
        "h",
        np.zeros(2, np.int64),
        names,
        np.array(["elementwise", "other"], dtype=object),
        np.array(["f32", "f32"], dtype=object),
        np.array(["bytes", "none"], dtype=object),
        np.array([-1, -1]),
        np.array([3e6, 1e6]),
        np.zeros(2),
        np.array([100.0, 0.0]),
        np.ones(2, np.int64),
    )
    message = uncosted_ops(builder.build())[0].message
    assert "aten::_fused_adamw_ 75.0% (bytes)" in message
    assert "my::custom_op 25.0% (no_formula)" in message
