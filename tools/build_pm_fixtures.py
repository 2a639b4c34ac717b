"""Build the PM-sampling test traces (testdata/kineto/pm_sampling_*): not captured, written in the
exact JSON forms of the two writers that emit GPU counter samples.

- `pm_sampling_pytorch`: PyTorch's Python exporter (torch/profiler `_build_chrome_counters`,
  `_build_pm_counters`, `_PM_METRIC_LABELS`, `_ENV_COUNTERS`): counter events without "cat",
  `"pid": "GPU 0 Counters"`, labels "HBM BW (%)" and "SM Active (%)", environment counters
  "SM Clock (MHz)", "Memory Clock (MHz)", "Power (W)", "Temperature (C)", and one
  `process_sort_index` metadata event for the counter process. Step 2 runs throttled.
- `pm_sampling_kineto`: Kineto's writer (libkineto/src/output_json.cpp `handleCounterEvent`):
  `"cat": "hardware_counters"`, raw CUPTI metric names (`dram__bytes_read.sum`,
  `dram__bytes_write.sum`, SASS FLOP counts, a tensor-pipe % metric), the resource id as tid;
  the samples start 2 ms after the first step (partial coverage).

Both share a workload on an "NVIDIA H100 80GB HBM3": three 5 ms `ProfilerStep#N`, each with four
bf16 4096³ `aten::mm` (300 µs kernels) and one `aten::add` (20 µs kernel), launched by
`cudaLaunchKernel` with correlation ids; samples every 1 ms (Kineto's default PM interval),
offset 0.5 ms from the steps so that samples straddle step boundaries. Values are drawn from a
fixed seed: deterministic, plausible, not measured.

    python tools/build_pm_fixtures.py testdata/kineto
"""

from __future__ import annotations

import gzip
import json
import os
import sys

import numpy as np

T0 = 1_700_000_000_000.0  # µs
STEP_US, N_STEPS, INTERVAL_US = 5000.0, 3, 1000.0
PID, TID = 4242, 4242
DEVICE = {
    "id": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "totalGlobalMem": 85017755648,
    "computeMajor": 9,
    "computeMinor": 0,
    "numSms": 132,
    "warpSize": 32,
}


def workload() -> list:
    """CPU ops, launches and kernels of the three steps (complete "X" events)."""
    ev: list = []
    corr = 100
    for s in range(N_STEPS):
        start = T0 + s * STEP_US
        ev.append(_x("user_annotation", f"ProfilerStep#{s + 1}", start, STEP_US, PID, TID, {}))
        t = start + 50.0
        calls = [("aten::mm", 300.0)] * 4 + [("aten::add", 20.0)]
        for name, kdur in calls:
            corr += 1
            dims = [[4096, 4096], [4096, 4096]] if name == "aten::mm" else [[4096, 4096]] * 2
            types = ["c10::BFloat16"] * 2
            args = {"External id": corr, "Input Dims": dims, "Input type": types}
            if name == "aten::add":
                args["Input Dims"] = dims + [[]]
                args["Input type"] = types + ["Scalar"]
            ev.append(_x("cpu_op", name, t, 20.0, PID, TID, args))
            launch = {"External id": corr, "correlation": corr, "cbid": 211}
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 5.0, 8.0, PID, TID, launch))
            kernel = "sm90_xmma_gemm_bf16bf16_bf16f32" if name == "aten::mm" else "add_kernel"
            kargs = {"External id": corr, "correlation": corr, "device": 0, "stream": 7}
            ev.append(_x("kernel", kernel, t + 20.0, kdur, 0, 7, kargs))
            t += kdur + 400.0
    return ev


def _x(cat, name, ts, dur, pid, tid, args) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def sample_times(first_us: float) -> np.ndarray:
    end = T0 + N_STEPS * STEP_US
    return np.arange(first_us, end, INTERVAL_US)


def pytorch_counters(rng) -> list:
    """PyTorch's exporter: friendly labels, no category, environment counters."""
    ts = sample_times(T0 - 0.5 * INTERVAL_US)
    n = len(ts)
    clock = np.full(n, 1980.0)
    step2 = (ts >= T0 + STEP_US) & (ts < T0 + 2 * STEP_US)
    clock[np.flatnonzero(step2)[1:4]] = [1410.0, 1395.0, 1500.0]  # thermal throttling
    series = {
        "HBM BW (%)": np.round(rng.uniform(35, 65, n), 1),
        "SM Active (%)": np.round(rng.uniform(60, 95, n), 1),
        "SM Clock (MHz)": clock,
        "Memory Clock (MHz)": np.full(n, 2619.0),
        "Power (W)": np.round(rng.uniform(450, 690, n), 3),
        "Temperature (C)": np.round(rng.uniform(62, 83, n)),
    }
    out = [
        {
            "name": "process_sort_index",
            "ph": "M",
            "ts": 0.0,
            "pid": "GPU 0 Counters",
            "tid": 0,
            "args": {"sort_index": 100},
        }
    ]
    for i in range(n):
        for name, values in series.items():
            out.append(
                {
                    "ph": "C",
                    "name": name,
                    "pid": "GPU 0 Counters",
                    "ts": float(ts[i]),
                    "args": {"": float(values[i])},
                }
            )
    return out


def kineto_counters(rng) -> list:
    """Kineto's writer: cat hardware_counters, raw CUPTI metric names; samples start late."""
    ts = sample_times(T0 + 2 * INTERVAL_US + 0.5 * INTERVAL_US)
    n = len(ts)
    series = {
        "dram__bytes_read.sum": np.round(rng.uniform(1.2e9, 2.2e9, n)),
        "dram__bytes_write.sum": np.round(rng.uniform(0.3e9, 0.8e9, n)),
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": np.round(rng.uniform(1e8, 3e8, n)),
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": np.round(rng.uniform(1e7, 5e7, n)),
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": np.round(rng.uniform(1e7, 5e7, n)),
        "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": np.round(rng.uniform(1e6, 5e6, n)),
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": np.round(
            rng.uniform(20, 70, n), 2
        ),
    }
    out = []
    for i in range(n):
        for name, values in series.items():
            out.append(
                {
                    "ph": "C",
                    "cat": "hardware_counters",
                    "name": name,
                    "pid": "GPU 0 Counters",
                    "tid": 0,
                    "ts": float(ts[i]),
                    "args": {"": float(values[i])},
                }
            )
    return out


def trace(counters: list) -> dict:
    return {
        "schemaVersion": 1,
        "deviceProperties": [DEVICE],
        "record_shapes": 1,
        "traceEvents": workload() + counters,
        "traceName": "built by tools/build_pm_fixtures.py",
    }


def main(out_dir: str) -> None:
    for name, make in (
        ("pm_sampling_pytorch", pytorch_counters),
        ("pm_sampling_kineto", kineto_counters),
    ):
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "worker0.1700000000000.pt.trace.json.gz")
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(json.dumps(trace(make(np.random.default_rng(41)))).encode())
        print(path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "testdata/kineto")
