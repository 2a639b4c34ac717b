"""The Roofline tab inside TensorBoard's own page (http://127.0.0.1:PORT/#roofline): the plugin
iframe, state kept in TensorBoard's URL, its reload button, its dark mode and --path_prefix."""

from __future__ import annotations

import time
import urllib.parse

from e2e_helpers import MAIN_RUN, READY, V4_RUN, shot, wait_js


def roofline_frame(page, timeout=60.0):
    """The plugin iframe TensorBoard created for the tab, once the tab has settled."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for frame in page.frames:
            if "plugin_entry.html?name=roofline" in frame.url:
                try:
                    if frame.evaluate(READY):
                        return frame
                except Exception:  # still loading / navigating
                    pass
        page.wait_for_timeout(100)  # (lets Playwright process frame events; time.sleep would not)
    raise TimeoutError("the Roofline iframe did not settle")


def seq(frame, name):
    return int(frame.evaluate(f"+(document.querySelector('#roofline-app').dataset.{name} || 0)"))


def select(frame, selector, value):
    before = seq(frame, "loadSeq")
    frame.select_option(selector, value)
    wait_js(frame, f"+(document.querySelector('#roofline-app').dataset.loadSeq || 0) > {before}")
    wait_js(frame, READY)


def test_tab_in_tensorboard_ui(page, tb, main_logdir):
    page.goto(tb.base + "/#roofline")
    frame = roofline_frame(page)
    assert frame.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
    # The frame's module and API calls resolved relative to TensorBoard's data/ prefix.
    assert frame.evaluate("window.__roofline.opChart.pointCount('ops')") > 0
    shot(page, "tb_ui_default")

    # Select a run and host inside the iframe: the state lands in TensorBoard's URL.
    select(frame, "#run-select", MAIN_RUN)
    select(frame, "#host-select", "host0")
    hash_ = urllib.parse.unquote(page.evaluate("location.hash"))
    assert hash_.startswith("#roofline")
    assert f"p.roofline.run={MAIN_RUN}" in hash_ and "p.roofline.host=host0" in hash_
    ops_host0 = tb.api("ops", run=MAIN_RUN, host="host0")[1]["total_count"]
    assert frame.evaluate("window.__roofline.opChart.pointCount('ops')") == ops_host0
    shot(page, "tb_ui_main_host0")

    # A browser reload (or a shared link) reproduces the view.
    link = page.url
    page.reload()
    frame = roofline_frame(page)
    assert frame.input_value("#run-select") == MAIN_RUN
    assert frame.input_value("#host-select") == "host0"
    other = page.context.new_page()
    other.goto(link)
    other_frame = roofline_frame(other)
    assert other_frame.input_value("#run-select") == MAIN_RUN
    assert other_frame.input_value("#host-select") == "host0"
    other.close()

    # TensorBoard's reload button: new sessions appear, the selection survives.
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    write_tpu_session(main_logdir, "late", "2019_06_01_00_00_00", [SynthConfig(seed=21)])
    before = seq(frame, "runsSeq")
    page.click("button.reload-button")
    wait_js(frame, f"+(document.querySelector('#roofline-app').dataset.runsSeq || 0) > {before}")
    wait_js(frame, READY)
    options = frame.eval_on_selector_all("#run-select option", "os => os.map(o => o.value)")
    assert "late/2019_06_01_00_00_00" in options
    assert frame.input_value("#run-select") == MAIN_RUN
    assert frame.input_value("#host-select") == "host0"
    assert frame.evaluate("window.__roofline.opChart.pointCount('ops')") == ops_host0


def test_dark_mode_follows_tensorboard(page, tb):
    page.goto(
        tb.base + f"/?darkMode=true#roofline&p.roofline.run={urllib.parse.quote(V4_RUN, safe='')}"
    )
    frame = roofline_frame(page)
    wait_js(page, "document.body.classList.contains('dark-mode')")
    wait_js(frame, "document.querySelector('#roofline-app').classList.contains('dark')")
    assert frame.input_value("#run-select") == V4_RUN
    background = frame.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(245, 245, 245)"  # not the light theme's grey
    shot(page, "tb_ui_dark")
    # Switching TensorBoard to light mode at runtime follows too.
    page.click("app-header-dark-mode-toggle button")
    page.get_by_role("menuitem", name="Light").click()
    wait_js(frame, "!document.querySelector('#roofline-app').classList.contains('dark')")
    wait_js(frame, READY)


def test_path_prefix(page, tb_prefixed):
    assert "/tb/sub" in tb_prefixed.base
    origin = tb_prefixed.base.split("/tb/sub")[0]
    # TensorBoard's own page (not the plugin) asks for its Roboto fonts at /font-roboto/
    # without the prefix; those 404s are TensorBoard's.
    page.log.allow(lambda text, url: url.startswith(origin + "/font-roboto/"))
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(tb_prefixed.base + "/#roofline")
    frame = roofline_frame(page)
    assert frame.url.startswith(tb_prefixed.base + "/data/plugin_entry.html")
    select(frame, "#run-select", V4_RUN)
    assert frame.evaluate("document.querySelector('#roofline-app').dataset.status") == "ready"
    expected = tb_prefixed.api("ops", run=V4_RUN)[1]["total_count"]
    assert frame.evaluate("window.__roofline.opChart.pointCount('ops')") == expected
    # Every request of the tab (module, vendored libraries, API) stayed under the prefix.
    ours = [u for u in requests if "/roofline" in u]
    assert any(u.endswith("/static/vendor/vega.min.js") for u in ours)
    assert all(u.startswith(tb_prefixed.base + "/data/") for u in ours), ours
    shot(page, "tb_ui_path_prefix")
