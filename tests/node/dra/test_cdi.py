"""The container runtime's part of DRA: the CDI devices an external driver's NodePrepareResources
named for a container are resolved in the node's CDI directory when the container is created;
one that no spec resolves fails the creation as containerd fails it (CreateContainerError, a
Warning Failed event), tried again at the next sync, until the driver writes the spec."""

from __future__ import annotations

import shutil
import tempfile
import time

import pytest

from nanokube.machinery.errors import APIError
from nanokube.node.dra import cdi
from nanokube.node.streaming import log_options
from tests.controllers import eventually
from tests.node.dra.plugin_driver import PluginDriver
from tests.node.dra.test_plugin_registration import (DRIVER, NODE, _allocate, _claim, _claimed_pod, _events, env,
                                                     registered, ticking)
from tests.node.dra.test_prepare import phase
from tests.node.runtime.test_process import process_agents

__all__ = ["env"]  # the fixture, shared with the plugin registration tests

UNRESOLVABLE = (f"failed to create containerd container: CDI device injection failed: unresolvable CDI devices "
                f"{DRIVER}/device=gpu-0")


async def test_an_unresolvable_cdi_device_fails_the_container_until_its_spec_is_written(env):
    client, clock, mgr, driver = env
    d = driver()
    d.no_spec.add("gpu-0")
    await registered(clock, mgr, d)
    _, _, pods = await _claimed_pod(client, "trainer", "train")
    [ev] = await eventually(ticking(clock, lambda: _events(client, "Failed")))
    assert (ev["type"], ev["message"]) == ("Warning", f"Error: {UNRESOLVABLE}")
    assert ev["involvedObject"]["fieldPath"] == "spec.containers{app}"

    async def waiting():
        p = await pods.get("trainer", "default")
        states = {s["name"]: s["state"] for s in p["status"].get("containerStatuses") or ()}
        return p if "CreateContainerError" == states.get("app", {}).get("waiting", {}).get("reason") else None
    p = await eventually(waiting)
    app = next(s for s in p["status"]["containerStatuses"] if s["name"] == "app")
    assert app["state"]["waiting"]["message"] == UNRESOLVABLE
    assert p["status"]["phase"] == "Pending"
    assert len(d.called("NodePrepareResources")) == 1, "the claim is prepared; the container is what fails"

    d.write_spec("gpu-0")
    await eventually(phase(pods, "trainer", "Running", clock))
    env_of_app = mgr.agents["gpu-0"].claims.cdi_environment(p, "app")
    assert env_of_app == {"DRIVER": DRIVER, "DEVICE_0": "gpu-0"}


def test_a_specs_mounts_and_device_nodes_are_gathered_spec_wide_then_per_device(tmp_path):
    (tmp_path / "vendor.yaml").write_text(
        "cdiVersion: 0.6.0\nkind: vendor.com/gpu\ncontainerEdits:\n"
        "  mounts: [{hostPath: /opt/vendor/lib, containerPath: /usr/lib/vendor, options: [ro, bind]}]\n"
        "devices:\n- name: g0\n  containerEdits:\n"
        "    mounts: [{hostPath: /var/run/vendor/g0, containerPath: /var/run/vendor}]\n"
        "    deviceNodes: [{path: /dev/vendor0, hostPath: /dev/real0, fileMode: 416}, {path: /dev/vendorctl}]\n"
        "- name: g1\n  containerEdits:\n    deviceNodes: [{path: /dev/vendorctl}, {path: /dev/vendor1}]\n")
    edits = cdi.edits([str(tmp_path)], ["vendor.com/gpu=g0", "vendor.com/gpu=g1"])
    assert edits.mounts == [("/opt/vendor/lib", "/usr/lib/vendor", True), ("/var/run/vendor/g0", "/var/run/vendor", False)]
    assert edits.device_nodes == [("/dev/vendor0", "/dev/real0", 0o640), ("/dev/vendorctl", "/dev/vendorctl", None),
                                  ("/dev/vendor1", "/dev/vendor1", None)]


@pytest.fixture
async def process_node(tmp_path):
    """The default cluster's node agents on the process runtime, their pods' directory short: a
    unix socket's path has at most 107 bytes."""
    pods_dir = tempfile.mkdtemp(prefix="nk-", dir="/tmp")
    try:
        async with process_agents(tmp_path, pods_dir) as agents:
            yield agents
    finally:
        shutil.rmtree(pods_dir, ignore_errors=True)


async def test_a_process_started_once_its_cdi_spec_is_written_gets_the_specs_mount_and_env(process_node):
    """The process runtime: the container fails to be created while its CDI device does not
    resolve, then runs with the spec's mount and variables once the driver writes it."""
    client, rt, mgr = process_node
    a = mgr.agents[NODE]
    d = PluginDriver(DRIVER, a.plugins_registry, f"{mgr.pods_dir}/{NODE}/plugins", a.cdi_dir,
                     lambda ns, n: [("gpu", NODE, "gpu-0")]).start()
    try:
        d.no_spec.add("gpu-0")

        async def registered():
            plugin = a.dra_plugins.get(DRIVER)
            return plugin is not None and plugin.connected
        await eventually(registered)
        claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
        pods = client.resource("", "v1", "pods")
        await claims.create(_claim("reader"))
        pod = await pods.create({"metadata": {"name": "reader", "namespace": "default"}, "spec": {
            "nodeName": NODE, "restartPolicy": "Never", "resourceClaims": [{"name": "acc", "resourceClaimName": "reader"}],
            "containers": [{"name": "app", "image": "busybox", "resources": {"claims": [{"name": "acc"}]},
                            "command": ["sh", "-c", f"cat /var/run/{DRIVER}/gpu-0/info; echo $DEVICE_0"]}]}})
        await _allocate(claims, "reader", pod)

        async def waiting():
            st = (await pods.get("reader", "default")).get("status") or {}
            return [s["state"].get("waiting", {}).get("reason") for s in st.get("containerStatuses") or ()] == \
                ["CreateContainerError"]
        await eventually(waiting)
        d.write_spec("gpu-0")

        async def logged():
            try:  # pods/log as the node serves it: refused while the container waits to be created
                data = await rt.pods[("default", "reader")].logs("app", log_options({}, time.time()))
            except APIError:
                return None
            return data if isinstance(data, bytes) and data.count(b"\n") >= 2 else None  # both lines
        assert await eventually(logged, timeout=60) == f"{DRIVER} gpu-0\ngpu-0\n".encode()
    finally:
        d.stop()
