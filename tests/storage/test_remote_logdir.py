"""Remote logdirs against a real S3-compatible server (moto's, a separate process): the service,
the CLI and a real `tensorboard --logdir s3://...` give the numbers of a local copy, and the
bucket is listed in the background, not on each request."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import time
import urllib.parse
import urllib.request

import pytest
from testpaths import TESTS

pytest.importorskip("s3fs")
pytest.importorskip("moto")

from s3_server import moto_server  # noqa: E402
from tb_server import get, tensorboard  # noqa: E402

from tb_roofline import errors, storage  # noqa: E402
from tb_roofline.serve.cli.main import main  # noqa: E402
from tb_roofline.serve.service.core import RooflineService  # noqa: E402
from tb_roofline.synthetic import SynthConfig, write_tpu_session  # noqa: E402

REPO = os.path.dirname(TESTS)
BUCKET = "tb-roofline-test"
KINETO = os.path.join(REPO, "testdata", "kineto", "cpu_convnet")
DEVICE_FILE = {
    "kind": "cpu",
    "type": "Test CPU",
    "compute": {"fp32": 800.0},
    "memories": {"hbm": 60.0},
}


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The server, its environment set for this module, and a local copy of what it holds."""
    local = tmp_path_factory.mktemp("local_logdir")
    shutil.copytree(os.path.join(REPO, "testdata", "demo"), local, dirs_exist_ok=True)
    shutil.copytree(KINETO, local / "pytorch" / "cpu_convnet")
    shutil.copytree(os.path.join(REPO, "testdata", "jax_cpu", "mlp"), local / "jax_mlp")
    (local / "jax_mlp" / "roofline_device.json").write_text(json.dumps(DEVICE_FILE))
    with moto_server() as server, pytest.MonkeyPatch.context() as mp:
        for name, value in server.env().items():
            mp.setenv(name, value)
        mp.setenv("TB_ROOFLINE_REMOTE_RESCAN_S", "300")  # tests say when to rescan
        server.client().create_bucket(Bucket=BUCKET)
        server.upload_tree(str(local), BUCKET, "logs/")
        yield server, f"s3://{BUCKET}/logs", local


def _service(url: str) -> RooflineService:
    service = RooflineService(url)
    service.list_runs()  # waits for the first listing
    return service


def test_service_gives_the_numbers_of_the_local_copy(s3):
    _, url, local = s3
    remote, here = _service(url), RooflineService(str(local))
    runs = here.list_runs()["runs"]
    assert [(r["run"], r["format"], r["hosts"]) for r in remote.list_runs()["runs"]] == [
        (r["run"], r["format"], r["hosts"]) for r in runs
    ]
    assert {r["format"] for r in runs} == {"xplane", "kineto"}
    for run in runs:
        for host in [""] + run["hosts"]:
            name = run["run"]
            assert remote.device(name, host) == here.device(name, host)
            assert remote.program(name, host, True) == here.program(name, host, True)
            assert remote.ops(name, host, False) == here.ops(name, host, False)
            assert remote.diagnostics(name, host) == here.diagnostics(name, host)
    # The CPU profile took its peaks from the device file in the bucket.
    dev = remote.device("jax_mlp/2026_11_29_16_58_17", "")["device"]
    assert dev["type"] == "Test CPU" and dev["peaks_known"]


def test_cli_takes_the_url(s3):
    _, url, local = s3
    for args in (
        ["runs", "--json"],
        ["export", "--run", "v4_pod/2026_11_29_11_30_00", "-o", "-"],
        [
            "export",
            "--run",
            "pytorch/cpu_convnet",
            "--level",
            "program",
            "--format",
            "json",
            "-o",
            "-",
        ],
        ["report", "--run", "jax_mlp/2026_11_29_16_58_17"],
    ):
        far, near = io.StringIO(), io.StringIO()
        assert main([args[0], url] + args[1:], out=far) == 0
        assert main([args[0], str(local)] + args[1:], out=near) == 0
        if args[0] == "runs":  # mtimes differ: the bucket's are the upload's
            strip = lambda text: [
                {k: v for k, v in r.items() if k != "mtime"} for r in json.loads(text)
            ]  # noqa: E731
            assert strip(far.getvalue()) == strip(near.getvalue())
        else:
            assert far.getvalue() == near.getvalue()


def test_requests_do_not_touch_the_bucket_between_listings(s3):
    server, url, _ = s3
    service = _service(url)
    run, cpu = "v4_pod/2026_11_29_11_30_00", "jax_mlp/2026_11_29_16_58_17"
    for name in (run, cpu):
        service.program(name, "", True)  # read once
    before = len(server.requests())
    for _ in range(10):
        service.list_runs()
        service.has_profiles()
        service.hosts(run)
        service.program(run, "", True)
        service.ops(run, "tpu-v4-host1", True, name="fusion")
        service.device(cpu, "")  # device-file lookup and signature from the listing
        service.encoded("ops", cpu, "", True, include_infeed_outfeed=True)
        with pytest.raises(errors.NotFoundError):
            service.program("no/such/run", "", True)
    assert server.requests()[before:] == []


def test_new_sessions_and_rewritten_files_show_after_the_next_listing(s3, tmp_path, monkeypatch):
    server, _, _ = s3
    prefix = "changing/"
    extra = tmp_path / "x"
    write_tpu_session(str(extra), "", "2026_01_01_00_00_00", [SynthConfig(seed=1)])
    server.upload_tree(str(extra), BUCKET, prefix)
    monkeypatch.setenv("TB_ROOFLINE_REMOTE_RESCAN_S", "1")
    service = _service(f"s3://{BUCKET}/{prefix}")
    run = "2026_01_01_00_00_00"
    first = service.program(run, "", True)
    listings = len(server.listings(BUCKET))
    # A rewritten profile and a new session, both seen once a listing has run.
    later = tmp_path / "y"
    write_tpu_session(str(later), "", "2026_01_01_00_00_00", [SynthConfig(seed=5)])
    write_tpu_session(str(later), "", "2026_02_01_00_00_00", [SynthConfig(seed=6)])
    server.upload_tree(str(later), BUCKET, prefix)
    deadline = time.monotonic() + 20
    while len(service.list_runs()["runs"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [r["run"] for r in service.list_runs()["runs"]] == ["2026_02_01_00_00_00", run]
    assert service.program(run, "", True) != first
    assert service.program(run, "", True) == RooflineService(str(later)).program(run, "", True)
    # Polling every 0.2 s for seconds listed the bucket about once a second, not per call.
    elapsed = 20 - (deadline - time.monotonic())
    assert len(server.listings(BUCKET)) - listings <= elapsed + 2


def test_corrupt_remote_profile_is_read_once(s3, tmp_path, monkeypatch):
    server, _, _ = s3
    # A store's mtime is the upload time: judge the parse failure as corruption at once.
    monkeypatch.setenv("TB_ROOFLINE_YOUNG_FILE_S", "2")
    bad = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00" / "h.xplane.pb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f not an xspace" * 100)
    past = time.time() - 60
    os.utime(bad, (past, past))
    server.upload_tree(str(tmp_path), BUCKET, "corrupt/")
    service = _service(f"s3://{BUCKET}/corrupt")
    time.sleep(2.1)  # older than "young": a parse failure then means corrupt
    before = len(server.requests())
    for _ in range(5):
        with pytest.raises(errors.BadProfileError, match="not a valid XSpace"):
            service.program("2026_01_01_00_00_00", "", True)
    gets = [r for r in server.requests()[before:] if r.startswith("GET /" + BUCKET + "/corrupt/")]
    assert len(gets) == 1


def test_s3_endpoint_variable_of_tensorboard_is_honoured(s3, monkeypatch):
    server, url, _ = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("S3_ENDPOINT", server.endpoint)
    assert any(p.endswith(".xplane.pb") for p in storage.list_files(url))
    monkeypatch.setenv("S3_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    service = RooflineService(url)
    with pytest.raises(errors.StorageError, match="cannot list the logdir"):
        service.list_runs()


def test_unknown_scheme_is_a_clear_error(capsys):
    with pytest.raises(storage.StorageError, match="not a storage fsspec knows"):
        storage.list_files("nosuchscheme://bucket/logs")
    assert main(["runs", "nosuchscheme://bucket/logs"]) == 2
    assert "nosuchscheme" in capsys.readouterr().err


def test_tensorboard_serves_an_s3_logdir(s3):
    server, url, local = s3
    here = RooflineService(str(local))
    with tensorboard(url) as base:
        api = base + "/data/plugin/roofline"
        status, _, body = get(api + "/runs")
        assert status == 200
        runs = json.loads(body)
        assert runs["logdir"] == url
        assert [r["run"] for r in runs["runs"]] == [r["run"] for r in here.list_runs()["runs"]]
        for run in (
            "v4_pod/2026_11_29_11_30_00",
            "pytorch/cpu_convnet",
            "jax_mlp/2026_11_29_16_58_17",
        ):
            q = "?" + urllib.parse.urlencode({"run": run})
            status, _, body = get(api + "/program" + q)
            assert status == 200 and json.loads(body) == here.program(run, "", True)
            request = urllib.request.Request(api + "/ops" + q, headers={"Accept-Encoding": "gzip"})
            with urllib.request.urlopen(request, timeout=60) as r:
                assert r.headers["Content-Encoding"] == "gzip"
                assert json.loads(gzip.decompress(r.read())) == here.ops(run, "", True)


def test_missing_s3_package_says_which_extra_to_install():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['s3fs'] = None\n"
        "from tb_roofline.serve.cli.main import main\n"
        "sys.exit(main(['runs', 's3://some-bucket/logs']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
        timeout=120,
    )
    assert out.returncode == 2
    assert "pip install 'tb-roofline[s3]'" in out.stderr


def test_local_logdirs_never_import_fsspec(tmp_path):
    import subprocess
    import sys

    write_tpu_session(str(tmp_path), "", "2026_01_01_00_00_00", [SynthConfig(seed=1)])
    code = (
        "import sys\n"
        "from tb_roofline.serve.service.core import RooflineService\n"
        "s = RooflineService(sys.argv[1])\n"
        "run = s.list_runs()['runs'][0]['run']\n"
        "s.encoded('ops', run, '', True, include_infeed_outfeed=True)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fsspec', 's3fs', 'gcsfs')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
