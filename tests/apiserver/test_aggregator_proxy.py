"""`Expect: 100-continue` through the aggregation layer's proxy, as kube-apiserver's (httputil.ReverseProxy over
a Go transport whose ExpectContinueTimeout is 0) handles it: the client's Expect goes to the extension server,
the 100 Continue goes to the client when the proxy starts copying the body, the body follows the head at once
(an extension server that sends no 100 Continue still gets it), and a request without a body gets no 100
Continue at all (net/http waits only for a body whose length is not 0). Over raw TLS connections, as curl
sends such requests, to a served server and an extension server of this test."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl

import aiohttp
import orjson
import pytest
from aiohttp import web

from nanokube.apiserver.kubernetes_service import host_address
from nanokube.pki.ca import ensure_front_proxy, issue, new_ca
from tests.apiserver.metrics_adapter import serving_context
from tests.apiserver.test_expect import Conn, served
from tests.controllers import tries

GROUP, VERSION = "wardle.example.com", "v1alpha1"
FLUNDERS = f"/apis/{GROUP}/{VERSION}/namespaces/default/flunders".encode()


def host_ip() -> str:
    """A non-loopback address of this host (EndpointSlices refuse loopback ones)."""
    return host_address() or pytest.skip("no non-loopback IPv4 address for the extension server")


def host_ipv6() -> str:
    """A global IPv6 address of this host: the source of its route towards a documentation address."""
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("2001:db8::1", 1))
        except OSError:
            pytest.skip("no IPv6 route for the extension server")
        return s.getsockname()[0]


async def extension_server(routes=(), client_ca: bytes | None = None, ip: str | None = None
                           ) -> tuple[web.AppRunner, str, int]:
    """HTTPS serving the wardle group's discovery and echoing, for flunders, the Expect header and the body
    length it got; it never answers 100 Continue itself (its expect handler does nothing). `routes`: more
    (method, path, handler); `client_ca`: the CA whose client certificates it asks for (the front proxy's);
    `ip`: where it listens (by default the host's IPv4 address)."""
    ctx = serving_context("wardle-ca", "api.wardle.svc")
    if client_ca is not None:
        ctx.load_verify_locations(cadata=client_ca.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL

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
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    ip = ip or host_ip()
    site = web.TCPSite(runner, ip, 0, ssl_context=ctx)
    await site.start()
    return runner, ip, site._server.sockets[0].getsockname()[1]


async def register(server, ctx: ssl.SSLContext, ip: str, port: int, tls: dict | None = None) -> None:
    """A Service, its EndpointSlice and the APIService for the extension server at ip:port; returns once
    the APIService is Available. `tls`: how the APIService trusts the server (by default it does not check)."""
    base = f"https://127.0.0.1:{server.port}"
    async with aiohttp.ClientSession() as s:
        for path, obj in [
            ("/api/v1/namespaces/default/services", {"metadata": {"name": "api"}, "spec": {
                "ports": [{"port": 443, "targetPort": port}]}}),
            ("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {
                "metadata": {"name": "api-1", "labels": {"kubernetes.io/service-name": "api"}},
                "addressType": "IPv6" if ":" in ip else "IPv4", "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
                "ports": [{"name": "", "port": port, "protocol": "TCP"}]}),
            ("/apis/apiregistration.k8s.io/v1/apiservices", {"metadata": {"name": f"{VERSION}.{GROUP}"}, "spec": {
                "group": GROUP, "version": VERSION, "groupPriorityMinimum": 1000, "versionPriority": 15,
                "service": {"namespace": "default", "name": "api"}, **(tls or {"insecureSkipTLSVerify": True})}}),
        ]:
            async with s.post(base + path, json=obj, ssl=ctx) as r:
                assert r.status == 201, await r.text()
        for _ in tries():
            async with s.get(f"{base}/apis/apiregistration.k8s.io/v1/apiservices/{VERSION}.{GROUP}", ssl=ctx) as r:
                conds = (await r.json()).get("status", {}).get("conditions") or []
            if any(c["type"] == "Available" and c["status"] == "True" for c in conds):
                return
        raise AssertionError(f"the APIService never became Available: {conds}")


async def allow_alice(s: aiohttp.ClientSession, base: str, ctx: ssl.SSLContext, verb: str, resources: list[str]):
    """A Role of `verb` on the wardle group's `resources` (a "resource/subresource" for a subresource) in
    namespace default, bound to alice; returns once the authorizer allows her the first of them."""
    for path, obj in [
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", {
            "metadata": {"name": "alice"}, "rules": [{"apiGroups": [GROUP], "verbs": [verb], "resources": resources}]}),
        ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", {
            "metadata": {"name": "alice"}, "subjects": [{"kind": "User", "name": "alice"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "alice"}}),
    ]:
        async with s.post(base + path, json=obj, ssl=ctx) as r:
            assert r.status == 201, await r.text()
    resource, _, subresource = resources[0].partition("/")
    review = {"spec": {"user": "alice", "resourceAttributes": {
        "namespace": "default", "verb": verb, "group": GROUP, "resource": resource, "subresource": subresource}}}
    for _ in tries():
        async with s.post(f"{base}/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review, ssl=ctx) as r:
            if (await r.json())["status"].get("allowed"):
                return
    raise AssertionError(f"alice is not allowed to {verb} {resources[0]}")


async def answer(c: Conn) -> tuple[int, bytes]:
    """One response's status and body, relayed with its length or chunked (as the extension server sent it)."""
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
            await register(server, ctx, ip, port)

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


def user_context(pki, tmp_path, name: str, *groups: str) -> ssl.SSLContext:
    """A TLS client context presenting a certificate of the cluster CA for user `name` in `groups`."""
    cert = issue(pki.ca, name, organizations=groups, client=True)
    (tmp_path / f"{name}.crt").write_bytes(cert.cert_pem)
    (tmp_path / f"{name}.key").write_bytes(cert.key_pem)
    ctx = ssl.create_default_context(cadata=pki.ca.cert_pem.decode())
    ctx.load_cert_chain(tmp_path / f"{name}.crt", tmp_path / f"{name}.key")
    return ctx


def executing(server, level: str) -> float:
    """apiserver_flowcontrol_current_executing_requests of priority level `level`."""
    return sum(s.value for m in server.flow_control.executing.collect() for s in m.samples
               if s.labels["priority_level"] == level)


WS_HEADERS = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


async def test_websocket_upgrade_through_an_apiservice(tmp_path):
    """A WebSocket on an aggregated subresource (as `virtctl console` opens KubeVirt's): the upgrade reaches
    the extension server with the front-proxy identity, and messages cross both ways once it answers 101;
    a user the subresource is forbidden to gets a 403 and the extension server is never asked; a refusal
    instead of a 101 comes back as the extension server gave it."""
    seen: list[tuple[str, str | None]] = []  # (path, X-Remote-User) of each subresource request the server got

    async def console(request: web.Request):
        seen.append((request.path, request.headers.get("X-Remote-User")))
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        peer = request.transport.get_extra_info("peercert") or {}
        await ws.send_json({
            "user": request.headers.get("X-Remote-User"), "groups": request.headers.getall("X-Remote-Group", []),
            "extra": request.headers.getall("X-Remote-Extra-Scopes", []),
            "authorization": request.headers.get("Authorization"), "query": request.query_string,
            "client": [v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"]})
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str(f"echo: {msg.data}")
            elif msg.type == aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(msg.data[::-1])
        return ws

    made: list[socket.socket] = []  # the sockets of the socket factory given to the aggregator below
    from_factory: list[bool] = []  # whether each vnc request came over one of them

    async def vnc(request: web.Request):
        seen.append((request.path, request.headers.get("X-Remote-User")))
        peer = request.transport.get_extra_info("peername")[:2]
        from_factory.append(any(sk.fileno() != -1 and sk.getsockname()[:2] == peer for sk in made))
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                                  "reason": "BadRequest", "message": "flunder x is not running"}, status=400)

    sub = f"/apis/{GROUP}/{VERSION}/namespaces/default/flunders/x"
    async with served(tmp_path) as (server, ctx):
        front_proxy_ca, _ = ensure_front_proxy(server.pki.dir)
        runner, ip, port = await extension_server([("GET", f"{sub}/console", console), ("GET", f"{sub}/vnc", vnc)],
                                                  client_ca=front_proxy_ca.cert_pem)
        try:
            await register(server, ctx, ip, port)
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                await allow_alice(s, base, ctx, "get", ["flunders/console", "flunders/vnc"])

                alice = user_context(server.pki, tmp_path, "alice", "devs")
                async with s.ws_connect(f"{base}{sub}/console?tty=true", ssl=alice,
                                        headers={"X-Remote-User": "mallory", "X-Remote-Group": "system:masters"}) as ws:
                    assert await ws.receive_json(timeout=10) == {
                        "user": "alice", "groups": ["devs", "system:authenticated"], "extra": [],
                        "authorization": None, "query": "tty=true", "client": ["front-proxy-client"]}
                    await ws.send_str("hello")
                    assert (await ws.receive(timeout=10)).data == "echo: hello"
                    await ws.send_bytes(b"\x00\x01abc")
                    assert (await ws.receive(timeout=10)).data == b"cba\x01\x00"
                    # no long-running request to kube-apiserver (its subresource is not exec, attach, ...):
                    # APF counts it executing at alice's level for as long as it is open
                    assert executing(server, "global-default") == 1
                for _ in tries():
                    if executing(server, "global-default") == 0:
                        break
                    await asyncio.sleep(0.05)
                assert executing(server, "global-default") == 0
                assert seen == [(f"{sub}/console", "alice")]

                bob = user_context(server.pki, tmp_path, "bob")
                async with s.get(f"{base}{sub}/console", ssl=bob, headers=WS_HEADERS) as r:
                    status = await r.json()
                    assert (r.status, status["reason"]) == (403, "Forbidden")
                    assert 'User "bob" cannot get resource "flunders/console" in API group "wardle.example.com" ' \
                           'in the namespace "default"' in status["message"]
                assert seen == [(f"{sub}/console", "alice")]  # the extension server was never asked

                def factory(addr_info):  # as netns.dialer's: where Services are reached through one, upgrades too
                    made.append(socket.socket(addr_info[0], addr_info[1], addr_info[2]))
                    return made[-1]

                await server.handlers.aggregator.dial_services_from(factory)
                async with s.get(f"{base}{sub}/vnc", ssl=alice, headers=WS_HEADERS) as r:
                    assert (r.status, await r.json()) == (400, {
                        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400, "reason": "BadRequest",
                        "message": "flunder x is not running"})
                assert seen[-1] == (f"{sub}/vnc", "alice")
                assert from_factory == [True]
        finally:
            await runner.cleanup()


async def test_an_extension_server_that_went_away(tmp_path):
    """handler_proxy.go: while the APIService is still Available, a request the extension server cannot take
    is the responder's 503 with the transport's error in net/http's http.Error; the availability check then
    finds it gone (FailedDiscoveryCheck, with http.Client's error), and the proxy answers "service unavailable"
    without dialling."""
    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server()
        stopped = False
        try:
            await register(server, ctx, ip, port)
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                async with s.get(base + FLUNDERS.decode(), ssl=ctx) as r:
                    assert r.status == 200
                await runner.cleanup()
                stopped = True
                async with s.get(base + FLUNDERS.decode(), ssl=ctx) as r:
                    assert (r.status, await r.text()) == (503, f"dial tcp {ip}:{port}: connect: connection refused\n")
                    assert (r.headers["Content-Type"], r.headers["X-Content-Type-Options"]) == (
                        "text/plain; charset=utf-8", "nosniff")

                cond = await unavailable_once_checked(s, base, ctx)
                url = f"https://{ip}:{port}/apis/{GROUP}/{VERSION}"
                assert (cond["status"], cond["reason"], cond["message"]) == (
                    "False", "FailedDiscoveryCheck", f'failing or missing response from {url}: Get "{url}": dial tcp '
                                                     f"{ip}:{port}: connect: connection refused")
                async with s.get(base + FLUNDERS.decode(), ssl=ctx) as r:
                    assert (r.status, await r.text()) == (503, "service unavailable\n")
        finally:
            if not stopped:
                await runner.cleanup()


async def unavailable_once_checked(s: aiohttp.ClientSession, base: str, ctx: ssl.SSLContext) -> dict:
    """The APIService's Available condition once it is False: a change to its Service has the
    availability controller check it at once."""
    async with s.patch(f"{base}/api/v1/namespaces/default/services/api", ssl=ctx,
                       json={"metadata": {"labels": {"poked": "yes"}}},
                       headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200, await r.text()
    for _ in tries():
        async with s.get(f"{base}/apis/apiregistration.k8s.io/v1/apiservices/{VERSION}.{GROUP}", ssl=ctx) as r:
            [cond] = [c for c in (await r.json())["status"]["conditions"] if c["type"] == "Available"]
        if cond["status"] == "False":
            break
    return cond


async def test_an_extension_server_at_an_ipv6_endpoint(tmp_path):
    """The availability check and the proxy dial an IPv6 endpoint as net.JoinHostPort joins it, in brackets;
    the URL and the dial errors name it so too."""
    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server(ip=host_ipv6())
        stopped = False
        try:
            await register(server, ctx, ip, port)
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                async with s.get(base + FLUNDERS.decode(), ssl=ctx) as r:
                    assert (r.status, await r.json()) == (200, {"expect": None, "length": 0})
                await runner.cleanup()
                stopped = True
                async with s.get(base + FLUNDERS.decode(), ssl=ctx) as r:
                    assert (r.status, await r.text()) == (503, f"dial tcp [{ip}]:{port}: connect: connection refused\n")
                cond = await unavailable_once_checked(s, base, ctx)
                url = f"https://[{ip}]:{port}/apis/{GROUP}/{VERSION}"
                assert cond["message"] == (f'failing or missing response from {url}: Get "{url}": dial tcp '
                                           f"[{ip}]:{port}: connect: connection refused")
        finally:
            if not stopped:
                await runner.cleanup()


async def test_an_extension_server_the_ca_bundle_does_not_trust(tmp_path):
    """The availability check does not verify the extension server (a best-effort GET with the front-proxy
    certificate), so the APIService is Available; the proxy verifies with the caBundle, and its transport's
    TLS error is the responder's 503."""
    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server()
        try:
            other = base64.b64encode(new_ca("another-ca").cert_pem).decode()
            await register(server, ctx, ip, port, tls={"caBundle": other})
            async with aiohttp.ClientSession() as s:
                async with s.get(f"https://127.0.0.1:{server.port}" + FLUNDERS.decode(), ssl=ctx) as r:
                    assert (r.status, await r.text()) == (
                        503, "tls: failed to verify certificate: x509: certificate signed by unknown authority\n")
        finally:
            await runner.cleanup()


async def test_informational_answers_of_an_extension_server_reach_the_client(tmp_path):
    """httputil.ReverseProxy's Got1xxResponse: each 1xx the extension server sends before its answer (102
    Processing, 103 Early Hints) goes to the client as it comes, with its headers and Go's status text, and
    the answer follows whole."""
    hints = f"/apis/{GROUP}/{VERSION}/namespaces/default/hints"

    async def early(request: web.Request):
        await request.writer.write(b"HTTP/1.1 102 Processing\r\n\r\n")
        await request.writer.write(b"HTTP/1.1 103 Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
        return web.json_response({"kind": "Hinted"}, status=202)

    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server([("GET", hints, early)])
        try:
            await register(server, ctx, ip, port)
            c = await Conn.open(server, ctx)
            try:
                c.writer.write(f"GET {hints} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
                interim = [await asyncio.wait_for(c.reader.readline(), 10) for _ in range(5)]
                assert interim == [b"HTTP/1.1 102 Processing\r\n", b"\r\n", b"HTTP/1.1 103 Early Hints\r\n",
                                   b"Link: </style.css>; rel=preload\r\n", b"\r\n"]
                code, out = await answer(c)
                assert (code, orjson.loads(out)) == (202, {"kind": "Hinted"})
            finally:
                c.close()
        finally:
            await runner.cleanup()


async def test_a_proxied_answer_carries_the_pf_and_cache_headers_before_the_extension_servers(tmp_path):
    """WithPriorityAndFairness sets the matched FlowSchema's and level's UIDs, and WithCacheControl
    `no-cache, private`, before the proxy runs, and httputil.ReverseProxy adds the backend's headers to
    them: a streamed answer has ours, then an extension server's own (one with APF of its own answers
    with its UIDs too; one that says how long to keep its answer is still marked uncacheable first)."""
    pf = "/apis/wardle.example.com/v1alpha1/namespaces/default/pf"

    async def own_pf(_):
        return web.json_response({}, headers={"X-Kubernetes-PF-FlowSchema-UID": "theirs", "Cache-Control": "max-age=60"})

    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server(routes=[("GET", pf, own_pf)])
        try:
            await register(server, ctx, ip, port)
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                async with s.get(f"{base}/api/v1/namespaces/default/configmaps", ssl=ctx) as r:
                    ours = {k: r.headers[k] for k in ("X-Kubernetes-PF-FlowSchema-UID", "X-Kubernetes-PF-PriorityLevel-UID")}
                async with s.get(base + FLUNDERS.decode(), ssl=ctx) as r:
                    assert r.status == 200
                    assert {k: r.headers.getall(k) for k in ours} == {k: [v] for k, v in ours.items()}
                    assert r.headers.getall("Cache-Control") == ["no-cache, private"]
                async with s.get(base + pf, ssl=ctx) as r:
                    assert r.status == 200
                    assert r.headers.getall("X-Kubernetes-PF-FlowSchema-UID") == [
                        ours["X-Kubernetes-PF-FlowSchema-UID"], "theirs"]
                    assert r.headers.getall("Cache-Control") == ["no-cache, private", "max-age=60"]
        finally:
            await runner.cleanup()


async def test_a_watch_proxied_to_an_extension_server_lets_its_seat_go_as_it_is_delegated(tmp_path):
    """kube-aggregator signals RequestDelegated before its proxy asks the extension server: a watch's APF
    seat and executing count go then, though the extension server has not answered yet."""
    fischers = f"/apis/{GROUP}/{VERSION}/namespaces/default/fischers"
    asked, answer_now = asyncio.Event(), asyncio.Event()

    async def slow_watch(request: web.Request):
        asked.set()
        await answer_now.wait()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(b'{"type":"ADDED","object":{}}\n')
        await resp.write_eof()
        return resp

    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server([("GET", fischers, slow_watch)])
        try:
            await register(server, ctx, ip, port)
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                await allow_alice(s, base, ctx, "watch", ["fischers"])
                alice = user_context(server.pki, tmp_path, "alice")
                watch = asyncio.create_task(s.get(f"{base}{fischers}?watch=true", ssl=alice))
                try:
                    await asyncio.wait_for(asked.wait(), 30)
                    assert executing(server, "global-default") == 0
                finally:
                    answer_now.set()
                async with await watch as r:
                    assert (r.status, await r.content.readline()) == (200, b'{"type":"ADDED","object":{}}\n')
                    assert r.headers["X-Kubernetes-PF-PriorityLevel-UID"]
        finally:
            await runner.cleanup()


async def test_an_extension_server_that_never_answers_is_timed_out(tmp_path):
    """A request to an aggregated API is not long-running, so kube-apiserver's request deadline bounds it
    (the `timeout` query parameter below --request-timeout's 60 s): past it, before the extension server
    answers, the timeout filter's 504. Ours waited for the extension server as long as it kept the
    connection open. A `timeout` that does not parse is WithRequestDeadline's 400 on any request."""
    hung = asyncio.Event()

    async def never(_):
        await hung.wait()  # (set at the end, so that the extension server can stop)
        return web.json_response({})

    sleepers = f"/apis/{GROUP}/{VERSION}/namespaces/default/sleepers"
    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server(routes=[("GET", sleepers, never)])
        try:
            await register(server, ctx, ip, port)
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:  # (not forever, if it hangs)
                async with s.get(base + sleepers, params={"timeout": "1s"}, ssl=ctx) as r:
                    assert (r.status, await r.json(content_type=None)) == (504, {  # (the server's timeout filter's)
                        "metadata": {}, "status": "Failure",
                        "message": "Timeout: request did not complete within the allotted timeout",
                        "reason": "Timeout", "details": {}, "code": 504})
                for path in (sleepers, "/api/v1/namespaces"):
                    async with s.get(base + path, params={"timeout": "foo"}, ssl=ctx) as r:
                        assert (r.status, (await r.json())["message"]) == (
                            400, 'invalid timeout specified in the request URL - time: invalid duration "foo"')
                async with s.get(base + "/api/v1/namespaces", params={"timeout": "foo", "watch": "1",
                                                                      "timeoutSeconds": "1"}, ssl=ctx) as r:
                    assert r.status == 200  # (a watch is long-running: the parameter is not read)
        finally:
            hung.set()
            await runner.cleanup()


async def test_an_extension_server_that_cuts_its_body_short(tmp_path, caplog):
    """An extension server that closes its connection before the body its Content-Length promised:
    httputil.ReverseProxy has sent the head, logs the read error during body copy and cuts the client's
    connection (http.ErrAbortHandler), so the client gets a short body; it was an internal error and its
    traceback (fuzz60's misbehaving metrics adapter)."""
    async def short(request: web.Request):
        resp = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "100000"})
        await resp.prepare(request)
        await resp.write(b'{"kind": "FlunderList", "items": [' + b" " * 5000)
        request.transport.close()
        return resp

    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server([("GET", FLUNDERS.decode() + "/short", short)])
        try:
            await register(server, ctx, ip, port)
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                async with s.get(base + FLUNDERS.decode() + "/short", ssl=ctx) as r:
                    assert r.status == 200
                    with pytest.raises(aiohttp.ClientPayloadError):
                        await r.read()
                async with s.get(base + "/readyz", ssl=ctx) as r:
                    assert r.status == 200
        finally:
            await runner.cleanup()
    assert [r.getMessage() for r in caplog.records if "internal error" in r.getMessage()] == []
    assert any(r.getMessage().startswith("httputil: ReverseProxy read error during body copy: ")
               for r in caplog.records)


async def test_a_proxied_answer_keeps_the_extension_servers_content_length(tmp_path):
    """The proxy relays the body as the extension server sent it, so it keeps its Content-Length (as
    the UpgradeAwareHandler copies the backend's headers) instead of answering chunked; a body sent
    chunked is relayed chunked."""
    async def streamed(request: web.Request):
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(b'{"kind": "FlunderList", ')
        await resp.write(b'"items": []}')
        await resp.write_eof()
        return resp

    async with served(tmp_path) as (server, ctx):
        runner, ip, port = await extension_server([("GET", FLUNDERS.decode() + "/streamed", streamed)])
        try:
            await register(server, ctx, ip, port)
            base = f"https://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                async with s.get(base + FLUNDERS.decode(), ssl=ctx) as r:
                    body = await r.read()
                    assert r.status == 200 and orjson.loads(body) == {"expect": None, "length": 0}
                    assert r.headers.get("Content-Length") == str(len(body))
                    assert "Transfer-Encoding" not in r.headers
                async with s.get(base + FLUNDERS.decode() + "/streamed", ssl=ctx) as r:
                    assert r.status == 200 and await r.read() == b'{"kind": "FlunderList", "items": []}'
                    assert r.headers.get("Transfer-Encoding") == "chunked" and "Content-Length" not in r.headers
        finally:
            await runner.cleanup()
