"""Omitempty zeros through HTTP: kube-apiserver decodes a body into Go structs and encodes them back,
so an omitempty value scalar sent as its zero (`paused: false`, `minReadySeconds: 0`) is neither
stored nor served, while a pointer's zero (`replicas: 0`) and a field tagged without omitempty (a
PodDisruptionBudget's counts, a condition's status) keep theirs."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from kubernetes import client

from tests.apiserver.test_protobuf import body, lfield, meta, vfield
from tests.apiserver.test_rest_managedfields import call, entries
from tests.served import served

KUBECTL = str(Path(sys.executable).parent / "kubectl")


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
        created = await _json(policy.create_namespaced_pod_disruption_budget, "default", {
            "metadata": {"name": "p"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}})
        # PrepareForCreate's empty status, encoded
        assert created["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
        status = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0,
                  "observedGeneration": 0}
        pdb = await _json(policy.patch_namespaced_pod_disruption_budget_status, "p", "default", {"status": status})
        assert pdb["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
        await _json(apps.create_namespaced_deployment, "default", _deployment(1))
        condition = {"type": "Progressing", "status": "", "reason": "", "message": ""}
        d = await _json(apps.patch_namespaced_deployment_status, "d", "default",
                        {"status": {"conditions": [condition], "replicas": 0, "readyReplicas": 0}})
        assert d["status"]["conditions"] == [{"type": "Progressing", "status": "", "lastUpdateTime": None,
                                              "lastTransitionTime": None}]
        assert not {"replicas", "readyReplicas"} & set(d["status"])


async def test_a_priority_class_keeps_its_zero_value_and_drops_its_zero_default(tmp_path):
    async with served(tmp_path) as (_, api):
        scheduling = client.SchedulingV1Api(api)
        pc = await _json(scheduling.create_priority_class,
                         {"metadata": {"name": "zero"}, "value": 0, "globalDefault": False, "description": ""})
        assert pc["value"] == 0 and not {"globalDefault", "description"} & set(pc)


def _helm_like(name: str) -> dict:
    """A Deployment as chart templates render one: empty lists and maps wherever a value is optional."""
    pod = {"containers": [{"name": "c", "image": "busybox", "args": [], "env": [], "envFrom": [],
                           "ports": [], "volumeMounts": [], "resources": {"limits": {}, "requests": {}}}],
           "nodeSelector": {}, "tolerations": [], "volumes": [], "imagePullSecrets": [],
           "securityContext": {"sysctls": []}}
    return {"metadata": {"name": name, "labels": {}, "annotations": {}}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}, "annotations": {}}, "spec": pod}}}


async def test_empty_omitempty_lists_and_maps_are_neither_stored_nor_served(tmp_path):
    async with served(tmp_path) as (_, api):
        apps = client.AppsV1Api(api)
        created = await _json(apps.create_namespaced_deployment, "default", _helm_like("web"))
        for got in (created, await _json(apps.read_namespaced_deployment, "web", "default")):
            assert not {"labels", "annotations"} & set(got["metadata"])
            template = got["spec"]["template"]
            assert template["metadata"] == {"labels": {"app": "web"}}
            assert not {"nodeSelector", "tolerations", "volumes", "imagePullSecrets"} & set(template["spec"])
            assert template["spec"]["securityContext"] == {}
            container = template["spec"]["containers"][0]
            assert not {"args", "env", "envFrom", "ports", "volumeMounts"} & set(container)
            assert container["resources"] == {}  # a struct, not a pointer: always encoded
        # the same manifest again is no change: no new generation, the same resourceVersion
        replaced = await _json(apps.replace_namespaced_deployment, "web", "default",
                               {**_helm_like("web"), "metadata": {**_helm_like("web")["metadata"]}})
        assert replaced["metadata"]["generation"] == 1
        assert replaced["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_lists_upstream_encodes_without_omitempty_are_null_when_empty_or_left_out(tmp_path):
    """Go encodes a nil list tagged without omitempty as null, and etcd's protobuf keeps no empty
    repeated field: upstream serves `rules: null` for a Role sent `rules: []` or none."""
    async with served(tmp_path) as (_, api):
        rbac, discovery = client.RbacAuthorizationV1Api(api), client.DiscoveryV1Api(api)
        role = await _json(rbac.create_namespaced_role, "default",
                           {"metadata": {"name": "r", "labels": {}}, "rules": []})
        assert role["rules"] is None and "labels" not in role["metadata"]
        bare = await _json(rbac.create_cluster_role, {"metadata": {"name": "bare"}})
        assert bare["rules"] is None
        assert (await _json(rbac.read_cluster_role, "bare"))["rules"] is None
        cluster_role = await _json(rbac.create_cluster_role, {
            "metadata": {"name": "agg"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                                                    "resourceNames": [], "nonResourceURLs": []}]})
        assert cluster_role["rules"] == [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]
        slice_ = await _json(discovery.create_namespaced_endpoint_slice, "default", {
            "metadata": {"name": "s"}, "addressType": "IPv4", "ports": [],
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {}, "deprecatedTopology": {}}]})
        assert slice_["ports"] is None and slice_["endpoints"] == [{"addresses": ["10.0.0.1"], "conditions": {}}]
        empty = await _json(discovery.create_namespaced_endpoint_slice, "default",
                            {"metadata": {"name": "e"}, "addressType": "IPv4", "endpoints": []})
        assert (empty["endpoints"], empty["ports"]) == (None, None)


async def test_an_empty_list_a_creates_validation_reads_is_left_for_it_then_dropped(tmp_path):
    """validateWindows tells `supplementalGroups: []` from none and ValidateIngressSpec prints the
    empty rules it refuses, so a create's decoding leaves them for validation, which drops them
    once passed."""
    async with served(tmp_path) as (_, api):
        core, net = client.CoreV1Api(api), client.NetworkingV1Api(api)

        def pod(os: str) -> dict:
            return {"metadata": {"name": os}, "spec": {"os": {"name": os}, "containers": [{"name": "c", "image": "i"}],
                                                       "securityContext": {"supplementalGroups": []}}}
        try:
            await _json(core.create_namespaced_pod, "default", pod("windows"))
        except client.ApiException as e:
            assert e.status == 422 and "spec.securityContext.supplementalGroups" in e.body
        else:
            raise AssertionError("created")
        linux = await _json(core.create_namespaced_pod, "default", pod("linux"))
        assert linux["spec"]["securityContext"] == {}
        try:
            await _json(net.create_namespaced_ingress, "default", {"metadata": {"name": "i"}, "spec": {"rules": []}})
        except client.ApiException as e:
            assert "Invalid value: []: either `defaultBackend` or `rules` must be specified" in e.body
        else:
            raise AssertionError("created")
        backend = {"service": {"name": "s", "port": {"number": 80}}}
        ingress = await _json(net.create_namespaced_ingress, "default",
                              {"metadata": {"name": "i"}, "spec": {"defaultBackend": backend, "rules": [], "tls": []}})
        assert ingress["spec"] == {"defaultBackend": backend}



async def test_an_empty_list_of_scaling_policies_is_kept_for_defaulting_and_refused(tmp_path):
    """copyHPAScalingRules keeps a non-nil `policies: []` (only nil takes the defaults), so validateScalingRules
    refuses it: it was dropped as unset and the defaults stored (fuzz50). Left out or null, it is defaulted."""
    async with served(tmp_path) as (_, api):
        hpas = client.AutoscalingV2Api(api)

        def hpa(name: str, rules: dict) -> dict:
            return {"metadata": {"name": name}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                                            "name": "d"}, "maxReplicas": 3,
                                                         "behavior": {"scaleDown": rules}}}
        try:
            await _json(hpas.create_namespaced_horizontal_pod_autoscaler, "default", hpa("empty", {"policies": []}))
        except client.ApiException as e:
            assert e.status == 422 and json.loads(e.body)["details"]["causes"] == [{
                "reason": "FieldValueRequired", "message": "Required value: must specify at least one Policy",
                "field": "spec.behavior.scaleDown.policies"}]
        else:
            raise AssertionError("created")
        for name, rules in (("none", {}), ("null", {"policies": None})):
            got = await _json(hpas.create_namespaced_horizontal_pod_autoscaler, "default", hpa(name, rules))
            assert got["spec"]["behavior"]["scaleDown"]["policies"] == [{"type": "Percent", "value": 100, "periodSeconds": 15}]


async def test_an_update_to_an_empty_list_of_scaling_policies_is_refused(tmp_path):
    """ValidateHorizontalPodAutoscalerUpdate validates the whole new spec, so a PUT or a patch to
    `policies: []` is refused as a create is: the update path dropped the list before defaulting, which
    then stored the default policies (fuzz50)."""
    path = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
    cause = [{"reason": "FieldValueRequired", "message": "Required value: must specify at least one Policy",
              "field": "spec.behavior.scaleUp.policies"}]
    async with served(tmp_path) as (_, api):
        hpa = await call(api, "POST", path, {"metadata": {"name": "h"}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxReplicas": 3,
            "behavior": {"scaleUp": {"selectPolicy": "Min"}}}})
        put = {**hpa, "spec": {**hpa["spec"], "behavior": {"scaleUp": {"selectPolicy": "Min", "policies": []}}}}
        patch = {"spec": {"behavior": {"scaleUp": {"policies": []}}}}
        json_patch = [{"op": "replace", "path": "/spec/behavior/scaleUp/policies", "value": []}]
        for method, body, content_type in (("PUT", put, "application/json"),
                                           ("PATCH", patch, "application/merge-patch+json"),
                                           ("PATCH", patch, "application/strategic-merge-patch+json"),
                                           ("PATCH", json_patch, "application/json-patch+json")):
            try:
                await call(api, method, f"{path}/h", body, content_type=content_type)
            except client.ApiException as e:
                assert e.status == 422 and json.loads(e.body)["details"]["causes"] == cause, (content_type, e.body)
            else:
                raise AssertionError(f"{content_type}: accepted")
        stored = await call(api, "GET", f"{path}/h")
        assert stored["spec"] == hpa["spec"] and stored["metadata"]["resourceVersion"] == hpa["metadata"]["resourceVersion"]

async def test_dra_flowcontrol_admission_and_storage_kinds_drop_their_omitempty_zeros(tmp_path):
    async with served(tmp_path) as (_, api):
        claim = {"metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "selectors": [], "allocationMode": "ExactCount", "count": 1,
            "tolerations": [{"key": "", "operator": "Exists", "value": "", "effect": ""}]}}],
            "constraints": [], "config": []}}}
        got = await _json(client.ResourceV1Api(api).create_namespaced_resource_claim, "default", claim)
        assert got["spec"]["devices"] == {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1,
            "tolerations": [{"operator": "Exists"}]}}]}
        empty = await _json(client.ResourceV1Api(api).create_namespaced_resource_claim, "default",
                            {"metadata": {"name": "none"}, "spec": {"devices": {"requests": []}}})
        assert empty["spec"]["devices"] == {"requests": None}  # DeviceClaim.requests is not omitempty

        schema = await _json(client.FlowcontrolApiserverV1Api(api).create_flow_schema, {
            "metadata": {"name": "f"}, "spec": {
                "priorityLevelConfiguration": {"name": "global-default"}, "matchingPrecedence": 500,
                "rules": [{"subjects": [{"kind": "Group", "group": {"name": "g"}}],
                           "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                                              "clusterScope": True, "namespaces": []}], "nonResourceRules": []}]}})
        assert schema["spec"]["rules"] == [{"subjects": [{"kind": "Group", "group": {"name": "g"}}], "resourceRules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "clusterScope": True, "namespaces": None}]}]

        policy = await _json(client.AdmissionregistrationV1Api(api).create_validating_admission_policy, {
            "metadata": {"name": "p"}, "spec": {
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                        "resources": ["pods"], "resourceNames": []}]},
                "validations": [{"expression": "true", "message": "", "messageExpression": ""}],
                "auditAnnotations": [], "variables": []}})
        assert policy["spec"]["validations"] == [{"expression": "true"}]
        assert not {"auditAnnotations", "variables"} & set(policy["spec"])
        assert "resourceNames" not in policy["spec"]["matchConstraints"]["resourceRules"][0]

        storage = client.StorageV1Api(api)
        node = await _json(storage.create_csi_node, {"metadata": {"name": "n"}, "spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": "n", "topologyKeys": []}]}})
        assert node["spec"]["drivers"] == [{"name": "csi.example.com", "nodeID": "n", "topologyKeys": None}]
        driver = await _json(storage.create_csi_driver, {"metadata": {"name": "csi.example.com"}, "spec": {
            "volumeLifecycleModes": [], "tokenRequests": []}})
        assert "tokenRequests" not in driver["spec"] and driver["spec"]["volumeLifecycleModes"] == ["Persistent"]


async def test_a_status_writer_owns_a_count_it_sets_to_zero(tmp_path):
    """PodDisruptionBudgetStatus's counts are tagged without omitempty: the field manager reads a
    change to 0 as a change (the writer owns it), not as a removal."""
    pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    async with served(tmp_path) as (_, api):
        await call(api, "POST", pdbs, {"metadata": {"name": "p"}, "spec": {
            "minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}, "creator")
        counts = {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
        await call(api, "PATCH", f"{pdbs}/p/status", {"status": counts}, "first",
                   content_type="application/merge-patch+json")
        got = await call(api, "PATCH", f"{pdbs}/p/status", {"status": {"disruptionsAllowed": 0}}, "second",
                         content_type="application/merge-patch+json")
        assert got["status"]["disruptionsAllowed"] == 0
        owners = entries(got)
        assert owners["second"][2] == {"f:status": {"f:disruptionsAllowed": {}}}
        assert "f:disruptionsAllowed" not in owners["first"][2]["f:status"]


async def test_kubectl_apply_serves_what_kube_apiserver_would(tmp_path):
    async with served(tmp_path) as (_, api):
        manifest = {"apiVersion": "apps/v1", "kind": "Deployment", **_helm_like("k")}
        manifest["spec"]["template"]["spec"]["containers"][0].update(tty=False, workingDir="")
        for args in (("apply", "-f", "-"), ("apply", "--server-side", "-f", "-")):
            r = await asyncio.to_thread(subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), *args],
                                        input=json.dumps(manifest), capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            r = await asyncio.to_thread(
                subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "get", "deploy/k", "-o", "json"],
                capture_output=True, text=True, timeout=60)
            got = json.loads(r.stdout)
            assert got["metadata"]["generation"] == 1
            spec = got["spec"]["template"]["spec"]
            assert spec["containers"][0] == {
                "name": "c", "image": "busybox", "imagePullPolicy": "Always", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
            assert not {"nodeSelector", "tolerations", "volumes", "imagePullSecrets"} & set(spec)


async def test_a_protobuf_priority_class_keeps_its_zero_value(tmp_path):
    """kubectl create priorityclass sends protobuf, where a zero value is on the wire; upstream's
    PriorityClass.value has no omitempty, so `value: 0` is stored and served."""
    raw = meta("zero") + vfield(2, 0) + vfield(3, 0) + lfield(4, "")
    async with served(tmp_path) as (_, api):
        def send():
            request = api.param_serialize("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                                          body=body("scheduling.k8s.io/v1", "PriorityClass", raw),
                                          header_params={"Content-Type": "application/vnd.kubernetes.protobuf",
                                                         "Accept": "application/json"})
            response = api.call_api(*request[:4])
            response.read()
            return response.status, json.loads(response.data)
        status, got = await asyncio.to_thread(send)
        assert status == 201 and got["value"] == 0 and not {"globalDefault", "description"} & set(got), got


async def test_an_empty_ca_bundle_is_left_out(tmp_path):
    """WebhookClientConfig.caBundle is an omitempty []byte: `""` decodes as an empty slice, left out."""
    async with served(tmp_path) as (_, api):
        hook = {"name": "v.example.com", "clientConfig": {"url": "https://example.com/v", "caBundle": ""},
                "sideEffects": "None", "admissionReviewVersions": ["v1"], "rules": [], "matchConditions": []}
        got = await _json(client.AdmissionregistrationV1Api(api).create_validating_webhook_configuration,
                          {"metadata": {"name": "w"}, "webhooks": [hook]})
        webhook = got["webhooks"][0]
        assert webhook["clientConfig"] == {"url": "https://example.com/v"}
        assert webhook["admissionReviewVersions"] == ["v1"] and not {"rules", "matchConditions"} & set(webhook)


async def test_a_patch_that_removes_a_list_tagged_without_omitempty_leaves_it_null(tmp_path):
    slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
    async with served(tmp_path) as (_, api):
        await call(api, "POST", slices, {"metadata": {"name": "s"}, "addressType": "IPv4",
                                         "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]})
        got = await call(api, "PATCH", f"{slices}/s", {"endpoints": None}, content_type="application/merge-patch+json")
        assert got["endpoints"] is None and got["ports"] == [{"name": "", "port": 80, "protocol": "TCP"}]
        same = await call(api, "PATCH", f"{slices}/s", [{"op": "add", "path": "/endpoints", "value": []}],
                          content_type="application/json-patch+json")
        assert same["endpoints"] is None and same["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"]
