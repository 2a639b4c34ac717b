"""Bad input cannot hurt the server: bombs, limits, clean errors for damaged files,
writers that pause, and the export and CLI paths. Each test pins one finding."""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest
from testpaths import TESTS

from tb_roofline import errors
from tb_roofline.errors import ProfileFormatError, ProfileIncompleteError, ProfileTooLargeError
from tb_roofline.readers import read_profile_file
from tb_roofline.readers.kineto import read_kineto_file
from tb_roofline.readers.xspace.read import read_xspace_file
from tb_roofline.synthetic import SynthConfig, make_tpu_xspace

REPO = os.path.dirname(TESTS)
MI250 = os.path.join(REPO, "testdata", "kineto", "mi250")


def _age(path, seconds):
    past = time.time() - seconds
    os.utime(path, (past, past))
    return str(path)


def _kineto_text():
    name = next(f for f in os.listdir(MI250) if f.endswith(".gz"))
    return gzip.decompress(open(os.path.join(MI250, name), "rb").read())


# ------------------------------------------------------------------------------------------
# 9. A file that grows is still being written (503); one cut short that does not grow is
# damaged (422), however recently it was written: age alone decides nothing.


def test_a_truncated_file_is_still_being_written_only_while_it_grows(tmp_path, monkeypatch):
    from writer import being_written

    good = make_tpu_xspace(SynthConfig(seed=1, num_cores=1, num_steps=1)).SerializeToString()
    x = tmp_path / "h.xplane.pb"
    x.write_bytes(good[: len(good) // 2])
    k = tmp_path / "h.pt.trace.json"
    k.write_bytes(_kineto_text()[:5000])
    for path, fmt in ((x, "xplane"), (k, "kineto")):
        with being_written(_age(path, 5)), pytest.raises(ProfileIncompleteError):
            read_profile_file(str(path), fmt, "h")  # the writer is at work
        for age in (5, 600):  # written 5 s or 10 minutes ago, not growing: damaged
            with pytest.raises(ProfileFormatError) as exc:
                read_profile_file(_age(path, age), fmt, "h")
            assert not isinstance(exc.value, ProfileIncompleteError)
    monkeypatch.setenv("TB_ROOFLINE_YOUNG_FILE_S", "2")  # older than this: never watched
    start = time.monotonic()
    with pytest.raises(ProfileFormatError) as exc:
        read_profile_file(_age(k, 5), "kineto", "h")
    assert not isinstance(exc.value, ProfileIncompleteError) and time.monotonic() - start < 1


# ------------------------------------------------------------------------------------------
# Helpers: gzip members concatenate, so a bomb of any size is one small member repeated.


def _gz_member(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


TINY_EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":1},'


def _bomb(path, mib: int, fill: bytes = TINY_EVENT, tail: bytes = b"1]}"):
    """`{"traceEvents": [` + `mib` MiB of `fill` repeated + `tail`, gzipped in ~mib KB."""
    block = _gz_member(fill * ((1 << 20) // len(fill)))
    with open(path, "wb") as f:
        f.write(_gz_member(b'{"traceEvents": ['))
        for _ in range(mib):
            f.write(block)
        f.write(_gz_member(tail))
    return _age(path, 3600)


def _logdir_with(tmp_path, files: dict):
    """A logdir with one Kineto run per entry: {run name: (file name, bytes or callable)}."""
    for run, (name, content) in files.items():
        folder = tmp_path / run
        folder.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(folder / name)
        else:
            (folder / name).write_bytes(content)
            _age(folder / name, 3600)
    return str(tmp_path)


# ------------------------------------------------------------------------------------------
# 1. Gzip bombs: bounded inflated size and event count, clean 413s, memory per request bounded.


def test_a_gzip_bomb_is_refused_by_its_event_count(tmp_path, monkeypatch):
    from tb_roofline.serve.service.core import RooflineService

    monkeypatch.setenv("TB_ROOFLINE_MAX_EVENTS", "100000")
    path = _bomb(tmp_path / "w.pt.trace.json.gz", 64)  # 64 MiB of tiny events, 860k of them
    assert os.path.getsize(path) < 300_000
    with pytest.raises(ProfileTooLargeError, match="100,000 trace events.*TB_ROOFLINE_MAX_EVENTS"):
        read_kineto_file(path, "h")
    service = RooflineService(str(tmp_path))
    with pytest.raises(errors.TooLargeError) as exc:
        service.program(".", "", True)
    assert exc.value.http_code == 413 and "TB_ROOFLINE_MAX_EVENTS" in str(exc.value)


def test_the_inflated_json_is_limited_like_a_file(tmp_path):
    from tb_roofline.serve.service.core import RooflineService

    _bomb(tmp_path / "w.pt.trace.json.gz", 3, fill=b" " * 1024)  # 3 MiB inflated from 10 kB
    service = RooflineService(str(tmp_path), max_file_mb=1)
    with pytest.raises(errors.TooLargeError, match="TB_ROOFLINE_MAX_FILE_MB"):
        service.program(".", "", True)


def test_default_limits_bound_the_memory_of_a_bomb(tmp_path):
    """The 3.6 MB trace that inflates to 1 GiB of 14 million tiny events took the server to
    3.6 GB. With the default limits it is refused (413) and the reader stays small."""
    import subprocess
    import sys

    path = _bomb(tmp_path / "w.pt.trace.json.gz", 1024)
    assert os.path.getsize(path) < 4 << 20
    code = f"""
import resource, sys, time
from tb_roofline.readers import read_profile_file
from tb_roofline.errors import ProfileTooLargeError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.monotonic()
try:
    read_profile_file({str(path)!r}, "kineto", "h", max_bytes=4096 << 20)
    sys.exit("read a bomb")
except ProfileTooLargeError as exc:
    print(exc)
print("growth_mb", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
print("seconds", time.monotonic() - t)
"""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TB_ROOFLINE_MAX_EVENTS", None)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines()[1:])
    assert "TB_ROOFLINE_MAX_EVENTS" in done.stdout
    assert int(lines["growth_mb"]) < 600, done.stdout  # was 3,600 MB


def test_a_failed_read_is_not_repeated_until_the_file_changes(tmp_path, monkeypatch):
    """The tab asks for the device, program, ops and diagnostics at once: a corrupt file costs
    one read (the service remembers the failure per file version), and a rewrite is read."""
    from tb_roofline.readers import kineto
    from tb_roofline.serve.service.core import RooflineService

    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X"}, nonsense]}')
    _age(path, 3600)
    calls = []
    real = kineto.load_kineto
    monkeypatch.setattr(kineto, "load_kineto", lambda *a, **k: calls.append(1) or real(*a, **k))
    service = RooflineService(str(tmp_path))
    for _ in range(3):
        with pytest.raises(errors.BadProfileError, match="invalid JSON"):
            service.program(".", "", True)
    assert len(calls) == 1
    path.write_bytes(b'{"traceEvents": [{"ph": "X"}, nonsense]}')
    _age(path, 3000)
    with pytest.raises(errors.BadProfileError):
        service.program(".", "", True)
    assert len(calls) == 2


def test_running_out_of_memory_is_a_413_and_the_server_keeps_serving(tmp_path, monkeypatch):
    from tb_roofline.readers import kineto
    from tb_roofline.serve.service import hosts
    from tb_roofline.serve.service.core import RooflineService

    text = _kineto_text()
    logdir = _logdir_with(
        tmp_path, {"big": ("w.pt.trace.json", text), "small": ("w.pt.trace.json", text + b" ")}
    )
    real = kineto.read_kineto

    def hungry(col, host, *rest):
        if len(col.op_ts) and col.meta.get("hungry", True) and hungry.on:
            raise MemoryError
        return real(col, host, *rest)

    hungry.on = True
    monkeypatch.setattr(kineto, "read_kineto", hungry)
    service = RooflineService(logdir)
    with pytest.raises(errors.TooLargeError, match="not enough memory"):
        service.program("big", "", True)
    hungry.on = False
    with pytest.raises(errors.TooLargeError):  # not read again at once...
        service.program("big", "", True)
    assert service.program("small", "", True)["rows"]  # ...while the others are served
    monkeypatch.setattr(
        hosts.time,
        "monotonic",
        lambda: real_monotonic() + hosts.MEMORY_RETRY_S + 1,
    )
    assert service.program("big", "", True)["rows"]  # read again a while later


real_monotonic = time.monotonic


def _plugin(logdir):
    from tensorboard.plugins import base_plugin
    from werkzeug import test as wtest
    from werkzeug.wrappers import Response

    from tb_roofline.serve.web.plugin import RooflinePlugin

    plugin = RooflinePlugin(base_plugin.TBContext(logdir=str(logdir)))
    apps = plugin.get_plugin_apps()

    def app(environ, start_response):
        path = environ["PATH_INFO"]
        route = "/static/*" if path.startswith("/static/") else path
        return apps[route](environ, start_response)

    return plugin, wtest.Client(app, Response)


def test_memory_error_in_the_analysis_answers_413(tmp_path, monkeypatch):
    _logdir_with(tmp_path, {"run": ("w.pt.trace.json", _kineto_text())})
    plugin, client = _plugin(tmp_path)
    monkeypatch.setattr(
        plugin._service.analyses, "entry", lambda *a: (_ for _ in ()).throw(MemoryError)
    )
    r = client.get("/program?run=run")
    assert r.status_code == 413 and r.json["error"]["code"] == "too_large"
    assert client.get("/runs").status_code == 200


def test_the_background_scan_survives_a_thread_that_cannot_start(tmp_path, monkeypatch):
    import threading

    from tb_roofline.serve.service.discovery import RunIndex

    _logdir_with(tmp_path, {"run": ("w.pt.trace.json", _kineto_text())})
    index = RunIndex(str(tmp_path))
    real = threading.Thread.start
    monkeypatch.setattr(
        threading.Thread,
        "start",
        lambda self: (_ for _ in ()).throw(RuntimeError("can't start new thread")),
    )
    assert not index.has_any()  # no thread: no scan, no exception either
    monkeypatch.setattr(threading.Thread, "start", real)
    deadline = time.monotonic() + 5
    while not index.has_any() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert index.has_any()  # it was not left "scanning" forever


# ------------------------------------------------------------------------------------------
# 2. Whitespace bombs: skipped in bulk, a run of it bounded.


def test_a_whitespace_bomb_costs_little(tmp_path):
    one = _bomb(tmp_path / "a.pt.trace.json.gz", 1024, fill=b" " * 4096)  # 1 GiB in 1 MB
    t = time.monotonic()
    with pytest.raises(ProfileFormatError, match="whitespace in a row"):
        read_kineto_file(one, "h")
    assert time.monotonic() - t < 5  # was 74 s
    # Runs under the bound, between elements: skipped in bulk (was 18 s for these 256 MiB).
    many = tmp_path / "b.pt.trace.json.gz"
    with open(many, "wb") as f:
        f.write(_gz_member(b'{"traceEvents": ['))
        spaces = _gz_member(b" " * (8 << 20))
        for _ in range(32):
            f.write(spaces + _gz_member(TINY_EVENT))
        f.write(_gz_member(b"1]}"))
    t = time.monotonic()
    assert len(read_kineto_file(_age(many, 3600), "h").ops) == 1
    assert time.monotonic() - t < 8


def test_braces_inside_strings_do_not_multiply_the_parsing(tmp_path, monkeypatch):
    """Each fast batch cut at a '},' inside a string fails; the slow path then takes at least a
    chunk, so a trace made of such events costs a few parses per chunk, not per event."""
    from tb_roofline.readers import kineto

    event = b'{"ph":"X","cat":"cpu_op","name":"a},},},},},","ts":1,"dur":1,"pid":1,"tid":1},'
    path = _bomb(tmp_path / "w.pt.trace.json.gz", 16, fill=event, tail=event[:-1] + b"]}")
    loads = []
    real = json.loads
    monkeypatch.setattr(kineto.json, "loads", lambda s, *a, **k: loads.append(len(s)) or real(s))
    assert len(read_kineto_file(path, "h").ops) == 1
    assert sum(loads) < 4 * (16 << 20)  # was 8 x (28 x on 256 MiB): 4 MB parses per 4096 events


# ------------------------------------------------------------------------------------------
# 3./7. Kineto: clean 422s, never quoting the file.


def test_kineto_integers_of_thousands_of_digits(tmp_path):
    big = b"9" * 5000
    for doc in (
        b'{"traceEvents": [{"ph": "X", "ts": ' + big + b"}]}",
        b'{"traceEvents": [], "distributedInfo": {"rank": ' + big + b"}}",
        b'{"traceEvents": [' + TINY_EVENT * 10 + b'{"dur": ' + big + b"}]}",
    ):
        path = tmp_path / "w.pt.trace.json"
        path.write_bytes(doc)
        with pytest.raises(ProfileFormatError, match="number too long"):
            read_profile_file(_age(path, 3600 + len(doc) % 97), "kineto", "h")


def test_errors_never_quote_the_file(tmp_path):
    """A profile that is a link to /etc/passwd (or any text) is named, never quoted."""
    secret = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"
    target = tmp_path / "passwd"
    target.write_bytes(secret)
    _age(target, 3600)
    for name, fmt in (
        ("w.pt.trace.json", "kineto"),
        ("w.pt.trace.json.gz", "kineto"),
        ("h.xplane.pb", "xplane"),
    ):
        link = tmp_path / name
        link.symlink_to(target)
        with pytest.raises(ProfileFormatError) as exc:
            read_profile_file(str(link), fmt, "h")
        message = str(exc.value)
        assert "root" not in message and "x:0" not in message and "bash" not in message
        assert "'ro" not in message  # not even the two bytes gzip's own error quotes
        assert name in message
    for doc in (
        b'{"traceEvents": [] "rootsecret": 1}',
        b'{"traceEvents": [], rootsecret}',
        b'["rootsecret"]',
        b'{"traceEvents": [{"a": rootsecret}]}',
    ):
        path = tmp_path / "d.pt.trace.json"
        path.write_bytes(doc)
        with pytest.raises(ProfileFormatError) as exc:
            read_profile_file(_age(path, 3600 + len(doc)), "kineto", "h")
        assert "secret" not in str(exc.value)


# ------------------------------------------------------------------------------------------
# 4. Kineto: negative durations are counted as 0 and said so.


def test_kineto_negative_durations_are_clamped_with_a_diagnostic(tmp_path):
    doc = json.loads(_kineto_text())
    n = 0
    for ev in doc["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") in ("cpu_op", "kernel") and n < 5:
            ev["dur"] = -abs(ev.get("dur", 1)) - 1
            n += 1
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps(doc))
    data = read_kineto_file(_age(path, 3600), "h")
    notes = [d for d in data.diagnostics if d.code == "negative_durations"]
    assert notes and notes[0].message.startswith("5 events")
    assert (data.ops["total_time_ps"] >= 0).all()


# ------------------------------------------------------------------------------------------
# 5./7. HTTP: exports of any run name, NUL in a static path.


def test_export_of_a_run_named_outside_latin1(tmp_path):
    _logdir_with(tmp_path, {"训练-é": ("w.pt.trace.json", _kineto_text())})
    plugin, client = _plugin(tmp_path)
    r = client.get("/export?run=" + __import__("urllib.parse").parse.quote("训练-é"))
    assert r.status_code == 200
    header = r.headers["Content-Disposition"]
    header.encode("latin-1")  # what a real server must be able to send
    assert 'filename="roofline_op_' in header
    assert "filename*=UTF-8''roofline_op_%E8%AE%AD%E7%BB%83-%C3%A9_all.csv" in header


def test_a_nul_in_a_static_path_is_404(tmp_path):
    plugin, client = _plugin(tmp_path)
    for path in ("/static/app.js%00.png", "/static/%00", "/static/vendor/%00/x"):
        r = client.get(path)
        assert r.status_code == 404 and r.json["error"]["code"] == "not_found"
    assert client.get("/static/app.js").status_code == 200


# ------------------------------------------------------------------------------------------
# 3. XSpace: stats of the wrong kind, empty HLO, malformed instructions: 422 naming the place.


def _gpu_space():
    from test_xla_gpu_cpu_reader import _gpu_space as make

    return make()


def _write_space(tmp_path, space, name="h.xplane.pb"):
    path = tmp_path / name
    path.write_bytes(space.SerializeToString())
    return _age(path, 3600)


def _stat_id(plane, name):
    return next(k for k, m in plane.stat_metadata.items() if m.name == name)


def _new_stat(plane, holder, name):
    """A stat of a new stat metadata `name` on `holder` (an event or event metadata)."""
    sid = max(plane.stat_metadata, default=0) + 1
    plane.stat_metadata[sid].id = sid
    plane.stat_metadata[sid].name = name
    return holder.stats.add(metadata_id=sid)


def test_step_and_group_stats_without_a_value(tmp_path):
    from tb_roofline.synthetic import _Plane

    space = _gpu_space()
    gpu = space.planes[1]
    ev = next(e for line in gpu.lines if line.name == "Steps" for e in line.events)
    gid = _stat_id(gpu, "group_id")
    for st in ev.stats:
        if st.metadata_id == gid:
            st.ClearField("value")  # a step marker's group_id with no value at all
    with pytest.raises(
        ProfileFormatError,
        match=r"plane '/device:GPU:0', line 'Steps': "
        r"stat 'group_id' holds no value",
    ):
        read_xspace_file(_write_space(tmp_path, space), "h")
    stream = next(line for line in gpu.lines if line.name == "Stream #1(Compute)")
    for st in stream.events[0].stats:
        if st.metadata_id == gid:
            st.double_value = float("nan")  # a kernel's group_id that is not a number
    with pytest.raises(
        ProfileFormatError,
        match=r"line 'Stream #1\(Compute\)': "
        r"stat 'group_id' holds a float",
    ):
        read_xspace_file(_write_space(tmp_path, space, "n.xplane.pb"), "h")
    space = _gpu_space()  # a host step marker whose step_num is text
    host = _Plane(space.planes.add(id=99, name="/host:CPU"))
    line = host.plane.lines.add(id=1, name="python", timestamp_ns=0)
    ev = line.events.add(metadata_id=host.event_metadata("train").id, offset_ps=0, duration_ps=5)
    host.add_stat(ev, "step_num", "one")
    with pytest.raises(ProfileFormatError, match="stat 'step_num' holds a str") as exc:
        read_xspace_file(_write_space(tmp_path, space, "g.xplane.pb"), "h")
    assert "one" not in str(exc.value).replace("python", "")


def test_an_empty_hlo_proto_is_a_diagnostic(tmp_path):
    space = _gpu_space()
    meta = space.planes[0]
    hid = _stat_id(meta, "Hlo Proto")
    for md in meta.event_metadata.values():
        for st in md.stats:
            if st.metadata_id == hid:
                st.bytes_value = b""
    data = read_xspace_file(_write_space(tmp_path, space), "h")
    assert "program 7: HLO proto holds no computation" in [d.message for d in data.diagnostics]
    assert set(data.ops["category"]) == {"unattributed"}


def test_memory_breakdown_of_the_wrong_kind(tmp_path):
    from test_xspace_reader import _tpu_space

    for kind, value in (("double_value", 2.5), ("str_value", "x"), ("bytes_value", b"\xff\xff")):
        space = _tpu_space([("fusion.2", "loop fusion", 0, 10, 0, 1, 1)])
        plane = space.planes[0]
        md = next(iter(plane.event_metadata.values()))
        setattr(_new_stat(plane, md, "memory_access_breakdown"), kind, value)
        with pytest.raises(
            ProfileFormatError,
            match=r"plane '/device:TPU:0', op .*fusion.2.*memory_access_breakdown",
        ):
            read_xspace_file(_write_space(tmp_path, space, f"{kind}.xplane.pb"), "h")


def _module_with(opcode, operands=0, **fields):
    """A one-instruction entry computation: `opcode` over `operands` f32[4,4] parameters."""
    from test_hlo_cost_model import HloBuilder

    from tb_roofline.costs.hlo.shapes import F32

    b = HloBuilder("bad_module")
    called = [b.adder()]
    b.computation("main")
    params = [b.param(f"p{i}", (F32, (4, 4)), i) for i in range(operands)]
    b.add(f"{opcode}.7", opcode, (F32, (4, 4)), params, called, **fields)
    b.module.entry_computation_id = len(b.module.computations)
    return b.module


@pytest.mark.parametrize(
    "opcode,need",
    [
        ("cholesky", 1),
        ("convolution", 2),
        ("dot", 2),
        ("dynamic-update-slice", 2),
        ("fft", 1),
        ("gather", 2),
        ("ragged-dot", 3),
        ("reduce", 2),
        ("reduce-window", 2),
        ("scaled-dot", 2),
        ("scatter", 3),
        ("select-and-scatter", 3),
        ("sort", 1),
        ("triangular-solve", 2),
    ],
)
def test_every_opcode_rule_with_too_few_operands(opcode, need):
    from tb_roofline.costs.hlo import HloModule, module_costs
    from tb_roofline.costs.hlo.cost_model import HloError

    for n in range(need):
        module = HloModule(_module_with(opcode, n), "7")
        with pytest.raises(
            HloError,
            match=rf"program 'bad_module' \(7\), instruction "
            rf"'{opcode}.7': a {opcode} needs",
        ):
            module_costs(module)


def test_dimension_numbers_an_operand_lacks():
    from test_hlo_cost_model import HloBuilder

    from tb_roofline.costs.hlo import HloModule, module_costs
    from tb_roofline.costs.hlo.cost_model import HloError
    from tb_roofline.protos import hlo_pb2

    window = hlo_pb2.Window()  # a cumsum-like window on a third dimension the output lacks
    window.dimensions.add(size=1)
    window.dimensions.add(size=1)
    window.dimensions.add(size=3, padding_low=1, padding_high=1)
    cases = [
        (
            "dot",
            2,
            {"dot_dimension_numbers": hlo_pb2.DotDimensionNumbers(lhs_contracting_dimensions=[5])},
        ),
        (
            "convolution",
            2,
            {
                "convolution_dimension_numbers": hlo_pb2.ConvolutionDimensionNumbers(
                    input_feature_dimension=9
                )
            },
        ),
        ("reduce-window", 2, {"window": window}),
        (
            "custom-call",
            2,
            {
                "custom_call_target": "__cublas$gemm",
                "backend_config": json.dumps(
                    {"dot_dimension_numbers": {"lhs_contracting_dimensions": ["7"]}}
                ).encode(),
            },
        ),
        (
            "custom-call",
            2,
            {
                "custom_call_target": "__cublas$gemm",
                "backend_config": b'{"dot_dimension_numbers": [1]}',
            },
        ),
        ("custom-call", 1, {"custom_call_target": "__cudnn$convForward"}),
        ("while", 0, {"backend_config": b'{"known_trip_count":{"n":"' + b"9" * 5000 + b'"}}'}),
    ]
    for opcode, n, fields in cases:
        module = HloModule(_module_with(opcode, n, **fields), "7")
        t = time.monotonic()
        with pytest.raises(HloError, match=rf"instruction '{opcode}.7'"):
            module_costs(module)
        assert time.monotonic() - t < 5, opcode
    # A window of 2^40 taps (the enumeration looped for ever): counted at once.
    module = HloModule(
        _module_with(
            "convolution",
            2,
            convolution_dimension_numbers=(
                hlo_pb2.ConvolutionDimensionNumbers(
                    input_spatial_dimensions=[0], output_spatial_dimensions=[0]
                )
            ),
            window=hlo_pb2.Window(
                dimensions=[hlo_pb2.WindowDimension(size=1 << 40, stride=3, base_dilation=2)]
            ),
        ),
        "7",
    )
    t = time.monotonic()
    module_costs(module)
    assert time.monotonic() - t < 1
    b = HloBuilder("loop")  # a computation that calls itself
    comp = b.computation("main")
    b.add("call.1", "call", (1, ()), [], [comp])
    b.module.entry_computation_id = comp.id
    with pytest.raises(HloError, match="computation 'main' calls itself"):
        module_costs(HloModule(b.module, "7"))


def test_a_malformed_instruction_through_the_reader_is_a_bad_profile(tmp_path):
    from tb_roofline.protos import hlo_pb2
    from tb_roofline.serve.service.core import RooflineService

    space = _gpu_space()
    meta = space.planes[0]
    hid = _stat_id(meta, "Hlo Proto")
    module = _module_with("gather", 1)
    module.name = "jit_step"
    module.computations[-1].instructions[-1].name = "fusion.1"  # the op the kernels name
    for md in meta.event_metadata.values():
        for st in md.stats:
            if st.metadata_id == hid:
                st.bytes_value = hlo_pb2.HloProto(hlo_module=module).SerializeToString()
    session = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    _write_space(session, space)
    with pytest.raises(errors.BadProfileError) as exc:
        RooflineService(str(tmp_path)).program("2026_01_01_00_00_00", "", True)
    assert exc.value.http_code == 422
    assert "h.xplane.pb" in str(exc.value) and "instruction 'fusion.1': a gather needs 2" in str(
        exc.value
    )


def test_a_convolution_window_is_counted_exactly_and_at_once():
    """The (tap, output) count, O(1) per tap, equals the enumeration it replaces."""
    import random

    from tb_roofline.costs.hlo.cost_model import valid_positions

    def enumerate_(in_size, out_size, k_size, stride, pad_lo, wdil, bdil):
        return sum(
            1
            for k in range(k_size)
            for o in range(out_size)
            if (o * stride + k * wdil - pad_lo) % bdil == 0
            and 0 <= (o * stride + k * wdil - pad_lo) // bdil < in_size
        )

    rng = random.Random(11)
    for _ in range(3000):
        args = (
            rng.randrange(0, 12),
            rng.randrange(0, 12),
            rng.randrange(0, 8),
            rng.randrange(1, 5),
            rng.randrange(-6, 8),
            rng.randrange(1, 4),
            rng.randrange(1, 5),
        )
        assert valid_positions(*args) == enumerate_(*args), args
    t = time.monotonic()
    assert valid_positions(10**12, 10**12, 3, 7, 1, 1, 5) > 0
    with pytest.raises(ValueError):
        valid_positions(10**12, 10**12, 10**12, 7, 1, 1, 5)
    assert time.monotonic() - t < 1


# ------------------------------------------------------------------------------------------
# 4. Negative durations, absurd occurrences, times that overflow int64: clamped or refused, said.


def _tpu_with(events_edit, full_path=False):
    from test_xspace_reader import _tpu_space

    space = _tpu_space(
        [
            ("fusion.2", "loop fusion", 0, 100, 0, 10, 64),
            ("fusion.3", "loop fusion", 200, 50, 0, 10, 64),
            ("fusion.4", "loop fusion", 300, 50, 0, 10, 64),
        ]
    )
    plane = space.planes[0]
    ops = next(line for line in plane.lines if line.name == "XLA Ops")
    events_edit(ops.events)
    if full_path:  # a double stat makes the token decoder give the line to the per-event path
        _new_stat(plane, ops.events[0], "some_double").double_value = 0.5
    return space


@pytest.mark.parametrize("full_path", [False, True])
def test_tpu_negative_durations_and_absurd_occurrences(tmp_path, full_path):
    def edit(events):
        events[0].duration_ps = -100
        events[1].num_occurrences = 2**62
        events[2].num_occurrences = -3

    data = read_xspace_file(_write_space(tmp_path, _tpu_with(edit, full_path)), "h")
    codes = {d.code: d.message for d in data.diagnostics}
    assert codes["negative_durations"].startswith("1 events")
    assert codes["bad_occurrences"].startswith("2 events")
    t = data.ops
    assert t["operation"].tolist() == ["fusion.2"]
    assert (t["total_time_ps"] >= 0).all() and t["occurrences"].tolist() == [1]
    from tb_roofline.model.records.roofline import analyze

    analyze([data])


@pytest.mark.parametrize("full_path", [False, True])
def test_tpu_times_that_overflow_int64_are_a_bad_profile(tmp_path, full_path):
    def edit(events):
        events[0].duration_ps = 2**63 - 10
        events[1].duration_ps = 2**63 - 10

    with pytest.raises(ProfileFormatError, match="line 'XLA Ops': event times or durations"):
        read_xspace_file(_write_space(tmp_path, _tpu_with(edit, full_path)), "h")


def test_tpu_negative_op_costs_count_as_zero(tmp_path):
    from test_xspace_reader import _tpu_space

    space = _tpu_space([("fusion.2", "loop fusion", 0, 100, 0, -10, -64)])
    data = read_xspace_file(_write_space(tmp_path, space), "h")
    assert "negative_costs" in {d.code for d in data.diagnostics}
    assert data.ops["flops"].tolist() == [0.0] and data.ops["bytes"].tolist() == [0.0]


def test_gpu_negative_durations_and_overflowing_times(tmp_path):
    space = _gpu_space()
    stream = next(line for line in space.planes[1].lines if line.name == "Stream #1(Compute)")
    stream.events[0].duration_ps = -30
    data = read_xspace_file(_write_space(tmp_path, space), "h")
    assert "negative_durations" in {d.code for d in data.diagnostics}
    assert (data.ops["total_time_ps"] >= 0).all() and (data.ops["self_time_ps"] >= 0).all()
    stream.events[0].duration_ps = 2**63 - 1
    with pytest.raises(ProfileFormatError, match="plane '/device:GPU:0': event times"):
        read_xspace_file(_write_space(tmp_path, space, "g.xplane.pb"), "h")


# ------------------------------------------------------------------------------------------
# 6. CSV exports: no formulas, no split rows (the same rule as the tab's toCsv, see e2e).

CSV_CASES = [
    ("=1+1", "'=1+1"),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"),
    ("\r=x", '"\'\r=x"'),
    ("a\rb", '"a\rb"'),
    ('say "hi", ok', '"say ""hi"", ok"'),
    ("-1.5", "-1.5"),
    ("+2", "+2"),
    ("-3e-7", "-3e-7"),
    (-1.5, "-1.5"),
    (7, "7"),
    (None, ""),
    (True, "True"),
    ("fusion.3", "fusion.3"),
    ("-", "'-"),
    ("", ""),
    ("\n=cmd", '"\'\n=cmd"'),
    ("\x0b=1", "'\x0b=1"),
    ("\x1f@x", "'\x1f@x"),
    ("\x7f=1", "'\x7f=1"),
    ("\x01", "'\x01"),
]


def test_csv_cells_are_never_formulas():
    import csv
    import io

    from tb_roofline.serve.service.export import csv_cell, to_csv

    for value, expected in CSV_CASES:
        assert csv_cell(value) == expected, value
    text = to_csv(["a", "b"], [[v, "x"] for v, _ in CSV_CASES])
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == 1 + len(CSV_CASES)  # a lone CR did not split a row
    assert [r[0] for r in rows[1:]] == [
        csv_cell(v).strip('"').replace('""', '"') for v, _ in CSV_CASES
    ]


def test_exports_of_hostile_op_names(tmp_path):
    """Op names come from the profile: an export of them opens as text in a spreadsheet."""
    import csv
    import io

    from tb_roofline.serve.service.core import RooflineService

    doc = json.loads(_kineto_text())
    names = ['=HYPERLINK("http://x")', "@x", "-x", "+x", "a\rb"]
    # rename ops that are rows of the table (ops that launched kernels), each everywhere
    plain = tmp_path / "plain.pt.trace.json"
    plain.write_text(json.dumps(doc))
    _age(plain, 3600)
    rows = sorted(set(read_kineto_file(str(plain), "h").ops["operation"].tolist()))
    rename = dict(zip([r for r in rows if r.startswith("aten::")], names))
    assert len(rename) == len(names)
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "cpu_op" and ev.get("name") in rename:
            ev["name"] = rename[ev["name"]]
    plain.unlink()
    _logdir_with(tmp_path, {"run": ("w.pt.trace.json", json.dumps(doc).encode())})
    body, _, _ = RooflineService(str(tmp_path)).export("run", "", level="op", fmt="csv")
    rows = list(csv.reader(io.StringIO(body, newline="")))
    cells = [c for r in rows for c in r]
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")]
    assert not [c for c in cells if c.startswith("-") and not c.lstrip("-")[:1].isdigit()]
    assert len({len(r) for r in rows}) == 1
    assert '\'=HYPERLINK("http://x")' in cells  # the names are there, as text


# ------------------------------------------------------------------------------------------
# 8. calibrate's file is readable by others; CLI errors are one line, exit code 2.

DEMO = os.path.join(REPO, "testdata", "demo")


def _fake_calibration(monkeypatch):
    from tb_roofline.devices import calibrate
    from tb_roofline.devices.spec import ComputePeak, DeviceInfo, MemoryPeak

    device = DeviceInfo(
        type="test cpu",
        kind="cpu",
        num_cores=1,
        compute=[ComputePeak("fp32", 100.0, "measured")],
        memories=[MemoryPeak("hbm", "DRAM", 20.0, "measured")],
    )
    details = {"stream": {"copy_gbs": 20.0, "triad_gbs": 19.0, "array_bytes": 1 << 20}}
    monkeypatch.setattr(
        calibrate, "measure", lambda *a, **k: calibrate.Calibration(device, details, "test")
    )


def test_calibrate_writes_a_file_others_can_read(tmp_path, monkeypatch):
    import io
    import stat

    from tb_roofline.serve.cli.main import main

    _fake_calibration(monkeypatch)
    old = os.umask(0o022)
    try:
        target = tmp_path / "roofline_device.json"
        assert main(["calibrate", "-o", str(target)], out=io.StringIO()) == 0
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o644  # was 0600
        os.umask(0o077)  # a user who wants private files gets them
        assert main(["calibrate", "-o", str(target)], out=io.StringIO()) == 0
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    finally:
        os.umask(old)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_cli_output_errors_are_one_line_with_exit_code_2(tmp_path, monkeypatch, capsys):
    import io

    from tb_roofline.serve.cli.main import main

    _fake_calibration(monkeypatch)
    run = "v6e_train/2026_11_29_10_00_00"
    for target in (tmp_path / "missing" / "ops.csv", tmp_path):  # no such folder; a folder
        capsys.readouterr()
        assert main(["export", DEMO, "--run", run, "-o", str(target)], out=io.StringIO()) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"tb-roofline: cannot write {target}: ") and err.count("\n") == 1
        assert (
            main(
                [
                    "calibrate",
                    "-o",
                    str(target / "d.json" if target != tmp_path else tmp_path / "x" / "d.json"),
                ],
                out=io.StringIO(),
            )
            == 2
        )
        err = capsys.readouterr().err
        assert "cannot write" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        main([DEMO, "--top", "-5"], out=io.StringIO())
    assert exc.value.code == 2 and "--top: -5 is negative" in capsys.readouterr().err
    out = io.StringIO()
    assert main([DEMO, "--top", "0"], out=out) == 0 and "Top opportunities: 0 of" in out.getvalue()


def test_cli_into_a_closed_pipe_exits_quietly():
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tb_roofline.serve.cli.main",
            "export",
            DEMO,
            "--run",
            "v6e_train/2026_11_29_10_00_00",
            "--format",
            "json",
            "-o",
            "-",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    proc.stdout.close()  # `| head` that has read all it wanted
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert err == "", err  # no BrokenPipeError traceback
