"""`tb-roofline html LOGDIR -o report.html`: the Roofline tab as one self-contained file.

The report is the unchanged frontend (static/*.js, the vendored Vega builds, the CSS) inlined
as text (`report_bundle.py`), plus the HTTP API's answers for the chosen run(s): what the
route handlers the plugin and `tb-roofline serve` mount would send, from the same parameters
(serve/web/routes.py, `plain_answer`), taken as plain Python and encoded once, with the rest
of the page's data.
static/report_host.js turns the inlined modules into blob: modules and answers the tab's
fetches from the embedded answers, so the file opens from disk with the network off; a
Content-Security-Policy in the file itself forbids any request. Op tables are capped (the
first `MAX_OPS` rows in the model's order, by self time, with a note) so the file stays small
enough to attach to a pull request or a CI run.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import html
import json
import os
import re
import sys

from tb_roofline.serve.web.report_bundle import ReportError, frontend_bundle
from tb_roofline.serve.web.routes import STATIC_DIR, plain_answer

MAX_OPS = 5000
MISSING = (
    "not in this report: it holds the answers for the run(s), host and views it was "
    "written for (tb-roofline html --run/--host choose them)"
)


# --- the data ---------------------------------------------------------------------------------


def answer_key(route: str, params: dict) -> str:
    """The key report_host.js computes from a request URL: route, then the non-empty
    parameters sorted, unescaped."""
    items = sorted((k, str(v)) for k, v in params.items() if v not in (None, ""))
    return route + ("?" + "&".join(f"{k}={v}" for k, v in items) if items else "")


class Answers:
    """The API answers a report embeds: each route's answer as plain Python, the one its
    handler would send (`routes.plain_answer`), encoded once with the whole page's data."""

    def __init__(self, max_ops: int = MAX_OPS):
        self.max_ops = max_ops
        self.answers: dict = {}  # key -> [status, answer]
        self.capped: dict = {}  # run -> (kept, of)

    def ask(self, service, route: str, params: dict, alias: dict | None = None):
        """Store the route's answer under the report's key (`alias`: report run name -> the
        service's, for runs of two logdirs with one name); returns (status, answer)."""
        alias = alias or {}
        real = {k: alias.get(v, v) if k in ("run", "base") else v for k, v in params.items()}
        query = {k: v for k, v in real.items() if v not in (None, "")}
        status, doc = plain_answer(service, route, query)
        if status == 200 and isinstance(doc, dict):
            doc = self._shape(route, doc, {v: k for k, v in alias.items()})
        self.answers[answer_key(route, params)] = [status, doc]
        return status, doc

    def put(self, route: str, params: dict, doc: dict):
        self.answers[answer_key(route, params)] = [200, doc]

    def _shape(self, route: str, doc: dict, rename: dict) -> dict:
        """The answer under the report's run names, its op rows capped; a new dict where it
        changes, never the service's."""
        if doc.get("run") in rename:
            doc = {**doc, "run": rename[doc["run"]]}
        if route == "ops":
            doc = self._cap(doc)
        return doc

    def _cap(self, doc: dict) -> dict:
        """The top `max_ops` rows by self time (the tab filters and sorts what it has)."""
        rows = doc.get("rows") or []
        # A page of an answer cut at TB_ROOFLINE_MAX_ANSWER_MB left rows out too; the report
        # has no server to ask for the next page, so its banner says how many.
        total = max(doc.get("total_count") or 0, len(rows))
        if len(rows) <= self.max_ops and doc.get("next_offset") is None:
            return doc
        # The answer's rows are in the model's order, by self time (`rank`): the first ones.
        kept = rows[: self.max_ops]
        run = doc.get("run")
        if total > self.capped.get(run, (0, 0))[1]:  # the banner: the largest table's
            self.capped[run] = (len(kept), total)
        out = {
            **doc,
            "rows": kept,
            "total_count": len(kept),
            "unfiltered_count": len(kept),
            "capped_from": total,
            "returned_count": len(kept),
            "next_offset": None,
            "capped_by": None,
        }
        out.pop("max_answer_mb", None)
        return out


def add_run(answers: Answers, service, run: str, host: str, alias: dict | None = None):
    """Everything the tab asks for one run on one host ('*' = all): hosts, device,
    diagnostics, and with and without infeed/outfeed the program, guidance, the communication
    roofline and every op view
    and row grouping the run offers."""
    alias = alias or {}
    answers.ask(service, "hosts", {"run": run}, alias)
    sel = {"run": run, "host": host}
    answers.ask(service, "device", sel, alias)
    answers.ask(service, "diagnostics", sel, alias)
    guidance_host = "" if host == "*" else host
    for io in ("include", "exclude"):
        answers.ask(service, "program", {**sel, "infeed_outfeed": io}, alias)
        answers.ask(
            service, "guidance", {"run": run, "host": guidance_host, "infeed_outfeed": io}, alias
        )
        answers.ask(
            service, "comm", {"run": run, "host": guidance_host, "infeed_outfeed": io}, alias
        )
        status, ops = answers.ask(service, "ops", {**sel, "infeed_outfeed": io}, alias)
        if status != 200 or ops is None:
            continue
        for view in ops.get("views") or ():
            if view != "op":
                answers.ask(service, "ops", {**sel, "infeed_outfeed": io, "view": view}, alias)
        if "shapes" in (ops.get("row_groupings") or ()):
            answers.ask(service, "ops", {**sel, "infeed_outfeed": io, "rows": "shapes"}, alias)


def add_compare(
    answers: Answers,
    service,
    base: str,
    run: str,
    host: str,
    base_service=None,
    alias: dict | None = None,
    base_host: str = "",
    base_step: str | None = None,
    step: str | None = None,
):
    """The comparison the tab opens with `compare=<base>` (and `compare_host`,
    `compare_base_step`, `compare_step` when given), with and without infeed/outfeed."""
    alias = alias or {}
    rename = {v: k for k, v in alias.items()}
    base_host = "" if base_host in ("", "*") else base_host
    host = "" if host in ("", "*") else host
    answers.ask(base_service or service, "hosts", {"run": base}, alias)
    for io in ("include", "exclude"):
        answers.ask(
            base_service or service,
            "program",
            {"run": base, "host": base_host or "*", "infeed_outfeed": io},
            alias,
        )
        doc = service.compare(
            alias.get(base, base),
            alias.get(run, run),
            base_host,
            host,
            base_step,
            step,
            include_infeed_outfeed=io == "include",
            base_service=base_service,
        )
        for side in (doc["base"], doc["cand"]):
            side["run"] = rename.get(side["run"], side["run"])
        answers.put(
            "compare",
            {
                "base": base,
                "run": run,
                "base_host": base_host,
                "host": host,
                "base_step": base_step,
                "step": step,
                "infeed_outfeed": io,
            },
            doc,
        )


# --- the page ---------------------------------------------------------------------------------


def _packed(doc, element_id: str) -> str:
    """JSON, gzipped, in base64 (no `<` to end the element; static/report_host.js unpacks)."""
    text = json.dumps(doc, allow_nan=False, separators=(",", ":")).encode()
    data = base64.b64encode(gzip.compress(text, 6, mtime=0)).decode()
    lines = "\n".join(data[i : i + 4096] for i in range(0, len(data), 4096))
    return (
        f'<script type="application/octet-stream" id="{element_id}" '
        f'data-encoding="gzip+base64">\n{lines}\n</script>'
    )


def unpack(page: str, element_id: str):
    """The JSON of a packed block of a report (for tests and tools)."""
    m = re.search(
        rf'<script type="application/octet-stream" id="{element_id}"[^>]*>(.*?)'
        r"</script>",
        page,
        re.S,
    )
    if not m:
        raise ReportError(f"no {element_id} in this file")
    return json.loads(gzip.decompress(base64.b64decode("".join(m.group(1).split()))))


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


BANNER_CSS = """#report-banner{font:13px system-ui,sans-serif;padding:6px 12px;
background:#f1f3f4;color:#202124;border-bottom:1px solid #dadce0}
#report-banner .capped{color:#b06000}
@media (prefers-color-scheme: dark){#report-banner{background:#202124;color:#e8eaed;
border-color:#3c4043}}"""


def render_page(answers: Answers, title: str, banner: str, state: dict) -> str:
    """The report's HTML: the banner, the app's root, the inlined frontend and data, and the
    host script, under a CSP that allows no request at all."""
    with open(os.path.join(STATIC_DIR, "report_host.js"), encoding="utf-8") as f:
        host_js = f.read()
    from urllib.parse import quote

    hash_ = "&".join(
        f"{quote(k, safe='')}={quote(str(v), safe='')}"
        for k, v in state.items()
        if v not in (None, "", "*")
    )
    data = {"answers": answers.answers, "missing": MISSING, "hash": hash_}
    csp = (
        "default-src 'none'; script-src " + _csp_hash(host_js) + " blob:; "
        "style-src 'unsafe-inline' blob:; img-src data: blob:; font-src data:; "
        "connect-src blob: data:; base-uri 'none'; form-action 'none'"
    )
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html.escape(title)}</title>",
            '<link rel="icon" href="data:,">',
            f"<style>{BANNER_CSS}</style>",
            "</head>",
            "<body>",
            f'<div id="report-banner">{banner}</div>',
            '<div id="roofline-root"></div>',
            _packed(frontend_bundle(), "roofline-modules"),
            _packed(data, "roofline-data"),
            f"<script>{host_js}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


def _banner(what: str, answers: Answers) -> str:
    from tb_roofline import __version__

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"<b>tb-roofline report</b>: {html.escape(what)}. Written {when} by tb-roofline "
        f"{__version__}; offline, all data in this file."
    ]
    for run, (kept, of) in sorted(answers.capped.items()):
        parts.append(
            f'<span class="capped" data-run="{html.escape(run)}" '
            f'data-capped="{kept}/{of}">{html.escape(run)}: '
            f"the op tables hold the top {kept:,} of {of:,} ops by self time "
            "(tb-roofline export has them all).</span>"
        )
    return " ".join(parts)


def _runs_answer(entries: list, logdir: str) -> dict:
    return {"runs": entries, "logdir": logdir, "scanning": False}


def single_report(
    service, runs: list[str], host: str = "*", compare: str | None = None, max_ops: int = MAX_OPS
) -> str:
    """The report of `runs` (the first shown) of one logdir, with `compare` as the base of a
    comparison with the first run."""
    host = host or "*"
    answers = Answers(max_ops)
    listed = {r["run"]: r for r in service.list_runs()["runs"]}
    wanted = list(dict.fromkeys(runs + ([compare] if compare else [])))
    for run in wanted:
        if run not in listed:
            raise ReportError(f"unknown run {run!r}; runs: " + ", ".join(list(listed)[:10]))
    for run in wanted:
        # A run that cannot be read fails the command (its error, exit 1), not a report of
        # error boxes.
        run_host = host if run == runs[0] else "*"
        service.ops(run, run_host)
        service.guidance(run, "" if run_host == "*" else run_host)  # a bad workload file
        add_run(answers, service, run, run_host)
    if compare:
        add_compare(answers, service, compare, runs[0], host)
    answers.put("runs", {}, _runs_answer([listed[r] for r in wanted], service.logdir))
    what = f"{', '.join(runs)} in {service.logdir}" + (
        f", compared with {compare}" if compare else ""
    )
    state = {"run": runs[0], "host": host, "compare": compare}
    return render_page(answers, f"Roofline: {runs[0]}", _banner(what, answers), state)


def diff_report(
    base_service,
    base: str,
    service,
    run: str,
    base_host: str = "",
    host: str = "",
    base_step: str | None = None,
    step: str | None = None,
    max_ops: int = MAX_OPS,
) -> str:
    """`tb-roofline diff --html`: the candidate with the comparison open; the two runs may be
    in two logdirs (a run name both have is shown as `base: NAME` and `candidate: NAME`)."""
    answers = Answers(max_ops)
    same = base_service is service
    alias = {}
    base_name, run_name = base, run
    if not same and base == run:
        base_name, run_name = f"base: {base}", f"candidate: {run}"
        alias = {base_name: base, run_name: run}
    host = host or "*"
    add_run(answers, service, run_name, host, alias)
    add_run(answers, base_service, base_name, base_host or "*", alias)
    add_compare(
        answers,
        service,
        base_name,
        run_name,
        host,
        base_service=None if same else base_service,
        alias=alias,
        base_host=base_host,
        base_step=base_step,
        step=step,
    )
    entries = []
    for svc, name, real in ((service, run_name, run), (base_service, base_name, base)):
        entry = next(r for r in svc.list_runs()["runs"] if r["run"] == real)
        entries.append({**entry, "run": name})
    logdir = service.logdir if same else f"{base_service.logdir} and {service.logdir}"
    answers.put("runs", {}, _runs_answer(entries, logdir))
    what = f"{run_name} compared with {base_name}"
    state = {
        "run": run_name,
        "host": host,
        "compare": base_name,
        "compare_host": base_host or "",
        "compare_base_step": base_step or "",
        "compare_step": step or "",
    }
    return render_page(
        answers, f"Roofline: {run_name} vs {base_name}", _banner(what, answers), state
    )


def write(path: str, text: str):
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ReportError(f"cannot write {path}: {exc.strerror or exc}") from None
    sys.stderr.write(f"wrote {path} ({len(text.encode()) / 1e6:.1f} MB)\n")


# --- the command ------------------------------------------------------------------------------


def add_html_subparser(sub):
    p = sub.add_parser(
        "html",
        help="one self-contained HTML report (offline charts, tables)",
        description="Write the Roofline tab for one run (or a few) as one HTML "
        "file that opens from disk without a network",
    )
    p.add_argument("logdir", help="TensorBoard logdir (or one run's directory), path or URL")
    p.add_argument(
        "--run",
        action="append",
        help="run to include (repeatable; the first is shown; default: the newest)",
    )
    p.add_argument("--host", default="", help="one host; default: all hosts aggregated")
    p.add_argument("--compare", metavar="BASE", help="also compare the run with this base run")
    p.add_argument(
        "--max-ops",
        type=int,
        default=MAX_OPS,
        help=f"ops kept per table, the longest first (default {MAX_OPS:,})",
    )
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    p.add_argument("--device-file", help="peaks for these runs from a device file")
    p.add_argument(
        "--workload-file",
        help="model FLOPs / tokens per step, for MFU (default: the nearest roofline_workload.json)",
    )
    p.add_argument(
        "--engine-metrics",
        help="a vLLM/SGLang /metrics file whose FLOPs/bytes to set beside ours "
        "(default: the nearest engine_metrics.prom)",
    )
    p.add_argument(
        "--model-config",
        help="a serving model's Hugging Face config.json: its sliding-window layers clamp the "
        "attention counts (default: the nearest model_config.json)",
    )
    p.set_defaults(func=cmd_html)
    return p


def cmd_html(service, args, out):
    """Run by the CLI with the logdir's service (serve/cli/main.py)."""
    from tb_roofline.serve.cli.commands import UsageError, pick_run

    if args.max_ops < 1:
        raise UsageError("--max-ops must be at least 1")
    runs = args.run or [pick_run(service, None)]
    try:
        text = single_report(service, runs, args.host or "*", args.compare, args.max_ops)
        write(args.output, text)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
