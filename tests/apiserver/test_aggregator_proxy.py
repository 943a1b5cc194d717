"""`Expect: 100-continue` through the aggregation layer's proxy, as kube-apiserver's (httputil.ReverseProxy over
a Go transport whose ExpectContinueTimeout is 0) handles it: the client's Expect goes to the extension server,
the 100 Continue goes to the client when the proxy starts copying the body, the body follows the head at once
(an extension server that sends no 100 Continue still gets it), and a request without a body gets no 100
Continue at all (net/http waits only for a body whose length is not 0). Over raw TLS connections, as curl
sends such requests, to a served server and an extension server of this test."""

from __future__ import annotations

import socket
import ssl
import tempfile
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web

from nanokube.pki.ca import issue, new_ca
from tests.apiserver.test_expect import Conn, served
from tests.controllers import tries

GROUP, VERSION = "wardle.example.com", "v1alpha1"
FLUNDERS = f"/apis/{GROUP}/{VERSION}/namespaces/default/flunders".encode()


def host_ip() -> str:
    """A non-loopback address of this host (EndpointSlices refuse loopback ones)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
        except OSError:
            pytest.skip("no non-loopback IPv4 address for the extension server")
        return s.getsockname()[0]


async def extension_server() -> tuple[web.AppRunner, str, int]:
    """HTTPS serving the wardle group's discovery and echoing, for flunders, the Expect header and the body
    length it got; it never answers 100 Continue itself (its expect handler does nothing)."""
    ca = new_ca("wardle-ca")
    serving = issue(ca, "api.wardle.svc", dns_names=("api.wardle.svc",), server=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "tls.crt").write_bytes(serving.cert_pem)
        (Path(tmp) / "tls.key").write_bytes(serving.key_pem)
        ctx.load_cert_chain(Path(tmp) / "tls.crt", Path(tmp) / "tls.key")

    async def resources(_):
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{VERSION}",
                                  "resources": [{"name": "flunders", "singularName": "flunder", "namespaced": True,
                                                 "kind": "Flunder", "verbs": ["get", "list", "create"]}]})

    async def echo(request: web.Request):
        body = await request.read()
        return web.json_response({"expect": request.headers.get("Expect"), "length": len(body)},
                                 status=201 if request.method == "POST" else 200)

    async def no_continue(_):
        return None

    app = web.Application()
    app.router.add_get(f"/apis/{GROUP}/{VERSION}", resources)
    app.router.add_route("*", FLUNDERS.decode(), echo, expect_handler=no_continue)
    runner = web.AppRunner(app)
    await runner.setup()
    ip = host_ip()
    site = web.TCPSite(runner, ip, 0, ssl_context=ctx)
    await site.start()
    return runner, ip, site._server.sockets[0].getsockname()[1]


async def answer(c: Conn) -> tuple[int, bytes]:
    """One response's status and body, which the proxy relays chunked."""
    code, headers, body = await c.answer()
    if headers.get("transfer-encoding") != "chunked":
        return code, body
    while size := int((await c.reader.readline()).strip(), 16):
        body += await c.reader.readexactly(size)
        await c.reader.readline()
    await c.reader.readline()
    return code, body


async def test_expect_100_continue_through_an_apiservice(tmp_path):
    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server()
        try:
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                for path, obj in [
                    ("/api/v1/namespaces/default/services", {"metadata": {"name": "api"}, "spec": {
                        "ports": [{"port": 443, "targetPort": port}]}}),
                    ("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
                        "metadata": {"name": "api-1", "labels": {"kubernetes.io/service-name": "api"}},
                        "addressType": "IPv4", "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
                        "ports": [{"name": "", "port": port, "protocol": "TCP"}]}),
                    ("/apis/apiregistration.k8s.io/v1/apiservices", {"metadata": {"name": f"{VERSION}.{GROUP}"}, "spec": {
                        "group": GROUP, "version": VERSION, "groupPriorityMinimum": 1000, "versionPriority": 15,
                        "service": {"namespace": "default", "name": "api"}, "insecureSkipTLSVerify": True}}),
                ]:
                    async with s.post(base + path, json=obj, ssl=ctx) as r:
                        assert r.status == 201, await r.text()
                for _ in tries():
                    async with s.get(f"{base}/apis/apiregistration.k8s.io/v1/apiservices/{VERSION}.{GROUP}",
                                     ssl=ctx) as r:
                        conds = (await r.json()).get("status", {}).get("conditions") or []
                    if any(c["type"] == "Available" and c["status"] == "True" for c in conds):
                        break
                else:
                    raise AssertionError(f"the APIService never became Available: {conds}")

            c = await Conn.open(server, ctx)
            try:
                body = orjson.dumps({"apiVersion": f"{GROUP}/{VERSION}", "kind": "Flunder", "spec": "x" * 100_000})
                await c.head(body, "Content-Type: application/json", path=FLUNDERS)
                code, _ = await answer(c)
                assert code == 100
                c.writer.write(body)
                code, out = await answer(c)
                assert (code, orjson.loads(out)) == (201, {"expect": "100-continue", "length": len(body)})

                c.writer.write(b"GET " + FLUNDERS + b" HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n\r\n")
                code, out = await answer(c)  # no body to wait for: the answer itself, no 100 Continue first
                assert (code, orjson.loads(out)) == (200, {"expect": "100-continue", "length": 0})
            finally:
                c.close()
        finally:
            await runner.cleanup()
