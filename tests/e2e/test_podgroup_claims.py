"""PodGroup resourceClaims through kubectl on the default simulated cluster:
a gang of two pods that name their group's claim (from a template) share
one GPU. The claim is generated once, owned by the PodGroup, allocated one
device, reserved for the PodGroup, and both pods run on the GPU's node."""

from __future__ import annotations

import yaml

from tests.e2e.test_gang_gpus import GPU_CLASS, wait_for

S = "scheduling.k8s.io"


def docs() -> list[dict]:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "shared-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}}}
    claim = {"name": "gpu", "resourceClaimTemplateName": "shared-gpu"}
    group = {"apiVersion": f"{S}/v1beta1", "kind": "PodGroup", "metadata": {"name": "pair", "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": [claim]}}
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pair-{i}", "namespace": "default"},
             "spec": {"schedulingGroup": {"podGroupName": "pair"}, "resourceClaims": [claim],
                      "terminationGracePeriodSeconds": 0,
                      "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}}
            for i in range(2)]
    return [template, group, *pods]


def test_gang_shares_one_group_claim_and_both_pods_run(cluster):
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs()))

    def running():
        pods = [cluster.kubectl_json("get", "pod", f"pair-{i}", "-n", "default") for i in range(2)]
        return pods if all(p["status"].get("phase") == "Running" for p in pods) else None
    pods = wait_for(running)
    assert pods[0]["spec"]["nodeName"] == pods[1]["spec"]["nodeName"]
    pg = cluster.kubectl_json("get", "podgroup", "pair", "-n", "default")
    [st] = pg["status"]["resourceClaimStatuses"]
    assert st["name"] == "gpu" and st["resourceClaimName"].startswith("pair-gpu-")
    for p in pods:
        assert p["status"]["resourceClaimStatuses"] == [st]
    owned = [c for c in cluster.kubectl_json("get", "resourceclaims", "-n", "default")["items"]
             if any(r["kind"] == "PodGroup" and r["name"] == "pair" for r in c["metadata"].get("ownerReferences") or [])]
    assert [c["metadata"]["name"] for c in owned] == [st["resourceClaimName"]]
    claim = owned[0]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
    [term] = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert term["matchFields"][0]["values"] == [pods[0]["spec"]["nodeName"]]
    assert claim["status"]["reservedFor"] == [{"apiGroup": S, "resource": "podgroups", "name": "pair",
                                               "uid": pg["metadata"]["uid"]}]
    out = cluster.kubectl("get", "podgroup", "pair", "-n", "default").stdout
    assert out.split("\n")[0].split()[:4] == ["NAME", "POLICY", "WORKLOAD", "STATUS"]
    assert out.split("\n")[1].split()[:4] == ["pair", "Gang", "<none>", "Scheduled"]
