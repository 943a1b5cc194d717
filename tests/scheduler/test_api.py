"""SchedulerAPI binds through the client's pods/binding subresource: the
same call over LocalClient (in-process) and HTTPClient (its own process)."""

import orjson

from nanokube.apiserver.app import APIServer
from nanokube.client.http import HTTPClient
from nanokube.clock import Clock
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.scheduler.api import SchedulerAPI
from nanokube.store.memory import MemoryStore
from tests.controllers import make_stack, tries
from tests.scheduler import pod


async def bind_and_read(client) -> dict:
    pods = client.resource("", "v1", "pods")
    p = pod("p")
    del p["metadata"]["uid"]
    created = await pods.create(p)
    api = SchedulerAPI(client, Clock(), "default-scheduler")
    await api.bind("default", "p", created["metadata"]["uid"], "n1")
    return await pods.get("p", "default")


async def test_bind_over_the_local_client():
    s = await make_stack()
    try:
        got = await bind_and_read(s.client)
    finally:
        await s.close()
    assert got["spec"]["nodeName"] == "n1"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in got["status"]["conditions"])


async def test_bind_over_https(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    # no controller manager makes the default account, nor takes a new node's not-ready taint off
    server.rest.admission.disable("ServiceAccount", "TaintNodesByCondition")
    await server.start()
    kubeconfig = str(tmp_path / "kubeconfig")
    write_kubeconfig(kubeconfig, server.url, pki)
    client = HTTPClient.from_kubeconfig(kubeconfig, field_manager="kube-scheduler")
    await client.start()
    try:
        got = await bind_and_read(client)
    finally:
        await client.close()
        await server.stop()
    assert got["spec"]["nodeName"] == "n1"


class Recording:
    """A client whose pods only accept subresource POSTs: binding must not
    reach around the client into the server."""

    def __init__(self):
        self.calls = []

    def resource(self, group, version, plural):
        return self

    async def create_subresource(self, name, subresource, body, namespace=None):
        self.calls.append((name, subresource, namespace, body["target"], body["metadata"]["uid"]))
        return {"kind": "Status", "status": "Success"}


async def test_bind_is_a_binding_post():
    client = Recording()
    await SchedulerAPI(client, Clock(), "default-scheduler").bind("ns", "p", "u1", "n1")
    assert client.calls == [("p", "binding", "ns", {"kind": "Node", "name": "n1"}, "u1")]


class Later(Clock):
    """The real clock, moved on by `ahead` seconds."""

    ahead = 0.0

    def now(self) -> float:
        return super().now() + self.ahead


async def test_a_new_failure_message_keeps_pod_scheduleds_transition_time(tmp_path):
    """Upstream's updatePod sets PodScheduled through podutil.UpdatePodCondition: a pod that stays
    unschedulable for another reason gets the new message, and lastTransitionTime stays the one
    of its first failure. The scheduler runs over HTTPS; the test reads the pod over HTTP."""
    import asyncio

    from kubernetes import client as k8s

    from nanokube.scheduler.scheduler import Scheduler
    from tests.scheduler import node
    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        core = k8s.CoreV1Api(api_client)

        async def add_node(name: str, cpu: str, **more) -> None:
            n = node(name, cpu, "2Gi", **more)
            await asyncio.to_thread(core.create_node, n)
            await asyncio.to_thread(core.patch_node_status, name, {"status": n["status"]})

        async def scheduled_condition(unlike: str | None) -> dict:
            for _ in tries():
                got = await asyncio.to_thread(core.read_namespaced_pod, "huge", "default", _preload_content=False)
                conds = [c for c in orjson.loads(got.data)["status"].get("conditions") or []
                         if c["type"] == "PodScheduled"]
                if conds and conds[0]["message"] != unlike:
                    return conds[0]
                await asyncio.sleep(0.02)
            raise AssertionError(f"PodScheduled never changed from {unlike!r}")

        await add_node("small", "1")
        clock = Later()
        http = HTTPClient.from_kubeconfig(str(tmp_path / "kubeconfig"), field_manager="kube-scheduler")
        await http.start()
        sched = Scheduler(http, clock=clock, seed=1)
        await sched.start()
        try:
            p = pod("huge", "5")
            del p["metadata"]["uid"]
            await asyncio.to_thread(core.create_namespaced_pod, "default", p)
            first = await scheduled_condition(None)
            clock.ahead = 3600.0
            await add_node("tainted", "8", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
            second = await scheduled_condition(first["message"])
        finally:
            await sched.stop()
            await http.close()
    assert (first["status"], first["reason"]) == (second["status"], second["reason"]) == ("False", "Unschedulable")
    assert first["message"].startswith("0/1 nodes are available") and second["message"].startswith("0/2 nodes")
    assert second["lastTransitionTime"] == first["lastTransitionTime"]
