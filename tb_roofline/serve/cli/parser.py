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

from tb_roofline import settings
from tb_roofline.serve.cli.commands import UsageError, cmd_export, cmd_runs, pick_run
from tb_roofline.serve.cli.report import REPORTS_SCHEMA, cmd_report

# Heavy modules (the service, the model, numpy, TensorBoard's errors) are imported by the
# command that needs them, when it runs: `--help` and argument errors stay instant.


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
    _add_report(sub)
    _add_runs(sub)
    _add_export(sub)
    from tb_roofline.serve.cli.comm import add_comm_subparser  # (light: no model, no numpy)

    add_comm_subparser(sub, _common, pick_run, UsageError)
    _add_heavy_commands(sub, only)
    for p in sub.choices.values():  # every command: its conversions on a Dask cluster
        _add_cluster_args(p)
    return parser


def _common(p):
    """The arguments of every command over one logdir's runs."""
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
    p.add_argument(
        "--model-config",
        help="a serving model's Hugging Face config.json: its sliding-window layers clamp the "
        "attention counts (default: the nearest model_config.json)",
    )


def _add_report(sub):
    rep = sub.add_parser("report", help="device, program records and top ops (default)")
    _common(rep)
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
    rep.add_argument(
        "--engine-metrics",
        help="a vLLM/SGLang /metrics saved before and after profiling (--enable-mfu-metrics): "
        "its FLOPs and bytes beside the profile's (default: the nearest engine_metrics.prom)",
    )
    rep.add_argument("--model-flops-per-step", type=_per_step, help="model FLOPs of one step")
    rep.add_argument("--tokens-per-step", type=_per_step, help="tokens processed per step")
    rep.add_argument("--samples-per-step", type=_per_step, help="samples processed per step")
    rep.add_argument("--model-precision", help="precision the model FLOPs run in (bf16, ...)")
    rep.add_argument("--num-devices", type=_device_count, help="devices one step runs on")
    rep.set_defaults(func=cmd_report)


def _add_runs(sub):
    runs = sub.add_parser("runs", help="list runs and hosts")
    runs.add_argument("logdir")
    runs.add_argument("--json", action="store_true")
    runs.set_defaults(func=cmd_runs, no_progress=True)


def _add_export(sub):
    exp = sub.add_parser("export", help="CSV or JSON of program or op records, as the API serves")
    _common(exp)
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


def _add_heavy_commands(sub, only: str | None):
    """calibrate, diff, mcp, serve and html import numpy, the model, the SDK or the frontend:
    each only when it runs (or for `build_parser()` whole); otherwise a stand-in that lists
    it in --help."""
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


def _add_cluster_args(p):
    p.add_argument(
        "--scheduler",
        default=settings.text(settings.SCHEDULER) or None,
        help="convert on this Dask cluster (tcp://HOST:8786; default "
        "$TB_ROOFLINE_SCHEDULER; pip install 'tb-roofline[dask]')",
    )
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="accept an answer that leaves out hosts that cannot be read (damaged, "
        "too large, gone; with --scheduler also those neither a worker nor this process "
        "can read): each is still named on stderr, but the exit status is 0, not 3",
    )
