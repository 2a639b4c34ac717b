"""The communication roofline: one point per collective, as nccl-tests plots a benchmark.

x = the message size S of one execution (bytes, as nccl-tests defines it:
costs/collective_bytes.py),
y = the achieved bus bandwidth = bus bytes / time (GB/s = bytes per ns), under the roof of each
device link (memory ids `interconnect` and `dcn*` of the device: GB/s per direction,
docs/device_peaks.md). Beside it, the exposed time of each collective: the time it ran with
no compute under it on its core (table/timeline.py; null where the timeline does not keep it).

A point is an op record (model/records/records.py) of the op-table keys that carry one `collective`
(table/collective_info.py): records are split by it, so an op that ran at several message
sizes is a point per size; its numbers are the record's (summed over its executions). The
exposed time is kept per op: an op at several sizes shares it by time (`exposed_shared`).

A point's roof is its group's (`group_roof`): the link figure × the links a group of its size
can use ÷ the device's links (devices/interconnect.LinkTopology), with the topology it assumes
in `link_assumption`.
"""

from __future__ import annotations

from tb_roofline.model.records.link_roofs import group_roof
from tb_roofline.model.records.roofline import scoped_op_records
from tb_roofline.table.collective_info import parse
from tb_roofline.table.timeline import MAX_EXPOSED_OPS

LINK_IDS = ("interconnect",)
# What a point says when no kernel name states the algorithm (the bus factor is then
# nccl-tests' own, which assumes a ring: costs/collective_bytes.py).
DEFAULT_ALGORITHM = "not stated: nccl-tests' bus factor"
NO_LATENCY = (
    "no data sheet or calibration in this profile gives a link latency: the "
    "latency-bound region is not drawn"
)


def links(device) -> list[dict]:
    """The device's link roofs (GB/s per direction), each with its name and source note."""
    return [
        {
            "id": m.id,
            "name": m.name,
            "gbs": m.gbs,
            "source": m.source,
            "note": m.note,
            "latency_us": None,
        }
        for m in device.memories
        if m.id in LINK_IDS or m.id.startswith("dcn")
    ]


def _exposed(a) -> tuple[dict, bool]:
    """(resolved op label -> exposed µs, whether an op not listed had none: nothing pruned)."""
    tl = a.facts.timeline if a.facts is not None else None
    if tl is None:
        return {}, False
    by_op = {k: v / 1e6 for k, v in tl.exposed_by_op.items()}
    return by_op, len(by_op) < MAX_EXPOSED_OPS


def _records(a, include_io: bool):
    """(record dict, parsed `collective`) of each op record of a collective: op records split
    by the op table's `collective` key, so an op that ran at several message sizes (PyTorch
    calls of one op name) is one point per size."""
    if a.scope is None or "op" not in a.scope.tables:
        return []
    rec = scoped_op_records(a, "Total", include_io, "op", split_by="collective")
    out = []
    for r, text in zip(rec.row_dicts(), rec.columns["collective"].tolist()):
        info = parse(text)
        if info is not None and r["record_type"] == "op":
            out.append((r, info))
    return out


def points(a, include_io: bool = True) -> list[dict]:
    """One point per collective op record and message size (see the module docstring)."""
    records = _records(a, include_io)
    if not records:
        return []
    exposed, complete = _exposed(a)
    roof = next((m for m in a.device.memories if m.id == "interconnect"), None)
    label_time: dict = {}
    for r, _ in records:
        label = (r["program_id"], r["operation"], r["precision"] or "")
        label_time[label] = label_time.get(label, 0.0) + (r["total_time_us"] or 0.0)
    out = []
    for r, info in records:
        time_us = r["total_time_us"] or 0.0
        bus = r["interconnect_bytes"] or 0.0
        execs = r["occurrences"] or 0
        bus_gbs = bus / (time_us * 1e3) if time_us > 0 else None
        algo_gbs = info["S"] * execs / (time_us * 1e3) if time_us > 0 and info["S"] else None
        label = (r["program_id"], r["operation"], r["precision"] or "")
        exp = exposed.get(label)
        # The timeline keeps exposed time per op: an op at several sizes shares it by time.
        shared = label_time[label] > time_us * (1 + 1e-9)
        if exp is not None and shared:
            exp = exp * time_us / label_time[label] if label_time[label] > 0 else None
        link_gbs, used, why = group_roof(roof, info["n"]) if roof else (None, None, None)
        out.append(
            {
                "program": r["program"],
                "program_id": r["program_id"],
                "operation": r["operation"],
                "category": r["category"],
                "kind": info["kind"],
                "message_bytes": info["S"],
                "group_size": info["n"] or None,
                "groups": info["groups"] or None,
                "group_form": info["form"] or None,
                "group_assumed": bool(info["assumed"]),
                "algorithm": info["algo"] or DEFAULT_ALGORITHM,
                "algorithm_stated": bool(info["algo"]),
                "bus_factor": bus / (info["S"] * execs) if info["S"] and execs else None,
                "occurrences": execs,
                "total_time_us": time_us,
                "bus_bytes": bus,
                "bus_bw_gbs": bus_gbs,
                "algo_bw_gbs": algo_gbs,
                "link": roof.name if roof else None,
                "link_id": roof.id if roof else None,
                "link_gbs": link_gbs,
                "link_count": used,
                "link_count_of": roof.topology.links if roof and roof.topology else None,
                "link_assumption": why,
                "link_fraction": bus_gbs / link_gbs if link_gbs and bus_gbs is not None else None,
                "exposed_us": exp if exp is not None else (0.0 if complete else None),
                "exposed_shared": shared,
                "bound_by": r["bound_by"],
                "caveat": r["caveat"],
            }
        )
    out.sort(key=lambda p: -(p["total_time_us"] or 0.0))
    return out


def comm_chart(a, include_io: bool = True) -> dict:
    """The chart's data: points, the link roofs, and what the latency region would need."""
    pts = points(a, include_io)
    return {
        "points": pts,
        "links": links(a.device),
        "latency_note": NO_LATENCY,
        "kinds": sorted({p["kind"] for p in pts}),
    }
