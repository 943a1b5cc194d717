"""component_server's endpoints in process: /metrics/slis records the checks the health roots run
(component-base slis, DELETE resets them), /configz serves its configurations as compact JSON."""

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, Counter

from nanokube import component_server
from nanokube.apiserver.healthz import Check
from nanokube.machinery import goserver
from nanokube.machinery.headlimit import MAX_HEADER_BYTES
from tests.component_port import component_port


class AllowAll:
    """An API server that allows every SubjectAccessReview."""

    def __init__(self):
        self.reviews = []

    async def request(self, method, path, body=None, **kw):
        self.reviews.append(body["spec"])
        return {"status": {"allowed": True}}


async def test_slis_count_the_root_checks_and_reset_on_delete():
    api = AllowAll()
    checks = [Check("ok-check", lambda: None), Check("bad", lambda: "broken")]
    app = component_server.app(component_server.DelegatedAuth(api), CollectorRegistry(), {"componentconfig": {"A": 1}},
                               lambda: checks[:1], list, lambda: checks)
    async with TestClient(TestServer(app)) as http:
        assert (await http.get("/readyz")).status == 500
        assert (await http.get("/readyz?exclude=bad")).status == 200
        assert (await http.get("/healthz")).status == 200
        assert (await http.get("/readyz/bad")).status == 500, "a check's own path is not counted"
        text = await (await http.get("/metrics/slis")).text()
        assert 'kubernetes_healthcheck{name="bad",type="readyz"} 0\n' in text
        assert 'kubernetes_healthcheck{name="ok-check",type="healthz"} 1\n' in text
        assert 'kubernetes_healthchecks_total{name="ok-check",status="success",type="readyz"} 2\n' in text
        assert 'kubernetes_healthchecks_total{name="bad",status="error",type="readyz"} 1\n' in text

        deleted = await http.delete("/metrics/slis")
        assert deleted.status == 200 and await deleted.text() == "metrics reset\n"
        assert "kubernetes_healthcheck{" not in await (await http.get("/metrics/slis")).text()
        assert {"path": "/metrics/slis", "verb": "delete"} in [r["nonResourceAttributes"] for r in api.reviews]

        got = await http.get("/configz")
        assert got.headers["Content-Type"] == "application/json"
        assert await got.text() == '{"componentconfig":{"A":1}}'
        posted = await http.post("/configz")
        assert posted.status == 200 and await posted.text() == '{"componentconfig":{"A":1}}'
        assert {"path": "/configz", "verb": "post"} in [r["nonResourceAttributes"] for r in api.reviews]


async def test_metrics_reset_and_resources_for_the_leader_only():
    """kube-scheduler's /metrics is a HandlerWithReset (DELETE runs the reset, authorized as verb delete),
    /metrics/resources answers only while the scheduler leads; a component without them serves neither
    a reset nor /metrics/resources."""
    api, resets, leading = AllowAll(), [], [False]
    pods = CollectorRegistry()
    app = component_server.app(component_server.DelegatedAuth(api), CollectorRegistry(), {}, list, list, list,
                               reset=lambda: resets.append(1), resources=lambda: pods if leading[0] else None)
    async with TestClient(TestServer(app)) as http:
        deleted = await http.delete("/metrics")
        assert deleted.status == 200 and await deleted.text() == "metrics reset\n" and resets == [1]
        assert {"path": "/metrics", "verb": "delete"} in [r["nonResourceAttributes"] for r in api.reviews]
        standby = await http.get("/metrics/resources")
        assert standby.status == 200 and await standby.text() == ""
        leading[0] = True
        served = await http.get("/metrics/resources")
        assert served.status == 200 and served.headers["Content-Type"].startswith("text/plain; version=")
    # kube-controller-manager's /metrics (legacyregistry.Handler) answers DELETE as a GET: no reset
    registry = CollectorRegistry()
    Counter("kept", "kept across a DELETE", registry=registry).inc()
    plain = component_server.app(component_server.DelegatedAuth(api), registry, {}, list)
    async with TestClient(TestServer(plain)) as http:
        deleted = await http.delete("/metrics")
        assert deleted.status == 200 and "kept_total 1\n" in await deleted.text()
        served = await (await http.get("/metrics")).text()
        assert "kept_total 1\n" in served and "_created" not in served, "client_golang's text format has no _created"
        # legacyregistry's process collector, on /metrics only
        assert "\nprocess_start_time_seconds " in served and "\nprocess_resident_memory_bytes " in served
        # and component-base's build info, which every component's main registers there
        assert ('\nkubernetes_build_info{build_date="2026-11-30T00:00:00Z",compiler="gc",git_commit="' + "0" * 40 +
                '",git_tree_state="clean",git_version="v1.37.0-nanokube",go_version="go1.25.0",major="1",minor="37",'
                'platform="linux/amd64"} 1\n') in served
        assert "process_" not in await (await http.get("/metrics/slis")).text()
        assert (await http.get("/metrics/resources")).status == 404


async def test_debug_flags_v_sets_the_log_verbosity():
    """routes.DebugFlags' /debug/flags/v: a PUT of klog's verbosity (V(4): Python's DEBUG, V(2): a
    level between it and INFO, nanokube/machinery/logs.py's map), authorized as verb put; anything but a PUT is
    a 406, a body ParseInt refuses a 400."""
    import logging

    api = AllowAll()
    app = component_server.app(component_server.DelegatedAuth(api), CollectorRegistry(), {}, list,
                               component="kube-controller-manager", flags={})
    root, before = logging.getLogger(), logging.getLogger().level
    try:
        async with TestClient(TestServer(app)) as http:
            got = await http.put("/debug/flags/v", data=b"4")
            assert got.status == 200 and await got.text() == "successfully set klog.logging.verbosity to 4\n"
            assert got.headers["Content-Type"] == "text/plain" and root.level == logging.DEBUG
            assert {"path": "/debug/flags/v", "verb": "put"} in [r["nonResourceAttributes"] for r in api.reviews]
            got = await http.put("/debug/flags/v", data=b"2")
            assert got.status == 200 and root.isEnabledFor(15) and not root.isEnabledFor(logging.DEBUG)
            got = await http.put("/debug/flags/v", data=b"4\n")
            assert got.status == 400 and await got.text() == \
                'failed set klog.logging.verbosity 4\n: strconv.ParseInt: parsing "4\\n": invalid syntax\n'
            got = await http.put("/debug/flags/v", data=b"99999999999")
            assert got.status == 400 and (await got.text()).endswith(': value out of range\n')
            got = await http.put("/debug/flags/v", data=b"9" * 5000)  # (more digits than int() takes)
            assert got.status == 400 and (await got.text()).endswith(': value out of range\n')
            got = await http.put("/debug/flags/v", data=b"0" * 5000 + b"2")  # ParseInt's leading zeros
            assert got.status == 200 and root.isEnabledFor(15) and not root.isEnabledFor(logging.DEBUG)
            got = await http.get("/debug/flags/v")
            assert got.status == 406 and await got.text() == "unsupported http method\n"
            index = await http.get("/debug/flags")
            assert index.status == 200 and "<tr>v<br>" in await index.text()
            statusz = await http.get("/statusz", headers={"Accept": "application/json;v=v1beta1;g=config.k8s.io;as=Statusz"})
            assert "/debug" not in (await statusz.json())["paths"], "unlisted, as upstream's"
    finally:
        root.setLevel(before)
    # installed with profiling only (a KubeSchedulerConfiguration's enableProfiling: false)
    quiet = component_server.app(component_server.DelegatedAuth(api), CollectorRegistry(), {}, list,
                                 component="kube-scheduler", flags={}, profiling=False)
    async with TestClient(TestServer(quiet)) as http:
        assert (await http.put("/debug/flags/v", data=b"4")).status == 404


async def test_every_metrics_endpoint_names_the_escaping_scheme_the_scrape_asks_for():
    """/metrics, /metrics/slis and /metrics/resources answer as client_golang's expfmt.Negotiate: the text
    format, escaping=underscores unless the Accept header names another scheme (Prometheus 3: allow-utf-8)."""
    app = component_server.app(component_server.DelegatedAuth(AllowAll()), CollectorRegistry(), {}, list, list, list,
                               reset=lambda: None, resources=CollectorRegistry)
    prometheus3 = "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
    async with TestClient(TestServer(app)) as http:
        for path in ("/metrics", "/metrics/slis", "/metrics/resources"):
            plain = await http.get(path)
            assert plain.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
            utf8 = await http.get(path, headers={"Accept": prometheus3})
            assert utf8.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=allow-utf-8"


async def test_the_secure_port_answers_what_its_parser_or_a_token_refuses_as_gos_server_does(caplog):
    """fuzz62 (a joined kubelet's port): a bearer token with a byte that is not UTF-8 was a 500 (the
    TokenReview could not be encoded) and every request the parser refused was an ERROR with a
    traceback. The token is reviewed with U+FFFD for the byte, as Go encodes it; the parser's refusals
    are Go's plain `400 Bad Request`, or 431 for a line past MaxHeaderBytes (1 MiB, so a request line
    of 9,000 bytes is taken, where aiohttp's own limit is 8,190), logged at V(4)."""
    import asyncio

    class Reviews:
        def __init__(self):
            self.tokens = []

        async def request(self, method, path, body=None, **kw):
            self.tokens.append(body["spec"]["token"])
            return {"status": {"authenticated": False}}

    api = Reviews()
    async with component_port(api) as (port, insecure):
        async def ask(head: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure)
            writer.write(head + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await reader.read()
            writer.close()
            return answer

        with caplog.at_level("DEBUG"):
            answer = await ask(b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer a\xe9b")
            assert answer.startswith(b"HTTP/1.1 401 ") and api.tokens == ["a\ufffdb"]
            healthy = await ask(b"GET /healthz?" + b"x" * 9000 + b" HTTP/1.1")
            assert healthy.startswith(b"HTTP/1.1 200 ")
            assert b"\r\nServer:" not in answer and b"\r\nServer:" not in healthy  # (Go's server names none)
            answer = await ask(b"GET /healthz?" + b"x" * (1 << 20) + b" HTTP/1.1")
            # (HTTP/1.0, as Go's server writes its refusals too)
            assert answer.startswith(b"HTTP/1.0 431 ") and answer.endswith(b"\r\n\r\n431 Request Header Fields Too Large")
            answer = await ask(b"GET /he\x01lthz HTTP/1.1")
            assert answer.startswith(b"HTTP/1.0 400 ") and answer.endswith(b"\r\n\r\n400 Bad Request")
        assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


class Refusing:
    """An API server that knows no token and allows no SubjectAccessReview."""

    async def request(self, method, path, body=None, **kw):
        return {"status": {"authenticated": False, "allowed": False}}


async def test_a_refusal_is_a_status_but_the_kubelets_is_its_plain_text():
    """DelegatedAuth answers an unknown token 401 and a refused request 403 with component-base's
    Status; the kubelet's port (KubeletAuth) with its own plain text (InstallAuthFilter's)."""
    from nanokube.kubelet_auth import KubeletAuth

    component = component_server.app(component_server.DelegatedAuth(Refusing()), CollectorRegistry(), {}, list)
    kubelet = component_server.app(KubeletAuth(Refusing(), "n1", ""), CollectorRegistry(), None, list)
    async with TestClient(TestServer(component)) as http:
        got = await http.get("/metrics", headers={"Authorization": "Bearer nobody-knows"})
        assert (got.status, (await got.json())["reason"]) == (401, "Unauthorized")
        got = await http.get("/metrics")
        assert (got.status, (await got.json())["reason"]) == (403, "Forbidden")
    async with TestClient(TestServer(kubelet)) as http:
        got = await http.get("/containerLogs/ns/p/c", headers={"Authorization": "Bearer nobody-knows"})
        assert (got.status, await got.text()) == (401, "Unauthorized")
        got = await http.get("/containerLogs/ns/p/c")
        assert (got.status, await got.text()) == (
            403, "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource=proxy)")


async def test_a_refused_handshake_is_closed_once_its_alert_is_sent():
    """A port with no certificate to serve yet (the kubelet before its serving certificate is
    approved) answers a ClientHello with an internal_error alert, as upstream's GetCertificate
    error, and then closes the connection: it was held open until the peer hung up or asyncio's
    60 s handshake timeout. The peer here sends its hello and only reads; 20 s is its deadline."""
    import argparse
    import asyncio
    import socket
    import ssl

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = argparse.Namespace(secure_port=port, bind_address="127.0.0.1")
    app = component_server.app(component_server.DelegatedAuth(AllowAll()), CollectorRegistry(), {}, list)
    runner = await component_server.serve(args, app, "test", tls=component_server.tls_context("", "", self_signed=False))
    hello = ssl.MemoryBIO()
    client = ssl._create_unverified_context().wrap_bio(ssl.MemoryBIO(), hello)
    try:
        client.do_handshake()
    except ssl.SSLWantReadError:
        pass
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(hello.read())
        answer = await asyncio.wait_for(reader.read(), 20)  # to the server's end of the stream
        # a plaintext TLS alert record: fatal (2), internal_error (80)
        assert answer == bytes([0x15, 0x03, 0x03, 0x00, 0x02, 2, 80])
    finally:
        writer.close()
        await runner.cleanup()


async def test_the_aiohttp_hooks_the_quiet_handler_relies_on_are_there():
    """aiohttp (pinned at 3.14.5) has no public way to choose a connection's RequestHandler, which
    Go's answers to what the parser refuses need (the test above): component_server's _Runner
    overrides BaseRunner._make_server and reads the server's request_handler, request_factory and
    handler_cancellation, its _QuietServer is the protocol factory (Server.__call__) and its _Quiet
    overrides RequestHandler.handle_error (machinery/goserver.py). An upgrade that renames or reshapes any of them fails
    here by name, not as aiohttp's own tracebacks and 400s back on the secure ports."""
    import inspect

    from aiohttp import web
    from aiohttp.web_protocol import RequestHandler

    assert inspect.iscoroutinefunction(web.AppRunner._make_server), "aiohttp's runners make their server elsewhere"
    assert list(inspect.signature(RequestHandler.handle_error).parameters) == [
        "self", "request", "status", "exc", "message"], "RequestHandler.handle_error changed shape"
    assert {"request_factory", "handler_cancellation", "loop"} <= set(inspect.signature(web.Server.__init__).parameters)
    app = component_server.app(component_server.DelegatedAuth(AllowAll()), CollectorRegistry(), {}, list)
    runner = goserver._Runner(app, access_log=None, max_line_size=MAX_HEADER_BYTES)
    await runner.setup()
    try:
        assert type(runner.server) is goserver._QuietServer
        assert runner.server.handler_args == {"access_log": None, "max_line_size": MAX_HEADER_BYTES}
        assert type(runner.server()) is goserver._Quiet  # what a TCPSite's connections are made by
    finally:
        await runner.cleanup()


async def test_plain_http_on_the_secure_port_is_answered_as_gos_server_answers_it():
    """fuzz65: as the API server's port (tests/apiserver/test_serving.py), a component's secure port answers
    a request sent without TLS with Go's plain 400 on the bare connection, where it closed it unanswered,
    and still serves TLS."""
    import asyncio

    async with component_port() as (port, insecure):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        plain = await asyncio.wait_for(reader.read(), 20)
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=insecure)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        served = await asyncio.wait_for(reader.read(), 20)
        writer.close()
    assert plain == b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    assert served.startswith(b"HTTP/1.1 200 ") and served.endswith(b"\r\n\r\nok")
