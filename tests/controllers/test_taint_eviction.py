"""Taint eviction over HTTP: the controller on HTTPClient, the test on the official client."""

from __future__ import annotations

import asyncio

import orjson
from kubernetes import client as k8s

from nanokube.client.http import HTTPClient
from nanokube.clock import Clock
from nanokube.controllers.taint_eviction import TaintEvictionController
from tests.served import served
from tests.controllers import tries

THEN = "2020-01-01T00:00:00Z"


async def test_a_pod_already_disruption_target_keeps_its_transition_time(tmp_path):
    """Upstream marks the pod with podutil.UpdatePodCondition before deleting it: a pod whose
    DisruptionTarget is True already (here the eviction API's) gets the taint manager's reason and
    message, and the condition's lastTransitionTime stays."""
    async with served(tmp_path) as (_, api_client):
        core = k8s.CoreV1Api(api_client)
        await asyncio.to_thread(core.create_node, {"metadata": {"name": "n1"}})
        await asyncio.to_thread(core.create_namespaced_pod, "default", {
            "metadata": {"name": "victim", "finalizers": ["example.com/keep"]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "pause"}]}})
        await asyncio.to_thread(core.patch_namespaced_pod_status, "victim", "default", {"status": {"conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
             "message": "Eviction API: evicting", "lastTransitionTime": THEN}]}})
        # a spec change moves the pod to generation 2, which the taint manager's condition reports
        await asyncio.to_thread(core.patch_namespaced_pod, "victim", "default", {"spec": {"activeDeadlineSeconds": 600}})
        http = HTTPClient.from_kubeconfig(str(tmp_path / "kubeconfig"))
        await http.start()
        ctrl = TaintEvictionController(http, Clock())
        await ctrl.start()
        try:
            await asyncio.to_thread(core.patch_node, "n1", {"spec": {"taints": [
                {"key": "example.com/drain", "effect": "NoExecute"}]}})
            for _ in tries():
                raw = await asyncio.to_thread(core.read_namespaced_pod, "victim", "default", _preload_content=False)
                pod = orjson.loads(raw.data)
                if pod["metadata"].get("deletionTimestamp"):
                    break
                await asyncio.sleep(0.02)
        finally:
            await ctrl.stop()
            await http.close()
        await asyncio.to_thread(core.patch_namespaced_pod, "victim", "default", {"metadata": {"finalizers": None}})
    assert pod["metadata"].get("deletionTimestamp")
    [target] = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (target["status"], target["reason"], target["message"], target["lastTransitionTime"]) == (
        "True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint", THEN)
    assert (target["observedGeneration"], pod["metadata"]["generation"]) == (2, 3)
