"""Speed of the run comparison on two 20,000-op runs (targets: the /compare answer in
under 0.5 s once both runs are cached; the compare view drawn in under 1.5 s in Chromium).

    python bench/bench_compare.py [--ops 20000] [--reps 5] [--frontend] [--keep DIR]

Generates two single-core synthetic TPU runs of ~20,000 distinct ops each (`tb_roofline.
synthetic`, seeds 7 and 8: the same op names, other times), then
- backend: the /compare answer through the plugin's WSGI handler (read, analyse and cache both
  runs first; then each repetition drops the cached comparison, so it pairs, computes and
  serialises again), and the same answer with the comparison cached;
- `--frontend`: a real `tensorboard` and Debian's Chromium (the e2e flags); the frame opened on
  the candidate with "Compare with" the base, then the comparison reloaded `--reps` times with
  the server warm, timed inside the page from the request to the frame after both charts, the
  summary and the table are drawn (`window.__rooflineCompare.timings`).
Raw figures go to test-output/bench_compare.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def make_logdir(path: str, n_ops: int) -> list[str]:
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    distinct = int(n_ops * 1.003) + 8  # ~(1 - e^-6) of the templates run at least once
    runs = []
    for seed, session in ((7, "2026_11_29_12_00_00"), (8, "2026_11_29_13_00_00")):
        write_tpu_session(
            path,
            f"run{seed}",
            session,
            [
                SynthConfig(
                    seed=seed,
                    program_seed=1,
                    distinct_ops=distinct,
                    ops_per_step=distinct * 6,
                    num_steps=1,
                    num_cores=1,
                    with_while=False,
                    with_sparse_core=False,
                )
            ],
        )
        runs.append(f"run{seed}/{session}")
    return runs  # base, candidate


def backend(logdir: str, base: str, cand: str, reps: int) -> dict:
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.plugin import RooflinePlugin

    plugin = RooflinePlugin(base_plugin.TBContext(logdir=logdir))
    app = plugin.get_plugin_apps()["/compare"]

    def get():
        t = time.perf_counter()
        r = Client(app, Response).get("/compare", query_string={"base": base, "run": cand})
        body = r.data
        dt = time.perf_counter() - t  # the answer's bytes are ready (parsing not counted)
        assert r.status_code == 200, body[:300]
        return dt, len(body), json.loads(body)

    t = time.perf_counter()
    service = plugin._service
    for run in (base, cand):
        service.analysis(run, "")
    read_s = time.perf_counter() - t
    fresh, cached = [], []
    for _ in range(reps):
        service.compare_cache._items.clear()
        dt, size, answer = get()
        fresh.append(dt)
        cached.append(get()[0])
    return {
        "read_and_analyse_both_s": read_s,
        "fresh_s": fresh,
        "cached_s": cached,
        "answer_bytes": size,
        "pairs": answer["unfiltered_count"],
        "ops": [len(service.ops(r, "")["rows"]) for r in (base, cand)],
        "rules": answer["summary"]["rules"],
    }


IN_PAGE = """async ([reps, allBase]) => {
  const c = window.__rooflineCompare;
  c.state.allBase = allBase ? '1' : '';
  const out = [];
  for (let i = 0; i < reps; i++) {
    await c.load();
    out.push({...c.timings, ...c.drawn});
  }
  return out;
}"""


def frontend(logdir: str, base: str, cand: str, reps: int) -> dict:
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    from e2e_helpers import CHROMIUM, CHROMIUM_ARGS, READY, TensorBoard, wait_js
    from playwright.sync_api import sync_playwright

    tb = TensorBoard(logdir, name="bench_compare")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t = time.perf_counter()
            page.goto(tb.frame_url(run=cand, compare=base))
            wait_js(page, READY, timeout=600)
            wait_js(
                page,
                "document.querySelector('#compare-section').dataset.status === 'ready'",
                timeout=600,
            )
            first_open = time.perf_counter() - t
            first = page.evaluate("({...window.__rooflineCompare.timings})")
            time.sleep(1.0)
            runs = page.evaluate(IN_PAGE, [reps, False])
            all_base = page.evaluate(IN_PAGE, [reps, True])
            status = page.evaluate("({...document.querySelector('#compare-op-status').dataset})")
            browser.close()
    finally:
        tb.stop()
    return {
        "first_open_s": first_open,
        "first_timings": first,
        "warm": runs,
        "warm_all_base_points": all_base,
        "status": status,
    }


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--frontend", action="store_true", help="also time the view in Chromium")
    ap.add_argument("--keep", help="write the logdir here (and reuse it if it exists)")
    args = ap.parse_args()
    logdir = args.keep or tempfile.mkdtemp(prefix="bench_compare_")
    if os.path.isdir(os.path.join(logdir, "run7")):
        runs = [
            f"run{s}/{d}"
            for s in (7, 8)
            for d in os.listdir(os.path.join(logdir, f"run{s}", "plugins", "profile"))
        ]
    else:
        runs = make_logdir(logdir, args.ops)
    base, cand = runs
    result = {"ops": args.ops, "load_average": os.getloadavg()}
    b = backend(logdir, base, cand, args.reps)
    result["backend"] = b
    print(
        f"ops per run: {b['ops']}; pairs: {b['pairs']} {b['rules']}; answer "
        f"{b['answer_bytes'] / 1e6:.1f} MB"
    )
    print(
        f"/compare, comparison computed: median {median(b['fresh_s']):.3f} s "
        f"(min {min(b['fresh_s']):.3f}); comparison cached: median {median(b['cached_s']):.3f} s"
    )
    if args.frontend:
        f = frontend(logdir, base, cand, args.reps)
        result["frontend"] = f
        for label, warm in (
            ("default view", f["warm"]),
            ("every base point", f["warm_all_base_points"]),
        ):
            print(f"{label}: {warm[0]['cand']} coloured + {warm[0]['base']} grey points")
            for key in ("totalMs", "fetchMs", "convertMs", "programChartMs", "opChartMs"):
                xs = [w[key] for w in warm if key in w]
                print(f"  {key}: median {median(xs):.0f} ms (max {max(xs):.0f})")
        print(
            f"first open (cold server: reads both profiles): {f['first_open_s']:.1f} s; points "
            f"{f['status']}"
        )
    result["load_average_after"] = os.getloadavg()
    out = os.path.join(REPO, "test-output")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "bench_compare.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"load average {result['load_average']} → {result['load_average_after']}")


if __name__ == "__main__":
    main()
