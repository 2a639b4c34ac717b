"""Stage 1 of the Kineto reader: the file's JSON text streamed into the event collector.

A trace is one JSON object whose `traceEvents` array may hold millions of events: the array is
decoded in batches of a few MB (events.Collector keeps them as columns), every other top-level
key whole. Limits: the inflated text (TB_ROOFLINE_MAX_FILE_MB), the number of events
(TB_ROOFLINE_MAX_EVENTS), runs of whitespace; a file that is still being written or changes
while it is read is "incomplete" (503), a malformed one a format error (422).
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import re
import zlib

from tb_roofline import settings, storage
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.readers import meter
from tb_roofline.readers.files import check_profile_file
from tb_roofline.readers.kineto import fast_batch, fast_json
from tb_roofline.readers.kineto.event_fields import parse_float as _parse_float
from tb_roofline.readers.kineto.events import Collector

CHUNK_CHARS = 4 << 20
# Memory per trace grows with its events (the trace is streamed, its events kept as columns):
# a trace with more events is refused (413) before it can exhaust the server's memory.
MAX_EVENTS = int(settings.MAX_EVENTS.default)  # TB_ROOFLINE_MAX_EVENTS, read by settings.py
MAX_EVENTS_ENV = settings.MAX_EVENTS.name
MAX_WHITESPACE_RUN = 16 << 20  # no trace has this much whitespace in a row: a padded bomb
_NOT_WS = re.compile(r"[^ \t\r\n]")
_NOT_WS_BYTES = re.compile(rb"[^ \t\r\n]")


class _Truncated(Exception):
    pass


class _TextSource:
    """Decoded text of a (gzipped) file, read in chunks; counts the bytes it read."""

    def __init__(self, f, max_chars: int | None):
        self.f = f
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self.eof = False
        self.read_bytes = 0
        self.max_chars = max_chars
        self.ascii = True  # every chunk read so far is ASCII (its characters are its bytes)

    def _chunk(self) -> bytes:
        data = self.f.read(CHUNK_CHARS)
        self.read_bytes += len(data)
        if self.max_chars is not None and self.read_bytes > self.max_chars:
            raise ProfileTooLargeError(
                f"holds more than {self.max_chars / 2**20:.0f} MiB of JSON, over the limit "
                "(set TB_ROOFLINE_MAX_FILE_MB to raise it)"
            )
        self.eof = not data
        self.ascii = self.ascii and data.isascii()
        return data

    def read(self) -> str:
        if self.eof:
            return ""
        data = self._chunk()
        return self.decoder.decode(data, final=self.eof)

    def read_ascii(self) -> bytes | str:
        """The next chunk as bytes while the text is ASCII; decoded from the first chunk that
        is not (the stream reads on as text)."""
        if self.eof:
            return b""
        data = self._chunk()
        return data if self.ascii else self.decoder.decode(data, final=self.eof)


class _JsonStream:
    """An incremental reader of `{ "key": value, ..., "traceEvents": [ {...}, ... ], ... }`.

    Values other than traceEvents are decoded whole (they are small); the events array is
    decoded in batches of complete elements with one decode per few MB (fast path: the text up
    to the last `},` that ends a top-level element; msgspec's typed decoder when installed,
    fast_json.py, else `json.loads`), falling back to `raw_decode` one element at a time when a
    batch boundary is ambiguous. With msgspec, while the text is ASCII, the batches are cut
    from its bytes (`_ascii_batches`). Only a few MB of text are held.
    """

    WS = " \t\r\n"

    def __init__(self, src: _TextSource):
        self.src = src
        self.buf = ""
        self.pos = 0
        self.decoder = json.JSONDecoder(parse_float=_parse_float)
        self.saw_events = False
        self.shifted = 0  # characters dropped from the front of buf so far
        self.columns = True  # batches may be appended as columns (Collector.COLUMNS)
        self.collector = None  # what the batches go to (fast_batch.prepare reads what it met)

    def _more(self) -> bool:
        text = self.src.read()
        if not text and self.src.eof:
            return False
        self.shifted += self.pos
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return True

    def _skip_ws(self):
        """The next character that is not whitespace (skipped in bulk, a bounded run)."""
        run = 0
        while True:
            m = _NOT_WS.search(self.buf, self.pos)
            if m is not None:
                self.pos = m.start()
                return self.buf[self.pos]
            run += len(self.buf) - self.pos
            self.pos = len(self.buf)
            if run > MAX_WHITESPACE_RUN:
                raise ProfileFormatError(
                    f"more than {MAX_WHITESPACE_RUN >> 20} MiB of "
                    "whitespace in a row in the JSON text"
                )
            if not self._more():
                raise _Truncated("unexpected end of file")

    def _expect(self, ch):
        if self._skip_ws() != ch:  # never quote the text: the file may be anything
            raise ProfileFormatError(
                f"expected '{ch}' at offset {self.shifted + self.pos} of the JSON text"
            )
        self.pos += 1

    def _value(self):
        self._skip_ws()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except ValueError as exc:
                if not isinstance(exc, json.JSONDecodeError):  # an integer of > 4300 digits
                    raise ProfileFormatError(
                        "invalid JSON: a number too long to convert "
                        f"at offset {self.shifted + self.pos}"
                    ) from None
                # The value may just continue in the next chunk: read on (bounded), then judge.
                if not self.src.eof and len(self.buf) - self.pos < max(4 * CHUNK_CHARS, 1 << 26):
                    if self._more():
                        continue
                if self.src.eof and (
                    exc.msg.startswith("Unterminated string") or not self.buf[exc.pos :].strip()
                ):
                    raise _Truncated(str(exc)) from None
                raise ProfileFormatError(f"invalid JSON: {exc.msg}") from None
            self.pos = end
            return value

    def parse(self, on_key, on_events):
        """Calls on_key(key, value) for plain keys and on_events(list, structs) per batch of
        events (structs: fast_json.Event items, else the standard library's dicts)."""
        self._expect("{")
        first = True
        while True:
            ch = self._skip_ws()
            if ch == "}":
                self.pos += 1
                return
            if not first:
                if ch != ",":
                    raise ProfileFormatError(
                        f"expected ',' between top-level keys at offset {self.shifted + self.pos}"
                    )
                self.pos += 1
                if self._skip_ws() == "}":  # tolerate a trailing comma
                    self.pos += 1
                    return
            first = False
            key = self._value()
            if not isinstance(key, str):
                raise ProfileFormatError("top-level keys must be strings")
            self._expect(":")
            if key == "traceEvents":
                self.saw_events = True
                self._expect("[")
                self._events(on_events)
            else:
                on_key(key, self._value())

    def _events(self, on_events):
        loads = json.JSONDecoder(parse_float=_parse_float).decode
        typed = fast_batch.decoder(self.columns)
        while True:
            if (
                typed is not None
                and self.src.ascii
                and self._ascii_batches(on_events, typed, loads)
            ):
                on_events(self._slow_batch(), False)  # what the loop below would come to
                continue
            ch = self._skip_ws()
            if ch == "]":
                self.pos += 1
                return
            if ch == ",":  # between elements (after a batch or a single element)
                self.pos += 1
                continue
            while len(self.buf) - self.pos < CHUNK_CHARS and not self.src.eof:
                if not self._more():
                    break
            batch = structs = None
            buf, pos = self.buf, self.pos
            text = ""
            end = len(buf)
            for _ in range(4):
                cut = buf.rfind("},", pos, end)
                if cut < 0:
                    break
                text = "[" + buf[pos : cut + 1] + "]"
                if typed is not None:
                    try:
                        batch, structs = typed(text, self.collector), True
                    except fast_json.DecodeError as exc:  # what it refuses, the standard
                        if fast_json.truncated(exc):  # path judges; but a cut inside a
                            end = cut  # string is no batch for either: cut earlier
                            continue
                if batch is None:
                    try:
                        batch, structs = loads(text), False
                    except ValueError:
                        end = cut
                        continue
                self.pos = cut + 2
                break
            text = ""  # a few MB not kept while the batch is collected
            if batch is None:
                batch, structs = self._slow_batch(), False
            on_events(batch, structs)

    def _ascii_batches(self, on_events, typed, loads) -> bool:
        """The batches of the compiled decoder while the text is ASCII, cut and decoded in
        place as bytes: the text is copied once (into `data`), where as text it would be
        decoded, joined and sliced. `data[1:]` is what `buf` would hold, read at the same
        points; each batch is `data[pos - 1 : cut + 2]` with its first and last bytes
        (whitespace or commas between elements) made its brackets while it is decoded.
        Returns, the text in `buf` as the text loop would have it, at the array's end, at a
        chunk that is not ASCII, or where the text loop judges what comes: whitespace to read
        on, or (True) an element no batch can be cut from, for `_slow_batch`."""
        shifted, got = self.shifted, ()
        data, pos = _joined(b"", self.buf.encode("ascii")), self.pos + 1
        while True:
            m = _NOT_WS_BYTES.search(data, pos)
            if m is None or data[m.start()] == 0x5D:  # "]"
                break
            pos = m.start()
            if data[pos] == 0x2C:  # ","
                pos += 1
                continue
            while len(data) - pos < CHUNK_CHARS and not self.src.eof:
                more = self.src.read_ascii()
                shifted += pos - 1  # as `_more` drops the text before pos
                if isinstance(more, str):  # not ASCII: read on as text
                    self.buf, self.pos, self.shifted = data[pos:].decode("ascii") + more, 0, shifted
                    return False
                data, pos = _joined(memoryview(data)[pos:], more), 1
            got = self._ascii_batch(data, pos, typed, loads)
            if got is None:  # at an element no batch can be cut from
                break
            batch, structs, pos = got
            on_events(batch, structs)
            batch = None
        self.buf, self.pos, self.shifted = data[1:].decode("ascii"), pos - 1, shifted
        return got is None

    def _ascii_batch(self, data: bytearray, pos: int, typed, loads):
        """(batch, structs, where the next begins) of the elements from `pos` to the last `},`
        that cuts a batch either decoder reads, as the text loop cuts them; None: none."""
        end = len(data)
        for _ in range(4):
            cut = data.rfind(b"},", pos, end)
            if cut < 0:
                return None
            around = data[pos - 1], data[cut + 1]
            data[pos - 1], data[cut + 1] = 0x5B, 0x5D  # "[", "]"
            text = memoryview(data)[pos - 1 : cut + 2]
            try:
                return typed(text, self.collector), True, cut + 2
            except fast_json.DecodeError as exc:  # what it refuses, the standard path
                if not fast_json.truncated(exc):  # judges (a cut inside a string: neither)
                    try:
                        return loads(bytes(text).decode("ascii")), False, cut + 2
                    except ValueError:
                        pass
            finally:  # the text as it was: the text loop may read it again
                data[pos - 1], data[cut + 1] = around
            end = cut
        return None

    def _slow_batch(self) -> list:
        """Elements one by one (raw_decode) up to about one chunk; stops before the ']'.
        At least a chunk of text, so that the fast path's failed tries stay a bounded share of
        the work (a trace with '},' inside its strings must not cost many parses per event)."""
        out = []
        start = self.shifted + self.pos
        while True:
            out.append(self._value())
            ch = self._skip_ws()
            if ch != "," or self.shifted + self.pos - start >= CHUNK_CHARS:
                return out
            self.pos += 1
            ch = self._skip_ws()
            if ch == "]":
                return out


def _joined(rest, more: bytes) -> bytearray:
    """`[`, then the text left, then the next chunk: one copy of each."""
    data = bytearray(b"[")
    data += rest
    data += more
    return data


def load_kineto(
    path: str, max_bytes: int | None = None, progress=None, collector=Collector
) -> Collector:
    base = os.path.basename(path)
    before, young = check_profile_file(path, max_bytes)
    col = collector()
    total = before.st_size

    max_events = int(settings.number(settings.MAX_EVENTS))

    def on_events(batch, structs):
        if col.n_events + len(batch) > max_events:
            raise ProfileTooLargeError(
                f"holds more than {max_events:,} trace events, over the limit (set "
                f"{MAX_EVENTS_ENV} to raise it)"
            )
        if isinstance(batch, fast_batch.Prepared):
            fast_batch.commit(col, batch)
        elif structs:
            col.on_structs(batch)
        else:
            col.on_events(batch)
        # What the conversion builds grows with events, distinct names and steps, whatever
        # the bytes: told to the budget at every batch (a few MB of text).
        meter.charge(
            meter.estimate(col.n_events, len(col.names), len(col.steps)),
            f"{col.n_events:,} events, {len(col.names):,} distinct names, {len(col.steps):,} steps",
            key=path,
        )
        if progress:
            progress(min(raw.tell(), total), total)

    def on_key(key, value):
        col.meta[key] = value

    try:
        with storage.open_binary(path, size=total) as raw:
            f = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
            # The JSON text a .gz inflates to is limited like a file: it is what costs time.
            src = _TextSource(f, max_bytes)
            stream = _JsonStream(src)
            stream.columns, stream.collector = col.COLUMNS, col
            stream.parse(on_key, on_events)
    except ProfileTooLargeError as exc:  # (its kind kept: out of memory is retried later)
        raise type(exc)(f"{base} {exc}") from None
    except _Truncated as exc:
        _raise_incomplete(path, before, young, f"{base} ends early (truncated JSON: {exc})")
    except EOFError:
        _raise_incomplete(path, before, young, f"{base} ends early (truncated gzip stream)")
    except (gzip.BadGzipFile, zlib.error, OSError) as exc:
        what = str(exc)
        if what.startswith("Not a gzipped file"):  # it quotes the file's first bytes: do not
            what = "no gzip header"
        raise ProfileFormatError(f"{base} is not a readable gzip file: {what}") from None
    except UnicodeDecodeError:
        raise ProfileFormatError(f"{base} is not UTF-8 JSON text") from None
    except ProfileFormatError as exc:
        if _changed(path, before):
            raise ProfileIncompleteError(f"{base} changed while it was read") from None
        if young:
            raise ProfileIncompleteError(f"{base} does not parse yet") from None
        raise ProfileFormatError(f"{base}: {exc}") from None
    except RecursionError:
        raise ProfileFormatError(f"{base}: JSON nested too deeply") from None
    if _changed(path, before):
        raise ProfileIncompleteError(f"{base} changed while it was read")
    if not stream.saw_events:
        raise ProfileFormatError(f"{base} has no traceEvents: not a PyTorch profiler trace")
    return col


def _changed(path, before) -> bool:
    try:
        after = storage.stat(path)
    except OSError:
        return True
    return storage.version(after) != storage.version(before)


def _raise_incomplete(path, before, young, message):
    if young or _changed(path, before):
        raise ProfileIncompleteError(message) from None
    raise ProfileFormatError(message) from None
