"""Rewrite a PyTorch trace's timestamps as epoch microseconds with their nanosecond fractions
(`baseTimeNanoseconds` + ts), as PyTorch writes them on systems whose clock base is the epoch.

Such numbers (~1.8e15 µs with 3 decimals) keep only ~0.25 µs in a float64: the test data for
exact timestamp parsing. Decimal arithmetic keeps every digit.

    python tools/epoch_trace.py IN.pt.trace.json.gz OUT.pt.trace.json.gz
"""

from __future__ import annotations

import decimal
import gzip
import json
import sys


def _dump(value) -> str:
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    return json.dumps(value)


def main(src: str, dst: str):
    with gzip.open(src, "rt", encoding="utf-8") as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    base_us = decimal.Decimal(doc["baseTimeNanoseconds"]) / 1000
    for ev in doc["traceEvents"]:
        if "ts" in ev:
            ev["ts"] = decimal.Decimal(ev["ts"]) + base_us
    doc["baseTimeNanoseconds"] = 0
    with gzip.open(dst, "wt", encoding="utf-8") as f:
        f.write(_dump(doc))


if __name__ == "__main__":
    main(*sys.argv[1:3])
