"""The communication roofline: one point per collective, as nccl-tests plots a benchmark.

x = the message size S of one execution (bytes, as nccl-tests defines it: hlo/collectives.py),
y = the achieved bus bandwidth = bus bytes / time (GB/s = bytes per ns), under the roof of each
device link (memory ids `interconnect` and `dcn*` of the device: GB/s per direction,
docs/device_peaks.md). Beside it, the exposed time of each collective: the time it ran with
no compute under it on its core (table/timeline.py; null where the timeline does not keep it).

A point is an op record (model/records.py) whose op-table keys carry a `collective`
(table/collective_info.py); its numbers are the record's (summed over its executions).
"""
from __future__ import annotations

from tb_roofline.table.collective_info import parse
from tb_roofline.table.timeline import MAX_EXPOSED_OPS

LINK_IDS = ("interconnect",)
# What a point says when no kernel name states the algorithm (the bus factor is then
# nccl-tests' own, which assumes a ring: hlo/collectives.py).
DEFAULT_ALGORITHM = "not stated: nccl-tests' bus factor"
NO_LATENCY = ("no data sheet or calibration in this profile gives a link latency: the "
              "latency-bound region is not drawn")


def links(device) -> list[dict]:
    """The device's link roofs (GB/s per direction), each with its name and source note."""
    return [{"id": m.id, "name": m.name, "gbs": m.gbs, "source": m.source, "note": m.note,
             "latency_us": None}
            for m in device.memories if m.id in LINK_IDS or m.id.startswith("dcn")]


def _collectives(a) -> dict:
    """(program id, operation) -> parsed `collective` of the op table's keys."""
    src = a.scope
    if src is None or "op" not in src.tables:
        return {}
    keys = src.tables["op"].keys
    out = {}
    for pid, op, text in zip(keys["program_id"].tolist(), keys["operation"].tolist(),
                             keys["collective"].tolist()):
        info = parse(text)
        if info is not None:
            out.setdefault((pid, op), info)
    return out


def _exposed(a) -> tuple[dict, bool]:
    """(resolved op label -> exposed µs, whether an op not listed had none: nothing pruned)."""
    tl = a.facts.timeline if a.facts is not None else None
    if tl is None:
        return {}, False
    by_op = {k: v / 1e6 for k, v in tl.exposed_by_op.items()}
    return by_op, len(by_op) < MAX_EXPOSED_OPS


def points(a, include_io: bool = True) -> list[dict]:
    """One point per collective op record (see the module docstring)."""
    info_of = _collectives(a)
    if not info_of:
        return []
    exposed, complete = _exposed(a)
    roof = next((m for m in links(a.device) if m["id"] == "interconnect"), None)
    out = []
    for r in a.ops[include_io].row_dicts():
        info = info_of.get((r["program_id"], r["operation"]))
        if info is None or r["record_type"] != "op":
            continue
        time_us = r["total_time_us"] or 0.0
        bus = r["interconnect_bytes"] or 0.0
        execs = r["occurrences"] or 0
        bus_gbs = bus / (time_us * 1e3) if time_us > 0 else None
        algo_gbs = info["S"] * execs / (time_us * 1e3) if time_us > 0 and info["S"] else None
        label = (r["program_id"], r["operation"], r["precision"] or "")
        exp = exposed.get(label)
        out.append({
            "program": r["program"], "program_id": r["program_id"],
            "operation": r["operation"], "category": r["category"], "kind": info["kind"],
            "message_bytes": info["S"], "group_size": info["n"] or None,
            "groups": info["groups"] or None, "group_form": info["form"] or None,
            "group_assumed": bool(info["assumed"]),
            "algorithm": info["algo"] or DEFAULT_ALGORITHM,
            "algorithm_stated": bool(info["algo"]),
            "bus_factor": bus / (info["S"] * execs) if info["S"] and execs else None,
            "occurrences": execs, "total_time_us": time_us, "bus_bytes": bus,
            "bus_bw_gbs": bus_gbs, "algo_bw_gbs": algo_gbs,
            "link": roof["name"] if roof else None, "link_gbs": roof["gbs"] if roof else None,
            "link_fraction": bus_gbs / roof["gbs"] if roof and bus_gbs is not None else None,
            "exposed_us": exp if exp is not None else (0.0 if complete else None),
            "bound_by": r["bound_by"], "caveat": r["caveat"],
        })
    out.sort(key=lambda p: -(p["total_time_us"] or 0.0))
    return out


def comm_chart(a, include_io: bool = True) -> dict:
    """The chart's data: points, the link roofs, and what the latency region would need."""
    pts = points(a, include_io)
    return {"points": pts, "links": links(a.device), "latency_note": NO_LATENCY,
            "kinds": sorted({p["kind"] for p in pts})}
