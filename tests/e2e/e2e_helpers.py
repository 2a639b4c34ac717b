"""Helpers of the end-to-end tests: a real TensorBoard process, the browser log, screenshots."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "test-output")
SCREENSHOTS = os.path.join(OUT, "screenshots")
CHROMIUM = os.environ.get("TB_ROOFLINE_CHROMIUM", "/usr/bin/chromium")
# Without the background-networking flags Chromium tries connections that are refused here.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

READY = (
    "['ready', 'partial', 'error', 'empty'].includes("
    "document.querySelector('#roofline-app')?.dataset.status)"
)

# Session names are timestamps; the API lists the newest first.
MAIN_RUN = "train/2026_11_29_10_00_00"  # v6e, two hosts, 2 cores each
V4_RUN = "eval/2026_11_29_09_00_00"  # v4 (CMEM, megacore), one host
BROKEN_RUN = "broken/2020_01_01_00_00_00"  # a corrupt file


# ------------------------------------------------------------------------- tensorboard


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TensorBoard:
    """`python -m tensorboard.main --logdir X --host 127.0.0.1 --port FREE` until stopped."""

    def __init__(self, logdir: str, extra_args=(), name="tb"):
        self.logdir = logdir
        self.port = free_port()
        prefix = ""
        args = list(extra_args)
        if "--path_prefix" in args:
            prefix = args[args.index("--path_prefix") + 1].rstrip("/")
        self.base = f"http://127.0.0.1:{self.port}{prefix}"
        os.makedirs(OUT, exist_ok=True)
        self.log_path = os.path.join(OUT, f"e2e_{name}_{self.port}.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tensorboard.main",
                "--logdir",
                logdir,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                *args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"tensorboard exited ({self.proc.returncode}); see {self.log_path}"
                )
            try:
                with urllib.request.urlopen(self.base + "/data/plugins_listing", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tensorboard did not answer; see {self.log_path}")
            time.sleep(0.25)

    def api(self, route: str, **params):
        """(status, JSON) of a plugin route; list values become repeated parameters."""
        query = urllib.parse.urlencode(params, doseq=True)
        url = f"{self.base}/data/plugin/roofline/{route}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=120) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def frame_url(self, **state) -> str:
        """The plugin frame opened on its own; `state` goes into its hash (run, host, ...)."""
        hash_ = urllib.parse.urlencode(state, quote_via=urllib.parse.quote)
        return f"{self.base}/data/plugin_entry.html?name=roofline" + (f"#{hash_}" if hash_ else "")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


# Collects CSP violations from every frame (the listener is installed before any page script).
_CSP_PROBE = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push({directive: e.violatedDirective, blocked: e.blockedURI,
                               source: e.sourceFile, line: e.lineNumber, sample: e.sample});
  console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI);
});
"""


class BrowserLog:
    """Console errors, page errors and CSP violations seen by a page."""

    def __init__(self, page):
        self.page = page
        self.errors = []
        self.allowed = []  # predicates(message_text, url) -> bool for expected errors
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.errors.append(("pageerror", str(exc), "")))

    def _on_console(self, msg):
        if msg.type not in ("error", "assert"):
            return
        url = (msg.location or {}).get("url", "")
        self.errors.append(("console", msg.text, url))

    def allow(self, predicate):
        self.allowed.append(predicate)

    def problems(self):
        out = []
        for kind, text, url in self.errors:
            # Opening the frame on its own makes Chromium ask for /favicon.ico, which
            # TensorBoard answers 404; inside TensorBoard's UI the request never happens.
            if url.endswith("/favicon.ico"):
                continue
            if any(p(text, url) for p in self.allowed):
                continue
            out.append((kind, text, url))
        for frame in self.page.frames:
            try:
                violations = frame.evaluate("window.__cspViolations || []")
            except Exception:  # a detached frame
                continue
            for v in violations:
                out.append(("csp", json.dumps(v), frame.url))
        return out


def shot(page_or_locator, name: str, full_page: bool = True):
    """Save a screenshot under test-output/screenshots/ (CI artifact); `full_page=False`: the
    window only (what a user sees first)."""
    os.makedirs(SCREENSHOTS, exist_ok=True)
    path = os.path.join(SCREENSHOTS, f"{name}.png")
    if hasattr(page_or_locator, "screenshot"):
        try:
            page_or_locator.screenshot(path=path, full_page=full_page)
        except TypeError:
            page_or_locator.screenshot(path=path)
    return path


def wait_js(frame, expression: str, timeout: float = 30.0, interval: float = 0.05):
    """Poll a JS expression from Python until it is truthy.

    Playwright's wait_for_function evaluates string predicates with eval() inside the page,
    which a CSP without 'unsafe-eval' forbids; page.evaluate (run by DevTools) is exempt.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = frame.evaluate(expression)
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for: {expression}")
        time.sleep(interval)


def open_frame(page, server: TensorBoard, **state):
    """Open the plugin frame on its own (a fresh document) and wait until it settled."""
    if page.url != "about:blank":
        page.goto("about:blank")  # A hash-only change would keep the old document.
    page.goto(server.frame_url(**state))
    wait_js(page, READY)
    return page


def status(frame) -> str:
    return frame.evaluate("document.querySelector('#roofline-app').dataset.status")


def wait_ready(frame, seq_before=None):
    wait_js(frame, READY)
    if seq_before is not None:
        wait_js(
            frame,
            f"+(document.querySelector('#roofline-app').dataset.filterSeq || 0) > {seq_before}",
        )


def filter_seq(frame) -> int:
    return int(frame.evaluate("+(document.querySelector('#roofline-app').dataset.filterSeq || 0)"))


def point_count(frame, data_name: str) -> int:
    """How many records the chart's dataflow holds for a named data set (what it plots)."""
    chart = {"ops": "opChart", "program": "opChart", "records": "programChart", "cats": "catChart"}[
        data_name
    ]
    return frame.evaluate(f"window.__roofline.{chart}.pointCount('{data_name}')")


def hover(
    page, chart_selector: str, locate, tooltip_selector: str = "#chart-tooltip", attempts: int = 4
):
    """Move the real mouse onto a chart point until its tooltip shows; returns the point.

    `locate()` gives the point's viewport position ({x, y, ...}). The chart is scrolled into
    the window first (a mouse outside the viewport sends no events), and the position is read
    again until two readings 100 ms apart agree (a chart that is still re-fitting its width,
    a section loading above it). A move that arrives while the chart re-renders is retried
    from outside the point, a few times, before the tooltip's absence fails the test.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    tooltip = page.locator(tooltip_selector)
    for attempt in range(attempts):
        page.locator(chart_selector).scroll_into_view_if_needed()
        target = locate()
        for _ in range(20):
            page.wait_for_timeout(100)
            again = locate()
            if (again["x"], again["y"]) == (target["x"], target["y"]):
                break
            target = again
        inner = page.evaluate("[window.innerWidth, window.innerHeight]")
        assert 0 <= target["x"] < inner[0] and 0 <= target["y"] < inner[1], (target, inner)
        page.mouse.move(2, 2)
        page.mouse.move(target["x"], target["y"], steps=2)
        try:
            tooltip.wait_for(state="visible", timeout=3000 if attempt < attempts - 1 else 30000)
            return target
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
    return target
