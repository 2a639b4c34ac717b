"""A run's hosts in the tab, on a real TensorBoard:

- the warnings banner names the hosts that could not be read: a run of two hosts, one a good
  profile and one a corrupt file; the tab shows the good host's numbers and says "1 of 2
  hosts not read: host1 — see Diagnostics", and the button opens the Diagnostics list where
  the host's own error says why;
- while a pod's hosts are read, the loading line says "reading k of N hosts" (`/progress`).
"""

from __future__ import annotations

import os
import time

import pytest
from e2e_helpers import TensorBoard, open_frame, point_count, shot, status, wait_js

RUN = "pod/2026_11_30_10_00_00"
BIG_RUN = "bigpod/2026_11_30_11_00_00"
# Enough to take seconds to read in one process (~2 s here: 15 ms a host), so the tab's
# first progress request (600 ms after it starts waiting) comes while they are read, also
# on a machine several times faster.
BIG_HOSTS = 128


@pytest.fixture(scope="module")
def tb_pod(tmp_path_factory):
    from tb_roofline.synthetic import SynthConfig, write_tpu_session

    logdir = str(tmp_path_factory.mktemp("hosts_banner_logdir"))
    write_tpu_session(
        logdir,
        "pod",
        RUN.split("/")[1],
        [
            SynthConfig(
                seed=21,
                chip="v6e",
                num_cores=2,
                num_steps=3,
                ops_per_step=30,
                distinct_ops=20,
                hostname=f"host{i}",
            )
            for i in range(2)
        ],
    )
    # host1's file replaced by bytes that are no XSpace, old enough not to be still written
    bad = os.path.join(logdir, "pod", "plugins", "profile", RUN.split("/")[1], "host1.xplane.pb")
    with open(bad, "wb") as f:
        f.write(bytes((i * 7919 + 13) % 251 for i in range(6000)))
    old = time.time() - 3600
    os.utime(bad, (old, old))
    write_tpu_session(
        logdir,
        "bigpod",
        BIG_RUN.split("/")[1],
        [
            SynthConfig(
                seed=100 + i,
                chip="v6e",
                num_cores=2,
                num_steps=8,
                ops_per_step=800,
                distinct_ops=100,
                hostname=f"host{i}",
            )
            for i in range(BIG_HOSTS)
        ],
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TB_ROOFLINE_WORKERS", "1")  # (one process: its pace does not hang on cores)
        server = TensorBoard(logdir, name="hosts")
    yield server
    server.stop()


def test_the_banner_names_the_hosts_not_read(page, tb_pod):
    code, answer = tb_pod.api("diagnostics", run=RUN)
    assert code == 200
    skipped = [d for d in answer["diagnostics"] if d.get("skipped_host")]
    assert [(d["skipped_host"], d["hosts_total"], d["severity"]) for d in skipped] == [
        ("host1", 2, "error")
    ]
    assert tb_pod.api("device", run=RUN)[1]["device"]["num_hosts"] == 1  # host0 still counts

    open_frame(page, tb_pod, run=RUN)
    assert status(page) == "ready"
    banner = page.locator("#warnings-banner")
    assert banner.is_visible()
    line = page.locator("#hosts-not-read")
    line.scroll_into_view_if_needed()
    text = " ".join(line.inner_text().split())
    assert "1 of 2 hosts not read: host1 — see Diagnostics" in text
    assert line.get_attribute("data-hosts") == "host1"
    assert line.get_attribute("data-total") == "2"
    # the cause is the diagnostic's own words, on hover and in the list
    assert skipped[0]["message"] in line.get_attribute("title")
    # the host's error is not said a second time in the banner
    assert banner.locator("li").count() == 1 + banner.locator("li:not(#hosts-not-read)").count()
    assert banner.locator("li", has_text="'host1' skipped").count() == 0
    shot(page, "hosts_not_read_banner", full_page=False)

    details = page.locator("#diagnostics-section")
    assert details.get_attribute("open") is None
    page.locator("#see-diagnostics").click()
    wait_js(page, "document.querySelector('#diagnostics-section').open")
    listed = page.locator("#diagnostics")
    listed.scroll_into_view_if_needed()
    assert "'host1' skipped" in listed.inner_text()
    # the charts plot what was read: host0's ops (the Vega view's dataflow)
    ops = tb_pod.api("ops", run=RUN)[1]
    assert ops["total_count"] > 0 and {r[ops["columns"].index("host")] for r in ops["rows"]} <= {
        "host0",
        "*",
        None,
    }
    assert point_count(page, "ops") == ops["total_count"]


def test_a_run_whose_hosts_were_all_read_has_no_such_line(page, tb_pod):
    open_frame(page, tb_pod, run=RUN, host="host0")
    assert status(page) == "ready"
    assert page.locator("#hosts-not-read").count() == 0


def test_the_loading_line_counts_the_hosts_read(page, tb_pod):
    """Opened on a pod no request has read yet: while the tab waits, its loading line says
    how many of the run's hosts the server has read, rising to all of them; once loaded the
    line is gone and the diagnostics say nothing about hosts not read."""
    page.goto("about:blank")
    page.goto(tb_pod.frame_url(run=BIG_RUN))
    seen = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        got = page.evaluate("""() => {
          const el = document.querySelector('#loading-progress');
          const app = document.querySelector('#roofline-app');
          return {status: app ? app.dataset.status : null,
                  text: el ? el.textContent : null,
                  done: el ? +el.dataset.hostsDone : null,
                  total: el ? +el.dataset.hostsTotal : null,
                  shown: el ? !document.querySelector('#loading').hidden : false};
        }""")
        if got["text"] is not None:
            seen.append(got)
        if got["status"] in ("ready", "partial", "error", "empty"):
            break
        time.sleep(0.05)
    assert got["status"] == "ready"
    assert seen, "no progress shown while the hosts were read"
    for s in seen:
        assert s["total"] == BIG_HOSTS and 0 <= s["done"] <= BIG_HOSTS and s["shown"]
        assert f"reading {s['done']} of {BIG_HOSTS} hosts" in s["text"]
    done = [s["done"] for s in seen]
    assert done == sorted(done)
    assert page.locator("#loading-progress").count() == 0
    assert page.locator("#hosts-not-read").count() == 0
    assert tb_pod.api("progress", run=BIG_RUN)[1]["reading"] is False
