"""A required field decodes as the Go struct field it is: a value scalar tagged without omitempty,
left out of the object that holds it, is its zero, which upstream stores and serves (a container
status's `ready: false`, `restartCount: 0`, `image: ""`, a metav1.Condition's `message: ""`); one
tagged omitempty (ImageVolumeStatus's `imageRef`), sent as its zero or null, is left out, as an
optional one is."""

from __future__ import annotations

from tests.served import send, served

PODS = "/api/v1/namespaces/default/pods"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}


async def test_required_fields_left_out_are_zero_and_omitempty_ones_sent_zero_are_left_out(tmp_path):
    async with served(tmp_path) as (_, api):
        code, pod = await send(api, "POST", PODS, POD)
        assert code == 201, pod
        pod["status"] = {"containerStatuses": [{"name": "c", "volumeMounts": [
            {"name": "v", "mountPath": "/m", "volumeStatus": {"image": {"imageRef": ""}}},
            {"name": "w", "mountPath": "/n", "volumeStatus": {"image": {"imageRef": None}}}]}]}
        code, pod = await send(api, "PUT", f"{PODS}/p/status", pod)
        assert code == 200, pod
        for served_pod in (pod, (await send(api, "GET", f"{PODS}/p"))[1]):
            [status] = served_pod["status"]["containerStatuses"]
            assert {k: status[k] for k in ("ready", "restartCount", "image", "imageID")} == {
                "ready": False, "restartCount": 0, "image": "", "imageID": ""}
            assert [m["volumeStatus"] for m in status["volumeMounts"]] == [{"image": {}}, {"image": {}}]

        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}
        code, pdb = await send(api, "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb)
        assert code == 201, pdb
        pdb["status"] = {**pdb.get("status", {}), "conditions": [
            {"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        code, pdb = await send(api, "PUT", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/b/status", pdb)
        assert code == 200, pdb
        assert pdb["status"]["conditions"][0]["message"] == ""
