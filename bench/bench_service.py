"""Service caching: cold vs warm `/ops` on a 50,000-op profile, a restart with the persistent
cache, and cycling through twenty runs.

    python bench/bench_service.py [--ops 50000] [--runs 20] [--run-ops 5000] [--repeat 20]
                                  [--corrupt-mb 172] [--code DIR]

`--code DIR` runs the same requests against another checkout (e.g. `git archive` of an older
commit unpacked in DIR) for before/after figures.

Requests go through the plugin's WSGI routes (werkzeug's test client: routing, parameter
parsing, encoding, gzip), each phase in a fresh subprocess so "restart" is a new process with
nothing in memory and only the cache directory (a temporary one) left from before.
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
sys.path.insert(0, HERE)

import bench_env  # noqa: E402 (children run with bytecode, as an installed package does)

COMMON = r"""
import gzip, json, statistics, sys, time
t0 = time.perf_counter()
from werkzeug.test import Client
from tensorboard.plugins import base_plugin
from tb_roofline.serve.web.plugin import RooflinePlugin
import_s = time.perf_counter() - t0
GZ = {"Accept-Encoding": "gzip"}

def timed(client, url, headers=None):
    t = time.perf_counter()
    r = client.get(url, headers=headers or {})
    assert r.status_code == 200, r.data[:300]
    return time.perf_counter() - t, r

def p50(values):
    return statistics.median(values) * 1000

def rss_mb():  # this process's peak (ru_maxrss would carry the parent's over exec)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

def body(r):
    return gzip.decompress(r.data) if r.headers.get("Content-Encoding") == "gzip" else r.data
"""

BIG = (
    COMMON
    + r"""
logdir, repeat = sys.argv[1], int(sys.argv[2])
t = time.perf_counter()
plugin = RooflinePlugin(base_plugin.TBContext(logdir=logdir))
apps = plugin.get_plugin_apps()
runs = Client(apps["/runs"]).get("/runs").json["runs"]
run = runs[0]["run"]
ops, program = Client(apps["/ops"]), Client(apps["/program"])
out = {"import_s": import_s}
program_s, _ = timed(program, f"/program?run={run}", GZ)
out["first_program_ms"] = (time.perf_counter() - t) * 1000  # plugin start to /program answered
cold, r = timed(ops, f"/ops?run={run}", GZ)
out["cold_ops_gzip_ms"] = cold * 1000
out["ops_rows"] = len(json.loads(body(r))["rows"])
out["gzip_mb"] = len(r.data) / 2**20 if r.headers.get("Content-Encoding") == "gzip" else None
cold_plain, r = timed(ops, f"/ops?run={run}")
out["cold_ops_plain_ms"] = cold_plain * 1000  # the analysis cached, encoded anew
out["json_mb"] = len(r.data) / 2**20
out["warm_ops_gzip_p50_ms"] = p50([timed(ops, f"/ops?run={run}", GZ)[0] for _ in range(repeat)])
out["warm_ops_plain_p50_ms"] = p50([timed(ops, f"/ops?run={run}")[0] for _ in range(repeat)])
out["warm_program_p50_ms"] = p50([timed(program, f"/program?run={run}", GZ)[0]
                                 for _ in range(repeat)])
# What every /ops request cost before answers were cached: rows and JSON per request.
service = plugin._service
t = time.perf_counter()
json.dumps(service.ops(run, "", True), allow_nan=False)
out["uncached_ops_rows_and_json_ms"] = (time.perf_counter() - t) * 1000
out["max_rss_mb"] = rss_mb()
print(json.dumps(out))
"""
)

CYCLE = (
    COMMON
    + r"""
logdir, rounds = sys.argv[1], int(sys.argv[2])
plugin = RooflinePlugin(base_plugin.TBContext(logdir=logdir))
apps = plugin.get_plugin_apps()
runs = [r["run"] for r in Client(apps["/runs"]).get("/runs").json["runs"]]
ops, program = Client(apps["/ops"]), Client(apps["/program"])
first, warm = [], []
for i in range(rounds):
    for run in runs:
        t = time.perf_counter()
        timed(program, f"/program?run={run}", GZ)
        timed(ops, f"/ops?run={run}", GZ)
        (first if i == 0 else warm).append(time.perf_counter() - t)
s = plugin._service
mb = lambda name: getattr(getattr(s, name, None), "bytes", 0) / 2**20  # noqa: E731 (older code: 0)
analyses = s.analyses.cache if hasattr(s, "analyses") else s._analysis_cache  # (older code)
print(json.dumps({"runs": len(runs), "first_round_p50_ms": p50(first),
                  "warm_p50_ms": p50(warm), "warm_max_ms": max(warm) * 1000,
                  "analyses_cached": len(analyses),
                  "analysis_cache_mb": analyses.bytes / 2**20,
                  "profile_cache_mb": mb("_host_cache"),
                  "answer_cache_mb": mb("_answer_cache"), "max_rss_mb": rss_mb()}))
"""
)


CORRUPT = (
    COMMON
    + r"""
import concurrent.futures
logdir, clients = sys.argv[1], int(sys.argv[2])
plugin = RooflinePlugin(base_plugin.TBContext(logdir=logdir))
apps = plugin.get_plugin_apps()
run = Client(apps["/runs"]).get("/runs").json["runs"][0]["run"]

def ask(_):
    return Client(apps["/program"]).get(f"/program?run={run}").status_code

t = time.perf_counter()
with concurrent.futures.ThreadPoolExecutor(clients) as pool:
    statuses = list(pool.map(ask, range(clients)))
assert set(statuses) == {422}, statuses
print(json.dumps({"clients": clients, "all_answered_s": time.perf_counter() - t}))
"""
)

CODE = REPO


def run_side(code: str, *args, env=None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=CODE,
        env={**bench_env.child_env(CODE), **(env or {})},
    )
    if out.returncode:
        sys.exit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=50_000, help="distinct ops of the big profile")
    parser.add_argument("--runs", type=int, default=20, help="runs to cycle through")
    parser.add_argument("--run-ops", type=int, default=5_000, help="distinct ops of each run")
    parser.add_argument("--repeat", type=int, default=20, help="warm requests timed")
    parser.add_argument(
        "--corrupt-mb",
        type=float,
        default=172,
        help="size of the corrupt profile asked for by 20 clients at once",
    )
    parser.add_argument("--code", default=REPO, help="checkout to measure (default: this one)")
    args = parser.parse_args()
    global CODE
    CODE = os.path.abspath(args.code)
    sys.path.insert(0, REPO)
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    tmp = tempfile.mkdtemp(prefix="tb_roofline_bench_service_")
    try:
        big, many, cache = (os.path.join(tmp, d) for d in ("big", "many", "cache"))
        path = write_tpu_session(
            big,
            "bench",
            "2026_11_29_12_00_00",
            [
                SynthConfig(
                    seed=7,
                    distinct_ops=args.ops,
                    ops_per_step=args.ops * 4,
                    num_steps=1,
                    num_cores=1,
                    with_while=False,
                    with_sparse_core=False,
                )
            ],
        )[0]
        for i in range(args.runs):
            write_tpu_session(
                many,
                f"run{i:02d}",
                "2026_11_29_12_00_00",
                [
                    SynthConfig(
                        seed=100 + i,
                        distinct_ops=args.run_ops,
                        ops_per_step=args.run_ops * 2,
                        num_steps=2,
                        num_cores=1,
                        with_while=False,
                        with_sparse_core=False,
                    )
                ],
            )
        # A corrupt profile: copies of the big one (valid XSpace when concatenated), the last
        # one cut short; old enough to count as corrupt rather than still being written.
        bad = os.path.join(
            tmp, "corrupt", "plugins", "profile", "2026_01_01_00_00_00", "h.xplane.pb"
        )
        os.makedirs(os.path.dirname(bad))
        with open(path, "rb") as f:
            good = f.read()
        want = int(args.corrupt_mb * 2**20)
        with open(bad, "wb") as f:
            f.write((good * (want // len(good) + 1))[:want])
        os.utime(bad, (1e9, 1e9))
        env = {"TB_ROOFLINE_CACHE_DIR": cache}
        result = {
            "file_mb": round(os.path.getsize(path) / 2**20, 1),
            "cold": run_side(BIG, big, args.repeat, env=env),
            "restart": run_side(BIG, big, args.repeat, env=env),
            "restart_cache_off": run_side(BIG, big, 3, env={"TB_ROOFLINE_CACHE_DIR": "off"}),
            "cycle": run_side(CYCLE, many, 3, env={"TB_ROOFLINE_CACHE_DIR": "off"}),
            "corrupt": run_side(
                CORRUPT,
                os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(bad)))),
                20,
                env={"TB_ROOFLINE_CACHE_DIR": "off"},
            ),
        }
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
