"""End-to-end fixtures: a real `tensorboard` process per logdir and headless Debian Chromium.

Nothing is mocked: the tab talks to the real plugin over HTTP. Every page records console
errors, uncaught exceptions and Content-Security-Policy violations, and the `page` fixture
fails the test if any were seen (see `e2e_helpers.BrowserLog`).
"""

from __future__ import annotations

import os
import time

import pytest
from e2e_helpers import (
    _CSP_PROBE,
    BROKEN_RUN,
    CHROMIUM,
    CHROMIUM_ARGS,
    MAIN_RUN,
    REPO,
    V4_RUN,
    BrowserLog,
    TensorBoard,
)


def _write_main_logdir(logdir: str):
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    write_tpu_session(
        logdir,
        "train",
        MAIN_RUN.split("/")[1],
        [
            SynthConfig(
                seed=11,
                chip="v6e",
                num_cores=2,
                num_steps=4,
                ops_per_step=60,
                distinct_ops=40,
                hostname="host0",
            ),
            SynthConfig(
                seed=12,
                chip="v6e",
                num_cores=2,
                num_steps=4,
                ops_per_step=60,
                distinct_ops=40,
                hostname="host1",
            ),
        ],
    )
    write_tpu_session(
        logdir,
        "eval",
        V4_RUN.split("/")[1],
        [
            SynthConfig(
                seed=13,
                chip="v4",
                num_cores=2,
                num_steps=3,
                ops_per_step=30,
                distinct_ops=20,
                hostname="v4host0",
            ),
        ],
    )
    # A corrupt profile next to the good ones: random bytes, old enough not to be taken for a
    # file still being written.
    broken = os.path.join(logdir, "broken", "plugins", "profile", BROKEN_RUN.split("/")[1])
    os.makedirs(broken)
    path = os.path.join(broken, "host0.xplane.pb")
    with open(path, "wb") as f:
        f.write(bytes((i * 7919 + 13) % 251 for i in range(6000)))
    old = time.time() - 3600
    os.utime(path, (old, old))


@pytest.fixture(scope="session")
def main_logdir(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("main_logdir"))
    _write_main_logdir(logdir)
    return logdir


@pytest.fixture(scope="session")
def tb(main_logdir):
    server = TensorBoard(main_logdir, name="main")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tb_empty(tmp_path_factory):
    server = TensorBoard(str(tmp_path_factory.mktemp("empty_logdir")), name="empty")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tb_testdata():
    """The repository's committed test data: the demo TPU runs, real JAX CPU, TF GPU and
    PyTorch (Kineto) profiles."""
    server = TensorBoard(os.path.join(REPO, "testdata"), name="testdata")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tb_prefixed(main_logdir):
    server = TensorBoard(main_logdir, ["--path_prefix", "/tb/sub"], name="prefixed")
    yield server
    server.stop()


# ------------------------------------------------------------------------- browser


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        # The README's test command installs it; skipping would let the suite pass untested.
        if os.environ.get("TB_ROOFLINE_SKIP_BROWSER") == "1":
            pytest.skip(f"no Chromium at {CHROMIUM} and TB_ROOFLINE_SKIP_BROWSER=1")
        pytest.fail(
            f"no Chromium at {CHROMIUM}: run `apt-get install chromium` "
            "(or `bash tools/test.sh`), or set TB_ROOFLINE_SKIP_BROWSER=1 to skip"
        )
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    context.add_init_script(_CSP_PROBE)
    pg = context.new_page()
    pg.set_default_timeout(30000)
    pg.log = BrowserLog(pg)
    yield pg
    problems = pg.log.problems()
    context.close()
    assert not problems, f"browser log has errors or CSP violations: {problems}"
