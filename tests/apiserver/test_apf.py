"""API Priority and Fairness: classification by upstream's bootstrap
configuration, seats and queues, and the 429 a full level answers."""

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from nanokube.apiserver.apf import FlowControl, PriorityLevel
from nanokube.apiserver.auth.authorizer import USER, attributes_for
from nanokube.apiserver.flowcontrol import FLOW_SCHEMAS, PRIORITY_LEVELS
from nanokube.machinery.user import User
from tests.controllers import DEADLINE, tries


class Inf:
    def __init__(self, objs):
        self.objs = objs
        self.handlers = []

    def list(self):
        return list(self.objs)

    def add_handlers(self, on_add=None, on_update=None, on_delete=None):
        self.handlers.append(on_add)


def objects(specs):
    return [{"metadata": {"name": n, "uid": f"uid-{n}", "resourceVersion": "1"}, "spec": s} for n, s in specs.items()]


def control(levels=PRIORITY_LEVELS, concurrency=600):
    return FlowControl(Inf(objects(FLOW_SCHEMAS)), Inf(objects(levels)), concurrency)


def classify(fc, user, method, path, query=None):
    fs, pl = fc.classify(user, attributes_for(method, path, query or {}))
    return fs["metadata"]["name"], pl["metadata"]["name"]


ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))
NODE = User("system:node:gpu-0", ("system:nodes", "system:authenticated"))
KCM = User("system:kube-controller-manager", ("system:authenticated",))
SA = User("system:serviceaccount:default:app", ("system:serviceaccounts", "system:serviceaccounts:default",
                                               "system:authenticated"))
KUBE_SYSTEM_SA = User("system:serviceaccount:kube-system:coredns",
                      ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))
ALICE = User("alice", ("system:authenticated",))


def test_classification_follows_the_bootstrap_configuration():
    fc = control()
    assert classify(fc, ADMIN, "GET", "/api/v1/pods") == ("exempt", "exempt")
    assert classify(fc, ALICE, "GET", "/healthz") == ("probes", "exempt")
    assert classify(fc, NODE, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-0") == (
        "system-node-high", "node-high")
    assert classify(fc, NODE, "GET", "/api/v1/namespaces/default/pods") == ("system-nodes", "system")
    assert classify(fc, KCM, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kcm") == (
        "system-leader-election", "leader-election")
    assert classify(fc, KCM, "GET", "/apis/apps/v1/deployments") == ("kube-controller-manager", "workload-high")
    assert classify(fc, KUBE_SYSTEM_SA, "GET", "/api/v1/services") == ("kube-system-service-accounts", "workload-high")
    assert classify(fc, SA, "GET", "/api/v1/namespaces/default/configmaps") == ("service-accounts", "workload-low")
    assert classify(fc, ALICE, "GET", "/api/v1/namespaces/default/configmaps") == ("global-default", "global-default")


def test_seats_are_shared_by_nominal_concurrency_shares():
    fc = control(concurrency=245)  # the suggested levels' shares add up to 245
    fc._configuration()
    assert {n: lvl.seats for n, lvl in fc._state.items()} == {
        "catch-all": 5, "system": 30, "node-high": 40, "leader-election": 10, "workload-high": 40,
        "workload-low": 100, "global-default": 20}
    assert fc._state["global-default"].max_waiting == 128 * 50 and fc._state["catch-all"].max_waiting == 0


def test_a_full_level_queues_then_hands_its_seat_on():
    async def run():
        level = PriorityLevel(1, 1)
        assert await level.acquire()
        waiter = asyncio.create_task(level.acquire())
        await asyncio.sleep(0)
        assert not await level.acquire()  # one seat busy, one waiting: full
        level.release()
        assert await waiter and level.executing == 1
        level.release()
        assert level.executing == 0
    asyncio.run(run())


#: global-default, alice's level, with one seat and no queue
ONE_SEAT = {**PRIORITY_LEVELS, "global-default": {"type": "Limited", "limited": {
    "nominalConcurrencyShares": 1, "lendablePercent": 0, "limitResponse": {"type": "Reject"}}}}


@web.middleware
async def as_alice(request, handler):
    """Every request authenticated as alice (global-default's)."""
    request[USER] = ALICE
    return await handler(request)


def at_global_default(family) -> float:
    """A metric family's value at priority level global-default."""
    return sum(s.value for m in family.collect() for s in m.samples if s.labels["priority_level"] == "global-default")


async def until_executing(fc: FlowControl, n: int) -> None:
    """Until global-default has `n` requests executing."""
    for _ in tries():
        if at_global_default(fc.executing) == n:
            return
        await asyncio.sleep(0.01)
    assert at_global_default(fc.executing) == n


def test_middleware_answers_429_with_retry_after():
    fc = control(ONE_SEAT, concurrency=1)
    gate = asyncio.Event()

    async def handler(request):
        await gate.wait()
        return web.json_response({})

    async def run():
        app = web.Application(middlewares=[as_alice, fc.middleware])
        app.router.add_get("/{tail:.*}", handler)
        async with TestClient(TestServer(app)) as c:
            first = asyncio.create_task(c.get("/api/v1/namespaces/default/configmaps"))
            await until_executing(fc, 1)
            second = await c.get("/api/v1/namespaces/default/configmaps")
            assert second.status == 429 and second.headers["Retry-After"] == "1"
            body = await second.json()
            assert (body["reason"], body["message"]) == ("TooManyRequests", "Too many requests, please try again later.")
            assert second.headers["X-Kubernetes-PF-FlowSchema-UID"] == "uid-global-default"
            gate.set()
            ok = await first
            assert ok.status == 200 and ok.headers["X-Kubernetes-PF-PriorityLevel-UID"] == "uid-global-default"
    asyncio.run(run())


def test_a_refused_request_counts_as_a_termination_and_a_request():
    """WithPriorityAndFairness records each 429 in apiserver_request_terminations_total
    (RecordRequestTermination) and, as its handler never counts it, in apiserver_request_total
    (RecordDroppedRequest), under the request's labels: a collection's GET is a LIST."""
    from nanokube.apiserver.metrics import APIMetrics

    metrics = APIMetrics()
    fc = FlowControl(Inf(objects(FLOW_SCHEMAS)), Inf(objects(ONE_SEAT)), 1, refused=metrics.refused)
    gate = asyncio.Event()

    async def handler(request):
        await gate.wait()
        return web.json_response({})

    def terminations() -> list:
        return [(s.labels, s.value) for m in metrics.terminations.collect() for s in m.samples
                if s.name == "apiserver_request_terminations_total"]

    def requests() -> list:
        return [(s.labels, s.value) for m in metrics.requests.collect() for s in m.samples
                if s.name == "apiserver_request_total"]

    async def run():
        app = web.Application(middlewares=[as_alice, fc.middleware])
        app.router.add_get("/{tail:.*}", handler)
        async with TestClient(TestServer(app)) as c:
            first = asyncio.create_task(c.get("/apis/apps/v1/namespaces/default/deployments"))
            await until_executing(fc, 1)
            assert terminations() == [] and requests() == []
            assert (await c.get("/apis/apps/v1/namespaces/default/deployments", params={"dryRun": "All"})).status == 429
            gate.set()
            assert (await first).status == 200
        assert terminations() == [({"verb": "LIST", "group": "apps", "version": "v1", "resource": "deployments",
                                    "subresource": "", "scope": "namespace", "component": "apiserver",
                                    "code": "429"}, 1.0)]
        assert requests() == [({"verb": "LIST", "dry_run": "All", "group": "apps", "version": "v1",
                                "resource": "deployments", "subresource": "", "scope": "namespace",
                                "component": "apiserver", "code": "429"}, 1.0)]
    asyncio.run(run())


def test_long_running_requests_other_than_watches_are_left_out_of_apf():
    """WithPriorityAndFairness skips what the LongRunningFunc names (exec, attach, portforward, proxy and log
    subresources, a pods/log read that does not follow too) unless it is a watch: such a request takes no
    seat, is neither dispatched nor executing in the metrics, and gets no PF headers, so a full level still
    serves them; a console on an aggregated API is no such request and waits for a seat like any other."""
    fc = control(ONE_SEAT, concurrency=1)
    gate = asyncio.Event()

    async def handler(request):
        if request.path.endswith("/configmaps"):
            await gate.wait()
        return web.json_response({})

    async def run():
        app = web.Application(middlewares=[as_alice, fc.middleware])
        app.router.add_get("/{tail:.*}", handler)
        async with TestClient(TestServer(app)) as c:
            holder = asyncio.create_task(c.get("/api/v1/namespaces/default/configmaps"))
            await until_executing(fc, 1)
            dispatched = at_global_default(fc.dispatched)
            assert dispatched == 1  # the configmaps list holds the level's one seat
            for path in ("/api/v1/namespaces/default/pods/p/exec", "/api/v1/namespaces/default/pods/p/attach",
                         "/api/v1/namespaces/default/pods/p/portforward", "/api/v1/namespaces/default/pods/p/log",
                         "/api/v1/namespaces/default/pods/p/proxy/x", "/apis/subresources.kubevirt.io/v1/namespaces/"
                         "default/virtualmachineinstances/vm/portforward/22"):
                r = await c.get(path)
                assert r.status == 200 and "X-Kubernetes-PF-FlowSchema-UID" not in r.headers, path
            assert (at_global_default(fc.dispatched), at_global_default(fc.executing)) == (dispatched, 1)
            r = await c.get("/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm/console")
            assert r.status == 429 and r.headers["X-Kubernetes-PF-FlowSchema-UID"] == "uid-global-default"
            gate.set()
            assert (await holder).status == 200
    asyncio.run(run())


def test_a_watch_waits_for_a_seat_and_holds_it_until_it_is_initialized():
    """WithPriorityAndFairness queues a watch like any request (a full level that rejects answers it 429)
    and lets its seat go once the watch is initialized, here as its head goes out, though it goes on."""
    fc = control(ONE_SEAT, concurrency=1)
    gate, registered, ended = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def handler(request):
        if "watch" not in request.query:
            await gate.wait()
            return web.json_response({})
        await registered.wait()
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b'{"type":"ADDED"}\n')
        await ended.wait()
        return resp

    async def run():
        app = web.Application(middlewares=[as_alice, fc.middleware])
        app.router.add_get("/{tail:.*}", handler)
        async with TestClient(TestServer(app)) as c:
            try:
                holder = asyncio.create_task(c.get("/api/v1/namespaces/default/configmaps"))
                await until_executing(fc, 1)
                # (a watch let through would wait for `registered`: a deadline, not a hang)
                r = await asyncio.wait_for(c.get("/api/v1/namespaces/default/configmaps", params={"watch": "true"}),
                                           DEADLINE)
                assert r.status == 429 and r.headers["X-Kubernetes-PF-PriorityLevel-UID"] == "uid-global-default"
                gate.set()
                assert (await holder).status == 200
                await until_executing(fc, 0)

                watch = asyncio.create_task(c.get("/api/v1/namespaces/default/configmaps", params={"watch": "true"}))
                await until_executing(fc, 1)  # not yet initialized: it holds the level's one seat
                r = await c.get("/api/v1/namespaces/default/configmaps")
                assert r.status == 429
                registered.set()
                w = await watch
                assert w.status == 200 and await w.content.readline() == b'{"type":"ADDED"}\n'
                assert at_global_default(fc.executing) == 0  # streaming on, its seat let go
                r = await c.get("/api/v1/namespaces/default/configmaps")
                assert r.status == 200
                ended.set()
                await w.read()
            finally:  # nothing left waiting, should an assertion fail
                for event in (gate, registered, ended):
                    event.set()
    asyncio.run(run())


def test_a_kept_classification_follows_a_changed_configuration():
    schemas = Inf(objects(FLOW_SCHEMAS))
    fc = FlowControl(schemas, Inf(objects(PRIORITY_LEVELS)))
    assert classify(fc, ALICE, "GET", "/api/v1/namespaces/a/pods/x") == ("global-default", "global-default")
    # the same request shape for another object is answered from what was kept
    assert classify(fc, ALICE, "GET", "/api/v1/namespaces/a/pods/y") == ("global-default", "global-default")
    mine = objects({"alice": {"matchingPrecedence": 10, "priorityLevelConfiguration": {"name": "workload-low"},
                              "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                                         "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                                                            "namespaces": ["a"]}]}]}})[0]
    schemas.objs.append(mine)
    for handler in schemas.handlers:
        handler(mine)
    assert classify(fc, ALICE, "GET", "/api/v1/namespaces/a/pods/x") == ("alice", "workload-low")
    assert classify(fc, ALICE, "GET", "/api/v1/namespaces/b/pods/x") == ("global-default", "global-default")
    assert classify(fc, ALICE, "GET", "/api/v1/namespaces/a/pods") == ("global-default", "global-default")  # a list


async def test_a_flow_schema_moved_to_another_priority_level_gets_a_dangling_message_naming_it(tmp_path):
    """Upstream writes the Dangling condition whenever its status, reason or message differ from
    what the reference says now: pointed from one existing priority level to another, the
    FlowSchema's message names the new one (over HTTP, the official client)."""
    import orjson
    from kubernetes import client as k8s

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        fc = k8s.FlowcontrolApiserverV1Api(api_client)
        for name in ("pl-a", "pl-b"):
            await asyncio.to_thread(fc.create_priority_level_configuration, {
                "metadata": {"name": name}, "spec": {"type": "Limited", "limited": {
                    "nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}})
        await asyncio.to_thread(fc.create_flow_schema, {"metadata": {"name": "fs"}, "spec": {
            "priorityLevelConfiguration": {"name": "pl-a"}, "matchingPrecedence": 5000}})

        async def dangling(naming: str) -> dict:
            for _ in tries():
                raw = await asyncio.to_thread(fc.read_flow_schema, "fs", _preload_content=False)
                conds = orjson.loads(raw.data).get("status", {}).get("conditions") or []
                if conds and f'"{naming}"' in conds[0]["message"]:
                    break
                await asyncio.sleep(0.02)
            return conds

        before = await dangling("pl-a")
        await asyncio.to_thread(fc.patch_flow_schema, "fs", {"spec": {"priorityLevelConfiguration": {"name": "pl-b"}}})
        after = await dangling("pl-b")
    assert [(c["type"], c["status"], c["reason"]) for c in before] == [("Dangling", "False", "Found")]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in after] == [(
        "Dangling", "False", "Found",
        'This FlowSchema references the PriorityLevelConfiguration object named "pl-b" and it exists')]


async def test_a_watch_is_answered_with_the_pf_headers_as_a_list_is(tmp_path):
    """WithPriorityAndFairness sets the matched FlowSchema's and priority level's UIDs on the response
    before the handler runs, so a watch, whose head goes out as it starts streaming, carries them too
    (over HTTP, the official client): the same UIDs as a list of the same resource, the exempt ones', and
    its Audit-Id still."""
    from kubernetes import client as k8s

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        fc = k8s.FlowcontrolApiserverV1Api(api_client)
        core = k8s.CoreV1Api(api_client)
        fs = await asyncio.to_thread(fc.read_flow_schema, "exempt")
        pl = await asyncio.to_thread(fc.read_priority_level_configuration, "exempt")
        want = {"X-Kubernetes-PF-FlowSchema-UID": fs.metadata.uid, "X-Kubernetes-PF-PriorityLevel-UID": pl.metadata.uid}
        listed = await asyncio.to_thread(core.list_namespaced_config_map, "default", _preload_content=False)
        watched = await asyncio.to_thread(core.list_namespaced_config_map, "default", watch=True, timeout_seconds=1,
                                          _preload_content=False)
        try:
            for r in (listed, watched):
                assert {k: r.headers.get(k) for k in want} == want
            assert watched.headers["Content-Type"] == "application/json" and watched.headers["Audit-Id"]
        finally:
            watched.release_conn()
