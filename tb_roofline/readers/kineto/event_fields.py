"""The fields of one Kineto event, checked: times as exact integer ns, numbers within the
limits beyond which a value is corrupt, `BadEvent` for anything missing or malformed (the
collector then skips the whole event, so its columns stay aligned)."""

from __future__ import annotations

import hashlib


class BadEvent(Exception):
    """An event with a missing or malformed field."""


# Limits on event fields: beyond these a value is corrupt (and would overflow int64 ps).
MAX_TS_NS = 2**62  # ~2116 in epoch ns
MAX_DUR_NS = 10**15  # ~11.6 days
MAX_SPAN_NS = 2**52  # ~52 days: exact in float64 ns, and int64 in ps
MAX_STEP = 2**62
MAX_DEVICE = 2**31


class Exact(float):
    """A JSON number with more digits than a double keeps (epoch µs with ns fractions); its
    text gives the exact value (docs/pytorch_traces.md, "Timestamps and type names")."""

    text: str  # the number as written, set by parse_float


def parse_float(text: str, _float=float):
    if len(text) < 16:
        return _float(text)
    value = Exact(text)
    value.text = text
    return value


class Ns(int):
    """A time already in exact integer ns: what `ns_hook` makes of a JSON float (µs) while the
    compiled decoder reads it, so no float of a time is converted twice."""


def ns_hook(text: str) -> Ns:
    """A time's float text (µs) as `ns_of` converts it (`parse_float`, then its rule); beyond
    every limit when it is out of range, so the event is refused as the standard path does."""
    value = parse_float(text)
    if type(value) is Exact:
        return Ns(exact_ns(text))
    if -1e18 < value < 1e18:
        return Ns(round(value * 1000))
    return Ns(2**63)


def finite(value, limit: float) -> float:
    """A JSON number (not a bool) as a float with |value| < limit, else BadEvent."""
    t = type(value)
    if t is float or t is Exact:
        if -limit < value < limit:  # False for NaN and ±inf
            return float(value)
    elif t is int and -limit < value < limit:
        return float(value)
    raise BadEvent


def ns_of(value, limit: int) -> int:
    """A time in µs (JSON int or number, maybe with a ns fraction) as exact integer ns."""
    t = type(value)
    if t is int:
        ns = value * 1000
    elif t is Ns:
        ns = int(value)
    elif t is Exact:
        ns = exact_ns(value.text)
    elif t is float:
        if value != value:
            raise BadEvent
        ns = round(value * 1000) if -1e18 < value < 1e18 else limit
    else:
        raise BadEvent
    if not -limit < ns < limit:
        raise BadEvent
    return ns


def exact_ns(text: str) -> int:
    """'1712181098123456.789' (µs) -> 1712181098123456789 (ns), digits beyond ns dropped."""
    if "e" in text or "E" in text:
        return round(float(text) * 1000)
    whole, _, frac = text.partition(".")
    neg = whole.startswith("-")
    ns = abs(int(whole or "0")) * 1000 + int((frac + "000")[:3])
    return -ns if neg else ns


def ts_ns(value) -> int:
    return ns_of(value, MAX_TS_NS)


def dur_ns(value) -> int:
    return ns_of(value, MAX_DUR_NS)


def event_args(ev) -> dict:
    return args_dict(ev.get("args"))


def args_dict(args) -> dict:
    """An event's `args` ({} when it has none), BadEvent when it is not an object."""
    if args is None:
        return {}
    if type(args) is not dict:
        raise BadEvent
    return args


def int_or(value, default):
    """An integer JSON value (int, or integral float) that fits in int64, else default."""
    if type(value) is int:  # the usual case first (ids, devices, streams)
        return value if -(2**63) <= value < 2**63 else default
    if isinstance(value, bool):
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    return default


def bounded_repr(value, limit: int = 1024) -> str:
    """repr(value) for a cache key, a digest when it is long (distinct stays distinct)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return "#" + hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()
