"""Benchmark: read and aggregate a ~200 MB PyTorch trace; time and peak memory.

The trace is generated from the real A100 training trace in testdata/kineto/a100_80gb_shapes
(25 MB of JSON, 100k events) by repeating its events with shifted times and ids until the file
reaches the target size, written the way Kineto writes (one indented object per event). The read
runs in a fresh subprocess so its peak RSS (ru_maxrss) is the reader's own:

    python bench/bench_kineto.py [--mb 200] [--keep PATH]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_env  # noqa: E402 (children run with bytecode, as an installed package does)

SOURCE = glob.glob(os.path.join(ROOT, "testdata", "kineto", "a100_80gb_shapes", "*.json.gz"))[0]


def generate(path: str, target_mb: float, repeats: int | None = None) -> int:
    """Writes the trace (the source's events over and over, each copy later in time, until
    `target_mb` of JSON, or `repeats` copies); returns its size in bytes."""
    with gzip.open(SOURCE, "rt") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(ts) - min(ts) + 1000
    ids = [e.get("args", {}).get(k) for e in events for k in ("External id", "correlation")]
    id_span = max(i for i in ids if isinstance(i, int)) + 1
    target = target_mb * 1e6
    with open(path, "w") as out:
        out.write("{\n")
        for k, v in doc.items():
            out.write(f"  {json.dumps(k)}: {json.dumps(v)},\n")
        out.write('  "traceEvents": [\n')
        rep = 0
        first = True
        while (rep < repeats) if repeats else (out.tell() < target):
            for e in events:
                if rep and e.get("ph") == "M":
                    continue
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + rep * span
                args = e2.get("args")
                if isinstance(args, dict):
                    args = dict(args)
                    for k in ("External id", "correlation"):
                        if isinstance(args.get(k), int):
                            args[k] += rep * id_span
                    if e2.get("name", "").startswith("ProfilerStep#"):
                        pass
                    e2["args"] = args
                if e2.get("name", "").startswith("ProfilerStep#"):
                    e2["name"] = "ProfilerStep#%d" % (int(e2["name"].split("#")[1]) + rep * 10)
                if isinstance(e2.get("id"), int):
                    e2["id"] += rep * id_span
                if not first:
                    out.write(",\n")
                first = False
                out.write("  " + json.dumps(e2, indent=2).replace("\n", "\n  "))
            rep += 1
        out.write("\n  ]\n}\n")
        return out.tell()


CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.model.records.roofline import analyze
t1 = time.perf_counter()
data = read_kineto_file(sys.argv[1], "rank0")
t2 = time.perf_counter()
a = analyze([data])
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "read_s": t2 - t1, "analyze_s": t3 - t2,
                  "rows": len(data.ops), "kernel_rows": len(data.kernels),
                  "steps": len(data.steps),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(path: str) -> dict:
    env = bench_env.child_env(ROOT)
    base = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, numpy, tb_roofline.readers.kineto, "
            "tb_roofline.model.records.roofline; print(resource.getrusage("
            "resource.RUSAGE_SELF).ru_maxrss / 1024)",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    out = subprocess.run(
        [sys.executable, "-c", CHILD, path], capture_output=True, text=True, env=env, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["baseline_rss_mb"] = float(base.stdout.strip())
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--keep", help="write the trace here and keep it")
    ap.add_argument("--gzip", action="store_true", help="also measure the .gz of the trace")
    args = ap.parse_args(argv)
    tmp = None
    path = args.keep
    if not path:
        tmp = tempfile.mkdtemp(prefix="bench_kineto_")
        path = os.path.join(tmp, "rank0.pt.trace.json")
    try:
        size = generate(path, args.mb)
        r = measure(path)
        total = r["read_s"] + r["analyze_s"]
        print(f"trace: {size / 1e6:.1f} MB uncompressed JSON")
        print(
            f"read {r['read_s']:.2f} s + analyze {r['analyze_s']:.2f} s = {total:.2f} s "
            f"(imports {r['import_s']:.2f} s)"
        )
        print(
            f"peak RSS {r['peak_rss_mb']:.0f} MiB (interpreter + imports alone "
            f"{r['baseline_rss_mb']:.0f} MiB) = {r['peak_rss_mb'] * 2**20 / size:.2f}x the file"
        )
        print(f"rows {r['rows']}, kernel rows {r['kernel_rows']}, step spans {r['steps']}")
        if args.gzip:
            gz = path + ".gz"
            with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
                while chunk := src.read(1 << 24):
                    dst.write(chunk)
            g = measure(gz)
            print(
                f"gzip ({os.path.getsize(gz) / 1e6:.1f} MB): read {g['read_s']:.2f} s + analyze "
                f"{g['analyze_s']:.2f} s, peak RSS {g['peak_rss_mb']:.0f} MiB"
            )
        ok = total < 10 and r["peak_rss_mb"] * 2**20 < 2 * size
        print("target (< 10 s, < 2x file size):", "met" if ok else "NOT met")
        return 0 if ok else 1
    finally:
        if tmp:
            for f in glob.glob(os.path.join(tmp, "*")):
                os.remove(f)
            os.rmdir(tmp)


if __name__ == "__main__":
    sys.exit(main())
