"""The optional compiled decoder of the Kineto reader's event batches (the `fast` extra).

With msgspec installed (`pip install tb-roofline[fast]`), a batch of events is decoded straight
into structs holding only the fields the collector reads: every other key of an event (`id`,
`bp`, `s`...) is skipped inside the compiled parser and never becomes a Python object, and an
event of a phase the collector never reads (flows, a third of a training trace; metadata) is
told by its `ph` and keeps no field at all. An event's `args` is first kept as its JSON text
and decoded (as the standard library would) only for the events the collector reads: complete
events of the categories it keeps and counter events; other categories' args are checked as
JSON and dropped.

Without msgspec, or for a batch it refuses (anything but a list of objects, an event without a
known `ph`, NaN, numbers beyond a double or int64, invalid escapes, deep nesting...), the
reader decodes the batch with the standard library as before, so a damaged file gives the
same events, errors and messages either way. The one difference: values the reader never
reads (the keys above, the args of events it skips, every field of the phases it skips) are
checked for JSON syntax only, so a number too long to convert there does not refuse the file.
Floats go through the same `parse_float` as the standard path: epoch times keep their
nanoseconds (event_fields.Exact). docs/benchmarks.md has the measurements behind the choice of
msgspec over orjson and pysimdjson.
"""

from __future__ import annotations

from typing import Any, ClassVar, Union

from tb_roofline.readers.kineto.event_fields import ns_hook, parse_float


class Refused(Exception):
    """A batch the compiled path does not take (a value of a type or range it does not
    handle): the standard library decodes it."""


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
    NO_VALUE = msgspec.Raw(b"")  # a key the args lack (JSON null is b"null")

    class _Tagged(msgspec.Struct, gc=False, tag_field="ph"):
        """An event, its struct chosen by its `ph` (msgspec reads it before the rest): an
        event of a phase the collector never reads keeps no field. An event without `ph`, or
        of a phase not named here, refuses the batch (the standard path then judges it)."""

    class _Read(_Tagged):
        """The keys the collector reads of an event it reads; where the event has none, what
        the collector's `ev.get(key, default)` reads (None, `dur` 0), and MISSING for `name`,
        whose default depends on the category. Times are exact ns (`event_fields.Ns`) where
        the JSON has a float, µs where an int. `args` is its JSON text until it is read. Types
        are what real traces write: any other value refuses the batch (the standard path then
        judges it)."""

        name: str | msgspec.UnsetType = msgspec.UNSET
        pid: int | str | None = None
        tid: int | str | None = None
        ts: Any = None
        dur: Any = 0
        args: msgspec.Raw = NO_VALUE

    class Event(_Read, tag="X"):
        """One complete ("X") event: its category tells what the collector reads of it."""

        ph: ClassVar[str] = "X"
        cat: str | None = None

    class _Counter(_Read, tag="C"):
        """A counter event (PM sampling, environment counters): read whole (pm_samples.py),
        all but its category, which nothing reads (MISSING: a key the dict leaves out)."""

        ph: ClassVar[str] = "C"
        cat: ClassVar[Any] = MISSING

    class _Instant(_Read, tag="i"):
        """An instant event: the record window's end is one (its category is not read)."""

        ph: ClassVar[str] = "i"
        cat: ClassVar[Any] = MISSING

    def _unread(phase: str) -> type:
        """The struct of a phase the collector skips (flows, metadata, async and object
        events...): no field is decoded; what the collector would read of it is None."""
        attrs = {"ph": phase, "cat": None, "name": MISSING, "pid": None, "tid": None}
        attrs.update(ts=None, dur=0, args=None)
        return msgspec.defstruct(
            f"Unread_{ord(phase)}", [], bases=(_Tagged,), tag=phase, namespace=attrs
        )

    # Every other phase of the Trace Event Format (Kineto writes "s" and "f" flows, "M"
    # metadata): skipped whole by the collector, whatever their fields hold.
    UNREAD_PHASES = "BEIbneSTpFstfPONDMVvRc()"
    EVENT_TYPES: tuple = (Event, _Counter, _Instant) + tuple(map(_unread, UNREAD_PHASES))

    def _arg(key: str, default: Any = NO_VALUE) -> Any:
        return msgspec.field(name=key, default=default)

    class CpuArgs(msgspec.Struct, gc=False):
        """What a `cpu_op` collects from its args (the cost's inputs as JSON text: the key of
        its cost, decoded once per distinct key)."""

        ext: int = _arg("External id", -1)
        dims: msgspec.Raw = _arg("Input Dims")
        types: msgspec.Raw = _arg("Input type")
        concrete: msgspec.Raw = _arg("Concrete Inputs")
        flop: msgspec.Raw = _arg("kernel_flop")
        gb: msgspec.Raw = _arg("kernel_num_gb")
        collective: msgspec.Raw = _arg("Collective name")

    class RuntimeArgs(msgspec.Struct, gc=False):
        """What a runtime call collects from its args."""

        corr: int = _arg("correlation", -1)
        ext: int = _arg("External id", -1)

    class GpuArgs(msgspec.Struct, gc=False):
        """What device activity collects from its args (`grid` as its JSON text: interned
        by it)."""

        device: int = _arg("device", 0)
        nbytes: float = _arg("bytes", 0.0)
        corr: int = _arg("correlation", -1)
        ext: int = _arg("External id", -1)
        stream: int = _arg("stream", -1)
        grid: msgspec.Raw = _arg("grid")
        collective: msgspec.Raw = _arg("Collective name")

    FIELDS: tuple = ("ph", "cat") + _Read.__struct_fields__
    _any_event: Any = Union[EVENT_TYPES]  # a union built from a tuple
    _decoder: Any = msgspec.json.Decoder(list[_any_event], float_hook=ns_hook)
    _args = msgspec.json.Decoder(float_hook=parse_float).decode
    ARGS_DECODERS: dict = {
        kind: msgspec.json.Decoder(t).decode
        for kind, t in (("cpu", CpuArgs), ("runtime", RuntimeArgs), ("gpu", GpuArgs))
    }
    DecodeError: Any = (msgspec.DecodeError, Refused)
else:
    MISSING = object()
    NO_VALUE = None
    FIELDS = ()
    _decoder = None
    _args = None
    ARGS_DECODERS = {}
    DecodeError = (ValueError,)


def truncated(exc: Exception) -> bool:
    """Whether msgspec refused a text for ending inside a value (the batch was cut inside a
    string): text that no JSON parser reads."""
    return type(exc) is not Refused and str(exc).startswith("Input data was truncated")


def decode(text: str | bytes | bytearray | memoryview) -> list:
    """The Events of a JSON array's text (DecodeError when msgspec refuses it)."""
    return _decoder.decode(text)


def batch_structs(batch: list) -> list:
    """The Events with each read event's `args` decoded (those of the others dropped):
    what `Collector.on_structs` reads."""
    read, decode = READ_CATEGORIES, _args
    for ev in batch:
        raw = ev.args
        if raw is None:  # an unread phase's event: it keeps no field
            continue
        if raw is NO_VALUE:
            ev.args = None
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


def read_dict(ev) -> dict:
    """An Event whose `args` is still its JSON text as the standard path's dict."""
    d = as_dict(ev)
    d["args"] = None if d["args"] is NO_VALUE else _args(d["args"])
    return d
