"""Admission policies on a real `nanokube up`: a ValidatingAdmissionPolicy
whose per-namespace ConfigMap param caps the GPUs a ResourceClaim may ask
for, and a MutatingAdmissionPolicy that labels every PodGroup; applied with
kubectl, exercised with kubectl and the Python client."""

from __future__ import annotations

import json

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

GPU_CLASS = "gpu.example.com"

POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: gpu-quota
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: [resource.k8s.io]
      apiVersions: ["*"]
      operations: [CREATE, UPDATE]
      resources: [resourceclaims]
  variables:
  - name: gpus
    expression: >-
      object.spec.devices.requests
      .filter(r, has(r.exactly) && r.exactly.deviceClassName == params.data.deviceClass)
      .map(r, has(r.exactly.count) ? r.exactly.count : 1).sum()
  validations:
  - expression: variables.gpus <= int(params.data.maxGPUs)
    messageExpression: "'claim asks for ' + string(variables.gpus) + ' GPUs; namespace ' + namespaceObject.metadata.name + ' may use ' + params.data.maxGPUs"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: gpu-quota
spec:
  policyName: gpu-quota
  validationActions: [Deny]
  paramRef: {name: gpu-quota, parameterNotFoundAction: Allow}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: podgroup-label
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [scheduling.k8s.io]
      apiVersions: ["*"]
      operations: [CREATE]
      resources: [podgroups]
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"scheduling.example.com/queue": request.namespace}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: podgroup-label
spec:
  policyName: podgroup-label
"""


def _claim(name: str, count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": GPU_CLASS, "count": count}}]}}}


@pytest.fixture(scope="module")
def policies(cluster):
    cluster.kubectl("apply", "-f", "-", input=POLICY)
    for ns, cap in (("team-a", "2"), ("team-b", "8")):
        cluster.kubectl("create", "namespace", ns)
        cluster.kubectl("create", "configmap", "gpu-quota", "-n", ns,
                        f"--from-literal=deviceClass={GPU_CLASS}", f"--from-literal=maxGPUs={cap}")
    return cluster


def test_policies_are_served_with_their_columns(policies):
    vaps = policies.kubectl("get", "validatingadmissionpolicies").stdout.split("\n")
    assert vaps[0].split() == ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]
    assert vaps[1].split()[:3] == ["gpu-quota", "1", "v1/ConfigMap"]
    bindings = policies.kubectl("get", "validatingadmissionpolicybindings").stdout.split("\n")
    assert bindings[0].split() == ["NAME", "POLICYNAME", "PARAMREF", "AGE"]
    assert bindings[1].split()[:3] == ["gpu-quota", "gpu-quota", "*/gpu-quota"]
    maps = policies.kubectl("get", "mutatingadmissionpolicies.v1beta1.admissionregistration.k8s.io", "-o", "json")
    assert [m["metadata"]["name"] for m in json.loads(maps.stdout)["items"]] == ["podgroup-label"]


def test_gpu_claims_above_the_namespace_quota_are_denied(policies):
    policies.kubectl("apply", "-n", "team-a", "-f", "-", input=json.dumps(_claim("two", 2)))
    r = policies.kubectl("apply", "-n", "team-a", "-f", "-", input=json.dumps(_claim("three", 3)), check=False)
    assert r.returncode != 0
    assert ('resourceclaims.resource.k8s.io "three" is forbidden: ValidatingAdmissionPolicy \'gpu-quota\' with binding '
            "'gpu-quota' denied request: claim asks for 3 GPUs; namespace team-a may use 2") in r.stderr
    res = client.ResourceV1Api(policies.client())
    res.create_namespaced_resource_claim("team-b", _claim("three", 3))
    with pytest.raises(ApiException) as e:
        res.create_namespaced_resource_claim("team-b", _claim("nine", 9))
    status = json.loads(e.value.body)
    assert (e.value.status, status["reason"]) == (403, "Forbidden")
    assert status["details"]["causes"] == [{"message": "ValidatingAdmissionPolicy 'gpu-quota' with binding 'gpu-quota' "
                                                       "denied request: claim asks for 9 GPUs; namespace team-b may use 8"}]
    # no param in a namespace: parameterNotFoundAction Allow lets claims through
    res.create_namespaced_resource_claim("default", _claim("unbounded", 16))


def test_every_podgroup_gets_the_label(policies):
    pg = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "trainers"},
          "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
    policies.kubectl("apply", "-n", "team-a", "-f", "-", input=yaml.safe_dump(pg))
    got = policies.kubectl_json("get", "podgroups.v1beta1.scheduling.k8s.io", "trainers", "-n", "team-a")
    assert got["metadata"]["labels"] == {"scheduling.example.com/queue": "team-a"}
    api = client.CustomObjectsApi(policies.client())
    created = api.create_namespaced_custom_object("scheduling.k8s.io", "v1beta1", "team-b", "podgroups",
                                                  {**pg, "metadata": {"name": "eval", "labels": {"keep": "me"}}})
    assert created["metadata"]["labels"] == {"keep": "me", "scheduling.example.com/queue": "team-b"}
