"""Cold conversion of a large generated TPU profile: tb-roofline vs the XProf converter.

    python bench/bench_xplane.py [--events 200000] [--repeat 3]

Each side runs in a fresh subprocess (cold: no cache, imports included in a separate figure)
so peak memory (max RSS) is measured per side. Also times a cached API answer.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

OURS = r"""
import json, sys, time, resource
t0 = time.perf_counter()
from tb_roofline.serve.service import RooflineService
t1 = time.perf_counter()
s = RooflineService(sys.argv[1])
run = s.list_runs()["runs"][0]["run"]
s.program(run, "", True); s.ops(run, "", True)
t2 = time.perf_counter()
for _ in range(20):
    s.ops(run, "", True)
t3 = time.perf_counter()
s.ops(run, "", True, name="fusion")
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "convert_s": t2 - t1, "cached_ops_s": (t3 - t2) / 20,
                  "filtered_ops_s": t4 - t3,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

XPROF = r"""
import json, sys, time, resource
t0 = time.perf_counter()
from xprof.convert import raw_to_tool_data
t1 = time.perf_counter()
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "roofline_model",
                                               {"use_saved_result": False})
t2 = time.perf_counter()
assert json.loads(data)[0]["rows"]
print(json.dumps({"import_s": t1 - t0, "convert_s": t2 - t1,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_profile(logdir: str, events: int) -> str:
    sys.path.insert(0, REPO)
    from tb_roofline.synthetic import SynthConfig, write_tpu_session
    cores, steps = 4, 10
    per_step = max(1, events // (cores * steps) - 6)  # + infeed, outfeed, while and its 3 children
    cfg = SynthConfig(seed=42, num_cores=cores, num_steps=steps, ops_per_step=per_step,
                      distinct_ops=400, hostname="bench")
    return write_tpu_session(logdir, "", "2026_01_01_00_00_00", [cfg])[0]


def run_side(code: str, arg: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True,
                         cwd=REPO, check=True, env={**os.environ, "PYTHONPATH": REPO})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="tb_roofline_bench_")
    try:
        path = make_profile(tmp, args.events)
        size_mb = os.path.getsize(path) / 2**20
        ours, theirs = [], []
        for i in range(args.repeat):
            ours.append(run_side(OURS, tmp))
            copy_dir = os.path.join(tmp, f"xprof_{i}")  # XProf writes caches beside its input
            os.makedirs(copy_dir)
            theirs.append(run_side(XPROF, shutil.copy(path, copy_dir)))
        best = lambda rs, k: min(r[k] for r in rs)
        result = {
            "events": args.events, "file_mb": round(size_mb, 1),
            "ours_convert_s": best(ours, "convert_s"), "xprof_convert_s": best(theirs, "convert_s"),
            "ours_max_rss_mb": best(ours, "max_rss_mb"), "xprof_max_rss_mb": best(theirs, "max_rss_mb"),
            "ours_import_s": best(ours, "import_s"), "xprof_import_s": best(theirs, "import_s"),
            "ours_cached_ops_ms": best(ours, "cached_ops_s") * 1000,
            "ours_filtered_ops_ms": best(ours, "filtered_ops_s") * 1000,
        }
        result["speedup_cold"] = result["xprof_convert_s"] / result["ours_convert_s"]
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
