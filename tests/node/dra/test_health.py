"""Device health of the built-in simulated drivers (KEP-4680): a container using their devices
gets `allocatedResourcesStatus`, each device Healthy until a fault the Node's
sim.nanokube.io/fault annotation injects makes it (or the GPU a MIG device is part of)
Unhealthy, and Healthy again once the fault is gone, as a driver's health stream reports it."""

from __future__ import annotations

from nanokube.node.faults import ANNOTATION
from tests.controllers import eventually
from tests.node.dra.test_prepare import env, phase, running_trainer

__all__ = ["env"]  # the fixture, shared with the claim preparation tests


def _resources(health: dict[str, str]) -> list[dict]:
    return [{"name": "claim:acc", "resources": [{"resourceID": rid, "health": h} for rid, h in health.items()]}]


async def test_a_fault_on_a_built_in_device_makes_the_containers_resource_unhealthy_until_it_heals(env):
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    nodes = client.resource("", "v1", "nodes")
    await running_trainer(client, clock)

    def health(gpu1: str) -> list[dict]:
        return _resources({"gpu.nanokube.io/gpu-0/gpu-0": "Healthy", "gpu.nanokube.io/gpu-0/gpu-1": gpu1,
                           "nic.nanokube.io/gpu-0/nic-1": "Healthy"})

    def status_is(want):
        async def check():
            await clock.advance(0)
            p = await pods.get("trainer", "default")
            [app] = p["status"]["containerStatuses"]
            return app.get("allocatedResourcesStatus") == want
        return check

    await eventually(status_is(health("Healthy")))
    await nodes.patch("gpu-0", {"metadata": {"annotations": {ANNOTATION: "gpu:gpu-1:ecc"}}})
    await eventually(status_is(health("Unhealthy")))
    await nodes.patch("gpu-0", {"metadata": {"annotations": {ANNOTATION: None}}})
    await eventually(status_is(health("Healthy")))


async def test_a_pod_without_claims_gets_no_allocated_resources_status(env):
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "plain", "namespace": "default"},
                       "spec": {"nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox"}]}})
    p = await eventually(phase(pods, "plain", "Running", clock))
    assert "allocatedResourcesStatus" not in p["status"]["containerStatuses"][0]
