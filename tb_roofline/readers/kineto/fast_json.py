"""The optional compiled decoder of the Kineto reader's event batches (the `fast` extra).

With msgspec installed (`pip install tb-roofline[fast]`), a batch of events is decoded straight
into `Event` structs holding only the fields the collector reads: every other key of an event
(`id`, `bp`, `s`, flow fields...) is skipped inside the compiled parser and never becomes a
Python object. An event's `args` is first kept as its JSON text and decoded (as the standard
library would) only for the events the collector reads: complete events of the categories it
keeps and counter events; flow events' and other categories' args are checked as JSON and
dropped.

Without msgspec, or for a batch it refuses (anything but a list of objects, NaN, numbers beyond
a double or int64, invalid escapes, deep nesting...), the reader decodes the batch with the
standard library as before, so a damaged file gives the same events, errors and messages
either way. The one difference: values the reader never reads (the keys above, the args of
events it skips) are checked for JSON syntax only, so a number too long to convert there does
not refuse the file. Floats go through the same `parse_float` as the standard path: epoch
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

# The `cat` of the complete ("X") events whose args the collector reads (events.py).
READ_CATEGORIES = frozenset(
    {
        "cpu_op",
        "cuda_runtime",
        "cuda_driver",
        "hip_runtime",
        "hip_driver",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "user_annotation",
        "cuda_profiler_range",
    }
)

if msgspec is not None:
    MISSING: Any = msgspec.UNSET

    class Event(msgspec.Struct, gc=False):
        """One trace event: the keys the collector reads; where the event has none, what the
        collector's `ev.get(key, default)` reads (None, `dur` 0), and MISSING for `name`,
        whose default depends on the category. `args` is its JSON text until `decode_batch`
        decodes it."""

        ph: Any = None
        cat: Any = None
        name: Any = msgspec.UNSET
        pid: Any = None
        tid: Any = None
        ts: Any = None
        dur: Any = 0
        args: msgspec.Raw = None  # type: ignore[assignment]

    FIELDS: tuple = Event.__struct_fields__
    _decoder: Any = msgspec.json.Decoder(list[Event], float_hook=parse_float)
    _args = msgspec.json.Decoder(float_hook=parse_float).decode
    DecodeError: Any = msgspec.DecodeError
else:
    MISSING = object()
    FIELDS = ()
    _decoder = None
    DecodeError = ValueError


def decoder():
    """The batch decoder (text -> list of Event, DecodeError for what it refuses), or None
    without msgspec."""
    return None if _decoder is None else decode_batch


def decode_batch(text: str) -> list:
    """The events of a JSON array's text, each read event's `args` decoded (DecodeError when
    one refuses: the caller then gives the whole batch to the standard library)."""
    batch = _decoder.decode(text)
    read, decode = READ_CATEGORIES, _args
    for ev in batch:
        raw = ev.args
        if raw is None:
            continue
        ph = ev.ph
        if ph == "C" or (ph == "X" and type(ev.cat) is str and ev.cat in read):
            ev.args = decode(raw)
        else:
            ev.args = None  # never read: not kept
    return batch


def as_dict(ev) -> dict:
    """An Event as a dict the collector reads as it reads the standard path's (a key the
    event lacks is left out, or holds what `get` would default it to)."""
    return {k: v for k in FIELDS if (v := getattr(ev, k)) is not MISSING}
