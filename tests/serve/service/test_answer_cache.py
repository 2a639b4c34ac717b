"""Warm answers: encoded (and gzipped) JSON kept per parameters until the analysis changes;
failures cached by file signature like successes."""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import os
import time

import pytest
from werkzeug.test import Client
from writer import being_written

from tb_roofline import errors, readers
from tb_roofline.serve.service import hosts
from tb_roofline.serve.service.core import RooflineService
from tb_roofline.serve.web.plugin import RooflinePlugin
from tb_roofline.synthetic import SynthConfig, write_tpu_session

RUN = "2026_01_01_00_00_00"


@pytest.fixture
def logdir(tmp_path, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")  # count every real read
    write_tpu_session(
        str(tmp_path), "", RUN, [SynthConfig(seed=1, ops_per_step=60, distinct_ops=40)]
    )
    return tmp_path


@pytest.fixture
def reads(monkeypatch):
    """Calls of the real reader, by path."""
    calls = []
    real = readers.read_profile_file

    def counting(path, *args, **kwargs):
        calls.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(readers, "read_profile_file", counting)
    return calls


def test_encoded_answers_are_kept_until_the_analysis_changes(logdir):
    service = RooflineService(str(logdir))
    params = dict(include_infeed_outfeed=False, categories=["loop fusion", "reduce"], name="")
    body, zipped = service.encoded("ops", RUN, "", True, **params)
    assert zipped and json.loads(gzip.decompress(body)) == service.ops(
        RUN, "", False, categories=["loop fusion", "reduce"]
    )
    assert service.encoded("ops", RUN, "", True, **params)[0] is body
    plain, zipped = service.encoded("ops", RUN, "*", False, **params)
    assert not zipped and json.loads(plain) == json.loads(gzip.decompress(body))
    other = service.encoded("ops", RUN, "", True, include_infeed_outfeed=True)[0]
    assert other != body
    for kind, method in (
        ("program", service.program),
        ("device", service.device),
        ("diagnostics", service.diagnostics),
    ):
        encoded, _ = service.encoded(kind, RUN, "", False)
        assert json.loads(encoded) == method(RUN, "")
    # A rewritten profile: a new analysis, so new bytes.
    write_tpu_session(str(logdir), "", RUN, [SynthConfig(seed=9)])
    past = time.time() - 30
    for p in logdir.rglob("*.xplane.pb"):
        os.utime(p, (past, past))
    again = service.encoded("ops", RUN, "", True, **params)[0]
    assert again is not body and json.loads(gzip.decompress(again)) == service.ops(
        RUN, "", False, categories=["loop fusion", "reduce"]
    )


def test_plugin_serves_gzip_to_clients_that_take_it(logdir):
    from tensorboard.plugins import base_plugin

    plugin = RooflinePlugin(base_plugin.TBContext(logdir=str(logdir)))
    client = Client(plugin.get_plugin_apps()["/ops"])
    zipped = client.get(f"/ops?run={RUN}&name=fusion", headers={"Accept-Encoding": "gzip, br"})
    assert zipped.status_code == 200 and zipped.headers["Content-Encoding"] == "gzip"
    assert zipped.headers["Vary"] == "Accept-Encoding"
    assert zipped.headers["Content-Type"] == "application/json"
    plain = client.get(f"/ops?run={RUN}&name=fusion")
    assert "Content-Encoding" not in plain.headers
    assert json.loads(gzip.decompress(zipped.data)) == json.loads(plain.data)
    refused = client.get(f"/ops?run={RUN}&name=fusion", headers={"Accept-Encoding": "gzip;q=0"})
    assert "Content-Encoding" not in refused.headers
    bad = client.get(f"/ops?run={RUN}&offset=x")
    assert bad.status_code == 400 and json.loads(bad.data)["error"]["code"] == "invalid_argument"


def test_a_corrupt_file_is_parsed_once_for_concurrent_requests(logdir, reads):
    bad = logdir / "broken" / "plugins" / "profile" / RUN / "h.xplane.pb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f" + os.urandom(200_000))
    past = time.time() - 60
    os.utime(bad, (past, past))
    service = RooflineService(str(logdir))
    run = "broken/" + RUN

    def ask(_):
        try:
            service.program(run, "", True)
        except errors.BadProfileError as exc:
            return str(exc)

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        messages = set(pool.map(ask, range(20)))
    assert len(messages) == 1 and "not a valid XSpace" in messages.pop()
    assert reads == [str(bad)]
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f rewritten")  # a new signature: tried again
    os.utime(bad, (past + 1, past + 1))
    with pytest.raises(errors.BadProfileError):
        service.program(run, "", True)
    assert reads == [str(bad)] * 2


@pytest.mark.slow
def test_a_file_still_being_written_is_judged_again(logdir, reads, monkeypatch):
    monkeypatch.setattr(hosts, "INCOMPLETE_RETRY_S", 0.2)
    live = logdir / "live" / "plugins" / "profile" / RUN / "h.xplane.pb"
    live.parent.mkdir(parents=True)
    live.write_bytes(b"\x0a\x05\x12")
    service = RooflineService(str(logdir))
    with being_written(live):  # growing while read: still being written, each time
        for _ in range(2):
            with pytest.raises(errors.ProfileIncompletePublicError):
                service.program("live/" + RUN, "", True)
    time.sleep(0.25)  # (past INCOMPLETE_RETRY_S, had the version held)
    with pytest.raises(errors.BadProfileError) as exc:  # judged again: no longer growing
        service.program("live/" + RUN, "", True)
    assert not isinstance(exc.value, errors.ProfileIncompletePublicError)
    judged = len(reads)
    with pytest.raises(errors.BadProfileError):  # damaged: kept while the version holds
        service.program("live/" + RUN, "", True)
    assert len(reads) == judged
