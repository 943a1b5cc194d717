"""pods/proxy, services/proxy and nodes/proxy at the API server, over HTTP:
kube-apiserver's name forms and errors, what the reverse proxy forwards and
strips both ways, links and redirects rewritten under the proxy path, and a
backend that refuses as a 503. A real HTTP server stands behind the node
agent stand-in's port-forward, as a pod's listener would."""

import asyncio
import gzip
import json
import socket
import ssl

import aiohttp
import pytest
from aiohttp import web

from nanokube.apiserver.app import APIServer
from nanokube.machinery.streaming import StreamFailed
from nanokube.pki.ca import issue, new_ca
from nanokube.store.memory import MemoryStore

PAGE = ('<html><head><link rel="stylesheet" href="/static/app.css"></head><body>'
        '<a href="/next?x=1">next</a> <a href="relative">r</a> <a href="http://other.example/x">o</a>'
        "<img src='/img.png'><p data-src=\"/not-a-url-attribute\">/text</p></body></html>")


async def backend_app(request: web.Request) -> web.StreamResponse:
    """What the pod's server saw, or a page, a redirect, CORS headers, a chunked answer."""
    if request.path == "/page":
        return web.Response(text=PAGE, content_type="text/html")
    if request.path == "/gzpage":
        return web.Response(body=gzip.compress(PAGE.encode()), content_type="text/html",
                            headers={"Content-Encoding": "gzip"})
    if request.path == "/moved-absolute":  # to itself, as the pod's address
        return web.Response(status=302, headers={"Location": "http://10.244.0.5:8080/abs?x=1"})
    if request.path == "/moved-away":
        return web.Response(status=302, headers={"Location": "http://example.com/abs"})
    if request.path == "/moved":
        return web.Response(status=302, headers={"Location": "/login?next=%2F"})
    if request.path == "/cached":
        return web.Response(text="ok", headers={"Cache-Control": "max-age=60"})
    if request.path == "/cors":
        return web.Response(text="ok", headers={"Access-Control-Allow-Origin": "*", "X-Backend": "yes"})
    if request.path == "/stream":
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(3):
            await resp.write(f"part {i}\n".encode())
        await resp.write_eof()
        return resp
    if request.path == "/ws":
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            await ws.send_str(f"echo {msg.data} {request.query_string or 'no query'}")
        return ws
    if request.path == "/ws-refused":  # a refusal such as a kubelet's of an exec it will not run
        return web.Response(status=403, text="no", headers={"Cache-Control": "max-age=5", "X-Backend": "yes",
                                                            "Access-Control-Allow-Origin": "*"})
    if request.path == "/ws-deaf":  # upgrades, then reads nothing until the test lets it end
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        DEAF.append(asyncio.Event())
        await DEAF[-1].wait()
        return ws
    body = await request.read()
    return web.json_response({"method": request.method, "path": request.path, "query": request.rel_url.raw_query_string,
                              "headers": dict(request.headers), "body": body.decode()},
                             headers={"Connection": "close, X-Hop", "X-Hop": "dropped"})


#: what the /ws-deaf handlers wait for
DEAF: list[asyncio.Event] = []


class FakeNode:
    """A node agent whose pods serve the HTTP server above on 8080, and over TLS on 8443."""

    def __init__(self, ports: dict[int, int]):
        self.ports = ports
        self.forwarded = []

    async def port_forward(self, namespace, pod, uid, port):
        self.forwarded.append((namespace, pod, port))
        if port not in self.ports:
            raise StreamFailed(f"dial tcp4 127.0.0.1:{port}: connect: connection refused")
        return await asyncio.open_connection("127.0.0.1", self.ports[port])


@pytest.fixture
async def env(tmp_path):
    runner = web.AppRunner(web.Application(middlewares=[]), access_log=None)
    runner.app.router.add_route("*", "/{tail:.*}", backend_app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    pair = issue(new_ca(), "web", ips=("10.244.0.5",), server=True)  # signed by a CA the proxy does not know
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    tls_site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await tls_site.start()
    node = FakeNode({8080: site._server.sockets[0].getsockname()[1],
                     8443: tls_site._server.sockets[0].getsockname()[1]})
    s = APIServer(MemoryStore(), None, port=0)
    await s.start()
    s.handlers.streams.node_servers.append(lambda name: node if name == "n1" else None)
    async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{s.port}") as http:
        async def send(method, path, body=None, ctype="application/json", headers=None):
            data = json.dumps(body) if body is not None else None
            async with http.request(method, path, data=data, headers={"Content-Type": ctype, **(headers or {})},
                                    allow_redirects=False) as r:
                return r.status, r.headers, await r.read()
        send.server = s
        code, _, out = await send("POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "default"}})
        assert code == 201, out
        for name, ip, ports in (("web", "10.244.0.5", [{"containerPort": 8080}]), ("bare", "10.244.0.6", []),
                                ("noip", "", [{"containerPort": 8080}])):
            code, _, out = await send("POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": name}, "spec": {
                "nodeName": "n1", "containers": [{"name": "c", "image": "x", "ports": ports}]}})
            assert code == 201, out
            if ip:
                code, _, out = await send("PATCH", f"/api/v1/namespaces/default/pods/{name}/status",
                                          {"status": {"podIP": ip, "podIPs": [{"ip": ip}]}},
                                          "application/merge-patch+json")
                assert code == 200, out
        yield send, node
    await s.stop()
    await runner.cleanup()


async def test_pod_proxy_forwards_method_path_query_and_body(env):
    send, node = env
    code, headers, out = await send("POST", "/api/v1/namespaces/default/pods/web/proxy/api/echo?x=1&y=a%26b",
                                    {"a": 1}, headers={"Authorization": "Bearer secret", "X-Custom": "kept"})
    assert code == 200, out
    seen = json.loads(out)
    assert (seen["method"], seen["path"], seen["query"], seen["body"]) == ("POST", "/api/echo", "x=1&y=a%26b", '{"a": 1}')
    assert seen["headers"]["X-Custom"] == "kept" and "Authorization" not in seen["headers"]
    assert seen["headers"]["X-Forwarded-Uri"] == "/api/v1/namespaces/default/pods/web/proxy/api/echo"
    assert seen["headers"]["X-Forwarded-For"] == "127.0.0.1"
    assert "X-Hop" not in headers, "a header the backend's Connection names is hop-by-hop"
    assert node.forwarded[-1] == ("default", "web", 8080), "the first declared container port"


async def test_a_pod_or_path_named_proxy_is_not_the_subresource(env):
    send, _ = env
    code, _, out = await send("POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "proxy"}, "spec": {
        "nodeName": "n1", "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 8080}]}]}})
    assert code == 201, out
    code, _, out = await send("PATCH", "/api/v1/namespaces/default/pods/proxy/status",
                              {"status": {"podIPs": [{"ip": "10.244.0.7"}]}}, "application/merge-patch+json")
    assert code == 200, out
    code, _, out = await send("GET", "/api/v1/namespaces/default/pods/proxy/proxy/x")
    assert code == 200 and json.loads(out)["path"] == "/x"
    code, _, out = await send("GET", "/api/v1/namespaces/default/pods/web/proxy/proxy/a/proxy")
    assert code == 200 and json.loads(out)["path"] == "/proxy/a/proxy"


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_every_connect_method_reaches_the_pod(env, method):
    send, _ = env
    code, _, out = await send(method, "/api/v1/namespaces/default/pods/http:web:8080/proxy/x/")
    assert code == 200 and json.loads(out)["method"] == method and json.loads(out)["path"] == "/x/"


async def test_https_reaches_a_tls_server_without_verifying_it(env):
    send, _ = env
    code, _, out = await send("GET", "/api/v1/namespaces/default/pods/https:web:8443/proxy/secure")
    assert code == 200 and json.loads(out)["path"] == "/secure"


async def test_head_answers_without_a_body(env):
    send, _ = env
    code, headers, out = await send("HEAD", "/api/v1/namespaces/default/pods/web/proxy/cors")
    assert (code, out, headers["Content-Length"]) == (200, b"", "2")


async def test_the_proxy_root_redirects_to_its_slash(env):
    send, _ = env
    code, headers, _ = await send("GET", "/api/v1/namespaces/default/pods/web/proxy?a=b")
    assert code == 301 and headers["Location"] == "/api/v1/namespaces/default/pods/web/proxy/?a=b"
    code, _, out = await send("GET", "/api/v1/namespaces/default/pods/web/proxy/")
    assert code == 200 and json.loads(out)["path"] == "/"


async def test_html_links_and_redirects_are_rewritten_under_the_proxy_path(env):
    send, _ = env
    base = "/api/v1/namespaces/default/pods/web:8080/proxy"
    code, headers, out = await send("GET", base + "/page")
    page = out.decode()
    assert f'href="{base}/static/app.css"' in page and f'href="{base}/next?x=1"' in page
    assert f"src='{base}/img.png'" in page
    assert 'href="relative"' in page and 'href="http://other.example/x"' in page
    assert 'data-src="/not-a-url-attribute"' in page and ">/text</p>" in page
    assert int(headers["Content-Length"]) == len(out)
    code, headers, out = await send("GET", base + "/gzpage")
    assert code == 200 and headers["Content-Encoding"] == "gzip" and f'href="{base}/next?x=1"' in out.decode()
    code, headers, _ = await send("GET", base + "/moved")
    assert code == 302 and headers["Location"] == base + "/login?next=%2F"
    code, headers, _ = await send("GET", base + "/moved-absolute")
    assert code == 302 and headers["Location"] == base + "/abs?x=1", "the pod's own host is dropped"
    code, headers, _ = await send("GET", base + "/moved-away")
    assert code == 302 and headers["Location"] == "http://example.com/abs"


async def test_cors_answers_are_dropped_and_chunked_bodies_stream(env):
    send, _ = env
    code, headers, out = await send("GET", "/api/v1/namespaces/default/pods/web/proxy/cors")
    assert (code, out, headers["X-Backend"]) == (200, b"ok", "yes")
    assert "Access-Control-Allow-Origin" not in headers
    code, _, out = await send("GET", "/api/v1/namespaces/default/pods/web/proxy/stream")
    assert (code, out) == (200, b"part 0\npart 1\npart 2\n")


@pytest.mark.parametrize("path,code,reason,message", [
    ("pods/web:9090/proxy/", 503, "ServiceUnavailable",
     "error trying to reach service: dial tcp 10.244.0.5:9090: connect: connection refused"),
    ("pods/bare/proxy/", 503, "ServiceUnavailable",
     "error trying to reach service: dial tcp 10.244.0.6:80: connect: connection refused"),
    ("pods/https:bare:/proxy/", 503, "ServiceUnavailable",
     "error trying to reach service: dial tcp 10.244.0.6:443: connect: connection refused"),
    # a pod's port is not looked up by name: Go's transport reads "IP:http" as a host to resolve
    ("pods/web:http/proxy/", 503, "ServiceUnavailable",
     "error trying to reach service: dial tcp: lookup 10.244.0.5:http: no such host"),
    ("pods/noip/proxy/", 400, "BadRequest", "address not allowed"),
    ("pods/ftp:web:80/proxy/", 400, "BadRequest", 'invalid pod request "ftp:web:80"'),
    ("pods/a:b:c:d/proxy/", 400, "BadRequest", 'invalid pod request "a:b:c:d"'),
    ("pods/missing/proxy/", 404, "NotFound", 'pods "missing" not found'),
    ("services/missing:http/proxy/", 404, "NotFound", 'services "missing" not found'),
])
async def test_upstream_errors(env, path, code, reason, message):
    send, _ = env
    got, _, out = await send("GET", f"/api/v1/namespaces/default/{path}")
    status = json.loads(out)
    assert (got, status["kind"], status["code"], status["reason"], status["message"]) == (
        code, "Status", code, reason, message)


async def service(send, ports, slices):
    code, _, out = await send("POST", "/api/v1/namespaces/default/services", {
        "metadata": {"name": "svc"}, "spec": {"selector": {"app": "web"}, "ports": ports}})
    assert code == 201, out
    for i, s in enumerate(slices):
        code, _, out = await send("POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
            "metadata": {"name": f"svc-{i}", "labels": {"kubernetes.io/service-name": "svc"}},
            "addressType": "IPv4", **s})
        assert code == 201, out


def endpoint(ip, pod, ready=True):
    return {"addresses": [ip], "conditions": {"ready": ready},
            "targetRef": {"kind": "Pod", "namespace": "default", "name": pod}}


async def test_service_proxy_reaches_a_ready_endpoint_by_port_name_or_number(env):
    send, node = env
    await service(send, [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "admin", "port": 81}],
                  [{"ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                    "endpoints": [endpoint("10.244.0.6", "bare", ready=False), endpoint("10.244.0.5", "web")]}])
    for name in ("svc:http", "svc:80", "http:svc:http"):
        code, _, out = await send("GET", f"/api/v1/namespaces/default/services/{name}/proxy/hello")
        assert code == 200, out
        seen = json.loads(out)
        assert seen["path"] == "/hello"
        assert seen["headers"]["X-Forwarded-Uri"] == f"/api/v1/namespaces/default/services/{name}/proxy/hello"
        assert node.forwarded[-1] == ("default", "web", 8080), "the ready endpoint, at the slice's port"
    for name, message in (("svc:82", 'no service port 82 found for service "svc"'),
                          ("svc:-1", 'no service port -1 found for service "svc"'),
                          ("svc:admin", 'no endpoints available for service "svc:admin"'),
                          ("svc", 'no endpoints available for service "svc"')):
        code, _, out = await send("GET", f"/api/v1/namespaces/default/services/{name}/proxy/")
        assert (code, json.loads(out)["reason"], json.loads(out)["message"]) == (503, "ServiceUnavailable", message)


async def test_a_service_without_endpointslices_has_no_endpoints(env):
    send, _ = env
    await service(send, [{"name": "http", "port": 80}], [])
    code, _, out = await send("GET", "/api/v1/namespaces/default/services/svc:http/proxy/")
    assert (code, json.loads(out)["message"]) == (503, 'no endpoints available for service "svc"')


async def test_proxy_subresources_are_discovered_as_upstream_lists_them(env):
    send, _ = env
    _, _, out = await send("GET", "/api/v1")
    found = {r["name"]: r for r in json.loads(out)["resources"] if r["name"].endswith("/proxy")}
    assert set(found) == {"pods/proxy", "services/proxy", "nodes/proxy"}
    for name, kind in (("pods/proxy", "PodProxyOptions"), ("services/proxy", "ServiceProxyOptions"),
                       ("nodes/proxy", "NodeProxyOptions")):
        assert found[name]["kind"] == kind and found[name]["verbs"] == ["create", "delete", "get", "patch", "update"]
    assert found["nodes/proxy"]["namespaced"] is False and found["pods/proxy"]["namespaced"] is True


async def test_nodes_proxy_reaches_the_kubelet_of_the_node(env):
    send, _ = env
    # the node proxy asks the API server's kubelet lookups; this one answers with what it was asked
    asked = []

    class Kubelet:
        async def serve(self, request, path):
            asked.append((request.method, path, dict(request.query)))
            return web.Response(text=f"kubelet {path}")

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    code, _, out = await send("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})
    assert code == 201, out
    code, _, out = await send("PATCH", "/api/v1/nodes/n1/status", {"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": closed}}}}, "application/merge-patch+json")
    assert code == 200, out
    code, _, out = await send("GET", "/api/v1/nodes/n1/proxy/stats/summary")
    assert (code, json.loads(out)["message"]) == (
        503, f"error trying to reach service: dial tcp 127.0.0.1:{closed}: connect: connection refused"), \
        "no agent here serves the node's kubelet endpoints: its address is dialled"
    send.server.handlers.proxies.kubelets.append(lambda name: Kubelet() if name == "n1" else None)
    for name in ("n1", f"n1:{closed}", f"https:n1:{closed}"):
        code, _, out = await send("GET", f"/api/v1/nodes/{name}/proxy/metrics/resource?x=1")
        assert (code, out) == (200, b"kubelet /metrics/resource")
    assert asked[-1] == ("GET", "/metrics/resource", {"x": "1"})
    code, headers, _ = await send("GET", "/api/v1/nodes/n1/proxy")
    assert code == 301 and headers["Location"] == "/api/v1/nodes/n1/proxy/"
    code, _, out = await send("GET", "/api/v1/nodes/n1:9100/proxy/metrics")
    assert (code, json.loads(out)["message"]) == (
        503, "error trying to reach service: dial tcp 127.0.0.1:9100: connect: connection refused")
    code, _, out = await send("GET", "/api/v1/nodes/gone/proxy/")
    assert (code, json.loads(out)["message"]) == (404, 'nodes "gone" not found')
    code, _, out = await send("GET", "/api/v1/namespaces/default/nodes/n1/proxy/")
    assert code == 404, "nodes are not namespaced"


async def test_a_proxied_answer_is_uncacheable_and_keeps_the_backends_cache_control_after_that(env):
    """WithCacheControl sets `no-cache, private` before the proxy runs, and the reverse proxy adds the
    backend's headers to the answer's: a backend's own Cache-Control comes second, not instead."""
    send, _ = env
    _, headers, _ = await send("GET", "/api/v1/namespaces/default/pods/web/proxy/cached")
    assert headers.getall("Cache-Control") == ["no-cache, private", "max-age=60"]
    _, headers, _ = await send("GET", "/api/v1/namespaces/default/pods/web/proxy/cors")
    assert headers.getall("Cache-Control") == ["no-cache, private"]

    class Kubelet:  # an agent in this process, whose answer is relayed as it came, or which streams it itself
        async def serve(self, request, path):
            if path == "/streamed":
                stream = web.StreamResponse(headers={"Cache-Control": "max-age=5"})
                await stream.prepare(request)
                await stream.write(b"ok")
                await stream.write_eof()
                return stream
            return web.Response(text="ok", headers={"Cache-Control": "max-age=5"} if path == "/cached" else None)

    code, _, out = await send("POST", "/api/v1/nodes", {"metadata": {"name": "n1"}})
    assert code == 201, out
    code, _, out = await send("PATCH", "/api/v1/nodes/n1/status", {"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}}, "application/merge-patch+json")
    assert code == 200, out
    send.server.handlers.proxies.kubelets.append(lambda name: Kubelet() if name == "n1" else None)
    code, headers, out = await send("GET", "/api/v1/nodes/n1/proxy/cached")
    assert code == 200, out
    assert headers.getall("Cache-Control") == ["no-cache, private", "max-age=5"]
    code, headers, out = await send("GET", "/api/v1/nodes/n1/proxy/streamed")
    assert (code, out) == (200, b"ok")
    assert headers.getall("Cache-Control") == ["no-cache, private", "max-age=5"]
    _, headers, _ = await send("GET", "/api/v1/nodes/n1/proxy/plain")
    assert headers.getall("Cache-Control") == ["no-cache, private"]


async def test_websocket_upgrades_are_joined_to_the_pod(env):
    send, _ = env
    base = f"http://127.0.0.1:{send.server.port}/api/v1/namespaces/default/pods/web/proxy"
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(f"{base}/ws?dropped=1") as ws:
            # the backend's head as it came: upstream writes it on the hijacked connection, past the
            # headers its filters set (Audit-Id, Cache-Control)
            assert "Cache-Control" not in ws._response.headers and "Audit-Id" not in ws._response.headers
            await ws.send_str("hello")
            assert (await ws.receive()).data == "echo hello no query", "the location carries no query"
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await http.ws_connect(f"{base}/page")
        assert e.value.status == 500, "a backend that answers without upgrading"
    code, _, out = await send("GET", "/api/v1/namespaces/default/pods/web:9090/proxy/ws",
                              headers={"Connection": "Upgrade", "Upgrade": "websocket"})
    assert (code, json.loads(out)["message"]) == (
        500, "error dialing backend: dial tcp 10.244.0.5:9090: connect: connection refused")
    assert "reason" not in json.loads(out), "an error that is not a Status: no reason"


async def test_an_upgrade_the_backend_refuses_is_its_answer_as_it_came(env):
    """A refusal (status 400 or above) is written as it came on the hijacked connection: none of
    the headers the API server's filters set (Audit-Id, Cache-Control), the backend's own kept
    (CORS too, which only the reverse proxy's answers lose), and the connection closed."""
    send, _ = env
    code, headers, out = await send("GET", "/api/v1/namespaces/default/pods/web/proxy/ws-refused",
                                    headers={"Connection": "Upgrade", "Upgrade": "websocket"})
    assert (code, out) == (403, b"no")
    assert headers.getall("Cache-Control") == ["max-age=5"] and "Audit-Id" not in headers
    assert headers["X-Backend"] == "yes" and headers["Access-Control-Allow-Origin"] == "*"
    assert headers["Connection"] == "close"


async def test_a_client_that_floods_an_upgraded_connection_is_slowed_to_the_backend(env):
    """What a client sends over an upgraded connection waits for the pod to read it: the proxy stops
    reading the client (as upstream's copy blocks) instead of holding everything it sent. Frames of
    1 MiB stall once the buffers between are full, well before the 256 MiB the client has."""
    send, _ = env
    reader, writer = await asyncio.open_connection("127.0.0.1", send.server.port)
    try:
        writer.write(b"GET /api/v1/namespaces/default/pods/web/proxy/ws-deaf HTTP/1.1\r\nHost: x\r\n"
                     b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        assert head.startswith("HTTP/1.1 101 "), head
        frame = b"\x82\xff" + (1 << 20).to_bytes(8, "big") + b"\0\0\0\0" + b"x" * (1 << 20)  # masked with zeros
        sent = 0
        with pytest.raises(asyncio.TimeoutError):
            while sent < 256 << 20:
                writer.write(frame)
                await asyncio.wait_for(writer.drain(), 3)
                sent += 1 << 20
        assert sent < 128 << 20, f"{sent >> 20} MiB taken from a client whose pod reads nothing"
    finally:
        for released in DEAF:  # the pod's end ends the proxied connection (the proxy reads the client no more)
            released.set()
        writer.transport.abort()


async def test_proxy_requests_are_counted_under_connect(env):
    send, _ = env
    await send("GET", "/api/v1/namespaces/default/pods/web/proxy/x")
    await send("GET", "/api/v1/namespaces/default/pods/web:9090/proxy/x")
    _, _, out = await send("GET", "/metrics")
    counted = [line for line in out.decode().splitlines()
               if line.startswith("apiserver_request_total{") and 'subresource="proxy"' in line]
    assert any('verb="CONNECT"' in line and 'code="200"' in line and 'resource="pods"' in line for line in counted)
    assert any('verb="CONNECT"' in line and 'code="503"' in line for line in counted)
    assert all('verb="CONNECT"' in line for line in counted)


async def test_a_body_held_back_for_a_100_continue_is_asked_for_and_forwarded(env):
    """curl's `Expect: 100-continue`: the proxy answers 100 Continue as it reads the body to forward
    it (net/http's, as the reverse proxy's transport copies the body), and the pod's server is sent
    the body with the head, with no Expect of its own to answer."""
    send, _ = env
    reader, writer = await asyncio.open_connection("127.0.0.1", send.server.port)
    try:
        body = b'{"big": true}'
        writer.write(b"POST /api/v1/namespaces/default/pods/web/proxy/api/echo HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10) == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(body)
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        assert head.startswith("HTTP/1.1 200"), head
        length = int(next(h.split(":")[1] for h in head.split("\r\n") if h.lower().startswith("content-length")))
        seen = json.loads(await reader.readexactly(length))
        assert seen["body"] == body.decode() and "Expect" not in seen["headers"]
    finally:
        writer.close()


async def test_an_upgrade_without_a_body_gets_no_100_continue(env):
    """An upgrade request naming `Expect: 100-continue` has no body (net/http's ContentLength 0), so nothing
    waits for one: kube-apiserver sends no 100 Continue, and the first answer is the backend's 101."""
    send, _ = env
    reader, writer = await asyncio.open_connection("127.0.0.1", send.server.port)
    try:
        writer.write(b"GET /api/v1/namespaces/default/pods/web/proxy/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                     b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     b"Expect: 100-continue\r\n\r\n")
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        assert head.startswith("HTTP/1.1 101 "), head
    finally:
        writer.close()


async def test_a_node_at_an_ipv6_address_is_dialled_in_brackets(env):
    """The transport's dial errors name an IPv6 node address as net.JoinHostPort joins it."""
    send, _ = env
    code, _, out = await send("POST", "/api/v1/nodes", {"metadata": {"name": "n6"}})
    assert code == 201, out
    code, _, out = await send("PATCH", "/api/v1/nodes/n6/status", {"status": {
        "addresses": [{"type": "InternalIP", "address": "fd00::7"}]}}, "application/merge-patch+json")
    assert code == 200, out
    code, _, out = await send("GET", "/api/v1/nodes/n6:9100/proxy/metrics")
    assert (code, json.loads(out)["message"]) == (
        503, "error trying to reach service: dial tcp [fd00::7]:9100: connect: connection refused")
