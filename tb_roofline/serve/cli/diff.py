"""`tb-roofline diff BASE [CANDIDATE]`: two runs on one roofline in the terminal, and a gate for
CI. Exit status: 0 within the thresholds, 1 on a regression (the report names the threshold and
the ops), 2 on bad input. The JSON output (`--format json`) is documented in docs/compare.md.

    tb-roofline diff runs/base runs/candidate --fail-if-slower 5
    tb-roofline diff LOGDIR --base-run train/2026_01_01 --run train/2026_01_02 --step Average
    tb-roofline diff LOGDIR --base-run R --run R --base-step 3 --step 4    # two steps of one run
Each side is a logdir, one run's directory (`.../plugins/profile/<session>`, or a directory of
PyTorch traces) or a logdir with `--base-run` / `--run` (default: its only run, else its newest).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import sys

from tensorboard import errors as tb_errors

from tb_roofline.serve.cli.format import _fmt, _table
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.service.discovery import KINETO_SUFFIXES, PROFILE_DIR, XPLANE_SUFFIX

SCHEMA = "tb-roofline.compare/1"
EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_PARTIAL = 0, 1, 2, 3


class BadInput(Exception):
    """Arguments that name no comparison (exit status 2)."""


def add_diff_subparser(sub):
    p = sub.add_parser(
        "diff",
        help="compare two runs (hosts, steps); gate regressions in CI",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 1)[1],
    )
    p.add_argument("base", help="base: a logdir or one run's directory")
    p.add_argument(
        "candidate",
        nargs="?",
        help="candidate: a logdir or one run's directory (default: the base's logdir)",
    )
    p.add_argument("--base-run", help="the base's run as `tb-roofline runs` lists it")
    p.add_argument("--run", help="the candidate's run")
    p.add_argument("--base-host", default="", help="one host of the base (default: all)")
    p.add_argument("--host", default="", help="one host of the candidate (default: all)")
    p.add_argument(
        "--base-step", help="the base's step: Total, Average or a step label (default: --step)"
    )
    p.add_argument("--step", help="the candidate's step (default: --base-step, else Total)")
    p.add_argument("--level", choices=("op", "program"), default="op")
    p.add_argument("--view", default="op", help="op (default), kernel or kernel_hw (PyTorch)")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--top", type=int, help="ops to list (default: 20 in a table, all in JSON/CSV)")
    p.add_argument("--exclude-infeed-outfeed", action="store_true")
    p.add_argument(
        "--fail-if-slower",
        type=float,
        metavar="PCT",
        help="exit 1 when the program time per step (Total without steps) grew by "
        "more than PCT percent",
    )
    p.add_argument(
        "--fail-if-op-slower",
        type=float,
        metavar="PCT",
        help="exit 1 when a matched op's self time per core grew by more than PCT percent",
    )
    p.add_argument(
        "--min-op-time-us",
        type=float,
        default=0.0,
        metavar="US",
        help="--fail-if-op-slower ignores ops under US µs per core on both sides (default 0)",
    )
    p.add_argument("--device-file", help="peaks for both sides (as `tb-roofline calibrate` writes)")
    p.add_argument("--base-device-file", help="peaks for the base only")
    p.add_argument("-o", "--output", help="write the report to this file")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write the comparison as one self-contained HTML report (a CI artifact)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(run_standalone=run_diff)


def run_diff(args, out) -> int:
    try:
        _check_flags(args)
        cmp, base_info, cand_info, sides = _compare(args)
        refused = _coverage(sides, getattr(args, "allow_partial", False))
    except (BadInput, tb_errors.PublicError) as exc:
        sys.stderr.write(f"tb-roofline diff: {exc}\n")
        return EXIT_BAD_INPUT
    if refused:
        return EXIT_PARTIAL
    gate = evaluate_gate(cmp, args.fail_if_slower, args.fail_if_op_slower, args.min_op_time_us)
    if args.html and not _write_html(args, sides):
        return EXIT_BAD_INPUT
    report = {"json": _json_report, "csv": _csv_report, "table": _table_report}[args.format](
        cmp, base_info, cand_info, gate, args
    )
    _emit(report, args, out)
    if not gate["passed"] and args.format != "table":  # the table says it in its last lines
        for line in gate["messages"]:
            sys.stderr.write(f"tb-roofline diff: {line}\n")
    return EXIT_OK if gate["passed"] else EXIT_REGRESSION


def _check_flags(args) -> None:
    if args.top is not None and args.top < 0:
        raise BadInput("--top must not be negative")
    for flag in ("fail_if_slower", "fail_if_op_slower", "min_op_time_us"):
        value = getattr(args, flag)
        if value is not None and value < 0:
            raise BadInput(f"--{flag.replace('_', '-')} must not be negative")


def _compare(args):
    """The comparison of the two sides, with each side's service and run; one service when both
    sides are the same logdir under the same device file (its caches serve both)."""
    cand_path = args.candidate or args.base
    device_file = args.device_file
    base_svc, base_run = _side(args.base, args.base_run, args.base_device_file or device_file)
    if (
        os.path.realpath(cand_path) == os.path.realpath(args.base)
        and (args.base_device_file or device_file) == device_file
    ):
        cand_svc, cand_run = base_svc, _pick(base_svc, args.run, cand_path, _run_dir(cand_path))
    else:
        cand_svc, cand_run = _side(cand_path, args.run, device_file)
    cmp, base_info, cand_info = cand_svc.comparison(
        base_run,
        cand_run,
        args.base_host,
        args.host,
        args.base_step,
        args.step,
        not args.exclude_infeed_outfeed,
        args.view,
        base_service=base_svc,
    )
    sides = (
        _Side(base_svc, base_run, args.base_host, "base"),
        _Side(cand_svc, cand_run, args.host, "candidate"),
    )
    return cmp, base_info, cand_info, sides


def _write_html(args, sides) -> bool:
    """The one-file HTML diff report at `--html`; False (the reason on stderr) when it cannot
    be made."""
    from tb_roofline.serve.web import html_report

    base, cand = sides
    try:
        html_report.write(
            args.html,
            html_report.diff_report(
                base.service,
                base.run,
                cand.service,
                cand.run,
                args.base_host,
                args.host,
                args.base_step,
                args.step,
            ),
        )
    except html_report.ReportError as exc:
        sys.stderr.write(f"tb-roofline diff: {exc}\n")
        return False
    return True


def _emit(report: str, args, out) -> None:
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(report)
        sys.stderr.write(f"wrote {args.output}\n")
    else:
        out.write(report)


# --- the two sides --------------------------------------------------------------------------


def _run_dir(path: str):
    """(logdir, how to recognise the run) when `path` is one run's own directory."""
    path = os.path.abspath(path)
    try:
        names = os.listdir(path)
    except OSError:
        return None
    parent = os.path.dirname(path)
    if any(n.endswith(XPLANE_SUFFIX) for n in names) and parent.endswith(os.sep + PROFILE_DIR):
        return os.path.dirname(os.path.dirname(parent)), path
    if any(n.endswith(KINETO_SUFFIXES) for n in names):
        return path, path
    return None


def _side(path: str, run: str | None, device_file: str | None):
    if not os.path.isdir(path):
        raise BadInput(f"{path!r} is not a directory")
    own = _run_dir(path)
    logdir = own[0] if own and not run else path
    service = RooflineService(logdir, device_file=device_file)
    return service, _pick(service, run, path, own)


def _pick(service, run, path, own) -> str:
    runs = service.list_runs()["runs"]
    if not runs:
        raise BadInput(f"no profiles found under {path!r}")
    if run:
        if not any(r["run"] == run for r in runs):
            raise BadInput(
                f"unknown run {run!r} under {path!r}; runs: "
                + ", ".join(r["run"] for r in runs[:10])
            )
        return run
    if own:
        for r in runs:
            files = service.index.find(r["run"]).files
            if files and os.path.dirname(os.path.abspath(files[0].path)) == own[1]:
                return r["run"]
    if len(runs) > 1:
        sys.stderr.write(
            f"tb-roofline diff: {path} holds {len(runs)} runs; using the newest, "
            f"{runs[0]['run']} (choose with --base-run / --run)\n"
        )
    return runs[0]["run"]


# --- what the two sides cover ---------------------------------------------------------------


@dataclasses.dataclass
class _Side:
    service: RooflineService
    run: str
    host: str
    label: str

    def coverage(self) -> tuple[set, int, int, dict]:
        """(the run's hosts compared, the hosts and devices the answer counts, {host: why} of
        those not read or read in part)."""
        missing = self.service.hosts_not_read(self.run).get(self.run, {})
        hosts = [self.host] if self.host not in ("", "*") else self.service.hosts(self.run)["hosts"]
        device = self.service.device(self.run, self.host)["device"]
        missing = {h: why for h, why in missing.items() if h in hosts}
        return set(hosts), device["num_hosts"], device["num_cores"], missing


def _coverage(sides, allow_partial: bool) -> bool:
    """Whether the comparison is refused: a side's hosts not all read (unless allowed), or
    the two sides over different numbers of hosts or devices (op times are summed over a
    side's devices: 185 cores against 192 would read as 4% faster). Says why on stderr."""
    from tb_roofline.serve.cli.partial import partial_status

    (b_names, b_hosts, b_dev, b_missing), (c_names, c_hosts, c_dev, c_missing) = (
        s.coverage() for s in sides
    )
    refused = False
    for side, missing in zip(sides, (b_missing, c_missing)):
        if missing:
            label = f"tb-roofline diff: {side.label}"
            refused |= bool(partial_status({side.run: missing}, allow_partial, label))
    if b_hosts != c_hosts or b_dev != c_dev:
        only = [
            f"hosts only in the {label}: {', '.join(sorted(extra)[:10])}"
            for label, extra in (("base", b_names - c_names), ("candidate", c_names - b_names))
            if extra and b_names & c_names
        ]
        sys.stderr.write(
            "tb-roofline diff: the two sides do not cover the same devices, so their times "
            f"(summed over devices) do not compare: base {b_hosts} host(s), {b_dev} "
            f"device(s); candidate {c_hosts} host(s), {c_dev} device(s)"
            + "".join(f"; {o}" for o in only)
            + " (compare one host of each with --base-host / --host)\n"
        )
        refused = True
    return refused


# --- the gate -------------------------------------------------------------------------------


def evaluate_gate(cmp, fail_if_slower, fail_if_op_slower, min_op_time_us) -> dict:
    """Which thresholds hold. The program time is per step (the Average records) when both
    sides have steps, else the Total; an op counts when either side's time reaches the
    minimum."""
    checks, messages, regressions = [], [], []
    if fail_if_slower is not None:
        check = _program_check(cmp, fail_if_slower)
        checks.append(check)
        if not check["passed"]:
            messages.append(
                f"program {check['basis']} per core grew by {check['change_percent']:.2f}% "
                f"({check['base_time_per_core_us']:,.3f} → "
                f"{check['cand_time_per_core_us']:,.3f} µs), over --fail-if-slower "
                f"{fail_if_slower:g}%"
            )
    if fail_if_op_slower is not None:
        regressions = _op_regressions(cmp, fail_if_op_slower, min_op_time_us)
        checks.append(
            {
                "threshold": "fail_if_op_slower",
                "limit_percent": fail_if_op_slower,
                "min_op_time_us": min_op_time_us,
                "ops_over": len(regressions),
                "passed": not regressions,
            }
        )
        for r in regressions:
            messages.append(
                f"op {r['cand_operation']} ({r['program'] or 'no program'}) grew by "
                f"{r['delta_time_percent']:.2f}% per core ({r['base_self_time_per_core_us']:,.3f} "
                f"→ {r['cand_self_time_per_core_us']:,.3f} µs), over --fail-if-op-slower "
                f"{fail_if_op_slower:g}%"
            )
    passed = all(c["passed"] for c in checks)
    return {
        "passed": passed,
        "exit_code": EXIT_OK if passed else EXIT_REGRESSION,
        "checks": checks,
        "op_regressions": regressions,
        "messages": messages,
    }


def _program_pair(cmp):
    """(the program pair the gate reads, what its time is): Average, else Total, else the
    compared steps."""
    program = cmp.program.row_dicts()
    for kind, basis in (("average", "time per step (Average)"), ("total", "Total time")):
        pair = next(
            (r for r in program if r["base_record_type"] == kind and r["status"] == "matched"),
            None,
        )
        if pair is not None:
            return pair, basis
    if program and program[0]["match_rule"] == "scope":
        return program[0], "time of the compared steps"
    return None, "Total time"


def _program_check(cmp, fail_if_slower) -> dict:
    pair, basis = _program_pair(cmp)
    tb = pair and pair["base_total_time_per_core_us"]
    tc = pair and pair["cand_total_time_per_core_us"]
    change = 100.0 * (tc - tb) / tb if tb else None
    return {
        "threshold": "fail_if_slower",
        "limit_percent": fail_if_slower,
        "basis": basis,
        "base_time_per_core_us": tb,
        "cand_time_per_core_us": tc,
        "change_percent": change,
        "passed": change is None or change <= fail_if_slower,
    }


REGRESSION_FIELDS = (
    "program",
    "base_operation",
    "cand_operation",
    "match_rule",
    "base_total_self_time_us",
    "cand_total_self_time_us",
    "base_self_time_per_core_us",
    "cand_self_time_per_core_us",
    "delta_time_us",
    "delta_time_per_core_us",
    "delta_time_percent",
)


def _op_regressions(cmp, fail_if_op_slower, min_op_time_us) -> list:
    """Matched ops over the threshold whose time on either side reaches the minimum, the
    largest growth first."""
    regressions = []
    for r in cmp.ops.row_dicts():
        if r["status"] != "matched" or r["delta_time_percent"] is None:
            continue
        big = max(r["base_self_time_per_core_us"] or 0, r["cand_self_time_per_core_us"] or 0)
        if big >= min_op_time_us and r["delta_time_percent"] > fail_if_op_slower:
            regressions.append({k: r[k] for k in REGRESSION_FIELDS})
    regressions.sort(key=lambda r: -r["delta_time_per_core_us"])
    return regressions


# --- reports --------------------------------------------------------------------------------


def _op_rows(cmp, args) -> list[dict]:
    rows = cmp.ops.row_dicts()
    top = args.top if args.top is not None else (20 if args.format == "table" else None)
    return rows if top is None else rows[:top]


def _json_report(cmp, base, cand, gate, args) -> str:
    doc = {
        "schema": SCHEMA,
        "base": base,
        "cand": cand,
        "level": args.level,
        "view": args.view,
        "infeed_outfeed": "exclude" if args.exclude_infeed_outfeed else "include",
        "summary": cmp.summary,
        "notes": cmp.notes,
        "gate": gate,
        "program": cmp.program.row_dicts(),
    }
    if args.level == "op":
        doc["ops"] = _op_rows(cmp, args)
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def _csv_report(cmp, base, cand, gate, args) -> str:
    table = cmp.ops if args.level == "op" else cmp.program
    rows = (
        cmp.program.rows()
        if args.level == "program"
        else [[r[c] for c in table.names] for r in _op_rows(cmp, args)]
    )
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.names)
    writer.writerows(["" if v is None else v for v in r] for r in rows)
    return buf.getvalue()


def _record(r: dict, side: str):
    """`Total`, `Average`, `step 3`, `host h0`, or None for a missing side."""
    kind = r[f"{side}_record_type"]
    if kind is None:
        return None
    if kind == "step":
        return f"step {r[f'{side}_step']}"
    if kind == "host":
        return f"host {r[f'{side}_host']}"
    return r[f"{side}_step"]


PROGRAM_TABLE_COLUMNS = (
    "base_total_time_per_core_us",
    "cand_total_time_per_core_us",
    "delta_time_percent",
    "speedup",
    "base_bound_by",
    "cand_bound_by",
    "base_roofline_efficiency",
    "cand_roofline_efficiency",
)
OP_TABLE_COLUMNS = (
    "status",
    "match_rule",
    "base_operation",
    "cand_operation",
    "base_self_time_per_core_us",
    "cand_self_time_per_core_us",
    "delta_time_per_core_us",
    "delta_time_percent",
    "speedup",
    "base_bound_by",
    "cand_bound_by",
    "delta_roofline_efficiency",
)


def _table_report(cmp, base, cand, gate, args) -> str:
    lines = _sides_lines(cmp, base, cand) + [""] + _summary_lines(cmp.summary)
    program = cmp.program.row_dicts()
    lines += [
        "",
        "Program records (time per core, µs):",
        _table(
            ["base", "candidate", *PROGRAM_TABLE_COLUMNS],
            [
                [_record(r, "base"), _record(r, "cand")] + [r[c] for c in PROGRAM_TABLE_COLUMNS]
                for r in program
            ],
        ),
    ]
    if args.level == "op":
        rows = _op_rows(cmp, args)
        lines += [
            "",
            f"Top {len(rows)} of {len(cmp.ops)} op pairs by time change (self time per core, µs):",
            _table(list(OP_TABLE_COLUMNS), [[r[c] for c in OP_TABLE_COLUMNS] for r in rows]),
        ]
    if gate["checks"]:
        lines.append("")
        lines.append("Gate: " + ("passed" if gate["passed"] else "REGRESSION"))
        lines += [f"  {m}" for m in gate["messages"]]
    return "\n".join(lines) + "\n"


def _sides_lines(cmp, base, cand) -> list[str]:
    lines = []
    for label, side in (("Base", base), ("Candidate", cand)):
        dev = side["device"]
        lines.append(
            f"{label:9s}  {side['run']}  host {side['host']}  step {side['step']}  "
            f"({dev['type']}, {side['num_steps']} steps)"
        )
    return lines + [f"  note: {note}" for note in cmp.notes]


def _summary_lines(s: dict) -> list[str]:
    lines = []
    if s["time_change_us"] is not None and s["time_change_percent"] is not None:
        lines.append(
            f"Time per core ({s['scope']['cand']}): {_fmt(s['base_time_per_core_us'])} → "
            f"{_fmt(s['cand_time_per_core_us'])} µs ({s['time_change_percent']:+.2f}%, speedup "
            f"{s['speedup']:.3f}×); summed over cores {_fmt(s['base_time_us'])} → "
            f"{_fmt(s['cand_time_us'])} µs, of which ops explain "
            f"{_fmt(s['op_time_change_us'])} µs, the rest (gaps, host) "
            f"{_fmt(s['other_time_change_us'])} µs"
        )
    lines.append(
        f"Ops: {s['matched']} matched "
        f"({', '.join(f'{n} by {r}' for r, n in s['rules'].items()) or 'none'}), "
        f"{s['new']} new ({_fmt(s['new_time_us'])} µs), {s['removed']} removed "
        f"({_fmt(s['removed_time_us'])} µs); {s['faster']} faster, {s['slower']} slower"
    )
    if s["explained_share"] is not None:
        lines.append(
            f"The top {len(s['top_contributors'])} ops explain "
            f"{100 * s['explained_share']:.1f}% of the time change"
        )
    return lines
