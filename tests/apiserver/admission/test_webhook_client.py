"""The webhook HTTPS client: caBundle trust, service names, timeouts and
Go's error texts; clientConfig validation messages."""

from __future__ import annotations

import socket
import threading

import pytest

from nanokube.apiserver.webhook.client import WebhookClient, WebhookError
from nanokube.apiserver.webhook.validation import validate_client_config
from tests.apiserver.admission.server import TestCA, WebhookServer


@pytest.fixture(scope="module")
def server():
    s = WebhookServer(TestCA(dns_names=("hook.ns1.svc",))).start()
    s.handlers["/echo"] = lambda body: {"got": body}
    yield s
    s.stop()


async def test_url_with_ca_bundle(server):
    client = WebhookClient()
    out = await client.post({"url": server.url("/echo"), "caBundle": server.ca.bundle}, {"x": 1}, 10)
    assert out == {"got": {"x": 1}}
    assert server.calls[-1][1] == "timeout=10s"
    await client.close()


async def test_service_dials_resolved_endpoint_with_service_server_name(server):
    client = WebhookClient(lambda ns, name, port: ("127.0.0.1", server.port))
    cc = {"service": {"namespace": "ns1", "name": "hook", "path": "/echo", "port": 443}, "caBundle": server.ca.bundle}
    assert await client.post(cc, {"y": 2}, 10) == {"got": {"y": 2}}
    await client.close()


async def test_untrusted_certificate(server):
    client = WebhookClient()
    with pytest.raises(WebhookError) as e:
        await client.post({"url": server.url("/echo"), "caBundle": TestCA().bundle}, {}, 10)
    assert str(e.value) == (f'Post "{server.url("/echo")}?timeout=10s": tls: failed to verify certificate: '
                            "x509: certificate signed by unknown authority")
    await client.close()


async def test_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = WebhookClient()
    with pytest.raises(WebhookError) as e:
        await client.post({"url": f"https://127.0.0.1:{port}/x"}, {}, 5)
    assert str(e.value) == f'Post "https://127.0.0.1:{port}/x?timeout=5s": dial tcp 127.0.0.1:{port}: connect: connection refused'
    await client.close()


async def test_timeout(server):
    release = threading.Event()  # the webhook answers only once the client has given up on it
    server.handlers["/slow"] = lambda body: release.wait(60) and {}
    client = WebhookClient()
    try:
        with pytest.raises(WebhookError) as e:
            await client.post({"url": server.url("/slow"), "caBundle": server.ca.bundle}, {}, 0.5)
    finally:
        release.set()
    assert str(e.value) == f'Post "{server.url("/slow")}?timeout=1s": context deadline exceeded'
    await client.close()


def test_client_config_validation():
    assert [str(e) for e in validate_client_config("w.clientConfig", {})] == [
        "w.clientConfig: Required value: exactly one of url or service is required"]
    assert [str(e) for e in validate_client_config("c", {"url": "http://h/p?q=1"})] == [
        'c.url: Invalid value: "http": \'https\' is the only allowed URL scheme; desired format: https://host[/path]',
        'c.url: Invalid value: "q=1": query parameters are not permitted in the URL']
    assert [str(e) for e in validate_client_config("c", {"service": {"name": "s", "namespace": "n", "path": "x//"}})] == [
        'c.service.path: Invalid value: "x//": must start with a \'/\'',
        'c.service.path: Invalid value: "x//": segment[0] may not be empty',
        'c.service.path: Invalid value: "x//": segment[1] may not be empty']
