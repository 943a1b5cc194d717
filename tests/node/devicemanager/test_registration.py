"""An external device plugin registers over the node's device-plugins/kubelet.sock, with real
gRPC: the Node advertises its resource, a pod gets its devices from its Allocate, the pod
resources API lists them, and its stop or a failed Allocate act as upstream's."""

import os
import socket
from types import SimpleNamespace

import grpc
import pytest
from multidict import CIMultiDict

from nanokube.node.devicemanager.manager import DeviceManager
from nanokube.node import kubelet_socket
from nanokube.node.devicemanager.registration import RegistrationServer
from nanokube.node.kubelet_socket import KubeletSocket
from tests.controllers import becomes, eventually
from tests.node.devicemanager.plugin_server import DevicePlugin
from tests.node import api_on_manual_clock
from tests.node.devicemanager.test_node import NODE, node
from tests.node.test_lifecycle import phase_is

FPGA = "example.com/fpga"


def fpga_pod(name: str, n: int) -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": NODE, "terminationGracePeriodSeconds": 0, "containers": [
            {"name": "app", "image": "busybox:1.36", "command": ["sleep", "infinity"],
             "resources": {"limits": {FPGA: str(n)}}}]}}


def fpgas(s, clock):
    nodes = s.client.resource("", "v1", "nodes")

    async def get():
        await clock.advance(10)  # the next heartbeat posts what changed
        st = (await nodes.get(NODE))["status"]
        return st["capacity"].get(FPGA), st["allocatable"].get(FPGA)
    return get


async def listed_fpgas(prc) -> set[str]:
    """The FPGA device IDs the pod resources API's GetAllocatableResources lists."""
    return {i for d in (await prc.allocatable()).devices if d.resource_name == FPGA for i in d.device_ids}


async def test_a_registered_plugins_devices_are_advertised_allocated_and_listed(node_dir):
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        plugin = await DevicePlugin(os.path.join(node_dir, NODE, "device-plugins"), FPGA,
                                    {"fpga-a": 0, "fpga-b": None}).start()
        try:
            await plugin.register()
            await becomes(fpgas(s, clock), ("2", "2"))
            pods = s.client.resource("", "v1", "pods")
            await pods.create(fpga_pod("one", 1))
            await eventually(phase_is(pods, "one", "Running"))
            [[device]] = plugin.allocations
            assert plugin.preference_asked == []  # its options do not offer GetPreferredAllocation
            [app] = (await prc.get("one")).containers
            [d] = app.devices
            assert (d.resource_name, list(d.device_ids)) == (FPGA, [device])
            assert [n.ID for n in d.topology.nodes] == ([0] if device == "fpga-a" else [])
            listed = {(x.resource_name, x.device_ids[0]) for x in (await prc.allocatable()).devices}
            assert {(FPGA, "fpga-a"), (FPGA, "fpga-b")} <= listed

            # the kubelet's device plugin metrics on the node's /metrics
            text = (await mgr.kubelet_for(NODE).serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()),
                                                      "/metrics")).text
            samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith("kubelet_device_plugin_")}
            assert samples['kubelet_device_plugin_registration_total{resource_name="example.com/fpga"}'] == 1
            assert samples['kubelet_device_plugin_registration_total{resource_name="nvidia.com/gpu"}'] == 1
            assert samples['kubelet_device_plugin_alloc_duration_seconds_count{resource_name="example.com/fpga"}'] == 1
            assert "# TYPE kubelet_device_plugin_alloc_duration_seconds histogram" in text

            plugin.set_health("fpga-a", "Unhealthy")
            await becomes(fpgas(s, clock), ("2", "1"))
            # a stopped plugin's devices are all unhealthy: allocatable 0, capacity kept
            await plugin.stop()
            await becomes(fpgas(s, clock), ("2", "0"))
        finally:
            await plugin.stop()


async def test_a_failed_allocate_rejects_the_pod(node_dir):
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        plugin = await DevicePlugin(os.path.join(node_dir, NODE, "device-plugins"), FPGA, {"fpga-a": None}).start()
        try:
            await plugin.register()
            await becomes(fpgas(s, clock), ("1", "1"))
            plugin.fail = "no bitstream loaded"
            pods = s.client.resource("", "v1", "pods")
            await pods.create(fpga_pod("one", 1))
            p = await eventually(phase_is(pods, "one", "Failed"))
            assert p["status"]["message"] == ("Pod was rejected: Allocate failed due to rpc error: code = Unknown "
                                              "desc = no bitstream loaded, which is unexpected")
            # the device was given back: the next pod gets it
            plugin.fail = ""
            await pods.create(fpga_pod("two", 1))
            await eventually(phase_is(pods, "two", "Running"))
            assert plugin.allocations == [["fpga-a"], ["fpga-a"]]
        finally:
            await plugin.stop()


async def test_a_plugins_preferred_allocation_is_taken_first(node_dir):
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        plugin = await DevicePlugin(os.path.join(node_dir, NODE, "device-plugins"), FPGA,
                                    dict.fromkeys(["fpga-a", "fpga-b", "fpga-c", "fpga-d"]),
                                    prefer=["fpga-d", "fpga-c"]).start()
        try:
            await plugin.register()
            await becomes(fpgas(s, clock), ("4", "4"))
            pods = s.client.resource("", "v1", "pods")
            await pods.create(fpga_pod("two", 2))
            await eventually(phase_is(pods, "two", "Running"))
            await pods.create(fpga_pod("one", 1))
            await eventually(phase_is(pods, "one", "Running"))
            # the plugin prefers devices taken already: the next in order is taken instead
            assert plugin.allocations == [["fpga-d", "fpga-c"], ["fpga-a"]]
            assert plugin.preference_asked == [(["fpga-a", "fpga-b", "fpga-c", "fpga-d"], [], 2),
                                               (["fpga-a", "fpga-b"], [], 1)]
        finally:
            await plugin.stop()


async def test_pre_start_container_is_called_before_each_start_and_its_failure_fails_the_start(node_dir):
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        plugin = await DevicePlugin(os.path.join(node_dir, NODE, "device-plugins"), FPGA,
                                    {"fpga-a": None, "fpga-b": None}, pre_start=True).start()
        try:
            await plugin.register()
            await becomes(fpgas(s, clock), ("2", "2"))
            pods = s.client.resource("", "v1", "pods")
            await pods.create(fpga_pod("one", 1))
            await eventually(phase_is(pods, "one", "Running"))
            assert plugin.pre_started == plugin.allocations == [["fpga-a"]]

            plugin.pre_start_fail = "device busy"
            await pods.create(fpga_pod("two", 1))
            message = "device plugin PreStartContainer rpc failed with err: rpc error: code = Unavailable desc = device busy"

            async def refused():
                p = await pods.get("two", "default")
                [c] = p["status"].get("containerStatuses") or [{}]
                waiting = (c.get("state") or {}).get("waiting") or {}
                return waiting if waiting.get("reason") == "CreateContainerConfigError" else None
            assert (await eventually(refused))["message"] == message
            plugin.pre_start_fail = ""

            async def running():
                await clock.advance(10)  # the start is tried again each sync
                return await phase_is(pods, "two", "Running")()
            await eventually(running)
            # asked again at each try, with the pod's device
            assert plugin.pre_started[0] == ["fpga-a"] and len(plugin.pre_started) >= 3
            assert {tuple(d) for d in plugin.pre_started[1:]} == {("fpga-b",)}
        finally:
            await plugin.stop()


async def test_a_stopped_plugins_resource_goes_after_the_grace_period_and_comes_back_with_it(node_dir):
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        plugin = await DevicePlugin(os.path.join(node_dir, NODE, "device-plugins"), FPGA,
                                    {"fpga-a": None, "fpga-b": None}).start()
        try:
            await plugin.register()
            await becomes(fpgas(s, clock), ("2", "2"))
            await plugin.stop()
            await becomes(fpgas(s, clock), ("2", "0"))
            assert await listed_fpgas(prc) == set()  # unhealthy: not allocatable
            await clock.advance(300)  # upstream's endpointStopGracePeriod: 5 minutes
            await becomes(fpgas(s, clock), ("0", "0"))
            await plugin.start()
            await plugin.register()
            await becomes(fpgas(s, clock), ("2", "2"))
            assert await listed_fpgas(prc) == {"fpga-a", "fpga-b"}
        finally:
            await plugin.stop()


async def test_a_restarted_node_has_none_of_a_plugins_devices_until_it_registers_again(node_dir):
    async with api_on_manual_clock() as (s, clock):
        plugin = DevicePlugin(os.path.join(node_dir, NODE, "device-plugins"), FPGA, {"fpga-a": None})
        try:
            async with node(s, clock, node_dir):
                await (await plugin.start()).register()
                await becomes(fpgas(s, clock), ("1", "1"))
            await plugin.stop()
            async with node(s, clock, node_dir) as (_, prc):
                # from the checkpoint's registered resources: 0 until the plugin registers again
                await becomes(fpgas(s, clock), ("0", "0"))
                assert await listed_fpgas(prc) == set()
                await (await plugin.start()).register()
                await becomes(fpgas(s, clock), ("1", "1"))
                assert await listed_fpgas(prc) == {"fpga-a"}
        finally:
            await plugin.stop()


@pytest.mark.parametrize("version, resource, message", [
    ("v1alpha", FPGA, 'requested API version "v1alpha" is not supported by kubelet. Supported versions are '
                      '["v1beta1"]'),
    ("v1beta1", "fpga", 'the ResourceName "fpga" is invalid'),
    ("v1beta1", "kubernetes.io/fpga", 'the ResourceName "kubernetes.io/fpga" is invalid'),
])
async def test_registration_refusals_are_upstreams(version, resource, message, node_dir):
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        plugin = DevicePlugin(os.path.join(node_dir, NODE, "device-plugins"), FPGA, {})
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await plugin.register(version, resource)
        assert (e.value.code(), e.value.details()) == (grpc.StatusCode.UNKNOWN, message)
        # counted all the same, as upstream counts a request before checking it
        text = (await mgr.kubelet_for(NODE).serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()),
                                                  "/metrics")).text
        assert f'kubelet_device_plugin_registration_total{{resource_name="{resource}"}} 1' in text.splitlines()


async def test_a_plugin_registering_its_resource_again_replaces_the_one_before(node_dir):
    """The kubelet hangs up on the plugin registered before: its devices go, and its stop later
    leaves the new plugin's devices healthy."""
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        directory = os.path.join(node_dir, NODE, "device-plugins")
        first = await DevicePlugin(directory, FPGA, {"fpga-a": None}, name="fpga-1.sock").start()
        second = await DevicePlugin(directory, FPGA, {"fpga-b": None, "fpga-c": None}, name="fpga-2.sock").start()
        try:
            await first.register()
            await becomes(fpgas(s, clock), ("1", "1"))
            await second.register()
            await becomes(fpgas(s, clock), ("2", "2"))
            assert await listed_fpgas(prc) == {"fpga-b", "fpga-c"}
            await first.stop()
            pods = s.client.resource("", "v1", "pods")
            await pods.create(fpga_pod("two", 2))
            await eventually(phase_is(pods, "two", "Running"))
            assert (first.allocations, second.allocations) == ([], [["fpga-b", "fpga-c"]])
            assert await fpgas(s, clock)() == ("2", "2")
        finally:
            await first.stop()
            await second.stop()


async def test_a_plugin_without_get_device_plugin_options_is_refused(node_dir):
    """The kubelet asks a plugin it dialled for its options; a refusal is the Register call's error."""
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        plugin = await DevicePlugin(os.path.join(node_dir, NODE, "device-plugins"), FPGA, {"fpga-a": None}).start()
        plugin.options_unimplemented = True
        try:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await plugin.register()
            assert (e.value.code(), e.value.details()) == (
                grpc.StatusCode.UNKNOWN, "failed to get device plugin options: rpc error: code = Unimplemented "
                                         "desc = unknown method GetDevicePluginOptions")
            assert await listed_fpgas(prc) == set() and await fpgas(s, clock)() == (None, None)
        finally:
            await plugin.stop()


async def test_sockets_left_in_the_directory_are_removed_at_start(node_dir):
    """As upstream's CleanupPluginDirectory: a previous run's sockets go (a plugin still running
    takes that as the sign to register again); other files, directories and the checkpoint stay."""
    directory = os.path.join(node_dir, NODE, "device-plugins")
    os.makedirs(os.path.join(directory, "sub"))
    for name in ("old-plugin.sock", "kubelet.sock", os.path.join("sub", "kept.sock")):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(os.path.join(directory, name))
    for name in ("notes.txt", "kubelet_internal_checkpoint"):
        with open(os.path.join(directory, name), "w") as f:
            f.write("{}")
    async with api_on_manual_clock() as (s, clock), node(s, clock, node_dir) as (mgr, prc):
        assert sorted(os.listdir(directory)) == ["kubelet.sock", "kubelet_internal_checkpoint", "notes.txt", "sub"]
        assert os.listdir(os.path.join(directory, "sub")) == ["kept.sock"]
        plugin = await DevicePlugin(directory, FPGA, {"fpga-a": None}).start()
        try:
            await plugin.register()  # the new kubelet.sock answers
            await becomes(fpgas(s, clock), ("1", "1"))
        finally:
            await plugin.stop()


async def test_the_registration_sockets_share_the_node_servers_open_files_budget(node_dir, monkeypatch):
    """Thousands of nodes in one process: a registration socket counts against the budget the pod
    resources servers keep (half the open files limit), and past it none is made. The gRPC
    server behind the socket starts with the first plugin that connects, and counts too."""
    held = KubeletSocket.files
    server = RegistrationServer(node_dir, DeviceManager(), "n1")
    await server.start()
    assert os.path.exists(server.path) and KubeletSocket.files == held + 1
    plugin = await DevicePlugin(server.dir, FPGA, {"fpga-a": None}).start()
    try:
        await plugin.register()
        assert FPGA in server.devices.plugins and KubeletSocket.files == held + 2
        await plugin.register()  # the same server answers again
        assert KubeletSocket.files == held + 2
    finally:
        await plugin.stop()
        await server.stop()
    assert not os.path.exists(server.path) and KubeletSocket.files == held

    monkeypatch.setattr(kubelet_socket, "file_budget", lambda: held)
    await server.start()
    assert not os.path.exists(server.path) and KubeletSocket.files == held
    await server.stop()
