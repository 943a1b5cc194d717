"""Structs held by value, served as kube-apiserver serves them: encoding/json writes a struct field
that is not a pointer whatever its tag (`omitempty` never leaves a struct out), so a Node created
with a name alone comes back with `spec: {}` and a status holding its daemon endpoints and system
info at their zeros, an Event without a source with `source: {}`, and no client owns what the
decoder filled in (the empty object a create is compared with holds the same)."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from kubernetes import client

from tests.apiserver.test_rest_managedfields import call, entries
from tests.registry.test_certificates import csr_request
from tests.served import served

KUBECTL = str(Path(sys.executable).parent / "kubectl")
NODES = "/api/v1/nodes"
ZERO_NODE_STATUS = {
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
    "nodeInfo": dict.fromkeys(("machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                               "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion", "operatingSystem",
                               "architecture"), "")}


async def _kubectl(tmp_path, *args: str, stdin: str | None = None) -> str:
    r = await asyncio.to_thread(subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), *args],
                                input=stdin, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


async def test_a_node_created_with_a_name_is_served_with_its_spec_and_status_structs(tmp_path):
    async with served(tmp_path) as (_, api):
        created = await call(api, "POST", NODES, {"metadata": {"name": "n1", "labels": {"a": "b"}}}, "maker")
        assert created["spec"] == {} and created["status"] == ZERO_NODE_STATUS
        # the labels were sent; the structs the decoder filled in are nobody's
        assert entries(created)["maker"][2] == {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}
        got = json.loads(await _kubectl(tmp_path, "get", "node", "n1", "-o", "json"))
        assert got["spec"] == {} and got["status"] == ZERO_NODE_STATUS
        listed = await asyncio.to_thread(client.CoreV1Api(api).list_node, _preload_content=False)
        assert [(n["spec"], n["status"]) for n in json.loads(listed.data)["items"]] == [({}, ZERO_NODE_STATUS)]


async def test_a_struct_patched_away_or_to_null_is_its_zero_again(tmp_path):
    async with served(tmp_path) as (_, api):
        await call(api, "POST", NODES, {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}})
        merged = await call(api, "PATCH", f"{NODES}/n1", {"spec": None}, content_type="application/merge-patch+json")
        assert merged["spec"] == {}
        info = {**ZERO_NODE_STATUS["nodeInfo"], "kubeletVersion": "v1.37.0", "architecture": "amd64"}
        posted = await call(api, "PATCH", f"{NODES}/n1/status", {"status": {"nodeInfo": info}},
                            content_type="application/merge-patch+json")
        assert posted["status"]["nodeInfo"] == info
        removed = await call(api, "PATCH", f"{NODES}/n1/status", [{"op": "remove", "path": "/status/nodeInfo"}],
                             content_type="application/json-patch+json")
        assert removed["status"] == ZERO_NODE_STATUS


async def test_server_side_apply_owns_what_it_applies_not_the_filled_structs(tmp_path):
    manifest = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "a"}}}
    async with served(tmp_path) as (_, _api):
        await _kubectl(tmp_path, "apply", "--server-side", "-f", "-", stdin=json.dumps(manifest))
        got = json.loads(await _kubectl(tmp_path, "get", "node", "n1", "-o", "json", "--show-managed-fields"))
        assert got["spec"] == {} and got["status"] == ZERO_NODE_STATUS
        assert [e["fieldsV1"] for e in got["metadata"]["managedFields"]] == [
            {"f:metadata": {"f:labels": {"f:zone": {}}}}]


async def test_an_event_without_a_source_and_a_template_without_metadata(tmp_path):
    async with served(tmp_path) as (_, api):
        event = await call(api, "POST", "/api/v1/namespaces/default/events",
                           {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"},
                           "recorder")
        assert event["source"] == {}
        assert entries(event)["recorder"][2] == {"f:involvedObject": {}, "f:reason": {}}
        template = await call(api, "POST", "/api/v1/namespaces/default/podtemplates", {
            "metadata": {"name": "t"}, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}})
        # ObjectMeta's creationTimestamp is omitzero (1.33): an empty ObjectMeta is `{}`
        assert template["template"]["metadata"] == {}
        assert template["template"]["spec"]["containers"][0]["resources"] == {}


async def test_a_status_a_create_may_not_set_is_reset_to_its_zero(tmp_path):
    """Upstream's strategies reset a created object's status to the empty struct, encoded with its
    fields tagged without omitempty at their zeros; whatever the client sent there is gone."""
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    workload = {"selector": {"matchLabels": {"a": "b"}}, "template": template}
    cases = [
        ("/api/v1/namespaces/default/services", {"spec": {"ports": [{"port": 80}]},
                                                 "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]}}},
         {"loadBalancer": {}}),
        ("/apis/apps/v1/namespaces/default/daemonsets", {"spec": workload, "status": {"numberReady": 3}},
         {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}),
        ("/apis/apps/v1/namespaces/default/statefulsets", {"spec": workload, "status": {"replicas": 2}},
         {"replicas": 0, "availableReplicas": 0}),
        ("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers", {"spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 2}, "status": {"currentReplicas": 5}},
         {"currentReplicas": 0, "desiredReplicas": 0}),
        ("/apis/batch/v1/namespaces/default/jobs", {"spec": {"template": {
            "spec": {**template["spec"], "restartPolicy": "Never"}}}, "status": {"active": 1}}, {}),
        ("/apis/certificates.k8s.io/v1/certificatesigningrequests", {"spec": {
            "request": csr_request(), "signerName": "example.com/s", "usages": ["client auth"]},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}}, {}),
        ("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", {"spec": {"devices": {}},
            "status": {"allocation": {"devices": {}}}}, {}),
    ]
    async with served(tmp_path) as (_, api):
        for path, body, zero in cases:
            created = await call(api, "POST", path, {"metadata": {"name": "x"}, **body})
            assert (path, created["status"]) == (path, zero)


async def test_a_resource_field_ref_without_a_divisor_is_served_its_zero_quantity(tmp_path):
    """resourceFieldRef.divisor is a resource.Quantity held by value: left out, it is written "0"
    (a zero the kubelet's downward API reads as 1)."""
    env = [{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]
    async with served(tmp_path) as (_, api):
        pod = await call(api, "POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "i", "env": env}]}}, "maker")
        assert pod["spec"]["containers"][0]["env"][0]["valueFrom"]["resourceFieldRef"] == {
            "resource": "limits.cpu", "divisor": "0"}
        fields = entries(pod)["maker"][2]["f:spec"]["f:containers"]['k:{"name":"c"}']["f:env"]
        assert fields['k:{"name":"CPU"}']["f:valueFrom"] == {".": {}, "f:resourceFieldRef": {}}


async def test_a_required_struct_left_out_is_its_zero_which_the_clients_models_read(tmp_path):
    """A required field held by value is written whatever was sent: a preferred scheduling term
    sent with a weight alone is served `preference: {}`, a shared counter sent as `{}` its
    `value: "0"`; upstream's validation accepts both, and the kubernetes client's models refuse a
    term without its preference and a counter without its value."""
    term = {"weight": 1}
    slice_spec = {"driver": "gpu.example.com", "pool": {"name": "p", "resourceSliceCount": 1}, "nodeName": "n1",
                  "sharedCounters": [{"name": "memory", "counters": {"bytes": {}}}]}
    async with served(tmp_path) as (_, api):
        await call(api, "POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}}})
        await call(api, "POST", "/apis/resource.k8s.io/v1/resourceslices", {"metadata": {"name": "s"}, "spec": slice_spec})
        pod = await asyncio.to_thread(client.CoreV1Api(api).read_namespaced_pod, "p", "default")
        preferred = pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
        assert [(t.weight, t.preference) for t in preferred] == [(1, client.V1NodeSelectorTerm())]
        slices = await asyncio.to_thread(client.ResourceV1Api(api).list_resource_slice)
        assert [s.spec.shared_counters[0].counters["bytes"].value for s in slices.items] == ["0"]


async def test_a_required_list_left_out_is_null(tmp_path):
    """A required list tagged without omitempty is written `null` when nil: where validation allows
    none, a LimitRange's limits, a CSINode's drivers and a pod failure policy's rules left out are
    served `null`."""
    container = {"name": "c", "image": "i"}
    async with served(tmp_path) as (_, api):
        await call(api, "POST", "/api/v1/namespaces/default/limitranges", {"metadata": {"name": "l"}, "spec": {}})
        await call(api, "POST", "/apis/storage.k8s.io/v1/csinodes", {"metadata": {"name": "n1"}})
        await call(api, "POST", "/apis/batch/v1/namespaces/default/jobs", {"metadata": {"name": "j"}, "spec": {
            "podFailurePolicy": {}, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}})
        limits = json.loads(await _kubectl(tmp_path, "get", "limitrange", "l", "-o", "json"))
        csinode = json.loads(await _kubectl(tmp_path, "get", "csinode", "n1", "-o", "json"))
        job = json.loads(await _kubectl(tmp_path, "get", "job", "j", "-o", "json"))
        assert (limits["spec"], csinode["spec"], job["spec"]["podFailurePolicy"]) == (
            {"limits": None}, {"drivers": None}, {"rules": None})


async def test_a_required_list_sent_empty_is_null_once_validated(tmp_path):
    """etcd's protobuf keeps no empty repeated field, so a required list tagged without omitempty sent
    `[]` is read back nil and served `null`, by a create, an update and a patch alike, while validation
    reads it as sent (`Required value` for a pod's `containers: []`). The official client's models
    refuse both, a LimitRange's `limits: null` and a CSINode's `drivers: null`, as they do upstream's."""
    async with served(tmp_path) as (_, api):
        created = await call(api, "POST", "/api/v1/namespaces/default/limitranges",
                             {"metadata": {"name": "l"}, "spec": {"limits": []}})
        await call(api, "POST", "/apis/storage.k8s.io/v1/csinodes", {"metadata": {"name": "n1"}, "spec": {"drivers": []}})
        driver = {"name": "csi.example.com", "nodeID": "n1"}
        await call(api, "POST", "/apis/storage.k8s.io/v1/csinodes",
                   {"metadata": {"name": "n2"}, "spec": {"drivers": [driver]}})
        await call(api, "PATCH", "/apis/storage.k8s.io/v1/csinodes/n2", {"spec": {"drivers": []}},
                   content_type="application/merge-patch+json")
        updated = await call(api, "PUT", "/api/v1/namespaces/default/limitranges/l",
                             {**created, "metadata": {**created["metadata"], "labels": {"a": "b"}}, "spec": {"limits": []}})
        assert created["spec"] == updated["spec"] == {"limits": None} and updated["metadata"]["labels"] == {"a": "b"}
        limits = json.loads(await _kubectl(tmp_path, "get", "limitrange", "l", "-o", "json"))
        csinodes = json.loads(await _kubectl(tmp_path, "get", "csinodes", "-o", "json"))
        assert (limits["spec"], [n["spec"] for n in csinodes["items"]]) == (
            {"limits": None}, [{"drivers": None}, {"drivers": None}])
        for read, args, field in ((client.CoreV1Api(api).read_namespaced_limit_range, ("l", "default"), "limits"),
                                  (client.StorageV1Api(api).read_csi_node, ("n1",), "drivers")):
            try:
                await asyncio.to_thread(read, *args)
                raise AssertionError(f"the client's model took {field}: null")
            except ValueError as e:  # pydantic's ValidationError: the model's field is a required list
                assert f"{field}\n  Input should be a valid list" in str(e)
        try:
            await call(api, "POST", "/api/v1/namespaces/default/pods",
                       {"metadata": {"name": "p"}, "spec": {"containers": []}})
            raise AssertionError("a pod without containers was created")
        except client.ApiException as e:
            assert json.loads(e.body)["details"]["causes"][0] == {
                "reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"}
