"""ResourceClaims as a user meets them through kubectl against `nanokube up`:
what the cluster says when a pod's claim cannot be made."""

from __future__ import annotations

import json

from tests.e2e.conftest import wait_for


def _events(cluster, name: str, reason: str) -> list[dict]:
    return cluster.kubectl_json("get", "events", "--field-selector", f"involvedObject.name={name},reason={reason}")["items"]


def test_a_missing_claim_template_is_a_warning_on_the_pod_until_it_exists(cluster):
    """The resourceclaim controller's FailedResourceClaimCreation names the pod claim and the
    template it could not read; once the template is created the claim is made and the pod runs."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "needs-template", "namespace": "default"},
           "spec": {"terminationGracePeriodSeconds": 0,
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                    "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"claims": [{"name": "gpu"}]}}]}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod))
    [event] = wait_for(lambda: _events(cluster, "needs-template", "FailedResourceClaimCreation"),
                       what="FailedResourceClaimCreation")
    assert event["type"] == "Warning" and event["source"]["component"] == "resourceclaim-controller"
    assert event["message"] == ('PodResourceClaim gpu: resource claim template "one-gpu": '
                                'resourceclaimtemplate.resource.k8s.io "one-gpu" not found')

    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io"}}]}}}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(template))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "needs-template")["status"].get("phase") == "Running",
             what="needs-template running")
    [status] = cluster.kubectl_json("get", "pod", "needs-template")["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpu" and status["resourceClaimName"].startswith("needs-template-gpu-")
