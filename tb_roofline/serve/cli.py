"""`tb-roofline`: the same numbers as the Roofline tab, without a browser.

    tb-roofline LOGDIR                      # device, program records, top ops by time saved
    tb-roofline report LOGDIR --run R --host H --top 30 --exclude-infeed-outfeed
    tb-roofline runs LOGDIR                 # list runs and hosts
    tb-roofline export LOGDIR --run R --level op --format csv -o ops.csv
    tb-roofline calibrate -o LOGDIR/roofline_device.json   # measure this machine's peaks
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

from tensorboard import errors as tb_errors

from tb_roofline.serve.service import RooflineService

COMMANDS = ("report", "runs", "export", "calibrate")


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e6 or abs(value) < 1e-3:
            return f"{value:.3e}"
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.1f}"
    return str(value)


def _table(headers: list[str], rows: list[list]) -> str:
    cells = [headers] + [[_fmt(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(row, widths))) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class _Progress:
    """Stderr progress for slow reads (only when it takes long enough to matter)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, host: str, done: int, total: int):
        if not self.enabled:
            return
        if time.monotonic() - self.start > 0.5 or self.shown:
            self.shown = True
            sys.stderr.write(f"\rreading {host}: {done}/{total} planes"
                             f" ({time.monotonic() - self.start:.1f} s)   ")
            sys.stderr.flush()

    def finish(self):
        if self.shown:
            sys.stderr.write("\n")


def _pick_run(service: RooflineService, run: str | None) -> str:
    runs = service.list_runs()["runs"]
    if not runs:
        raise tb_errors.NotFoundError(f"no profiles found under {service.logdir!r}")
    return run or runs[0]["run"]


PROGRAM_COLUMNS = ["step", "total_time_per_core_us", "flop_rate", "hbm_bw",
                   "operational_intensity", "bound_by", "roofline_efficiency",
                   "compute_efficiency", "max_mem_bw_utilization"]
OP_COLUMNS = ["rank", "operation", "category", "occurrences", "total_self_time_us", "flop_rate",
              "bottleneck_operational_intensity", "bound_by", "roofline_efficiency",
              "potential_time_saved_us", "source"]


def cmd_report(service, args, out):
    run = _pick_run(service, args.run)
    include = not args.exclude_infeed_outfeed
    dev = service.device(run, args.host)["device"]
    out.write(f"Run {run}  host {args.host or 'all hosts'}\n\n")
    out.write(f"Device: {dev['type']} ({dev['kind']}), {dev['num_cores']} core(s) on "
              f"{dev['num_hosts']} host(s), megacore: {_fmt(dev['megacore'])}\n")
    for c in dev["compute"]:
        out.write(f"  peak compute [{c['precision']}]: {_fmt(c['peak_gflops'])} GFLOP/s ({c['source']})\n")
    for m in dev["memories"]:
        out.write(f"  peak {m['name']}: {_fmt(m['peak_gibs'])} GiB/s = {_fmt(m['peak_gbs'])} GB/s, "
                  f"ridge {_fmt(m['ridge_point'])} FLOP/B ({m['source']})\n")
    if not dev["peaks_known"]:
        out.write("  peaks unknown: efficiencies cannot be computed\n")
    prog = service.program(run, args.host, include)
    rows = [dict(zip(prog["columns"], r)) for r in prog["rows"]]
    out.write(f"\nProgram records (infeed/outfeed {'included' if include else 'excluded'}; "
              "rates per core: GFLOP/s, GiB/s):\n")
    out.write(_table(PROGRAM_COLUMNS, [[r[c] for c in PROGRAM_COLUMNS] for r in rows]) + "\n")
    ops = service.ops(run, args.host, include)
    op_rows = [dict(zip(ops["columns"], r)) for r in ops["rows"]]
    op_rows.sort(key=lambda r: -(r["potential_time_saved_us"] or 0))
    out.write(f"\nTop {min(args.top, len(op_rows))} of {len(op_rows)} ops by potential time saved "
              "if on the roof (us):\n")
    out.write(_table(OP_COLUMNS, [[r[c] for c in OP_COLUMNS] for r in op_rows[: args.top]]) + "\n")
    diags = service.diagnostics(run, args.host)["diagnostics"]
    if diags:
        out.write("\nDiagnostics:\n")
        for d in diags:
            out.write(f"  [{d['severity']}] {d['message']}\n")


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
        run, args.host, not args.exclude_infeed_outfeed, level=args.level, fmt=args.format,
        categories=args.category or (), bound_by=args.bound_by or (), name=args.name or "")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-roofline", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("logdir", help="TensorBoard logdir (or one run's directory)")
        p.add_argument("--run", help="run name as `tb-roofline runs` lists it (default: newest)")
        p.add_argument("--host", default="", help="one host; default: all hosts aggregated")
        p.add_argument("--exclude-infeed-outfeed", action="store_true",
                       help="leave infeed/outfeed ops out, as the UI's toggle does")
        p.add_argument("--no-progress", action="store_true", help="no progress on stderr")
        p.add_argument("--device-file", help="peaks for this run from a device file "
                                             "(as `tb-roofline calibrate` writes)")

    rep = sub.add_parser("report", help="device, program records and top ops (default)")
    common(rep)
    rep.add_argument("--top", type=_non_negative_int, default=20, help="ops to list (default 20)")
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
    exp.add_argument("-o", "--output", help="file to write ('-' = stdout; default: API file name)")
    exp.set_defaults(func=cmd_export)

    from tb_roofline.devices.calibrate import add_calibrate_subparser
    add_calibrate_subparser(sub)
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
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    if getattr(args, "run_standalone", None):
        return args.run_standalone(args, out)
    if not os.path.isdir(args.logdir):
        sys.stderr.write(f"tb-roofline: {args.logdir!r} is not a directory\n")
        return 2
    progress = _Progress(enabled=not args.no_progress and sys.stderr.isatty())
    service = RooflineService(args.logdir, progress=progress,
                              device_file=getattr(args, "device_file", None))
    try:
        args.func(service, args, out)
    except tb_errors.PublicError as exc:
        progress.finish()
        sys.stderr.write(f"tb-roofline: {exc}\n")
        return 1
    except _UsageError as exc:
        progress.finish()
        sys.stderr.write(f"tb-roofline: {exc}\n")
        return 2
    progress.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
