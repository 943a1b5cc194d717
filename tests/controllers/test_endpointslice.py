import asyncio

import pytest

from nanokube.machinery.errors import APIError
from nanokube.controllers.base import TURN
from nanokube.controllers.endpointslice import (
    CONTROLLER_NAME,
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    EndpointSliceController,
    find_port,
    plan_slices,
)
from tests.controllers import eventually, make_stack, turns_during

NOW = "2026-01-01T00:00:00Z"
TRIGGER = "endpoints.kubernetes.io/last-change-trigger-time"


async def stop(ctrl):
    """Controller.stop, re-cancelling workers (see test_replicaset.stop)."""
    ctrl.queue.shutdown()
    pending = set(ctrl._tasks)
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.1)


@pytest.fixture
async def env():
    s = await make_stack()
    c = s.client
    await c.resource("", "v1", "nodes").create({"metadata": {"name": "n1", "labels": {
        "topology.kubernetes.io/zone": "zone-a"}}})
    ctrl = EndpointSliceController(c, max_endpoints_per_slice=3)
    await ctrl.start()
    yield c, ctrl
    await stop(ctrl)
    await s.close()


def service(name="web", selector=None, ports=None, cluster_ip="", labels=None):
    spec = {"selector": selector if selector is not None else {"app": name},
            "ports": ports if ports is not None else [{"name": "http", "port": 80, "targetPort": "http"}]}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default",
                                                               "labels": labels or {}}, "spec": spec}


async def add_pod(c, name, ip, app="web", ready=True, port=8080, node="n1"):
    pods = c.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
                       "spec": {"nodeName": node, "containers": [
                           {"name": "c", "image": "nginx", "ports": [{"name": "http", "containerPort": port}]}]}})
    await set_status(c, name, ip, ready)


async def set_status(c, name, ip, ready):
    cond = [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": NOW}]
    await c.resource("", "v1", "pods").patch(name, {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                                                               "conditions": cond}},
                                             namespace="default", subresource="status")


async def slices_of(c, svc):
    items, _ = await c.resource("discovery.k8s.io", "v1", "endpointslices").list(
        "default", label_selector=f"{SERVICE_NAME_LABEL}={svc}")
    return items


def addresses(slices, ready_only=False):
    return sorted(ep["addresses"][0] for sl in slices for ep in sl.get("endpoints") or []
                  if not ready_only or ep["conditions"]["ready"])


def wait_addresses(c, svc, want, ready_only=False):
    async def check():
        got = await slices_of(c, svc)
        return got if addresses(got, ready_only) == sorted(want) else None
    return eventually(check)


async def test_slice_shape_follows_upstream(env):
    c, _ = env
    svc = await c.resource("", "v1", "services").create(service(labels={"tier": "front"}))
    await add_pod(c, "a", "10.244.1.2")
    await add_pod(c, "b", "10.244.1.3", ready=False)
    [sl] = await wait_addresses(c, "web", ["10.244.1.2", "10.244.1.3"])
    md = sl["metadata"]
    assert md["name"].startswith("web-") and md["generateName"] == "web-"
    assert md["labels"] == {"tier": "front", SERVICE_NAME_LABEL: "web", MANAGED_BY_LABEL: CONTROLLER_NAME}
    assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Service", "name": "web",
                                      "uid": svc["metadata"]["uid"], "controller": True,
                                      "blockOwnerDeletion": True}]
    assert sl["addressType"] == "IPv4"
    assert sl["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    eps = {ep["addresses"][0]: ep for ep in sl["endpoints"]}
    a = eps["10.244.1.2"]
    assert a["conditions"] == {"ready": True, "serving": True, "terminating": False}
    assert a["nodeName"] == "n1" and a["zone"] == "zone-a"
    assert a["targetRef"]["kind"] == "Pod" and a["targetRef"]["name"] == "a"
    assert eps["10.244.1.3"]["conditions"] == {"ready": False, "serving": False, "terminating": False}


async def test_a_nodes_new_zone_reaches_its_endpoints_at_their_services_next_sync(env):
    """Upstream's node handlers refresh only the topology-hints cache: a zone label's change syncs no
    service, and the endpoints on the node show the new zone when their service is next synced."""
    c, ctrl = env
    nodes = c.resource("", "v1", "nodes")
    await nodes.create({"metadata": {"name": "n2", "labels": {"topology.kubernetes.io/zone": "zone-b"}}})
    await c.resource("", "v1", "services").create(service())
    await add_pod(c, "a", "10.244.1.2")
    await add_pod(c, "b", "10.244.2.2", node="n2")
    await wait_addresses(c, "web", ["10.244.1.2", "10.244.2.2"])

    async def zones():
        return {ep["nodeName"]: ep.get("zone") for sl in await slices_of(c, "web") for ep in sl["endpoints"]}

    async def idle():
        return not len(ctrl.queue) and not ctrl.queue._processing
    await eventually(idle)
    await nodes.patch("n2", {"metadata": {"labels": {"topology.kubernetes.io/zone": "zone-c"}}})

    async def seen():
        return ctrl.node_inf.get("n2")["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-c"
    await eventually(seen)
    assert await idle() and await zones() == {"n1": "zone-a", "n2": "zone-b"}
    await set_status(c, "b", "10.244.2.2", ready=False)  # its service's next sync

    async def rezoned():
        got = await zones()
        return got if got == {"n1": "zone-a", "n2": "zone-c"} else None
    assert await eventually(rezoned) == {"n1": "zone-a", "n2": "zone-c"}


async def test_traffic_distribution_hints_follow_the_field(env):
    """spec.trafficDistribution hints each ready endpoint for its zone (PreferClose, PreferSameZone)
    and also its node (PreferSameNode); a pod not ready or on a node without a zone gets none;
    topology-mode Auto (here without hints: no node is ready) and removing the field clear them."""
    c, _ = env
    await c.resource("", "v1", "nodes").create({"metadata": {"name": "n2"}})
    svcs = c.resource("", "v1", "services")
    await svcs.create({**service(), "spec": {**service()["spec"], "trafficDistribution": "PreferClose"}})
    await add_pod(c, "a", "10.244.1.2")
    await add_pod(c, "b", "10.244.1.3", ready=False)
    await add_pod(c, "c", "10.244.2.2", node="n2")
    await wait_addresses(c, "web", ["10.244.1.2", "10.244.1.3", "10.244.2.2"])

    def waiting_for(want):
        async def check():
            got = {ep["addresses"][0]: ep.get("hints") for sl in await slices_of(c, "web") for ep in sl["endpoints"]}
            return got if got == want else None
        return eventually(check)
    zone_a = {"forZones": [{"name": "zone-a"}]}
    assert await waiting_for({"10.244.1.2": zone_a, "10.244.1.3": None, "10.244.2.2": None})
    await svcs.patch("web", {"spec": {"trafficDistribution": "PreferSameNode"}}, namespace="default")
    assert await waiting_for({"10.244.1.2": {**zone_a, "forNodes": [{"name": "n1"}]}, "10.244.1.3": None,
                              "10.244.2.2": {"forNodes": [{"name": "n2"}]}})
    await svcs.patch("web", {"metadata": {"annotations": {"service.kubernetes.io/topology-mode": "Auto"}}},
                     namespace="default")
    assert await waiting_for({"10.244.1.2": None, "10.244.1.3": None, "10.244.2.2": None})
    await svcs.patch("web", {"metadata": {"annotations": {"service.kubernetes.io/topology-mode": None}},
                             "spec": {"trafficDistribution": "PreferSameZone"}}, namespace="default")
    assert await waiting_for({"10.244.1.2": zone_a, "10.244.1.3": None, "10.244.2.2": None})
    await svcs.patch("web", {"spec": {"trafficDistribution": None}}, namespace="default")
    assert await waiting_for({"10.244.1.2": None, "10.244.1.3": None, "10.244.2.2": None})


async def test_endpoints_mirror_the_service(env):
    c, _ = env
    await c.resource("", "v1", "services").create(service())
    await add_pod(c, "a", "10.244.1.2")
    await add_pod(c, "b", "10.244.1.3", ready=False)

    async def check():
        try:
            ep = await c.resource("", "v1", "endpoints").get("web", "default")
        except APIError:
            return None
        s = ep.get("subsets") or []
        return ep if s and s[0].get("addresses") and s[0].get("notReadyAddresses") else None
    ep = await eventually(check)
    [subset] = ep["subsets"]
    assert [a["ip"] for a in subset["addresses"]] == ["10.244.1.2"]
    assert [a["ip"] for a in subset["notReadyAddresses"]] == ["10.244.1.3"]
    assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert ep["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"] == "true"
    await c.resource("", "v1", "services").delete("web", "default")

    async def gone():
        try:
            await c.resource("", "v1", "endpoints").get("web", "default")
        except APIError as e:
            return e.code == 404
    await eventually(gone)


async def test_at_most_max_per_slice_and_minimal_churn(env):
    c, _ = env
    await c.resource("", "v1", "services").create(service())
    for i in range(7):
        await add_pod(c, f"p{i}", f"10.244.1.{10 + i}")
    got = await wait_addresses(c, "web", [f"10.244.1.{10 + i}" for i in range(7)])
    assert sorted(len(sl["endpoints"]) for sl in got) == [1, 3, 3]
    before = {sl["metadata"]["name"]: sl["metadata"]["resourceVersion"] for sl in got}
    holder = next(sl["metadata"]["name"] for sl in got
                  if "10.244.1.12" in addresses([sl]))
    await c.resource("", "v1", "pods").delete("p2", "default", grace_period_seconds=0)
    got = await wait_addresses(c, "web", [f"10.244.1.{10 + i}" for i in range(7) if i != 2])
    after = {sl["metadata"]["name"]: sl["metadata"]["resourceVersion"] for sl in got}
    changed = {n for n in after if after[n] != before.get(n)}
    assert changed == {holder}  # one slice rewritten, the others untouched
    assert all(len(sl["endpoints"]) <= 3 for sl in got)


async def test_terminating_pod_is_serving_but_not_ready(env):
    c, _ = env
    await c.resource("", "v1", "services").create(service())
    pods = c.resource("", "v1", "pods")
    await add_pod(c, "a", "10.244.1.2")
    await pods.patch("a", {"metadata": {"finalizers": ["test/hold"]}}, namespace="default")
    await wait_addresses(c, "web", ["10.244.1.2"], ready_only=True)
    await pods.delete("a", "default", grace_period_seconds=0)

    async def check():
        [sl] = await slices_of(c, "web")
        eps = sl.get("endpoints") or []
        return eps if eps and eps[0]["conditions"]["terminating"] else None
    [ep] = await eventually(check)
    assert ep["conditions"] == {"ready": False, "serving": True, "terminating": True}
    await pods.patch("a", {"metadata": {"finalizers": None}}, namespace="default")
    await wait_addresses(c, "web", [])


async def test_no_endpoints_keeps_one_placeholder_slice(env):
    c, _ = env
    await c.resource("", "v1", "services").create(service())

    async def one():
        got = await slices_of(c, "web")
        return got if len(got) == 1 else None
    [sl] = await eventually(one)
    assert not sl.get("endpoints") and not sl.get("ports")
    await add_pod(c, "a", "10.244.1.2")
    [sl] = await wait_addresses(c, "web", ["10.244.1.2"])
    assert sl["ports"][0]["port"] == 8080


async def test_headless_service_and_unresolvable_port(env):
    c, _ = env
    await c.resource("", "v1", "services").create(service("db", cluster_ip="None",
                                                          ports=[{"name": "sql", "port": 5432, "targetPort": "sql"}]))
    await add_pod(c, "d", "10.244.1.7", app="db")
    [sl] = await wait_addresses(c, "db", ["10.244.1.7"])
    assert sl["metadata"]["labels"]["service.kubernetes.io/headless"] == ""
    assert not sl.get("ports")  # no container port named `sql`: the endpoint is listed without it


async def test_pod_relabelled_out_of_selector_is_removed(env):
    c, _ = env
    await c.resource("", "v1", "services").create(service())
    await add_pod(c, "a", "10.244.1.2")
    await add_pod(c, "b", "10.244.1.3")
    await wait_addresses(c, "web", ["10.244.1.2", "10.244.1.3"])
    await c.resource("", "v1", "pods").patch("b", {"metadata": {"labels": {"app": "other"}}}, namespace="default")
    slices = await wait_addresses(c, "web", ["10.244.1.2"])
    assert addresses(slices, False) == ["10.244.1.2"]


def test_find_port_resolves_names_and_numbers():
    pod = {"spec": {"containers": [{"ports": [{"name": "http", "containerPort": 8080},
                                              {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]}}
    assert find_port(pod, {"port": 80, "targetPort": "http"}) == 8080
    assert find_port(pod, {"port": 80, "targetPort": 9090}) == 9090
    assert find_port(pod, {"port": 53, "targetPort": "dns", "protocol": "UDP"}) == 53
    assert find_port(pod, {"port": 53, "targetPort": "dns"}) is None  # the name is UDP-only


async def test_plan_keeps_endpoints_in_place_and_fills_rewritten_slices_first():
    ports = [{"name": "", "port": 80, "protocol": "TCP"}]

    def ep(ip):
        return {"addresses": [ip], "conditions": {"ready": True}}
    full = {"metadata": {"name": "s1"}, "ports": ports, "endpoints": [ep("1"), ep("2")]}
    other = {"metadata": {"name": "s2"}, "ports": ports, "endpoints": [ep("3")]}
    from nanokube.controllers.endpointslice import _ports_key
    desired = {_ports_key(ports): {ip: ep(ip) for ip in ("2", "3", "4")}}
    updates, creates, deletes, added, removed = await plan_slices([full, other], desired, max_per_slice=2)
    assert [u["metadata"]["name"] for u in updates] == ["s1"]
    assert [e["addresses"][0] for e in updates[0]["endpoints"]] == ["2", "4"]
    assert creates == [] and deletes == []
    assert (added, removed) == (1, 1), "4 comes, 1 goes"
    updates, creates, deletes, added, removed = await plan_slices([full], {}, max_per_slice=2)
    assert deletes == [full] and updates == [] and creates == []
    assert (added, removed) == (0, 0), "as upstream's, a port set no longer desired goes uncounted"


async def test_user_endpoints_without_a_service_are_left_alone(env):
    c, ctrl = env
    eps = c.resource("", "v1", "endpoints")
    await eps.create({"metadata": {"name": "legacy", "namespace": "default"},
                      "subsets": [{"addresses": [{"ip": "10.244.9.5"}], "ports": [{"port": 80}]}]})
    async def cached():
        return ctrl.ep_inf.get("default/legacy")
    await eventually(cached)
    await ctrl.sync("default/legacy")
    got = await eps.get("legacy", "default")
    assert got["subsets"][0]["addresses"] == [{"ip": "10.244.9.5"}]


async def test_a_service_over_many_pods_is_synced_in_turns():
    """A Service's sync passes over its namespace's pods (selection, endpoints per family, slice
    plan, the legacy Endpoints' addresses) letting the loop run every TURN pods (the in-process
    controllers share the API server's loop); a second sync over 3 * TURN + 1 pods, everything current,
    writes nothing and still gets its turns."""
    s = await make_stack()
    ctrl = EndpointSliceController(s.client)
    try:
        svc = await s.client.resource("", "v1", "services").create({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
        n = 3 * TURN + 1
        pods = [{"metadata": {"name": f"web-{i}", "namespace": "default", "uid": f"u{i}", "labels": {"app": "web"}},
                 "spec": {}, "status": {"phase": "Running", "podIP": f"10.1.{i // 256}.{i % 256}",
                                        "conditions": [{"type": "Ready", "status": "True"}]}} for i in range(n)]
        pods.append({"metadata": {"name": "db", "namespace": "default", "uid": "db", "labels": {"app": "db"}},
                     "spec": {}, "status": {"phase": "Running", "podIP": "10.2.0.1"}})
        written: dict[str, dict] = {}
        ctrl.svc_inf.get = lambda key: svc if key == "default/web" else None
        ctrl.pod_inf.list_namespace = lambda ns: pods
        ctrl.slice_inf.list_namespace = lambda ns: [o for k, o in written.items() if k.startswith("slice/")]
        ctrl.slice_inf.get = lambda key: written.get(f"slice/{key}")
        ctrl.ep_inf.get = lambda key: written.get(f"ep/{key}")
        for api, kind in ((ctrl.slices, "slice"), (ctrl.endpoints, "ep")):
            for verb in ("create", "update"):
                def remember(obj, _do=getattr(api, verb), _kind=kind, **kw):
                    async def go():
                        out = await _do(obj, **kw)
                        written[f"{_kind}/default/{out['metadata']['name']}"] = out
                        return out
                    return go()
                setattr(api, verb, remember)
        await ctrl.sync("default/web")
        slices = ctrl.slice_inf.list_namespace("default")
        assert sum(len(sl["endpoints"]) for sl in slices) == n and len(slices) == -(-n // 100)
        before = dict(written)
        during, _ = await turns_during(ctrl.sync("default/web"))
        assert written == before  # nothing written
        assert during >= 4 * 3  # selection, desired, plan (10 slices a turn), addresses
        ep = written["ep/default/web"]
        assert ep["metadata"]["annotations"] == {"endpoints.kubernetes.io/over-capacity": "truncated",
                                                 TRIGGER: svc["metadata"]["creationTimestamp"]}
        assert sum(len(ss.get("addresses", [])) for ss in ep["subsets"]) == 1000
    finally:
        await s.close()


async def test_slices_and_endpoints_carry_the_last_change_trigger_time(env):
    """TriggerTimeTracker: a write carries the earliest trigger time not yet seen: the service's
    creation at first, then the Ready transition of the pod whose change caused the sync."""
    c, _ = env
    svc = await c.resource("", "v1", "services").create(service())
    created = svc["metadata"]["creationTimestamp"]

    async def placeholder():
        got = await slices_of(c, "web")
        return got if got and (got[0]["metadata"].get("annotations") or {}).get(TRIGGER) == created else None
    await eventually(placeholder)
    await add_pod(c, "a", "10.244.1.2", ready=False)
    await wait_addresses(c, "web", ["10.244.1.2"])
    ready_at = "2026-01-01T00:00:07Z"
    await c.resource("", "v1", "pods").patch("a", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": ready_at}]}},
        namespace="default", subresource="status")
    [sl] = await wait_addresses(c, "web", ["10.244.1.2"], ready_only=True)
    assert sl["metadata"]["annotations"][TRIGGER] == ready_at

    async def endpoints():
        ep = await c.resource("", "v1", "endpoints").get("web", "default")
        return ep if (ep["subsets"][0].get("addresses") if ep.get("subsets") else None) else None
    ep = await eventually(endpoints)
    assert ep["metadata"]["annotations"][TRIGGER] == ready_at
