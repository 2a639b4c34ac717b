"""Scaling of conversion on a Dask cluster (execute/cluster.py), measured on this machine, and
the per-host costs a projection to bigger pods uses (docs/cluster.md).

    python bench/bench_cluster.py [--hosts 64] [--workers 1,2] [--repeat 3] [--data DIR]
                                  [--tree DIR] [--traced] [--no-per-host] [--no-local]

A run of `--hosts` generated TPU hosts (1 TensorCore, 500 ops x 100 steps: ~2.2 MB each, as
the whole-process table) on local disk, which the workers share. For each worker count a real
`dask scheduler` and that many `dask worker --nthreads 1 --no-nanny` processes are started on
127.0.0.1; each repetition is a fresh client process (cold: disk cache off) that lists the
run, converts every host on the cluster and builds the analysis (`RooflineService.analysis`).
Local baselines: the same in one process (TB_ROOFLINE_WORKERS=1) and with the local pool.
Per-host costs, in one process: converting one host (what a worker does), the pickled size
of its result (what travels back), unpickling it (what the client does per host), and the
analysis over all hosts (the client's share, per host). Each row also has the client process's
peak resident memory (`client_peak_rss_mb`, ru_maxrss: the local pool's workers not counted),
its peak once imported and connected, before any conversion (`client_setup_rss_mb`), the
difference (`client_peak_above_setup_mb`: the fair comparison, since importing `distributed`
and connecting costs the client ~26 MB that local conversion never pays), and the peaks of
the two phases, sampled every 2 ms: reading every host (`convert_peak_mb`) and the analysis
over them (`analysis_peak_mb`). `--traced`: the same figures as tracemalloc's traced
allocations instead of resident memory (where the memory goes, without the allocator's
holes). `--tree`: the tb-roofline tree the clients and the workers run (another commit's
checkout, to compare two). Raw figures: test-output/bench_cluster.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE]

import bench_env  # noqa: E402 (children run with bytecode, as an installed package does)
import bench_xplane  # noqa: E402 (its shape generator)

HOST = dict(num_cores=1, num_steps=100, ops_per_step=500, distinct_ops=500, op_order="cycle")

CLIENT = r"""
import json, os, resource, sys, threading, time
os.environ["TB_ROOFLINE_CACHE_DIR"] = "off"
traced = bool(os.environ.get("BENCH_TRACED"))
if traced:
    import tracemalloc
    tracemalloc.start()
PAGE = os.sysconf("SC_PAGE_SIZE")
peaks, phase = {}, ["setup"]

def sample():  # each phase's peak: resident memory, or the traced allocations
    while True:
        if traced:
            now = tracemalloc.get_traced_memory()[0] / 2**20
        else:
            with open("/proc/self/statm") as f:
                now = int(f.read().split()[1]) * PAGE / 2**20
        peaks[phase[0]] = max(peaks.get(phase[0], 0.0), now)
        time.sleep(0.002)

threading.Thread(target=sample, daemon=True, name="tb-roofline-bench-sampler").start()
t0 = time.perf_counter()
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.execute import cluster
from tb_roofline.execute import pool as parallel
from tb_roofline.readers.xspace import read as xspace# noqa: F401
if os.environ.get("TB_ROOFLINE_SCHEDULER"):
    cluster.configure(os.environ["TB_ROOFLINE_SCHEDULER"], strict=True)
    cluster.usable_workers(cluster.get_client(cluster.address()), cluster.address())
t1 = time.perf_counter()
setup_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # imports, client: MB
if traced:
    setup_peak = tracemalloc.get_traced_memory()[1] / 2**20
s = RooflineService(sys.argv[1])
run = s.list_runs()["runs"][0]["run"]
target = s.resolve_run(run)
phase[0] = "convert"
s.hosts_reader.read(target, s.resolve_files(target, ""))  # every host, as analysis reads them
phase[0] = "analysis"
s.analysis(run, "")
t2 = time.perf_counter()
rows = len(s.ops(run, "", True)["rows"])
phase[0] = "done"
time.sleep(0.01)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the client's peak, MB
if traced:
    peak = tracemalloc.get_traced_memory()[1] / 2**20
print(json.dumps({"setup_s": t1 - t0, "convert_s": t2 - t1, "ops": rows, "peak_rss_mb": peak,
                  "setup_peak_rss_mb": setup_peak, "convert_peak_mb": peaks.get("convert"),
                  "analysis_peak_mb": peaks.get("analysis")}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dask_cluster(n_workers: int, tree: str = REPO):
    port = free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = bench_env.child_env(tree)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-dashboard",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=tree,  # (`-m` imports from its working directory first)
        )
    ]
    try:
        for i in range(n_workers):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        addr,
                        "--nthreads",
                        "1",
                        "--no-nanny",
                        "--no-dashboard",
                        "--host",
                        "127.0.0.1",
                        "--name",
                        f"w{i}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    cwd=tree,
                )
            )
        from distributed import Client

        with Client(addr, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(n_workers, timeout=120)
        yield addr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def client_run(logdir: str, env: dict, tree: str = REPO) -> dict:
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CLIENT, logdir],
        capture_output=True,
        text=True,
        env={**bench_env.child_env(tree), **env},
        cwd=tree,
    )
    whole = time.perf_counter() - t
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["whole_s"] = whole
    return result


def per_host_costs(logdir: str, session: str) -> dict:
    """In this process: one host converted, its result's pickled size and unpickling."""
    os.environ["TB_ROOFLINE_WORKERS"] = "1"
    from tb_roofline.readers import read_profile_file
    from tb_roofline.serve.service.core import RooflineService

    files = sorted(f for f in os.listdir(session) if f.endswith(".xplane.pb"))
    path = os.path.join(session, files[0])
    read_profile_file(path, "xplane", "host00")  # warm imports
    times, sizes, loads = [], [], []
    for f in files[:8]:
        t = time.perf_counter()
        data = read_profile_file(os.path.join(session, f), "xplane", f)
        times.append(time.perf_counter() - t)
        blob = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
        sizes.append(len(blob))
        t = time.perf_counter()
        pickle.loads(blob)
        loads.append(time.perf_counter() - t)
    s = RooflineService(logdir)
    run = s.list_runs()["runs"][0]["run"]
    target = s.resolve_run(run)  # every host converted (and cached): not timed below
    entries = s.hosts_reader.read(target, s.resolve_files(target, ""))
    assert all(e.result() is not None for e in entries)
    t = time.perf_counter()
    s.analysis(run, "")
    analysis = time.perf_counter() - t
    return {
        "convert_host_s": statistics.median(times),
        "result_bytes_per_host": int(statistics.median(sizes)),
        "file_bytes_per_host": os.path.getsize(path),
        "unpickle_host_s": statistics.median(loads),
        "analysis_s": analysis,
        "analysis_per_host_s": analysis / len(files),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default="")
    parser.add_argument("--tree", default=REPO, help="the tb-roofline tree clients and workers run")
    parser.add_argument("--traced", action="store_true", help="tracemalloc's peaks, not RSS")
    parser.add_argument("--no-per-host", action="store_true", help="skip the per-host costs")
    parser.add_argument("--no-local", action="store_true", help="only the cluster's rows")
    args = parser.parse_args()
    tree = os.path.abspath(args.tree)
    root = args.data or tempfile.mkdtemp(prefix="tbr_cluster_")
    name = f"{args.hosts}hosts_500x100"
    bench_xplane.SHAPES[name] = (args.hosts, HOST, False)
    logdir, session = bench_xplane.make_shape(root, name)
    size_mb = sum(os.path.getsize(os.path.join(session, f)) for f in os.listdir(session)) / 2**20
    out = {"hosts": args.hosts, "file_mb": round(size_mb, 1), "tree": tree, "rows": []}
    out["measure"] = "traced (tracemalloc)" if args.traced else "resident (RSS)"
    traced = {"BENCH_TRACED": "1"} if args.traced else {}
    configs = [("local, 1 process", None, {"TB_ROOFLINE_WORKERS": "1"}), ("local pool", None, {})]
    configs = [] if args.no_local else configs
    configs += [
        (f"dask, {n} worker{'s' * (n > 1)}", n, {"TB_ROOFLINE_WORKERS": "1"})
        for n in map(int, args.workers.split(","))
    ]
    for label, n, env in configs:
        runs = []
        with dask_cluster(n, tree) if n else contextlib.nullcontext() as addr:
            for _ in range(args.repeat):
                scheduler = {"TB_ROOFLINE_SCHEDULER": addr} if addr else {}
                runs.append(client_run(logdir, {**env, **traced, **scheduler}, tree))
        row = {
            "config": label,
            "convert_s": round(statistics.median(r["convert_s"] for r in runs), 3),
            "whole_s": round(statistics.median(r["whole_s"] for r in runs), 3),
            "setup_s": round(statistics.median(r["setup_s"] for r in runs), 3),
            "client_peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in runs)),
            "client_setup_rss_mb": round(statistics.median(r["setup_peak_rss_mb"] for r in runs)),
            # The fair comparison: above the process's own imports (and connected client).
            "client_peak_above_setup_mb": round(
                statistics.median(r["peak_rss_mb"] - r["setup_peak_rss_mb"] for r in runs)
            ),
            "convert_peak_mb": round(statistics.median(r["convert_peak_mb"] for r in runs)),
            "analysis_peak_mb": round(statistics.median(r["analysis_peak_mb"] for r in runs)),
            "peaks": [round(r["peak_rss_mb"]) for r in runs],
            "runs": [round(r["convert_s"], 3) for r in runs],
            "load_avg": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(row), flush=True)
        out["rows"].append(row)
    if not args.no_per_host:
        out["per_host"] = per_host_costs(logdir, session)
        print(json.dumps(out["per_host"]), flush=True)
    os.makedirs(os.path.join(REPO, "test-output"), exist_ok=True)
    with open(os.path.join(REPO, "test-output", "bench_cluster.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
