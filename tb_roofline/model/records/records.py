"""Records: summed FLOPs, bytes and times in; rates, intensities, bound-by, each record's
binding roof, efficiencies, time saved and caveats out, as numpy columns in the API's order
(model/records/record_table.py).

Definitions follow XProf's Roofline Model tool (docs/xprof_differences.md, "Semantics we
share with XProf") so users see the numbers they
know, except where XProf is wrong (docs/xprof_differences.md). Every figure is either a
measurement under its true roof or carries a caveat saying why it is not (docs/http_api.md).
"""

from __future__ import annotations

import numpy as np

from tb_roofline.devices.precision import INTEGER_PRECISIONS, normalize_precision, plain_precision
from tb_roofline.devices.spec import DeviceInfo
from tb_roofline.model.records.link_roofs import link_share
from tb_roofline.model.records.record_table import (
    GBS_MEM_IDS,
    MEM_BYTES,
    MEM_IDS,
    RECORD_COLUMNS,
    RecordTable,
)
from tb_roofline.table.op_table import ASYNC_START, ASYNC_WAIT, HOST_TRANSFER, MEMORY_COLUMNS
from tb_roofline.table.timeline import is_collective

GIB = 1.073741824  # GB per GiB: XProf's GiB/s = (bytes / ns) / 1.073741824
ABOVE_ROOF = 1.001  # an efficiency above this is not a measurement under its roof
NO_COST, ABOVE_ROOF_CAVEAT = "no_cost", "above_roof"
CONTAINER_CAVEAT = "container"
ASYNC_CAVEATS = (ASYNC_START, ASYNC_WAIT)
BOUND_ASYNC = "Async"
COMPUTE_ROOF = "compute"  # the binding roof id of compute-bound records

_BYTE_COLUMNS = (
    ("bytes",)
    + MEM_BYTES
    + ("memory_bw",)
    + tuple(f"{m}_bw" for m in MEM_IDS)
    + ("operational_intensity",)
    + tuple(f"{m}_operational_intensity" for m in MEM_IDS)
    + ("bottleneck_operational_intensity", "max_mem_bw_utilization")
)
_RATE_COLUMNS = (
    "total_time_us",
    "avg_time_us",
    "total_time_per_core_us",
    "flop_rate",
    "model_flop_rate",
    "optimal_flop_rate",
    "roofline_efficiency",
    "compute_efficiency",
    "potential_time_saved_us",
    "time_fraction",
)
_EFFICIENCY_COLUMNS = (
    "roofline_efficiency",
    "compute_efficiency",
    "optimal_flop_rate",
    "max_mem_bw_utilization",
)
# What is unknown when a record's FLOPs are (no op time with known FLOPs), when its bytes are,
# and when neither places it; and the rates an async half has none of (it issues or waits).
_FLOP_COLUMNS = (
    "flops",
    "model_flops",
    "flop_rate",
    "model_flop_rate",
    "operational_intensity",
    "compute_efficiency",
) + tuple(f"{m}_operational_intensity" for m in MEM_IDS)
_PLACE_COLUMNS = (
    "roofline_efficiency",
    "optimal_flop_rate",
    "bottleneck_operational_intensity",
    "roof_time_us",
)
_ASYNC_RATE_COLUMNS = ("flop_rate", "model_flop_rate", "memory_bw") + tuple(
    f"{m}_bw" for m in MEM_IDS
)


def resources(device: DeviceInfo):
    """(name, memory column, peak GB/s) for each memory that takes part in bound-by.

    Order matters: ties keep the earlier one, as in XProf (Compute first, then HBM, CMEM, VMEM;
    the host link last, and only where its speed is known).
    """
    out = []
    for col, name, mid, _ in MEMORY_COLUMNS:
        if mid.startswith("cmem") and not device.has_cmem:
            continue
        if mid.startswith("vmem") and not device.has_merged_vmem:
            continue
        peak = device.memory(mid)
        if mid == "hbm" or (peak is not None and peak.gbs > 0):
            out.append(
                (peak.name if mid == "host" and peak else name, col, peak.gbs if peak else 0.0)
            )
    return out


def binding_roof_ids(bound_by, device: DeviceInfo) -> np.ndarray:
    """THE roof each record is bound by, as an id: "compute", the memory's id in the device's
    `memories` ("hbm", "vmem_read", "host", "interconnect", ...), or None where nothing binds
    it (Unknown, Async). `bound_by` holds the names `resources` gave `derive`, so the match is
    exact (clients never match names)."""
    ids = {name: col[: -len("_bytes")] for name, col, _ in resources(device)}
    ids["Compute"] = COMPUTE_ROOF
    lookup = {b: ids.get(b) for b in set(np.asarray(bound_by, dtype=object).tolist())}
    out = np.empty(len(bound_by), dtype=object)
    out[:] = [lookup[b] for b in np.asarray(bound_by, dtype=object).tolist()]
    return out


def bound_classes(bound_by, device: DeviceInfo) -> tuple[np.ndarray, np.ndarray]:
    """(compute-bound, memory-bound) masks of records, read off their binding roof
    (`binding_roof_ids`): compute-bound under the compute roof, memory-bound under any
    memory's (HBM, VMEM, the host link, the interconnect, ...); neither where nothing binds
    them (Unknown, Async)."""
    roof = binding_roof_ids(bound_by, device)
    compute = np.array([r == COMPUTE_ROOF for r in roof.tolist()], bool)
    memory = np.array([r is not None and r != COMPUTE_ROOF for r in roof.tolist()], bool)
    return compute, memory


def call_floors(flops, mem: dict, inv_peak, device: DeviceInfo, link=None, link_scale=None):
    """(floor ns, bound code) of ops whose calls share one shape: the time their FLOPs and
    bytes take at their roofs, max(F / P, B_m / BW_m over the memories of `resources`), and
    which of those binds it (0 compute, j the j-th memory of `resources` + 1, -1 nothing).
    Summed over distinct ops (per-call floors, Σ max(F_i/P, B_i/BW)), it is never below the
    floor of the summed FLOPs and bytes, which undercuts it when the calls differ in regime.
    `link`: collectives (per element), judged on the interconnect alone where they have link
    bytes and the device a link roof (as `derive`); `link_scale`: the share of the link figure
    each element's group can use (model/records/link_roofs.py `link_scales`; None: all of it)."""
    best = np.asarray(flops, np.float64) * inv_peak  # FLOPs / (GFLOP/s) = ns
    code = np.zeros(len(best), np.int64)
    link_time = None
    for j, (name, col, gbs) in enumerate(resources(device), start=1):
        if not gbs > 0:
            continue
        t = np.asarray(mem[col], np.float64) / gbs  # bytes / (GB/s) = ns
        if name == "Interconnect":
            if link_scale is not None:
                t = t / np.asarray(link_scale, np.float64)
            link_time = (t, j)
        more = t > best
        best = np.where(more, t, best)
        code[more] = j
    if link is not None and link_time is not None:
        on_link = np.asarray(link, bool) & (link_time[0] > 0)
        best = np.where(on_link, link_time[0], best)
        code[on_link] = link_time[1]
    code[~(best > 0)] = -1
    return best, code


def div(a, b):
    """a / b elementwise, 0 where b is 0."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = np.zeros(np.broadcast(a, b).shape)
    np.divide(a, b, out=out, where=b != 0)
    return out


def derive(
    sums: dict[str, np.ndarray], device: DeviceInfo, num_cores: int
) -> dict[str, np.ndarray]:
    """Rates, intensities, bound-by and efficiencies from summed FLOPs, bytes and times (ps).

    The compute roof of each record is `sums["peak"]` when given (op records: their precision's
    ceiling), else `sums["flops"] / sums["roof_time"]`: for a mix (a Program record) the rate at
    which the mix would run if each part ran on its own ceiling (FLOPs ÷ Σ FLOPs_p / peak_p).
    """
    time_ns = sums["total_time_ps"] / 1000.0
    out = {}
    out["flop_rate"] = div(sums["flops"], time_ns)
    out["model_flop_rate"] = div(sums["model_flops"], time_ns)
    out["memory_bw"] = div(sums["bytes"], time_ns) / GIB
    out["operational_intensity"] = div(sums["flops"], sums["bytes"])
    for col, _name, mid, _ in MEMORY_COLUMNS:
        out[f"{mid}_bw"] = div(sums[col], time_ns) / (1.0 if mid in GBS_MEM_IDS else GIB)
        out[f"{mid}_operational_intensity"] = div(sums["flops"], sums[col])

    n = len(time_ns)
    peak = sums.get("peak")
    if peak is None:  # the mixed roof of each record's FLOPs
        peak = mixed_roof(sums["flops"], sums["roof_time"], device)
    out["peak_flop_rate"] = peak
    compute_util = div(out["flop_rate"], peak)
    names = ["Compute"]
    utils = [compute_util]
    intensities = [out["operational_intensity"]]
    for name, col, peak_gbs in resources(device):
        mid = col[: -len("_bytes")]
        roof = np.full(n, peak_gbs)
        if name == "Interconnect":  # each record's group's links (model/records/link_roofs.py)
            roof = roof * link_share(sums[col], sums.get("link_roof_bytes", sums[col]))
            out["link_roof_gbs"] = np.where(sums[col] > 0, roof, np.nan)
        utils.append(div(div(sums[col], time_ns), roof))  # GB/s over GB/s
        names.append(name)
        intensities.append(out[f"{mid}_operational_intensity"])
    util = np.nan_to_num(np.vstack(utils), nan=0.0, posinf=0.0)  # resources × rows
    comm = sums.get("collective")
    if comm is not None and "Interconnect" in names:
        # Collectives with link bytes sit under the interconnect roof only (communication,
        # never a compute or HBM point).
        link = names.index("Interconnect")
        judged = comm & (util[link] > 0)
        if judged.any():
            others = np.arange(len(names)) != link
            util[np.ix_(others, judged)] = 0.0
    best = np.argmax(util, axis=0)  # first maximum: ties keep the earlier resource
    eff = util[best, np.arange(n)]
    out["roofline_efficiency"] = eff
    out["compute_efficiency"] = compute_util
    out["max_mem_bw_utilization"] = util[1:].max(axis=0) if len(utils) > 1 else np.zeros(n)
    bound = np.asarray(names, dtype=object)[best]
    bound[eff <= 0] = "Unknown"  # nothing measurable (no FLOPs, no bytes, or no peaks)
    out["bound_by"] = bound
    out["bottleneck_operational_intensity"] = np.vstack(intensities)[best, np.arange(n)]
    out["optimal_flop_rate"] = div(out["flop_rate"], eff)
    out["total_time_per_core_us"] = sums["total_time_ps"] / 1e6 / max(num_cores, 1)
    return out


def is_integer_precision(precision: str) -> bool:
    """Integer and boolean data (HLO s32 / u8 / pred, PyTorch int / long / bool): no
    floating-point roof applies to them. The one vocabulary (devices/precision.py) says which."""
    p = normalize_precision(precision)
    return p == "pred" or p in INTEGER_PRECISIONS


def compute_roof(device: DeviceInfo, precisions) -> np.ndarray:
    """THE compute roof (GFLOP/s) of work of each precision label: its own ceiling when the
    device has one, else the device's default ceiling; integer and boolean work only under an
    integer ceiling of its width (int8 for s8 / u8) when the device has one, else none (0); 0
    when no compute peak is known. One lookup per distinct label."""
    precisions = np.asarray(precisions, dtype=object)
    roofs = {}
    for p in set(precisions.tolist()):
        p = str(p)
        if is_integer_precision(p):
            wanted = normalize_precision(plain_precision(p))
            roofs[p] = next(
                (
                    c.gflops
                    for c in device.compute
                    if wanted and normalize_precision(c.precision) == wanted
                ),
                0.0,
            )
        else:
            roofs[p] = device.peak_for(p)
    return np.array([roofs[str(p)] for p in precisions.tolist()], dtype=float)


def mixed_roof(flops, roof_time, device: DeviceInfo) -> np.ndarray:
    """The compute roof of a mix of precisions (a Program record): the rate at which its FLOPs
    would run if each part ran on its own ceiling, FLOPs / sum(FLOPs_p / peak_p); a mix of one
    precision is exactly that ceiling."""
    peak = np.where(roof_time > 0, div(flops, roof_time), device.peak_gflops)
    for c in device.compute:
        peak = np.where(np.isclose(peak, c.gflops, rtol=1e-12, atol=0), c.gflops, peak)
    return peak


def build_records(
    sums: dict,
    device: DeviceInfo,
    num_cores: int,
    labels: dict,
    n: int,
    include_io: bool,
    frac_denominator_ps,
    caveats=None,
    containers=None,
) -> RecordTable:
    """Records from group sums. `labels`: a value per column (scalar or array of n);
    `caveats`: the reader's caveat per record ("" for none), op-level records only;
    `containers`: records that only hold other ops (no time of their own to save)."""
    precision = labels.get("roof_precision", labels.get("precision"))
    if isinstance(precision, np.ndarray) and "peak" not in sums:  # rows of one precision
        # each: exactly its ceiling (a caller that merged precisions gives their mixed roof)
        sums = dict(sums, peak=compute_roof(device, precision))
    category = labels.get("category")
    if isinstance(category, np.ndarray):
        kinds = {c: is_collective(str(c)) for c in set(category.tolist())}
        sums = dict(sums, collective=np.array([kinds[c] for c in category.tolist()], bool))
    d = derive(sums, device, num_cores)
    d.setdefault("link_roof_gbs", np.full(n, np.nan))
    if "link_assumption" not in labels:
        labels = dict(labels, link_assumption=None)
    occ = sums["occurrences"]
    cols = {}
    for key, value in labels.items():
        if isinstance(value, np.ndarray):
            cols[key] = value
        else:
            arr = np.empty(n, dtype=object)
            arr[:] = [value] * n
            cols[key] = arr
    cols["occurrences"] = occ.astype(np.int64)
    cols["total_time_us"] = sums["total_time_ps"] / 1e6
    cols["avg_time_us"] = div(cols["total_time_us"], occ)
    cols["total_self_time_us"] = sums["self_time_ps"] / 1e6
    cols["avg_self_time_us"] = div(cols["total_self_time_us"], occ)
    cols["dma_stall_percent"] = div(sums["dma_stall_ps"], sums["total_time_ps"]) * 100.0
    for c in ("flops", "model_flops", "bytes") + MEM_BYTES:
        cols[c] = sums[c]
    cols.update(d)
    cols["time_fraction"] = div(sums["total_time_ps"], frac_denominator_ps)
    op_time = sums["op_time_ps"]
    cols["flop_coverage"] = np.where(op_time > 0, div(sums["flops_known_ps"], op_time), np.nan)
    cols["bytes_coverage"] = np.where(op_time > 0, div(sums["bytes_known_ps"], op_time), np.nan)
    span = sums["async_span_ps"]
    cols["transfer_time_us"] = np.where(span > 0, span / 1e6, np.nan)
    cols["transfer_bw"] = np.where(
        (span > 0) & (sums["host_bytes"] > 0), div(sums["host_bytes"], span / 1000.0) / GIB, np.nan
    )
    cols["roof_time_us"] = sums["floor_time"] / 1e3
    cols.setdefault("mixed_regimes", np.zeros(n, bool))
    caveat = np.empty(n, dtype=object)
    caveat[:] = caveats if caveats is not None else ""
    _apply_caveats(cols, caveat, sums, device)
    _unknown_is_null(cols, sums)
    cols["potential_time_saved_us"] = potential_time_saved(
        cols,
        device,
        np.zeros(n, bool) if containers is None else containers,
        sums.get("collective"),
    )
    cols["include_infeed_outfeed"] = np.full(n, include_io)
    cols.setdefault("self_time_percent", np.zeros(n))
    cols.setdefault("cumulative_self_time_percent", np.zeros(n))
    return RecordTable({c: cols[c] for c in RECORD_COLUMNS})


def _apply_caveats(cols: dict, caveat: np.ndarray, sums: dict, device: DeviceInfo):
    """Say why a row is not a measurement under its roof: async halves (issue or wait time,
    not a transfer at a rate), rows with nothing known to place, rows above their roof (host
    transfers without a known link speed keep the reader's caveat)."""
    eff = cols["roofline_efficiency"]
    # A memory's utilisation is a measurement whether or not a compute peak is known (the roof
    # min(P, I x BW) is at most I x BW, so bytes/s above BW is above the roof either way); what
    # needs the compute peak (the roof itself, its efficiency, the optimal rate) is unknown.
    mem_util = np.asarray(cols["max_mem_bw_utilization"], dtype=float)
    if not device.peaks_known:
        for c in _EFFICIENCY_COLUMNS + ("peak_flop_rate", "roof_time_us"):
            if c != "max_mem_bw_utilization":
                cols[c] = np.full(len(eff), np.nan)
    is_async = np.isin(caveat, ASYNC_CAVEATS)
    if is_async.any():
        for c in _EFFICIENCY_COLUMNS + ("roof_time_us",):
            cols[c] = np.where(is_async, np.nan, cols[c])
        cols["bound_by"] = np.where(is_async, BOUND_ASYNC, cols["bound_by"]).astype(object)
    nothing = (
        ~is_async
        & (caveat == "")
        & (sums["flops"] <= 0)
        & (sums["bytes"] <= 0)
        & np.all([sums[c] <= 0 for c in MEM_BYTES], axis=0)
    )
    unknown = (
        ~is_async
        & (caveat == "")
        & (sums["flops_known_ps"] <= 0)
        & (sums["bytes_known_ps"] <= 0)
        & (sums["op_time_ps"] > 0)
    )
    caveat[nothing | unknown] = NO_COST
    # Above its roof: the summed point, or the calls' own floors, beyond the time it took.
    per_call = div(cols["roof_time_us"], cols["total_time_us"])
    above = (caveat == "") & (
        (np.nan_to_num(cols["roofline_efficiency"]) > ABOVE_ROOF)
        | (np.nan_to_num(mem_util) > ABOVE_ROOF)
        | (per_call > ABOVE_ROOF)
    )
    caveat[above] = ABOVE_ROOF_CAVEAT
    cols["caveat"] = caveat


def _unknown_is_null(cols: dict, sums: dict):
    """Unknown is NaN (null in every answer), never 0: FLOPs, FLOP rates, intensities and the
    compute efficiency of a record with op time but no known FLOPs; bytes, bandwidths,
    intensities and memory utilisation of one with no known bytes; the efficiency and the
    optimal rate of one that nothing places (a `no_cost` record, or both unknown); the rates of
    an async half (the issue or the wait of a transfer, no rate at all)."""
    op_time = sums["op_time_ps"]
    no_flops = (op_time > 0) & (sums["flops_known_ps"] <= 0)
    no_bytes = (op_time > 0) & (sums["bytes_known_ps"] <= 0)
    unplaced = (no_flops & no_bytes) | (cols["caveat"] == NO_COST)
    for mask, names in (
        (no_flops, _FLOP_COLUMNS),
        (no_bytes, _BYTE_COLUMNS),
        (unplaced, _PLACE_COLUMNS),
        (np.isin(cols["caveat"], ASYNC_CAVEATS), _ASYNC_RATE_COLUMNS),
    ):
        if mask.any():
            for c in names:
                cols[c] = np.where(mask, np.nan, np.asarray(cols[c], np.float64))
    if unplaced.any():
        cols["bound_by"] = np.where(unplaced, "Unknown", cols["bound_by"]).astype(object)


def measurements(caveat, roofline_efficiency, bound_by) -> np.ndarray:
    """THE rule for whether a record is a roofline measurement (the answers' `measurement`;
    time saved, the tab's point flags and left-out counts and the CLI report read it): True
    with no caveat; for a container (no figures of its own: its time is its children's, each
    judged on its own, so none of it is left out); for a host transfer judged under a known
    host-link roof (a `bound_by` other than Unknown) and not above it. False for async halves,
    peer transfers, `no_cost` and `above_roof` records, host transfers without a link speed.
    None on a missing side of a compared pair (no caveat column value and no bound-by)."""
    cav = np.asarray(caveat, dtype=object).tolist()
    bound = np.asarray(bound_by, dtype=object)
    eff = np.nan_to_num(np.asarray(roofline_efficiency, dtype=np.float64))
    plain = np.array([not c or c == CONTAINER_CAVEAT for c in cav], bool)
    host = np.array([c == HOST_TRANSFER for c in cav], bool)
    out = plain | (host & (eff <= ABOVE_ROOF) & (bound != "Unknown"))
    missing = np.array([b is None for b in bound.tolist()], bool)
    if not missing.any():
        return out
    values = out.astype(object)
    values[missing] = None
    return values


def potential_time_saved(
    cols: dict, device: DeviceInfo, containers: np.ndarray, collective=None
) -> np.ndarray:
    """THE time a record would save at its roof: its time less the time its calls would take on
    their roofs, t − Σ max(F_i/P, B_i/BW) (`roof_time_us`: per distinct op, whose calls share
    a shape, so calls in different regimes are not averaged into one floor), µs. Unknown (NaN)
    where nothing places it (no peaks, efficiency 0) or it is not a measurement under its roof
    (`measurements`; a collective only under the interconnect roof); 0 for containers (their
    children hold the time). Linear in the time and the floors (an Average record's is the
    Total's over the steps' share)."""
    eff = np.asarray(cols["roofline_efficiency"], dtype=float)
    saved = np.maximum(
        cols["total_time_us"] - np.nan_to_num(np.asarray(cols["roof_time_us"], dtype=float)), 0.0
    )
    saved[~(eff > 0)] = np.nan
    if not device.peaks_known:
        saved[:] = np.nan
    saved[~measurements(cols["caveat"], eff, cols["bound_by"]).astype(bool)] = np.nan
    if collective is None:
        collective = _collective(cols["category"].tolist())
    saved[np.asarray(collective, bool) & (cols["bound_by"] != "Interconnect")] = np.nan
    saved[np.asarray(containers, bool)] = 0.0
    return saved


def _collective(categories: list) -> np.ndarray:
    """`is_collective` of each record's category, judged once per distinct category (a run
    of 20,000 steps has 45,000 records and a dozen categories)."""
    judged = {c: is_collective(str(c)) for c in dict.fromkeys(categories)}
    return np.fromiter((judged[c] for c in categories), bool, len(categories))


def unknown_bytes(table: RecordTable, i: int, timed: bool):
    """Hardware-counter records: FLOPs only, so byte columns (and untimed rates) are unknown."""
    for c in _BYTE_COLUMNS + (() if timed else _RATE_COLUMNS):
        table.columns[c][i] = np.nan
    if not timed:
        table.columns["bound_by"][i] = "Unknown"
