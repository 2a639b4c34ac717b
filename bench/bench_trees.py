"""Two checkouts of tb-roofline, one conversion each way: which tree converts faster.

    python bench/bench_trees.py --trees /tmp/old_checkout,. --data /tmp/tbr_inproc \
        --shapes 1core_2000ops_100steps,8hosts_500x100 --rounds 3 --repeat 5

Each round starts one fresh interpreter per tree (alternated), which converts the shape once
to warm up and then `--repeat` fresh copies (a new `RooflineService`, disk cache off, one
process: `TB_ROOFLINE_WORKERS=1`): discovery, reading, the model, the program and op answers.
Reported: the least CPU time and wall time per tree over all rounds (this VM's CPU time moves
by tens of percent between processes; the least is the steadiest figure). Profiles come from
`bench/bench_inprocess.py --data DIR` (its shape names).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, shutil, sys, tempfile, time
os.environ["TB_ROOFLINE_CACHE_DIR"] = "off"
os.environ["TB_ROOFLINE_WORKERS"] = "1"
sys.path.insert(0, os.getcwd())
try:  # this layout, or a checkout from before it
    from tb_roofline.serve.service.core import RooflineService
except ImportError:
    from tb_roofline.serve.service import RooflineService
src, repeat = sys.argv[1], int(sys.argv[2])
work = tempfile.mkdtemp()
def convert(k):
    dst = os.path.join(work, str(k))
    shutil.copytree(src, dst)
    t, c = time.perf_counter(), time.process_time()
    s = RooflineService(dst)
    run = s.list_runs()["runs"][0]["run"]
    s.program(run, "", True)
    s.ops(run, "", True)
    return time.perf_counter() - t, time.process_time() - c
convert(0)
print(json.dumps([convert(k) for k in range(1, repeat + 1)]))
shutil.rmtree(work, ignore_errors=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", required=True, help="comma-separated checkouts")
    ap.add_argument("--data", required=True, help="bench_inprocess.py's --data directory")
    ap.add_argument("--shapes", default="1core_2000ops_100steps")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    trees = [os.path.abspath(t) for t in args.trees.split(",")]
    out = {}
    for shape in args.shapes.split(","):
        src = os.path.join(args.data, shape)
        runs: dict = {t: [] for t in trees}
        for r in range(args.rounds):
            for tree in trees if r % 2 == 0 else trees[::-1]:
                got = subprocess.run(
                    [sys.executable, "-c", CHILD, src, str(args.repeat)],
                    cwd=tree,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[tree] += json.loads(got.stdout.strip().splitlines()[-1])
        out[shape] = {
            t: {"least_cpu_s": min(c for _, c in v), "least_wall_s": min(w for w, _ in v)}
            for t, v in runs.items()
        }
        print(shape, json.dumps(out[shape]), "load", os.getloadavg()[:2], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
