"""Clients other than kubectl and the `kubernetes` package, used as their users
call them: kr8s (sync and async) and lightkube (sync and async) each run a
create/get/list/watch/patch/apply/delete round trip against `nanokube up`."""

from __future__ import annotations

import asyncio
import json

import pytest

NS = "clients"
#: kr8s warns about server versions newer than it was tested against
pytestmark = pytest.mark.filterwarnings("ignore:Kubernetes version .* is not supported:UserWarning")


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module makes and deletes ConfigMaps in a
    namespace of its own."""
    return session_cluster


@pytest.fixture(scope="module")
def kubeconfig(cluster):
    cluster.kubectl("create", "namespace", NS)
    return cluster.kubeconfig


def _apply_body(name: str, value: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
                       "data": {"k": value}})


# --- kr8s -------------------------------------------------------------------------------------------


async def _kr8s_apply(api, name: str, value: str) -> dict:
    """Server-side apply, which kr8s's objects do not offer: a PATCH through the Api's call_api."""
    async with api.call_api("PATCH", version="v1", base="/api", namespace=NS, url=f"configmaps/{name}",
                            params={"fieldManager": "kr8s", "force": "true"}, content=_apply_body(name, value),
                            headers={"Content-Type": "application/apply-patch+yaml"}) as resp:
        return resp.json()


def test_kr8s_sync_round_trip(kubeconfig):
    import kr8s
    from kr8s._async_utils import as_sync_func  # how kr8s's own sync API runs its async calls
    from kr8s.objects import ConfigMap

    api = kr8s.api(kubeconfig=kubeconfig)
    assert api.version()["major"] == "1"
    cm = ConfigMap({"metadata": {"name": "kr8s-sync", "namespace": NS}, "data": {"k": "1"}}, api=api)
    cm.create()
    got = ConfigMap.get("kr8s-sync", namespace=NS, api=api)
    assert got.raw["data"] == {"k": "1"}
    assert "kr8s-sync" in [o.name for o in api.get("configmaps", namespace=NS)]
    for event, obj in api.watch("configmaps", namespace=NS):
        if obj.name == "kr8s-sync":
            assert event in ("ADDED", "MODIFIED")
            break
    got.patch({"data": {"k": "2"}})
    assert got.raw["data"] == {"k": "2"}
    assert as_sync_func(_kr8s_apply)(api, "kr8s-sync", "3")["data"] == {"k": "3"}
    got.delete()
    assert not ConfigMap("kr8s-sync", namespace=NS, api=api).exists()


def test_kr8s_async_round_trip(kubeconfig):
    async def run():
        import kr8s.asyncio
        from kr8s.asyncio.objects import ConfigMap

        api = await kr8s.asyncio.api(kubeconfig=kubeconfig)
        assert (await api.version())["major"] == "1"
        cm = await ConfigMap({"metadata": {"name": "kr8s-async", "namespace": NS}, "data": {"k": "1"}}, api=api)
        await cm.create()
        got = await ConfigMap.get("kr8s-async", namespace=NS, api=api)
        assert got.raw["data"] == {"k": "1"}
        assert "kr8s-async" in [o.name async for o in api.get("configmaps", namespace=NS)]
        async for event, obj in api.watch("configmaps", namespace=NS):
            if obj.name == "kr8s-async":
                assert event in ("ADDED", "MODIFIED")
                break
        await got.patch({"data": {"k": "2"}})
        assert got.raw["data"] == {"k": "2"}
        assert (await _kr8s_apply(api, "kr8s-async", "3"))["data"] == {"k": "3"}
        await got.delete()
        assert not await got.exists()

    asyncio.run(asyncio.wait_for(run(), 60))


# --- lightkube --------------------------------------------------------------------------------------


def _lightkube_cm(name: str, value: str):
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import ConfigMap

    return ConfigMap(metadata=ObjectMeta(name=name, namespace=NS), data={"k": value})


def test_lightkube_sync_round_trip(kubeconfig):
    from lightkube import Client, KubeConfig
    from lightkube.types import PatchType
    from lightkube.resources.core_v1 import ConfigMap

    client = Client(config=KubeConfig.from_file(kubeconfig), field_manager="lightkube")
    created = client.create(_lightkube_cm("lk-sync", "1"))
    assert created.metadata.uid
    assert client.get(ConfigMap, "lk-sync", namespace=NS).data == {"k": "1"}
    assert "lk-sync" in [o.metadata.name for o in client.list(ConfigMap, namespace=NS)]
    for op, obj in client.watch(ConfigMap, namespace=NS):
        if obj.metadata.name == "lk-sync":
            assert op in ("ADDED", "MODIFIED")
            break
    patched = client.patch(ConfigMap, "lk-sync", {"data": {"k": "2"}}, namespace=NS, patch_type=PatchType.MERGE)
    assert patched.data == {"k": "2"}
    applied = client.apply(_lightkube_cm("lk-sync", "3"), force=True)
    assert applied.data == {"k": "3"}
    assert any(m.manager == "lightkube" and m.operation == "Apply" for m in applied.metadata.managedFields)
    client.delete(ConfigMap, "lk-sync", namespace=NS)
    assert "lk-sync" not in [o.metadata.name for o in client.list(ConfigMap, namespace=NS)]


def test_lightkube_async_round_trip(kubeconfig):
    async def run():
        from lightkube import AsyncClient, KubeConfig
        from lightkube.types import PatchType
        from lightkube.resources.core_v1 import ConfigMap

        client = AsyncClient(config=KubeConfig.from_file(kubeconfig), field_manager="lightkube")
        await client.create(_lightkube_cm("lk-async", "1"))
        assert (await client.get(ConfigMap, "lk-async", namespace=NS)).data == {"k": "1"}
        assert "lk-async" in [o.metadata.name async for o in client.list(ConfigMap, namespace=NS)]
        async for op, obj in client.watch(ConfigMap, namespace=NS):
            if obj.metadata.name == "lk-async":
                assert op in ("ADDED", "MODIFIED")
                break
        patched = await client.patch(ConfigMap, "lk-async", {"data": {"k": "2"}}, namespace=NS, patch_type=PatchType.MERGE)
        assert patched.data == {"k": "2"}
        applied = await client.apply(_lightkube_cm("lk-async", "3"), force=True)
        assert applied.data == {"k": "3"}
        await client.delete(ConfigMap, "lk-async", namespace=NS)
        assert "lk-async" not in [o.metadata.name async for o in client.list(ConfigMap, namespace=NS)]
        await client.close()

    asyncio.run(asyncio.wait_for(run(), 60))
