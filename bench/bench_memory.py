"""Peak memory of one conversion in one process, over the profile's size.

    python bench/bench_memory.py [--repeat 3] [--shapes a,b] [--data DIR] [--trees A,B]

Each repetition starts a fresh interpreter (`TB_ROOFLINE_WORKERS=1`, disk cache off) that
imports every module a read runs, notes its RSS, lists the run, converts every host, builds
the program and op answers, and reports its high-water RSS (`VmHWM`) less that base, over the
profile's size on disk: what the data costs, the allocator's holes included. `--trees` measures
other checkouts of the repository side by side (e.g. a `git worktree` of an older commit),
interleaved; medians. bench_cold.py measures the whole process tree (the worker pool too).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE]

import bench_cold  # noqa: E402 (its shapes)
import bench_env  # noqa: E402
import bench_xplane  # noqa: E402 (its generator)

CODE = r"""
import json, os, sys
os.environ["TB_ROOFLINE_CACHE_DIR"] = "off"
os.environ["TB_ROOFLINE_WORKERS"] = "1"

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])

import tb_roofline
from tb_roofline.serve.service.core import RooflineService
import tb_roofline.execute.pool, tb_roofline.readers.xspace.read
import tb_roofline.readers.xspace.tpu.file
import tb_roofline.model.records.roofline, tb_roofline.serve.service.answers
import tb_roofline.execute.cluster, tb_roofline.devices.device_file
import tb_roofline.model.records.device_overrides
base = status("VmRSS")
s = RooflineService(sys.argv[1])
run = s.list_runs()["runs"][0]["run"]
s.analysis(run, "")
s.program(run, "", True)
s.ops(run, "", True)
print(json.dumps({"over_kb": status("VmHWM") - base, "code": tb_roofline.__file__}))
"""


def measure(tree: str, logdir: str) -> float:
    """KB of high-water RSS above the imports, one fresh process of `tree`'s code."""
    done = subprocess.run(
        [sys.executable, "-c", CODE, logdir],
        capture_output=True,
        text=True,
        cwd=tree,
        env=bench_env.child_env(tree),
        check=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if not out["code"].startswith(os.path.realpath(tree)):
        raise RuntimeError(f"measured {out['code']}, not {tree}'s code")
    return out["over_kb"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default=",".join(bench_cold.SHAPES))
    parser.add_argument("--data", default="")
    parser.add_argument("--trees", default=REPO)
    args = parser.parse_args()
    root = args.data or tempfile.mkdtemp(prefix="tbr_mem_")
    bench_xplane.SHAPES.update(bench_cold.SHAPES)
    trees = [os.path.realpath(t) for t in args.trees.split(",")]
    for name in args.shapes.split(","):
        logdir, session = bench_xplane.make_shape(root, name)
        size_kb = sum(os.path.getsize(p) for p in glob.glob(os.path.join(session, "*.pb"))) / 1024
        runs: dict = {t: [] for t in trees}
        for _ in range(args.repeat):
            for t in trees:
                runs[t].append(measure(t, logdir) / size_kb)
        print(
            json.dumps(
                {
                    "shape": name,
                    "file_mb": round(size_kb / 1024, 1),
                    **{t: round(statistics.median(v), 2) for t, v in runs.items()},
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
