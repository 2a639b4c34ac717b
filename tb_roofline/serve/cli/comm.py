"""`tb-roofline comm`: the communication roofline (`/comm`, model/records/comm.py) in the terminal.

    tb-roofline comm LOGDIR --run R --host H           # links, then one line per collective
    tb-roofline comm LOGDIR --format json -o comm.json # the HTTP answer, value for value
    tb-roofline comm LOGDIR --format csv -o comm.csv   # the tab's CSV columns

The JSON is the `/comm` answer itself (the service's encoded answer, indented); the CSV has
the columns of the tab's CSV export (static/comm_chart.js `COMM_COLUMNS`), every point, its
cells written as `serve/service/export.py` writes them (never a formula); the text lists the link
roofs and the points, longest first, as the answer orders them.
"""

from __future__ import annotations

import json
import sys

from tb_roofline.serve.cli.format import _fmt, _table
from tb_roofline.serve.service.export import to_csv

# The tab's CSV columns, in its order (static/comm_chart.js COMM_COLUMNS).
CSV_COLUMNS = [
    "program",
    "operation",
    "kind",
    "message_bytes",
    "group_size",
    "groups",
    "group_form",
    "group_assumed",
    "algorithm",
    "algorithm_stated",
    "bus_factor",
    "occurrences",
    "total_time_us",
    "bus_bytes",
    "bus_bw_gbs",
    "algo_bw_gbs",
    "link",
    "link_gbs",
    "link_count",
    "link_count_of",
    "link_assumption",
    "link_fraction",
    "exposed_us",
    "exposed_shared",
    "bound_by",
    "caveat",
]
TEXT_COLUMNS = [
    "operation",
    "kind",
    "message_bytes",
    "group_size",
    "occurrences",
    "total_time_us",
    "bus_bw_gbs",
    "algo_bw_gbs",
    "link_gbs",
    "link_fraction",
    "exposed_us",
    "algorithm",
]
FORMATS = ("text", "json", "csv")


def answer(service, run: str, args) -> dict:
    """The `/comm` answer as the HTTP route serves it (the service's plain answer, which the
    route encodes)."""
    return service.answer(
        "comm",
        run,
        args.host or "",
        capped=True,
        include_infeed_outfeed=not args.exclude_infeed_outfeed,
    )


def _csv_value(value):
    """JSON's spelling of a flag (true / false), as the tab's CSV writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _whole(value):
    """A byte count as a whole number (2097156, not 2.097e+06)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def to_text(a: dict) -> str:
    lines = [f"Communication roofline: run {a['run']}  host {a['host']}", ""]
    if a["links"]:
        for link in a["links"]:
            lines.append(
                f"Link roof {link['name']} ({link['id']}): {_fmt(link['gbs'])} GB/s "
                f"per direction ({link['source']})"
            )
    else:
        lines.append(
            "No link roof: the device has no interconnect peak (a device file "
            "gives one: docs/device_peaks.md)"
        )
    lines.append(f"({a['latency_note']})")
    points = a["points"]
    if not points:
        lines.append("\nNo collectives in this run.")
        return "\n".join(lines) + "\n"
    lines.append(
        f"\n{len(points)} collective point(s), kinds: {', '.join(a['kinds'])}; "
        "message size S in bytes, bandwidths in GB/s (bus = nccl-tests' bus "
        "bandwidth), link_gbs = the roof of the links the group can use, link_fraction = bus "
        "bandwidth / that roof:"
    )
    lines.append(_table(TEXT_COLUMNS, [[_whole(p[c]) for c in TEXT_COLUMNS] for p in points]))
    assumed = sorted({p["link_assumption"] for p in points if p.get("link_assumption")})
    if assumed:
        lines.append("\nLinks a group can use (topology assumed):")
        lines.extend(f"  {why}" for why in assumed)
    return "\n".join(lines) + "\n"


def render(a: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(a, indent=1, allow_nan=False) + "\n"
    if fmt == "csv":
        return to_csv(CSV_COLUMNS, [[_csv_value(p[c]) for c in CSV_COLUMNS] for p in a["points"]])
    return to_text(a)


def cmd_comm(service, args, out, pick_run, usage_error):
    run = pick_run(service, args.run)
    body = render(answer(service, run, args), args.format)
    if not args.output or args.output == "-":
        out.write(body)
        return
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(body)
    except OSError as exc:
        raise usage_error(f"cannot write {args.output}: {exc.strerror or exc}") from None
    sys.stderr.write(f"wrote {args.output}\n")


def add_comm_subparser(sub, common, pick_run, usage_error):
    """`comm` on the CLI's subparsers (`common`: the run, host and infeed options)."""
    p = sub.add_parser(
        "comm",
        help="the communication roofline: one point per collective",
        description="One point per collective at its message size and bus "
        "bandwidth, under the device's link roofs (as /comm)",
    )
    common(p)
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), json (the /comm answer) or csv (the tab's export)",
    )
    p.add_argument("-o", "--output", help="file to write ('-' = stdout, the default)")
    p.set_defaults(
        func=lambda service, args, out: cmd_comm(service, args, out, pick_run, usage_error)
    )
    return p
