"""DynamicResourcesArgs.filterTimeout: Filter gives up searching a node for a pod's devices once
the timeout has passed on the scheduler's clock, and the node is unschedulable for the pod
("timed out trying to allocate devices"); 0s disables the timeout. The clock here costs a second
per reading, so a search that reads it often outlasts a 10 s filterTimeout at once."""

import pytest

from nanokube.clock import VirtualClock
from nanokube.scheduler.config import parse
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import node
from tests.scheduler.test_dynamic_resources import R, claim_pod
from tests.scheduler.test_scheduler import add_node

DRIVER = "fpga.example.com"


class SlowClock(VirtualClock):
    """Virtual time that moves a second each time it is read: a long computation takes long."""

    def monotonic(self) -> float:
        self._set(self._mono + 1.0)
        return self._mono


@pytest.mark.parametrize("timeout", ["10s", "0s"])
async def test_a_device_search_longer_than_filter_timeout_leaves_the_node_out(timeout):
    s = await make_stack()
    client = s.client
    await add_node(client, node("n"))
    await client.resource(R, "v1", "deviceclasses").create({
        "apiVersion": f"{R}/v1", "kind": "DeviceClass", "metadata": {"name": "fpga"},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
    # only the last two of 30 devices share a value of `v`: the search tries some 400 pairs first
    devices = [{"name": f"fpga-{i}", "attributes": {"v": {"int": 100 if i >= 28 else i}}} for i in range(30)]
    await client.resource(R, "v1", "resourceslices").create({
        "apiVersion": f"{R}/v1", "kind": "ResourceSlice", "metadata": {"name": "n-fpgas"},
        "spec": {"driver": DRIVER, "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                 "devices": devices}})
    await client.resource(R, "v1", "resourceclaims").create({
        "apiVersion": f"{R}/v1", "kind": "ResourceClaim", "metadata": {"name": "pair", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "fpgas", "exactly": {"deviceClassName": "fpga", "count": 2}}],
                             "constraints": [{"matchAttribute": f"{DRIVER}/v"}]}}})
    pods = client.resource("", "v1", "pods")
    await pods.create(claim_pod("p", "pair"))
    cfg = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
                     {"name": "DynamicResources", "args": {"filterTimeout": timeout}}]}]})
    sched = Scheduler(client, clock=SlowClock(), seed=1, config=cfg)
    await sched.start()
    try:
        async def outcome():
            p = await pods.get("p", "default")
            if p["spec"].get("nodeName"):
                return "bound"
            cond = [c for c in p["status"].get("conditions") or [] if c["type"] == "PodScheduled"]
            return cond and cond[0]["message"]
        got = await eventually(outcome)
        if timeout == "0s":
            assert got == "bound"
        else:
            assert got.startswith("0/1 nodes are available: 1 timed out trying to allocate devices."), got
            info = await eventually(lambda: _queued(sched, "default/p"))
            assert info.last_failure is None  # a verdict the clock decided: its retry searches again
    finally:
        await sched.stop()
        await s.close()


async def _queued(sched, key):
    return sched.queue.unschedulable.get(key) or sched.queue.backoff.get(key)
