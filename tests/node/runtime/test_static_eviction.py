"""A static pod on the process runtime whose mirror pod was made again (node/static_pods.py): its
worker keeps the first mirror pod's UID while its pod is the next one, and the eviction manager's
local storage pass, which measures the emptyDirs of pods with a size limit on disk, still works."""

import yaml

from nanokube.clock import REAL
from nanokube.machinery.errors import APIError
from nanokube.node.static_pods import StaticPods
from tests.controllers import eventually
from tests.node.runtime.test_process import SERVE, phase, pod, process_agents, status_of


async def test_a_pod_past_its_emptydir_limit_is_evicted_beside_a_static_pod_whose_mirror_pod_came_back(tmp_path):
    manifests, scratch = tmp_path / "manifests", tmp_path / "scratch"
    manifests.mkdir()
    static = pod("web", SERVE, restart="Always", grace=1,
                 volumeMounts=[{"name": "cache", "mountPath": str(tmp_path / "web-cache")}])
    del static["metadata"]["namespace"], static["spec"]["nodeName"]
    static["spec"]["volumes"] = [{"name": "cache", "emptyDir": {"sizeLimit": "1Mi"}}]
    (manifests / "web.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", **static}))
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, mgr):
        agent, pods = mgr.agents["gpu-0"], client.resource("", "v1", "pods")
        source = StaticPods(client, "gpu-0", str(manifests), 20.0, REAL, mgr.pods, lambda: agent.node_uid,
                            on_read=agent.static_pods_read)
        source.start()
        try:
            async def mirror(other_than: str = ""):
                try:
                    p = await pods.get("web-gpu-0", "default")
                except APIError:
                    return None
                return p if p["metadata"]["uid"] != other_than and phase("Running")(p.get("status") or {}) else None
            first = await eventually(mirror)
            await pods.delete("web-gpu-0", "default")
            await eventually(lambda: mirror(other_than=first["metadata"]["uid"]))

            filler = pod("filler", ["sh", "-c", f"dd if=/dev/zero of={scratch}/blob bs=1M count=2; sleep 300"], grace=1,
                         volumeMounts=[{"name": "scratch", "mountPath": str(scratch)}])
            filler["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}]
            await pods.create(filler)
            evicted = await eventually(status_of(pods, "filler", lambda st: st.get("reason") == "Evicted"), timeout=60)
            assert evicted["status"]["phase"] == "Failed"
            assert 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi".' in evicted["status"]["message"]
        finally:
            await source.stop()
