"""Seeded damaged profiles for the fuzz tests (test_fuzz_service.py, test_fuzz_tensorboard.py).

XSpace: byte flips, truncation, huge and overlong varints, and semantic edits of a parsed file:
event durations, offsets and occurrences, stat values of every kind, renamed stats, planes and
lines, dropped metadata, and HLO programs (missing operands, huge or out-of-range dimensions,
self-calls, swapped opcodes, junk configs, empty or garbage protos). Kineto: the field
mutations of test_kineto_fuzz.py, plus long integers, negative durations, odd device
properties, deep nesting, braces inside strings, whitespace and gzip bombs.

Every case is `(name, suffix, bytes)`, the same for the same seed.
"""

from __future__ import annotations

import copy
import glob
import gzip
import json
import os
import random

from tb_roofline.protos import hlo_pb2, xplane_pb2

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XPLANE, KINETO, KINETO_GZ = ".xplane.pb", ".pt.trace.json", ".pt.trace.json.gz"

EXTREME_INTS = [-1, -(2**63), 2**63 - 1, 2**62, 2**40, 0, 7]
STAT_NAMES = [
    "group_id",
    "step_num",
    "memory_access_breakdown",
    "flops",
    "bytes_accessed",
    "model_flops",
    "Hlo Proto",
    "program_id",
    "hlo_op",
    "hlo_module",
    "device_offset_ps",
    "device_duration_ps",
    "dma_stall_duration_ps",
    "hlo_category",
    "peak_teraflops_per_second",
    "peak_hbm_bw_gigabytes_per_second",
    "clock_rate",
    "core_count",
    "compute_cap_major",
    "compute_cap_minor",
    "num_occurrences",
]
PLANE_NAMES = [
    "/device:TPU:0",
    "/device:GPU:0",
    "/host:CPU",
    "/host:metadata",
    "/device:TPU:0 SparseCore 0",
    "/device:TPU:99999999999999999999",
]
LINE_NAMES = ["XLA Ops", "Steps", "XLA Modules", "Stream #1(Compute)", "python"]
OPCODES = [
    "dot",
    "convolution",
    "fft",
    "sort",
    "reduce",
    "reduce-window",
    "scatter",
    "gather",
    "select-and-scatter",
    "triangular-solve",
    "cholesky",
    "dynamic-update-slice",
    "dynamic-slice",
    "fusion",
    "while",
    "call",
    "conditional",
    "custom-call",
    "map",
    "transpose",
    "all-reduce",
    "ragged-dot",
    "scaled-dot",
    "tuple",
    "outfeed",
    "scan",
]


# ------------------------------------------------------------------------------------------
# Bases


def xspace_bases() -> dict:
    """name -> serialized XSpace: a synthetic TPU profile, a synthetic XLA GPU profile with
    an HLO program, and a real JAX CPU profile (convolutions, scatter, reduce-window, ...)."""
    from test_xla_gpu_cpu_reader import _gpu_space

    from tb_roofline.synthetic import SynthConfig, make_tpu_xspace

    cpu = glob.glob(
        os.path.join(
            REPO, "testdata", "jax_cpu", "convnet", "plugins", "profile", "*", "*.xplane.pb"
        )
    )[0]
    return {
        "tpu": make_tpu_xspace(
            SynthConfig(seed=3, num_cores=2, num_steps=2, ops_per_step=30)
        ).SerializeToString(),
        "gpu": _gpu_space().SerializeToString(),
        "cpu": open(cpu, "rb").read(),
    }


# ------------------------------------------------------------------------------------------
# XSpace damage


def _flip(rng, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice([1, 3, 10])):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def _truncate(rng, data: bytes) -> bytes:
    return data[: rng.randrange(1, len(data))]


def _huge_varint(rng, data: bytes) -> bytes:
    """A byte replaced by the largest 64-bit varint, or an overlong (11-byte) varint inserted."""
    i = rng.randrange(1, len(data))
    varint = b"\xff" * 9 + b"\x01" if rng.random() < 0.5 else b"\x80" * 10 + b"\x01"
    return data[:i] + varint + data[i + (1 if rng.random() < 0.5 else 0) :]


def _stats_holders(space):
    """(plane, holder) for every plane, event metadata and event (a sample of events)."""
    out = []
    for plane in space.planes:
        out.append((plane, plane))
        out.extend((plane, md) for md in plane.event_metadata.values())
        for line in plane.lines:
            out.extend((plane, ev) for ev in list(line.events)[:50])
    return out


def _odd_stat_value(rng, stat, plane):
    kind = rng.randrange(9)
    if kind == 0:
        stat.ClearField("value")
    elif kind == 1:
        stat.double_value = rng.choice(
            [float("nan"), float("inf"), -float("inf"), -1e308, 2.5, -3.0, 1e30]
        )
    elif kind == 2:
        stat.str_value = rng.choice(["", "abc", "9" * 5000, "-1", "1e999"])
    elif kind == 3:
        stat.bytes_value = rng.choice([b"", b"\xff" * 20, b"\x0a\xff\xff\xff\xff\x0f", b"x" * 3])
    elif kind == 4:
        stat.int64_value = rng.choice(EXTREME_INTS)
    elif kind == 5:
        stat.uint64_value = rng.choice([2**64 - 1, 2**63, 0, 1])
    elif kind == 6:
        stat.ref_value = rng.choice([0, 999999, max(plane.stat_metadata, default=0)])
    elif kind == 7:
        stat.metadata_id = rng.choice([0, 999999])
    else:
        sid = max(plane.stat_metadata, default=0) + 1  # a new name on an existing value
        plane.stat_metadata[sid].id = sid
        plane.stat_metadata[sid].name = rng.choice(STAT_NAMES)
        stat.metadata_id = sid


def _edit_events(rng, space):
    lines = [line for plane in space.planes for line in plane.lines if len(line.events)]
    if not lines:
        return
    line = rng.choice(lines)
    for _ in range(rng.choice([1, 2, 5])):
        ev = rng.choice(line.events)
        field = rng.choice(
            ["duration_ps", "offset_ps", "num_occurrences", "metadata_id", "timestamp_ns"]
        )
        if field == "timestamp_ns":
            line.timestamp_ns = rng.choice(EXTREME_INTS)
        else:
            setattr(ev, field, rng.choice(EXTREME_INTS))


def _edit_stats(rng, space):
    holders = _stats_holders(space)
    for _ in range(rng.choice([1, 2, 4])):
        plane, holder = rng.choice(holders)
        if len(holder.stats) and rng.random() < 0.7:
            _odd_stat_value(rng, rng.choice(holder.stats), plane)
        else:
            sid = max(plane.stat_metadata, default=0) + 1
            plane.stat_metadata[sid].id = sid
            plane.stat_metadata[sid].name = rng.choice(STAT_NAMES)
            _odd_stat_value(rng, holder.stats.add(metadata_id=sid), plane)


def _edit_names(rng, space):
    plane = rng.choice(space.planes)
    if rng.random() < 0.5 or not len(plane.lines):
        plane.name = rng.choice(PLANE_NAMES)
    else:
        rng.choice(plane.lines).name = rng.choice(LINE_NAMES)
    if rng.random() < 0.3 and plane.event_metadata:
        for key in rng.sample(
            sorted(plane.event_metadata), k=max(1, len(plane.event_metadata) // 3)
        ):
            del plane.event_metadata[key]


def _hlo_stats(space):
    out = []
    for plane in space.planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for md in plane.event_metadata.values():
            out.extend(st for st in md.stats if names.get(st.metadata_id) == "Hlo Proto")
    return out


def _edit_instruction(rng, module, ins):
    comps = list(module.computations)
    what = rng.randrange(12)
    if what == 0:
        del ins.operand_ids[rng.randrange(len(ins.operand_ids) + 1) :]
    elif what == 1:
        ins.opcode = rng.choice(OPCODES)
    elif what == 2:
        del ins.shape.dimensions[:]
        ins.shape.dimensions.extend(rng.choice([[2**40], [2**40, 2**40], [-5], [0], []]))
    elif what == 3:
        dn = ins.dot_dimension_numbers
        dn.lhs_contracting_dimensions.append(rng.choice([9, -9, 2**40]))
        ins.convolution_dimension_numbers.input_feature_dimension = rng.choice([9, -9, 2**40])
    elif what == 4:
        w = ins.window.dimensions.add()
        w.size, w.stride = rng.choice([(2**40, 3), (5, -1), (0, 0), (3, 2**40)])
        w.base_dilation = rng.choice([0, 2, 2**40])
        w.padding_low = rng.choice([0, -7, 2**40])
    elif what == 5:
        ins.called_computation_ids.append(rng.choice(comps).id)  # maybe its own
    elif what == 6:
        ins.backend_config = rng.choice(
            [
                b'{"known_trip_count":{"n":"' + b"9" * 5000 + b'"}}',
                b'{"known_trip_count":{"n":"99999999999999999999"}}',
                b'{"gemm_backend_config": []}',
                b"\xff\xfe junk",
                b'{"dot_dimension_numbers": {"lhs_contracting_dimensions": ["x"]}}',
                b"cost_estimate_json flops: 1" + b"0" * 400,
            ]
        )
        ins.custom_call_target = rng.choice(["__cublas$gemm", "__cudnn$convForward", "x", ""])
    elif what == 7:
        ins.operand_ids.append(rng.choice([ins.id, 999999, -1]))
    elif what == 8:
        ins.shape.element_type = rng.choice([13, 99, 0, 17, 14])
        if ins.shape.element_type == 13:
            t = ins.shape
            for _ in range(30):  # deep tuples
                t = t.tuple_shapes.add(element_type=13)
    elif what == 9:
        del ins.fft_length[:]
        ins.fft_length.extend([0, -4, 2**62])
    elif what == 10:
        ins.feature_group_count = rng.choice([0, -1, 2**40])
        ins.batch_group_count = rng.choice([0, -1, 2**40])
    else:
        ins.ClearField("shape")


def _edit_hlo(rng, space):
    stats = _hlo_stats(space)
    if not stats:
        return
    stat = rng.choice(stats)
    if rng.random() < 0.15:
        stat.bytes_value = rng.choice(
            [
                b"",
                b"\x0a\x03abc",
                bytes(rng.randrange(256) for _ in range(64)),
                stat.bytes_value[: len(stat.bytes_value) // 2],
            ]
        )
        return
    try:
        proto = hlo_pb2.HloProto.FromString(stat.bytes_value)
    except Exception:  # damaged by an earlier edit of this case
        return
    module = proto.hlo_module
    if rng.random() < 0.1:
        module.entry_computation_id = rng.choice([0, -1, 999999])
        module.entry_computation_name = ""
        if module.computations:
            rng.choice(module.computations).root_id = 424242
    interesting = [
        (c, i)
        for c in module.computations
        for i in c.instructions
        if i.opcode not in ("parameter", "constant", "get-tuple-element")
    ]
    for _ in range(rng.choice([1, 2, 4])):
        if interesting:
            _, ins = rng.choice(interesting)
            _edit_instruction(rng, module, ins)
    stat.bytes_value = proto.SerializeToString()


SEMANTIC = [_edit_events, _edit_stats, _edit_names, _edit_hlo]


def damaged_xspace(seed: int, base: str, data: bytes) -> bytes:
    rng = random.Random(f"xspace/{base}/{seed}")
    kind = rng.random()
    if kind < 0.2:
        return _flip(rng, data)
    if kind < 0.3:
        return _truncate(rng, data)
    if kind < 0.38:
        return _huge_varint(rng, data)
    space = xplane_pb2.XSpace.FromString(data)
    edits = [e for e in SEMANTIC if e is not _edit_hlo or base != "tpu"]
    weights = [3 if e is _edit_hlo else 2 for e in edits]
    for _ in range(rng.choice([1, 1, 2])):
        rng.choices(edits, weights)[0](rng, space)
    out = space.SerializeToString()
    return _truncate(rng, out) if rng.random() < 0.05 else out


# ------------------------------------------------------------------------------------------
# Kineto damage


def _member(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def kineto_bomb(kind: str, mib: int) -> bytes:
    """A gzip (members concatenated) that inflates to `mib` MiB: tiny events, whitespace,
    events whose strings hold '},' (the fast batch path's worst case), or matrix products of
    equal spans (a chain of nested contraction calls, as deep as it is long, whose
    precisions alternate)."""
    fill = {
        "events": b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":1},',
        "braces": b'{"ph":"X","cat":"cpu_op","name":"a},},},},","ts":1,"dur":1,"pid":1,"tid":1},',
        "whitespace": b" " * 4096,
        "matmuls": b'{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":1,"pid":1,"tid":1,'
        b'"args":{"Input Dims":[[8,8],[8,8]],"Input type":["float","float"]}},'
        b'{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1,"dur":1,"pid":1,"tid":1,'
        b'"args":{"Input Dims":[[8,8],[8,8]],"Input type":["c10::BFloat16","c10::BFloat16"]}},',
    }[kind]
    block = _member(fill * ((1 << 20) // len(fill)))
    return _member(b'{"traceEvents": [') + block * mib + _member(b"1]}")


def damaged_kineto(seed: int, docs: dict, mutate_doc) -> tuple[str, bytes]:
    """(suffix, bytes): test_kineto_fuzz's field mutations or one of the semantic damages."""
    rng = random.Random(f"kineto/{seed}")
    name = rng.choice(sorted(docs))
    doc = docs[name]
    kind = rng.randrange(10)
    if kind <= 3:
        return KINETO, json.dumps(mutate_doc(doc, rng)).encode()
    doc = copy.deepcopy(doc)
    events = doc["traceEvents"]
    if kind == 4:  # negative, huge and zero durations
        for ev in rng.sample(events, k=min(len(events), rng.choice([1, 10, 50]))):
            if isinstance(ev, dict):
                ev["dur"] = rng.choice([-1, -1e11, 0, 1e11, -0.5])
        return KINETO, json.dumps(doc).encode()
    if kind == 5:  # odd device properties
        props = doc.get("deviceProperties") or [{}]
        prop = dict(rng.choice(props)) if isinstance(props, list) and props else {}
        for key in ("computeMajor", "computeMinor", "numSms", "totalGlobalMem", "name", "id"):
            if rng.random() < 0.5:
                prop[key] = rng.choice(
                    [None, "x", -1, 2**70, 1e308, float("nan"), [1], {"a": 1}, True, 0]
                )
        doc["deviceProperties"] = [prop]
        return KINETO, json.dumps(doc).encode()
    text = json.dumps(doc).encode()
    if kind == 6:  # an integer of thousands of digits where a number is
        i = text.find(b'"ts": ', rng.randrange(len(text)))
        i = i if i >= 0 else text.find(b'"ts": ')
        return KINETO, text[: i + 6] + b"9" * rng.choice([4301, 20000]) + text[i + 6 :]
    if kind == 7:  # deep nesting inside an event's args
        depth = rng.choice([5000, 200000])
        nested = b"[" * depth + b"1" + b"]" * depth
        i = text.find(b'"traceEvents": [') + len(b'"traceEvents": [')
        return KINETO, text[
            :i
        ] + b'{"ph":"X","cat":"cpu_op","args":{"Input Dims":' + nested + b"}}," + text[i:]
    if kind == 8:  # whitespace between every token (a pretty-printed, padded trace)
        return KINETO, text.replace(b", ", b"," + b" " * rng.choice([1000, 100000]), 200)
    return KINETO_GZ, kineto_bomb(
        rng.choice(["events", "braces", "whitespace"]), rng.choice([2, 32])
    )


# ------------------------------------------------------------------------------------------
# Numbers in the user's JSON files (roofline_device.json, roofline_workload.json)

ODD_NUMBERS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1E309",
    "1e-400",
    "-0",
    "0",
    "-1",
    "0.0",
    "5e-324",
    "1.7976931348623157e308",
    "2e12",
    "1e30",
    "1e31",
]


def _odd_number(rng) -> str:
    """JSON number text no field (or some fields) can hold: NaN / Infinity spellings, floats
    beyond the float range, integers of tens to thousands of digits, zero and negatives."""
    if rng.random() < 0.5:
        return rng.choice(ODD_NUMBERS)
    digits = rng.choice([19, 29, 30, 31, 40, 309, 400, 4300, 4301, 20000])
    return (
        rng.choice(["", "-"])
        + str(rng.randrange(1, 10))
        + "".join(rng.choice("0123456789") for _ in range(digits - 1))
    )


def _number_slots(value, path=()):
    """Paths of every number in a parsed JSON document (bools excluded)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _number_slots(v, path + (k,))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _number_slots(v, path + (i,))]
    return []


def damaged_user_json(seed: int, doc: dict, kind: str) -> str:
    """The text of `doc` (a valid device or workload file) with one to three of its numbers
    replaced by odd number text (the same for the same seed)."""
    rng = random.Random(f"user-json/{kind}/{seed}")
    doc = copy.deepcopy(doc)
    slots = _number_slots(doc)
    marks = {}
    for i, path in enumerate(rng.sample(slots, k=min(len(slots), rng.choice([1, 1, 2, 3])))):
        holder = doc
        for step in path[:-1]:
            holder = holder[step]
        marks[f"@@{i}@@"] = _odd_number(rng)
        holder[path[-1]] = f"@@{i}@@"
    text = json.dumps(doc)
    for mark, number in marks.items():
        text = text.replace(f'"{mark}"', number)
    return text
