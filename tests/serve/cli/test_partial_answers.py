"""A pod with a damaged host: every command that answers exits 3 naming the host not read (0
with --allow-partial, still naming it), and a damaged file is not taken for one still being
written unless it grows while read. Real pods of files, the real command line in-process."""

from __future__ import annotations

import io
import os
import time

import pytest

from tb_roofline.serve.cli.main import main
from tb_roofline.serve.cli.partial import EXIT_PARTIAL
from tb_roofline.synthetic import SynthConfig, write_tpu_session

RUN = "pod/2026_01_01_00_00_00"


def _pod(root, hosts=4, seed=0, steps=2):
    write_tpu_session(
        str(root),
        "pod",
        "2026_01_01_00_00_00",
        [
            SynthConfig(
                seed=seed + i, hostname=f"h{i}", num_steps=steps, ops_per_step=20, distinct_ops=10
            )
            for i in range(hosts)
        ],
    )
    return root / "pod" / "plugins" / "profile" / "2026_01_01_00_00_00"


def _cut(path, old=True):
    """Cut a host file in half, as a crashed writer leaves it (old: written an hour ago)."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    if old:
        os.utime(path, (time.time() - 3600,) * 2)


def _run(argv, capsys) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv + ["--no-progress"], out)
    return code, out.getvalue(), capsys.readouterr().err


@pytest.fixture
def damaged_pod(tmp_path, monkeypatch):
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    _cut(_pod(tmp_path) / "h2.xplane.pb")
    return tmp_path


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["report", "--format", "json", "-o", "-"],
        ["export", "-o", "-"],
        ["comm", "--format", "json"],
        ["html", "-o", "OUT/r.html"],
    ],
)
def test_every_command_fails_on_a_partial_answer_naming_the_host(damaged_pod, command, capsys):
    argv = [a.replace("OUT", str(damaged_pod)) for a in command]
    argv = argv[:1] + [str(damaged_pod)] + argv[1:] if argv else [str(damaged_pod)]
    code, out, err = _run(argv, capsys)
    assert code == EXIT_PARTIAL == 3, err
    assert f"run {RUN!r}: partial answer: 1 host(s) not read or read in part: h2" in err
    assert "h2.xplane.pb looks cut short" in err and "--allow-partial" in err
    code, out, err = _run(argv + ["--allow-partial"], capsys)
    assert code == 0, err
    assert "not read or read in part: h2\n" in err  # still named, accepted


def test_a_whole_pod_and_one_good_host_exit_0(damaged_pod, capsys):
    code, _, err = _run([str(damaged_pod), "--host", "h1"], capsys)
    assert code == 0 and "not read" not in err
    code, _, err = _run(["report", str(damaged_pod), "--host", "h2"], capsys)
    assert code == 3 and "read in part: h2" in err  # its complete planes only


def _garbage(path):
    """A host file that is not an XSpace at all (a failed copy), written an hour ago."""
    path.write_bytes(bytes(range(256)) * 20)
    os.utime(path, (time.time() - 3600,) * 2)


@pytest.fixture
def two_pods(tmp_path, monkeypatch):
    """The same 4-host program as base and candidate (the candidate's own timings)."""
    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    base, cand = tmp_path / "base", tmp_path / "cand"
    return base, _pod(base), cand, _pod(cand, seed=0)


def test_diff_refuses_a_candidate_with_a_host_not_read(two_pods, capsys):
    base, _, cand, cand_dir = two_pods
    gate = ["--fail-if-slower", "5", "--fail-if-op-slower", "1"]
    code, out, err = _run(["diff", str(base), str(cand)] + gate, capsys)
    assert code == 0, err  # the same profiles: nothing slower
    _garbage(cand_dir / "h3.xplane.pb")
    code, out, err = _run(["diff", str(base), str(cand)] + gate, capsys)
    assert code == 3 and out == "", err  # refused: no report a CI step could read as passed
    assert f"candidate: run {RUN!r}: partial answer: 1 host(s) not read or read in part: h3" in err
    assert "base 4 host(s), 8 device(s); candidate 3 host(s), 6 device(s)" in err
    # allowed partial, the sides still cover different devices: still refused
    code, out, err = _run(["diff", str(base), str(cand), "--allow-partial"] + gate, capsys)
    assert code == 3 and "do not cover the same devices" in err
    # one host of each: the same devices, compared
    one = ["--base-host", "h1", "--host", "h1"]
    code, out, err = _run(["diff", str(base), str(cand)] + one + gate, capsys)
    assert code == 0, err


def test_diff_names_hosts_missing_from_one_side(two_pods, capsys):
    base, _, cand, cand_dir = two_pods
    os.remove(cand_dir / "h2.xplane.pb")
    code, out, err = _run(["diff", str(base), str(cand)], capsys)
    assert code == 3 and out == ""
    assert "base 4 host(s), 8 device(s); candidate 3 host(s), 6 device(s)" in err
    assert "hosts only in the base: h2" in err


def test_a_host_cut_short_seconds_ago_is_damaged_not_being_written(tmp_path, capsys, monkeypatch):
    """The first 30 s after a crashed writer: the host file does not grow, so it is named as
    a host read in part (not left out as "still being written"); while it grows it is."""
    from writer import being_written

    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", "off")
    host = _pod(tmp_path) / "h2.xplane.pb"
    _cut(host, old=False)
    code, _, err = _run([str(tmp_path)], capsys)
    assert code == 3 and "read in part: h2" in err and "looks cut short" in err, err
    with being_written(host):
        code, _, err = _run([str(tmp_path)], capsys)
    assert code == 3 and "still being written" in err, err


def test_a_restarted_server_still_names_a_host_read_in_part(tmp_path, monkeypatch):
    """A partial answer never goes to the disk cache: a restarted server (the tab's answers,
    `/progress`) would otherwise serve it without knowing the hosts it leaves out."""
    from tb_roofline.serve.service.core import RooflineService

    monkeypatch.setenv("TB_ROOFLINE_CACHE_DIR", str(tmp_path / "cache"))
    _cut(_pod(tmp_path / "logs") / "h2.xplane.pb")
    for _ in range(2):  # the second service: a restart over the same disk cache
        service = RooflineService(str(tmp_path / "logs"))
        service.encoded("program", RUN, "")
        assert list(service.reading(RUN)["hosts_not_read"]) == ["h2"]
