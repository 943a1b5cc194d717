"""Static pods (node/static_pods.py) run by the default cluster's node agents on a ManualClock: the
mirror pod is the static pod's reflection, so deleting it leaves the static pod running."""

import contextlib
from types import SimpleNamespace

import orjson
import yaml
from multidict import CIMultiDict, MultiDict

from nanokube.machinery.errors import APIError
from nanokube.node.kubelet_server import KubeletServer
from nanokube.node.static_pods import StaticPods
from tests.controllers import eventually
from tests.node import ManualClock
from tests.node.test_lifecycle import SERVER, node_agents


@contextlib.asynccontextmanager
async def static_web(tmp_path):
    """Node gpu-0 of the default cluster with a file source holding one manifest, web.yaml (a server):
    yields the API server's stack, the clock and the manifests' directory."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.36", "command": SERVER}]}}))
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        agent = mgr.agents["gpu-0"]
        static = StaticPods(s.client, "gpu-0", str(manifests), 20.0, clock, mgr.pods, lambda: agent.node_uid,
                            on_read=agent.static_pods_read)
        static.start()
        try:
            yield s, clock, manifests, agent
        finally:
            await static.stop()


async def test_a_deleted_mirror_pod_is_made_again_and_its_static_pod_runs_on(tmp_path):
    """Upstream's kubelet deletes a mirror pod another deleted and makes it again; the static pod's
    containers are not restarted (same containerID, startedAt, restartCount 0, pod IP), and no
    Killing event is told. Its manifest removed, the static pod stops and its mirror pod goes."""
    async with static_web(tmp_path) as (s, clock, manifests, agent):
        pods = s.client.resource("", "v1", "pods")
        kubelet = KubeletServer(agent, clock.now())

        async def summarized() -> dict:  # the static pod's entry in the kubelet's /stats/summary
            resp = await kubelet.serve(SimpleNamespace(method="GET", query=MultiDict(), headers=CIMultiDict()),
                                       "/stats/summary")
            return next(p for p in orjson.loads(resp.body)["pods"] if p["podRef"]["name"] == "web-gpu-0")

        async def running(other_than: str = ""):
            try:
                p = await pods.get("web-gpu-0", "default")
            except APIError:
                return None
            ok = p["metadata"]["uid"] != other_than and (p.get("status") or {}).get("phase") == "Running"
            return p if ok and (p["status"].get("containerStatuses") or [{}])[0].get("started") else None
        first = await eventually(running)
        before = first["status"]["containerStatuses"][0]
        stats = await summarized()
        assert stats["ephemeral-storage"]["usedBytes"] > 0  # (its etc-hosts file at least)

        await pods.delete("web-gpu-0", "default")
        await clock.advance(1)
        second = await eventually(lambda: running(other_than=first["metadata"]["uid"]))
        after = second["status"]["containerStatuses"][0]
        assert after["restartCount"] == 0 and after["containerID"] == before["containerID"]
        assert after["state"]["running"]["startedAt"] == before["state"]["running"]["startedAt"]
        assert second["status"]["podIP"] == first["status"]["podIP"]
        assert second["metadata"]["annotations"]["kubernetes.io/config.mirror"] == \
            first["metadata"]["annotations"]["kubernetes.io/config.mirror"]
        events, _ = await s.client.resource("", "v1", "events").list(namespace="default")
        assert "Killing" not in [e["reason"] for e in events], "its container was not stopped"
        # the summary finds the static pod's files by its new mirror pod's UID (it reported none)
        again = await summarized()
        assert again["podRef"]["uid"] == second["metadata"]["uid"]
        assert again["ephemeral-storage"]["usedBytes"] == stats["ephemeral-storage"]["usedBytes"]

        (manifests / "web.yaml").unlink()
        await clock.advance(1)

        async def gone():
            try:
                await pods.get("web-gpu-0", "default")
            except APIError as e:
                return e.code == 404
            await clock.advance(1)
            return False
        assert await eventually(gone)
        events, _ = await s.client.resource("", "v1", "events").list(namespace="default")
        assert ("Killing", "spec.containers{app}") in [(e["reason"], e["involvedObject"].get("fieldPath"))
                                                       for e in events]


async def test_a_static_pod_whose_mirror_pod_and_manifest_went_together_stops(tmp_path):
    """The mirror pod force-deleted just after its manifest was removed: the static pod, waiting for
    its next mirror pod, is not wanted any more once the manifests are read, so its container is
    stopped (Killing) and no mirror pod is made again."""
    async with static_web(tmp_path) as (s, clock, manifests, _):
        pods, events = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "events")

        async def running():
            try:
                p = await pods.get("web-gpu-0", "default")
            except APIError:
                return None
            return p if (p.get("status") or {}).get("phase") == "Running" else None
        await eventually(running)
        (manifests / "web.yaml").unlink()
        await pods.delete("web-gpu-0", "default", grace_period_seconds=0)

        async def killed():
            await clock.advance(1)
            items, _ = await events.list(namespace="default")
            return "Killing" in [e["reason"] for e in items]
        assert await eventually(killed)
        await clock.advance(2)
        assert [p["metadata"]["name"] for p in (await pods.list(namespace="default"))[0]] == []
