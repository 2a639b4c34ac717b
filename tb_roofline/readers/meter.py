"""What a conversion builds, told as it grows: memory follows the events, distinct names and
steps a reader keeps (and the op rows, step records and answers the model makes of them), not
the bytes of the file, so a 2 MB .gz of 200,000 steps or 465,000 distinct names is measured by
what it holds.

A reader calls `charge(estimate, what)` with its whole estimate so far (not an increment),
every batch. Past TB_ROOFLINE_MEMORY_BUDGET_MB it stops with a 413-style error naming the
budget and the setting (in any process: pool workers read the setting too). In the process
that admitted the conversion, the service also sets a hook (`admitted`) that grows the
conversion's share of the budget as the estimate grows, or stops it when the others in flight
hold the rest.

Costs (`EVENT_BYTES` ...) are measured peaks of the whole request (read, analysis, answer)
per unit, at TB_ROOFLINE_CACHE_DIR=off in a fresh process (docs/design.md, memory budget):
1,000,000 plain ops took 355 MB (355 B each), 465,000 distinct names 1.86 GB (4.0 KB each
beyond the event), 200,000 steps 918 MB (4.6 KB each beyond their two events).
"""

from __future__ import annotations

import contextlib
import threading

from tb_roofline import settings
from tb_roofline.errors import ProfileTooLargeError

EVENT_BYTES = 360
NAME_BYTES = 4096
STEP_BYTES = 4608
_local = threading.local()


def estimate(events: int, names: int, steps: int, name_chars: int = 0) -> int:
    """Peak memory of a request that converts and answers a profile of these counts."""
    return events * EVENT_BYTES + names * NAME_BYTES + steps * STEP_BYTES + name_chars


def budget_bytes() -> int:
    return settings.mb(settings.MEMORY_BUDGET_MB)


def over_budget(need: int, total: int, what: str) -> ProfileTooLargeError:
    return ProfileTooLargeError(
        f"would take about {need / 2**20:,.0f} MB to convert and answer ({what}), over the "
        f"memory budget of {total / 2**20:.0f} MB ({settings.MEMORY_BUDGET_MB.name})"
    )


def charge(need: int, what: str, key=None) -> None:
    """The conversion's whole estimate so far (`key`: the file it is of); raises
    ProfileTooLargeError (or what the hook raises) when it cannot be had."""
    hook = getattr(_local, "hook", None)
    if hook is not None:
        hook(need, what, key)  # the admitting service's budget (it may differ from the setting)
        return
    total = budget_bytes()
    if need > total:
        raise over_budget(need, total, what)


@contextlib.contextmanager
def admitted(hook):
    """Conversions in this thread report their estimates to `hook(need, what, key)`."""
    outer = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = outer
