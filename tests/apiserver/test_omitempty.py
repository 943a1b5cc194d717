"""Omitempty zeros through HTTP: kube-apiserver decodes a body into Go structs and encodes them back,
so an omitempty value scalar sent as its zero (`paused: false`, `minReadySeconds: 0`) is neither
stored nor served, while a pointer's zero (`replicas: 0`) and a field tagged without omitempty (a
PodDisruptionBudget's counts, a condition's status) keep theirs."""

import asyncio
import json

from kubernetes import client

from tests.served import served


async def _json(f, *args):
    return json.loads((await asyncio.to_thread(f, *args, _preload_content=False)).data)


def _deployment(replicas: int) -> dict:
    template = {"metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "busybox", "tty": False, "workingDir": ""}]}}
    return {"metadata": {"name": "d"}, "spec": {
        "replicas": replicas, "paused": False, "minReadySeconds": 0,
        "selector": {"matchLabels": {"app": "a"}}, "template": template,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}}


async def test_a_deployments_zero_values_are_dropped_its_replicas_zero_kept(tmp_path):
    async with served(tmp_path) as (_, api):
        apps = client.AppsV1Api(api)
        created = await _json(apps.create_namespaced_deployment, "default", _deployment(0))
        for got in (created, await _json(apps.read_namespaced_deployment, "d", "default")):
            spec = got["spec"]
            assert spec["replicas"] == 0 and not {"paused", "minReadySeconds"} & set(spec)
            assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
            assert spec["template"]["spec"]["containers"][0] == {
                "name": "c", "image": "busybox", "imagePullPolicy": "Always", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
        replaced = await _json(apps.replace_namespaced_deployment, "d", "default", {**created, **_deployment(0)})
        assert "paused" not in replaced["spec"] and replaced["metadata"]["generation"] == 1


async def test_status_zeros_that_upstream_encodes_are_kept(tmp_path):
    async with served(tmp_path) as (_, api):
        apps, policy = client.AppsV1Api(api), client.PolicyV1Api(api)
        await _json(policy.create_namespaced_pod_disruption_budget, "default",
                    {"metadata": {"name": "p"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}})
        status = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0,
                  "observedGeneration": 0}
        pdb = await _json(policy.patch_namespaced_pod_disruption_budget_status, "p", "default", {"status": status})
        assert pdb["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
        await _json(apps.create_namespaced_deployment, "default", _deployment(1))
        condition = {"type": "Progressing", "status": "", "reason": "", "message": ""}
        d = await _json(apps.patch_namespaced_deployment_status, "d", "default",
                        {"status": {"conditions": [condition], "replicas": 0, "readyReplicas": 0}})
        assert d["status"]["conditions"] == [{"type": "Progressing", "status": ""}]
        assert not {"replicas", "readyReplicas"} & set(d["status"])


async def test_a_priority_class_keeps_its_zero_value_and_drops_its_zero_default(tmp_path):
    async with served(tmp_path) as (_, api):
        scheduling = client.SchedulingV1Api(api)
        pc = await _json(scheduling.create_priority_class,
                         {"metadata": {"name": "zero"}, "value": 0, "globalDefault": False, "description": ""})
        assert pc["value"] == 0 and not {"globalDefault", "description"} & set(pc)
