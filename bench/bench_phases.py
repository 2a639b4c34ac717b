"""Where a warm process's conversion spends its time: decoding the events against the rest, and
what that bounds. For each shape, XProf's converter and ours convert fresh copies in their own
long-lived processes (bench_inprocess.py's sides: imported, warmed on another profile first);
ours also reports the CPU time spent in the wire decoder proper (`readers/xspace/wire.py`
`decode_events`, less the time of the sink it feeds).

    python bench/bench_phases.py --data /tmp/tbr_inproc --repeat 5 \
        --shapes 1host_200k,4hosts_4cores_500x20,1core_tiny_events

"rest" is the conversion without that decoding: per-op metadata, timeline facts, row
reduction, the model, the answers. XProf's time over "rest" is the ratio ours would reach if
events were decoded at no cost at all, the ceiling of any faster decoder. Least of the
repetitions for ours (this VM's timings move by tens of percent), median for XProf. Only
profiles read in one process (under `TB_ROOFLINE_PARALLEL_MIN_MB`): a worker's decoding is
not seen here. Raw figures: test-output/bench_phases.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_inprocess  # noqa: E402 (its sides, shapes and fresh copies)
import bench_xplane  # noqa: E402

TIMED_DECODER = r"""
from tb_roofline.readers.xspace import wire as _wire

_plain_decode, _decode_cpu = _wire.decode_events, [0.0]

def _timed_decode(src, pos, end, base_ps, stat_ids, sink, window=None):
    inner = [0.0]
    def timed_sink(*columns):
        c = time.process_time()
        sink(*columns)
        inner[0] += time.process_time() - c
    c = time.process_time()
    out = _plain_decode(src, pos, end, base_ps, stat_ids, timed_sink, window)
    _decode_cpu[0] += time.process_time() - c - inner[0]
    return out

_wire.decode_events = _timed_decode  # (plane_lines looks it up at each call)
_convert_all = convert

def convert(logdir):
    _decode_cpu[0] = 0.0
    out = _convert_all(logdir)
    return dict(out, decode_cpu_s=_decode_cpu[0])

"""


def ours_code() -> str:
    """bench_inprocess's side for ours, with the decoder timed."""
    head, serve_line = bench_inprocess.OURS.rsplit("serve(", 1)
    return head + TIMED_DECODER + "serve(" + serve_line


def bench_shape(root: str, name: str, repeat: int, sides: dict) -> dict:
    logdir, _ = bench_xplane.make_shape(root, name)
    runs: dict = {n: [] for n in sides}
    for i in range(repeat):
        for n in list(sides) if i % 2 == 0 else list(sides)[::-1]:
            copy, session = bench_inprocess.fresh_copy(root, logdir)
            try:
                runs[n].append(sides[n].convert(copy if n == "ours" else session))
            finally:
                shutil.rmtree(copy, ignore_errors=True)
    best = min(runs["ours"], key=lambda r: r["cpu_s"])
    rest = best["cpu_s"] - best["decode_cpu_s"]
    xprof_s = statistics.median(r["convert_s"] for r in runs["xprof"])
    return {
        "shape": name,
        "ours_cpu_s": round(best["cpu_s"], 4),
        "ours_wall_s": round(best["convert_s"], 4),
        "decode_cpu_s": round(best["decode_cpu_s"], 4),
        "rest_cpu_s": round(rest, 4),
        "xprof_s": round(xprof_s, 4),
        "xprof_over_ours": round(xprof_s / best["convert_s"], 2),
        "xprof_over_rest": round(xprof_s / rest, 2) if rest > 0 else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shapes",
        default="1host_200k,4hosts_4cores_500x20,1core_tiny_events,1core_2000ops_100steps",
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data", default="", help="keep generated profiles here (reused)")
    parser.add_argument(
        "--out", default=os.path.join(bench_inprocess.REPO, "test-output", "bench_phases.json")
    )
    args = parser.parse_args()
    bench_xplane.SHAPES.update(bench_inprocess.SHAPES)
    bench_xplane.SHAPES.update(bench_inprocess.WARMUP)
    root = args.data or tempfile.mkdtemp(prefix="tbr_phases_")
    os.makedirs(root, exist_ok=True)
    sides = {
        "ours": bench_inprocess.Side("ours", ours_code()),
        "xprof": bench_inprocess.Side("xprof", bench_inprocess.XPROF),
    }
    bench_inprocess.run_sides(
        root, sides, args.shapes.split(","), args.repeat, bench_shape, args.out, args.data
    )


if __name__ == "__main__":
    main()
