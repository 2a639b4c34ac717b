"""`tb-roofline`: the same numbers as the Roofline tab, without a browser.

    tb-roofline LOGDIR                      # device, program records, top ops by time saved
    tb-roofline report LOGDIR --run R --host H --top 30 --exclude-infeed-outfeed
    tb-roofline report LOGDIR --format json -o report.json   # everything, for scripts/agents
    tb-roofline report LOGDIR --model-flops-per-step 3.1e15 --tokens-per-step 65536  # MFU
    tb-roofline runs LOGDIR                 # list runs and hosts
    tb-roofline export LOGDIR --run R --level op --format csv -o ops.csv
    tb-roofline comm LOGDIR --run R --format json   # communication roofline (text, json, csv)
    tb-roofline calibrate -o LOGDIR/roofline_device.json   # measure this machine's peaks
    tb-roofline diff BASE CANDIDATE --fail-if-slower 5     # compare two runs; a CI gate
    tb-roofline mcp LOGDIR                  # MCP server for coding agents (stdio; --http)
    tb-roofline serve LOGDIR                # the Roofline tab without TensorBoard (:6007)
    tb-roofline html LOGDIR -o report.html  # one offline HTML file (charts, tables, data)
Exports are byte-for-byte what the HTTP API's `/export` serves. Profiles without peaks (CPU,
unknown GPUs) take them from --device-file, or from a roofline_device.json next to the profile
or in a parent folder up to the logdir, or from TB_ROOFLINE_DEVICE_FILE.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tb_roofline import settings, storage
from tb_roofline.serve.cli.format import NAME_WIDTH, _cell, _fmt, _table  # noqa: F401

# Heavy modules (the service, the model, numpy, TensorBoard's errors) are imported by the
# command that needs them, when it runs: `--help` and argument errors stay instant.

COMMANDS = ("report", "runs", "export", "comm", "calibrate", "diff", "mcp", "serve", "html")
LONG_LIVED = ("mcp", "serve")  # servers: their reader processes stay between requests


class _Progress:
    """Stderr progress for slow reads (only when it takes long enough to matter): on a
    terminal one line rewritten in place; elsewhere (a CI log, a Kubernetes Job) whole lines
    "reading: k of N hosts", the first after FIRST_S, then at most one per EVERY_S and the
    last when every host is read."""

    FIRST_S, EVERY_S = 2.0, 5.0

    def __init__(self, enabled: bool, tty: bool = True):
        self.enabled, self.tty = enabled, tty
        self.start = time.monotonic()
        self.shown = False
        self.last = 0.0

    def __call__(self, host: str, done: int, total: int, hosts_done=None, hosts_total=None):
        if not self.enabled:
            return
        now = time.monotonic()
        took = now - self.start
        hosts = f"{hosts_done} of {hosts_total} hosts" if hosts_total else ""
        if self.tty:
            if took > 0.5 or self.shown:
                self.shown = True
                sys.stderr.write(
                    f"\rreading {host}: {done}/{total} planes"
                    + (f", {hosts}" if hosts else "")
                    + f" ({took:.1f} s)   "
                )
                sys.stderr.flush()
            return
        if not hosts:
            return
        finished = hosts_done == hosts_total and done >= total
        if took < self.FIRST_S and not self.shown:
            return
        if finished or not self.shown or now - self.last >= self.EVERY_S:
            sys.stderr.write(f"tb-roofline: reading: {hosts} ({took:.1f} s)\n")
            sys.stderr.flush()
            self.shown, self.last = True, now

    def finish(self):
        if self.shown and self.tty:
            sys.stderr.write("\n")


def _pick_run(service, run: str | None) -> str:
    runs = service.list_runs()["runs"]
    if not runs:
        from tensorboard import errors as tb_errors

        raise tb_errors.NotFoundError(f"no profiles found under {service.logdir!r}")
    return run or runs[0]["run"]


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
    run = _pick_run(service, args.run)
    include = not args.exclude_infeed_outfeed
    if args.format == "json":
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
        return
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
        f"Device: {dev['type']} ({dev['kind']}), {dev['num_cores']} core(s) on "
        f"{dev['num_hosts']} host(s), megacore: {_fmt(dev['megacore'])}\n"
    )
    for c in dev["compute"]:
        out.write(
            f"  peak compute [{c['precision']}]: {_fmt(c['peak_gflops'])} GFLOP/s ({c['source']})\n"
        )
    for m in dev["memories"]:
        out.write(
            f"  peak {m['name']}: {_fmt(m['peak_gibs'])} GiB/s = {_fmt(m['peak_gbs'])} GB/s, "
            f"ridge {_fmt(m['ridge_point'])} FLOP/B ({m['source']})\n"
        )
    if not dev["peaks_known"]:
        out.write("  peaks unknown: efficiencies cannot be computed\n")
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
    guide = service.guidance(run, args.host, include, _workload_flags(args))
    out.write(_throughput_line(guide["throughput"]) + "\n")
    ops = service.ops(run, args.host, include, view=args.view)
    op_rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
    what = "kernels" if args.view.startswith("kernel") else "ops"
    from tb_roofline.model import rankings

    measured = rankings.ranked_dicts(op_rows)  # the one ranking (model/rankings.py)
    out.write(
        f"\nTop opportunities: {min(args.top, len(measured))} of {len(op_rows)} {what} by "
        "potential time saved if on their roof (us over the whole profile):\n"
    )
    out.write(_table(OP_COLUMNS, [[r[c] for c in OP_COLUMNS] for r in measured[: args.top]]) + "\n")
    caveated = [r for r in op_rows if r["measurement"] is False]  # records.measurements
    if caveated:
        share = sum(r["self_time_percent"] or 0 for r in caveated)
        kinds = sorted({r["caveat"] for r in caveated})
        out.write(
            f"\n{len(caveated)} {what} ({share:.1f}% of the self time) are not roofline "
            f"measurements ({', '.join(kinds)}; see docs/http_api.md#caveats); the "
            f"longest:\n"
        )
        caveated.sort(key=lambda r: -(r["total_self_time_us"] or 0))
        out.write(
            _table(
                CAVEAT_COLUMNS,
                [[r[c] for c in CAVEAT_COLUMNS] for r in caveated[: min(args.top, 10)]],
            )
            + "\n"
        )
    _write_guidance(guide, out)
    diags = service.diagnostics(run, args.host)["diagnostics"]
    if diags:
        out.write("\nDiagnostics:\n")
        for d in diags:
            out.write(f"  [{d['severity']}] {d['message']}\n")


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


def cmd_runs(service, args, out):
    runs = service.list_runs()["runs"]
    if args.json:
        out.write(json.dumps(runs, indent=1) + "\n")
        return
    if not runs:
        out.write(f"no profiles found under {service.logdir}\n")
    for r in runs:
        out.write(f"{r['run']}  [{r['format']}]  hosts: {', '.join(r['hosts'])}\n")


def cmd_export(service, args, out):
    run = _pick_run(service, args.run)
    body, _, filename = service.export(
        run,
        args.host,
        not args.exclude_infeed_outfeed,
        level=args.level,
        fmt=args.format,
        categories=args.category or (),
        bound_by=args.bound_by or (),
        name=args.name or "",
        view=args.view,
    )
    if args.output == "-":
        out.write(body)
    else:
        path = args.output or filename
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
        except OSError as exc:
            raise _UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        sys.stderr.write(f"wrote {path}\n")


USER_FILE_ERRORS = ("bad_device_file", "bad_workload_file")


class _UsageError(Exception):
    """A problem with the command line or the output path: one line, exit code 2."""


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _per_step(text: str) -> float:
    """A per-step figure, bounded as a workload file's are (serve/service/workload_file.py)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1e30:  # NaN, inf and 1e400 fail here
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a positive finite number (at most 1e30)"
        )
    return value


def _device_count(text: str) -> int:
    text = text.strip()
    if not text.isdigit() or len(text) > 9 or not 1 <= int(text) <= 1 << 24:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number from 1 to {1 << 24}")
    return int(text)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; `only`: the command about to run (the others' modules are
    not imported)."""
    parser = argparse.ArgumentParser(
        prog="tb-roofline",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 1)[1],
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument(
            "logdir",
            help="TensorBoard logdir (or one run's directory); a path or "
            "a URL such as s3://bucket/logs or gs://bucket/logs",
        )
        p.add_argument("--run", help="run name as `tb-roofline runs` lists it (default: newest)")
        p.add_argument("--host", default="", help="one host; default: all hosts aggregated")
        p.add_argument(
            "--exclude-infeed-outfeed",
            action="store_true",
            help="leave infeed/outfeed ops out, as the UI's toggle does",
        )
        p.add_argument("--no-progress", action="store_true", help="no progress on stderr")
        p.add_argument(
            "--device-file",
            help="peaks for this run from a device file (as `tb-roofline calibrate` writes)",
        )

    rep = sub.add_parser("report", help="device, program records and top ops (default)")
    common(rep)
    rep.add_argument("--top", type=_non_negative_int, default=20, help="ops to list (default 20)")
    rep.add_argument(
        "--view",
        default="op",
        help="op (default), or kernel / kernel_hw for PyTorch GPU traces (as the API's view=)",
    )
    rep.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="json: the whole report in one schema (docs/guidance.md)",
    )
    rep.add_argument("-o", "--output", help="file for --format json ('-' = stdout)")
    rep.add_argument(
        "--all-runs",
        action="store_true",
        help="with --format json: one report per run of the logdir "
        f"({REPORTS_SCHEMA}: runs, reports)",
    )
    rep.add_argument(
        "--workload-file",
        help="model FLOPs / tokens per step for MFU (default: the nearest roofline_workload.json)",
    )
    rep.add_argument("--model-flops-per-step", type=_per_step, help="model FLOPs of one step")
    rep.add_argument("--tokens-per-step", type=_per_step, help="tokens processed per step")
    rep.add_argument("--samples-per-step", type=_per_step, help="samples processed per step")
    rep.add_argument("--model-precision", help="precision the model FLOPs run in (bf16, ...)")
    rep.add_argument("--num-devices", type=_device_count, help="devices one step runs on")
    rep.set_defaults(func=cmd_report)

    runs = sub.add_parser("runs", help="list runs and hosts")
    runs.add_argument("logdir")
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(func=cmd_runs, no_progress=True)

    exp = sub.add_parser("export", help="CSV or JSON of program or op records, as the API serves")
    common(exp)
    exp.add_argument("--level", choices=("op", "program"), default="op")
    exp.add_argument("--format", choices=("csv", "json"), default="csv")
    exp.add_argument("--category", action="append", help="keep this category (repeatable)")
    exp.add_argument("--bound-by", action="append", help="keep this bound-by (repeatable)")
    exp.add_argument("--name", help="keep ops whose name contains this (case-insensitive)")
    exp.add_argument(
        "--view",
        default="op",
        help="op (default), or kernel / kernel_hw for PyTorch GPU traces (as the API's view=)",
    )
    exp.add_argument("-o", "--output", help="file to write ('-' = stdout; default: API file name)")
    exp.set_defaults(func=cmd_export)

    from tb_roofline.serve.cli.comm import add_comm_subparser  # (light: no model, no numpy)

    add_comm_subparser(sub, common, _pick_run, _UsageError)

    # calibrate and diff import numpy and the model: only when one of them runs (or for
    # `build_parser()` whole); otherwise a stand-in that lists them in --help.
    if only in (None, "calibrate"):
        from tb_roofline.devices.calibrate import add_calibrate_subparser

        add_calibrate_subparser(sub)
    else:
        sub.add_parser("calibrate", help="measure this machine's peaks, write a device file")
    if only in (None, "diff"):
        from tb_roofline.serve.cli.diff import add_diff_subparser

        add_diff_subparser(sub)
    else:
        sub.add_parser("diff", help="compare two runs (hosts, steps); gate regressions in CI")
    if only in (None, "mcp"):
        from tb_roofline.serve.mcp.server import add_mcp_subparser

        add_mcp_subparser(sub)
    else:
        sub.add_parser("mcp", help="serve the roofline answers to coding agents (MCP)")
    if only in (None, "serve"):
        from tb_roofline.serve.web.standalone import add_serve_subparser

        add_serve_subparser(sub)
    else:
        sub.add_parser("serve", help="the Roofline tab in a browser, without TensorBoard")
    if only in (None, "html"):
        from tb_roofline.serve.web.html_report import add_html_subparser

        add_html_subparser(sub)
    else:
        sub.add_parser("html", help="one self-contained HTML report (offline charts, tables)")
    for p in sub.choices.values():  # every command: its conversions on a Dask cluster
        p.add_argument(
            "--scheduler",
            default=settings.text(settings.SCHEDULER) or None,
            help="convert on this Dask cluster (tcp://HOST:8786; default "
            "$TB_ROOFLINE_SCHEDULER; pip install 'tb-roofline[dask]')",
        )
        p.add_argument(
            "--allow-partial",
            action="store_true",
            help="with --scheduler: skip hosts that neither a worker nor this "
            "process can read (each named in the diagnostics) instead of "
            "failing",
        )
    return parser


def main(argv=None, out=None) -> int:
    try:
        code = _main(argv, out)
        (out or sys.stdout).flush()
        return code
    except BrokenPipeError:  # `tb-roofline ... | head`: the reader has all it wanted
        try:  # no second error when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


def _main(argv=None, out=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        argv.insert(0, "report")  # `tb-roofline LOGDIR` means `report`
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else "").parse_args(argv)
    out = out or sys.stdout
    if not (args.scheduler or "").strip():  # local conversion: no cluster module (start-up)
        return _command(args, out)
    from tb_roofline.execute import cluster

    cluster.configure(
        args.scheduler, strict=True, allow_partial=getattr(args, "allow_partial", False)
    )
    try:
        addr = cluster.address()  # (stripped, as the environment variable is)
        if args.command not in ("runs", "calibrate"):
            cluster.usable_workers(cluster.get_client(addr), addr)
        return _command(args, out)
    except cluster.ClusterError as exc:  # no hang, no traceback: what is wrong, exit 2
        sys.stderr.write(f"tb-roofline: {exc}\n")
        return 2
    finally:
        cluster.configure(None)


def _command(args, out) -> int:
    """One command. Its reader processes leave as soon as a conversion is done (unless
    TB_ROOFLINE_POOL_IDLE_S says otherwise; not for the long-lived servers, mcp and serve): nothing
    would reuse them, and their memory would add to the model's (execute/pool.py). A
    default for this call alone: the environment, and other threads of a caller that runs
    commands in its own process, are left as they are."""
    if args.command in LONG_LIVED:
        return _run_command(args, out)
    return settings.run_with_defaults({settings.POOL_IDLE_S.name: "0"}, _run_command, args, out)


def _run_command(args, out) -> int:
    if getattr(args, "run_standalone", None):
        return args.run_standalone(args, out)
    try:
        is_dir = storage.isdir(args.logdir)
    except OSError as exc:  # remote storage unreachable, or its package not installed
        sys.stderr.write(f"tb-roofline: cannot read {args.logdir!r}: {exc.strerror or exc}\n")
        return 2
    if not is_dir:
        sys.stderr.write(f"tb-roofline: {args.logdir!r} is not a directory\n")
        return 2
    from tensorboard import errors as tb_errors

    from tb_roofline.serve.service.core import RooflineService

    progress = _Progress(enabled=not args.no_progress, tty=sys.stderr.isatty())
    service = RooflineService(
        args.logdir,
        progress=progress,
        device_file=getattr(args, "device_file", None),
        workload_file=getattr(args, "workload_file", None),
    )
    try:
        args.func(service, args, out)
    except tb_errors.PublicError as exc:
        progress.finish()
        sys.stderr.write(f"tb-roofline: {exc}\n")
        # A device or workload file is what the user gave, as the command line is.
        return 2 if getattr(exc, "code", "") in USER_FILE_ERRORS else 1
    except _UsageError as exc:
        progress.finish()
        sys.stderr.write(f"tb-roofline: {exc}\n")
        return 2
    except Exception:  # the cluster's error is told by the caller, after this line ends
        progress.finish()
        raise
    progress.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
