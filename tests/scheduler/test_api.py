"""SchedulerAPI binds through the client's pods/binding subresource: the
same call over LocalClient (in-process) and HTTPClient (its own process)."""


from nanokube.apiserver.app import APIServer
from nanokube.client.http import HTTPClient
from nanokube.clock import Clock
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.scheduler.api import SchedulerAPI
from nanokube.store.memory import MemoryStore
from tests.controllers import make_stack
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
