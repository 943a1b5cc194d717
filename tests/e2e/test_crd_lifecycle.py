"""A hand-written CRD through its life on a real `nanokube up`, with kubectl: two served
versions (conversion None rewrites apiVersion, the old one deprecated with a Warning),
printer columns with -o wide priorities, selectable fields, a schema change whose new
default shows on objects written before it, a names conflict between two CRDs, a
custom resource owning pods that the garbage collector removes with it, an HPA scaling
a custom resource to zero and back through /scale, a cluster-scoped kind (a create while it
is terminating refused), and a CRD of a protected group with its API approval condition."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from .conftest import running_cluster, wait_for

GROUP = "ml.example.com"
SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "model": {"type": "string"}, "replicas": {"type": "integer", "minimum": 0},
        "tier": {"type": "string", "enum": ["gold", "silver"]}}},
    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"},
                                                "phase": {"type": "string"}}}}}
COLUMNS = [{"name": "Model", "type": "string", "jsonPath": ".spec.model"},
           {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
           {"name": "Tier", "type": "string", "jsonPath": ".spec.tier", "priority": 1},
           {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]


def version(name: str, storage: bool, **extra) -> dict:
    return {"name": name, "served": True, "storage": storage, "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)},
            "additionalPrinterColumns": COLUMNS, "selectableFields": [{"jsonPath": ".spec.tier"}],
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                     "statusReplicasPath": ".status.replicas",
                                                     "labelSelectorPath": ".status.selector"}}, **extra}


def crd(plural="inferenceservices", kind="InferenceService", short=("isvc",), versions=None, scope="Namespaced",
        categories=("all",)) -> dict:
    """(Only the module's lasting CRD is in `all`: kubectl's cached discovery would still expand
    the category to a deleted CRD's resource, failing `kubectl get all` in a test after its deletion.)"""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": scope,
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "shortNames": list(short),
                               "categories": list(categories)},
                     "versions": versions or [version("v1", True), version("v1beta1", False, deprecated=True)]}}


def isvc(name: str, api_version: str = f"{GROUP}/v1", **spec) -> dict:
    return {"apiVersion": api_version, "kind": "InferenceService", "metadata": {"name": name, "namespace": "default"},
            "spec": {"model": "llama", "replicas": 1, "tier": "gold", **spec}}


@pytest.fixture(scope="module")
def c(store_url):
    env = {"NANOKUBE_HPA_SYNC_PERIOD": "1", "NANOKUBE_HPA_DOWNSCALE_STABILIZATION": "0"}
    with running_cluster("crd-lifecycle", env=env, store=store_url) as cl:
        cl.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(crd()))
        cl.kubectl("wait", "--for", "condition=Established", f"crd/inferenceservices.{GROUP}", "--timeout=50s")
        yield cl


def test_versions_columns_and_selectable_fields(c):
    c.kubectl("apply", "-f", "-", input=json.dumps(isvc("a", replicas=3)))
    # client-side apply again: kubectl sees no strategic merge in the PATCH operation's OpenAPI, sends a merge patch
    assert "configured" in c.kubectl("apply", "-f", "-", input=json.dumps(isvc("a"))).stdout
    r = c.kubectl("apply", "-f", "-", input=json.dumps(isvc("b", f"{GROUP}/v1beta1", tier="silver", replicas=2)))
    assert f"Warning: {GROUP}/v1beta1 InferenceService is deprecated; use {GROUP}/v1 InferenceService" in r.stderr
    r = c.kubectl("get", "--raw", f"/apis/{GROUP}/v1beta1/namespaces/default/inferenceservices?watch=true&timeoutSeconds=1")
    assert f"Warning: {GROUP}/v1beta1 InferenceService is deprecated" in r.stderr  # a watch is warned too
    old = c.kubectl_json("get", f"inferenceservices.v1beta1.{GROUP}", "a")
    assert old["apiVersion"] == f"{GROUP}/v1beta1" and old["spec"]["model"] == "llama"
    assert c.kubectl_json("get", "isvc", "b")["apiVersion"] == f"{GROUP}/v1"
    lines = c.kubectl("get", "isvc").stdout.splitlines()
    assert lines[0].split() == ["NAME", "MODEL", "REPLICAS", "AGE"]
    assert lines[1].split()[:3] == ["a", "llama", "1"]
    assert c.kubectl("get", "isvc", "-o", "wide").stdout.splitlines()[0].split() == ["NAME", "MODEL", "REPLICAS", "TIER", "AGE"]
    assert c.kubectl("get", "isvc", "--field-selector", "spec.tier=silver", "-o", "name").stdout.split() == [
        f"inferenceservice.{GROUP}/b"]
    r = c.kubectl("get", "isvc", "--field-selector", "spec.model=llama", check=False)
    assert "field label not supported: spec.model" in r.stderr
    # categories: `kubectl get all` lists it
    assert f"inferenceservice.{GROUP}/a" in c.kubectl("get", "all", "-o", "name").stdout


def test_schema_change_defaults_existing_objects(c):
    c.kubectl("apply", "-f", "-", input=json.dumps(isvc("before")))
    changed = crd()
    for v in changed["spec"]["versions"]:
        v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["runtime"] = {"type": "string", "default": "vllm"}
    c.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(changed))
    got = c.kubectl_json("get", "isvc", "before")
    assert got["spec"]["runtime"] == "vllm"
    # and a field the schema drops is pruned from what is read
    assert c.kubectl("explain", "isvc.spec.runtime").stdout.count("runtime") >= 1


def test_names_conflict_between_crds(c):
    other = crd(plural="inferenceendpoints", kind="InferenceEndpoint", short=("isvc",), categories=())
    c.kubectl("apply", "-f", "-", input=json.dumps(other))

    def names_cond():
        got = c.kubectl_json("get", "crd", f"inferenceendpoints.{GROUP}")
        return next((x for x in got.get("status", {}).get("conditions", []) if x["type"] == "NamesAccepted"), None)

    cond = wait_for(names_cond, timeout=60, what="NamesAccepted set")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "ShortNamesConflict", '"isvc" is already in use')
    c.kubectl("delete", "crd", f"inferenceendpoints.{GROUP}")


def test_custom_resource_owning_pods_is_garbage_collected(c):
    owner = json.loads(c.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(isvc("owner"))).stdout)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "owner-worker", "namespace": "default", "ownerReferences": [{
               "apiVersion": f"{GROUP}/v1", "kind": "InferenceService", "name": "owner", "uid": owner["metadata"]["uid"]}]},
           "spec": {"containers": [{"name": "c", "image": "pause"}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(pod))
    c.kubectl("delete", "isvc", "owner")
    gone = wait_for(lambda: (r := c.kubectl("get", "pod", "owner-worker", check=False)).returncode and r.stderr,
                    timeout=60, what="pod owned by the custom resource collected")
    assert 'pods "owner-worker" not found' in gone


def test_hpa_scales_a_custom_resource_to_zero_and_back(c):
    c.kubectl("apply", "-f", "-", input=json.dumps(isvc("scaled", replicas=2)))
    c.kubectl("patch", "isvc", "scaled", "--subresource", "status", "--type", "merge",
              "-p", '{"status":{"replicas":2,"selector":"app=scaled"}}')
    c.kubectl("create", "configmap", "nanokube-external-metrics", "--from-literal=queue_length=0")
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "scaled"},
           "spec": {"scaleTargetRef": {"apiVersion": f"{GROUP}/v1", "kind": "InferenceService", "name": "scaled"},
                    "minReplicas": 0, "maxReplicas": 4,
                    "metrics": [{"type": "External", "external": {"metric": {"name": "queue_length"},
                                                                  "target": {"type": "AverageValue", "averageValue": "5"}}}],
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}
    c.kubectl("apply", "-f", "-", input=json.dumps(hpa))
    replicas = lambda: c.kubectl_json("get", "isvc", "scaled")["spec"]["replicas"]  # noqa: E731
    wait_for(lambda: replicas() == 0, timeout=30, what="custom resource scaled to zero")
    c.kubectl("patch", "configmap", "nanokube-external-metrics", "-p", '{"data":{"queue_length":"12"}}')
    wait_for(lambda: replicas() >= 1, timeout=30, what="custom resource woken")
    c.kubectl("scale", "isvc", "scaled", "--replicas=3")
    scale = json.loads(c.kubectl("get", "--raw", f"/apis/{GROUP}/v1/namespaces/default/inferenceservices/scaled/scale").stdout)
    assert scale["spec"]["replicas"] == 3 and scale["status"]["selector"] == "app=scaled"


def test_cluster_scoped_kind(c):
    cluster = crd(plural="gpuclasses", kind="GPUClass", short=("gc",), scope="Cluster", categories=(),
                  versions=[version("v1", True)])
    c.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    c.kubectl("wait", "--for", "condition=Established", f"crd/gpuclasses.{GROUP}", "--timeout=50s")
    obj = {"apiVersion": f"{GROUP}/v1", "kind": "GPUClass", "metadata": {"name": "h100"}, "spec": {"model": "H100"}}
    c.kubectl("apply", "-f", "-", input=json.dumps(obj))
    got = c.kubectl_json("get", "gpuclass", "h100")
    assert "namespace" not in got["metadata"]
    assert c.kubectl("get", "gc").stdout.splitlines()[1].split()[:2] == ["h100", "H100"]
    # an object's finalizer holds the CRD Terminating, and a create meanwhile is a 405 (crdHandler's)
    c.kubectl("patch", "gpuclass", "h100", "--type", "merge", "-p", '{"metadata":{"finalizers":["example.com/hold"]}}')
    c.kubectl("delete", "crd", f"gpuclasses.{GROUP}", "--wait=false")
    r = c.kubectl("create", "-f", "-", input=json.dumps({**obj, "metadata": {"name": "a100"}}), check=False)
    assert r.stderr.strip() == ('Error from server (MethodNotAllowed): error when creating "STDIN": create not allowed '
                                "while custom resource definition is terminating")
    c.kubectl("patch", "gpuclass", "h100", "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
    wait_for(lambda: c.kubectl("get", "crd", f"gpuclasses.{GROUP}", check=False).returncode != 0, timeout=60,
             what="cluster-scoped CRD and its objects removed")


def test_a_crd_in_a_protected_group_reports_its_api_approval(c):
    gated = crd(plural="gates", kind="Gate", short=(), categories=(), versions=[version("v1alpha1", True)])
    gated["metadata"] = {"name": "gates.networking.k8s.io",
                         "annotations": {"api-approved.kubernetes.io": "unapproved, experimental"}}
    gated["spec"]["group"] = "networking.k8s.io"
    c.kubectl("apply", "-f", "-", input=json.dumps(gated))
    path = '{.status.conditions[?(@.type=="KubernetesAPIApprovalPolicyConformant")].reason}'
    wait_for(lambda: c.kubectl("get", "crd", "gates.networking.k8s.io", "-o", f"jsonpath={path}").stdout
             == "UnapprovedAnnotation", timeout=60, what="the API approval condition")
    c.kubectl("annotate", "crd", "gates.networking.k8s.io", "--overwrite",
              "api-approved.kubernetes.io=https://github.com/kubernetes/enhancements/pull/1111")
    wait_for(lambda: c.kubectl("get", "crd", "gates.networking.k8s.io", "-o", f"jsonpath={path}").stdout
             == "ApprovedAnnotation", timeout=60, what="the API approval condition approved")
    assert "KubernetesAPIApprovalPolicyConformant" not in c.kubectl("get", "crd", f"inferenceservices.{GROUP}",
                                                                    "-o", "jsonpath={.status.conditions}").stdout
    c.kubectl("delete", "crd", "gates.networking.k8s.io")


def test_rbac_and_audit_cover_custom_resources(c, tmp_path):
    c.kubectl("apply", "-f", "-", input=json.dumps(isvc("guarded")))
    c.kubectl("create", "serviceaccount", "reader")
    c.kubectl("create", "role", "isvc-reader", "--verb=get,list,watch", f"--resource=inferenceservices.{GROUP}")
    c.kubectl("create", "rolebinding", "isvc-reader", "--role=isvc-reader", "--serviceaccount=default:reader")
    token = c.kubectl("create", "token", "reader").stdout.strip()
    admin = yaml.safe_load(Path(c.kubeconfig).read_text())
    reader = {**admin, "users": [{"name": "reader", "user": {"token": token}}],
              "contexts": [{"name": "reader", "context": {"cluster": admin["clusters"][0]["name"], "user": "reader"}}],
              "current-context": "reader"}
    kubeconfig = tmp_path / "reader"
    kubeconfig.write_text(yaml.safe_dump(reader))
    as_reader = ("--kubeconfig", str(kubeconfig))
    assert f"inferenceservice.{GROUP}/guarded" in c.kubectl("get", "isvc", "-o", "name", *as_reader).stdout.split()
    r = c.kubectl("delete", "isvc", "guarded", *as_reader, check=False)
    assert r.returncode != 0
    assert (f'inferenceservices.{GROUP} "guarded" is forbidden: User "system:serviceaccount:default:reader" '
            f'cannot delete resource "inferenceservices" in API group "{GROUP}" in the namespace "default"') in r.stderr
    events = c.audit_events()
    assert any(e["objectRef"].get("resource") == "inferenceservices" and e["objectRef"].get("name") == "guarded"
               and e["verb"] == "delete" and e["responseStatus"]["code"] == 403 for e in events if "objectRef" in e)


def test_a_non_structural_crd_is_refused(c):
    bad = crd(plural="brokens", kind="Broken", short=(), categories=())
    bad["spec"]["versions"] = [version("v1", True)]
    del bad["spec"]["versions"][0]["selectableFields"]
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {"properties": {"x": {"type": "string"}}}
    r = c.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert r.returncode != 0
    assert (f'The CustomResourceDefinition "brokens.{GROUP}" is invalid: spec.validation.openAPIV3Schema.'
            "properties[spec].type: Required value: must not be empty for specified object fields") in r.stderr
