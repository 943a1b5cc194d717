"""A KMS v2 plugin for the tests: the gRPC KeyManagementService on a unix socket, its key encryption
keys AES-GCM keys held in memory by key ID. `rotate` makes a new key current (Status reports its ID,
Encrypt uses it; Decrypt still reads the old ones); `healthy = False` makes Status say so; `answering`
cleared holds every answer until it is set again (a hung plugin); `annotations` go with each ciphertext.

Run as a script (`python tests/apiserver/kms_plugin.py SOCKET [KEY_ID]`) it serves until killed."""

from __future__ import annotations

import collections
import os
import sys
import threading
from concurrent import futures

import grpc
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from nanokube.apiserver.encryption.kmsv2 import SERVICE
from nanokube.apiserver.encryption.proto import kmsv2_pb2 as pb

#: the annotation Encrypt returns beside each ciphertext (a fully qualified name, as the API server checks)
ANNOTATION = "version.kms.example.io"


class Plugin:
    def __init__(self, socket_path: str, key_id: str = "key-1") -> None:
        self.socket_path = socket_path
        self.keys = {key_id: AESGCM(os.urandom(32))}
        self.key_id = key_id
        self.healthy = True
        self.annotations = {ANNOTATION: b"1"}
        self.answering = threading.Event()
        self.answering.set()
        #: calls by method name
        self.calls: collections.Counter[str] = collections.Counter()
        self._server: grpc.Server | None = None

    def rotate(self, key_id: str) -> None:
        self.keys[key_id] = AESGCM(os.urandom(32))
        self.key_id = key_id

    def _status(self, request, context):
        self.answering.wait()
        self.calls["Status"] += 1
        return pb.StatusResponse(version="v2", healthz="ok" if self.healthy else "unhealthy", key_id=self.key_id)

    def _encrypt(self, request, context):
        self.answering.wait()
        self.calls["Encrypt"] += 1
        nonce = os.urandom(12)
        return pb.EncryptResponse(ciphertext=nonce + self.keys[self.key_id].encrypt(nonce, request.plaintext, None),
                                  key_id=self.key_id, annotations=self.annotations)

    def _decrypt(self, request, context):
        self.answering.wait()
        self.calls["Decrypt"] += 1
        key = self.keys.get(request.key_id)
        if key is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no key {request.key_id}")
        return pb.DecryptResponse(plaintext=key.decrypt(request.ciphertext[:12], request.ciphertext[12:], None))

    def start(self) -> None:
        methods = {"Status": (self._status, pb.StatusRequest, pb.StatusResponse),
                   "Encrypt": (self._encrypt, pb.EncryptRequest, pb.EncryptResponse),
                   "Decrypt": (self._decrypt, pb.DecryptRequest, pb.DecryptResponse)}
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            name: grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req.FromString,
                                                      response_serializer=resp.SerializeToString)
            for name, (fn, req, resp) in methods.items()})
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self._server.add_generic_rpc_handlers((handler,))
        self._server.add_insecure_port("unix://" + self.socket_path)
        self._server.start()

    def stop(self) -> None:
        self.answering.set()
        if self._server is not None:
            self._server.stop(None).wait()
            self._server = None


if __name__ == "__main__":
    plugin = Plugin(sys.argv[1], *sys.argv[2:3])
    plugin.start()
    print("serving", flush=True)
    plugin._server.wait_for_termination()
