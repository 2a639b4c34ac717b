"""The tab on the repository's committed test data (demo TPU pods, real GPU/CPU profiles)."""

from __future__ import annotations

from e2e_helpers import READY, open_frame, point_count, shot, wait_js


def runs_of(server):
    return {r["run"]: r for r in server.api("runs")[1]["runs"]}


def test_demo_runs_and_per_host_points(page, tb_testdata):
    runs = runs_of(tb_testdata)
    demo = [r for r in runs if r.startswith("demo/")]
    assert demo, "the demo logdir (testdata/demo) is part of the repository"
    for run in demo:
        open_frame(page, tb_testdata, run=run)
        assert page.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
        _, program = tb_testdata.api("program", run=run)
        _, ops = tb_testdata.api("ops", run=run)
        assert point_count(page, "records") == len(program["rows"])
        assert point_count(page, "ops") == ops["total_count"]
        kinds = [r[0] for r in program["rows"]]
        if len(runs[run]["hosts"]) > 1 and "host" in kinds:
            # One point per host in the all-hosts view, named in the table.
            labels = page.eval_on_selector_all(
                "#program-table tbody tr", "rs => rs.map(r => r.dataset.key)"
            )
            for host in runs[run]["hosts"]:
                assert f"Host {host}" in labels
        _per_tensorcore_words(page, tb_testdata.api("device", run=run)[1]["device"])
        shot(page, f"testdata_{run.split('/')[1]}")


def _per_tensorcore_words(page, device):
    """A TPU's figures are per TensorCore, megacore or not (the profile's planes and peaks
    are), said so on the chart and in the headline; a megacore chip's own figures (twice the
    TensorCore's, what data sheets quote) sit beside them."""
    n, hosts = device["num_cores"], device["num_hosts"]
    summary = page.locator("#device-summary").inner_text()
    assert f"{n} TensorCores on {hosts} host{'s' if hosts > 1 else ''}" in summary, summary
    assert page.evaluate("window.__roofline.geometry.yTitle") == "FLOP rate per TensorCore"
    chip = page.locator("#per-chip")
    if not device["megacore"]:
        assert chip.count() == 0
        return
    top = float(page.locator("#headline-peak").get_attribute("data-value"))
    hbm = next(m["peak_gbs"] for m in device["memories"] if m["id"] == "hbm")
    assert float(chip.get_attribute("data-peak")) == 2 * top
    assert float(chip.get_attribute("data-hbm")) == 2 * hbm
    assert "per chip (2 TensorCores)" in chip.inner_text()


def test_gpu_trace_precisions_and_kernel_view(page, tb_testdata):
    runs = runs_of(tb_testdata)
    candidates = [r for r, info in runs.items() if info["format"] == "kineto"]

    def costed(r):  # a graph capture trace runs (almost) nothing: no op under a roof
        _, ops = tb_testdata.api("ops", run=r)
        peak = ops["columns"].index("peak_flop_rate")
        return any(row[peak] for row in ops["rows"])

    run = next(
        (
            r
            for r in candidates
            if len(tb_testdata.api("device", run=r)[1]["device"]["compute"]) > 1 and costed(r)
        ),
        None,
    )
    assert run is not None, "testdata/kineto holds GPU traces with per-precision peaks"
    open_frame(page, tb_testdata, run=run)
    device = tb_testdata.api("device", run=run)[1]["device"]
    rows = page.locator("#device-compute tbody tr[data-precision]")
    assert rows.count() == len(device["compute"])
    _, ops = tb_testdata.api("ops", run=run)
    assert point_count(page, "ops") == ops["total_count"]
    # One solid compute roof per peak the ops run at (their precisions' roofs), labelled.
    peak_col = ops["columns"].index("peak_flop_rate")
    cav_col = ops["columns"].index("caveat")
    peaks = {
        r[peak_col]
        for r in ops["rows"]
        if r[peak_col] and r[cav_col] not in ("async_start", "async_wait")
    }
    computes = page.evaluate("window.__roofline.geometry.computes.map(c => c.value)")
    assert sorted(computes) == sorted(peaks) and len(computes) > 1
    # The headline quotes the run's top roof (the chart's), not the chip's fastest precision.
    head = page.locator("#headline-peak")
    assert float(head.get_attribute("data-value")) == max(computes)
    assert head.get_attribute("data-of-run") == "true"
    assert max(computes) < max(c["peak_gflops"] for c in device["compute"])  # int8 unused
    names = page.evaluate("window.__roofline.geometry.computes.map(c => c.name)")
    by_peak = {}
    for c in device["compute"]:
        by_peak.setdefault(c["peak_gflops"], set()).add(c["precision"])
    for value, name in zip(computes, names):
        assert set(name.split("/")) <= by_peak[value], (name, value)
    views = ops.get("views", ["op"])
    if len(views) > 1:
        assert page.is_visible("#view-select")
        before = int(page.evaluate("+document.querySelector('#roofline-app').dataset.loadSeq"))
        page.select_option("#view-select", views[1])
        wait_js(page, f"+document.querySelector('#roofline-app').dataset.loadSeq > {before}")
        wait_js(page, READY)
        expected = tb_testdata.api("ops", run=run, view=views[1])[1]["total_count"]
        assert point_count(page, "ops") == expected
        assert f"view={views[1]}" in page.url
    shot(page, "testdata_gpu_trace")


def test_profiles_without_peaks_or_ops(page, tb_testdata):
    runs = runs_of(tb_testdata)
    for run in runs:
        _, device = tb_testdata.api("device", run=run)
        if "device" in device and not device["device"]["peaks_known"]:
            break
    else:
        raise AssertionError("testdata/ holds CPU profiles without peaks")
    open_frame(page, tb_testdata, run=run)
    assert page.evaluate("document.querySelector('#roofline-app').dataset.status") in (
        "ready",
        "partial",
    )
    assert page.locator("#device-panel .warning").count() == 1  # "Peaks are not known"
    _, diags = tb_testdata.api("diagnostics", run=run)
    # The peaks_unknown note is said once, in the device panel; the list has the others.
    others = [d for d in diags["diagnostics"] if d["code"] != "peaks_unknown"]
    assert page.locator("#diagnostics li").count() == len(others)
    assert page.locator("#peaks-unknown").count() == 1
    _, ops = tb_testdata.api("ops", run=run)
    if ops["total_count"] == 0:
        assert page.locator("#no-ops").is_visible()
    else:
        assert point_count(page, "ops") == ops["total_count"]
    shot(page, "testdata_no_peaks")


def test_serving_steps_beside_the_program_chart(page, tb_testdata):
    """The SGLang decode trace: its step record labelled by phase on the chart (the Vega
    view's own points) and in the table, and the serving panel showing the model's numbers."""
    run = "kineto/sglang_qwen3_8b_decode"
    _, program = tb_testdata.api("program", run=run)
    steps = program["serving_steps"]
    assert [s["label"] for s in steps] == ["0 · decode bs 32"]
    open_frame(page, tb_testdata, run=run)
    series = page.evaluate("""() => {
      const view = window.__roofline.programChart.view;
      const out = [];
      const walk = (node) => {
        if (node.marktype === 'symbol') for (const item of node.items || []) {
          if (item.datum && item.datum.series !== undefined) out.push(item.datum.series);
        }
        for (const child of node.items || []) if (child.items) walk(child);
      };
      walk(view.scenegraph().root);
      return out;
    }""")
    assert "Step 0 · decode bs 32" in series and "Average · decode" in series
    panel = page.locator("#serving-steps")
    panel.scroll_into_view_if_needed()
    wait_js(page, "document.querySelector('#serving-steps tbody tr[data-step]') !== null")
    cells = page.eval_on_selector_all(
        "#serving-steps tbody tr[data-step] td", "tds => tds.map(td => td.textContent)"
    )
    assert cells[0] == "0 · decode bs 32" and cells[1] == "decode" and cells[2] == "32"
    ridge = steps[0]["ridge_batch"]
    assert cells[-1] == f"{ridge:.3g}"
    codes = page.eval_on_selector_all(
        "#serving-steps li[data-code]", "ls => ls.map(l => l.dataset.code)"
    )
    assert codes == [f["code"] for f in steps[0]["findings"]]
    shot(page, "testdata_serving_steps")
