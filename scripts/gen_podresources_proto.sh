#!/usr/bin/env bash
# Regenerates the protobuf messages of the kubelet's pod resources API
# (nanokube/node/podresources/proto/podresources.proto) into podresources_pb2.py beside it.
# Like gen_dra_proto.sh: grpcio-tools of the protobuf release pyproject pins (7.x: grpcio-tools
# 1.85.x), a build-time tool only; the generated file is committed.
set -euo pipefail
cd "$(dirname "$0")/../nanokube/node/podresources/proto"
PY=${PY:-python3}
"$PY" -m grpc_tools.protoc -I. --python_out=. podresources.proto
