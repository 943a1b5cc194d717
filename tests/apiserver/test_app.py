"""The API server's own request handling: API paths served directly, the rest through the application."""

import asyncio
import ssl

import orjson
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context
from tests.controllers import eventually


@pytest.fixture
async def server(tmp_path):
    pki = ensure_pki(str(tmp_path))
    s = APIServer(MemoryStore(), pki, port=0)
    await s.start()
    ctx = admin_context(pki, tmp_path)
    try:
        yield s, ctx
    finally:
        await s.stop()


async def _exchange(server, ctx, request: bytes, body: bytes = b"", wait_continue: bool = False) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx, server_hostname="localhost")
    writer.write(request)
    if wait_continue:
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).startswith(b"HTTP/1.1 100 Continue")
    writer.write(body)
    await writer.drain()
    response = await reader.read()
    writer.close()
    return response


async def test_a_create_that_expects_100_continue_gets_it_and_is_created(server):
    s, ctx = server
    body = orjson.dumps({"metadata": {"name": "c1"}, "data": {"k": "v"}})
    response = await _exchange(s, ctx, b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\n"
                               b"Content-Type: application/json\r\nExpect: 100-continue\r\nConnection: close\r\n"
                               b"Content-Length: %d\r\n\r\n" % len(body), body, wait_continue=True)
    assert response.startswith(b"HTTP/1.1 201"), response[:300]
    assert s.cache.get("/registry/configmaps/default/c1") is not None


async def test_answers_on_a_kept_alive_connection_are_framed_by_their_length_until_one_asks_to_close(server):
    """Unary answers (oneshot.send) on one connection: pipelined requests answered in order, each
    head with its Content-Length, Content-Type, Date, Audit-Id and WithCacheControl's
    `Cache-Control: no-cache, private` and no Server, the connection kept until a
    request says `Connection: close`, whose answer says so too; a HEAD's head alone."""
    s, ctx = server
    body = orjson.dumps({"metadata": {"name": "k1"}, "data": {"k": "v"}})
    reader, writer = await asyncio.open_connection("127.0.0.1", s.port, ssl=ctx, server_hostname="localhost")
    writer.write(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
                 + b"GET /api/v1/namespaces/default/configmaps/k1 HTTP/1.1\r\nHost: x\r\nAudit-ID: mine\r\n\r\n"
                 + b"HEAD /version HTTP/1.1\r\nHost: x\r\n\r\n"
                 + b"GET /api/v1/namespaces/nosuch HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answers = []
    for method in ("POST", "GET", "HEAD", "GET"):
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        status, *lines = head.split("\r\n")[:-2]
        headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines)}
        size = int(headers["content-length"])
        answers.append((status, headers, await reader.readexactly(size) if method != "HEAD" else b""))
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed after the last
    writer.close()
    (created, h1, b1), (got, h2, b2), (headed, h3, b3), (missing, h4, b4) = answers
    assert (created, got, headed, missing) == ("HTTP/1.1 201 Created", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK",
                                               "HTTP/1.1 404 Not Found")
    assert orjson.loads(b1)["metadata"]["name"] == orjson.loads(b2)["metadata"]["name"] == "k1"
    assert orjson.loads(b4)["reason"] == "NotFound"
    for h in (h1, h2, h3, h4):  # Go's server names itself in no Server header (aiohttp's path, the HEAD's, neither)
        assert "server" not in h and h["cache-control"] == "no-cache, private"
    for h in (h1, h2, h4):
        assert h["content-type"] == "application/json" and h["date"].endswith(" GMT") and h["audit-id"]
        assert "connection" not in h or h is h4
    assert h2["audit-id"] == "mine" and h1["audit-id"] != h4["audit-id"]
    assert h4["connection"] == "close"
    assert int(h3["content-length"]) > 0 and b3 == b""


async def test_an_unauthenticated_request_s_refusal_is_marked_uncacheable_too(server):
    """WithCacheControl wraps authentication: the refusal of a request without credentials (aiohttp's
    path, not oneshot's: it ends the connection) carries it as any answer does."""
    s, _ = server
    ctx = ssl.create_default_context(cadata=s.pki.ca.cert_pem.decode())
    response = await _exchange(s, ctx, b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nosuch\r\n"
                               b"Connection: close\r\n\r\n")
    head = response.split(b"\r\n\r\n", 1)[0].decode()
    assert head.startswith("HTTP/1.1 401"), head
    assert "\r\nCache-Control: no-cache, private\r\n" in head + "\r\n", head


@pytest.mark.parametrize("path, code, kind", [
    ("/apis/metrics.k8s.io/v1beta1", 200, "APIResourceList"),  # a route of the application
    ("/apis/metrics.k8s.io/v1beta1/nosuch", 404, "Status"),  # under a routed group: the catch-all route
    ("/api/v1/namespaces/default/configmaps/a%25b", 404, "Status"),  # served directly, the name unescaped
    ("/apis", 200, "APIGroupList"),
])
async def test_api_paths_are_answered_as_the_router_answered_them(server, path, code, kind):
    s, ctx = server
    response = await _exchange(s, ctx, b"GET %b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % path.encode())
    head, body = response.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 %d" % code), head
    assert orjson.loads(body)["kind"] == kind
    if "%25" in path:
        assert orjson.loads(body)["message"] == 'configmaps "a%b" not found'


async def test_a_host_naming_several_addresses_is_served_on_each_with_one_port(tmp_path):
    """`--address ''` (every interface) names 0.0.0.0 and ::; port 0 is picked once, for both."""
    pki = ensure_pki(str(tmp_path))
    s = APIServer(MemoryStore(), pki, host="", port=0)
    await s.start()
    ctx = ssl.create_default_context(cadata=pki.ca.cert_pem.decode())
    try:
        for address in ("127.0.0.1", "::1"):
            reader, writer = await asyncio.open_connection(address, s.port, ssl=ctx, server_hostname="localhost")
            writer.write(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            response = await reader.read()
            writer.close()
            assert response.startswith(b"HTTP/1.1 200"), (address, response[:80])
    finally:
        await s.stop()


async def test_health_endpoints_record_their_checks_at_metrics_slis(server):
    """kube-apiserver's healthz (?verbose lists each check, per-check paths) and component-base's
    /metrics/slis (the checks the roots ran; DELETE resets them); /metrics/slis is authorized."""
    import aiohttp

    s, ctx = server
    base = f"https://localhost:{s.port}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as admin:
        async def call(method, path):
            async with admin.request(method, base + path) as r:
                return r.status, await r.text()
        assert await call("GET", "/readyz?verbose") == (
            200, "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n[+]informer-sync ok\n[+]shutdown ok\n"
                 "readyz check passed\n")
        assert await call("GET", "/readyz/shutdown") == (200, "ok")
        assert await call("GET", "/livez") == (200, "ok")
        assert await call("GET", "/healthz/etcd") == (200, "ok")
        code, slis = await call("GET", "/metrics/slis")
        assert code == 200
        assert 'kubernetes_healthcheck{name="informer-sync",type="readyz"} 1\n' in slis
        assert 'kubernetes_healthchecks_total{name="etcd",status="success",type="livez"} 1\n' in slis
        assert 'type="healthz"' not in slis, "a check's own path is not counted"
        assert await call("DELETE", "/metrics/slis") == (200, "metrics reset\n")
        assert "kubernetes_healthcheck{" not in (await call("GET", "/metrics/slis"))[1]
        assert await call("GET", "/livez?verbose") == (200, "[+]ping ok\n[+]log ok\n[+]etcd ok\nlivez check passed\n")
    anonymous = ssl.create_default_context(cafile=None)
    anonymous.check_hostname, anonymous.verify_mode = False, ssl.CERT_NONE
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=anonymous)) as nobody:
        async with nobody.get(base + "/metrics/slis") as r:
            assert r.status == 403
            assert (await r.json())["message"] == 'forbidden: User "system:anonymous" cannot get path "/metrics/slis"'
        async with nobody.get(base + "/readyz") as r:
            assert r.status == 200 and await r.text() == "ok"


async def test_version_is_indented_json_as_write_raw_json_writes_it(server):
    """GET /version: version.Info, indented by two spaces with no newline after (WriteRawJSON's
    json.MarshalIndent), served as application/json."""
    s, ctx = server
    response = await _exchange(s, ctx, b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, body = response.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and b"\r\nContent-Type: application/json\r\n" in head
    assert body.startswith(b'{\n  "major": "1",\n  "minor": "37",\n  "emulationMajor": "1",\n')
    assert body.endswith(b'\n  "platform": "linux/amd64"\n}')
    assert orjson.loads(body)["gitVersion"] == "v1.37.0-nanokube"


async def test_the_root_lists_the_served_paths_as_routes_index_does(server):
    """GET /: metav1.RootPaths of every endpoint, health check, group and group/version served
    (in-process APIServices included), sorted and indented as WriteRawJSON writes it."""
    s, ctx = server
    response = await _exchange(s, ctx, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, body = response.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and b"\r\nContent-Type: application/json\r\n" in head
    assert body.startswith(b'{\n  "paths": [\n    "/.well-known/openid-configuration",\n    "/api",\n    "/api/v1",\n')
    paths = orjson.loads(body)["paths"]
    assert paths == sorted(set(paths))
    assert {"/apis/apps", "/apis/apps/v1", "/apis/metrics.k8s.io/v1beta1", "/healthz/etcd", "/livez/ping",
            "/readyz/informer-sync", "/metrics", "/metrics/slis", "/openapi/v2", "/openapi/v3", "/openid/v1/jwks",
            "/version"} <= set(paths)
    assert "/apis/apps/v1beta1" not in paths and paths[-1] == "/version"


async def test_an_etcd_that_stops_answering_fails_the_etcd_checks_until_it_is_back(tmp_path):
    """kube-apiserver's etcd checks read the store (--etcd-healthcheck-timeout, 2 s): with its etcd
    stopped, `kubectl get --raw '/readyz?verbose'` and /livez answer 500 with `[-]etcd failed: reason
    withheld` (and etcd-readiness), and pass again once etcd serves again."""
    import aiohttp

    from nanokube.store.etcd import EtcdStore
    from tests.conftest import EtcdServer, etcd_binary

    (tmp_path / "etcd").mkdir()
    etcd = EtcdServer(etcd_binary(), tmp_path / "etcd")
    etcd.start()
    pki = ensure_pki(str(tmp_path))
    s = APIServer(EtcdStore([etcd.endpoint]), pki, port=0)
    try:
        await s.start()
        async with aiohttp.ClientSession(f"https://127.0.0.1:{s.port}",
                                         connector=aiohttp.TCPConnector(ssl=admin_context(pki, tmp_path))) as http:
            async def call(path):
                async with http.get(path) as r:
                    return r.status, await r.text()
            assert await call("/livez") == (200, "ok")
            etcd.stop()
            status, text = await call("/readyz?verbose")
            assert status == 500
            assert "[+]log ok\n[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\n" in text
            assert text.endswith("readyz check failed\n")
            assert await call("/livez") == (500, "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n"
                                                 "livez check failed\n")
            etcd.start()

            async def healthy():
                return await call("/readyz") == (200, "ok")
            await eventually(healthy)
    finally:
        await s.stop()
        etcd.stop()
