"""`tb-roofline calibrate`: measure this machine's peaks and write a device file.

CPU profiles carry no peaks, so the roofs have to be measured on the machine that ran the
workload (or configured by hand). With numpy only:

- compute: the best rate of a dense square matmul (BLAS, all threads) per precision that numpy
  hands to BLAS, i.e. fp64 and fp32; FLOPs = 2 n^3. bf16 and fp8 have no numpy type, and numpy's
  fp16 and integer matmuls are plain loops, not BLAS, so bf16/fp16/fp8/int8 are not measured.
- memory: STREAM-like kernels run by one thread per CPU on disjoint slices (numpy releases the
  GIL inside its loops): copy `a = b` (counted 2 x 8 B per element) and triad
  `a = b + s * c` (3 x 8 B per element, done in cache-sized blocks so the temporary never
  reaches DRAM). Each array is several times the last-level cache. Bytes are counted as STREAM
  does (no write-allocate traffic). The roof is the best of the two.

These are achievable rates, normally below the vendor's theoretical peaks; that is what a roof
for this machine should be.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tb_roofline.devices.device_file import FILE_NAME, write_device_file
from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak

NOT_MEASURABLE = ("bf16", "fp16", "fp8", "int8")
DEFAULT_SECONDS = 20.0
QUICK_SECONDS = 6.0
MIB = 1 << 20
TRIAD_BLOCK = 1 << 17  # elements per triad block (1 MiB of f64): stays in L2


@dataclasses.dataclass
class Calibration:
    device: DeviceInfo
    details: dict
    notes: str


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def last_level_cache_bytes() -> int:
    """Total size of the last-level cache over all its instances (sysfs), else 32 MiB."""
    base = "/sys/devices/system/cpu"
    seen = {}
    try:
        cpus = [d for d in os.listdir(base) if d.startswith("cpu") and d[3:].isdigit()]
    except OSError:
        cpus = []
    for cpu in cpus:
        cache_dir = os.path.join(base, cpu, "cache")
        try:
            entries = os.listdir(cache_dir)
        except OSError:
            continue
        for idx in entries:
            if not idx.startswith("index"):
                continue
            d = os.path.join(cache_dir, idx)
            try:
                level = int(open(os.path.join(d, "level")).read())
                ctype = open(os.path.join(d, "type")).read().strip()
                size = open(os.path.join(d, "size")).read().strip()
                shared = open(os.path.join(d, "shared_cpu_list")).read().strip()
            except (OSError, ValueError):
                continue
            if ctype == "Instruction":
                continue
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:].upper(), 1)
            num = int(size.rstrip("KMGkmg") or 0) * mult
            seen[(level, shared)] = num
    if not seen:
        return 32 * MIB
    top = max(level for level, _ in seen)
    return sum(size for (level, _), size in seen.items() if level == top)


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def measure_matmul(dtype, seconds: float, max_n: int) -> dict:
    """Best GFLOP/s of n x n matmuls within about `seconds` (n grows until one takes long)."""
    rng = np.random.default_rng(0)
    deadline = time.perf_counter() + seconds
    n, best, best_n, runs = 256, 0.0, 0, 0

    rates: list = []  # of the repetitions at the final size

    def timed() -> float:
        nonlocal best, best_n, runs
        t = time.perf_counter()
        np.matmul(a, b, out=out)
        dt = time.perf_counter() - t
        runs += 1
        rate = 2.0 * n**3 / dt / 1e9 if dt > 0 else 0.0
        rates.append((n, rate))
        if rate > best:
            best, best_n = rate, n
        return dt

    while True:
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        out = np.empty((n, n), dtype=dtype)
        np.matmul(a, b, out=out)  # warm-up (thread pool start, page faults)
        dt = timed()
        if dt * 20 > seconds or n * 2 > max_n or time.perf_counter() > deadline:
            break
        n *= 2
    while time.perf_counter() + dt < deadline or runs < 3:
        dt = timed()
    if not np.isfinite(out).all():
        raise RuntimeError(f"{np.dtype(dtype).name} matmul produced non-finite values")
    final = [r for m, r in rates if m == n]
    return {"gflops": best, "n": best_n, "runs": runs, "spread": spread(final)}


def spread(values) -> float:
    """Run-to-run spread of repeated measurements: 1 − slowest ÷ fastest (0: all alike)."""
    values = [v for v in values if v > 0]
    return 1.0 - min(values) / max(values) if len(values) > 1 else 0.0


SPREAD_LIMIT = 0.2  # repetitions more than 20 % apart: something else ran meanwhile


def plausibility(fp64: dict, fp32: dict, bw: dict) -> list[str]:
    """Warnings about figures no quiet machine gives: fp64 matmuls faster than fp32 (fp32
    does at least as many FLOPs a cycle), or repetitions that differ by more than
    SPREAD_LIMIT. Either says the machine was busy, and the figures are not its peaks."""
    out = []
    if fp64["gflops"] > fp32["gflops"]:
        out.append(
            f"fp64 measured faster than fp32 ({fp64['gflops']:,.1f} > "
            f"{fp32['gflops']:,.1f} GFLOP/s), which no CPU does"
        )
    for label, d in (("fp64 matmul", fp64), ("fp32 matmul", fp32), ("bandwidth", bw)):
        if d.get("spread", 0.0) > SPREAD_LIMIT:
            out.append(
                f"{label} repetitions differ by {d['spread']:.0%} (more than {SPREAD_LIMIT:.0%})"
            )
    if out:
        out.append(
            "the machine was busy while it was measured: rerun `tb-roofline calibrate` "
            "on an idle machine before judging profiles by these peaks"
        )
    return out


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    step = -(-n // parts)
    return [(i, min(n, i + step)) for i in range(0, n, step)]


def measure_bandwidth(seconds: float, array_bytes: int, threads: int) -> dict:
    """STREAM-like copy and triad over `threads` threads; best GB/s of each (STREAM counting)."""
    n = max(array_bytes // 8, TRIAD_BLOCK * threads)
    a = np.empty(n)
    b = np.empty(n)
    c = np.empty(n)
    slices = _split(n, threads)
    scalar = 3.0

    deadline = time.perf_counter() + seconds  # allocation and first touch count too
    with ThreadPoolExecutor(max_workers=threads) as pool:

        def run(fn):
            t = time.perf_counter()
            for fut in [pool.submit(fn, lo, hi) for lo, hi in slices]:
                fut.result()
            return time.perf_counter() - t

        def init(lo, hi):  # first touch by the thread that will use the pages
            a[lo:hi] = 1.0
            b[lo:hi] = 2.0
            c[lo:hi] = 0.5

        def copy(lo, hi):
            np.copyto(a[lo:hi], b[lo:hi])

        def triad(lo, hi):
            tmp = np.empty(TRIAD_BLOCK)
            for s in range(lo, hi, TRIAD_BLOCK):
                e = min(hi, s + TRIAD_BLOCK)
                t = tmp[: e - s]
                np.multiply(c[s:e], scalar, out=t)
                np.add(b[s:e], t, out=a[s:e])

        run(init)
        best = {"copy": math.inf, "triad": math.inf}
        reps = 0
        copies = []
        while reps < 2 or time.perf_counter() < deadline:
            copies.append(run(copy))
            best["copy"] = min(best["copy"], copies[-1])
            best["triad"] = min(best["triad"], run(triad))
            reps += 1
            if reps >= 50:
                break
    if not (a[0] == 2.0 + scalar * 0.5 and a[-1] == 2.0 + scalar * 0.5):
        raise RuntimeError("bandwidth kernel produced wrong values")
    return {
        "copy_gbs": 2 * 8 * n / best["copy"] / 1e9,
        "triad_gbs": 3 * 8 * n / best["triad"] / 1e9,
        "array_bytes": 8 * n,
        "repetitions": reps,
        "spread": spread([1.0 / t for t in copies if t > 0]),
    }


def measure(
    seconds_budget: float = DEFAULT_SECONDS,
    quick: bool = False,
    threads: int | None = None,
    array_bytes: int | None = None,
) -> Calibration:
    """Measure this machine; returns the DeviceInfo (source "measured") with the details."""
    if not seconds_budget > 0:
        raise ValueError("seconds_budget must be positive")
    threads = threads or _threads()
    llc = last_level_cache_bytes()
    if array_bytes is None:
        array_bytes = _stream_bytes(llc, quick)
    started = time.perf_counter()
    max_n = 2048 if quick else 4096
    fp64 = measure_matmul(np.float64, 0.25 * seconds_budget, max_n)
    fp32 = measure_matmul(np.float32, 0.25 * seconds_budget, max_n)
    bw = measure_bandwidth(0.5 * seconds_budget, array_bytes, threads)
    elapsed = time.perf_counter() - started
    dram = max(bw["copy_gbs"], bw["triad_gbs"])
    for label, v in (("fp64", fp64["gflops"]), ("fp32", fp32["gflops"]), ("DRAM", dram)):
        if not (math.isfinite(v) and v > 0):
            raise RuntimeError(f"calibration of {label} gave {v!r}")
    device = DeviceInfo(
        type=f"{cpu_name()} ({threads} threads)",
        kind="cpu",
        num_cores=1,
        compute=[
            ComputePeak("fp32", fp32["gflops"], "measured"),
            ComputePeak("fp64", fp64["gflops"], "measured"),
        ],
        memories=[MemoryPeak("hbm", "DRAM", dram, "measured")],
    )
    ratio = bw["array_bytes"] / llc if llc else float("nan")
    details = {
        "tool": "tb-roofline calibrate",
        "quick": quick,
        "seconds": round(elapsed, 2),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": _blas_name(),
        "threads": threads,
        "last_level_cache_bytes": llc,
        "fp64_matmul": fp64,
        "fp32_matmul": fp32,
        "stream": bw | {"array_over_llc": round(ratio, 2)},
        "not_measured": list(NOT_MEASURABLE),
    }
    warnings = details["warnings"] = plausibility(fp64, fp32, bw)
    return Calibration(device, details, _calibration_notes(bw, threads, ratio, warnings))


def _stream_bytes(llc: int, quick: bool) -> int:
    """Bytes of each bandwidth array: several times the last-level cache (so the copies reach
    DRAM), at least 128/256 MiB, and the three arrays within half of the free memory."""
    array_bytes = max((2 if quick else 4) * llc, (128 if quick else 256) * MIB)
    avail = _available_bytes()
    if avail:
        array_bytes = min(array_bytes, avail // 6)
    return array_bytes


def _calibration_notes(bw: dict, threads: int, ratio: float, warnings: list) -> str:
    notes = (
        f"Measured with numpy {np.__version__}: fp64/fp32 = best dense matmul rate "
        f"(BLAS, all threads); DRAM ('hbm') = best of STREAM-like copy "
        f"({bw['copy_gbs']:.1f} GB/s) and triad ({bw['triad_gbs']:.1f} GB/s) on {threads} "
        f"threads, arrays of {bw['array_bytes'] / MIB:.0f} MiB ({ratio:.1f}x the "
        f"last-level cache). bf16, fp16, fp8 and int8 are not measurable with numpy (no "
        f"bf16/fp8 types, no BLAS for 16-bit or integer matmul): add them by hand if known."
    )
    if ratio < 2:
        notes += " Warning: arrays under 2x the last-level cache; bandwidth may include cache hits."
    if warnings:
        notes += " Warning: " + "; ".join(warnings) + "."
    return notes


def _blas_name() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: no dict mode
        return "unknown"


def calibrate(seconds_budget: float = DEFAULT_SECONDS, quick: bool = False) -> DeviceInfo:
    """This machine's measured peaks as a DeviceInfo (kind "cpu", sources "measured")."""
    return measure(seconds_budget, quick).device


# ------------------------------------------------------------------------------- CLI


def _add_arguments(p: argparse.ArgumentParser):
    p.add_argument(
        "-o",
        "--output",
        default=FILE_NAME,
        help=f"device file to write (default ./{FILE_NAME}); put it next to the "
        "profile, in a parent folder up to the logdir, or name it in "
        "TB_ROOFLINE_DEVICE_FILE",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a few seconds ({QUICK_SECONDS:g} s budget, smaller problems): a rough "
        "roof for a quick look",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help=f"time budget (default {DEFAULT_SECONDS:g} s, {QUICK_SECONDS:g} with --quick)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for the bandwidth kernels (default: the CPUs this process may use)",
    )


def run_from_args(args, out=None) -> int:
    out = out or sys.stdout
    seconds = args.seconds or (QUICK_SECONDS if args.quick else DEFAULT_SECONDS)
    if not seconds > 0 or (args.threads is not None and args.threads < 1):
        sys.stderr.write("tb-roofline calibrate: --seconds and --threads must be positive\n")
        return 2
    out.write(
        f"calibrating this machine ({seconds:g} s budget{', quick' if args.quick else ''})...\n"
    )
    out.flush()
    cal = measure(seconds, args.quick, threads=args.threads)
    dev = cal.device
    out.write(f"Device: {dev.type}\n")
    for c in dev.compute:
        out.write(f"  peak compute [{c.precision}]: {c.gflops:,.1f} GFLOP/s (measured)\n")
    s = cal.details["stream"]
    for m in dev.memories:
        out.write(
            f"  peak {m.name}: {m.gbs:,.1f} GB/s (copy {s['copy_gbs']:,.1f}, triad "
            f"{s['triad_gbs']:,.1f}; arrays {s['array_bytes'] / MIB:,.0f} MiB)\n"
        )
    out.write(f"  not measurable with numpy: {', '.join(NOT_MEASURABLE)}\n")
    for w in cal.details.get("warnings", []):
        out.write(f"  WARNING: {w}\n")
        sys.stderr.write(f"tb-roofline calibrate: warning: {w}\n")
    try:
        write_device_file(args.output, dev, cal.notes, cal.details)
    except OSError as exc:
        sys.stderr.write(
            f"tb-roofline calibrate: cannot write {args.output}: {exc.strerror or exc}\n"
        )
        return 2
    out.write(f"wrote {args.output}\n")
    return 0


def add_calibrate_subparser(subparsers) -> argparse.ArgumentParser:
    """Add `calibrate` to the CLI's subparsers; dispatch with `run_from_args(args, out)`."""
    p = subparsers.add_parser(
        "calibrate",
        help="measure this machine's peaks, write a device file",
        description=__doc__.split("\n")[0],
    )
    _add_arguments(p)
    p.set_defaults(run_standalone=run_from_args)
    return p


def main(argv=None, out=None) -> int:
    parser = argparse.ArgumentParser(
        prog="tb-roofline calibrate", description=__doc__.split("\n")[0]
    )
    _add_arguments(parser)
    return run_from_args(parser.parse_args(argv), out)


if __name__ == "__main__":
    sys.exit(main())
