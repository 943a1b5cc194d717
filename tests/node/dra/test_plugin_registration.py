"""External DRA drivers on a simulated node: a kubelet plugin registers
through a socket in the node's plugins_registry directory (upstream's plugin
watcher and DRAPluginManager)."""

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.node.cluster import default_cluster
from nanokube.node.dra.plugin_manager import WIPING_DELAY
from nanokube.node.manager import NodeManager
from tests.controllers import eventually, make_stack
from tests.node import ManualClock
from tests.node.dra.plugin_driver import PluginDriver

DRIVER = "gpu.example.com"
NODE = "gpu-0"


@pytest.fixture
async def env():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    drivers: list[PluginDriver] = []

    def driver(name=DRIVER, **kw) -> PluginDriver:
        a = mgr.agents[NODE]
        d = PluginDriver(name, a.plugins_registry, f"{mgr.pods_dir}/{NODE}/plugins", f"{mgr.pods_dir}/{NODE}/cdi",
                         kw.pop("results", lambda ns, n: [("gpu", NODE, "gpu-0")]), **kw)
        drivers.append(d)
        return d.start()

    yield s.client, clock, mgr, driver
    for d in drivers:
        d.stop()
    await mgr.stop()
    await s.close()


def ticking(clock, check):
    """`check` polled while the node's clock moves a second a time (the watcher polls on it)."""
    async def tick():
        await clock.advance(1)
        return await check() if callable(check) else check
    return tick


async def registered(clock, mgr, driver):
    async def check():
        return mgr.agents[NODE].dra_plugins.get(driver.driver) is not None and driver.statuses
    await eventually(ticking(clock, check))


async def test_a_plugin_that_serves_v1_registers_and_is_told_so(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    assert d.statuses == [(True, "")]
    plugin = mgr.agents[NODE].dra_plugins.get(DRIVER)
    assert (plugin.endpoint, plugin.service) == (d.endpoint, "v1.DRAPlugin")
    assert mgr.agents["gpu-1"].dra_plugins.get(DRIVER) is None  # another node's registry


async def test_a_v1beta1_only_plugin_gets_v1beta1(env):
    client, clock, mgr, driver = env
    d = driver(versions=("v1beta1.DRAPlugin",))
    await registered(clock, mgr, d)
    assert mgr.agents[NODE].dra_plugins.get(DRIVER).service == "v1beta1.DRAPlugin"


@pytest.mark.parametrize("versions, why", [
    (("v2.DRAPlugin",), 'none of services supported by the plugin (["v2.DRAPlugin"]) are supported by the '
                        'kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])'),
    ((), "empty list of supported gRPC services (aka supported versions)"),
])
async def test_unsupported_versions_are_refused_with_upstreams_error(env, versions, why):
    client, clock, mgr, driver = env
    d = driver(versions=versions)
    await eventually(ticking(clock, lambda: _true(d.statuses)))
    assert d.statuses[0] == (False, f"RegisterPlugin error -- plugin validation failed with err: invalid supported "
                                    f"gRPC versions of DRA driver plugin {DRIVER} at endpoint {d.endpoint}: {why}")
    assert mgr.agents[NODE].dra_plugins.get(DRIVER) is None
    # the kubelet tries again, backing off, and tells the plugin each time
    await eventually(ticking(clock, lambda: _true(len(d.statuses) >= 2)))
    assert d.statuses[1][0] is False


async def test_a_plugin_of_another_type_has_no_handler(env):
    client, clock, mgr, driver = env
    d = driver(plugin_type="CSIPlugin")
    await eventually(ticking(clock, lambda: _true(d.statuses)))
    assert d.statuses[0] == (False, f"RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at "
                                    f"socket {d.registration_socket}")


async def _true(v):
    return v


async def _slices(client):
    items, _ = await client.resource("resource.k8s.io", "v1", "resourceslices").list(
        field_selector=f"spec.nodeName={NODE},spec.driver={DRIVER}")
    return items


async def _publish(client):
    await client.resource("resource.k8s.io", "v1", "resourceslices").create({
        "metadata": {"name": f"{NODE}-{DRIVER}"}, "spec": {
            "driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}]}})


async def test_a_driver_gone_past_the_grace_period_loses_its_slices(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    await _publish(client)
    d.stop()
    await eventually(ticking(clock, lambda: _true(mgr.agents[NODE].dra_plugins.get(DRIVER) is None)))
    assert await _slices(client)  # not before the grace period
    await clock.advance(WIPING_DELAY)
    await eventually(ticking(clock, lambda: _none(_slices(client))))


async def _none(coro):
    return not await coro


async def test_a_driver_back_within_the_grace_period_keeps_its_slices(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    await _publish(client)
    d.stop()
    await eventually(ticking(clock, lambda: _true(mgr.agents[NODE].dra_plugins.get(DRIVER) is None)))
    d2 = driver()
    await registered(clock, mgr, d2)
    await clock.advance(WIPING_DELAY + 5)
    assert await _slices(client)
    assert not mgr.agents[NODE].dra_plugins.wipes
