"""The HTTPS client against a real API server (in-process, TLS with client
certificates): the same calls and errors as the local client."""

import asyncio

import aiohttp
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.machinery.errors import APIError
from nanokube.client.http import HTTPClient
from nanokube.client.informer import Informer
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore
from tests.controllers import tries


@pytest.fixture
async def client(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    kubeconfig = str(tmp_path / "kubeconfig")
    write_kubeconfig(kubeconfig, server.url, pki)
    c = HTTPClient.from_kubeconfig(kubeconfig, field_manager="tester")
    await c.start()
    yield c
    await c.close()
    await server.stop()


def cm(name, **data):
    return {"metadata": {"name": name, "namespace": "default"}, "data": data}


async def test_crud_and_upstream_errors(client):
    cms = client.resource("", "v1", "configmaps")
    created = await cms.create(cm("a", x="1"))
    assert created["metadata"]["managedFields"][0]["manager"] == "tester"
    assert (await cms.get("a", "default"))["data"] == {"x": "1"}
    with pytest.raises(APIError) as e:
        await cms.create(cm("a"))
    assert (e.value.code, e.value.reason) == (409, "AlreadyExists")
    with pytest.raises(APIError) as e:
        await cms.create(cm("Bad_Name"))
    assert e.value.code == 422 and e.value.details["causes"][0]["field"] == "metadata.name"

    patched = await cms.patch("a", {"data": {"y": "2"}}, namespace="default")
    assert patched["data"] == {"x": "1", "y": "2"}
    updated = await cms.update({**patched, "data": {"z": "3"}})
    assert updated["data"] == {"z": "3"}
    with pytest.raises(APIError) as e:
        await cms.update({**patched, "data": {}})
    assert e.value.code == 409 and e.value.reason == "Conflict"

    items, rv = await cms.list("default")
    assert [i["metadata"]["name"] for i in items] == ["a"] and int(rv) > 0
    assert items[0]["kind"] == "ConfigMap"
    with pytest.raises(APIError) as e:
        await cms.delete("a", "default", preconditions={"uid": "not-it"})
    assert e.value.code == 409
    await cms.delete("a", "default")
    with pytest.raises(APIError) as e:
        await cms.get("a", "default")
    assert e.value.code == 404


async def test_writes_name_their_field_manager_and_a_dropped_answer_is_none(client):
    """The field manager (and `force`) travel in the write's path as its query; a create whose
    caller drops the answer (`response=False`, an Event recorder's) gets None, as in-process."""
    cms = client.resource("", "v1", "configmaps")
    assert await cms.create(cm("b", x="1"), response=False) is None
    managers = {"tester"}
    assert {f["manager"] for f in (await cms.get("b", "default"))["metadata"]["managedFields"]} == managers
    patched = await cms.patch("b", {"data": {"y": "2"}}, namespace="default", field_manager="other manager/1")
    managers.add("other manager/1")
    assert {f["manager"] for f in patched["metadata"]["managedFields"]} == managers
    applied = await cms.patch("b", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"},
                                    "data": {"x": "9"}}, "application/apply-patch+yaml", namespace="default",
                              field_manager="applier", force=True)
    assert applied["data"]["x"] == "9", "force took the field from its manager"
    updated = await cms.update({**applied, "data": {"z": "3"}})
    assert updated["data"] == {"z": "3"}


async def test_discovery_and_cluster_scoped_resources(client):
    assert client.index.by_kind("apps", "Deployment").plural == "deployments"
    pods = client.index.get("", "v1", "pods")
    assert {"status", "binding", "eviction", "log"} <= pods.subresources and pods.namespaced
    assert "v1beta1" in client.index.by_kind("scheduling.k8s.io", "PodGroup").versions
    nodes = client.resource("", "v1", "nodes")
    await nodes.create({"metadata": {"name": "n1"}})
    status = await nodes.patch("n1", {"status": {"capacity": {"cpu": "4"}}}, subresource="status")
    assert status["status"]["capacity"] == {"cpu": "4"}
    with pytest.raises(LookupError):
        client.resource("", "v1", "widgets")


async def test_informer_over_http_sees_adds_updates_and_deletes(client):
    cms = client.resource("", "v1", "configmaps")
    seen = []
    inf = Informer(cms, namespace="default")
    inf.add_handlers(on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
                     on_update=lambda _o, n: seen.append(("update", n["data"].get("k"))),
                     on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])))
    task = asyncio.create_task(inf.run())
    try:
        await asyncio.wait_for(inf.synced.wait(), 10)
        await cms.create(cm("w", k="1"))
        await cms.patch("w", {"data": {"k": "2"}}, namespace="default")
        await cms.delete("w", "default")
        for _ in tries():
            if len(seen) == 3:
                break
            await asyncio.sleep(0.01)
        assert seen == [("add", "w"), ("update", "2"), ("delete", "w")]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_many_open_watches_do_not_starve_requests(client):
    cms = client.resource("", "v1", "configmaps")
    streams = [await cms.watch("default") for _ in range(80)]
    try:
        created = await asyncio.wait_for(cms.create(cm("after-watches")), 10)
        assert created["metadata"]["name"] == "after-watches"
    finally:
        for s in streams:
            await s.aclose()


async def test_a_named_client_says_its_name_in_its_user_agent(tmp_path):
    """rest.AddUserAgent: a client named for a part of a component (kube-controller-manager's controllers)
    sends '<user agent>/<name>', seen in the audit log, while sharing its root's connections and discovery."""
    import json

    from nanokube.machinery.version import user_agent
    pki = ensure_pki(str(tmp_path))
    audit = tmp_path / "audit.log"
    server = APIServer(MemoryStore(), pki, port=0, audit_log_path=str(audit))
    await server.start()
    write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
    root = HTTPClient.from_kubeconfig(str(tmp_path / "kubeconfig"), user_agent=user_agent("kube-controller-manager"))
    await root.start()
    try:
        named = root.named("replicaset-controller")
        assert named.index is root.index
        await named.resource("", "v1", "configmaps").create(cm("by-named"))
        await root.resource("", "v1", "configmaps").create(cm("by-root"))
        # a watch through the named client works over the root's connections
        stream = await named.resource("", "v1", "configmaps").watch("default")
        kind, obj = await asyncio.wait_for(anext(stream), 5)
        await stream.aclose()
        assert kind == "ADDED" and obj["metadata"]["name"] in ("by-named", "by-root")
    finally:
        await root.close()
        await server.stop()
    agents = {e["objectRef"].get("name"): e["userAgent"] for e in map(json.loads, audit.read_text().splitlines())
              if e["verb"] == "create" and e["objectRef"]["resource"] == "configmaps"}
    assert agents["by-root"].startswith("kube-controller-manager/v1.37.0 (") and " kubernetes/0000000" in agents["by-root"]
    assert agents["by-named"] == agents["by-root"] + "/replicaset-controller"


async def test_a_large_list_is_asked_for_without_gzip(client):
    """The server gzips an answer over 128 KiB for a client that accepts it; the components ask for
    none (rest.Config's DisableCompression): they run beside it. Neither a list nor a watch asks for
    an encoding (their headers: tests/client/test_transport.py), so both come plain."""
    cms = client.resource("", "v1", "configmaps")
    await cms.create(cm("big", v="x" * 200_000))
    assert [i["data"]["v"] for i in (await cms.list("default"))[0]] == ["x" * 200_000]
    stream = await cms.watch("default")
    try:
        kind, obj = await asyncio.wait_for(anext(stream), 5)
    finally:
        await stream.aclose()
    assert (kind, obj["data"]["v"]) == ("ADDED", "x" * 200_000)
    path = "/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client.creds.ssl)) as session:
        async with session.get(client.creds.server + path, headers={"Accept-Encoding": "gzip"}) as r:
            assert r.headers["Content-Encoding"] == "gzip"  # (what it would be asked for otherwise)
