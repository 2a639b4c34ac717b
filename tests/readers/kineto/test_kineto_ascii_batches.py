"""The compiled path cuts and decodes ASCII text as bytes in place (readers/kineto/stream.py
`_ascii_batches`): a trace collects, and a damaged one fails, as on the standard path: text
that turns non-ASCII midway, an error whose message gives an offset, bytes that are not
UTF-8, a file cut short."""

from __future__ import annotations

import json
import os

import pytest
from test_kineto_fast_json import _both, _collected, _same

from tb_roofline.errors import ProfileFormatError
from tb_roofline.readers.kineto import fast_json, load_kineto, stream

pytest.importorskip("msgspec")

CHUNK = 2048  # many chunks and batches from a small trace


def _events(n: int, name: str = "aten::mm") -> list:
    out = []
    for i in range(n):
        out.append(
            {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 2, "ts": 10 * i,
             "dur": 5, "args": {"External id": i, "Input Dims": [[2, i % 7]]}}
        )  # fmt: skip
        out.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2,
             "ts": 10 * i + 1, "dur": 2, "args": {"correlation": i, "External id": i}}
        )  # fmt: skip
        out.append({"ph": "f", "cat": "ac2g", "id": i, "ts": 10 * i + 3, "bp": "e"})
    return out


@pytest.fixture
def small_chunks(monkeypatch):
    """Small chunks, and a count of the batches the bytes path cut."""
    monkeypatch.setattr(stream, "CHUNK_CHARS", CHUNK)
    cut = []
    real = stream._JsonStream._ascii_batch

    def counted(self, *a):
        got = real(self, *a)
        cut.append(got is not None)
        return got

    monkeypatch.setattr(stream._JsonStream, "_ascii_batch", counted)
    return cut


def _messages(path, monkeypatch) -> list:
    """The error a read of the damaged file raises with msgspec, then without."""
    out = []
    for decoder in (fast_json._decoder, None):
        monkeypatch.setattr(fast_json, "_decoder", decoder)
        with pytest.raises(ProfileFormatError) as err:
            load_kineto(str(path))
        out.append(str(err.value))
    return out


@pytest.mark.parametrize("later", ["aten::mm", "aten::ñ"])
def test_ascii_then_text_collects_alike(tmp_path, small_chunks, monkeypatch, later):
    """An ASCII trace is cut as bytes throughout; one whose text turns non-ASCII halfway is
    read on as text from that chunk: both collect what the standard path collects."""
    events = _events(300) + _events(300, later)
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events, "x": 1}, indent=1), encoding="utf-8")
    fast, plain, _ = _both(lambda: load_kineto(str(path)), monkeypatch)
    _same(_collected(fast), _collected(plain), "collector")
    assert fast.n_events == len(events) and len(fast.op_ts) == 600
    assert sum(small_chunks) > 10  # cut as bytes (in the first half, at least)


@pytest.mark.parametrize("first", ["aten::mm", "aten::ñ"])
def test_an_error_gives_the_same_offset(tmp_path, small_chunks, monkeypatch, first):
    """The offset a format error names is the character's in the text, on either path."""
    body = json.dumps(_events(200, first))
    text = '{"traceEvents": ' + body + ', "a": 1 "b": 2}'
    path = tmp_path / "w.pt.trace.json"
    path.write_text(text, encoding="utf-8")
    os.utime(path, (1, 1))  # old: a parse error is the file's
    messages = _messages(path, monkeypatch)
    where = text.index('"b"')  # characters, not bytes, before it
    assert messages[0] == messages[1] and messages[0].endswith(f"keys at offset {where}")


def test_bytes_that_are_not_utf8_fail_alike(tmp_path, small_chunks, monkeypatch):
    body = json.dumps(_events(200)).encode()
    at = len(body) * 3 // 4
    data = b'{"traceEvents": ' + body[:at] + b"\xff" + body[at:] + b"}"
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(data)
    messages = _messages(path, monkeypatch)
    assert messages[0] == messages[1] and "not UTF-8 JSON text" in messages[0]
    assert sum(small_chunks) > 5


def test_a_file_cut_short_fails_alike(tmp_path, small_chunks, monkeypatch):
    text = json.dumps({"traceEvents": _events(200)})
    path = tmp_path / "w.pt.trace.json"
    path.write_text(text[: len(text) * 2 // 3])
    os.utime(path, (1, 1))
    messages = _messages(path, monkeypatch)
    assert messages[0] == messages[1] and "ends early" in messages[0]


def test_no_batch_to_cut_goes_element_by_element_alike(tmp_path, small_chunks, monkeypatch):
    """Names full of `},` leave no cut either decoder reads: those elements are read one by
    one (`_slow_batch`), at once, with what the standard path collects."""
    events = _events(150) + _events(150, "n" + "},{" * 8) + _events(150)
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=1))
    fast, plain, _ = _both(lambda: load_kineto(str(path)), monkeypatch)
    _same(_collected(fast), _collected(plain), "collector")
    assert fast.n_events == len(events)
    assert True in small_chunks and False in small_chunks  # batches cut, and none to cut
