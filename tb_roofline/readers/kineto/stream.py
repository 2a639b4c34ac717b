"""Stage 1 of the Kineto reader: the file's JSON text streamed into the event collector.

A trace is one JSON object whose `traceEvents` array may hold millions of events: the array is
decoded in batches of a few MB (events.Collector keeps them as columns), every other top-level
key whole. Limits: the inflated text (TB_ROOFLINE_MAX_FILE_MB), the number of events
(TB_ROOFLINE_MAX_EVENTS), runs of whitespace; a file that is still being written or changes
while it is read is "incomplete" (503), a malformed one a format error (422).
"""

from __future__ import annotations

import bisect
import codecs
import collections
import concurrent.futures
import gzip
import json
import os
import re
import zlib

from tb_roofline import settings, storage
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.readers import meter
from tb_roofline.readers.files import check_profile_file
from tb_roofline.readers.kineto import batch_workers, fast_batch, fast_json
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
        self.workers: batch_workers.Workers | None = None  # prepare the batches apart

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
            batches = self._ascii_batches if self.workers is None else self._ascii_batches_apart
            if typed is not None and self.src.ascii and batches(on_events, typed, loads):
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

    def _ascii_batches_apart(self, on_events, typed, loads) -> bool:
        """`_ascii_batches` with the batches decoded and prepared by worker processes
        (batch_workers.py), cut where the text loop cuts them (a batch ends at the first
        chunk end a chunk past its start, `_batch_end`, as the text loop's buffer) and
        committed in file order (`_settle`). Positions in flight are offsets in the text
        (`data[i]` is at `shifted + i - 1`); the chunks read since the first batch in flight
        are kept (`kept`), so that a batch no worker prepared is cut and decoded here as
        before. Returns as `_ascii_batches` does."""
        pool = self.workers
        if pool is None:
            return self._ascii_batches(on_events, typed, loads)
        shifted = self.shifted
        got: tuple | None = ()
        first = self.buf.encode("ascii")
        data, pos = _joined(b"", first), self.pos + 1
        kept = collections.deque([(shifted, first)])  # (offset, bytes): the text kept
        ends = [shifted + len(first)]  # the offset where each chunk read ends
        flight: collections.deque = collections.deque()  # [future, start, cut, end] each
        try:
            while True:
                m = _NOT_WS_BYTES.search(data, pos)
                ended = m is None or data[m.start()] == 0x5D  # "]": the array's end
                at_cut = False
                if m is not None and not ended:
                    pos = m.start()
                    if data[pos] == 0x2C:  # ","
                        pos += 1
                        continue
                    while _batch_end(ends, shifted + pos - 1) is None and not self.src.eof:
                        more = self.src.read_ascii()
                        if isinstance(more, str):  # not ASCII: read on as text
                            back = self._settle(flight, kept, on_events, typed, loads, 0)
                            at = shifted + pos - 1 if back is None else back[0]
                            text = _text(kept, at, shifted + len(data) - 1).decode("ascii")
                            self.buf, self.pos, self.shifted = text + more, 0, at
                            return back is not None and back[1] is None
                        shifted += pos - 1  # as `_more` drops the text before pos
                        data, pos = _joined(memoryview(data)[pos:], more), 1
                        kept.append((ends[-1], more))
                        ends.append(ends[-1] + len(more))
                        _let_go(kept, flight[0][1] if flight else shifted)
                    end = _batch_end(ends, shifted + pos - 1) or ends[-1]
                    cut = data.rfind(b"},", pos, end - shifted + 1)
                    at_cut = cut >= 0
                if at_cut:
                    sent = pool.submit(data, pos - 1, cut + 2, shifted + pos - 2, flight)
                    flight.append([sent, shifted + pos - 1, shifted + cut - 1, end])
                    pos = cut + 2
                window = pool.window * at_cut  # (0: all, at the end)
                back = self._settle(flight, kept, on_events, typed, loads, window)
                if back is not None:  # cut again from there (None: no batch can be cut)
                    at, got = back
                    data, pos = _joined(b"", _text(kept, at, ends[-1])), 1
                    shifted = at
                elif not at_cut:  # the array's end, whitespace, or no batch to cut
                    got = () if ended else None
                if got is None or (back is None and not at_cut):
                    break
        finally:
            for entry in flight:  # after an error: not waited for
                entry[0].cancel()
        self.buf, self.pos, self.shifted = data[1:].decode("ascii"), pos - 1, shifted
        return got is None

    def _settle(self, flight, kept, on_events, typed, loads, window: int):
        """Commits the batches in flight, in order: those done, and the first ones while more
        than `window` are in flight (0: all). A batch no worker prepared is done here from the
        text `kept`; where it is cut earlier than the worker's (a `},` inside a string), or no
        batch can be cut from it, the batches after it are dropped: then (the offset where
        the next batch begins, () or None where no batch can be cut) for the text to be cut
        again from there; else None."""
        while flight and (len(flight) > window or flight[0][0].done()):
            future, start, cut, end = flight.popleft()
            try:
                prepared = future.result(timeout=batch_workers.BATCH_DEADLINE_S)
            except concurrent.futures.TimeoutError:
                prepared = None
                if self.workers is not None:
                    self.workers.abandon()
            except Exception:  # noqa: BLE001 (a worker gone: the batch is done here)
                prepared = None
            if prepared is not None:
                on_events(prepared, True)
                continue
            data = _joined(b"", _text(kept, start, end))
            got = self._ascii_batch(data, 1, typed, loads)
            if got is not None:
                batch, structs, after = got
                on_events(batch, structs)
                if start + after - 1 == cut + 2:
                    continue
            for entry in flight:  # cut after where the text is cut again now
                entry[0].cancel()
            flight.clear()
            return (start, None) if got is None else (start + after - 1, ())
        return None

    def _ascii_batch(self, data: bytearray, pos: int, typed, loads, end: int | None = None):
        """(batch, structs, where the next begins) of the elements from `pos` to the last `},`
        before `end` (the data's end) that cuts a batch either decoder reads, as the text loop
        cuts them; None: none."""
        end = len(data) if end is None else end
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


def _batch_end(ends: list, at: int) -> int | None:
    """The first chunk end at least a chunk past offset `at`: where the text loop's buffer
    ends when it cuts a batch there; None: more text is needed first."""
    i = bisect.bisect_left(ends, at + CHUNK_CHARS)
    return ends[i] if i < len(ends) else None


def _text(kept: collections.deque, start: int, end: int) -> bytes:
    """The kept text from offset `start` to `end`."""
    return b"".join(
        memoryview(chunk)[max(start - at, 0) : end - at]
        for at, chunk in kept
        if at < end and at + len(chunk) > start
    )


def _let_go(kept: collections.deque, start: int) -> None:
    """The kept chunks that end before offset `start` let go."""
    while len(kept) > 1 and kept[0][0] + len(kept[0][1]) <= start:
        kept.popleft()


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
            workers = batch_workers.worker_count(total, col.COLUMNS)
            own = None if f is not raw or storage.is_remote(path) else storage.local_path(path)
            stream.workers = batch_workers.Workers(workers, own) if workers else None
            try:
                stream.parse(on_key, on_events)
            finally:
                if stream.workers is not None:
                    stream.workers.close()
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
