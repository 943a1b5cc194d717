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
                    "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                                    "resources": {"claims": [{"name": "gpu"}]}}]}}
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


def _gpu_pod(cluster, name: str, resource: str, count: int) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"terminationGracePeriodSeconds": 0, "containers": [
               {"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                "resources": {"limits": {resource: str(count), "cpu": "1"}}}]}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod))


def test_extended_resource_backed_by_a_device_class_gets_a_claim_made_by_the_scheduler(cluster):
    """DRAExtendedResource (GA in 1.37): a container asking for a DeviceClass's implicit extended
    resource on nodes that do not advertise it is scheduled by DynamicResources, which creates one
    claim for the pod (<pod>-extended-resources-*, owned by it, annotated) with a request per
    container and resource, allocated and reserved for it, and records it in the pod's
    status.extendedResourceClaimStatus; the claim goes with the pod."""
    resource = "deviceclass.resource.kubernetes.io/gpu.nanokube.io"
    _gpu_pod(cluster, "ext-gpus", resource, 2)
    wait_for(lambda: cluster.kubectl_json("get", "pod", "ext-gpus")["status"].get("phase") == "Running",
             what="ext-gpus running")
    pod = cluster.kubectl_json("get", "pod", "ext-gpus")
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [{"containerName": "main", "resourceName": resource,
                                          "requestName": "container-0-request-1"}]
    claim = cluster.kubectl_json("get", "resourceclaim", status["resourceClaimName"])
    md = claim["metadata"]
    assert md["generateName"] == "ext-gpus-extended-resources-" and md["name"].startswith("ext-gpus-extended-resources-")
    assert md["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "ext-gpus",
                                      "uid": pod["metadata"]["uid"], "controller": True}]
    assert claim["spec"]["devices"]["requests"] == [{"name": "container-0-request-1", "exactly": {
        "deviceClassName": "gpu.nanokube.io", "allocationMode": "ExactCount", "count": 2}}]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [r["request"] for r in results] == ["container-0-request-1"] * 2
    assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "ext-gpus", "uid": pod["metadata"]["uid"]}]

    cluster.kubectl("delete", "pod", "ext-gpus", "--wait=false")
    wait_for(lambda: cluster.kubectl("get", "resourceclaim", md["name"], check=False).returncode != 0,
             what="extended resource claim gone")


def test_nvidia_gpu_limit_on_the_default_cluster_is_served_by_the_gpu_device_class(cluster):
    """The default cluster's GPUs are NVIDIA H100s: its gpu.nanokube.io class carries
    extendedResourceName nvidia.com/gpu, so `limits: nvidia.com/gpu: 1` (what device-plugin users
    write) schedules through a claim the scheduler makes, instead of 'Insufficient nvidia.com/gpu'."""
    cls = cluster.kubectl_json("get", "deviceclass", "gpu.nanokube.io")
    assert cls["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    cluster.kubectl("apply", "-f", "-", input="""
apiVersion: v1
kind: Pod
metadata: {name: cuda-one}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: cuda
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    resources:
      limits: {nvidia.com/gpu: 1}
""")
    wait_for(lambda: cluster.kubectl_json("get", "pod", "cuda-one")["status"].get("phase") == "Running",
             what="cuda-one running")
    pod = cluster.kubectl_json("get", "pod", "cuda-one")
    status = pod["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [{"containerName": "cuda", "resourceName": "nvidia.com/gpu",
                                          "requestName": "container-0-request-0"}]
    claim = cluster.kubectl_json("get", "resourceclaim", status["resourceClaimName"])
    assert claim["spec"]["devices"]["requests"] == [{"name": "container-0-request-0", "exactly": {
        "deviceClassName": "gpu.nanokube.io", "allocationMode": "ExactCount", "count": 1}}]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == ("gpu.nanokube.io", pod["spec"]["nodeName"])
    assert result["device"].startswith("gpu-")
    cluster.kubectl("delete", "pod", "cuda-one", "--wait=false")


def test_explicit_extended_resource_name_and_too_many_devices(cluster):
    """A DeviceClass's spec.extendedResourceName is requested like a device plugin's resource;
    asking for more devices than a node has leaves the pod Pending on DRA's verdict, not on
    NodeResourcesFit's 'Insufficient'."""
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "ext-example-gpu"},
           "spec": {"extendedResourceName": "example.com/gpu",
                    "selectors": [{"cel": {"expression": "device.driver == 'gpu.nanokube.io'"}}]}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(cls))
    _gpu_pod(cluster, "ext-named", "example.com/gpu", 1)
    wait_for(lambda: cluster.kubectl_json("get", "pod", "ext-named")["status"].get("phase") == "Running",
             what="ext-named running")
    name = cluster.kubectl_json("get", "pod", "ext-named")["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    [request] = cluster.kubectl_json("get", "resourceclaim", name)["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "ext-example-gpu" and request["exactly"]["count"] == 1

    _gpu_pod(cluster, "ext-too-many", "example.com/gpu", 9)
    [event] = wait_for(lambda: _events(cluster, "ext-too-many", "FailedScheduling"), what="FailedScheduling")
    assert "cannot allocate all claims" in event["message"] and "Insufficient" not in event["message"]


def test_a_pod_waiting_for_an_extended_resource_runs_once_a_device_class_provides_it(cluster):
    """NodeResourcesFit turns the pod away ('Insufficient') while no DeviceClass backs the
    resource; the class's creation is a cluster event that retries it (upstream registers
    DeviceClass events for DRAExtendedResource), not the five-minute flush."""
    _gpu_pod(cluster, "ext-late", "deviceclass.resource.kubernetes.io/ext-late-class", 1)
    [event] = wait_for(lambda: _events(cluster, "ext-late", "FailedScheduling"), what="FailedScheduling")
    assert "Insufficient deviceclass.resource.kubernetes.io/ext-late-class" in event["message"]
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "ext-late-class"},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nanokube.io'"}}]}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(cls))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "ext-late")["status"].get("phase") == "Running",
             what="ext-late running")


def test_a_container_claim_naming_no_pod_claim_is_not_found(cluster):
    """validateResourceClaimNames: a container's claim that names none of the pod's is 'Not found'
    with the names it could have been (or that there are none); its request must be a DNS label."""
    def create(name: str, claims: list, pod_claims: list) -> str:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
               "spec": {"resourceClaims": pod_claims, "containers": [
                   {"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                    "resources": {"claims": claims}}]}}
        r = cluster.kubectl("create", "-f", "-", input=json.dumps(pod), check=False)
        assert r.returncode != 0
        return r.stderr.strip()

    assert create("ref-none", [{"name": "gpu"}], []) == (
        'The Pod "ref-none" is invalid: spec.containers[0].resources.claims[0]: Not found: "gpu": '
        'must be one of the names in pod.spec.resourceClaims which is empty')
    two = [{"name": "nic", "resourceClaimName": "n"}, {"name": "gpu", "resourceClaimName": "g"}]
    assert create("ref-other", [{"name": "gpus"}], two) == (
        'The Pod "ref-other" is invalid: spec.containers[0].resources.claims[0]: Not found: "gpus": '
        'must be one of the names in pod.spec.resourceClaims: gpu, nic')
    assert create("ref-request", [{"name": "gpu", "request": "Big_GPU"}], two) == (
        'The Pod "ref-request" is invalid: spec.containers[0].resources.claims[0].request: Invalid value: "Big_GPU": '
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
        "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def test_selectors_are_type_checked_against_the_device(cluster):
    """The `device` of a CEL selector is upstream's kubernetes.DRADevice object: a field it
    lacks, a comparison of the wrong type or a result that is not a bool is refused when a claim
    or a DeviceClass is written, not found out at each scheduling attempt."""
    def create(kind: str, name: str, expression: str) -> str:
        sel = {"selectors": [{"cel": {"expression": expression}}]}
        spec = sel if kind == "DeviceClass" else {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io", **sel}}]}}
        obj = {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
               "spec": spec}
        r = cluster.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
        return r.stderr.strip() if r.returncode else ""

    assert create("ResourceClaim", "typo", "device.drivr == 'gpu.nanokube.io'") == (
        'The ResourceClaim "typo" is invalid: spec.devices.requests[0].exactly.selectors[0].cel.expression: '
        """Invalid value: "device.drivr == 'gpu.nanokube.io'": compilation failed: ERROR: <input>:1:8: """
        "undefined field 'drivr'\n | device.drivr == 'gpu.nanokube.io'\n | .......^")
    assert "found no matching overload for '_==_' applied to '(kubernetes.Quantity, string)'" in create(
        "ResourceClaim", "quantity", "device.capacity['gpu.nanokube.io'].memory == '80Gi'")
    assert create("DeviceClass", "not-bool", "device.driver") == (
        'The DeviceClass "not-bool" is invalid: spec.selectors[0].cel.expression: Invalid value: "device.driver": '
        "must evaluate to bool")
    assert create("ResourceClaim", "fine", "device.attributes['gpu.nanokube.io'].model.startsWith('H100') && "
                  "device.capacity['gpu.nanokube.io'].memory.compareTo(quantity('40Gi')) >= 0 && "
                  "!device.allowMultipleAllocations") == ""
