"""A TPU core's op events handed to the guidance's timeline summary (table/timeline.py).

What the summary needs of an event (its op's label, whether it is communication, fusible, a
container) depends only on its metadata id: `EventFacts` holds those facts once per set of op
metadata (cores of a program share it), and each event finds them by a dense lookup (a sorted
search when the ids are sparse), never through a per-event or per-core Python loop.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tb_roofline.table.timeline import is_communication, is_fusible
from tb_roofline.table.timeline_builder import TimelineBuilder


@dataclasses.dataclass
class EventFacts:
    labels: list  # distinct op labels (program id, operation, "")
    label: np.ndarray  # per known metadata id (in lookup order): index into labels
    comm: np.ndarray
    fusible: np.ndarray
    leaf: np.ndarray  # False for containers (busy, but no part in adjacency)
    slot: np.ndarray | None  # dense: metadata id -> position (-1: unknown; last slot: out of range)
    known: np.ndarray | None  # sparse: sorted metadata ids

    def positions(self, md: np.ndarray):
        """(positions of the known ids among `md`, mask of the events that have one)."""
        if self.slot is not None:
            last = len(self.slot) - 1
            idx = np.minimum(md, last)
            if len(md) and md.min() < 0:
                idx = np.where(md < 0, last, idx)
            pos = self.slot[idx]
            return pos, pos >= 0
        known = self.known
        assert known is not None, "event facts have slots or known ids"
        pos = np.minimum(np.searchsorted(known, md), len(known) - 1)
        return pos, known[pos] == md


def event_facts(entries) -> EventFacts | None:
    """entries: (metadata id, program id, operation, category, caveat, is container) per op."""
    kinds: dict = {}  # (category, caveat) -> (communication, fusible)
    index: dict = {}
    mids, label, comm, fusible, leaf = [], [], [], [], []
    for mid, program_id, operation, category, caveat, container in entries:
        kind = (category, caveat)
        if kind not in kinds:
            kinds[kind] = (is_communication(category, caveat), is_fusible(category))
        c, f = kinds[kind]
        mids.append(mid)
        label.append(index.setdefault((program_id, operation, ""), len(index)))
        comm.append(c)
        fusible.append(f)
        leaf.append(not container)
    if not mids:
        return None
    ids = np.array(mids, np.int64)
    cols = [
        np.array(label, np.int64),
        np.array(comm, bool),
        np.array(fusible, bool),
        np.array(leaf, bool),
    ]
    slot = known = None
    if 0 <= ids.min() and ids.max() < 4 * len(ids) + 4096:  # ids are small, usually
        slot = np.full(int(ids.max()) + 2, -1, np.int64)
        slot[ids] = np.arange(len(ids))
    else:
        order = np.argsort(ids, kind="stable")
        known, cols = ids[order], [c[order] for c in cols]
    label_of, comm_of, fusible_of, leaf_of = cols
    return EventFacts(list(index), label_of, comm_of, fusible_of, leaf_of, slot, known)


def add_core_events(
    builder: TimelineBuilder, core, span, core_steps, core_events, facts: EventFacts | None
):
    """One core's events: core_events = [(line index, md, begin ps, duration ps)], consumed:
    the list is emptied line by line, so each line's integer columns are freed as its float
    times and label ids (~26 bytes an event, what add_core keeps) are made."""
    if not core_events or facts is None:
        core_events.clear()
        return
    label_ids = builder.label_ids(facts.labels).astype(np.int32)
    with_leaf = not facts.leaf.all()
    parts = []  # (lane, label id, communication, fusible, leaf or None, begin, end) per line
    while core_events:
        line_index, md, begin, dur = core_events.pop(0)
        if not len(md):
            continue
        pos, hit = facts.positions(np.asarray(md, np.int64))
        del md
        if not hit.all():
            pos, begin, dur = pos[hit], begin[hit], dur[hit]
        del hit
        end = (begin + dur).astype(np.float64)  # the sum in integers: exact, as before
        del dur
        begin = begin.astype(np.float64)
        parts.append(
            (
                np.full(len(pos), line_index, np.int32),
                label_ids[facts.label[pos]],
                facts.comm[pos],
                facts.fusible[pos],
                facts.leaf[pos] if with_leaf else None,
                begin,
                end,
            )
        )
        del pos, begin, end
    if not parts:
        return
    if len(parts) == 1:
        cols = list(parts.pop())
    else:
        cols = [
            None if parts[0][i] is None else np.concatenate([p[i] for p in parts]) for i in range(7)
        ]
        parts.clear()
    lane, op, comm, fusible, leaf, begin, end = cols
    cols.clear()
    builder.add_core(core, span, core_steps, lane, begin, end, op, comm, fusible, leaf)
