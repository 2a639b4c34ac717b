"""The committed *_pb2.py files describe exactly what the .proto files say."""

from __future__ import annotations

import glob
import importlib
import os
import subprocess
import sys
import tempfile

import pytest
from google.protobuf import descriptor_pb2
from testpaths import TESTS

from tb_roofline.protos import xplane_pb2

REPO = os.path.dirname(TESTS)


def test_generated_code_is_current():
    pytest.importorskip("grpc_tools")
    protos = sorted(glob.glob(os.path.join(REPO, "tb_roofline", "protos", "*.proto")))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"-I{REPO}",
                f"--descriptor_set_out={out}",
                *protos,
            ],
            check=True,
        )
        fresh = descriptor_pb2.FileDescriptorSet.FromString(open(out, "rb").read())
    modules = [
        importlib.import_module("tb_roofline.protos." + os.path.basename(p)[:-6] + "_pb2")
        for p in protos
    ]
    committed = {m.DESCRIPTOR.name: m.DESCRIPTOR.serialized_pb for m in modules}
    assert {f.name for f in fresh.file} == set(committed)
    for f in fresh.file:
        old = descriptor_pb2.FileDescriptorProto.FromString(committed[f.name])
        assert _normalized(f) == _normalized(old), f"{f.name} changed: run tools/gen_protos.sh"


def _normalized(file_proto) -> bytes:
    """Newer protoc versions add json_name to every field; it carries no schema change."""

    def strip(messages):
        for message in messages:
            for field in message.field:
                field.ClearField("json_name")
            strip(message.nested_type)

    strip(file_proto.message_type)
    return file_proto.SerializeToString(deterministic=True)


def test_wire_compatible_with_the_profiler_field_numbers():
    ev = xplane_pb2.XEvent(metadata_id=3, offset_ps=10, duration_ps=20)
    ev.stats.add(metadata_id=1, ref_value=9)
    # Field 1 varint 3; field 2 varint 10; field 3 varint 20; field 4 (stats) {1:1, 7:9}.
    assert ev.SerializeToString() == bytes([0x08, 3, 0x10, 10, 0x18, 20, 0x22, 4, 0x08, 1, 0x38, 9])
