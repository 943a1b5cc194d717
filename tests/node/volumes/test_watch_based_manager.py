"""The ConfigMaps pods' volumes name reach their files through one watch per object, shared by
the node agents, not a GET per pod volume per resync: node agents talking to an API server over
HTTP, the requests counted by the server's apiserver_request_total, the resyncs in virtual time."""

from __future__ import annotations

import asyncio

import pytest

from nanokube.node.volumes.sources import RESYNC
from tests.controllers import eventually
from tests.node import metric_totals, nodes_over_http


@pytest.fixture
async def cluster(tmp_path):
    async with nodes_over_http(str(tmp_path)) as (client, nodes, clock, server):
        yield client, nodes, clock, tmp_path, server


async def configmap_requests(server) -> tuple[float, float, float]:
    """The server's count of GETs and LISTs of configmaps (apiserver_request_total, all codes) and its
    ConfigMap watches now (apiserver_longrunning_requests, verb WATCH)."""
    return tuple(await metric_totals(
        server,
        ("apiserver_request_total", r'code="\d+",[^}]*resource="configmaps",[^}]*subresource="",verb="GET"[^}]*'),
        ("apiserver_request_total", r'code="\d+",[^}]*resource="configmaps",[^}]*subresource="",verb="LIST"[^}]*'),
        ("apiserver_longrunning_requests", r'component="apiserver",group="",resource="configmaps",'
                                           r'scope="\w+",subresource="",verb="WATCH",version="v1"')))


def pod(name: str, node: str) -> dict:
    """A pod whose projected volume (as the service account admission adds, without the token) and
    plain configMap volume name ConfigMap root-ca."""
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": node, "containers": [{"name": "app", "image": "busybox"}],
        "volumes": [{"name": "api-access", "projected": {"sources": [
                        {"configMap": {"name": "root-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace",
                                                    "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
                    {"name": "conf", "configMap": {"name": "root-ca"}}]}}


async def test_an_edit_reaches_every_pods_files_through_one_watch_without_a_get(cluster):
    client, nodes, clock, root, server = cluster
    cms, pods = client.resource("", "v1", "configmaps"), client.resource("", "v1", "pods")
    await cms.create({"metadata": {"name": "root-ca", "namespace": "default"}, "data": {"ca.crt": "one"}})
    uids = {}
    for name, node in (("a", "gpu-0"), ("b", "gpu-1"), ("c", "gpu-0")):
        uids[name] = ((await pods.create(pod(name, node)))["metadata"]["uid"], node)

    def files(volume: str, path: str):
        return [(root / node / uid / "volumes" / volume / path) for uid, node in uids.values()]

    async def holding(text: str):
        return all(f.exists() and f.read_text() == text for f in files("api-access", "ca.crt") + files("conf", "ca.crt"))
    await eventually(lambda: holding("one"))
    # one watch of the object for the three pods on two nodes, which streamed its initial state (the
    # reflector's watch-list); no GET, no LIST
    assert await configmap_requests(server) == (0, 0, 1)
    assert nodes.watched["configmaps"].watching() == [("default", "root-ca")]

    await cms.patch("root-ca", {"data": {"ca.crt": "two"}}, namespace="default")

    async def watched_two():  # the watch brought the change (3 resyncs 50 ms apart raced it under load)
        return (await nodes.watched["configmaps"].get("default", "root-ca"))["data"]["ca.crt"] == "two"
    await eventually(watched_two)
    for _ in range(3):  # pod resyncs come and go: the files change at the next one, read from the watch
        await clock.advance(RESYNC)
        await asyncio.sleep(0.05)
    await eventually(lambda: holding("two"))
    assert await configmap_requests(server) == (0, 0, 1)

    for name in uids:
        await pods.delete(name, "default", grace_period_seconds=0)

    async def released():
        return nodes.watched["configmaps"].watching() == []
    await eventually(released)
    assert (await configmap_requests(server))[2] == 0, "the watch ends with the last pod naming the object"


async def test_an_immutable_config_map_is_not_watched_once_seen(cluster):
    """The manager ends the watch of an object it has seen immutable: it cannot change, so the
    files keep its content and the server holds no watch for it."""
    client, nodes, clock, root, server = cluster
    cms, pods = client.resource("", "v1", "configmaps"), client.resource("", "v1", "pods")
    await cms.create({"metadata": {"name": "root-ca", "namespace": "default"}, "data": {"ca.crt": "fixed"},
                      "immutable": True})
    uid = (await pods.create(pod("a", "gpu-0")))["metadata"]["uid"]
    file = root / "gpu-0" / uid / "volumes" / "api-access" / "ca.crt"

    async def written():
        return file.exists() and file.read_text() == "fixed"
    await eventually(written)

    async def unwatched():
        return (await configmap_requests(server))[2] == 0
    await eventually(unwatched)
    assert nodes.watched["configmaps"].watching() == [("default", "root-ca")], "still held for the pod"
    await clock.advance(RESYNC)  # a resync reads the kept copy
    await asyncio.sleep(0.05)
    assert file.read_text() == "fixed" and (await configmap_requests(server))[:2] == (0, 0)


async def test_pods_pull_secrets_are_read_through_one_shared_watch_without_a_get(cluster):
    """The secret manager also holds the pods' imagePullSecrets (VisitPodSecretNames), which the
    kubelet reads as each sync ensures images: two pods on two nodes naming one share its watch,
    and their starts read it there, with no GET."""
    client, nodes, _, _, server = cluster
    pods = client.resource("", "v1", "pods")
    await client.resource("", "v1", "secrets").create({
        "metadata": {"name": "regcred", "namespace": "default"}, "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": "e30="}})
    for name, node in (("a", "gpu-0"), ("b", "gpu-1")):
        await pods.create({"metadata": {"name": name, "namespace": "default"}, "spec": {
            "nodeName": node, "imagePullSecrets": [{"name": "regcred"}],
            "containers": [{"name": "app", "image": "busybox", "command": ["httpd", "-f"]}]}})

    async def running():
        items, _ = await pods.list(namespace="default")
        return len(items) == 2 and all((p.get("status") or {}).get("phase") == "Running" for p in items)
    await eventually(running)
    requests = await metric_totals(
        server,
        ("apiserver_request_total", r'code="\d+",[^}]*resource="secrets",[^}]*subresource="",verb="GET"[^}]*'),
        ("apiserver_longrunning_requests", r'component="apiserver",group="",resource="secrets",'
                                           r'scope="\w+",subresource="",verb="WATCH",version="v1"'))
    assert tuple(requests) == (0, 1)
    assert nodes.watched["secrets"].watching() == [("default", "regcred")]
