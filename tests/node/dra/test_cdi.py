"""The container runtime's part of DRA: the CDI devices an external driver's NodePrepareResources
named for a container are resolved in the node's CDI directory when the container is created;
one that no spec resolves fails the creation as containerd fails it (CreateContainerError, a
Warning Failed event), tried again at the next sync, until the driver writes the spec."""

from __future__ import annotations

from nanokube.node.dra import cdi
from tests.controllers import eventually
from tests.node.dra.test_plugin_registration import DRIVER, _claimed_pod, _events, env, registered, ticking
from tests.node.dra.test_prepare import phase

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
    edits = cdi.edits(str(tmp_path), ["vendor.com/gpu=g0", "vendor.com/gpu=g1"])
    assert edits.mounts == [("/opt/vendor/lib", "/usr/lib/vendor", True), ("/var/run/vendor/g0", "/var/run/vendor", False)]
    assert edits.device_nodes == [("/dev/vendor0", "/dev/real0", 0o640), ("/dev/vendorctl", "/dev/vendorctl", None),
                                  ("/dev/vendor1", "/dev/vendor1", None)]
