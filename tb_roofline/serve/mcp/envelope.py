"""The envelope of every MCP answer: what each shares apart from the numbers (`tools.py`,
`op_tools.py` make those):

- versions: `server_version` (tb-roofline's) and `schema_version` (the shape of the tools'
  answers: docs/mcp.md's changelog says what changed) on every answer, errors included;
- a byte cap: a page whose JSON would exceed TB_ROOFLINE_MCP_MAX_ANSWER_KB is cut to fit,
  with `next_offset` at the first row left out and a `truncated` hint (an answer travels twice
  on the wire, as text and as structured content: the cap keeps both under the official
  HTTP client's 1 MiB event limit);
- choices: a filter value matched without regard to case against the values the run has; a
  value it has not is an error listing those values (never a silently empty page);
- diagnostics of many hosts grouped: one entry per (severity, code, message with the host
  named `<host>`), with its count and its first hosts.
"""

from __future__ import annotations

import json
import re

from tensorboard import errors as tb_errors

from tb_roofline import errors, settings

SCHEMA_VERSION = "4"
FIRST_HOSTS = 5  # hosts named per grouped diagnostic


def server_version() -> str:
    import tb_roofline

    return tb_roofline.__version__


def versions() -> dict:
    return {"server_version": server_version(), "schema_version": SCHEMA_VERSION}


class InternalError(tb_errors.PublicError):
    """A bug, told to the client as one failed call."""

    http_code = 500
    code = "internal"


class ChoiceError(errors.InvalidArgumentError):
    """An argument value that is not one of the values it may take: names them."""

    def __init__(self, message: str, field: str, valid):
        super().__init__(message)
        self.field = field
        self.valid = list(valid)


def choose(field: str, wanted, valid, where: str = "this run") -> list:
    """`wanted` with each value spelt as in `valid` (matched without regard to case); a
    ChoiceError listing `valid` for any value not among them."""
    if not wanted:
        return []
    by_lower: dict = {}
    for v in valid:
        by_lower.setdefault(str(v).lower(), v)
    out, unknown = [], []
    for w in wanted:
        hit = by_lower.get(str(w).lower())
        if hit is None:
            unknown.append(w)
        else:
            out.append(hit)
    if unknown:
        raise ChoiceError(
            f"{field}: {', '.join(map(repr, unknown))} not among the values of "
            f"{where}: {', '.join(map(repr, valid)) or 'none'}",
            field,
            valid,
        )
    return out


def max_answer_bytes() -> int:
    return int(settings.number(settings.MCP_MAX_ANSWER_KB) * 1024)


def _size(answer) -> int:
    return len(json.dumps(answer, separators=(",", ":")))


def fit(
    answer: dict, key: str, offset: int, total: int, cap: int | None = None, paged: bool = True
) -> dict:
    """`answer` with its page `answer[key]` cut so that its JSON fits `cap` bytes; the cut
    answer's `next_offset` is the first row left out and `truncated` says how to go on (a
    list that is not paged, `paged=False`: how to ask for less)."""
    cap = max_answer_bytes() if cap is None else cap
    rows = answer[key]
    if _size(answer) <= cap or not rows:
        return answer
    used, n = _size(dict(answer, **{key: []})), 0
    for row in rows:  # the most rows that fit, leaving room for the hint
        used += _size(row) + 1
        if used > cap - 400:
            break
        n += 1
    kept = rows[: max(n, 1)]  # at least one row: a page must move on
    nxt = offset + len(kept)
    out = dict(answer, **{key: kept})
    cut = f"the answer was cut to {len(kept)} of its {len(rows)} {key} to stay under {cap} bytes"
    if paged:
        out["next_offset"] = nxt if nxt < total else None
        hint = f"{cut}: call again with offset={nxt}, or ask for fewer columns (columns=[...])"
    else:
        hint = f"{cut}: ask for less (one host, one program_id or precision)"
    out["truncated"] = {"rows_returned": len(kept), "max_answer_bytes": cap, "hint": hint}
    return out


def group_diagnostics(diags: list, hosts: list) -> list:
    """One entry per diagnostic that several hosts share (the same severity, code and
    message once the host's name is taken out): the first host's words, `count` and the
    first FIRST_HOSTS `hosts`."""
    names = sorted((h for h in hosts if h), key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(h) for h in names)) if names else None
    groups: dict = {}
    for d in diags:
        message = d["message"]
        found = pattern.findall(message) if pattern is not None else []
        general = pattern.sub("<host>", message) if pattern is not None else message
        key = (d["severity"], d["code"], general)
        g = groups.get(key)
        if g is None:  # (a host left out: its name is one of `hosts`, not the group's)
            g = groups[key] = dict(
                {k: v for k, v in d.items() if k != "skipped_host"}, count=0, hosts=[]
            )
        g["count"] += 1
        for h in found[:1]:
            if h not in g["hosts"] and len(g["hosts"]) < FIRST_HOSTS:
                g["hosts"].append(h)
    return list(groups.values())


def error_answer(exc, status: int, code: str, valid: dict | None) -> dict:
    """The structured content of a failed call: the HTTP API's message, status and code,
    the valid values of the argument at fault where they are known, the versions."""
    error = {"message": str(exc), "status": status, "code": code}
    if valid:
        error.update(valid)
    return {"error": error, **versions()}
