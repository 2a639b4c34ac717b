"""Where a profile's steps and cores ran: one step on one core (`StepSpan`), a host's steps as
columns (`StepSpans`), and the profiled span of one core (`CoreSpan`). Readers make them; the
model aligns steps across hosts (model/records/steps.py) and takes the Program record's time from
the core spans.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class StepSpan:
    """One step on one core: where it starts and how long it lasts (ps)."""

    host: str
    core: int
    step: int
    start_ps: int
    duration_ps: int


class StepSpans:
    """The steps of one host as columns (core, step, start_ps, duration_ps): what the TPU
    reader gives, so a profile of many steps carries arrays rather than an object per step.
    Reads as a list of StepSpan (equal to one, iterable, indexable) for everything else."""

    def __init__(self, host: str, core, step, start_ps, duration_ps):
        self.host = host
        self.core, self.step, self.start_ps, self.duration_ps = (
            np.asarray(c, np.int64) for c in (core, step, start_ps, duration_ps)
        )

    def __len__(self) -> int:
        return len(self.step)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return StepSpans(
                self.host, self.core[i], self.step[i], self.start_ps[i], self.duration_ps[i]
            )
        return StepSpan(
            self.host,
            int(self.core[i]),
            int(self.step[i]),
            int(self.start_ps[i]),
            int(self.duration_ps[i]),
        )

    def __iter__(self):
        cols = (c.tolist() for c in (self.core, self.step, self.start_ps, self.duration_ps))
        return (StepSpan(self.host, *v) for v in zip(*cols))

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    def __repr__(self) -> str:
        return f"StepSpans({self.host!r}, {len(self)} steps)"

    @staticmethod
    def columns(steps) -> tuple:
        """(core, step, duration_ps) arrays of any list of steps."""
        if isinstance(steps, StepSpans):
            return steps.core, steps.step, steps.duration_ps
        return tuple(
            np.array([getattr(s, f) for s in steps], np.int64)
            for f in ("core", "step", "duration_ps")
        )


@dataclasses.dataclass
class CoreSpan:
    """The profiled span of one core (first to last op or step), for the Program record."""

    host: str
    core: int
    start_ps: int
    end_ps: int

    @property
    def duration_ps(self) -> int:
        return max(0, self.end_ps - self.start_ps)
