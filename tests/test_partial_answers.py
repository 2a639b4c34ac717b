"""A pod with a damaged host: every command that answers exits 3 naming the host not read (0
with --allow-partial, still naming it), and a damaged file is not taken for one still being
written unless it grows while read. Real pods of files, the real command line in-process."""

from __future__ import annotations

import io
import os
import time

import pytest

from tb_roofline.serve.cli.main import EXIT_PARTIAL, main
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
