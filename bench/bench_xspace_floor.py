"""One big XSpace host against the parse floor: ours (the whole op analysis of the host)
against protobuf's `XSpace.FromString` of the same bytes, both sides in one run, medians.

    python bench/bench_xspace_floor.py --mb 257 --repeat 3 --data /tmp/tbr_floor
    python bench/bench_xspace_floor.py --data /tmp/tbr_floor --threads   # parse on 2 threads?

The host is a real testdata profile (`testdata/demo/v6e_train`: 4 TensorCores, 6 steps, 420
ops a core) repeated in time until the file reaches `--mb`: each copy of a line's events is
shifted by the line's span (offsets, device offsets) and by its steps (group ids, step and run
numbers), so the big host is the small one run for thousands of steps. Written to a temporary
directory (or `--data`, reused), never committed.

Each side runs in a fresh subprocess per repetition, the sides alternated: "parse" reads the
file's bytes (not timed) and times `XSpace.FromString` (our generated classes, the full schema,
the protobuf backend in use); "ours" times `tb-roofline`'s service from discovery to the op
answer (disk cache off), on all the cores the process may use. Peak memory: the high-water RSS
of the process and its workers (`ru_maxrss` of self and children) less the RSS after imports.
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
SOURCE = os.path.join(
    REPO, "testdata/demo/v6e_train/plugins/profile/2026_11_29_10_00_00/tpu-v6e-host0.xplane.pb"
)
RUN = "plugins/profile/2030_01_01_00_00_00"
SHIFTED_STATS = ("group_id", "step_num", "run_id", "device_offset_ps")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _line_bytes(line, copies: int, stat_names: dict) -> bytes:
    """The line with its events repeated `copies` times in time (serialized XLine messages
    concatenate into one: their repeated events append)."""
    from tb_roofline.protos import xplane_pb2

    events = list(line.events)
    if not events:
        return line.SerializeToString()
    span = max(e.offset_ps + e.duration_ps for e in events) + 1_000_000
    steps = 1 + max(
        (
            s.int64_value
            for e in events
            for s in e.stats
            if stat_names.get(s.metadata_id) == "group_id"
        ),
        default=0,
    )
    head = xplane_pb2.XLine()
    head.CopyFrom(line)
    del head.events[:]
    head.duration_ps = span * copies
    parts = [head.SerializeToString()]
    copy = xplane_pb2.XLine()
    copy.events.extend(events)
    for k in range(copies):
        if k:
            for e in copy.events:
                e.offset_ps += span
                for s in e.stats:
                    name = stat_names.get(s.metadata_id)
                    if name == "device_offset_ps":
                        s.uint64_value += span
                    elif name == "group_id":
                        s.int64_value += steps
                    elif name in ("step_num", "run_id"):
                        s.uint64_value += steps
        parts.append(copy.SerializeToString())
    return b"".join(parts)


def make_host(path: str, mb: float) -> None:
    """The source profile repeated in time to about `mb` MB, written at `path`."""
    from tb_roofline.protos import xplane_pb2

    with open(SOURCE, "rb") as f:
        space = xplane_pb2.XSpace.FromString(f.read())
    per_copy = sum(line.ByteSize() for plane in space.planes for line in plane.lines)
    copies = max(1, round((mb * 2**20 - space.ByteSize()) / per_copy) + 1)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".part", "wb") as out:
        for plane in space.planes:
            names = {k: v.name for k, v in plane.stat_metadata.items()}
            # In protobuf's field order, as profilers write it: id and name, the lines, then
            # the metadata and stats (serialized messages concatenate into one)
            head = xplane_pb2.XPlane(id=plane.id, name=plane.name)
            rest = xplane_pb2.XPlane()
            rest.CopyFrom(plane)
            del rest.lines[:]
            rest.id, rest.name = 0, ""
            lines = b"".join(_field(3, _line_bytes(ln, copies, names)) for ln in plane.lines)
            body = head.SerializeToString() + lines + rest.SerializeToString()
            out.write(_field(1, body))
    os.replace(path + ".part", path)


CHILD = r"""
import json, os, resource, sys, time
side, logdir = sys.argv[1], sys.argv[2]
def rss_kb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
if side == "parse":
    from tb_roofline.protos import xplane_pb2
    from google.protobuf.internal import api_implementation
    path = next(os.path.join(d, f) for d, _, fs in os.walk(logdir) for f in fs if f.endswith(".pb"))
    data = open(path, "rb").read()
    base = rss_kb()
    cpu0 = os.times()
    t = time.perf_counter()
    space = xplane_pb2.XSpace.FromString(data)
    wall = time.perf_counter() - t
    extra = {"backend": api_implementation.Type(), "planes": len(space.planes)}
else:
    from tb_roofline.serve.service.core import RooflineService
    base = rss_kb()
    cpu0 = os.times()
    t = time.perf_counter()
    svc = RooflineService(logdir)
    run = svc.list_runs()["runs"][0]["run"]
    svc.program(run, "", True)
    rows = len(svc.ops(run, "", True)["rows"])
    wall = time.perf_counter() - t
    from tb_roofline.execute import pool
    pool.shutdown()  # (its workers reaped: their CPU time counted)
    extra = {"rows": rows}
peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
           resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
cpu1 = os.times()
cpu = sum(cpu1[:4]) - sum(cpu0[:4])
print(json.dumps(dict(wall=wall, cpu=cpu, peak_mb=(peak - base) / 1024, **extra)))
"""


def run_side(side: str, logdir: str) -> dict:
    env = dict(
        os.environ, PYTHONPATH=REPO, TB_ROOFLINE_POOL_IDLE_S="0", TB_ROOFLINE_CACHE_DIR="off"
    )
    out = subprocess.run(
        [sys.executable, "-c", CHILD, side, logdir],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(f"{side} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def threads_check(path: str) -> None:
    """Whether the protobuf backend parses on two threads at once: two TensorCore planes'
    `XPlane.FromString` one after the other, then in two threads (wall and CPU time)."""
    import threading
    import time

    from google.protobuf.internal import api_implementation

    from tb_roofline.protos import xplane_pb2
    from tb_roofline.readers.xspace.tpu import file as tpu_file

    plan = tpu_file.plan_file(path, "host")
    with open(path, "rb") as f:
        data = f.read()
    planes = [data[s:e] for _, s, e in plan.cores[:2]]
    del data

    def serial():
        for b in planes:
            xplane_pb2.XPlane.FromString(b)

    def threaded():
        ts = [threading.Thread(target=xplane_pb2.XPlane.FromString, args=(b,)) for b in planes]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    print(f"protobuf backend: {api_implementation.Type()}")
    for _ in range(3):
        for name, fn in (("one thread", serial), ("two threads", threaded)):
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"two planes, {name:11s}: wall {wall:.2f} s, CPU {cpu:.2f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=257.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sides", default="parse,ours")
    parser.add_argument("--data", default="", help="keep the generated host here (reused)")
    parser.add_argument(
        "--threads", action="store_true", help="only: does the parse run on two threads at once"
    )
    args = parser.parse_args()
    root = args.data or tempfile.mkdtemp(prefix="tbr_floor_")
    logdir = os.path.join(root, f"host_{int(args.mb)}mb")
    path = os.path.join(logdir, RUN, "tpu-host0.xplane.pb")
    if not os.path.exists(path):
        make_host(path, args.mb)
    if args.threads:
        threads_check(path)
        return
    size_mb = os.path.getsize(path) / 2**20
    sides = args.sides.split(",")
    got: dict = {s: [] for s in sides}
    for i in range(args.repeat):
        for side in sides if i % 2 == 0 else sides[::-1]:
            got[side].append(run_side(side, logdir))
            print(side, got[side][-1], flush=True)
    print(f"\nfile {size_mb:.1f} MB, load {os.getloadavg()[0]:.2f}, cores {os.cpu_count()}")
    for side, runs in got.items():
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        peak = statistics.median(r["peak_mb"] for r in runs)
        print(
            f"{side:6s} wall {wall:.2f} s  CPU {cpu:.2f} s  peak {peak:.0f} MB "
            f"({peak / size_mb:.2f}x the file)"
        )


if __name__ == "__main__":
    main()
