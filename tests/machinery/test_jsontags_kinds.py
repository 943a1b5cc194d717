"""Kinds machinery/jsontags.py reviews, created through HTTP with their optional lists and maps
empty and their omitempty scalars at zero, read back as kube-apiserver serves them: omitempty
ones left out, lists and pointers tagged without omitempty `null` (inside their parent only)."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from tests.apiserver.test_rest_managedfields import call
from tests.served import served

KUBECTL = str(Path(sys.executable).parent / "kubectl")


def _crd() -> dict:
    version = {"name": "v1", "served": True, "storage": True, "deprecated": False, "selectableFields": [],
               "additionalPrinterColumns": [{"name": "A", "type": "string", "jsonPath": ".spec.a",
                                             "description": "", "format": "", "priority": 0}],
               "schema": {"openAPIV3Schema": {"type": "object", "description": "", "required": [], "properties": {
                   "spec": {"type": "object", "properties": {"a": {"type": "string", "enum": [], "nullable": False}}}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "preserveUnknownFields": False, "versions": [version],
                     "names": {"plural": "widgets", "kind": "Widget", "singular": "", "listKind": "",
                               "shortNames": [], "categories": []}}}


async def test_a_crds_empty_names_and_schema_zeros_are_unset_and_its_new_status_has_null_conditions(tmp_path):
    async with served(tmp_path) as (_, api):
        crd = await call(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", _crd())
        # singular and listKind sent "" are unset, so defaulted (before: "Required value")
        assert crd["spec"]["names"] == {"plural": "widgets", "kind": "Widget", "singular": "widget", "listKind": "WidgetList"}
        [version] = crd["spec"]["versions"]
        assert version == {"name": "v1", "served": True, "storage": True,
                           "additionalPrinterColumns": [{"name": "A", "type": "string", "jsonPath": ".spec.a"}],
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}
        assert "preserveUnknownFields" not in crd["spec"]
        # PrepareForCreate's status: conditions nil, encoded without omitempty
        assert crd["status"] == {"acceptedNames": {"kind": "", "plural": ""}, "conditions": None, "storedVersions": ["v1"]}


async def test_a_local_apiservice_has_a_null_service_and_no_zero_fields(tmp_path):
    async with served(tmp_path) as (_, api):
        svc = await call(api, "POST", "/apis/apiregistration.k8s.io/v1/apiservices", {
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.other.example.org"},
            "spec": {"group": "other.example.org", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                     "insecureSkipTLSVerify": False, "caBundle": ""}})
        assert svc["spec"] == {"group": "other.example.org", "version": "v1", "groupPriorityMinimum": 100,
                               "versionPriority": 10, "service": None}
        got = await call(api, "GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1.other.example.org")
        assert got["spec"]["service"] is None


async def test_node_networking_storageversion_and_admission_policy_kinds_drop_empty_lists(tmp_path):
    async with served(tmp_path) as (_, api):
        rc = await call(api, "POST", "/apis/node.k8s.io/v1/runtimeclasses", {
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "rc"}, "handler": "runc",
            "overhead": {"podFixed": {}}, "scheduling": {"nodeSelector": {}, "tolerations": []}})
        assert (rc["overhead"], rc["scheduling"]) == ({}, {})
        ip = await call(api, "POST", "/apis/networking.k8s.io/v1/ipaddresses", {
            "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.96.200.7"},
            "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "x"}}})
        assert ip["spec"] == {"parentRef": {"resource": "services", "namespace": "default", "name": "x"}}
        sv = await call(api, "POST", "/apis/internal.apiserver.k8s.io/v1alpha1/storageversions", {
            "apiVersion": "internal.apiserver.k8s.io/v1alpha1", "kind": "StorageVersion",
            "metadata": {"name": "example.com.widgets"}, "spec": {}, "status": {"storageVersions": [], "conditions": []}})
        assert sv["status"] == {}
        rule = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
        policy = await call(api, "POST", "/apis/admissionregistration.k8s.io/v1beta1/mutatingadmissionpolicies", {
            "apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": "m"},
            "spec": {"matchConstraints": {"resourceRules": [rule], "excludeResourceRules": []},
                     "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}}],
                     "variables": [], "matchConditions": [], "failurePolicy": "Fail", "reinvocationPolicy": "Never"}})
        assert not {"variables", "matchConditions"} & policy["spec"].keys()
        assert "excludeResourceRules" not in policy["spec"]["matchConstraints"]


async def test_a_pointer_tagged_without_omitempty_is_null_only_inside_its_parent(tmp_path):
    async with served(tmp_path) as (_, api):
        pvcs = "/api/v1/namespaces/default/persistentvolumeclaims"
        spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
        with_source = await call(api, "POST", pvcs, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                                     "metadata": {"name": "c"},
                                                     "spec": {**spec, "dataSource": {"kind": "PersistentVolumeClaim", "name": "src"}}})
        assert with_source["spec"]["dataSource"] == {"apiGroup": None, "kind": "PersistentVolumeClaim", "name": "src"}
        plain = await call(api, "POST", pvcs, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                               "metadata": {"name": "d"}, "spec": spec})
        assert "dataSource" not in plain["spec"]
        # a value sent, even empty, is kept
        given = await call(api, "POST", pvcs, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "e"},
                                               "spec": {**spec, "dataSource": {"apiGroup": "", "kind": "PersistentVolumeClaim",
                                                                               "name": "src"}}})
        assert given["spec"]["dataSource"]["apiGroup"] == ""


async def test_a_value_scalar_tagged_without_omitempty_is_its_zero_when_left_out(tmp_path):
    async with served(tmp_path) as (_, api):
        template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        sts = await call(api, "POST", "/apis/apps/v1/namespaces/default/statefulsets", {
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "ordinals": {}, "template": template}})
        # `json:"serviceName"`, `json:"start"`: encoded even at their zero
        assert (sts["spec"]["serviceName"], sts["spec"]["ordinals"]) == ("", {"start": 0})
        pc = await call(api, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"}})
        assert pc["value"] == 0
        job = await call(api, "POST", "/apis/batch/v1/namespaces/default/jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                     "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}})
        # status is "" once decoded, and defaulted as upstream defaults an empty one
        assert job["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]


async def test_a_review_request_is_decoded_as_upstream_decodes_it(tmp_path):
    async with served(tmp_path) as (_, api):
        review = await call(api, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "nope", "audiences": []}})
        assert review["spec"] == {"token": "nope"}  # audiences is omitempty


async def test_kubectl_creates_a_crd_and_an_apiservice_and_reads_them_back_as_upstream_serves_them(tmp_path):
    async with served(tmp_path) as (_, api):
        service = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.local.example.org"},
                   "spec": {"group": "local.example.org", "version": "v1", "groupPriorityMinimum": 100,
                            "versionPriority": 10, "caBundle": ""}}
        base = [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig")]
        for manifest in (_crd(), service):
            r = await asyncio.to_thread(subprocess.run, [*base, "create", "-f", "-"], input=json.dumps(manifest),
                                        capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
        r = await asyncio.to_thread(subprocess.run, [*base, "get", "crd/widgets.example.com", "apiservice/v1.local.example.org",
                                                     "-o", "json"], capture_output=True, text=True, timeout=60)
        crd, svc = json.loads(r.stdout)["items"]
        assert crd["spec"]["names"] == {"plural": "widgets", "kind": "Widget", "singular": "widget", "listKind": "WidgetList"}
        assert "categories" not in crd["status"]["acceptedNames"]
        assert svc["spec"] == {"group": "local.example.org", "version": "v1", "groupPriorityMinimum": 100,
                               "versionPriority": 10, "service": None}
