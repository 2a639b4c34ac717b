"""Frontend benchmark (not a test): the op-level chart with ~20,000 points in headless Chromium.

    python tests/e2e/bench_frontend.py [--ops 20000] [--reps 5]

Builds a synthetic TPU profile with that many distinct ops (tb_roofline.synthetic), starts a
real `tensorboard`, opens the tab in Debian's Chromium (same flags as the e2e tests) and
measures, inside the page (performance.now()):

- render: the op-level chart alone (Vega-Lite compile + Vega parse + dataflow + canvas) and
  the whole op section (chart, category bars, table) for all points;
- filter: category / bound-by / name filters and clearing them (chart + bars + table), each
  timed until the next frame after the change is applied;
- typing: "fusion.1" typed into the name box (an input event every 60 ms), from the last key
  until its result is shown and painted (keystrokes during a pass are coalesced, no debounce);
- infeed/outfeed: the toggle off and on (the other variant is prefetched after the load);
- after a zoom: a real wheel zoom over the op chart (which invalidates every saved bitmap of the
  points layer), then, after a pause (--settle ms: the time a user needs to reach a control;
  the chart pre-renders the bitmaps it expects next in idle time) or at once (50 ms), clearing a
  category filter and toggling infeed/outfeed;
- hover: a real mouse move over a point until our tooltip is filled, and to the next frame;
- select: click on a point until its table row is selected.

Prints a Markdown table (for docs/benchmarks.md) and writes test-output/bench_frontend.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_helpers import CHROMIUM, CHROMIUM_ARGS, OUT, READY, TensorBoard, wait_js  # noqa: E402


def make_logdir(path: str, n_ops: int) -> str:
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    # ops_per_step ≈ 6× distinct ops: (1 - e^-6) of the templates get executed at least once.
    distinct = int(n_ops * 1.003) + 8
    write_tpu_session(
        path,
        "bench",
        "2026_11_29_12_00_00",
        [
            SynthConfig(
                seed=7,
                distinct_ops=distinct,
                ops_per_step=distinct * 6,
                num_steps=1,
                num_cores=1,
                with_while=False,
                with_sparse_core=False,
            )
        ],
    )
    return path


IN_PAGE = """async ({reps}) => {
  const a = window.__roofline;
  const now = () => performance.now();
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const out = {points: a.filtered.length, chart: [], section: [], filters: {}};
  const {opSpec} = await import(new URL('charts.js',
      document.querySelector('link[rel=stylesheet]').href).href);
  for (let i = 0; i < reps; i++) {
    const programTotal = (a.data.program || []).filter((r) => r.record_type === 'total');
    let t = now();
    await a.opChart.setSpec(opSpec(a.geometry, a.categories, a.dark),
        {ops: a.filtered, program: programTotal, selected: []});
    await frame();
    out.chart.push(now() - t);
    t = now();
    await a.ops.render();
    await frame();
    out.section.push(now() - t);
  }
  const cats = a.categories.slice();
  const bounds = a.bounds.slice();
  const cases = {
    [`category = ${cats[0]}`]: {categories: [cats[0]]},
    [`category = ${cats[1]}, ${cats[2]}`]: {categories: [cats[1], cats[2]]},
    [`bound by = ${bounds[0]}`]: {boundBy: [bounds[0]]},
    'name contains "fusion.1"': {name: 'fusion.1'},
  };
  // Each case twice: with the op chart's bitmaps of earlier filter states dropped before every
  // change (a first visit, or any change after a zoom/pan: every shown point is redrawn), and
  // with them kept (a filter state seen before at the same zoom).
  for (const [label, patch] of Object.entries(cases)) {
    const r = {times: [], clears: [], cachedTimes: [], cachedClears: [], shown: 0};
    for (const cached of [false, true]) {
      for (let i = 0; i < reps; i++) {
        if (!cached) if (a.opChart.dropLayerCache) a.opChart.dropLayerCache();
        let t = now();
        await a.setFilter(patch);
        await frame();
        r[cached ? 'cachedTimes' : 'times'].push(now() - t);
        r.shown = a.filtered.length;
        if (!cached) if (a.opChart.dropLayerCache) a.opChart.dropLayerCache();
        t = now();
        await a.setFilter({categories: [], boundBy: [], name: ''});
        await frame();
        r[cached ? 'cachedClears' : 'clears'].push(now() - t);
      }
    }
    out.filters[label] = r;
  }
  // Typing into the name box: one input event every 60 ms (a fast typist), then the time from
  // the last keystroke until the chart, bars and table show that text's result, painted.
  const input = document.querySelector('#name-filter');
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  out.typing = {times: [], shown: null};
  for (let i = 0; i < reps; i++) {
    await a.setFilter({categories: [], boundBy: [], name: ''});
    await frame();
    const text = 'fusion.1';
    let t = 0;
    let seq = 0;
    if (a.opChart.dropLayerCache) a.opChart.dropLayerCache();
    for (let k = 1; k <= text.length; k++) {
      input.value = text.slice(0, k);
      seq = +a.app.dataset.filterSeq;
      t = now();
      input.dispatchEvent(new Event('input', {bubbles: true}));
      if (k < text.length) await sleep(60);
    }
    // Done: a filter pass finished after the last key, for that text, none pending.
    while (+a.app.dataset.filterSeq <= seq || a.state.name !== text || a.filterBusy) {
      await new Promise((r) => setTimeout(r, 1));
    }
    await frame();
    out.typing.times.push(now() - t);
    out.typing.shown = a.filtered.length;
  }
  await a.setFilter({categories: [], boundBy: [], name: ''});
  await frame();
  // Infeed/outfeed toggle (a server-side variant, prefetched after the load).
  if (a.data.variantsReady) await a.data.variantsReady;
  out.infeed = {exclude: [], include: [], shown: null, fast: true};
  out.infeed.cachedExclude = [];
  out.infeed.cachedInclude = [];
  for (let i = 0; i < 2 * reps; i++) {
    const cached = i >= reps;
    for (const value of ['exclude', 'include']) {
      if (!cached) if (a.opChart.dropLayerCache) a.opChart.dropLayerCache();
      a.timings.lastInfeedMs = null;
      a.infeedToggle.checked = value === 'include';
      const t = now();
      await a.setInfeed(value);
      await frame();
      out.infeed[cached ? (value === 'exclude' ? 'cachedExclude' : 'cachedInclude') : value]
          .push(now() - t);
      if (a.timings.lastInfeedMs === null) out.infeed.fast = false;
      if (value === 'exclude') out.infeed.shown = a.filtered.length;
    }
  }
  return out;
}"""


TIMED = """async (patch) => {
  const a = window.__roofline;
  const t = performance.now();
  if (patch.infeed) {
    a.infeedToggle.checked = patch.infeed === 'include';
    await a.setInfeed(patch.infeed);
  } else {
    await a.setFilter(patch);
  }
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  return performance.now() - t;
}"""


def zoom_cases(page, reps, settle):
    """Filter changes after a real wheel zoom (every bitmap of the points layer is then stale)."""
    box = page.locator("#op-chart canvas").bounding_box()
    domain = "JSON.stringify(window.__roofline.opChart.view.scale('x').domain())"
    busy = "!!(window.__roofline.opChart.prerendering && window.__roofline.opChart.prerendering())"
    cat = page.evaluate("window.__roofline.categories[0]")
    page.evaluate(TIMED, {"categories": [], "boundBy": [], "name": ""})
    out = {
        "settle_ms": settle,
        "clear": [],
        "infeed_off": [],
        "infeed_on": [],
        "clear_at_once": [],
        "infeed_off_at_once": [],
        "infeed_on_at_once": [],
        "still_prerendering": 0,
        "zooms_missed": 0,
    }
    step = [0]

    def zoom():
        # In at one place, out at another: the domain drifts a little and every zoom is new.
        i = step[0]
        step[0] += 1
        before = page.evaluate(domain)
        page.mouse.move(
            box["x"] + box["width"] * (0.35 + 0.1 * (i % 3)), box["y"] + box["height"] * 0.5
        )
        page.mouse.wheel(0, -60 if i % 2 == 0 else 60)
        page.wait_for_timeout(30)
        if page.evaluate(domain) == before:
            out["zooms_missed"] += 1

    for _i in range(reps):
        for wait, suffix in ((settle, ""), (50, "_at_once")):
            page.evaluate(TIMED, {"categories": [cat]})
            zoom()
            page.wait_for_timeout(wait)
            if wait == settle and page.evaluate(busy):
                out["still_prerendering"] += 1
            out["clear" + suffix].append(page.evaluate(TIMED, {"categories": []}))
            for value in ("exclude", "include"):
                zoom()
                page.wait_for_timeout(wait)
                if wait == settle and page.evaluate(busy):
                    out["still_prerendering"] += 1
                out[("infeed_off" if value == "exclude" else "infeed_on") + suffix].append(
                    page.evaluate(TIMED, {"infeed": value})
                )
    return out


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--settle",
        type=int,
        default=500,
        help="ms between a zoom and the next filter change (settled cases)",
    )
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        make_logdir(tmp, args.ops)
        gen_s = time.monotonic() - t0
        server = TensorBoard(tmp, name="bench")
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                errors = []
                page.on(
                    "console",
                    lambda m: (
                        errors.append(m.text)
                        if m.type == "error" and "favicon" not in str(m.location)
                        else None
                    ),
                )
                t0 = time.monotonic()
                page.goto(server.frame_url())
                wait_js(page, READY, timeout=300)
                first_load_s = time.monotonic() - t0
                timings = page.evaluate("window.__roofline.timings")
                # Second visit: the backend has the profile converted (cached).
                t0 = time.monotonic()
                page.reload()
                wait_js(page, READY, timeout=300)
                warm_load_s = time.monotonic() - t0
                warm_timings = page.evaluate("window.__roofline.timings")
                result = page.evaluate(IN_PAGE, {"reps": args.reps})

                page.locator("#op-chart").scroll_into_view_if_needed()
                after_zoom = zoom_cases(page, args.reps, args.settle)

                # Hover: real mouse moves onto points, until our tooltip holds that datum.
                page.locator("#op-chart").scroll_into_view_if_needed()
                points = page.evaluate(
                    """(n) => {
                  const view = window.__roofline.opChart.view;
                  const items = view.data('ops').filter((r) => !r.at_floor)
                      .sort((a, b) => b.time_fraction - a.time_fraction).slice(0, n);
                  const [ox, oy] = [view.origin()[0] + view.padding().left,
        view.origin()[1] + view.padding().top];
                  const box = view.container().querySelector('canvas').getBoundingClientRect();
                  return items.map((d) => ({x: box.left + ox + view.scale('x')(d.px),
                                            y: box.top + oy + view.scale('y')(d.py)}));
                }""",
                    12,
                )
                page.evaluate("""() => {
                  const tip = window.__roofline.tooltip;
                  const show = tip.show.bind(tip);
                  window.__hover = [];
                  let moveAt = null;
                  const canvas = window.__roofline.opChart.view.container().querySelector('canvas');
                  canvas.addEventListener('pointermove', () => { moveAt = performance.now(); },
                                          {capture: true});
                  tip.show = (event, datum, ...rest) => {
                    show(event, datum, ...rest);  // the item and view: records on the spot
                    if (datum && moveAt !== null) {
                      const start = moveAt;
                      moveAt = null;
                      const shown = performance.now() - start;
                      requestAnimationFrame(() => window.__hover.push(
                          [shown, performance.now() - start]));
                    }
                  };
                }""")
                hover_wall = []
                for pt in points:
                    page.mouse.move(5, 5)
                    page.wait_for_timeout(30)
                    t0 = time.monotonic()
                    page.mouse.move(pt["x"], pt["y"])
                    page.locator("#chart-tooltip").wait_for(state="visible")
                    hover_wall.append((time.monotonic() - t0) * 1000)
                page.wait_for_timeout(100)
                hover = page.evaluate("window.__hover")

                # Select: click a point → its row selected.
                select_ms = []
                for pt in points[:6]:
                    t0 = time.monotonic()
                    page.mouse.click(pt["x"], pt["y"])
                    page.wait_for_selector("#op-table tr.selected")
                    select_ms.append((time.monotonic() - t0) * 1000)
                    page.evaluate("window.__roofline.clearSelection()")
                browser.close()
        finally:
            server.stop()

    report = {
        "ops": result["points"],
        "reps": args.reps,
        "profile_generation_s": gen_s,
        "first_load_s": first_load_s,
        "first_fetch_ms": timings.get("fetchMs"),
        "first_op_chart_ms": timings.get("opChartMs"),
        "warm_load_s": warm_load_s,
        "warm_fetch_ms": warm_timings.get("fetchMs"),
        "op_chart_render_ms": result["chart"],
        "op_section_render_ms": result["section"],
        "filters": result["filters"],
        "typing": result["typing"],
        "infeed": result["infeed"],
        "after_zoom": after_zoom,
        "hover_handler_ms": [h[0] for h in hover],
        "hover_to_frame_ms": [h[1] for h in hover],
        "hover_wall_ms": hover_wall,
        "select_wall_ms": select_ms,
        "console_errors": errors,
    }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "bench_frontend.json"), "w") as f:
        json.dump(report, f, indent=1)

    def row(label, xs):
        return f"| {label} | {median(xs):.0f} | {max(xs):.0f} |"

    print(
        f"Op-level chart, {report['ops']:,} points, headless Chromium "
        f"({args.reps} repetitions; ms)\n"
    )
    print("| what | median | max |\n|---|---:|---:|")
    print(
        row(
            "op chart render (compile + dataflow + canvas, to next frame)",
            report["op_chart_render_ms"],
        )
    )
    print(row("whole op section (chart + category bars + table)", report["op_section_render_ms"]))
    for label, f in report["filters"].items():
        print(row(f"filter {label} ({f['shown']:,} shown)", f["times"]))
        print(row(f"clear that filter (back to {report['ops']:,})", f["clears"]))
    print(
        row(
            "(filter states seen before at the same zoom: bitmap reused)",
            [x for f in report["filters"].values() for x in f["cachedTimes"]],
        )
    )
    print(
        row(
            f"(clear to {report['ops']:,} with the all-points bitmap reused)",
            [x for f in report["filters"].values() for x in f["cachedClears"]],
        )
    )
    typing = report["typing"]
    print(
        row(
            f'type "fusion.1" (a key every 60 ms): last key → shown and painted '
            f"({typing['shown']:,} shown)",
            typing["times"],
        )
    )
    infeed = report["infeed"]
    how = "prefetched, no re-render" if infeed["fast"] else "refetched and re-rendered"
    print(row(f"infeed/outfeed off ({infeed['shown']:,} shown; {how})", infeed["exclude"]))
    print(row(f"infeed/outfeed on again (back to {report['ops']:,})", infeed["include"]))
    print(
        row(
            "(infeed/outfeed off/on, bitmaps reused)",
            infeed["cachedExclude"] + infeed["cachedInclude"],
        )
    )
    z = report["after_zoom"]
    for key, label in (
        ("clear", f"clear a category filter (back to {report['ops']:,})"),
        ("infeed_off", "infeed/outfeed off"),
        ("infeed_on", "infeed/outfeed on"),
    ):
        print(row(f"after a zoom, {z['settle_ms']} ms later: {label}", z[key]))
        print(row(f"after a zoom, at once (50 ms): {label}", z[key + "_at_once"]))
    print(
        f"| (settled cases with idle pre-rendering still running: {z['still_prerendering']}; "
        f"zooms that did not change the domain: {z['zooms_missed']}) | | |"
    )
    print(row("hover: mousemove → tooltip filled", report["hover_handler_ms"]))
    print(row("hover: mousemove → next frame", report["hover_to_frame_ms"]))
    print(
        row(
            "hover: Playwright mouse.move → tooltip visible (wall, incl. CDP)",
            report["hover_wall_ms"],
        )
    )
    print(row("click point → table row selected (wall, incl. CDP)", report["select_wall_ms"]))
    print(
        f"\nFirst open (cold conversion): {first_load_s:.2f} s, of which API "
        f"{report['first_fetch_ms']:.0f} ms; warm reload {warm_load_s:.2f} s "
        f"(API {report['warm_fetch_ms']:.0f} ms). Console errors: {len(errors)}."
    )


if __name__ == "__main__":
    main()
