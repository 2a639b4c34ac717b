"""Run the XProf converter (PyPI `xprof`, test-only) on the same files, as the reference.

XProf writes cache files next to the XSpaces it reads, so it only ever sees copies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile

# Our column -> (XProf column id, scale applied to ours before comparing).
COLUMN_MAP = {
    "rank": ("rank", 1),
    "category": ("category", None),
    "operation": ("operation", None),
    "occurrences": ("occurrences", 1),
    "total_time_us": ("total_time", 1),
    "avg_time_us": ("avg_time", 1),
    "total_self_time_us": ("total_self_time", 1),
    "avg_self_time_us": ("avg_self_time", 1),
    "self_time_percent": ("total_self_time_percent", 0.01),
    "cumulative_self_time_percent": ("cumulative_total_self_time_percent", 0.01),
    "dma_stall_percent": ("dma_stall_percent", 0.01),
    "flop_rate": ("measured_flop_rate", 1),
    "model_flop_rate": ("model_flop_rate", 1),
    "memory_bw": ("measured_memory_bw", 1),
    "hbm_bw": ("hbm_bw", 1),
    "cmem_read_bw": ("cmem_read_bw", 1),
    "cmem_write_bw": ("cmem_write_bw", 1),
    "vmem_read_bw": ("vmem_read_bw", 1),
    "vmem_write_bw": ("vmem_write_bw", 1),
    "operational_intensity": ("operational_intensity", 1),
    "hbm_operational_intensity": ("hbm_operational_intensity", 1),
    "cmem_read_operational_intensity": ("cmem_read_operational_intensity", 1),
    "cmem_write_operational_intensity": ("cmem_write_operational_intensity", 1),
    "vmem_read_operational_intensity": ("vmem_read_operational_intensity", 1),
    "vmem_write_operational_intensity": ("vmem_write_operational_intensity", 1),
    "bottleneck_operational_intensity": ("bottleneck_operational_intensity", 1),
    "bound_by": ("bound_by", None),
    "total_time_per_core_us": ("total_time_per_core", 1),
    "time_fraction": ("total_time_in_percentage", 1),
    "optimal_flop_rate": ("optimal_flop_rate", 1),
    "roofline_efficiency": ("roofline_efficiency", 1),
    "compute_efficiency": ("compute_efficiency", 1),
    "max_mem_bw_utilization": ("max_mem_bw_utilization", 1),
}


def xprof_roofline(paths: list[str]) -> tuple[list[dict], dict, list[dict]]:
    """(rows as dicts keyed by XProf column id, table properties, diagnostics rows)."""
    from xprof.convert import raw_to_tool_data

    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for i, p in enumerate(paths):
            d = os.path.join(tmp, str(i))
            os.makedirs(d)
            copies.append(shutil.copy(p, d))
        data, _ = raw_to_tool_data.xspace_to_tool_data(
            copies, "roofline_model", {"use_saved_result": False}
        )
    tables = json.loads(data)
    main = tables[0]
    ids = [c["id"] for c in main["cols"]]
    rows = [dict(zip(ids, [c.get("v") if c else None for c in r["c"]])) for r in main["rows"]]
    for r in rows:
        m = re.search(r">([^<]*)</div>", r.get("source_info") or "")
        r["source"] = m.group(1) if m else ""
    diag_ids = [c["id"] for c in tables[1]["cols"]]
    diags = [dict(zip(diag_ids, [c.get("v") for c in r["c"]])) for r in tables[1]["rows"]]
    return rows, main.get("p", {}), diags
