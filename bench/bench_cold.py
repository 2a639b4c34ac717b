"""The whole-process table: whole processes, cold, tb-roofline vs the XProf converter, interleaved.

    python bench/bench_cold.py [--repeat 5] [--shapes a,b] [--data DIR]

Each repetition starts a fresh interpreter per side and times it from start to exit (imports
included: that is what a user waits for). Ours: the service lists the run, converts every host
(on all cores, `execute/pool.py`), and builds the program and op answers, disk cache off
(bench_xplane.py's OURS). XProf 2.24.2: `xspace_to_tool_data(paths, "roofline_model")` on a
copy (it writes caches beside its input). Peak memory: the summed PSS of the side's process
tree (bench_xplane.run_side), less the PSS after imports, over the profile's size. Ratios are
of medians, XProf ÷ ours. Raw figures: test-output/bench_cold.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE]

import bench_xplane  # noqa: E402 (its generator, its sides, its PSS sampler)

HOST_500x100 = dict(
    num_cores=1, num_steps=100, ops_per_step=500, distinct_ops=500, op_order="cycle"
)
SHAPES = {  # the whole-process table's shapes, plus the 200k-event host
    "32hosts_500x100": (32, HOST_500x100, False),
    "8hosts_500x100": (8, HOST_500x100, False),
    "1core_2000ops_100steps": bench_xplane.SHAPES["1core_2000ops_100steps"],
    "1core_50ops_1000steps": bench_xplane.SHAPES["1core_50ops_1000steps"],
    "1host_200k": bench_xplane.SHAPES["1host_200k"],
}


def timed(code: str, arg: str, *more: str) -> dict:
    t = time.perf_counter()
    r = bench_xplane.run_side(code, arg, *more)
    r["whole_s"] = time.perf_counter() - t
    return r


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--data", default="")
    args = parser.parse_args()
    root = args.data or tempfile.mkdtemp(prefix="tbr_cold_")
    bench_xplane.SHAPES.update(SHAPES)
    rows = []
    for name in args.shapes.split(","):
        logdir, session = bench_xplane.make_shape(root, name)
        files = sorted(glob.glob(os.path.join(session, "*.xplane.pb")))
        size_mb = sum(os.path.getsize(p) for p in files) / 2**20
        ours, xprof = [], []
        for _ in range(args.repeat):
            ours.append(timed(bench_xplane.OURS, logdir, "whole"))  # (no answers asked again)
            copy = tempfile.mkdtemp(prefix="xprof_", dir=root)
            for p in files:
                shutil.copy(p, copy)
            try:
                xprof.append(timed(bench_xplane.XPROF, copy))
            finally:
                shutil.rmtree(copy, ignore_errors=True)
        med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
        row = {
            "shape": name,
            "hosts": len(files),
            "file_mb": round(size_mb, 1),
            "ours_s": round(med(ours, "whole_s"), 3),
            "xprof_s": round(med(xprof, "whole_s"), 3),
            "ours_import_s": round(med(ours, "import_s"), 3),
            "xprof_import_s": round(med(xprof, "import_s"), 3),
            "ours_mem_over_file": round(med(ours, "pss_over_base_mb") / size_mb, 2),
            "xprof_mem_over_file": round(med(xprof, "pss_over_base_mb") / size_mb, 2),
            "ours_runs": [round(r["whole_s"], 3) for r in ours],
            "xprof_runs": [round(r["whole_s"], 3) for r in xprof],
            "load_avg": round(os.getloadavg()[0], 2),
        }
        row["xprof_over_ours"] = round(row["xprof_s"] / row["ours_s"], 2)
        print(json.dumps(row), flush=True)
        rows.append(row)
    os.makedirs(os.path.join(REPO, "test-output"), exist_ok=True)
    with open(os.path.join(REPO, "test-output", "bench_cold.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
