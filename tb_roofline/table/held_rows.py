"""The rows of an op table kept where the table was read (a Dask worker that converted the
host: execute/cluster_held.py), and what stands for them here.

A client that analyses a pod needs, of each host's rows, their sums per key (carried with the
table: table/key_sums.py), which keys have rows, the self time of rows on devices that ran no
program (table/unspanned.py) and the per-step sums, which the workers add where the rows are
(`RowHolder.fold`). Only drill-downs (one step's op records, a comparison, the shapes
grouping) need the rows themselves: `HeldRows` fetches them from their holder on first use and
keeps them. A table whose `rows` is a `HeldRows` is otherwise an ordinary `OpTable`: its length
is its row count, its keys, unit costs and key sums are here.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Callable, Protocol, TypeGuard

import numpy as np

from tb_roofline.errors import RowsUnavailableError


class RowHolder(Protocol):
    """Where a host's profile is kept whole (its rows included)."""

    def fetch(self):
        """The host's whole profile (`ProfileData`), brought here."""

    def fold(self, holders: list, step: Callable, start):
        """`step(value, k, profile_k)` over the profiles of `holders` (this one among them)
        in order, each call where profile k is kept, `start` the first value: the last
        value, here."""


_fetched = [0]  # rows fetched in this process so far (`fetch_count`)
_fetched_lock = threading.Lock()  # (each HeldRows holds only its own lock while it fetches)


def fetch_count() -> int:
    """How many times rows kept elsewhere were fetched and kept here: a cache holding tables
    whose rows may have been fetched measures them again when this changes."""
    return _fetched[0]


class HeldRows(Mapping):
    """The row columns of a table kept elsewhere: `num_rows`, which keys have rows
    (`key_rows`), values made from the rows where they are (`derived`, by name), and the rows
    fetched from `holder` (its profile's table `attr`) the first time a column is asked for.
    `fetch`, when given, makes the rows instead (a run's rows from its hosts')."""

    def __init__(
        self,
        num_rows: int,
        key_rows: np.ndarray,
        attr: str,
        derived: dict | None = None,
        fetch: Callable[[], dict] | None = None,
        parts: list | None = None,
    ):
        self.num_rows = int(num_rows)
        self.key_rows = key_rows
        self.attr = attr
        self.derived = derived or {}
        self.holder: RowHolder | None = None
        self._fetch = fetch
        self.parts = parts or []  # the HeldRows a run's rows are made from (`fetch`)
        self._rows: dict | None = None
        self._lost = False
        self._lock = threading.Lock()  # (two requests asking at once fetch once)

    @property
    def lost(self) -> bool:
        """Whether fetching these rows (or those they are made from) failed: whoever holds
        this table reads its host again."""
        return self._lost or any(p.lost for p in self.parts)

    def mark_lost(self) -> None:
        self._lost = True

    @property
    def fetched(self) -> bool:
        return self._rows is not None

    def rows(self) -> dict:
        """The row columns, fetched once and kept."""
        if self._rows is None:
            with self._lock:
                if self._rows is None:
                    self._rows = self.peek()
                    with _fetched_lock:
                        _fetched[0] += 1
        return self._rows

    def peek(self) -> dict:
        """The row columns: the kept ones, else fetched now and not kept (a run's rows made
        from its hosts' keep one copy, the run's)."""
        if self._rows is not None:
            return self._rows
        if self._fetch is not None:
            return self._fetch()
        if self.holder is None:
            self._lost = True
            raise RowsUnavailableError(
                f"the rows of this {self.attr} table are kept where it was read, "
                "and nothing here can fetch them"
            )
        try:
            table = getattr(self.holder.fetch(), self.attr)
        except RowsUnavailableError:
            self._lost = True
            raise
        rows = dict(table.rows)
        if len(rows.get("op", ())) != self.num_rows:
            self._lost = True
            raise RowsUnavailableError(
                f"the {self.attr} table fetched has {len(rows.get('op', ()))} rows, "
                f"{self.num_rows} were summarized"
            )
        return rows

    def __getitem__(self, name: str) -> np.ndarray:
        return self.rows()[name]

    def __iter__(self):
        return iter(self.rows())

    def __len__(self) -> int:
        return len(self.rows())

    def __contains__(self, name) -> bool:
        return name in self.rows()

    def __setitem__(self, name: str, column: np.ndarray) -> None:
        self.rows()[name] = column

    def held_here(self) -> tuple:
        """What this process holds of the rows (a cache charges these, never the holder,
        which is the cluster's client and futures)."""
        return (self.key_rows, self.derived, self._rows)

    def __getstate__(self):
        """Pickled as what was summarized: never the holder (a future of this process's
        client), its lock, nor fetched rows."""
        return {
            "num_rows": self.num_rows,
            "key_rows": self.key_rows,
            "attr": self.attr,
            "derived": self.derived,
        }

    def __setstate__(self, state):
        HeldRows.__init__(
            self, state["num_rows"], state["key_rows"], state["attr"], state["derived"]
        )


def lost(table) -> bool:
    """Whether an op table's rows were kept elsewhere and can no longer be fetched."""
    return table is not None and isinstance(table.rows, HeldRows) and table.rows.lost


def is_held(rows) -> TypeGuard[HeldRows]:
    """Whether a table's rows are kept elsewhere and not fetched here."""
    return isinstance(rows, HeldRows) and not rows.fetched
