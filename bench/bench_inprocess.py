"""Warm process, cold data: tb-roofline's conversion against XProf's converter, each in its own
long-lived Python process, both imported and warmed on another profile first.

    python bench/bench_inprocess.py --repeat 7 --data /tmp/tbr_inproc
    python bench/bench_inprocess.py --shapes 1core_2000ops_100steps,8hosts_500x100 --repeat 9

This is what a user of a running TensorBoard, MCP server or notebook waits for when a new
profile arrives: the code is imported and has run once (on the warm-up profile, a different
program), the data has never been seen. Each side is one child interpreter that imports its
converter, converts the warm-up profile, then converts, on request, a fresh copy of the target
profile (a new directory each time: nothing of an earlier copy can be found by path), the sides
interleaved (their order alternating) and medians reported.

Ours: a new `RooflineService` each time (its memory caches are its own), the disk cache off,
the op-metadata and cost caches of the readers cleared; discovery, reading (on all cores when
the profile is large enough, `execute/pool.py`), the roofline model, the program and op
answers (rows ready to serialise), as bench_xplane.py's "ours". The worker pool leaves after
each conversion (`TB_ROOFLINE_POOL_IDLE_S=0`, as the CLI runs), so no worker keeps what it
decoded of one copy for the next: a conversion that needs workers pays for starting them.
XProf 2.24.2: `xspace_to_tool_data(paths, "roofline_model", {"use_saved_result": False})`.

CPU time: the child's, its threads' and (ours) its worker processes'.

Memory: the child's high-water RSS during each timed conversion (`VmHWM`, reset before it
through /proc/self/clear_refs) less its RSS right after the imports ("hwm": a warm process
keeps heap it freed, XProf's allocator more than ours, so growth during one conversion alone
would understate what converting needs; "growth" is that too, for reference); and, in one
more untimed conversion per side, the summed PSS of the child and its worker processes
sampled every 5 ms by this process less the PSS after the imports ("tree"; reading smaps
walks the child's page tables, so never while timing). The larger of the two, over the
profile's size on disk, is the memory figure. Profiles are generated at bench time
(`tb_roofline.synthetic`, seeded) and never committed. Raw figures:
test-output/bench_inprocess.json.
"""

from __future__ import annotations

import argparse
import glob
import json
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
sys.path[:0] = [REPO, HERE]

import bench_cold  # noqa: E402 (its shapes)
import bench_env  # noqa: E402
import bench_xplane  # noqa: E402 (the generator, the tree PSS sampler)

SHAPES = {
    "1core_2000ops_100steps": bench_xplane.SHAPES["1core_2000ops_100steps"],
    "8hosts_500x100": bench_cold.SHAPES["8hosts_500x100"],
    "32hosts_500x100": bench_cold.SHAPES["32hosts_500x100"],
    "1core_50ops_1000steps": bench_xplane.SHAPES["1core_50ops_1000steps"],
    "1host_200k": bench_xplane.SHAPES["1host_200k"],
    "1core_tiny_events": bench_xplane.SHAPES["1core_tiny_events"],
    # A pod below the pool's 16 MB: 4 hosts of 4 TensorCores, read in one process.
    "4hosts_4cores_500x20": (
        4,
        dict(num_cores=4, num_steps=20, ops_per_step=500, distinct_ops=500, op_order="cycle"),
        False,
    ),
}
# The warm-up: another program (its own seed and op count), every code path of a TPU host.
WARMUP = {
    "warmup_2hosts": (
        2,
        dict(num_cores=2, num_steps=20, ops_per_step=300, distinct_ops=300, op_order="cycle"),
        False,
    )
}

CHILD_COMMON = (
    r"""
import gc, json, os, sys, time

def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0

"""
    + bench_xplane.PSS_AFTER_IMPORT
    + r"""
def _children_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def serve(convert, after=None):
    print(json.dumps({"rss_kb": _status("VmRSS"), "pss_kb": _pss_kb()}), flush=True)
    for line in sys.stdin:
        path = json.loads(line)["path"]
        gc.collect()
        before_rss, before_pss = _status("VmRSS"), _pss_kb()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
        print(json.dumps({"ready": True, "pss_kb": before_pss}), flush=True)
        k0 = _children_cpu()
        t0, c0 = time.perf_counter(), time.process_time()
        extra = convert(path)
        t1, c1 = time.perf_counter(), time.process_time()
        if after is not None:  # (untimed: worker processes joined, their CPU time counted)
            after()
        out = {"convert_s": t1 - t0, "cpu_s": c1 - c0 + _children_cpu() - k0, "rss_kb": before_rss,
               "hwm_kb": _status("VmHWM"), "pss_kb": before_pss, **extra}
        del extra
        print(json.dumps(out), flush=True)
"""
)

OURS = (
    CHILD_COMMON
    + r"""
os.environ["TB_ROOFLINE_CACHE_DIR"] = "off"
os.environ["TB_ROOFLINE_POOL_IDLE_S"] = "0"
from tb_roofline.readers import kernel_names
try:  # this layout, or a checkout from before it (--before)
    from tb_roofline.serve.service.core import RooflineService
    from tb_roofline.readers.xspace.tpu import plane as tpu_plane
    from tb_roofline.costs.hlo import cost_model
    from tb_roofline.execute import pool as parallel
except ImportError:
    from tb_roofline.serve.service import RooflineService
    from tb_roofline.readers import tpu_plane, parallel
    from tb_roofline.hlo import cost_model

def convert(logdir):
    tpu_plane.clear_info_cache()
    cost_model._GLOBAL_CACHE.clear()
    for fn in (kernel_names.__dict__.values()):
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()
    s = RooflineService(logdir)
    run = s.list_runs()["runs"][0]["run"]
    s.program(run, "", True)
    rows = len(s.ops(run, "", True)["rows"])
    return {"ops": rows}

serve(convert, parallel.shutdown)
"""
)

XPROF = (
    CHILD_COMMON
    + r"""
import glob
from xprof.convert import raw_to_tool_data

def convert(session):
    paths = sorted(glob.glob(session + "/*.xplane.pb"))
    data, _ = raw_to_tool_data.xspace_to_tool_data(
        paths, "roofline_model", {"use_saved_result": False})
    return {"ops": len(json.loads(data)[0]["rows"])}

serve(convert)
"""
)


class Side:
    """One long-lived child interpreter converting profiles on request."""

    def __init__(self, name: str, code: str, tree: str = REPO):
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tree,  # (a `-c` child imports from its working directory first)
            env=bench_env.child_env(tree),
        )
        self.imported = json.loads(self.proc.stdout.readline())  # RSS and PSS after imports

    def convert(self, path: str, sample: bool = False) -> dict:
        """Convert `path`; with `sample`, this process also samples the child's tree PSS every
        5 ms (reading smaps walks the child's page tables: not while timing)."""
        self.proc.stdin.write(json.dumps({"path": path}) + "\n")
        self.proc.stdin.flush()
        ready = self.proc.stdout.readline()
        if not ready:
            raise RuntimeError(f"{self.name} side died (exit {self.proc.wait()})")
        peak = [0]
        done = threading.Event()

        sample_tree = sample

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], bench_xplane._tree_pss_kb(self.proc.pid))
                time.sleep(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        if sample_tree:
            sampler.start()
        line = self.proc.stdout.readline()
        done.set()
        if sample_tree:
            sampler.join()
        if not line:
            raise RuntimeError(f"{self.name} side died (exit {self.proc.wait()})")
        out = json.loads(line)
        # Above the imports: a warm process keeps heap it freed (XProf's allocator does), so the
        # growth during one conversion alone would understate what converting it needs.
        out["tree_over_import_kb"] = max(peak[0] - self.imported["pss_kb"], 0)
        out["hwm_over_import_kb"] = out["hwm_kb"] - self.imported["rss_kb"]
        out["hwm_over_before_kb"] = out["hwm_kb"] - out["rss_kb"]
        return out

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def fresh_copy(root: str, logdir: str) -> tuple[str, str]:
    """A never-seen copy of a generated logdir: (the copy's logdir, its session directory)."""
    copy = tempfile.mkdtemp(prefix="copy_", dir=root)
    session_rel = os.path.relpath(
        glob.glob(os.path.join(logdir, "plugins", "profile", "*"))[0], logdir
    )
    session = os.path.join(copy, session_rel)
    os.makedirs(session)
    for p in sorted(glob.glob(os.path.join(logdir, session_rel, "*.xplane.pb"))):
        shutil.copy(p, session)
    return copy, session


def bench_shape(root: str, name: str, repeat: int, sides: dict) -> dict:
    logdir, session = bench_xplane.make_shape(root, name)
    size_mb = sum(os.path.getsize(p) for p in glob.glob(session + "/*.xplane.pb")) / 2**20
    runs: dict = {n: [] for n in sides}
    tree: dict = {}
    loads = [os.getloadavg()[0]]
    order = list(sides)
    for i in range(repeat):
        for n in order if i % 2 == 0 else order[::-1]:
            copy, copy_session = fresh_copy(root, logdir)
            try:
                runs[n].append(sides[n].convert(copy if n != "xprof" else copy_session))
            finally:
                shutil.rmtree(copy, ignore_errors=True)
        loads.append(os.getloadavg()[0])
    for n in order:  # memory: one more conversion each, the tree sampled
        copy, copy_session = fresh_copy(root, logdir)
        try:
            tree[n] = sides[n].convert(copy if n != "xprof" else copy_session, sample=True)
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    med = lambda n, k: statistics.median(r[k] for r in runs[n])  # noqa: E731
    out = {"shape": name, "file_mb": round(size_mb, 1)}
    for n in sides:
        out[f"{n}_s"] = round(med(n, "convert_s"), 4)
        out[f"{n}_cpu_s"] = round(med(n, "cpu_s"), 4)
        out[f"{n}_hwm_mb"] = round(med(n, "hwm_over_import_kb") / 1024, 1)
        out[f"{n}_growth_mb"] = round(med(n, "hwm_over_before_kb") / 1024, 1)
        out[f"{n}_tree_mb"] = round(tree[n]["tree_over_import_kb"] / 1024, 1)
        out[f"{n}_mem_over_file"] = round(max(out[f"{n}_hwm_mb"], out[f"{n}_tree_mb"]) / size_mb, 2)
        out[f"{n}_ops"] = runs[n][0]["ops"]
    if "before" in sides and "ours" in sides:
        out["before_over_ours"] = round(out["before_s"] / out["ours_s"], 2)
    if "ours" in sides and "xprof" in sides:
        out["xprof_over_ours"] = round(out["xprof_s"] / out["ours_s"], 2)
        out["mem_xprof_over_ours"] = round(
            out["xprof_mem_over_file"] / max(out["ours_mem_over_file"], 0.001), 2
        )
    out["load_avg"] = [round(min(loads), 2), round(max(loads), 2)]
    out["runs"] = {n: [round(r["convert_s"], 4) for r in rs] for n, rs in runs.items()}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=", ".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sides", default="ours,xprof")
    parser.add_argument(
        "--before",
        default="",
        help="another checkout (a git worktree of an older commit): its ours runs as the side "
        "'before', interleaved with the others",
    )
    parser.add_argument("--data", default="", help="keep generated profiles here (reused)")
    parser.add_argument("--out", default=os.path.join(REPO, "test-output", "bench_inprocess.json"))
    args = parser.parse_args()
    bench_xplane.SHAPES.update(SHAPES)
    bench_xplane.SHAPES.update(WARMUP)
    root = args.data or tempfile.mkdtemp(prefix="tbr_inproc_")
    os.makedirs(root, exist_ok=True)
    codes = {"ours": OURS, "xprof": XPROF}
    sides = {n: Side(n, codes[n]) for n in args.sides.split(",")}
    if args.before:
        sides["before"] = Side("before", OURS, os.path.abspath(args.before))
    run_sides(root, sides, args.shapes.split(","), args.repeat, bench_shape, args.out, args.data)


def run_sides(root, sides, shapes, repeat, bench_fn, out, keep_data) -> list:
    """Warm every side up (twice: lazy imports, pool start), then `bench_fn(root, shape,
    repeat, sides)` for each shape; the rows printed as they come and written to `out`."""
    rows = []
    try:
        warm_logdir, _ = bench_xplane.make_shape(root, "warmup_2hosts")
        for _ in range(2):
            for n, side in sides.items():
                copy, copy_session = fresh_copy(root, warm_logdir)
                side.convert(copy if n != "xprof" else copy_session)
                shutil.rmtree(copy, ignore_errors=True)
        for name in shapes:
            rows.append(bench_fn(root, name, repeat, sides))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        for side in sides.values():
            side.close()
        if not keep_data:
            shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
