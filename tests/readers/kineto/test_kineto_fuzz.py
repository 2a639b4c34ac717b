"""Seeded fuzzing of the Kineto reader over the real traces in testdata/kineto.

Random truncations, byte flips (in the JSON text and in the gzip stream), deleted fields and
fields of the wrong type or value. Every outcome must be a ProfileData that the model can
analyze and serve as strict JSON, or a ProfileFormatError (or a subclass): never another
exception. `TB_ROOFLINE_FUZZ_N=<cases per trace and kind>` runs more cases than the default.
"""

import copy
import glob
import gzip
import json
import os
import random
import time

import pytest
from testpaths import TESTS

from tb_roofline.errors import ProfileFormatError
from tb_roofline.model.records.roofline import analyze
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.table.op_table import ProfileData

REAL = os.path.join(TESTS, "..", "testdata", "kineto")
TRACES = sorted(glob.glob(os.path.join(REAL, "*", "*.pt.trace.json.gz")))
N = int(os.environ.get("TB_ROOFLINE_FUZZ_N", "6"))
MAX_EVENTS = 3000  # the 25 MB trace is cut to its first events to keep the test quick

ODD_VALUES = [
    None,
    "",
    "abc",
    "12",
    [],
    [1],
    {"a": 1},
    True,
    False,
    float("nan"),
    float("inf"),
    -float("inf"),
    1e300,
    -1e300,
    -1,
    0,
    1.5,
    10**30,
    -(10**30),
]
TIME_VALUES = [
    None,
    "abc",
    "12",
    [1],
    True,
    float("nan"),
    float("inf"),
    -float("inf"),
    1e300,
    -1e300,
    10**30,
]
EVENT_FIELDS = ["ts", "dur", "name", "cat", "ph", "pid", "tid", "args"]
ARG_FIELDS = [
    "External id",
    "correlation",
    "device",
    "bytes",
    "Input Dims",
    "Input type",
    "Concrete Inputs",
    "stream",
]
TOP_FIELDS = ["deviceProperties", "distributedInfo", "record_shapes"]


def _load(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    doc["traceEvents"] = doc["traceEvents"][:MAX_EVENTS]
    return doc


DOCS = {os.path.basename(os.path.dirname(p)): _load(p) for p in TRACES}


def _old(path):
    past = time.time() - 3600
    os.utime(path, (past, past))


def _check(path):
    """Read `path`; the result must be served cleanly or be a ProfileFormatError."""
    _old(path)  # not "young": a bad file must be judged, not reported as still being written
    try:
        data = read_kineto_file(str(path), "h")
    except ProfileFormatError:
        return "error"
    assert isinstance(data, ProfileData)
    a = analyze([data])
    for tables in [a.program, a.ops] + list(a.views.values()):
        for table in tables.values():
            json.dumps(table.rows(), allow_nan=False)
    json.dumps(a.device.to_json(), allow_nan=False)
    if data.hw_counters is not None:
        json.dumps(data.hw_counters.kernels, allow_nan=False)
    return "ok"


def _write(tmp_path, doc, name):
    p = tmp_path / f"{name}.pt.trace.json"
    p.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    return p


def _mutate_doc(doc, rnd):
    doc = copy.deepcopy(doc)
    events = doc["traceEvents"]
    for _ in range(rnd.choice([1, 1, 2, 5, 20])):
        what = rnd.random()
        if what < 0.1:
            doc[rnd.choice(TOP_FIELDS)] = rnd.choice(ODD_VALUES)
            continue
        ev = rnd.choice(events)
        if not isinstance(ev, dict):
            continue
        if what < 0.5:
            target, fields = ev, EVENT_FIELDS
        else:
            if not isinstance(ev.get("args"), dict):
                continue
            target, fields = ev["args"], ARG_FIELDS + list(ev["args"])
        key = rnd.choice(fields)
        if rnd.random() < 0.3:
            target.pop(key, None)
        else:
            target[key] = copy.deepcopy(rnd.choice(ODD_VALUES))
    return doc


@pytest.mark.parametrize("trace", sorted(DOCS))
def test_fuzz_fields(tmp_path, trace):
    rnd = random.Random(f"fields/{trace}")
    outcomes = []
    for i in range(4 * N):
        outcomes.append(_check(_write(tmp_path, _mutate_doc(DOCS[trace], rnd), f"f{i}")))
    assert "ok" in outcomes  # most field damage is skipped event by event


@pytest.mark.parametrize("trace", sorted(DOCS))
def test_fuzz_truncation_and_byte_flips(tmp_path, trace):
    rnd = random.Random(f"bytes/{trace}")
    text = json.dumps(DOCS[trace], indent=1).encode()
    for i in range(N):
        p = tmp_path / f"t{i}.pt.trace.json"
        p.write_bytes(text[: rnd.randrange(len(text))])
        _check(p)
    for i in range(2 * N):
        b = bytearray(text)
        for _ in range(rnd.choice([1, 3, 20])):
            pos = rnd.randrange(len(b))
            b[pos] = rnd.choice([rnd.randrange(256), ord(rnd.choice('0123456789-.eE"{}[],:N'))])
        p = tmp_path / f"b{i}.pt.trace.json"
        p.write_bytes(bytes(b))
        _check(p)
    gz = gzip.compress(text, compresslevel=1)
    for i in range(N):
        b = bytearray(gz)
        for _ in range(rnd.choice([1, 5])):
            pos = rnd.randrange(10, len(b))
            b[pos] = rnd.randrange(256)
        p = tmp_path / f"g{i}.pt.trace.json.gz"
        p.write_bytes(bytes(b)[: rnd.choice([len(b), rnd.randrange(len(b))])])
        _check(p)


def test_fuzz_values_are_checked_for_every_category(tmp_path):
    """Every odd value in every timing field of each kind of event that the reader uses."""
    doc = DOCS["mi250"]  # small, with ops, launches, kernels, copies and steps
    events = doc["traceEvents"]
    kinds = {}
    for i, ev in enumerate(events):
        if ev.get("ph") == "X":
            kinds.setdefault(ev.get("cat"), i)
    doc = copy.deepcopy(doc)
    doc["traceEvents"].append(
        {"ph": "X", "cat": "cuda_profiler_range", "name": "k", "ts": 1, "dur": 1, "args": {}}
    )
    kinds["cuda_profiler_range"] = len(doc["traceEvents"]) - 1
    n = 0
    outcomes = {"ok": 0, "error": 0}
    bad = {
        "ts": TIME_VALUES,
        "dur": TIME_VALUES,
        "name": [None, 5, [1], {"a": 1}],
        "args": [None, [1], "x", 3, {"a": 1}, {"device": "cuda:0", "correlation": 1.5}],
    }
    for _cat, i in sorted(kinds.items(), key=lambda kv: str(kv[0])):
        for field, values in bad.items():
            for value in values:
                d = dict(doc, traceEvents=list(doc["traceEvents"]))
                d["traceEvents"][i] = dict(d["traceEvents"][i], **{field: value})
                outcomes[_check(_write(tmp_path, d, f"v{n}"))] += 1
                n += 1
    assert n > 150 and outcomes["ok"] > outcomes["error"]
