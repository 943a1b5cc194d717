"""A simulated pod's network commands read the cluster from watches the node agents share
(simulated_cluster), not lists per command: node agents talking to an API server over HTTP, the
requests counted by its apiserver_request_total, a container's endless wget loop in virtual time
seeing a Service and its ready endpoint come."""

from __future__ import annotations

import asyncio

import pytest

from nanokube.machinery.streaming import LogOptions
from nanokube.node.manager import NodeManager
from tests.controllers import eventually
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
