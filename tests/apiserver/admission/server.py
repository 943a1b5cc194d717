"""A webhook server for tests: HTTPS with a CA of the test's own, serving
handlers in a thread of its own so sync (e2e) and async tests can use it."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import ssl
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class TestCA:
    """A CA and one serving certificate for 127.0.0.1 and the given DNS names."""

    __test__ = False

    def __init__(self, dns_names: tuple[str, ...] = ("localhost",)) -> None:
        now = datetime.datetime.now(datetime.timezone.utc)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = (x509.CertificateBuilder().subject_name(_name("test-webhook-ca")).issuer_name(_name("test-webhook-ca"))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.server_key = ec.generate_private_key(ec.SECP256R1())
        sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] + [x509.DNSName(n) for n in dns_names]
        self.server_cert = (x509.CertificateBuilder().subject_name(_name("webhook")).issuer_name(self.cert.subject)
                            .public_key(self.server_key.public_key()).serial_number(x509.random_serial_number())
                            .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
                            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                            .sign(self.key, hashes.SHA256()))

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def bundle(self) -> str:
        """The caBundle field's value."""
        return base64.b64encode(self.pem).decode()

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as d:
            cert, key = Path(d, "tls.crt"), Path(d, "tls.key")
            cert.write_bytes(self.server_cert.public_bytes(serialization.Encoding.PEM))
            key.write_bytes(self.server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
            ctx.load_cert_chain(str(cert), str(key))
        return ctx


Handler = Callable[[dict], dict]


class WebhookServer:
    """Serves `handlers[path](body) -> answer` over TLS on `host`; keeps the
    bodies it received (with the query) in `calls`."""

    def __init__(self, ca: TestCA | None = None, host: str = "127.0.0.1") -> None:
        self.ca = ca or TestCA()
        self.host = host
        self.handlers: dict[str, Handler] = {}
        self.calls: list[tuple[str, str, dict]] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def calls_to(self, path: str) -> list[dict]:
        return [b for p, _, b in self.calls if p == path]

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append((request.path, request.query_string, body))
        handler = self.handlers.get(request.path)
        if handler is None:
            return web.Response(status=404)
        out = await asyncio.get_running_loop().run_in_executor(None, handler, body)
        return web.json_response(out)

    def start(self) -> WebhookServer:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            app = web.Application()
            app.router.add_post("/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self.host, 0, ssl_context=self.ca.server_context())
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None


def primary_ip() -> str | None:
    """This machine's address on its default route (EndpointSlices refuse loopback)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
        except OSError:
            return None
        ip = s.getsockname()[0]
    return None if ip.startswith("127.") else ip


def allow(review: dict, **response) -> dict:
    """An AdmissionReview v1 answer to `review` that allows it (plus `response`)."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True, **response}}


def deny(review: dict, message: str, code: int = 403, **response) -> dict:
    return allow(review, allowed=False, status={"code": code, "message": message}, **response)


def json_patch(review: dict, ops: list[dict], **response) -> dict:
    import json

    return allow(review, patchType="JSONPatch", patch=base64.b64encode(json.dumps(ops).encode()).decode(), **response)
