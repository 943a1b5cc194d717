"""The HTTPS client reads discovery at start (the two aggregated documents) and then only when asked:
no polling of its own, as client-go's components; a kind it cannot map after kube-controller-manager's
30 s RESTMapper reset has discovery read again, so a custom resource whose CRD came later is found.
Discovery GETs are counted by the client's rest_client_requests_total (the API server, as upstream's,
counts no non-resource request)."""

import asyncio

import pytest

from nanokube.apiserver.app import APIServer
from nanokube.client.http import HTTPClient
from nanokube.client.kubeconfig import Credentials
from nanokube.client.metrics import REGISTRY
from nanokube.clock import VirtualClock
from nanokube.controllers.manager import MAPPER_RESET_PERIOD, ControllerManager
from nanokube.store.memory import MemoryStore
from tests.controllers import eventually, serve_widgets

@pytest.fixture
async def server():
    s = APIServer(MemoryStore(), None, port=0)
    s.rest.admission.disable("ServiceAccount")
    await s.start()
    yield s
    await s.stop()


def gets(c: HTTPClient) -> float:
    """The client's successful GETs so far (rest_client_requests_total of its server)."""
    return REGISTRY.get_sample_value("rest_client_requests_total", {"code": "200", "method": "GET",
                                                                     "host": c.host}) or 0.0


async def test_discovery_is_read_at_start_in_two_gets_and_never_polled(server):
    clock = VirtualClock()
    c = HTTPClient(Credentials(f"http://127.0.0.1:{server.port}", None), "test", clock=clock)
    try:
        await c.start()
        assert gets(c) == 2  # /api and /apis, each as one APIGroupDiscoveryList
        hpa = c.index.by_kind("autoscaling", "HorizontalPodAutoscaler")
        assert hpa.versions[0] == "v2" and "v1" in hpa.versions and "status" in hpa.subresources
        assert "scale" in c.index.get("apps", "v1", "deployments").subresources
        assert c.index.get("", "v1", "pods").namespaced and not c.index.get("", "v1", "nodes").namespaced
        await serve_widgets(server, "example.com")
        await clock.advance(600)
        await asyncio.sleep(0.05)
        assert gets(c) == 2
        assert c.index.by_kind("example.com", "Widget") is None
    finally:
        await c.close()


async def test_a_kind_unknown_after_a_reset_reads_discovery_again_once(server):
    """client-go's deferred RESTMapper: a no-match rereads discovery only when the cache is not fresh
    (a reset period past its last read); the kind found then is served, and a kind still unknown
    costs no further read while fresh."""
    clock = VirtualClock()
    c = HTTPClient(Credentials(f"http://127.0.0.1:{server.port}", None), "test", clock=clock)
    try:
        await c.start()
        await serve_widgets(server, "example.com")
        c.named("a-controller").reset_mapping_every(30)  # a named client sets the discovery it shares
        assert await c.mapping("example.com", "Widget") is None  # fresh since start: no read
        assert gets(c) == 2
        await clock.advance(30)
        found, again = await asyncio.gather(c.mapping("example.com", "Widget"), c.mapping("example.com", "Widget"))
        assert found is again and (found.plural, found.namespaced, found.versions) == ("widgets", True, ["v1"])
        assert gets(c) == 4  # one read for both
        assert await c.mapping("example.com", "Gadget") is None
        assert gets(c) == 4
        widgets = c.resource("example.com", "v1", "widgets")
        await widgets.create({"metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1}})
        assert [w["metadata"]["name"] for w in (await widgets.list("default"))[0]] == ["w"]
    finally:
        await c.close()


async def test_the_controller_manager_resets_its_mapping_every_30_s(server):
    """A CRD served after kube-controller-manager started: its kind maps once the manager's next
    RESTMapper reset has passed (CreateControllerContext's 30 s), not before."""
    clock = VirtualClock()
    c = HTTPClient(Credentials(f"http://127.0.0.1:{server.port}", None), "test", clock=clock)
    await c.start()
    manager = ControllerManager(c, clock, controllers="cronjob-controller")
    try:
        await manager.start()
        await serve_widgets(server, "example.com")
        await clock.advance(MAPPER_RESET_PERIOD - 1)
        assert await c.mapping("example.com", "Widget") is None
        await clock.advance(1)

        async def mapped():
            return await c.mapping("example.com", "Widget")
        assert (await eventually(mapped)).plural == "widgets"
    finally:
        await manager.stop()
        await c.close()
