"""Benchmark: the whole Kineto op analysis against the floor of merely parsing the file.

The traces are the real A100 training trace of testdata/kineto/a100_80gb_shapes repeated in
time (each copy after the last, ids shifted; bench_kineto.generate), written to a temporary
folder and deleted after. Each measure runs in a fresh interpreter, alternated, so its peak RSS
(ru_maxrss) is its own; medians of `--runs` (the largest trace is measured once, `--once`,
and only json.load and ours: the libraries that build the whole document would need GBs):

- `json.load`: the standard library parsing the file (the floor the issue names);
- `ours`: read_kineto_file + analyze, with msgspec (the `fast` extra) and without it;
- `decode+fields` for each JSON library importable here: the file decoded and the fields the
  reader uses read from every event (what choosing a library is about): the standard library,
  orjson, msgspec typed decoding (readers/kineto/fast_json.py `decode` and `batch_structs`
  over the whole text), and
  pysimdjson's lazy parser;
- HTA's `TraceAnalysis` when it is importable.

    python bench/bench_kineto_floor.py [--repeats 5,20] [--once 20] [--runs 3] [--libs DIR]
        [--before DIR] [--pss]

`--before DIR` also runs each `ours` measure on an earlier tree (before and after side by
side, alternated). `--libs DIR` puts DIR on the children's path (JSON libraries installed with
`pip install --target DIR` for the comparison, not into the environment).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_env  # noqa: E402
import bench_kineto  # noqa: E402

PRELUDE = r"""
import json, os, resource, sys, threading, time
path = sys.argv[1]
c0 = time.process_time()
def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
k0 = _children_cpu()
def done(t0, **kw):  # wall and CPU seconds since t0, c0 (set together), peak RSS
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    kw.update(s=time.perf_counter() - t0, cpu_s=time.process_time() - c0 + _children_cpu() - k0,
              peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              child_peak_mb=children.ru_maxrss / 1024, pss_mb=_pss[0])
    print(json.dumps(kw))
_pss = [None]
def _pss_of(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("Pss:")) / 1024
    except (OSError, StopIteration):
        return 0.0
def _children():
    kids = []
    for t in os.listdir("/proc/self/task"):
        try:
            kids += open(f"/proc/self/task/{t}/children").read().split()
        except OSError:
            pass
    return kids
def _sample():  # the summed PSS of this process and its children, every 10 ms
    while True:
        _pss[0] = max(_pss[0] or 0.0, _pss_of("self") + sum(map(_pss_of, _children())))
        time.sleep(0.01)
if os.environ.get("BENCH_PSS"):  # (its name: the reader's workers are still forked beside it)
    threading.Thread(target=_sample, name="tb-roofline-bench-pss", daemon=True).start()
"""

READ_FIELDS = r"""
KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
def touch(events):
    n = 0
    for e in events:
        for k in KEYS:
            e.get(k)
        if e.get("cat") in ("cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset"):
            a = e.get("args")
            n += a is not None
    return n
"""

MEASURES = {
    "imports alone (ours)": """
t0, c0 = time.perf_counter(), time.process_time()
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.model.records.roofline import analyze
done(t0)""",
    "json.load": """
t0, c0 = time.perf_counter(), time.process_time()
json.load(open(path))
done(t0)""",
    "ours (msgspec)": """
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.model.records.roofline import analyze
t0, c0 = time.perf_counter(), time.process_time()
analyze([read_kineto_file(path, "rank0")])
done(t0)""",
    "ours (standard library)": """
from tb_roofline.readers.kineto import fast_json, read_kineto_file
from tb_roofline.model.records.roofline import analyze
fast_json._decoder = None
t0, c0 = time.perf_counter(), time.process_time()
analyze([read_kineto_file(path, "rank0")])
done(t0)""",
    "json decode+fields": READ_FIELDS
    + """
t0, c0 = time.perf_counter(), time.process_time()
touch(json.load(open(path))["traceEvents"])
done(t0)""",
    "orjson decode+fields": READ_FIELDS
    + """
import orjson
t0, c0 = time.perf_counter(), time.process_time()
touch(orjson.loads(open(path, "rb").read())["traceEvents"])
done(t0, version=orjson.__version__)""",
    "msgspec typed decode+fields": """
import msgspec
from tb_roofline.readers.kineto import fast_json
t0, c0 = time.perf_counter(), time.process_time()
text = open(path).read()
start = text.index("[", text.index('"traceEvents"'))
end = text.rindex("]")
events = fast_json.batch_structs(fast_json.decode(text[start : end + 1]))
done(t0, n=len(events), version=msgspec.__version__)""",
    "pysimdjson lazy decode+fields": """
import simdjson
KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
t0, c0 = time.perf_counter(), time.process_time()
doc = simdjson.Parser().parse(open(path, "rb").read())
for e in doc["traceEvents"]:
    for k in KEYS:
        e.get(k)
    if e.get("cat") in ("cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset"):
        a = e.get("args")
        a = a.as_dict() if a is not None else None
done(t0, version=simdjson.__version__ if hasattr(simdjson, "__version__") else "")""",
    "HTA TraceAnalysis": """
import os
from hta.trace_analysis import TraceAnalysis
t0, c0 = time.perf_counter(), time.process_time()
TraceAnalysis(trace_dir=os.path.dirname(path))
done(t0)""",
}


def _run(name: str, path: str, env: dict) -> dict | None:
    code = PRELUDE + MEASURES[name]
    # (run from the trace's folder: `-c` puts the working directory first on the path, and
    # run from a tree's root, that tree's package would shadow PYTHONPATH's `--before` tree)
    out = subprocess.run(
        [sys.executable, "-c", code, path],
        capture_output=True,
        text=True,
        env=env,
        cwd=os.path.dirname(path),
    )
    if out.returncode != 0:
        if "ModuleNotFoundError" in out.stderr or "ImportError" in out.stderr:
            return None  # that library is not installed here
        raise RuntimeError(f"{name}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


BEFORE = " (before)"  # a measure of ours run on the `--before` tree


def measure(path: str, runs: int, env: dict, names, before_env: dict | None = None) -> dict:
    """Each measure `runs` times, alternated, in turn forwards and backwards (a measure is
    not always the one after another); {name: (median s, median CPU s, median peak MiB,
    version, CPU s of each run, median workers' peak MiB, median summed PSS MiB or None,
    wall s of each run)}.
    A name ending in BEFORE runs its measure with `before_env` (an earlier tree)."""
    got: dict = {n: [] for n in names}
    for run in range(runs):
        for n in names if run % 2 == 0 else names[::-1]:  # each order as often: A B, B A
            if got[n] is None:
                continue
            if n.endswith(BEFORE):
                r = _run(n.removesuffix(BEFORE), path, before_env or env)
            else:
                r = _run(n, path, env)
            if r is None:
                got[n] = None
            else:
                got[n].append(r)
    return {
        n: (
            statistics.median(r["s"] for r in rs),
            statistics.median(r["cpu_s"] for r in rs),
            statistics.median(r["peak_mb"] for r in rs),
            rs[0].get("version", ""),
            [r["cpu_s"] for r in rs],
            statistics.median(r.get("child_peak_mb", 0.0) for r in rs),
            None if rs[0].get("pss_mb") is None else statistics.median(r["pss_mb"] for r in rs),
            [r["s"] for r in rs],
        )
        for n, rs in got.items()
        if rs
    }


def settle(path: str) -> None:
    """The new trace written back to disk and read once, before any measure: otherwise the
    first measures run while the kernel writes its dirty pages back (seconds for hundreds of
    MB), and each measure would pay for it unequally."""
    os.sync()
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", default="5,20", help="copies of the source trace, per trace")
    ap.add_argument("--once", default="20", help="copies measured once (the biggest traces)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--libs", help="a folder of JSON libraries put on the children's path")
    ap.add_argument("--only", help="comma-separated measures (default: all)")
    ap.add_argument(
        "--before",
        help="an earlier tree (`git archive COMMIT | tar -x -C DIR`): each `ours` measure is "
        "also run on it, alternated with this one's",
    )
    ap.add_argument(
        "--pss",
        action="store_true",
        help="also sample the summed PSS of each measure's process and its workers (every "
        "10 ms, in a thread: it costs some CPU)",
    )
    args = ap.parse_args(argv)
    env = bench_env.child_env(ROOT, **({"BENCH_PSS": "1"} if args.pss else {}))
    if args.libs:
        env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + args.libs
    names = args.only.split(",") if args.only else list(MEASURES)
    before_env = (
        bench_env.child_env(
            os.path.abspath(args.before), **({"BENCH_PSS": "1"} if args.pss else {})
        )
        if args.before
        else None
    )
    if before_env is not None:
        names = [m for n in names for m in ([n + BEFORE, n] if n.startswith("ours") else [n])]
    once = {int(x) for x in args.once.split(",") if x}
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    for rep in (int(x) for x in args.repeats.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench_kineto_floor_") as tmp:
            path = os.path.join(tmp, "rank0.pt.trace.json")
            size = bench_kineto.generate(path, 0, repeats=rep)
            settle(path)
            runs = 1 if rep in once else args.runs
            # the libraries that hold the whole document are measured on the smaller traces
            big = [n for n in names if n in ("json.load",) or n.startswith("ours")]
            res = measure(path, runs, env, big if rep in once else names, before_env)
            floor = res.get("json.load", (None, None))[1]
            print(f"\n×{rep}: {size / 1e6:.0f} MB of JSON, {runs} run(s), medians")
            wall_floor = res.get("json.load", (None,))[0]
            head = ("what", "wall s", "CPU s", "json.load CPU / CPU", "json.load wall / wall")
            head += ("peak MiB", "/ file", "worker MiB", "PSS MiB")
            print("{:36} {:>7} {:>7} {:>20} {:>21} {:>9} {:>7} {:>10} {:>8}".format(*head))
            for n, (s, cpu, mb, version, _, child, pss, _) in res.items():
                ratio = f"{floor / cpu:.2f}" if floor and cpu > 0 else ""
                wall = f"{wall_floor / s:.2f}" if wall_floor and s > 0 else ""
                label = f"{n} {version}".strip()
                pss_text = "" if pss is None else f"{pss:.0f}"
                print(
                    f"{label:36} {s:7.2f} {cpu:7.2f} {ratio:>20} {wall:>21} {mb:9.0f} "
                    f"{mb * 2**20 / size:7.2f} {child:10.0f} {pss_text:>8}"
                )
            for n, (*_, cpus, _, _, walls) in res.items():  # the spread under a shared load
                print(
                    f"  {n}: wall s of each run "
                    + ", ".join(f"{w:.2f}" for w in walls)
                    + "; CPU s "
                    + ", ".join(f"{c:.2f}" for c in cpus)
                )
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
