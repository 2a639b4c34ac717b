"""Every `TB_ROOFLINE_*` environment variable, read by one rule.

A number must be finite and at least the variable's minimum (an integer where the variable
counts something). Anything else — a typo, a negative size, `inf` — logs one warning naming
the variable, the value and the default, and the default is used: a bad environment variable
must never stop TensorBoard from loading the plugin. Text settings (paths) are taken as given,
stripped. Values are read at each call, so tests and long-running servers see changes.

| variable | meaning | default | minimum |
|---|---|---|---|
| TB_ROOFLINE_MAX_FILE_MB | largest profile file read (MB) | 4096 | > 0 |
| TB_ROOFLINE_MAX_EVENTS | most trace events in a PyTorch trace | 5,000,000 | 1 |
| TB_ROOFLINE_MEMORY_CACHE_MB | memory for cached profiles, analyses, answers (MB) | 2048 | 0 |
| TB_ROOFLINE_MEMORY_BUDGET_MB | memory conversions in flight may take (MB) | 8192 | > 0 |
| TB_ROOFLINE_CACHE_DIR | disk cache directory, or off | ~/.cache/tb-roofline | |
| TB_ROOFLINE_CACHE_MAX_MB | disk cache size (MB; 0 = off) | 2048 | 0 |
| TB_ROOFLINE_DEVICE_FILE | a device file for profiles without peaks | | |
| TB_ROOFLINE_REMOTE_RESCAN_S | least seconds between listings of a remote logdir | 15 | 0 |
| TB_ROOFLINE_YOUNG_FILE_S | a file younger than this that fails to parse is watched for 1 s: still being written if it grows (s) | 30 | > 0 |
| TB_ROOFLINE_WORKERS | reader processes | the usable cores | 1 |
| TB_ROOFLINE_PARALLEL_MIN_MB | profile size below which one process reads (MB) | 16 | 0 |
| TB_ROOFLINE_POOL_IDLE_S | seconds idle reader processes wait for more work (CLI: 0) | 60 | 0 |
| TB_ROOFLINE_REMOTE_TIMEOUT_S | a remote store silent this long has failed (s) | 10 | > 0 |
| TB_ROOFLINE_REMOTE_ATTEMPTS | attempts of one remote request | 2 | 1 |
| TB_ROOFLINE_READ_DEADLINE_S | one remote file's read or one listing, start to end (s) | 300 | > 0 |
| TB_ROOFLINE_REQUEST_DEADLINE_S | what one request may wait on a remote store in all (s) | 600 | > 0 |
| TB_ROOFLINE_SCHEDULER | a Dask scheduler to convert on (tcp://HOST:8786; docs/cluster.md) | | |
| TB_ROOFLINE_CLUSTER_CONNECT_S | a scheduler silent this long is unreachable (s) | 10 | > 0 |
| TB_ROOFLINE_CLUSTER_STALL_S | no conversion unit done and no live worker this long is an error (s) | 60 | > 0 |
| TB_ROOFLINE_MCP_MAX_ANSWER_KB | largest MCP answer (KB of JSON; a longer page is cut) | 256 | > 0 |
| TB_ROOFLINE_MAX_ANSWER_MB | largest /ops or /program answer (MB of JSON) | 32 | > 0 |
"""  # noqa: E501 (a table)

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
