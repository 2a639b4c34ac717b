"""The Python API for notebooks: `tb_roofline.load(logdir)` and what it returns.

    import tb_roofline
    a = tb_roofline.load("logs/", run=None, host=None)   # the newest run, all hosts
    a.device                 # dict: the device and its roofs (as /device's "device")
    a.program()              # DataFrame: the program records (/program, `export --level program`)
    a.ops(category=["convolution fusion"], bound_by=["HBM"], name="fusion")   # as /ops
    a.guidance(); a.diagnostics(); a.compare(base)       # as /guidance, /diagnostics, /compare
    a                        # in Jupyter / VS Code: the interactive charts (the HTML report)

Every table is the HTTP API's answer (serve/service/answers.py through `RooflineService`): the same
column names and units, the same numbers `tb-roofline export` writes. With pandas installed
(`pip install 'tb-roofline[notebook]'`) tables are DataFrames (null: NaN or None); without it,
numpy record arrays (null: NaN in numeric columns, None in the others).
"""

from __future__ import annotations

import html as html_lib

__all__ = ["load", "Analysis", "Comparison", "to_table"]

REPORT_HEIGHT_PX = 1100


def load(
    logdir: str,
    run: str | None = None,
    host: str | None = None,
    *,
    device_file: str | None = None,
    workload_file: str | None = None,
    engine_metrics_file: str | None = None,
    model_config_file: str | None = None,
) -> Analysis:
    """The analysis of one run (default: the newest) on one host (default: all hosts) of a
    logdir (a path or an fsspec URL such as s3://bucket/logs)."""
    from tb_roofline import errors, storage
    from tb_roofline.serve.service.core import RooflineService

    if not storage.isdir(logdir):
        raise errors.NotFoundError(f"{logdir!r} is not a directory")
    service = RooflineService(
        logdir,
        device_file=device_file,
        workload_file=workload_file,
        engine_metrics_file=engine_metrics_file,
        model_config_file=model_config_file,
    )
    runs = service.list_runs()["runs"]
    if not runs:
        raise errors.NotFoundError(f"no profiles found under {logdir!r}")
    if run is None:
        run = runs[0]["run"]
    service.resolve_run(run)  # a clear error naming the runs
    return Analysis(service, run, host or "")


def to_table(columns: list, rows: list):
    """A DataFrame of API rows (pandas installed) or else a numpy record array."""
    try:
        import pandas as pd
    except ImportError:
        return _records(columns, rows)
    return pd.DataFrame.from_records(rows, columns=columns)


def _records(columns: list, rows: list):
    import numpy as np

    arrays = []
    for j, _ in enumerate(columns):
        values = [r[j] for r in rows]
        present = [v for v in values if v is not None]
        numeric = present and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in present
        )
        if numeric and len(present) == len(values) and all(isinstance(v, int) for v in present):
            arrays.append(np.array(values, dtype=np.int64))
        elif numeric:
            arrays.append(np.array([np.nan if v is None else v for v in values], dtype=float))
        else:
            arrays.append(np.array(values, dtype=object))
    if not rows:
        arrays = [np.array([], dtype=object) for _ in columns]
    return np.rec.fromarrays(arrays, formats=[a.dtype for a in arrays], names=columns)


def _columnar(answer: dict):
    """A /compare table (`columns`, column-major `values`) as a table."""
    columns = answer["columns"]
    return to_table(columns, [list(r) for r in zip(*answer["values"])] if columns else [])


class Analysis:
    """One run on one host ('' = all hosts). Cheap to make; each answer is computed once by
    the service and cached there."""

    def __init__(self, service, run: str, host: str = ""):
        self.service = service
        self.run = run
        self.host = host

    def __repr__(self):
        return f"<tb_roofline.Analysis run={self.run!r} host={self.host or '*'!r}>"

    @property
    def logdir(self) -> str:
        return self.service.logdir

    @property
    def hosts(self) -> list:
        return self.service.hosts(self.run)["hosts"]

    @property
    def device(self) -> dict:
        return self.service.device(self.run, self.host)["device"]

    def program(self, infeed_outfeed: bool = True):
        """The program records: Total, Total (HW), one per host, Average, each step."""
        answer = self.service.program(self.run, self.host, infeed_outfeed)
        return to_table(answer["columns"], answer["rows"])

    def ops(
        self,
        view: str = "op",
        *,
        category=(),
        bound_by=(),
        name: str = "",
        rows: str = "",
        infeed_outfeed: bool = True,
    ):
        """The op records with the API's filters: `category` and `bound_by` (a value or a
        list: any of them), `name` (case-insensitive substring); `view`: op, kernel or
        kernel_hw (PyTorch GPU traces); `rows="shapes"`: one row per op and input shapes."""
        answer = self.service.ops(
            self.run,
            self.host,
            infeed_outfeed,
            _listed(category),
            _listed(bound_by),
            name or "",
            0,
            None,
            view,
            rows,
        )
        return to_table(answer["columns"], answer["rows"])

    def guidance(self, infeed_outfeed: bool = True, workload: dict | None = None) -> dict:
        """Findings (what to change, time saved), step time by class, throughput (MFU)."""
        return self.service.guidance(self.run, self.host, infeed_outfeed, workload)

    def diagnostics(self) -> list:
        return self.service.diagnostics(self.run, self.host)["diagnostics"]

    def comm(self, kind=(), infeed_outfeed: bool = True):
        """The communication roofline (`/comm`, `tb-roofline comm`): one row per collective
        and message size (bus bandwidth, link roof, exposed time), longest first; `kind`: a
        collective kind or a list of them (any case; `comm_links()["kinds"]` lists the run's)."""
        answer = self.service.comm(self.run, self.host, infeed_outfeed)
        wanted = {k.lower() for k in _listed(kind)}
        unknown = wanted - {k.lower() for k in answer["kinds"]}
        if unknown:
            raise ValueError(
                f"kind {sorted(unknown)} not among this run's collectives: {answer['kinds']}"
            )
        points = [p for p in answer["points"] if not wanted or p["kind"].lower() in wanted]
        columns = list(points[0]) if points else []
        return to_table(columns, [[p[c] for c in columns] for p in points])

    def comm_links(self, infeed_outfeed: bool = True) -> dict:
        """The communication roofline's link roofs (GB/s per direction, with sources), the
        run's collective kinds and the note on latency-bound messages."""
        answer = self.service.comm(self.run, self.host, infeed_outfeed)
        return {k: answer[k] for k in ("links", "kinds", "latency_note")}

    def compare(
        self,
        base: Analysis | str,
        step=None,
        base_step=None,
        infeed_outfeed: bool = True,
        view: str = "op",
    ) -> Comparison:
        """This run (the candidate) against `base`: another Analysis (any logdir) or a run
        name of this logdir."""
        if isinstance(base, str):
            base = Analysis(self.service, base, "")
        return Comparison(base, self, step, base_step, infeed_outfeed, view)

    def report_html(self, max_ops: int | None = None) -> str:
        """The one-file HTML report of this run (as `tb-roofline html`)."""
        from tb_roofline.serve.web import html_report

        return html_report.single_report(
            self.service, [self.run], self.host or "*", max_ops=max_ops or html_report.MAX_OPS
        )

    def _repr_html_(self) -> str:
        return _iframe(self.report_html())


class Comparison:
    """Two runs (hosts, steps) on one roofline, as /compare and `tb-roofline diff` answer."""

    def __init__(
        self,
        base: Analysis,
        cand: Analysis,
        step=None,
        base_step=None,
        infeed_outfeed: bool = True,
        view: str = "op",
    ):
        self.base, self.cand = base, cand
        self._args = dict(base_step=base_step, step=step, include_io=infeed_outfeed, view=view)
        self._answers: dict = {}

    def __repr__(self):
        return f"<tb_roofline.Comparison base={self.base.run!r} candidate={self.cand.run!r}>"

    def answer(self, level: str = "op") -> dict:
        """The /compare answer (summary, notes, program pairs and op pairs) as a dict."""
        if level not in self._answers:
            a = self._args
            self._answers[level] = self.cand.service.compare(
                self.base.run,
                self.cand.run,
                self.base.host,
                self.cand.host,
                a["base_step"],
                a["step"],
                level,
                a["include_io"],
                a["view"],
                base_service=self.base.service,
            )
        return self._answers[level]

    @property
    def summary(self) -> dict:
        return self.answer()["summary"]

    def ops(self):
        return _columnar(self.answer("op"))

    def program(self):
        return _columnar(self.answer("program"))

    def report_html(self) -> str:
        from tb_roofline.serve.web import html_report

        return html_report.diff_report(
            self.base.service,
            self.base.run,
            self.cand.service,
            self.cand.run,
            self.base.host,
            self.cand.host,
        )

    def _repr_html_(self) -> str:
        return _iframe(self.report_html())


def _listed(value) -> list:
    if value in (None, ""):
        return []
    return [value] if isinstance(value, str) else list(value)


def _iframe(report: str) -> str:
    """The report in an iframe of its own (its scripts and styles stay out of the notebook's
    page; no server: the whole document is the frame's srcdoc; sandboxed: the frame has an
    origin of its own and cannot reach the notebook)."""
    # ASCII only (character references beyond it): the frame reads the same text whatever
    # encoding the notebook's page was decoded with.
    doc = html_lib.escape(report, quote=True).encode("ascii", "xmlcharrefreplace").decode()
    return (
        f'<iframe class="tb-roofline-report" srcdoc="{doc}" '
        f'style="width:100%;height:{REPORT_HEIGHT_PX}px;border:1px solid #ddd" '
        'sandbox="allow-scripts allow-downloads" title="tb-roofline report"></iframe>'
    )
