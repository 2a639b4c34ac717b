"""Which devices count (docs/guidance.md, "Which devices count"): a GPU that only copied runs no
program (no device time, no idle, not in the device count), and each XLA:CPU device of a host is
a core of its own (per-step counts per device, shares of the devices' time).

Every expected figure is worked out here from the raw XSpace, decoded with the protobuf classes
alone (no reader or model code): the events of each GPU stream or CPU thread, their stats
(`memcpy_details`, `hlo_op`, `device_ordinal`) and the host's step markers.
"""

from __future__ import annotations

import collections
import glob
import os

import pytest
from testpaths import TESTS

from tb_roofline.protos import xplane_pb2
from tb_roofline.serve.service.core import RooflineService

REPO = os.path.dirname(TESTS)
COPY_ONLY = os.path.join(REPO, "testdata", "xla_gpu_mi300_copy_only")
CPU8 = os.path.join(REPO, "testdata", "jax_cpu_collectives")
DEVICE_FILE = os.path.join(REPO, "testdata", "guidance", "roofline_device.json")


def _space(folder: str):
    (path,) = glob.glob(os.path.join(folder, "plugins", "profile", "*", "*.xplane.pb"))
    with open(path, "rb") as f:
        return xplane_pb2.XSpace.FromString(f.read())


def _stats(plane, ev) -> dict:
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    out = {}
    for s in ev.stats:
        kind = s.WhichOneof("value")
        value = getattr(s, kind) if kind else None
        out[names.get(s.metadata_id)] = names.get(value) if kind == "ref_value" else value
    return out


def _events(plane, lines):
    """(begin ps, end ps, name, stats) of every event on `lines`."""
    for line in lines:
        base = line.timestamp_ns * 1000
        for ev in line.events:
            b = base + ev.offset_ps
            name = plane.event_metadata[ev.metadata_id].name
            yield b, b + ev.duration_ps, name, _stats(plane, ev)


def _union_ps(intervals) -> int:
    busy, end = 0, None
    for b, e in sorted(intervals):
        if end is None or b > end:
            busy += e - b
            end = e
        elif e > end:
            busy += e - end
            end = e
    return busy


def _service(folder: str, device_file: str | None = None):
    service = RooflineService(folder, device_file=device_file)
    (run,) = [r["run"] for r in service.list_runs()["runs"]]
    return service, run


# --------------------------------------------------------------- a GPU that only copied


def _gpu_streams(space) -> dict:
    """{GPU: [(begin, end, name, stats)]} of the stream lines (the ops a GPU ran)."""
    out: dict = {}
    for p in space.planes:
        if p.name.startswith("/device:GPU:"):
            lines = [line for line in p.lines if line.name.startswith("Stream")]
            evs = list(_events(p, lines))
            if evs:
                out[int(p.name.rsplit(":", 1)[1])] = evs
    return out


def test_a_gpu_that_only_copied_adds_no_device_time_or_idle():
    """8× MI300X: GPU:7 runs the program, GPU:0 only copies (53 device-to-device copies).
    The Total is GPU:7's span alone, idle is GPU:7's alone, the device counts one GPU, and the
    copies are rows of category memcpy, called copies."""
    streams = _gpu_streams(_space(COPY_ONLY))
    copy_only = [g for g, evs in streams.items() if all("memcpy_details" in e[3] for e in evs)]
    ran = [g for g in streams if g not in copy_only]
    assert copy_only == [0] and ran == [7]
    program = streams[7]
    span_ps = max(e for _, e, _, _ in program) - min(b for b, _, _, _ in program)
    idle_ps = span_ps - _union_ps([(b, e) for b, e, _, _ in program])
    copies = streams[0]
    assert len(copies) == 53 and {c[2] for c in copies} == {"CopyDeviceToDevice"}
    copy_ps = sum(e - b for b, e, _, _ in copies)

    service, run = _service(COPY_ONLY)
    a = service.analysis(run, "")
    assert a.device.num_cores == 1
    assert sorted(set(a.facts.timeline.windows["core"].tolist())) == [7]
    total = a.program[True].row_dicts()[0]
    assert total["total_time_us"] == pytest.approx(span_ps / 1e6, rel=1e-9)
    g = service.guidance(run, "")
    idle = next(c for c in g["classes"] if c["class"] == "idle")
    assert idle["time_us"] == pytest.approx(idle_ps / 1e6, rel=1e-9)
    assert sum(c["time_us"] for c in g["classes"]) == pytest.approx(span_ps / 1e6, rel=1e-9)
    # GPU:7's busy time is all its ops' (fusions and a cuDNN convolution, each with an HLO
    # cost) and goes to the bound classes; GPU:0's copies take no share of any class (weighed
    # in, they would put 712 µs of GPU:7's time in "unknown")
    classes = {c["class"]: c["time_us"] for c in g["classes"]}
    busy_ps = _union_ps([(b, e) for b, e, _, _ in program])
    bound = classes["compute_bound"] + classes["memory_bound"]
    assert bound == pytest.approx(busy_ps / 1e6, rel=1e-9)
    assert classes["unknown"] == pytest.approx(0.0, abs=1e-9)
    for f in g["findings"]:
        assert f["percent_of_step"] <= 100.0
        if f["rule"] == "idle":
            assert f["time_saved_us"] <= idle_ps / 1e6 * (1 + 1e-9)

    codes = {d.code: d.message for d in a.diagnostics}
    assert "device(s) 0 only copied" in codes["copy_only_devices"]
    assert "53 runtime copies (53 memcpy" in codes["runtime_copies"]
    assert "command buffer" not in codes.get("unattributed_time", "")
    ops = {r["operation"]: r for r in a.ops[True].row_dicts()}
    row = ops["CopyDeviceToDevice"]
    assert row["category"] == "memcpy" and row["occurrences"] == 53
    assert row["total_time_us"] == pytest.approx(copy_ps / 1e6, rel=1e-9)
    assert row["flops"] is None  # unknown, never 0


# --------------------------------------------------------------- XLA:CPU devices as cores


CPU_CASES = sorted(os.listdir(CPU8))


def _cpu_devices(space) -> tuple[dict, list]:
    """({device ordinal: [(begin, end, op)]}, [(step, begin, end)]) from the host plane: op
    events carry `hlo_op` and `device_ordinal`; the longest `step_num` marker of each step."""
    (p,) = [p for p in space.planes if p.name == "/host:CPU"]
    ops: dict = collections.defaultdict(list)
    marks: dict = {}
    for b, e, _, st in _events(p, p.lines):
        if st.get("hlo_op"):
            ops[st.get("device_ordinal") or 0].append((b, e, st["hlo_op"]))
        if "step_num" in st:
            step = st["step_num"] or 0
            if step not in marks or e - b > marks[step][1] - marks[step][0]:
                marks[step] = (b, e)
    return dict(ops), sorted((s, b, e) for s, (b, e) in marks.items())


def _device_span_ps(evs, marks) -> int:
    """A device's span: its ops and the step markers that hold one of its ops' starts."""
    lo = min(b for b, _, _ in evs)
    hi = max(e for _, e, _ in evs)
    for _, sb, se in marks:
        if any(sb <= b < se for b, _, _ in evs):
            lo, hi = min(lo, sb), max(hi, se)
    return hi - lo


@pytest.mark.parametrize("case", CPU_CASES)
def test_each_xla_cpu_device_is_a_core(case):
    """8 XLA:CPU devices on one host: 8 cores, the Total is their spans added up, every share
    is of that time (no finding above 100 %), and per-step counts are per device."""
    ops, marks = _cpu_devices(_space(os.path.join(CPU8, case)))
    assert sorted(ops) == list(range(8))
    device_ps = sum(_device_span_ps(evs, marks) for evs in ops.values())
    steps = len(marks)
    # an op each device runs once a step: its calls per device per step, by hand
    calls = collections.Counter(op for evs in ops.values() for _, _, op in evs)
    per_device_step = {op: n / steps / len(ops) for op, n in calls.items()}

    service, run = _service(os.path.join(CPU8, case), DEVICE_FILE)
    a = service.analysis(run, "")
    assert a.device.num_cores == 8
    assert sorted(set(a.facts.timeline.windows["core"].tolist())) == list(range(8))
    total = a.program[True].row_dicts()[0]
    assert total["total_time_us"] == pytest.approx(device_ps / 1e6, rel=1e-9)
    by_op = collections.Counter()
    for r in a.ops[True].row_dicts():
        by_op[r["operation"]] += r["occurrences"]
    assert dict(by_op) == dict(calls)

    g = service.guidance(run, "")
    assert sum(c["time_us"] for c in g["classes"]) == pytest.approx(device_ps / 1e6, rel=1e-6)
    assert g["total_percent_of_step"] <= 100.0
    for f in g["findings"]:
        share = 100.0 * f["time_saved_us"] / (device_ps / 1e6)
        assert f["percent_of_step"] == pytest.approx(share, rel=1e-9) and share <= 100.0
        evidence = f["evidence"]["facts"]
        for key in ("calls_per_step", "calls_per_step_of_shape"):
            if key in evidence:
                (op,) = [o for o in per_device_step if f["title"].startswith(o + ":")]
                assert evidence[key] == pytest.approx(per_device_step[op], rel=1e-9)


def test_a_copy_each_device_runs_once_a_step_is_no_repeat():
    """shard_map_relayout: each of the 8 devices runs `transpose_copy_fusion` once in every
    step (counted by hand per device and step marker): once per step, so no `repeated_copy`
    (counted over the host's one line it read "copied 8× per step")."""
    ops, marks = _cpu_devices(_space(os.path.join(CPU8, "shard_map_relayout")))
    for evs in ops.values():
        for _, sb, se in marks:
            n = sum(1 for b, _, op in evs if op == "transpose_copy_fusion" and sb <= b < se)
            assert n == 1
    service, run = _service(os.path.join(CPU8, "shard_map_relayout"), DEVICE_FILE)
    g = service.guidance(run, "")
    assert g["findings"] and not [f for f in g["findings"] if f["rule"] == "repeated_copy"]
    assert not [f for f in g["findings"] if "copied" in f["title"]]


def test_a_copy_of_an_hlo_instruction_is_program_work():
    """The same profile with GPU:0's copies naming an HLO instruction (`hlo_op`): a copy the
    program makes is its work, so GPU:0 ran the program and has a span of its own."""
    from tb_roofline.readers.xspace.xla_gpu_cpu import read_gpu_cpu_xspace

    space = _space(COPY_ONLY)
    (gpu0,) = [p for p in space.planes if p.name == "/device:GPU:0"]
    sid = max(gpu0.stat_metadata) + 1
    gpu0.stat_metadata[sid].id = sid
    gpu0.stat_metadata[sid].name = "hlo_op"
    for line in gpu0.lines:
        for ev in line.events:
            ev.stats.add(metadata_id=sid, str_value="copy.1")
    data = read_gpu_cpu_xspace(space, "h")
    assert sorted(s.core for s in data.core_spans) == [0, 7] and data.device.num_cores == 2
    assert "copy_only_devices" not in {d.code for d in data.diagnostics}
    assert "memcpy" not in set(data.ops["category"])
