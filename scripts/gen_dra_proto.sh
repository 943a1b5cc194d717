#!/usr/bin/env bash
# Regenerates the protobuf messages of the kubelet's plugin APIs (nanokube/node/dra/proto/*.proto)
# into *_pb2.py beside them. Needs grpcio-tools of the protobuf release pyproject pins (7.x:
# grpcio-tools 1.85.x); it is a build-time tool only, the generated files are committed.
set -euo pipefail
cd "$(dirname "$0")/../nanokube/node/dra/proto"
PY=${PY:-python3}
"$PY" -m grpc_tools.protoc -I. --python_out=. pluginregistration.proto dra.proto dra_health.proto
