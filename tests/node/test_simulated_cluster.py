"""A simulated pod's network commands read the cluster from watches the node agents share
(simulated_cluster), not lists per command: node agents talking to an API server over HTTP, the
requests counted by its apiserver_request_total, a container's endless wget loop in virtual time
seeing a Service and its ready endpoint come."""

from __future__ import annotations

import asyncio

import pytest

from nanokube.controllers.endpointslice import EndpointSliceController
from nanokube.machinery.streaming import LogOptions
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from tests.controllers import eventually
from tests.controllers.test_endpointslice import stop
from tests.node import metric_totals, nodes_over_http


@pytest.fixture
async def cluster(tmp_path):
    async with nodes_over_http(str(tmp_path)) as got:
        yield got


async def requests(server) -> dict[str, tuple[float, float]]:
    """Each network resource's LISTs (apiserver_request_total, all codes) and its watches open now
    (apiserver_longrunning_requests, verb WATCH)."""
    plurals = ("services", "endpointslices", "pods")
    got = await metric_totals(server, *(q for plural in plurals for q in (
        ("apiserver_request_total", rf'code="\d+",[^}}]*resource="{plural}",[^}}]*subresource="",verb="LIST"[^}}]*'),
        ("apiserver_longrunning_requests", rf'component="apiserver",[^}}]*resource="{plural}",[^}}]*verb="WATCH"[^}}]*'))))
    return {plural: (got[2 * i], got[2 * i + 1]) for i, plural in enumerate(plurals)}


def pod(name: str, node: str, *command: str, image: str = "busybox") -> dict:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": image, "command": list(command),
                                                       "ports": [{"name": "http", "containerPort": 8080}]}]}}


async def test_an_endless_wget_loop_sees_the_service_come_through_shared_watches(cluster):
    client, nodes, clock, server = cluster
    pods = client.resource("", "v1", "pods")
    before = await requests(server)
    assert before["services"] == (0, 0) and before["endpointslices"] == (0, 0)  # nothing watched before a command
    made = await pods.create(pod("client", "gpu-0", "sh", "-c", "while true; do wget -qO- web; sleep 1; done"))
    worker = await eventually(lambda: _worker(nodes, "gpu-0", made["metadata"]["uid"]))

    async def log() -> str:
        return worker.io.serve_log("main", LogOptions()).decode() if worker.io.logs.get("main") else ""
    await eventually(lambda: _has(log, "wget: bad address 'web'\n"))

    web = await pods.create(pod("web-1", "gpu-1", "sleep", "infinity", image="nginx"))
    ip = (await eventually(lambda: _ip(pods, "web-1")))
    await client.resource("", "v1", "services").create({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web-1"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    served = "nanokube simulated pod default/web-1 port 8080\n"
    await clock.advance(3)
    assert served not in await log()  # no endpoint yet: refused
    assert "wget: can't connect to remote host" in await log()
    await client.resource("discovery.k8s.io", "v1", "endpointslices").create({
        "metadata": {"name": "web-x", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "targetRef": {
            "kind": "Pod", "name": "web-1", "namespace": "default", "uid": web["metadata"]["uid"]}}]})
    for _ in range(3):
        await clock.advance(1)
        await asyncio.sleep(0.05)
    await eventually(lambda: _has(log, served))
    assert (await log()).endswith(served)  # each later pass reaches it

    after = await requests(server)  # one watch each for every command and pass since, no list per command
    for plural in ("services", "endpointslices"):
        assert after[plural][1] == 1 and after[plural][0] <= 1, (plural, after)
    assert after["pods"] == before["pods"], "the node manager's pod watch serves the network too"


async def test_a_pod_in_zone_a_reaches_the_endpoints_the_auto_topology_hints_give_zone_a(cluster):
    """A Service with topology-mode Auto over a pod in each zone (gpu-1 relabelled zone-b, the same
    CPU): the EndpointSlice controller hints each for its own zone, and a client on gpu-0 (zone-a)
    reaches only zone-a's, as its node's kube-proxy rules would send it. Found by topo56: the
    simulated network picked endpoints ignoring hints."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    await client.resource("", "v1", "nodes").patch("gpu-1", {"metadata": {"labels": {
        "topology.kubernetes.io/zone": "zone-b"}}})
    ctrl = EndpointSliceController(client)
    await ctrl.start()
    try:
        for name, node in (("web-a", "gpu-0"), ("web-b", "gpu-1")):
            made = pod(name, node, "sleep", "infinity", image="nginx")
            made["metadata"]["labels"] = {"app": "web"}
            await pods.create(made)
        await client.resource("", "v1", "services").create({
            "metadata": {"name": "web", "namespace": "default",
                         "annotations": {"service.kubernetes.io/topology-mode": "Auto"}},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})

        async def hinted():
            items, _ = await client.resource("discovery.k8s.io", "v1", "endpointslices").list("default")
            got = {ep["zone"]: ep.get("hints") for sl in items for ep in sl.get("endpoints") or ()}
            return got == {z: {"forZones": [{"name": z}]} for z in ("zone-a", "zone-b")}
        await eventually(hinted)
        made = await pods.create(pod("client", "gpu-0", "sh", "-c",
                                     "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do wget -qO- web; done; sleep infinity"))
        worker = await eventually(lambda: _worker(nodes, "gpu-0", made["metadata"]["uid"]))

        async def log() -> str:
            return worker.io.serve_log("main", LogOptions()).decode() if worker.io.logs.get("main") else ""
        served = "nanokube simulated pod default/web-a port 8080\n"
        await eventually(lambda: _has(log, served * 12))
        assert "web-b" not in await log()
    finally:
        await stop(ctrl)


async def test_a_readiness_probe_that_wgets_a_service_passes_once_its_endpoint_is_ready(cluster):
    """An exec readiness probe runs its network command as `kubectl exec` would, each period: the
    pod is not Ready while `web` has no name, nor an endpoint, and turns Ready once it does."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    probed = pod("client", "gpu-0", "sleep", "infinity")
    probed["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["sh", "-c", "wget -qO- -T 1 web"]}, "periodSeconds": 2}
    await pods.create(probed)

    async def ready(want: bool):
        p = await pods.get("client", "default")
        statuses = (p.get("status") or {}).get("containerStatuses") or [{}]
        return p if "running" in (statuses[0].get("state") or {}) and statuses[0]["ready"] is want else None
    await eventually(lambda: ready(False))
    web = await pods.create(pod("web-1", "gpu-1", "sleep", "infinity", image="nginx"))
    ip = await eventually(lambda: _ip(pods, "web-1"))
    await client.resource("", "v1", "services").create({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web-1"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    for _ in range(3):  # probed each 2 s: the name resolves, nothing answers yet
        await clock.advance(2)
        await asyncio.sleep(0.05)
    assert await ready(False)
    await client.resource("discovery.k8s.io", "v1", "endpointslices").create({
        "metadata": {"name": "web-x", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "targetRef": {
            "kind": "Pod", "name": "web-1", "namespace": "default", "uid": web["metadata"]["uid"]}}]})

    async def advanced_until_ready():
        await clock.advance(2)
        return await ready(True)
    p = await eventually(advanced_until_ready)
    assert {c["type"]: c["status"] for c in p["status"]["conditions"]}["Ready"] == "True"


async def _worker(nodes: NodeManager, node: str, uid: str):
    return nodes.agents[node].workers.get(uid)


async def _has(log, text: str) -> bool:
    return text in await log()


async def _ip(pods, name: str) -> str | None:
    p = await pods.get(name, "default")
    running = any("running" in (s.get("state") or {}) for s in (p.get("status") or {}).get("containerStatuses") or ())
    return running and (p.get("status") or {}).get("podIP")


async def test_a_readiness_probe_on_the_network_counts_its_thresholds(cluster):
    """successThreshold successes in a row make the container Ready, failureThreshold failures in a
    row unready, as the kubelet's probe worker counts them; each failure is an Unhealthy event with
    wget's words: a Service with no endpoint refuses at once (kube-proxy's reject), no timeout."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    ip, _ = await _web(client, pods)
    probed = pod("client", "gpu-0", "sleep", "infinity")
    probed["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["wget", "-qO-", "-T", "1", "web"]}, "periodSeconds": 2, "successThreshold": 2,
        "failureThreshold": 2}
    made = await pods.create(probed)
    worker = await eventually(lambda: _worker(nodes, "gpu-0", made["metadata"]["uid"]))
    await eventually(lambda: _probed(worker, "readinessProbe", 1))  # one success (at the start): not Ready
    assert not await _ready(pods, "client", True)
    await clock.advance(2)
    await eventually(lambda: _ready(pods, "client", True))

    await client.resource("discovery.k8s.io", "v1", "endpointslices").delete("web-x", "default")
    cluster_ip = (await client.resource("", "v1", "services").get("web", "default"))["spec"]["clusterIP"]
    refused = f"Readiness probe failed: wget: can't connect to remote host ({cluster_ip}): Connection refused\n"
    await eventually(lambda: _no_endpoint(nodes, "web"))
    await clock.advance(2)
    assert (await eventually(lambda: _unhealthy(client, "client", 1)))["message"] == refused
    assert await _ready(pods, "client", True), "one failure of two: still Ready"
    await clock.advance(2)
    await eventually(lambda: _ready(pods, "client", False))
    assert ip


async def test_an_exec_probe_that_runs_past_its_timeout_fails(cluster):
    """A probe's command that runs longer than timeoutSeconds fails in the runtime's words (ExecSync's
    deadline); within it, the same command passes once its wget is answered."""
    client, _, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    await _web(client, pods)
    probed = pod("client", "gpu-0", "sleep", "infinity")
    slow = probed["spec"]["containers"][0]
    script = ["sh", "-c", "sleep 2; wget -qO- web"]
    slow["readinessProbe"] = {"exec": {"command": script}, "periodSeconds": 5}
    patient = {**slow, "name": "patient", "ports": [],
               "readinessProbe": {"exec": {"command": script}, "periodSeconds": 5, "timeoutSeconds": 3}}
    probed["spec"]["containers"].append(patient)
    await pods.create(probed)
    event = await eventually(lambda: _unhealthy(client, "client", 1))
    assert event["message"] == 'Readiness probe failed: command "sh -c sleep 2; wget -qO- web" timed out'
    assert event["involvedObject"]["fieldPath"] == "spec.containers{main}"
    p = await eventually(lambda: _ready(pods, "client", True, 1))
    assert not p["status"]["containerStatuses"][0]["ready"]
    assert {c["type"]: c["status"] for c in p["status"]["conditions"]}["Ready"] == "False"


async def test_a_liveness_probe_on_the_network_restarts_the_container_once_its_service_goes(cluster):
    """A liveness probe wget-ing a Service passes while it answers; once its endpoint goes, each run
    fails (Unhealthy, wget's words) and after failureThreshold runs the container is killed and
    restarted (Killing: failed liveness probe), its SIGTERM-deaf sleep killed at the grace's end (137)."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    await _web(client, pods)
    probed = pod("client", "gpu-0", "sleep", "infinity")
    probed["spec"]["terminationGracePeriodSeconds"] = 2
    probed["spec"]["containers"][0]["livenessProbe"] = {
        "exec": {"command": ["sh", "-c", "wget -qO- web"]}, "periodSeconds": 3, "failureThreshold": 2}
    made = await pods.create(probed)
    worker = await eventually(lambda: _worker(nodes, "gpu-0", made["metadata"]["uid"]))
    await eventually(lambda: _probed(worker, "livenessProbe", 1))
    await clock.advance(3)
    await eventually(lambda: _probed(worker, "livenessProbe", 2))
    assert not await _unhealthy(client, "client", 1), "passing while the Service answers"

    await client.resource("discovery.k8s.io", "v1", "endpointslices").delete("web-x", "default")
    await eventually(lambda: _no_endpoint(nodes, "web"))
    await clock.advance(3)
    event = await eventually(lambda: _unhealthy(client, "client", 1))
    assert event["message"].startswith("Liveness probe failed: wget: can't connect to remote host (")
    assert event["message"].endswith("): Connection refused\n")
    await clock.advance(3)
    await eventually(lambda: _unhealthy(client, "client", 2))
    await clock.advance(2)  # SIGTERM's grace: sleep ignores it as PID 1, so it is killed

    async def restarted():
        p = await pods.get("client", "default")
        s = p["status"]["containerStatuses"][0]
        return s if s["restartCount"] == 1 and "running" in s["state"] else None
    s = await eventually(restarted)
    assert s["lastState"]["terminated"]["exitCode"] == 137
    items, _ = await client.resource("", "v1", "events").list(namespace="default")
    killing = [e for e in items if e["reason"] == "Killing" and e["involvedObject"]["name"] == "client"]
    assert [e["message"] for e in killing] == ["Container main failed liveness probe, will be restarted"]


async def test_a_startup_probe_on_the_network_holds_started_until_it_passes(cluster):
    """A startup probe that wgets a Service: the container is not Started (nor its readiness timing
    begun) while it fails, Started once the Service answers; failing failureThreshold times first
    kills it to restart (Killing: failed startup probe)."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    probed = pod("client", "gpu-0", "sleep", "infinity")
    probed["spec"]["terminationGracePeriodSeconds"] = 2
    probed["spec"]["containers"][0]["startupProbe"] = {
        "exec": {"command": ["wget", "-qO-", "web"]}, "periodSeconds": 2, "failureThreshold": 2}
    await pods.create(probed)
    event = await eventually(lambda: _unhealthy(client, "client", 1))
    assert event["message"] == "Startup probe failed: wget: bad address 'web'\n"
    s = (await pods.get("client", "default"))["status"]["containerStatuses"][0]
    assert "running" in s["state"] and not s["started"] and not s["ready"]
    await clock.advance(2)
    await eventually(lambda: _unhealthy(client, "client", 2))
    await clock.advance(2)

    async def restarted():
        s = (await pods.get("client", "default"))["status"]["containerStatuses"][0]
        return s if s["restartCount"] == 1 and "running" in s["state"] else None
    await eventually(restarted)
    items, _ = await client.resource("", "v1", "events").list(namespace="default")
    assert "Container main failed startup probe, will be restarted" in [e["message"] for e in items]
    await _web(client, pods)

    async def advanced_until_started():
        await clock.advance(2)
        s = (await pods.get("client", "default"))["status"]["containerStatuses"][0]
        return s if s["started"] and s["ready"] else None
    s = await eventually(advanced_until_started)
    assert s["restartCount"] == 1


async def test_a_failed_startup_probe_kills_with_its_own_termination_grace_period(cluster):
    """A startup probe failing failureThreshold times kills the container with the startup probe's
    terminationGracePeriodSeconds (setTerminationGracePeriod picks it by the kill's reason), not the
    liveness probe's nor the pod's: `sleep`, deaf to SIGTERM, is killed 3 s later and restarted."""
    client, _, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    probed = pod("client", "gpu-0", "sleep", "infinity")
    probed["spec"]["terminationGracePeriodSeconds"] = 60
    probed["spec"]["containers"][0] |= {
        "startupProbe": {"exec": {"command": ["wget", "-qO-", "web"]}, "periodSeconds": 2, "failureThreshold": 2,
                         "terminationGracePeriodSeconds": 3},
        "livenessProbe": {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 30}}
    await pods.create(probed)
    await eventually(lambda: _unhealthy(client, "client", 1))
    await clock.advance(2)
    await eventually(lambda: _killings(client))
    assert await _killings(client) == ["Container main failed startup probe, will be restarted"]
    await clock.advance(2.9)
    s = (await pods.get("client", "default"))["status"]["containerStatuses"][0]
    assert s["restartCount"] == 0 and "running" in s["state"], "SIGTERM's grace is not over"
    await clock.advance(0.1)

    async def restarted():
        s = (await pods.get("client", "default"))["status"]["containerStatuses"][0]
        return s if s["restartCount"] == 1 and "running" in s["state"] else None
    s = await eventually(restarted)
    assert s["lastState"]["terminated"]["exitCode"] == 137


def _with_proxy(probed: dict, **probes: dict) -> dict:
    """`probed` with a sidecar `proxy` (a restartable init container) that has `probes`."""
    probed["spec"]["initContainers"] = [{"name": "proxy", "image": "busybox", "command": ["sleep", "infinity"],
                                         "restartPolicy": "Always", **probes}]
    return probed


async def test_a_sidecars_network_probes_gate_the_pods_start_and_readiness(cluster):
    """A sidecar's startup probe wgets a Service: the app container does not start while it fails
    (the pod Pending, the sidecar not Started); once the Service answers it does. The sidecar's
    readiness probe then counts for the pod's Ready: its Service losing its endpoint makes the
    pod unready while the app container stays Ready."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    wget = {"exec": {"command": ["wget", "-qO-", "web"]}, "periodSeconds": 2}
    await pods.create(_with_proxy(pod("client", "gpu-0", "sleep", "infinity"),
                                  startupProbe=wget | {"failureThreshold": 5}, readinessProbe=wget | {"failureThreshold": 1}))
    event = await eventually(lambda: _unhealthy(client, "client", 1))
    assert event["message"] == "Startup probe failed: wget: bad address 'web'\n"
    assert event["involvedObject"]["fieldPath"] == "spec.initContainers{proxy}"
    p = await pods.get("client", "default")
    proxy = p["status"]["initContainerStatuses"][0]
    assert p["status"]["phase"] == "Pending" and "running" in proxy["state"] and not proxy["started"]
    assert "waiting" in p["status"]["containerStatuses"][0]["state"]
    await _web(client, pods)
    await eventually(lambda: _has_endpoint(nodes, "web"))

    async def advanced_until_ready():
        await clock.advance(2)
        return await _ready(pods, "client", True)
    p = await eventually(advanced_until_ready)
    assert p["status"]["initContainerStatuses"][0]["started"] is True
    assert {c["type"]: c["status"] for c in p["status"]["conditions"]}["Ready"] == "True"

    await client.resource("discovery.k8s.io", "v1", "endpointslices").delete("web-x", "default")
    await eventually(lambda: _no_endpoint(nodes, "web"))

    async def advanced_until_unready():
        await clock.advance(2)
        p = await pods.get("client", "default")
        return p if {c["type"]: c["status"] for c in p["status"]["conditions"]}["Ready"] == "False" else None
    p = await eventually(advanced_until_unready)
    assert not p["status"]["initContainerStatuses"][0]["ready"]
    assert p["status"]["containerStatuses"][0]["ready"], "the app container's own readiness is unchanged"


async def _sidecar_restarted(pods, clock) -> dict:
    """Pod `client`, once its sidecar (first init container) runs again after one restart, the
    clock advanced a second at a time until then."""
    async def advanced_until_restarted():
        await clock.advance(1)
        p = await pods.get("client", "default")
        s = p["status"]["initContainerStatuses"][0]
        return p if s["restartCount"] == 1 and "running" in s["state"] else None
    return await eventually(advanced_until_restarted)


async def _killings(client) -> list[str]:
    """The messages of the Killing events in namespace default."""
    items, _ = await client.resource("", "v1", "events").list(namespace="default")
    return [e["message"] for e in items if e["reason"] == "Killing"]


async def test_a_sidecars_startup_probe_that_fails_on_the_network_restarts_it(cluster):
    """A sidecar's startup probe failing failureThreshold times kills it to restart it (Killing:
    failed startup probe), the pod still Pending; once the Service answers, the restarted sidecar
    is Started and the app container starts."""
    client, _, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    probed = _with_proxy(pod("client", "gpu-0", "sleep", "infinity"), startupProbe={
        "exec": {"command": ["wget", "-qO-", "web"]}, "periodSeconds": 2, "failureThreshold": 2})
    probed["spec"]["terminationGracePeriodSeconds"] = 2
    await pods.create(probed)
    await eventually(lambda: _unhealthy(client, "client", 1))
    p = await _sidecar_restarted(pods, clock)
    assert p["status"]["phase"] == "Pending" and not p["status"]["initContainerStatuses"][0]["started"]
    assert p["status"]["initContainerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 137
    assert await _killings(client) == ["Container proxy failed startup probe, will be restarted"]
    await _web(client, pods)

    async def advanced_until_ready():
        await clock.advance(2)
        return await _ready(pods, "client", True)
    p = await eventually(advanced_until_ready)
    assert p["status"]["initContainerStatuses"][0]["started"] is True


async def test_a_sidecars_liveness_probe_on_the_network_restarts_it(cluster):
    """A sidecar's liveness probe wgets a Service; once its endpoint goes, failureThreshold failures
    kill the sidecar to restart it (Killing: failed liveness probe), the app container running on."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    await _web(client, pods)
    probed = _with_proxy(pod("client", "gpu-0", "sleep", "infinity"), livenessProbe={
        "exec": {"command": ["sh", "-c", "wget -qO- web"]}, "periodSeconds": 3, "failureThreshold": 2})
    probed["spec"]["terminationGracePeriodSeconds"] = 2
    await pods.create(probed)
    await eventually(lambda: _ready(pods, "client", True))
    await client.resource("discovery.k8s.io", "v1", "endpointslices").delete("web-x", "default")
    await eventually(lambda: _no_endpoint(nodes, "web"))
    p = await _sidecar_restarted(pods, clock)
    assert p["status"]["initContainerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 137
    assert p["status"]["containerStatuses"][0]["restartCount"] == 0
    assert await _killings(client) == ["Container proxy failed liveness probe, will be restarted"]


async def test_a_sidecars_liveness_probe_fails_while_an_init_container_runs(cluster):
    """While the next init container runs, a sidecar whose liveness probe on the network fails
    failureThreshold times is killed (Killing: failed liveness probe) and restarted."""
    client, _, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    probed = _with_proxy(pod("client", "gpu-0", "sleep", "infinity"), livenessProbe={
        "exec": {"command": ["wget", "-qO-", "web"]}, "periodSeconds": 2, "failureThreshold": 2})
    probed["spec"]["initContainers"].append({"name": "setup", "image": "busybox", "command": ["sleep", "60"]})
    probed["spec"]["terminationGracePeriodSeconds"] = 2
    await pods.create(probed)
    p = await _sidecar_restarted(pods, clock)
    assert p["status"]["phase"] == "Pending" and "running" in p["status"]["initContainerStatuses"][1]["state"]
    assert p["status"]["initContainerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 137
    assert await _killings(client) == ["Container proxy failed liveness probe, will be restarted"]


async def test_an_adopted_pods_network_readiness_probe_runs(cluster, tmp_path):
    """A node agent restarted with a running pod adopts it and runs its probes again: its readiness
    probe wgets a Service, which then loses its endpoint, and the pod goes unready."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    await _web(client, pods)
    probed = pod("client", "gpu-0", "sleep", "infinity")
    probed["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["wget", "-qO-", "web"]}, "periodSeconds": 2, "failureThreshold": 1}
    made = await pods.create(probed)
    await eventually(lambda: _ready(pods, "client", True))
    await nodes.stop()
    again = NodeManager(lambda _user, field_manager: client.named(field_manager), default_cluster(), clock,
                        pods_dir=str(tmp_path))
    await again.start()
    try:
        worker = await eventually(lambda: _worker(again, "gpu-0", made["metadata"]["uid"]))
        await eventually(lambda: _probed(worker, "readinessProbe", 1))  # (it runs at once, as a new worker's first)
        await eventually(lambda: _has_endpoint(again, "web"))
        await client.resource("discovery.k8s.io", "v1", "endpointslices").delete("web-x", "default")
        await eventually(lambda: _no_endpoint(again, "web"))

        async def advanced_until_unready():
            await clock.advance(2)
            return await _ready(pods, "client", False)
        p = await eventually(advanced_until_unready)
        assert {c["type"]: c["status"] for c in p["status"]["conditions"]}["Ready"] == "False"
        assert p["status"]["containerStatuses"][0]["restartCount"] == 0, "adopted, not restarted"
    finally:
        await again.stop()


async def test_an_adopted_containers_initial_delay_counts_from_its_start(cluster, tmp_path):
    """Readiness probes with initialDelaySeconds 10, one wget-ing a Service, one `true`: the agent
    restarts 4 s after the containers started and adopts them; their probes are not held back a
    whole delay from the adoption (the kubelet's worker counts it from the container's StartedAt),
    so both containers turn Ready 10 s after they started, not before."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    await _web(client, pods)
    probed = pod("client", "gpu-0", "sleep", "infinity")
    probed["spec"]["containers"].append({"name": "side", "image": "busybox", "command": ["sleep", "infinity"]})
    delayed = {"initialDelaySeconds": 10, "periodSeconds": 2}
    probed["spec"]["containers"][0]["readinessProbe"] = {"exec": {"command": ["wget", "-qO-", "web"]}, **delayed}
    probed["spec"]["containers"][1]["readinessProbe"] = {"exec": {"command": ["true"]}, **delayed}
    made = await pods.create(probed)
    await eventually(lambda: _ready(pods, "client", False, 1))
    await clock.advance(4)
    await nodes.stop()
    again = NodeManager(lambda _user, field_manager: client.named(field_manager), default_cluster(), clock,
                        pods_dir=str(tmp_path))
    await again.start()
    try:
        await eventually(lambda: _worker(again, "gpu-0", made["metadata"]["uid"]))
        await clock.advance(5.9)
        await asyncio.sleep(0.05)
        p = await pods.get("client", "default")
        assert [s["ready"] for s in p["status"]["containerStatuses"]] == [False, False], "within the delay"
        await clock.advance(0.1)

        async def both_ready():
            p = await pods.get("client", "default")
            return p if [s["ready"] for s in p["status"]["containerStatuses"]] == [True, True] else None
        p = await eventually(both_ready)
        assert {c["type"]: c["status"] for c in p["status"]["conditions"]}["Ready"] == "True"
        assert [s["restartCount"] for s in p["status"]["containerStatuses"]] == [0, 0], "adopted, not restarted"
    finally:
        await again.stop()


async def test_a_probe_exec_of_a_tool_the_image_lacks_errors_and_changes_nothing(cluster):
    """wget is not in ubuntu: the runtime cannot exec it, so each run is an error, not a result
    (Unhealthy "probe errored and resulted in unknown state", the runtime's words); its worker
    throws it away: the container never turns Ready, nor does a failing liveness probe kill it."""
    client, _, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    await _web(client, pods)
    probed = pod("client", "gpu-0", "sleep", "infinity", image="ubuntu:24.04")
    wget = {"exec": {"command": ["wget", "-qO-", "web"]}, "periodSeconds": 2, "failureThreshold": 1}
    probed["spec"]["containers"][0] |= {"readinessProbe": wget, "livenessProbe": wget}
    await pods.create(probed)

    async def errored(count: int):
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        got = {e["message"].partition(" ")[0]: e for e in items if e["reason"] == "Unhealthy"}
        return got if len(got) == 2 and all(e.get("count", 1) >= count for e in got.values()) else None
    for runs in (1, 2, 3):
        got = await eventually(lambda: errored(runs))
        await clock.advance(2)
    words = ('rpc error: code = Unknown desc = failed to exec in container: failed to start exec "{}": OCI runtime '
             'exec failed: exec failed: unable to start container process: exec: "wget": executable file not found '
             'in $PATH: unknown')
    for kind in ("Readiness", "Liveness"):
        message = got[kind]["message"]
        exec_id = message.split('start exec "')[1].split('"')[0]
        assert message == f"{kind} probe errored and resulted in unknown state: " + words.format(exec_id)
    s = (await pods.get("client", "default"))["status"]["containerStatuses"][0]
    assert (s["ready"], s["restartCount"]) == (False, 0) and "running" in s["state"]


async def test_a_for_loops_later_pass_reaches_a_service_made_after_it_started(cluster):
    """A container's `for` loop that wgets each second runs each pass at its time: a pass after the
    Service and its endpoint were made reaches it, and the container completes once its items end."""
    client, nodes, clock, _ = cluster
    pods = client.resource("", "v1", "pods")
    looped = pod("client", "gpu-0", "sh", "-c", "for i in 1 2 3 4 5 6; do wget -qO- -T 1 web || echo no $i; sleep 1; done")
    looped["spec"]["restartPolicy"] = "Never"
    made = await pods.create(looped)
    worker = await eventually(lambda: _worker(nodes, "gpu-0", made["metadata"]["uid"]))

    async def log() -> str:
        return worker.io.serve_log("main", LogOptions()).decode() if worker.io.logs.get("main") else ""
    await eventually(lambda: _has(log, "no 1\n"))
    await _web(client, pods)
    await eventually(lambda: _has_endpoint(nodes, "web"))

    async def advanced_until_served():
        await clock.advance(1)
        return await _has(log, "nanokube simulated pod default/web-1 port 8080\n")
    await eventually(advanced_until_served)
    served = (await log()).count("port 8080\n")
    assert "no 1\n" in await log() and 1 <= served <= 5

    async def advanced_until_done():
        await clock.advance(1)
        p = await pods.get("client", "default")
        return p if p["status"].get("phase") == "Succeeded" else None
    p = await eventually(advanced_until_done)
    assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert (await log()).count("port 8080\n") + (await log()).count("no ") == 6, "one line a pass"


async def _web(client, pods) -> tuple[str, str]:
    """Pod web-1 on gpu-1 behind Service `web`, its EndpointSlice web-x ready: the pod's IP and UID."""
    web = await pods.create(pod("web-1", "gpu-1", "sleep", "infinity", image="nginx"))
    ip = await eventually(lambda: _ip(pods, "web-1"))
    await client.resource("", "v1", "services").create({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web-1"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    await client.resource("discovery.k8s.io", "v1", "endpointslices").create({
        "metadata": {"name": "web-x", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "targetRef": {
            "kind": "Pod", "name": "web-1", "namespace": "default", "uid": web["metadata"]["uid"]}}]})
    return ip, web["metadata"]["uid"]


async def _ready(pods, name: str, want: bool, index: int = 0) -> dict | None:
    p = await pods.get(name, "default")
    statuses = (p.get("status") or {}).get("containerStatuses") or []
    s = statuses[index] if len(statuses) > index else {}
    return p if "running" in (s.get("state") or {}) and s["ready"] is want else None


async def _probed(worker, kind: str, runs: int) -> bool:
    """The container's probe of `kind` on the network passed `runs` times in a row (its worker's count)."""
    w = worker.net.get(("main", kind))
    return w is not None and w.last is True and w.run >= runs


async def _unhealthy(client, pod_name: str, count: int) -> dict | None:
    """The pod's Unhealthy Event once the recorder has counted `count` of it."""
    items, _ = await client.resource("", "v1", "events").list(namespace="default")
    got = [e for e in items if e["reason"] == "Unhealthy" and e["involvedObject"]["name"] == pod_name]
    return got[0] if got and got[0].get("count", 1) >= count else None


async def _has_endpoint(nodes: NodeManager, service: str) -> bool:
    return not await _no_endpoint(nodes, service)


async def _no_endpoint(nodes: NodeManager, service: str) -> bool:
    """The node agents' shared watches no longer hold an EndpointSlice for `service`."""
    return not nodes.watched_cluster.slices("default", service)
