"""The system namespaces controller, over HTTP with the official client: a deleted system
namespace is made again once it is gone, not while it terminates."""

from __future__ import annotations

import asyncio

from kubernetes import client

from nanokube.apiserver import systemnamespaces
from tests.served import served
from tests.controllers import tries


async def test_a_deleted_system_namespace_comes_back_once_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(systemnamespaces, "INTERVAL", 0.05)
    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        old = await asyncio.to_thread(core.read_namespace, "kube-node-lease")
        await asyncio.to_thread(core.delete_namespace, "kube-node-lease")
        await asyncio.sleep(0.3)  # several rounds: a terminating namespace is left alone
        terminating = await asyncio.to_thread(core.read_namespace, "kube-node-lease")
        assert (terminating.metadata.uid, terminating.status.phase) == (old.metadata.uid, "Terminating")
        # no namespace controller runs here: finalize it by hand, as that controller would
        terminating.spec.finalizers = []
        await asyncio.to_thread(core.replace_namespace_finalize, "kube-node-lease", terminating)
        for _ in tries():
            await asyncio.sleep(0.05)
            names = {ns.metadata.name: ns for ns in (await asyncio.to_thread(core.list_namespace)).items}
            if "kube-node-lease" in names and names["kube-node-lease"].metadata.uid != old.metadata.uid:
                break
        again = names["kube-node-lease"]
        assert again.metadata.uid != old.metadata.uid and again.status.phase == "Active"
        assert [e.manager for e in again.metadata.managed_fields] == ["kube-apiserver"]
        assert {"default", "kube-system", "kube-public"} <= set(names)
