"""What keeping the hosts' tables on the Dask workers saves the client (execute/cluster_held.py),
measured on this machine: the same generated hosts as bench/bench_cluster.py, one worker
(`--workers`).

    python bench/bench_held.py [--hosts 64] [--repeat 3] [--data DIR] [--workers 1]

Two client processes, each fresh (median of `--repeat`), after `distributed` is imported and
the client connected: "rows" gets every host's table (`cluster.run_units` returning
whole profiles) and sums the run's per-step sums here
(`row_sums.step_sums` over the run's table); "held" keeps each table on the worker that read
it (`run_units(summarize=)`: each host's summary, table/host_summary.py, its profile less its
rows, comes back) and has the workers add the per-step sums host by host (`fold_held` of
`StepPass.add_host`). The step sums' roofs and aligned steps (what the model makes from the
key sums) are made beforehand in another process and handed to both, so this times the fold
alone; the service's whole open through Dask is bench/bench_cluster.py's (docs/cluster.md).
Each client reports its peak resident memory, its peak once connected, each phase's peak
(every 2 ms) and time, and the sum of its per-step sums' bytes, which must be equal. Raw
figures: test-output/bench_held.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE]

import bench_cluster  # noqa: E402
import bench_env  # noqa: E402
import bench_xplane  # noqa: E402

CLIENT = r"""
import hashlib, json, os, pickle, resource, sys, threading, time
PAGE = os.sysconf("SC_PAGE_SIZE")
peaks, phase, times = {}, ["setup"], {}

def sample():
    while True:
        with open("/proc/self/statm") as f:
            now = int(f.read().split()[1]) * PAGE / 2**20
        peaks[phase[0]] = max(peaks.get(phase[0], 0.0), now)
        time.sleep(0.002)

threading.Thread(target=sample, daemon=True, name="tb-roofline-bench-sampler").start()
from tb_roofline.execute import cluster
from tb_roofline.execute.cluster_held import fold_held
from tb_roofline.execute.pool import _call
from tb_roofline.model.records.row_sums import step_sums
from tb_roofline.readers import units
from tb_roofline.table.host_summary import summarize
from tb_roofline.table.op_table import OpTable
from tb_roofline.table.shared_texts import sharer
mode, addr, pass_file, paths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
cluster.configure(addr, strict=True)
cluster.usable_workers(cluster.get_client(addr), addr)
setup = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
with open(pass_file, "rb") as f:
    sp = pickle.load(f)
jobs = [(p, "xplane", os.path.basename(p).split(".")[0], None) for p in paths]
plan = units.plan(jobs, 1)
args = [(u.fn, u.args) for u in plan.units]
names = [os.path.basename(u.path) for u in plan.units]
phase[0] = "read"
t = time.perf_counter()
if mode == "rows":
    got = cluster.run_units(addr, _call, args, names=names, arrived=sharer())
else:
    got = cluster.run_units(addr, _call, args, names=names, arrived=sharer(), summarize=summarize)
times["read"] = time.perf_counter() - t
assert not any(isinstance(g, BaseException) for g in got), got
phase[0] = "steps"
t = time.perf_counter()
if mode == "rows":
    run = OpTable.concat([p.ops for p in got], share=True)
    sums = step_sums(run, sp.roofs, sp.aligned, sp.profile_host, sp.key_host)
else:
    sums = sp.finish(fold_held(got, sp.add_host, sp.start()))
times["steps"] = time.perf_counter() - t
phase[0] = "done"
time.sleep(0.01)
digest = hashlib.sha256(b"".join(sums[c].tobytes() for c in sorted(sums))).hexdigest()
print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "setup_mb": setup, "read_peak_mb": peaks.get("read"),
                  "steps_peak_mb": peaks.get("steps"), "read_s": times["read"],
                  "steps_s": times["steps"], "sums_sha256": digest}))
"""

PASS = r"""
import os, pickle, sys
os.environ["TB_ROOFLINE_WORKERS"] = "1"
from tb_roofline.model.records.roofline import analyze
from tb_roofline.readers import read_profile_file
from tb_roofline.readers.units import summed
out, paths = sys.argv[1], sys.argv[2:]
profiles = [summed(read_profile_file(p, "xplane", os.path.basename(p).split(".")[0]))
            for p in paths]
with open(out, "wb") as f:
    pickle.dump(analyze(profiles).scope_source().step_pass, f)
"""


def child(code: str, argv: list) -> str:
    env = {**bench_env.child_env(REPO), "TB_ROOFLINE_CACHE_DIR": "off"}
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, cwd=REPO
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default="")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    root = args.data or tempfile.mkdtemp(prefix="tbr_held_")
    name = f"{args.hosts}hosts_500x100"
    bench_xplane.SHAPES[name] = (args.hosts, bench_cluster.HOST, False)
    _, session = bench_xplane.make_shape(root, name)
    paths = sorted(os.path.join(session, f) for f in os.listdir(session) if f.endswith(".pb"))
    pass_file = os.path.join(root, "step_pass.pickle")
    child(PASS, [pass_file, *paths])
    with open(pass_file, "rb") as f:
        pass_bytes = len(f.read())
    out: dict = {"hosts": args.hosts, "step_pass_bytes": pass_bytes, "rows": []}
    out["workers"] = args.workers
    with bench_cluster.dask_cluster(args.workers) as addr:
        for mode in ("rows", "held"):
            runs = [
                json.loads(child(CLIENT, [mode, addr, pass_file, *paths]))
                for _ in range(args.repeat)
            ]
            row = {"mode": mode}
            for k in runs[0]:
                vals = [r[k] for r in runs]
                row[k] = vals[0] if k == "sums_sha256" else round(statistics.median(vals), 3)
            row["peak_above_setup_mb"] = round(row["peak_mb"] - row["setup_mb"], 1)
            out["rows"].append(row)
            print(json.dumps(row))
    same = len({r["sums_sha256"] for r in out["rows"]}) == 1
    out["same_step_sums"] = same
    print("per-step sums identical:", same)
    os.makedirs(os.path.join(REPO, "test-output"), exist_ok=True)
    with open(os.path.join(REPO, "test-output", "bench_held.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
