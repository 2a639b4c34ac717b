"""What the client of a Dask cluster needs of a host whose rows stay on the worker that read it
(execute/cluster_held.py): each table's keys, unit costs and per-key row sums (table/key_sums.py,
made where the rows are) with its row count, and the host's device, steps, core spans and
diagnostics. Kilobytes, where the host's rows are megabytes: the key sums, the device and the
op records need no more, and the per-step sums are made on the workers
(model/records/row_sums.py `StepPass`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.table.key_sums import with_row_sums
from tb_roofline.table.op_table import OpTable, ProfileData


@dataclasses.dataclass
class KeyTable:
    """An op table without its rows: its keys, unit costs and rows summed per key."""

    keys: dict
    unit_costs: np.ndarray | None
    row_sums: dict
    num_rows: int

    @staticmethod
    def of(table: OpTable | None) -> KeyTable | None:
        if table is None:
            return None
        table = with_row_sums(table)
        assert table is not None and table.row_sums is not None
        return KeyTable(table.keys, table.unit_costs, table.row_sums, len(table))

    @property
    def num_keys(self) -> int:
        return len(self.keys["operation"])


@dataclasses.dataclass
class HostSummary:
    """A host's profile less its rows (`summarize`)."""

    device: object
    ops: KeyTable
    kernels: KeyTable | None
    hw_ops: KeyTable | None
    steps: object
    core_spans: list
    diagnostics: list


def summarize(p: ProfileData) -> HostSummary:
    """The host's profile less its rows, made where it was read."""
    ops = KeyTable.of(p.ops)
    assert ops is not None
    return HostSummary(
        p.device,
        ops,
        KeyTable.of(p.kernels),
        KeyTable.of(p.hw_ops),
        p.steps,
        p.core_spans,
        p.diagnostics,
    )
