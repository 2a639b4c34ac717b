"""Cold conversion of generated TPU profiles: tb-roofline vs the XProf converter, every shape,
side by side in one run.

    python bench/bench_xplane.py                     # the normal shapes (about 2 minutes)
    python bench/bench_xplane.py --big               # also 2M unique events and 32 hosts
    python bench/bench_xplane.py --shapes 1host_200k --repeat 5
    python bench/bench_xplane.py --big --data /tmp/tbr_bench   # keep the generated files
    python bench/bench_xplane.py --scaling          # ours as steps and hosts grow
    python bench/bench_xplane.py --reader --repeat 7 --data /tmp/tbr_bench   # the reader alone

Each side runs in a fresh subprocess per repetition (cold: no memory cache, the disk cache off,
imports timed apart), the sides interleaved so load changes hit both; medians are reported.
Ours: discovery, reading, the roofline model and the program and op answers (rows ready to
serialise; "analysis" stops before the answers); XProf: `xspace_to_tool_data` (its JSON).
"parse" is the floor: protobuf's `XSpace.FromString` of the same files (our generated classes,
the full schema; file reads not timed). Memory: the peak over time of the summed PSS of the
side's process and its children (a worker pool shares pages with its parent; PSS counts each
once), sampled every 5 ms, and that peak less the PSS after imports, over the files' size
("analysis_mem": up to the end of the analysis).
Profiles are generated at bench time (seeded, `tb_roofline.synthetic`) and never committed.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_env  # noqa: E402 (children run with bytecode, as an installed package does)

# name -> (hosts, SynthConfig fields, big). 200k events a host = 4 cores x 10 steps x 5,000.
PER_200K = dict(num_cores=4, num_steps=10, ops_per_step=200_000 // 40 - 6, distinct_ops=400)
SHAPES = {
    "1host_200k": (1, PER_200K, False),
    "1core_2000ops_100steps": (
        1,
        dict(num_cores=1, num_steps=100, ops_per_step=2000, distinct_ops=2000, op_order="cycle"),
        False,
    ),
    "1core_50ops_1000steps": (
        1,
        dict(num_cores=1, num_steps=1000, ops_per_step=50, distinct_ops=50, op_order="cycle"),
        False,
    ),
    # Events with no stats (no steps, no device timing): ~12 bytes each on disk.
    "1core_tiny_events": (
        1,
        dict(
            num_cores=1,
            num_steps=20,
            ops_per_step=20_000,
            distinct_ops=400,
            with_steps=False,
            with_device_timing=False,
            with_while=False,
        ),
        False,
    ),
    "8hosts_200k": (8, PER_200K, False),
    "1host_2M_unique": (
        1,
        dict(num_cores=4, num_steps=10, ops_per_step=50_000, distinct_ops=50_000, op_order="cycle"),
        True,
    ),
    "1host_2M_2000ops": (
        1,
        dict(num_cores=4, num_steps=250, ops_per_step=2000, distinct_ops=2000, op_order="cycle"),
        True,
    ),
    "32hosts_200k": (32, PER_200K, True),
}

PSS_AFTER_IMPORT = r"""
def _pss_kb():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0
"""

OURS = (
    PSS_AFTER_IMPORT
    + r"""
import json, os, sys, time
os.environ["TB_ROOFLINE_CACHE_DIR"] = "off"
os.environ.setdefault("TB_ROOFLINE_POOL_IDLE_S", "0")  # as a CLI command runs (serve/cli/main.py)
t0 = time.perf_counter()
from tb_roofline.serve.service.core import RooflineService
# Imported on first read anyway: here, so that the PSS base holds the code a read runs and
# the memory figure is the profile's data alone (the time is the same: whole_s counts both).
import tb_roofline.execute.pool, tb_roofline.readers.xspace.read
import tb_roofline.readers.xspace.tpu.file
import tb_roofline.model.records.roofline, tb_roofline.serve.service.answers
t1 = time.perf_counter()
base = _pss_kb()
s = RooflineService(sys.argv[1])
run = s.list_runs()["runs"][0]["run"]
s.analysis(run, "")
analysed, analysed_at = time.perf_counter(), time.time()
s.program(run, "", True); ops = s.ops(run, "", True)
t2 = time.perf_counter()
# "whole": a whole process as a user waits for it (bench_cold.py), ending with the answers;
# otherwise also the answers asked again and a filtered one, timed apart.
again = 0 if sys.argv[2:] == ["whole"] else 20
for _ in range(again):
    s.ops(run, "", True)
t3 = time.perf_counter()
if again:
    s.ops(run, "", True, name="fusion")
t4 = time.perf_counter()
import resource
from tb_roofline.execute import pool as parallel
parallel.shutdown()  # workers joined: their CPU time counts below
cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF,
          resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
print(json.dumps({"import_s": t1 - t0, "convert_s": t2 - t1, "analysis_s": analysed - t1,
                  "cpu_s": cpu,
                  "analysed_at": analysed_at, "cached_ops_s": (t3 - t2) / max(again, 1),
                  "filtered_ops_s": t4 - t3, "base_pss_kb": base,
                  "ops": len(ops["rows"])}))
"""
)

XPROF = (
    PSS_AFTER_IMPORT
    + r"""
import glob, json, sys, time
t0 = time.perf_counter()
from xprof.convert import raw_to_tool_data
t1 = time.perf_counter()
base = _pss_kb()
paths = sorted(glob.glob(sys.argv[1] + "/*.xplane.pb"))
data, _ = raw_to_tool_data.xspace_to_tool_data(paths, "roofline_model", {"use_saved_result": False})
t2 = time.perf_counter()
assert json.loads(data)[0]["rows"]
print(json.dumps({"import_s": t1 - t0, "convert_s": t2 - t1, "base_pss_kb": base}))
"""
)

PARSE = (
    PSS_AFTER_IMPORT
    + r"""
import glob, json, sys, time
t0 = time.perf_counter()
from tb_roofline.protos import xplane_pb2
t1 = time.perf_counter()
base = _pss_kb()
total = 0.0
for p in sorted(glob.glob(sys.argv[1] + "/*.xplane.pb")):
    with open(p, "rb") as f:
        raw = f.read()
    t = time.perf_counter()
    space = xplane_pb2.XSpace.FromString(raw)
    total += time.perf_counter() - t
    del space, raw
print(json.dumps({"import_s": t1 - t0, "convert_s": total, "base_pss_kb": base}))
"""
)


READER = r"""
import glob, json, os, sys, time
os.environ["TB_ROOFLINE_WORKERS"] = "1"
from tb_roofline.readers.xspace.read import read_xspace_file
files = sorted(glob.glob(os.path.join(sys.argv[1], "*.xplane.pb")))
best = {"cpu_s": 1e9, "wall_s": 1e9}
for _ in range(int(sys.argv[2])):
    w, c = time.perf_counter(), time.process_time()
    for f in files:
        read_xspace_file(f, "h")
    best["wall_s"] = min(best["wall_s"], time.perf_counter() - w)
    best["cpu_s"] = min(best["cpu_s"], time.process_time() - c)
print(json.dumps({k: round(v, 4) for k, v in best.items()}))
"""


def reader_only(root: str, names: list, repeat: int):
    """The reader alone (`read_xspace_file`, one process, no model): the least CPU time of
    `repeat` reads of each shape's files. CPU time and the minimum, so a busy machine changes
    the figure least (for before/after comparisons of the reader's code)."""
    for name in names:
        _, session = make_shape(root, name)
        out = subprocess.run(
            [sys.executable, "-c", READER, session, str(repeat)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=bench_env.child_env(REPO),
            check=True,
        )
        print(json.dumps({"shape": name, **json.loads(out.stdout)}), flush=True)


def _gen_host(args):
    session, cfg_fields = args
    sys.path.insert(0, REPO)
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    cfg = SynthConfig(**cfg_fields)
    write_tpu_session(session, "", "2026_01_01_00_00_00", [cfg])


def make_shape(root: str, name: str) -> tuple[str, str]:
    """(logdir, session directory holding the .xplane.pb files), generated unless present."""
    hosts, fields, _ = SHAPES[name]
    logdir = os.path.join(root, name)
    session = os.path.join(logdir, "plugins", "profile", "2026_01_01_00_00_00")
    done = os.path.join(logdir, "DONE")
    if not os.path.exists(done):
        shutil.rmtree(logdir, ignore_errors=True)
        jobs = [
            (logdir, dict(fields, seed=42 + h, program_seed=42, hostname=f"host{h:02d}"))
            for h in range(hosts)
        ]
        with multiprocessing.get_context("spawn").Pool(min(hosts, os.cpu_count() or 1)) as pool:
            pool.map(_gen_host, jobs)
        open(done, "w").close()
    return logdir, session


def _tree_pss_kb(pid: int) -> int:
    """Summed PSS of a process and its descendants (0 for one that is gone)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def run_side(code: str, arg: str, *more: str) -> dict:
    """Run one side in a fresh interpreter, sampling its tree's PSS."""
    env = bench_env.child_env(REPO)
    proc = subprocess.Popen(
        [sys.executable, "-c", code, arg, *more],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    samples = []  # (wall time, PSS kB)

    def sample():
        while proc.poll() is None:
            samples.append((time.time(), _tree_pss_kb(proc.pid)))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    sampler.join()
    if proc.returncode:
        raise RuntimeError(f"side failed ({proc.returncode}):\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    peak = max((kb for _, kb in samples), default=0)
    result["peak_pss_mb"] = peak / 1024
    result["pss_over_base_mb"] = (peak - result["base_pss_kb"]) / 1024
    if "analysed_at" in result:  # the conversion alone, before answers are built
        before = max((kb for t, kb in samples if t <= result["analysed_at"]), default=0)
        result["analysis_pss_over_base_mb"] = (before - result["base_pss_kb"]) / 1024
    return result


def bench_shape(root: str, name: str, repeat: int, sides: list[str]) -> dict:
    logdir, session = make_shape(root, name)
    files = sorted(glob.glob(os.path.join(session, "*.xplane.pb")))
    size_mb = sum(os.path.getsize(p) for p in files) / 2**20
    results = {side: [] for side in sides}
    for _i in range(repeat):
        for side in sides:
            if side == "ours":
                results[side].append(run_side(OURS, logdir))
            elif side == "parse":
                results[side].append(run_side(PARSE, session))
            else:  # XProf writes caches beside its input: give it a copy
                copy = tempfile.mkdtemp(prefix="xprof_", dir=root)
                for p in files:
                    shutil.copy(p, copy)
                try:
                    results[side].append(run_side(XPROF, copy))
                finally:
                    shutil.rmtree(copy, ignore_errors=True)
    med = lambda side, key: statistics.median(r[key] for r in results[side])
    out = {"shape": name, "hosts": len(files), "file_mb": round(size_mb, 1)}
    for side in sides:
        out[f"{side}_s"] = round(med(side, "convert_s"), 4)
        out[f"{side}_import_s"] = round(med(side, "import_s"), 3)
        out[f"{side}_peak_pss_mb"] = round(med(side, "peak_pss_mb"), 1)
        out[f"{side}_mem_over_file"] = round(med(side, "pss_over_base_mb") / size_mb, 2)
    if "ours" in sides:
        out["ours_analysis_s"] = round(med("ours", "analysis_s"), 4)
        out["ours_cpu_s"] = round(med("ours", "cpu_s"), 3)  # whole process, imports included
        out["ours_analysis_mem_over_file"] = round(
            med("ours", "analysis_pss_over_base_mb") / size_mb, 2
        )
        out["ours_cached_ops_ms"] = round(med("ours", "cached_ops_s") * 1000, 2)
        out["ours_filtered_ops_ms"] = round(med("ours", "filtered_ops_s") * 1000, 2)
        out["ops"] = results["ours"][0]["ops"]
        if "xprof" in sides:
            out["ratio_ours_over_xprof"] = round(out["ours_s"] / out["xprof_s"], 3)
        if "parse" in sides:
            out["ratio_ours_over_parse"] = round(out["ours_s"] / out["parse_s"], 2)
    out["load_avg"] = round(os.getloadavg()[0], 2)
    out["runs"] = {side: [round(r["convert_s"], 4) for r in rs] for side, rs in results.items()}
    return out


def scaling(root: str, repeat: int):
    """Ours alone, as steps and hosts grow: the time per step and per host should stay flat."""
    rows = []
    for steps in (250, 500, 1000, 2000):
        name = f"scale_steps_{steps}"
        SHAPES[name] = (
            1,
            dict(num_cores=1, num_steps=steps, ops_per_step=50, distinct_ops=50, op_order="cycle"),
            False,
        )
        r = bench_shape(root, name, repeat, ["ours"])
        rows.append(
            {
                "steps": steps,
                "ours_s": r["ours_s"],
                "per_step_ms": round(r["ours_s"] / steps * 1000, 3),
            }
        )
    _, hosts_dir = make_shape(root, "8hosts_200k")
    files = sorted(glob.glob(os.path.join(hosts_dir, "*.xplane.pb")))
    for n in (1, 2, 4, 8):
        name = f"scale_hosts_{n}"
        session = os.path.join(root, name, "plugins", "profile", "2026_01_01_00_00_00")
        if not os.path.isdir(session):
            os.makedirs(session)
            for f in files[:n]:
                os.link(f, os.path.join(session, os.path.basename(f)))
            open(os.path.join(root, name, "DONE"), "w").close()
        SHAPES[name] = (n, {}, False)
        r = bench_shape(root, name, repeat, ["ours"])
        rows.append(
            {"hosts": n, "ours_s": r["ours_s"], "per_host_ms": round(r["ours_s"] / n * 1000, 1)}
        )
    for row in rows:
        print(json.dumps(row), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shapes",
        default="",
        help="comma-separated shape names (default: all "
        "normal ones, plus the big ones with --big): " + ", ".join(SHAPES),
    )
    parser.add_argument("--big", action="store_true", help="include the big shapes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sides", default="ours,xprof,parse")
    parser.add_argument(
        "--scaling", action="store_true", help="ours alone as steps (250-2000) and hosts (1-8) grow"
    )
    parser.add_argument(
        "--reader",
        action="store_true",
        help="the reader alone, in one process: least CPU time of --repeat",
    )
    parser.add_argument(
        "--data",
        default="",
        help="keep generated profiles in this directory "
        "(reused by later runs); default: a temporary one, removed",
    )
    args = parser.parse_args()
    names = (
        args.shapes.split(",")
        if args.shapes
        else [n for n, (_, _, big) in SHAPES.items() if args.big or not big]
    )
    root = args.data or tempfile.mkdtemp(prefix="tb_roofline_bench_")
    os.makedirs(root, exist_ok=True)
    try:
        if args.scaling:
            scaling(root, args.repeat)
            return
        if args.reader:
            reader_only(root, names, args.repeat)
            return
        for name in names:
            print(
                json.dumps(bench_shape(root, name, args.repeat, args.sides.split(","))), flush=True
            )
    finally:
        if not args.data:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
