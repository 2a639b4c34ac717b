"""`tb-roofline report`: the device, the program records, the top opportunities (the model's
ranking), the records that are not roofline measurements, the guidance and the diagnostics, as
text; or the whole report in one schema (`--format json`, serve/service/report.py).
"""

from __future__ import annotations

import json
import sys

from tb_roofline.serve.cli.commands import pick_run
from tb_roofline.serve.cli.format import _fmt, _table

PROGRAM_COLUMNS = [
    "step",
    "total_time_per_core_us",
    "flop_rate",
    "hbm_bw",
    "operational_intensity",
    "bound_by",
    "roofline_efficiency",
    "peak_flop_rate",
    "flop_coverage",
    "bytes_coverage",
]
OP_COLUMNS = [
    "rank",
    "operation",
    "precision",
    "category",
    "occurrences",
    "total_self_time_us",
    "flop_rate",
    "bottleneck_operational_intensity",
    "bound_by",
    "roofline_efficiency",
    "potential_time_saved_us",
    "source",
]
CAVEAT_COLUMNS = [
    "rank",
    "operation",
    "precision",
    "category",
    "total_self_time_us",
    "self_time_percent",
    "caveat",
]


def _workload_flags(args) -> dict:
    return {
        "model_flops_per_step": args.model_flops_per_step,
        "tokens_per_step": args.tokens_per_step,
        "samples_per_step": args.samples_per_step,
        "precision": args.model_precision,
        "num_devices": args.num_devices,
    }


REPORTS_SCHEMA = "tb-roofline-reports/1"


def cmd_report(service, args, out):
    run = pick_run(service, args.run)
    include = not args.exclude_infeed_outfeed
    if args.format == "json":
        _json_report(service, args, run, include, out)
        return
    _write_device(service, args, run, out)
    _write_program(service, args, run, include, out)
    guide = service.guidance(run, args.host, include, _workload_flags(args))
    out.write(_throughput_line(guide["throughput"]) + "\n")
    _write_engine_figures(guide.get("engine_figures"), out)
    ops = service.ops(run, args.host, include, view=args.view)
    op_rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
    what = "kernels" if args.view.startswith("kernel") else "ops"
    _write_top_ops(op_rows, what, args.top, out)
    _write_caveats(op_rows, what, args.top, out)
    _write_guidance(guide, out)
    diags = service.diagnostics(run, args.host)["diagnostics"]
    if diags:
        out.write("\nDiagnostics:\n")
        for d in diags:
            out.write(f"  [{d['severity']}] {d['message']}\n")


def _json_report(service, args, run: str, include: bool, out):
    """The whole report in one schema (`--format json`): one run, or every run."""
    names = [r["run"] for r in service.list_runs()["runs"]]
    picked = names if args.all_runs else [run]
    reports = []
    for name in picked:
        report = service.report(name, args.host, include, args.top, _workload_flags(args))
        # Which run this is, and the others it leaves out (a script must not mistake one
        # run's report for the logdir's).
        report["run_choice"] = {
            "picked_by": "--all-runs"
            if args.all_runs
            else "--run"
            if args.run
            else "newest (the default; --run picks another, --all-runs reports every one)",
            "other_runs": [n for n in names if n != name],
        }
        reports.append(report)
    whole = (
        reports[0]
        if not args.all_runs
        else {"schema": REPORTS_SCHEMA, "runs": picked, "reports": reports}
    )
    body = json.dumps(whole, indent=1, allow_nan=False) + "\n"
    if args.output and args.output != "-":
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(body)
        sys.stderr.write(f"wrote {args.output}\n")
    else:
        out.write(body)


def _write_device(service, args, run: str, out):
    dev = service.device(run, args.host)["device"]
    out.write(f"Run {run}  host {args.host or 'all hosts'}\n")
    others = len(service.list_runs()["runs"]) - 1
    if others > 0 and not args.run:
        out.write(
            f"({others} other run{'s' if others > 1 else ''} in this logdir: "
            f"`tb-roofline runs {args.logdir}` lists them, --run picks one)\n"
        )
    out.write("\n")
    out.write(
        f"Device: {dev['type']} ({dev['kind']}), {dev['num_cores']} {dev['unit']}(s) on "
        f"{dev['num_hosts']} host(s), megacore: {_fmt(dev['megacore'])}; peaks per "
        f"{dev['unit']}\n"
    )
    for c in dev["compute"]:
        out.write(
            f"  peak compute [{c['precision']}]: {_fmt(c['peak_gflops'])} GFLOP/s ({c['source']})\n"
        )
    chip = dev["per_chip"]
    if chip:
        figures = [f"{_fmt(c['peak_gflops'])} GFLOP/s [{c['precision']}]" for c in chip["compute"]]
        if chip["hbm_gbs"]:
            figures.append(f"HBM {_fmt(chip['hbm_gbs'])} GB/s")
        out.write(
            f"  per chip (megacore: {chip['tensor_cores']} TensorCores as one device; data "
            f"sheets quote these): {', '.join(figures)}\n"
        )
    for m in dev["memories"]:
        out.write(
            f"  peak {m['name']}: {_fmt(m['peak_gibs'])} GiB/s = {_fmt(m['peak_gbs'])} GB/s, "
            f"ridge {_fmt(m['ridge_point'])} FLOP/B ({m['source']})\n"
        )
    if not dev["peaks_known"]:
        out.write("  peaks unknown: efficiencies cannot be computed\n")


def _write_program(service, args, run: str, include: bool, out):
    prog = service.program(run, args.host, include)
    rows = [dict(zip(prog["columns"], r)) for r in prog["rows"]]
    for r in rows:  # a host's own Total says which host it is
        if r["record_type"] == "host":
            r["step"] = f"host {r['host']}"
    out.write(
        f"\nProgram records (infeed/outfeed {'included' if include else 'excluded'}; "
        "rates per core: GFLOP/s, GiB/s):\n"
    )
    out.write(_table(PROGRAM_COLUMNS, [[r[c] for c in PROGRAM_COLUMNS] for r in rows]) + "\n")


def _write_top_ops(op_rows: list, what: str, top: int, out):
    from tb_roofline.model.records import rankings

    measured = rankings.ranked_dicts(op_rows)  # the one ranking (model/records/rankings.py)
    out.write(
        f"\nTop opportunities: {min(top, len(measured))} of {len(op_rows)} {what} by "
        "potential time saved if on their roof (us over the whole profile):\n"
    )
    out.write(_table(OP_COLUMNS, [[r[c] for c in OP_COLUMNS] for r in measured[:top]]) + "\n")


def _write_caveats(op_rows: list, what: str, top: int, out):
    """The longest records that are not roofline measurements, in the answer's order: the
    model's, by self time (`rank`)."""
    caveated = [r for r in op_rows if r["measurement"] is False]  # records.measurements
    if not caveated:
        return
    share = sum(r["self_time_percent"] or 0 for r in caveated)
    kinds = sorted({r["caveat"] for r in caveated})
    out.write(
        f"\n{len(caveated)} {what} ({share:.1f}% of the self time) are not roofline "
        f"measurements ({', '.join(kinds)}; see docs/http_api.md#caveats); the "
        f"longest:\n"
    )
    out.write(
        _table(CAVEAT_COLUMNS, [[r[c] for c in CAVEAT_COLUMNS] for r in caveated[: min(top, 10)]])
        + "\n"
    )


def _throughput_line(t: dict) -> str:
    if not t["step_time_us"]:
        return f"\nThroughput: {t['note']}"
    parts = [f"{t['steps_per_second']:,.3f} steps/s ({t['step_time_us']:,.1f} us per step)"]
    if t["tokens_per_second"]:
        parts.append(f"{t['tokens_per_second']:,.0f} tokens/s")
    if t["samples_per_second"]:
        parts.append(f"{t['samples_per_second']:,.1f} samples/s")
    for key in ("mfu", "hfu"):
        if t[key] is not None:
            parts.append(f"{key.upper()} {t[key] * 100:.2f}%")
    peak = t["peak_gflops_per_device"]
    line = "\nThroughput: " + ", ".join(parts)
    if peak:
        line += f" (peak {peak:,.0f} GFLOP/s per device, {t['precision'] or 'default'})"
    return line + (f"\n  {t['note']}" if t["note"] else "")


def _figure(value, unit: str, scale: float) -> str:
    return "unknown" if value is None else f"{value / scale:,.2f} {unit}"


def _write_engine_figures(e: dict | None, out):
    """The engine's own FLOPs and bytes per step beside the profile's
    (model/serving/engine_figures.py), and what each counts."""
    if not e:
        return
    eng, mine, ratio = e["engine_per_step"], e["ours_per_step"], e["ratio"]
    out.write(
        f"\nEngine figures ({e['engine']['engine']}, {e['engine']['source']}), per step:\n"
        f"  engine  {_figure(eng['flops'], 'GFLOP', 1e9)}, {_figure(eng['bytes'], 'GB', 1e9)}\n"
        f"  profile {_figure(mine['flops'], 'GFLOP', 1e9)} (GEMMs and attention "
        f"{_figure(mine['model_flops'], 'GFLOP', 1e9)}), {_figure(mine['bytes'], 'GB', 1e9)}\n"
    )
    if ratio["flops"] is not None:
        out.write(
            f"  profile / engine: FLOPs {ratio['flops']:.3f} (GEMMs and attention "
            f"{_ratio(ratio['model_flops'])}), bytes {_ratio(ratio['bytes'])}\n"
        )
    for note in e["notes"]:
        out.write(f"  - {note}\n")


def _ratio(value) -> str:
    return "unknown" if value is None else f"{value:.3f}"


def _write_guidance(g: dict, out):
    """The Opportunities in the guidance's own unit (per step where steps exist, else over the
    profile), repeated findings under their group, each saving with the bound its rule proves."""
    out.write(
        "\nStep time by class: "
        + ", ".join(f"{c['label']} {c['percent'] or 0:.1f}%" for c in g["classes"])
        + "\n"
    )
    findings = g["findings"]
    unit = (g.get("unit") or {}).get("label") or "over the profile"
    per_unit = "time_saved_per_unit_us"
    total = g["total_percent_of_step"]
    total_us = g.get("total_time_saved_per_step_us") if unit == "per step" else None
    total_us = g["total_time_saved_us"] if total_us is None else total_us
    out.write(
        f"\nOpportunities ({len(findings)} findings; together up to {total_us:,.1f} us "
        f"{unit}, {total or 0:.1f}% of the time)"
    )
    out.write(f"\n  ({g['total_note']})\n" if g.get("total_note") else ":\n")
    grouped = {f: grp for grp in g.get("groups") or () for f in grp["findings"]}
    shown = set()
    for f in findings:
        grp = grouped.get(f["id"])
        if grp is not None and grp["id"] in shown:
            continue
        members = [f]
        if grp is not None:
            shown.add(grp["id"])
            members = [m for m in findings if grouped.get(m["id"]) is grp]
            out.write(f"  [{grp['rule']}] {grp['title']}\n")
        shared = len({m["suggestion"] for m in members}) == 1  # one text for the group
        for m in members:
            pad = "    " if grp is not None else "  "
            saved = m.get(per_unit, m["time_saved_us"])
            out.write(
                f"{pad}[{m['rule']}] {m['title']}: saves {saved:,.1f} us {unit}"
                f" ({m['percent_of_step'] or 0:.2f}%)\n"
            )
            if m.get("bound_formula"):
                out.write(f"{pad}    bound (over the profile): {m['bound_formula']}\n")
            if not shared:
                out.write(f"{pad}    {m['suggestion']}\n")
        if shared:
            out.write(f"      {members[0]['suggestion']}\n")
