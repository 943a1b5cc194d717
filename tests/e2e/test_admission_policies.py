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

from .conftest import wait_for

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


def test_policy_status_is_type_checked(policies):
    got = wait_for(lambda: (policies.kubectl_json("get", "validatingadmissionpolicy", "gpu-quota").get("status") or {})
                   .get("observedGeneration") == 1 and policies.kubectl_json("get", "validatingadmissionpolicy",
                                                                             "gpu-quota"),
                   timeout=60, what="gpu-quota policy status", every=0.1)
    # the rule names every version ("*"), so there is no single kind to check against
    # no warnings: upstream's omitempty leaves the empty list out
    assert got["status"]["typeChecking"] == {}


QUOTA_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "replicalimits.policy.example.com"},
    "spec": {"group": "policy.example.com", "scope": "Cluster",
             "names": {"plural": "replicalimits", "singular": "replicalimit", "kind": "ReplicaLimit",
                       "listKind": "ReplicaLimitList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"maxReplicas": {"type": "integer"}}}}}]}}


def test_params_from_a_custom_resource(policies):
    policies.kubectl("apply", "-f", "-", input=json.dumps(QUOTA_CRD))
    wait_for(lambda: policies.kubectl("get", "replicalimits", check=False).returncode == 0, timeout=60,
             what="ReplicaLimit served", every=0.1)
    policies.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "policy.example.com/v1", "kind": "ReplicaLimit", "metadata": {"name": "small"}, "maxReplicas": 3}))
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "replica-limit"},
              "spec": {"paramKind": {"apiVersion": "policy.example.com/v1", "kind": "ReplicaLimit"},
                       "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                               "operations": ["CREATE", "UPDATE"],
                                                               "resources": ["deployments"]}]},
                       "validations": [{"expression": "object.spec.replicas <= params.maxReplicas",
                                        "messageExpression": "'at most ' + string(params.maxReplicas) + ' replicas'"},
                                       {"expression": "object.spec.replica >= 0"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": "replica-limit"},
               "spec": {"policyName": "replica-limit", "validationActions": ["Deny"],
                        "paramRef": {"name": "small", "parameterNotFoundAction": "Deny"},
                        "matchResources": {"namespaceSelector": {"matchLabels": {
                            "kubernetes.io/metadata.name": "team-a"}}}}}
    policies.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": [policy, binding]}))
    status = wait_for(lambda: (policies.kubectl_json("get", "validatingadmissionpolicy", "replica-limit")
                               .get("status") or {}).get("typeChecking"), timeout=60, what="type checking", every=0.1)
    assert status["expressionWarnings"] == [{
        "fieldRef": "spec.validations[1].expression",
        "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:13: undefined field 'replica'\n"
                   " | object.spec.replica >= 0\n | ............^\n"}]
    r = policies.kubectl("create", "deployment", "web", "-n", "team-a", "--image=nginx", "--replicas=5", check=False)
    assert r.returncode != 0
    assert "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit' denied request: at most 3 replicas" \
        in r.stderr
