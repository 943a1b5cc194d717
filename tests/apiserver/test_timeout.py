"""A request's deadline over HTTP, as kube-apiserver's WithRequestDeadline and
WithTimeoutForNonLongRunningRequests keep it: `?timeout=` that does not parse is a 400 on
every path, audited with no user; a request still being served at its deadline is answered
the timeout filter's 504 and its write is not stored; long-running requests have none."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.audit_policy import parse
from nanokube.apiserver.rest import GenericREST
from nanokube.apiserver.timeout import Deadlines
from nanokube.clock import VirtualClock
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context

CMS = "/api/v1/namespaces/default/configmaps"
SVCS = "/api/v1/namespaces/default/services"
INVALID = 'invalid timeout specified in the request URL - time: invalid duration "foo"'


class HeldStore(MemoryStore):
    """A memory store whose creates of keys ending in /held wait until released (a slow etcd), and
    whose writes of keys ending in /late are made at once, their answers held until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.held = asyncio.Event()

    async def create(self, key, value):
        if key.endswith("/held"):
            self.held.set()
            await self.release.wait()
        kv = await super().create(key, value)
        if key.endswith("/late"):
            self.held.set()
            await self.release.wait()
        return kv

    async def update(self, key, value, expected_mod_revision=None, prev=None):
        kv = await super().update(key, value, expected_mod_revision, prev)
        if key.endswith("/late"):
            self.held.set()
            await self.release.wait()
        return kv

    async def delete(self, key, expected_mod_revision=None, prev=None):
        kv = await super().delete(key, expected_mod_revision, prev)
        if key.endswith("/late"):
            self.held.set()
            await self.release.wait()
        return kv


@pytest.fixture
async def api(tmp_path):
    """(its store, an admin's session on it, the audit log), audited by a policy that logs every request
    at Metadata."""
    pki = ensure_pki(str(tmp_path))
    store = HeldStore()
    server = APIServer(store, pki, port=0, audit_log_path=str(tmp_path / "audit.log"),
                       audit_policy=parse({"rules": [{"level": "Metadata"}]}))
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    ctx = admin_context(pki, tmp_path)
    try:
        async with aiohttp.ClientSession(f"https://127.0.0.1:{server.port}", timeout=aiohttp.ClientTimeout(total=30),
                                         connector=aiohttp.TCPConnector(ssl=ctx)) as s:
            yield store, s, tmp_path / "audit.log"
    finally:
        store.release.set()
        await server.stop()


def events(log, **match) -> list[dict]:
    return [ev for line in log.read_bytes().splitlines()
            if all((ev := orjson.loads(line)).get(k) == v for k, v in match.items())]


@pytest.mark.parametrize("path", ["/api/v1/namespaces", CMS, "/healthz", "/readyz", "/version", "/openapi/v2",
                                  "/metrics", "/apis/metrics.k8s.io/v1beta1/nodes"])
async def test_a_timeout_that_does_not_parse_is_refused_on_every_path_and_audited_with_no_user(api, path):
    _, s, log = api
    async with s.get(path, params={"timeout": "foo"}) as r:
        assert (r.status, await r.json()) == (400, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": INVALID,
            "reason": "BadRequest", "code": 400})
        audit_id = r.headers["Audit-Id"]
    # one event, at ResponseStarted, before authentication: no user, no RequestReceived or ResponseComplete
    [event] = events(log, auditID=audit_id)
    assert (event["stage"], event["user"], event["verb"], event["responseStatus"]) == (
        "ResponseStarted", {}, "list" if path.endswith(("namespaces", "configmaps", "nodes")) else "get",
        {"metadata": {}, "code": 400, "message": INVALID})


async def test_long_running_requests_do_not_read_the_timeout(api):
    _, s, _ = api
    async with s.get(CMS, params={"timeout": "foo", "watch": "1", "timeoutSeconds": "1"}) as r:
        assert r.status == 200
        await r.read()  # (the watch ends after its timeoutSeconds)
    async with s.get(CMS, params={"timeout": "1ms", "watch": "1", "timeoutSeconds": "1"}) as r:
        assert r.status == 200
        assert await r.read() == b""  # served its second to the end, not cut after a millisecond
    async with s.get("/api/v1/namespaces/default/pods/none/log", params={"timeout": "foo"}) as r:
        assert (r.status, (await r.json())["reason"]) == (404, "NotFound")  # a log read is long-running too


async def test_a_write_past_its_timeout_is_answered_504_by_the_timeout_filter_and_not_stored(api):
    store, s, log = api
    async with s.post(CMS, params={"timeout": "1s"}, json={"metadata": {"name": "held"}}) as r:
        # the filter's Status as json.Encoder writes it: no kind nor apiVersion; Go's server sniffs its type
        assert (r.status, r.headers["Content-Type"], await r.read()) == (
            504, "text/plain; charset=utf-8",
            b'{"metadata":{},"status":"Failure","message":"Timeout: request did not complete within the allotted '
            b'timeout","reason":"Timeout","details":{},"code":504}\n')
        audit_id = r.headers["Audit-Id"]
    assert store.held.is_set()
    async with s.get(CMS + "/held") as r:
        assert r.status == 404
    # the handler's own end, audited as the REST finisher answers once the request's context is done
    [event] = events(log, auditID=audit_id, stage="ResponseComplete")
    assert event["responseStatus"] == {
        "metadata": {}, "status": "Failure", "reason": "Timeout", "code": 504,
        "message": "Timeout: request did not complete within requested timeout - context deadline exceeded"}
    # the connection, and the server, serve on
    async with s.post(CMS, params={"timeout": "1s"}, json={"metadata": {"name": "quick"}}) as r:
        assert r.status == 201


async def _created(s, name: str, spec: dict, tries: int = 500) -> int:
    """Service `name` of `spec` created, tried until the server takes it (a cancelled request's write lets
    its values go in a task of its own, once the store answers) or `tries` run out: the last answer's code."""
    for _ in range(tries):
        async with s.post(SVCS, json={"metadata": {"name": name}, "spec": spec}) as r:
            if r.status == 201:
                return 201
            status = r.status
        await asyncio.sleep(0.01)
    return status


def _node_port(port: int) -> dict:
    return {"type": "NodePort", "ports": [{"port": 80, "nodePort": port}]}


@pytest.mark.parametrize("name", ["late", "held"])
async def test_a_service_create_past_its_deadline_is_whole_either_way(api, name):
    """A Service's create past its deadline: its write, handed to the store, goes on after the 504 (as
    upstream's handler runs on), whether the store had made it (its answer late) or not yet. Once it is
    made the Service holds its ClusterIP, which no other Service is given, until it is deleted (the
    request's end once released the values of a Service stored all the same: two held one address)."""
    store, s, _ = api
    spec = {"clusterIP": "10.96.7.7", "ports": [{"port": 80}]}
    async with s.post(SVCS, params={"timeout": "1s"}, json={"metadata": {"name": name}, "spec": spec}) as r:
        assert r.status == 504
    assert store.held.is_set()
    store.release.set()
    for _ in range(500):  # the write's own task ends once the store answers
        async with s.get(f"{SVCS}/{name}") as r:
            if r.status == 200:
                break
        await asyncio.sleep(0.01)
    async with s.get(f"{SVCS}/{name}") as r:
        assert (r.status, (await r.json())["spec"]["clusterIP"]) == (200, "10.96.7.7")
    async with s.post(SVCS, json={"metadata": {"name": "other"}, "spec": spec}) as r:
        assert r.status == 422 and "provided IP is already allocated" in (await r.json())["message"]
    async with s.delete(f"{SVCS}/{name}") as r:
        assert r.status == 200
    async with s.post(SVCS, json={"metadata": {"name": "other"}, "spec": spec}) as r:
        assert r.status == 201


async def test_a_service_created_whose_answer_waits_past_its_deadline_keeps_its_cluster_ip(api, monkeypatch):
    """A Service's create made by the store whose request ends past its deadline while its answer waits
    for the watch cache: the Service keeps its ClusterIP, which no other Service is given (the
    request's end released it: two Services held one address)."""
    store, s, _ = api
    written = GenericREST._written

    async def unseen(self, res, key, *args, **kwargs):  # (the watch slow to bring the Service in)
        if key.endswith("/services/default/unseen"):
            await asyncio.Event().wait()
        return await written(self, res, key, *args, **kwargs)
    monkeypatch.setattr(GenericREST, "_written", unseen)
    store.release.set()
    spec = {"clusterIP": "10.96.7.9", "ports": [{"port": 80}]}
    async with s.post(SVCS, params={"timeout": "1s"}, json={"metadata": {"name": "unseen"}, "spec": spec}) as r:
        assert r.status == 504
    async with s.get(f"{SVCS}/unseen") as r:
        assert (r.status, (await r.json())["spec"]["clusterIP"]) == (200, "10.96.7.9")
    async with s.post(SVCS, json={"metadata": {"name": "other"}, "spec": spec}) as r:
        assert r.status == 422 and "provided IP is already allocated" in (await r.json())["message"]


async def test_a_service_delete_past_its_deadline_lets_its_cluster_ip_go(api):
    """A Service's delete past its deadline whose store write was made (its answer late): its ClusterIP
    is let go as the answered delete's would be, and another Service is given it (the request's end
    once skipped the release, and the address stayed held by no Service)."""
    store, s, _ = api
    spec = {"clusterIP": "10.96.7.8", "ports": [{"port": 80}]}
    store.release.set()
    async with s.post(SVCS, json={"metadata": {"name": "late"}, "spec": spec}) as r:
        assert r.status == 201
    store.release.clear()
    async with s.delete(f"{SVCS}/late", params={"timeout": "1s"}) as r:
        assert r.status == 504
    store.release.set()
    assert await _created(s, "other", spec) == 201
    async with s.get(f"{SVCS}/late") as r:
        assert r.status == 404


async def test_a_service_update_past_its_deadline_keeps_its_new_node_port_and_lets_the_old_go(api):
    """A Service's update moving its node port, past its deadline after its store write was made: the
    new port stays held by it and the old one is let go, as the answered update's would be (the
    request's end once undid the allocation: the new port went to another Service too, the old one
    was held by no Service)."""
    store, s, _ = api
    store.release.set()
    async with s.post(SVCS, json={"metadata": {"name": "late"}, "spec": _node_port(30710)}) as r:
        assert r.status == 201
    store.release.clear()
    async with s.patch(f"{SVCS}/late", params={"timeout": "1s"}, data=orjson.dumps(
            {"spec": {"ports": [{"port": 80, "nodePort": 30711}]}}),
            headers={"Content-Type": "application/strategic-merge-patch+json"}) as r:
        assert r.status == 504
    store.release.set()
    async with s.get(f"{SVCS}/late") as r:
        assert (await r.json())["spec"]["ports"][0]["nodePort"] == 30711
    assert await _created(s, "p30710", _node_port(30710)) == 201  # (once the write's own task finished the update)
    assert await _created(s, "p30711", _node_port(30711), tries=1) == 422


async def test_an_update_that_deletes_a_service_past_its_deadline_lets_its_old_and_new_node_ports_go(api):
    """An update that drops a terminating Service's last finalizer (so deletes it) and moves its node
    port, past its deadline after the store made the delete: both ports are let go, as the answered
    update's would be (the request's end once skipped finishing the update: the old port stayed held
    by no Service)."""
    store, s, _ = api
    store.release.set()
    async with s.post(SVCS, json={"metadata": {"name": "late", "finalizers": ["example.com/keep"]}, "spec": _node_port(30720)}) as r:
        assert r.status == 201
    async with s.delete(f"{SVCS}/late") as r:
        assert r.status == 200
    store.release.clear()
    async with s.patch(f"{SVCS}/late", params={"timeout": "1s"}, data=orjson.dumps(
            {"metadata": {"finalizers": None}, "spec": {"ports": [{"port": 80, "nodePort": 30721}]}}),
            headers={"Content-Type": "application/strategic-merge-patch+json"}) as r:
        assert r.status == 504
    store.release.set()
    assert await _created(s, "p30720", _node_port(30720)) == 201  # (once the write's own task finished the update)
    assert await _created(s, "p30721", _node_port(30721), tries=1) == 201
    async with s.get(f"{SVCS}/late") as r:
        assert r.status == 404


async def test_a_request_past_its_deadline_counts_as_a_termination(api):
    """The timeout filter's postTimeoutFn records apiserver_request_terminations_total with code 504,
    under RecordRequestTermination's labels: the method as verb (a create's POST), the request info's
    group, version, resource and subresource, CleanScope's scope; a request served in time is none."""
    from prometheus_client.parser import text_string_to_metric_families

    _, s, _ = api

    async def terminations() -> list:
        async with s.get("/metrics") as r:
            text = await r.text()
        return [(m.labels, m.value) for f in text_string_to_metric_families(text) for m in f.samples
                if m.name == "apiserver_request_terminations_total"]

    async with s.post(CMS, params={"timeout": "1s"}, json={"metadata": {"name": "quick"}}) as r:
        assert r.status == 201
    assert await terminations() == []
    async with s.post(CMS, params={"timeout": "1s"}, json={"metadata": {"name": "held"}}) as r:
        assert r.status == 504
    assert await terminations() == [({"verb": "POST", "group": "", "version": "v1", "resource": "configmaps",
                                      "subresource": "", "scope": "resource", "component": "apiserver",
                                      "code": "504"}, 1.0)]


async def test_default_deadlines_share_one_timer_and_each_comes_due_in_its_turn():
    """--request-timeout's 60 s deadlines wait in arrival order under one timer (timeout.Deadlines),
    on the injected clock: a request that ends stops counting, one still served at its 60 s gets
    the 504, and those after it keep their own time; a shorter `timeout` keeps its own timer."""
    clock = VirtualClock()
    deadlines = Deadlines(clock)
    release = {name: asyncio.Event() for name in ("a", "b", "c", "short")}

    async def served(name):
        await release[name].wait()
        return web.Response(text=name)

    def start(name, seconds=60.0):
        request = make_mocked_request("GET", "/", writer=SimpleNamespace(output_size=0))  # (nothing sent yet)
        return asyncio.ensure_future(deadlines.within(request, seconds, served(name)))

    a = start("a")
    await clock.advance(10)
    b, c = start("b"), start("c")
    short = start("short", 5.0)
    await clock.advance(5)
    assert short.done() and short.result().status == 504  # its own 5 s
    release["a"].set()
    assert (await a).text == "a"
    await clock.advance(54.9)  # 69.9 s in: b and c, 59.9 s old, are still served
    assert not b.done() and not c.done()
    release["c"].set()
    assert (await c).text == "c"
    await clock.advance(0.2)
    assert b.done() and b.result().status == 504
