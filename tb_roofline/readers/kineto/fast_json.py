"""The optional compiled decoder of the Kineto reader's event batches (the `fast` extra).

With msgspec installed (`pip install tb-roofline[fast]`), a batch of events is decoded straight
into `Event` structs holding only the fields the collector reads: every other key of an event
(`id`, `bp`, `s`, flow fields...) is skipped inside the compiled parser and never becomes a
Python object. Without it, or for a batch it refuses (anything but a list of objects, NaN,
numbers beyond a double or int64, invalid escapes, deep nesting...), the reader decodes the
batch with the standard library as before: a damaged file gives the same events, errors and
messages either way. Floats go through the same `parse_float` as the standard path, so epoch
times keep their nanoseconds (event_fields.Exact). docs/benchmarks.md has the measurements
behind the choice of msgspec over orjson and pysimdjson.
"""

from __future__ import annotations

from typing import Any

from tb_roofline.readers.kineto.event_fields import parse_float

try:
    import msgspec
except ImportError:  # the extra is not installed: the standard library decodes every batch
    msgspec = None  # type: ignore[assignment]

if msgspec is not None:
    MISSING: Any = msgspec.UNSET

    class Event(msgspec.Struct, gc=False):
        """One trace event: the keys the collector reads, MISSING where the event has none."""

        ph: Any = msgspec.UNSET
        cat: Any = msgspec.UNSET
        name: Any = msgspec.UNSET
        pid: Any = msgspec.UNSET
        tid: Any = msgspec.UNSET
        ts: Any = msgspec.UNSET
        dur: Any = msgspec.UNSET
        args: Any = msgspec.UNSET

    FIELDS = Event.__struct_fields__
    _decoder: Any = msgspec.json.Decoder(list[Event], float_hook=parse_float)
    DecodeError: Any = msgspec.DecodeError
else:
    MISSING = object()
    FIELDS = ()
    _decoder = None
    DecodeError = ValueError


def decoder():
    """The typed batch decoder (text -> list of Event), or None without msgspec."""
    return None if _decoder is None else _decoder.decode


def as_dict(ev) -> dict:
    """An Event as the dict the standard path would give for it (keys it lacks left out)."""
    return {k: v for k in FIELDS if (v := getattr(ev, k)) is not MISSING}
