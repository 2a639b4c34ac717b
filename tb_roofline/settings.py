"""Every `TB_ROOFLINE_*` environment variable, read by one rule.

A number must be finite and at least the variable's minimum (an integer where the variable
counts something). Anything else — a typo, a negative size, `inf` — logs one warning naming
the variable, the value and the default, and the default is used: a bad environment variable
must never stop TensorBoard from loading the plugin. Text settings (paths) are taken as given,
stripped. Values are read at each call, so tests and long-running servers see changes.

Every setting, its default, minimum and meaning: the README's table ("Caches and limits"),
which `markdown_table()` writes from `ROWS` below (`python3 tools/settings_table.py --write`;
tests/test_settings.py checks the README holds it).
"""

from __future__ import annotations

import collections
import contextvars
import math
import os
import types

# (A named tuple, not a dataclass, and logging imported on the first complaint: every command
# imports this module, `tb-roofline --help` included, and those two cost 20 ms of start-up.)
# exclusive: the minimum itself is not allowed; integer: the value counts something.
Number = collections.namedtuple(
    "Number", "name default minimum exclusive integer", defaults=(0.0, False, False)
)


MAX_FILE_MB = Number("TB_ROOFLINE_MAX_FILE_MB", 4096, 0, exclusive=True)
MAX_EVENTS = Number("TB_ROOFLINE_MAX_EVENTS", 5_000_000, 1, integer=True)
MEMORY_CACHE_MB = Number("TB_ROOFLINE_MEMORY_CACHE_MB", 2048, 0)
MEMORY_BUDGET_MB = Number("TB_ROOFLINE_MEMORY_BUDGET_MB", 8192, 0, exclusive=True)
CACHE_MAX_MB = Number("TB_ROOFLINE_CACHE_MAX_MB", 2048, 0)
REMOTE_RESCAN_S = Number("TB_ROOFLINE_REMOTE_RESCAN_S", 15.0, 0)
YOUNG_FILE_S = Number("TB_ROOFLINE_YOUNG_FILE_S", 30.0, 0, exclusive=True)
WORKERS = Number("TB_ROOFLINE_WORKERS", 0, 1, integer=True)  # 0: the usable cores
PARALLEL_MIN_MB = Number("TB_ROOFLINE_PARALLEL_MIN_MB", 16, 0)
POOL_IDLE_S = Number("TB_ROOFLINE_POOL_IDLE_S", 60.0, 0)
REMOTE_TIMEOUT_S = Number("TB_ROOFLINE_REMOTE_TIMEOUT_S", 10.0, 0, exclusive=True)
REMOTE_ATTEMPTS = Number("TB_ROOFLINE_REMOTE_ATTEMPTS", 2, 1, integer=True)
# A store that keeps sending, slowly, never trips the read timeout: these bound the whole.
READ_DEADLINE_S = Number("TB_ROOFLINE_READ_DEADLINE_S", 300.0, 0, exclusive=True)
REQUEST_DEADLINE_S = Number("TB_ROOFLINE_REQUEST_DEADLINE_S", 600.0, 0, exclusive=True)
CLUSTER_CONNECT_S = Number("TB_ROOFLINE_CLUSTER_CONNECT_S", 10.0, 0, exclusive=True)
CLUSTER_STALL_S = Number("TB_ROOFLINE_CLUSTER_STALL_S", 60.0, 0, exclusive=True)
MCP_MAX_ANSWER_KB = Number("TB_ROOFLINE_MCP_MAX_ANSWER_KB", 256, 0, exclusive=True)
MAX_ANSWER_MB = Number("TB_ROOFLINE_MAX_ANSWER_MB", 32, 0, exclusive=True)

CACHE_DIR = "TB_ROOFLINE_CACHE_DIR"
DEVICE_FILE = "TB_ROOFLINE_DEVICE_FILE"
ENGINE_METRICS = "TB_ROOFLINE_ENGINE_METRICS"
MODEL_CONFIG = "TB_ROOFLINE_MODEL_CONFIG"
SCHEDULER = "TB_ROOFLINE_SCHEDULER"
NUMBERS = (
    MAX_FILE_MB,
    MAX_EVENTS,
    MEMORY_CACHE_MB,
    MEMORY_BUDGET_MB,
    CACHE_MAX_MB,
    REMOTE_RESCAN_S,
    YOUNG_FILE_S,
    WORKERS,
    PARALLEL_MIN_MB,
    POOL_IDLE_S,
    REMOTE_TIMEOUT_S,
    REMOTE_ATTEMPTS,
    READ_DEADLINE_S,
    REQUEST_DEADLINE_S,
    CLUSTER_CONNECT_S,
    CLUSTER_STALL_S,
    MCP_MAX_ANSWER_KB,
    MAX_ANSWER_MB,
)
_warned: set = set()


def parse(setting: Number, value: str | None) -> tuple[float, str | None]:
    """(the value to use, the complaint about `value` or None): the one rule."""
    text = (value or "").strip()
    if not text:
        return setting.default, None
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    ok = math.isfinite(number) and (
        number > setting.minimum if setting.exclusive else number >= setting.minimum
    )
    if ok and setting.integer and number != int(number):
        ok = False
    if not ok:
        bound = ("greater than" if setting.exclusive else "at least") + f" {setting.minimum:g}"
        kind = "an integer" if setting.integer else "a number"
        default = setting.default if setting.default else "automatic"
        return setting.default, (
            f"{setting.name}={text!r} is not {kind} {bound}; using the default ({default})"
        )
    return (int(number) if setting.integer else number), None


# Defaults one call sets for what it runs in its own thread (below the environment): the CLI's
# for one command (serve/cli/main.py). Other threads, and the caller after the call, never see them.
_call_defaults: contextvars.ContextVar = contextvars.ContextVar(
    "tb_roofline_defaults", default=types.MappingProxyType({})
)


def run_with_defaults(values: dict, fn, *args):
    """fn(*args) with `values` (variable name -> text) as those settings' defaults for this
    call alone: a variable set in the environment still wins; an empty one counts as unset."""

    def call():
        _call_defaults.set({**_call_defaults.get(), **values})
        return fn(*args)

    return contextvars.copy_context().run(call)


def number(setting: Number, environ=None) -> float:
    """The setting's value from the environment (bad values: one warning, the default)."""
    raw = (os.environ if environ is None else environ).get(setting.name)
    if environ is None and not (raw or "").strip():
        raw = _call_defaults.get().get(setting.name, raw)
    value, complaint = parse(setting, raw)
    if complaint and (setting.name, raw) not in _warned:
        _warned.add((setting.name, raw))
        import logging

        logging.getLogger(__name__).warning("tb-roofline: %s", complaint)
    return value


def text(name: str, environ=None) -> str:
    environ = os.environ if environ is None else environ
    return (environ.get(name) or "").strip()


def mb(setting: Number, environ=None) -> int:
    """A size setting in bytes."""
    return int(number(setting, environ) * (1 << 20))


# The README's settings table, in its order: (setting, meaning, default where the number alone
# does not say it). A new setting gets a row here; `markdown_table` renders them.
ROWS = (
    (
        CACHE_DIR,
        "the disk cache; `off` turns it off. Created `0700` (whatever the umask, each missing "
        "parent too, only under parents that pass the checks); refused (cache off, with a "
        "warning) when a component is a symlink (but for the home directory's own links, "
        "docs/design.md), another user owns it or others may write to it, or when it lies "
        "inside the logdir. Entries live in its `entries/` subfolder",
        "`$XDG_CACHE_HOME/tb-roofline`, else `~/.cache/tb-roofline`",
    ),
    (
        CACHE_MAX_MB,
        "disk cache size; least recently used entries go first. Several TensorBoard servers "
        "may share it",
        None,
    ),
    (
        MEMORY_CACHE_MB,
        "memory for the caches of one server, by bytes: 35% read profiles, 45% analyses, 20% "
        "encoded answers (a 5,000-op run takes about 10 MB of analysis, a 50,000-op one about "
        "100 MB)",
        None,
    ),
    (
        MEMORY_BUDGET_MB,
        "memory the conversions in flight may take together, apart from the caches; a profile "
        "estimated or measured past it is refused (`413 too_large` naming this setting), and a "
        "server that runs out of memory says to lower it (docs/design.md)",
        None,
    ),
    (REMOTE_RESCAN_S, "seconds between listings of a remote logdir", None),
    (
        REMOTE_TIMEOUT_S,
        "a remote store silent this long (connect or read) has failed: the request is tried "
        "again, up to `TB_ROOFLINE_REMOTE_ATTEMPTS` times, then `504 storage_timeout` names "
        "the store",
        None,
    ),
    (REMOTE_ATTEMPTS, "attempts of one remote request", None),
    (
        READ_DEADLINE_S,
        "seconds one remote file's read (or one listing) may take in all: a store that sends a "
        "few bytes a second never trips the read timeout (`TB_ROOFLINE_REMOTE_TIMEOUT_S`, "
        "10 s), so the whole read is cut here (`504 storage_timeout` naming the store and "
        "this setting)",
        None,
    ),
    (
        REQUEST_DEADLINE_S,
        "seconds one HTTP request may wait on a remote store in all (its stats and reads), "
        "whatever the files' own deadlines",
        None,
    ),
    (MAX_FILE_MB, "larger profiles are refused (`413 too_large`)", None),
    (
        MAX_EVENTS,
        "a PyTorch trace with more events is refused (`413 too_large`); a server that runs "
        "out of memory says to lower it",
        None,
    ),
    (
        YOUNG_FILE_S,
        "a file changed within this many seconds that does not parse is watched for 1 s: "
        "still being written (`503 profile_incomplete`, retried later) if it grows or its "
        "mtime moves, else damaged (a host not read: the CLI exits 3 naming it); age alone "
        "never decides",
        None,
    ),
    (
        DEVICE_FILE,
        "a device file for profiles without peaks, where no `roofline_device.json` lies "
        "beside the profile or above it in the logdir (docs/device_peaks.md)",
        "",
    ),
    (
        ENGINE_METRICS,
        "a serving engine's saved `/metrics` (vLLM or SGLang with `--enable-mfu-metrics`) whose "
        "FLOP and byte counters the guidance sets beside the profile's, per serving step, "
        "where no `engine_metrics.prom` lies beside the profile or above it (docs/serving.md)",
        "",
    ),
    (
        MODEL_CONFIG,
        "a serving model's Hugging Face `config.json` whose sliding-window layers clamp the "
        "attention counts of a PyTorch serving trace, in place of the nearest "
        "`model_config.json` beside the profile or above it (docs/serving.md)",
        "",
    ),
    (
        WORKERS,
        "processes that read TPU planes and hosts at once (the reading one and its workers); "
        "`1`: no workers",
        "the cores this process may use",
    ),
    (
        PARALLEL_MIN_MB,
        "profiles (all hosts of a request together) smaller than this are read without workers",
        None,
    ),
    (
        POOL_IDLE_S,
        "seconds idle workers wait for the next conversion before they exit; `0`: they leave "
        "as soon as one is done (less memory while the model runs, a new worker per "
        "conversion)",
        "60 (the CLI: 0)",
    ),
    (SCHEDULER, "a Dask scheduler to convert on (`docs/cluster.md`)", ""),
    (
        CLUSTER_CONNECT_S,
        "a scheduler silent this long is unreachable; a cluster without any worker this long "
        "has failed",
        None,
    ),
    (
        CLUSTER_STALL_S,
        "a cluster that finishes no conversion this long has failed (CLI: exit 2; "
        "TensorBoard: converts locally)",
        None,
    ),
    (
        MCP_MAX_ANSWER_KB,
        "the largest MCP answer; a longer page is cut, with `next_offset` and a hint",
        None,
    ),
    (
        MAX_ANSWER_MB,
        "the largest `/ops` or `/program` answer (JSON); a longer one holds the first rows "
        "that fit and says so (`capped_by`, `next_offset`; `docs/http_api.md`); the tab notes "
        "it and loads more; `/export` is never capped",
        None,
    ),
)


def _shown(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) and value >= 10_000 else f"{value:g}"


def _row(setting, meaning: str, default: str | None) -> str:
    if isinstance(setting, str):  # a text setting: no number, no minimum
        return f"| `{setting}` | {default or ''} | | {meaning} |"
    minimum = ("> " if setting.exclusive else "") + _shown(setting.minimum)
    shown = _shown(setting.default) if default is None else default
    return f"| `{setting.name}` | {shown} | {minimum} | {meaning} |"


def markdown_table() -> str:
    """The README's table of every setting (its variable, default, minimum and meaning)."""
    head = "| variable | default | minimum | meaning |\n|---|---|---|---|\n"
    return head + "\n".join(_row(*r) for r in ROWS) + "\n"
