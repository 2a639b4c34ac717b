"""JSON of a small settings file (a device file, a workload file) with its nesting and its
numbers bounded, so a hostile file is a clear error rather than a deep recursion or a number
no field can hold."""

from __future__ import annotations

import json
import math
import os
import re

MAX_JSON_DEPTH = 32  # a device or workload file nests 4 levels; 1,000 `[` must not recurse
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def read_small_text(path: str, max_bytes: int, error, what: str) -> str:
    """A local file of at most `max_bytes` as UTF-8 text; `error` (an exception class) names the
    file and what is wrong with it (`what`: the kind of file, for the message)."""
    name = os.path.basename(path)
    try:
        if os.path.getsize(path) > max_bytes:
            raise error(f"{name}: too large for {what}")
        with open(path, encoding="utf-8") as f:
            return f.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{name}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"{name}: not UTF-8 text") from None


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON text (strings skipped)."""
    depth = deepest = 0
    for c in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def parse_json_file(text: str, where: str, error=ValueError, known_keys=frozenset()):
    """JSON of a small settings file with its nesting bounded: `error(message)` names `where`
    and the problem (never the text). A number no field can hold (an integer of more than
    MAX_INT_DIGITS digits, NaN, Infinity, a float beyond the float range) is an error that
    names its field: by key where the key is in `known_keys`, else by position (a file's own
    key names are never quoted)."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise error(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_OutOfRange
        )
    except json.JSONDecodeError as exc:
        raise error(
            f"{where}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise error(f"{where}: nested too deeply") from None
    found = _first_out_of_range(data, "", known_keys)
    if found:
        path, bad = found
        raise error(
            f"{where}: {path or 'the top level'}: {bad} is out of range; give a "
            f"finite number (an integer of at most {MAX_INT_DIGITS} digits)"
        )
    return data


MAX_INT_DIGITS = 30  # more than any count or FLOP figure needs, far below the float range


class _OutOfRange:
    """A JSON number no field can hold, kept in place until its field is named."""

    __slots__ = ("what",)

    def __init__(self, text: str):
        self.what = text if text in ("NaN", "Infinity", "-Infinity") else "a number"

    def __str__(self) -> str:
        return self.what


def _parse_int(text: str):
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:  # before int(): 5,000 digits is a ValueError, 400 overflow
        bad = _OutOfRange("")
        bad.what = f"an integer of {digits} digits"
        return bad
    return int(text)


def _parse_float(text: str):
    value = float(text)
    if math.isfinite(value):
        return value
    bad = _OutOfRange("")
    bad.what = "a number beyond the float range"
    return bad


def _first_out_of_range(value, path: str, known_keys):
    """(field path, the value) of the first out-of-range number, or None."""
    if isinstance(value, _OutOfRange):
        return path, value
    if isinstance(value, dict):
        items = (
            (k if k in known_keys else f"entry {i + 1}", v)
            for i, (k, v) in enumerate(value.items())
        )
    elif isinstance(value, list):
        items = ((f"item {i + 1}", v) for i, v in enumerate(value))
    else:
        return None
    for name, child in items:
        found = _first_out_of_range(child, f"{path}.{name}" if path else name, known_keys)
        if found:
            return found
    return None
