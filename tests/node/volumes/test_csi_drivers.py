"""A CSI volume that needs attaching costs its kubelet no request per mount try: whether it needs
attaching comes from the node's CSIDriver watch (one per node, from its first CSI volume on) and
whether it is attached from the node agent's copy of its Node, as upstream's kubelet reads both
through listers. Node agents talk to an API server over HTTP (its apiserver_request_total counts
what they ask); the attach/detach controller and the built-in driver's attacher talk in-process."""

from __future__ import annotations

from nanokube.apiserver.loopback import LocalClient
from nanokube.controllers.attachdetach import AttachDetachController
from nanokube.node.storage import CSI_DRIVER, LocalPathProvisioner
from tests.controllers import ticking
from tests.controllers.test_attachdetach import claimed_pod
from tests.node import metric_totals, nodes_over_http
from tests.node.test_lifecycle import phase_is


def requests(resource: str, verb: str) -> tuple[str, str]:
    return "apiserver_request_total", rf'code="\d+",[^}}]*resource="{resource}",[^}}]*subresource="",verb="{verb}"[^}}]*'


async def test_pods_on_attached_volumes_start_without_a_get_of_their_node_or_driver(tmp_path):
    async with nodes_over_http(str(tmp_path / "pods")) as (_client, _nodes, clock, server):
        ctl = LocalClient(server.rest)
        parts = [LocalPathProvisioner(ctl, str(tmp_path / "volumes"), clock), AttachDetachController(ctl, clock)]
        for p in parts:
            await p.start()
        try:
            drivers = ctl.resource("storage.k8s.io", "v1", "csidrivers")
            await drivers.delete(CSI_DRIVER)
            await drivers.create({"metadata": {"name": CSI_DRIVER}, "spec": {"attachRequired": True}})
            for name, node in (("a", "gpu-0"), ("b", "gpu-0"), ("c", "gpu-1")):
                (tmp_path / "volumes" / name).mkdir(parents=True)
                await claimed_pod(ctl, name, node, {"driver": CSI_DRIVER, "volumeHandle": name,
                                                    "volumeAttributes": {"path": str(tmp_path / "volumes" / name)}})
            pods = ctl.resource("", "v1", "pods")
            for name in ("a", "b", "c"):
                await ticking(clock, phase_is(pods, name, "Running"))
            assert await metric_totals(server, requests("nodes", "GET"), requests("csidrivers", "GET")) == [0, 0]
            node = await ctl.resource("", "v1", "nodes").get("gpu-0")
            assert sorted(v["name"] for v in node["status"]["volumesAttached"]) == [
                f"kubernetes.io/csi/{CSI_DRIVER}^a", f"kubernetes.io/csi/{CSI_DRIVER}^b"]
        finally:
            for p in reversed(parts):
                await p.stop()


async def test_a_pod_starts_moments_after_its_volume_is_attached_however_long_it_waited(tmp_path):
    async with nodes_over_http(str(tmp_path / "pods")) as (_client, _nodes, clock, server):
        ctl = LocalClient(server.rest)
        parts = [LocalPathProvisioner(ctl, str(tmp_path / "volumes"), clock)]
        await parts[0].start()
        try:
            drivers = ctl.resource("storage.k8s.io", "v1", "csidrivers")
            await drivers.delete(CSI_DRIVER)
            await drivers.create({"metadata": {"name": CSI_DRIVER}, "spec": {"attachRequired": True}})
            (tmp_path / "volumes" / "a").mkdir(parents=True)
            await claimed_pod(ctl, "a", "gpu-0", {"driver": CSI_DRIVER, "volumeHandle": "a",
                                                  "volumeAttributes": {"path": str(tmp_path / "volumes" / "a")}})
            pods = ctl.resource("", "v1", "pods")
            for _ in range(40):  # no attach/detach controller yet: the pod waits, past any back-off's first steps
                await clock.advance(1.0)
            assert (await pods.get("a", "default"))["status"].get("phase") == "Pending"
            parts.append(AttachDetachController(ctl, clock))
            await parts[1].start()

            async def attached():
                node = await ctl.resource("", "v1", "nodes").get("gpu-0")
                return (node["status"].get("volumesAttached") or None) and clock.monotonic()
            since = await ticking(clock, attached, step=0.05)
            await ticking(clock, phase_is(pods, "a", "Running"), step=0.05)
            assert clock.monotonic() - since <= 1.0
        finally:
            for p in reversed(parts):
                await p.stop()
