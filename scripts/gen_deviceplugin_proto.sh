#!/usr/bin/env bash
# Regenerates the device plugin API's messages (nanokube/node/devicemanager/proto/deviceplugin.proto)
# into deviceplugin_pb2.py beside it. Needs grpcio-tools of the protobuf release pyproject pins
# (7.x); it is a build-time tool only, the generated file is committed.
set -euo pipefail
cd "$(dirname "$0")/../nanokube/node/devicemanager/proto"
PY=${PY:-python3}
"$PY" -m grpc_tools.protoc -I. --python_out=. deviceplugin.proto
