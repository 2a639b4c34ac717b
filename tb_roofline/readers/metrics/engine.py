"""A serving engine's own FLOP and byte estimates, read from its Prometheus metrics
(docs/serving.md, "Engine MFU figures").

vLLM started with `--enable-mfu-metrics` (vllm/v1/metrics/perf.py, `PerfMetricsProm`) and SGLang
with `--enable-metrics --enable-mfu-metrics` (its `SchedulerMetricsCollector`) count, per GPU and
per scheduler step, the FLOPs and the bytes read and written that their analytic model of the
network gives for the tokens they scheduled, and export the running totals as counters:

    <engine>:estimated_flops_per_gpu_total{labels} value
    <engine>:estimated_read_bytes_per_gpu_total{labels} value
    <engine>:estimated_write_bytes_per_gpu_total{labels} value

with `<engine>` `vllm` or `sglang`. vLLM also exports `vllm:iteration_tokens_total`, a histogram
of the tokens of each engine step: its `_count` is the number of steps.

The file is the Prometheus text exposition format (what `curl …/metrics` saves; `.prom`, as the
node exporter's textfile collector names such files): `# HELP` / `# TYPE` and comment lines,
then one sample a line, `name{label="value",…} value [timestamp]`. Counters only grow, so one
scrape gives totals since the engine started; two scrapes (the file holds the exposition taken
before the profile and the one taken after: a series seen again starts the next scrape) give
what the engine counted in between. Other metrics are skipped; an unreadable line is an error
naming its line number.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

from tb_roofline.devices.bounded_json import read_small_text

FILE_NAME = "engine_metrics.prom"
MAX_FILE_BYTES = 16 << 20
ENGINES = ("vllm", "sglang")
FLOPS = "estimated_flops_per_gpu_total"
READ = "estimated_read_bytes_per_gpu_total"
WRITE = "estimated_write_bytes_per_gpu_total"
STEPS = "iteration_tokens_total_count"  # vLLM: tokens per engine step, a histogram's count
KEPT = (FLOPS, READ, WRITE, STEPS)

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(
    rf"^(?P<name>{_NAME})(?:\{{(?P<labels>.*)\}})?[ \t]+(?P<value>\S+)(?:[ \t]+(?P<ts>-?\d+))?$"
)
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class EngineMetricsError(ValueError):
    """An engine metrics file that cannot be used (the message names the file and line)."""


@dataclasses.dataclass(frozen=True)
class EngineMetrics:
    """What the engine counted (per GPU): over the window between its first and last scrape
    (`scrapes` ≥ 2), or since it started (one scrape). None where the file lacks the series."""

    source: str
    engine: str
    scrapes: int
    flops: float | None
    read_bytes: float | None
    write_bytes: float | None
    steps: float | None  # engine steps in the window (vLLM's iteration histogram), or None
    labels: dict

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _labels(text: str | None, where: str) -> tuple:
    if not text or not text.strip():
        return ()
    out, pos = [], 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            raise EngineMetricsError(f'{where}: a label set that is not name="value" pairs')
        value = re.sub(r"\\.", lambda e: _ESCAPES.get(e.group(0), e.group(0)), m.group(2))
        out.append((m.group(1), value))
        pos = m.end()
    return tuple(sorted(out))


def _value(text: str, where: str) -> float:
    try:
        v = float(text)  # Prometheus writes NaN, +Inf and -Inf as Python reads them
    except ValueError:
        raise EngineMetricsError(f"{where}: {text[:20]!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise EngineMetricsError(f"{where}: a counter must be a finite number ≥ 0")
    return v


def _kept(name: str) -> tuple[str, str] | None:
    engine, _, metric = name.partition(":")
    return (engine, metric) if engine in ENGINES and metric in KEPT else None


def scrapes(text: str, name: str) -> list[dict]:
    """The file's scrapes in order: each {(engine, metric, labels): value} of the kept series."""
    out: list[dict] = [{}]
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{name} line {number}"
        m = _SAMPLE.match(line)
        if m is None:
            raise EngineMetricsError(f"{where}: not a Prometheus sample (name{{labels}} value)")
        kept = _kept(m.group("name"))
        if kept is None:
            continue
        key = (*kept, _labels(m.group("labels"), where))
        if key in out[-1]:  # a series seen again: the next scrape
            out.append({})
        out[-1][key] = _value(m.group("value"), where)
    return [s for s in out if s]


def _one_series(scraped: list[dict], name: str) -> tuple[str, tuple]:
    """The engine and label set of the file's estimates: one of each, or an error saying why
    (several engines' or data-parallel ranks' counters cannot be told apart from the trace)."""
    series = {(k[0], k[2]) for s in scraped for k in s if k[1] != STEPS}
    if not series:
        raise EngineMetricsError(
            f"{name}: no vllm:/sglang: estimated_*_per_gpu_total counters (start the engine "
            "with --enable-mfu-metrics and save its /metrics)"
        )
    if len(series) > 1:
        raise EngineMetricsError(
            f"{name}: {len(series)} engines' counters (label sets); keep only the lines of the "
            "engine this profile is from"
        )
    return next(iter(series))


def parse(text: str, name: str) -> EngineMetrics:
    scraped = scrapes(text, name)
    engine, labels = _one_series(scraped, name)

    def window(metric: str) -> float | None:
        seen = [s[k] for s in scraped for k in s if k[:2] == (engine, metric)]
        if not seen:
            return None
        if len(scraped) == 1:
            return seen[-1]
        if len(seen) < 2 or seen[-1] < seen[0]:
            return None  # not in both scrapes, or the engine restarted in between
        return seen[-1] - seen[0]

    return EngineMetrics(
        source=name,
        engine=engine,
        scrapes=len(scraped),
        flops=window(FLOPS),
        read_bytes=window(READ),
        write_bytes=window(WRITE),
        steps=window(STEPS) if len(scraped) > 1 else None,
        labels=dict(labels),
    )


def load(path: str) -> EngineMetrics:
    text = read_small_text(path, MAX_FILE_BYTES, EngineMetricsError, "an engine metrics file")
    return parse(text, os.path.basename(path))
