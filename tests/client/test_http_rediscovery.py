"""The HTTPS client reads discovery again every REDISCOVERY_PERIOD, so a component in its
own process (controller manager) finds custom resources whose CRD came after it started."""

import asyncio

from nanokube.apiserver.app import APIServer
from nanokube.client.http import REDISCOVERY_PERIOD, HTTPClient
from nanokube.clock import VirtualClock
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore
from tests.controllers import tries

CRD = {"metadata": {"name": "widgets.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


async def test_custom_resources_created_later_are_discovered(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    kubeconfig = str(tmp_path / "kubeconfig")
    write_kubeconfig(kubeconfig, server.url, pki)
    clock = VirtualClock()
    c = HTTPClient.from_kubeconfig(kubeconfig, clock=clock)
    await c.start()
    try:
        crds = c.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        await crds.create(CRD)
        for _ in tries():
            conds = (await crds.get("widgets.example.com")).get("status", {}).get("conditions") or []
            if any(x["type"] == "Established" and x["status"] == "True" for x in conds):
                break
            await asyncio.sleep(0.01)
        assert c.index.by_kind("example.com", "Widget") is None
        await clock.advance(REDISCOVERY_PERIOD)
        for _ in tries():
            if c.index.by_kind("example.com", "Widget") is not None:
                break
            await asyncio.sleep(0.01)
        widgets = c.resource("example.com", "v1", "widgets")
        await widgets.create({"metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1}})
        assert [w["metadata"]["name"] for w in (await widgets.list("default"))[0]] == ["w"]
    finally:
        await c.close()
        await server.stop()
