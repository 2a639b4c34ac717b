#!/usr/bin/env bash
# Regenerate tb_roofline/protos/*_pb2.py from the project's own .proto files.
# We generate with protoc 25.x (grpcio-tools 1.62.3) so that the committed code runs on every
# protobuf runtime from 4.21 to 7.x (newer protoc emits a runtime-version check that would force
# users onto the newest protobuf). tests/protos/test_protos.py checks the committed code is current.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TMPDIR:-/tmp}/tb_roofline_protoc_venv"
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q "grpcio-tools==1.62.3"; }
"$venv/bin/python" -m grpc_tools.protoc -I. --python_out=. tb_roofline/protos/*.proto
echo "regenerated: $(ls tb_roofline/protos/*_pb2.py)"
