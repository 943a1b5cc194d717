"""metadata.generation of a kind without generation semantics (a ConfigMap, a Service): upstream's create
keeps what the client sent (only strategies with a spec set 1), ValidateObjectMeta refuses a
negative one, and an update cannot change it (BeforeUpdate keeps the stored one)."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.registry.test_certificates import CA_A as CA


def _configmap(name: str, generation: int | None = None) -> dict:
    meta = {"name": name} if generation is None else {"name": name, "generation": generation}
    return {"metadata": meta, "data": {"k": "v"}}


async def test_a_configmap_keeps_the_generation_it_was_created_with(core):
    created = await asyncio.to_thread(core.create_namespaced_config_map, "default", _configmap("cm", 5))
    assert created.metadata.generation == 5
    body = {"metadata": {"name": "cm", "generation": 9, "resourceVersion": created.metadata.resource_version},
            "data": {"k": "w"}}
    updated = await asyncio.to_thread(core.replace_namespaced_config_map, "cm", "default", body)
    assert (updated.data, updated.metadata.generation) == ({"k": "w"}, 5)
    plain = await asyncio.to_thread(core.create_namespaced_config_map, "default", _configmap("plain"))
    assert plain.metadata.generation is None


async def test_a_negative_generation_is_refused(core):
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_config_map, "default", _configmap("cm", -1))
    assert e.value.status == 422
    assert json.loads(e.value.body)["message"] == (
        'ConfigMap "cm" is invalid: metadata.generation: Invalid value: -1: must be greater than or equal to 0')


async def test_a_kind_that_tracks_generation_starts_at_one(core):
    pod = {"metadata": {"name": "p", "generation": 7}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    created = await asyncio.to_thread(core.create_namespaced_pod, "default", pod)
    assert created.metadata.generation == 1


async def test_services_and_namespaces_have_no_generation_of_their_own(core):
    """svcStrategy and the namespace strategy neither set nor bump metadata.generation."""
    svc = {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
    created = await asyncio.to_thread(core.create_namespaced_service, "default", svc)
    assert created.metadata.generation is None
    patched = await asyncio.to_thread(core.patch_namespaced_service, "web", "default",
                                      {"spec": {"selector": {"app": "web"}}})
    assert (patched.spec.selector, patched.metadata.generation) == ({"app": "web"}, None)
    kept = await asyncio.to_thread(core.create_namespaced_service, "default",
                                   {"metadata": {"name": "api", "generation": 3}, "spec": {"ports": [{"port": 80}]}})
    assert kept.metadata.generation == 3
    ns = await asyncio.to_thread(core.create_namespace, {"metadata": {"name": "team-a"}})
    assert ns.metadata.generation is None


async def test_leases_and_storage_attachments_have_no_generation_of_their_own(core):
    """leaseStrategy, csiNodeStrategy and volumeAttachmentStrategy neither set nor bump it either."""
    from kubernetes import client

    coordination, storage = client.CoordinationV1Api(core.api_client), client.StorageV1Api(core.api_client)
    lease = await asyncio.to_thread(coordination.create_namespaced_lease, "default",
                                    {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    renewed = await asyncio.to_thread(coordination.patch_namespaced_lease, "l", "default",
                                      {"spec": {"holderIdentity": "b"}})
    assert (lease.metadata.generation, renewed.metadata.generation) == (None, None)
    # (with a driver: the client's model refuses the `drivers: null` that `[]` is served as)
    node = await asyncio.to_thread(storage.create_csi_node, {"metadata": {"name": "n1", "generation": 2},
                                                             "spec": {"drivers": [{"name": "x.io", "nodeID": "n1"}]}})
    attachment = await asyncio.to_thread(storage.create_volume_attachment, {
        "metadata": {"name": "va"}, "spec": {"attacher": "x.io", "nodeName": "n1", "source": {"persistentVolumeName": "pv"}}})
    assert (node.metadata.generation, attachment.metadata.generation) == (2, None)


async def test_service_cidrs_and_trust_bundles_have_no_generation_of_their_own(core):
    """serviceCIDRStrategy and the ClusterTrustBundle strategy neither set nor bump it either."""
    from kubernetes import client

    cidr = await asyncio.to_thread(client.NetworkingV1Api(core.api_client).create_service_cidr,
                                   {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/24"]}})
    assert cidr.metadata.generation is None
    created = await asyncio.to_thread(core.api_client.call_api, *core.api_client.param_serialize(
        "POST", "/apis/certificates.k8s.io/v1/clustertrustbundles", body={
            "apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle", "metadata": {"name": "b"},
            "spec": {"trustBundle": CA}}, header_params={"Content-Type": "application/json"})[:4])
    created.read()
    assert "generation" not in json.loads(created.data)["metadata"]


async def _send(core, method: str, path: str, body: dict, ctype: str = "application/json") -> dict:
    response = await asyncio.to_thread(core.api_client.call_api, *core.api_client.param_serialize(
        method, path, body=body, header_params={"Content-Type": ctype, "Accept": "application/json"})[:4])
    response.read()
    assert response.status < 300, response.data
    return json.loads(response.data)


async def test_claims_templates_workloads_and_pod_groups_have_no_generation_while_dra_classes_slices_and_rules_do(core):
    """resourceclaimStrategy, resourceClaimTemplateStrategy, workloadStrategy and podGroupStrategy
    neither set nor bump metadata.generation (a created one has none); deviceClassStrategy, resourceSliceStrategy and
    deviceTaintRuleStrategy set 1 on create and add one on each spec change."""
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}
    ns = "/apis/resource.k8s.io/v1/namespaces/default"
    claim = await _send(core, "POST", f"{ns}/resourceclaims", {"metadata": {"name": "c"}, "spec": spec})
    template = await _send(core, "POST", f"{ns}/resourceclaimtemplates", {"metadata": {"name": "t"}, "spec": {"spec": spec}})
    sched = "/apis/scheduling.k8s.io/v1beta1/namespaces/default"
    workload = await _send(core, "POST", f"{sched}/workloads", {"metadata": {"name": "w"}, "spec": {
        "podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]}})
    group = await _send(core, "POST", f"{sched}/podgroups", {"metadata": {"name": "g"}, "spec": {
        "workloadRef": {"workloadName": "w", "templateName": "workers"}, "schedulingPolicy": {"gang": {"minCount": 2}}}})
    assert [("generation" in o["metadata"]) for o in (claim, template, workload, group)] == [False] * 4
    cls = await _send(core, "POST", "/apis/resource.k8s.io/v1/deviceclasses", {"metadata": {"name": "gpu.example.com"},
                                                                             "spec": {}})
    changed = await _send(core, "PATCH", "/apis/resource.k8s.io/v1/deviceclasses/gpu.example.com",
                          {"spec": {"selectors": [{"cel": {"expression": "true"}}]}}, "application/merge-patch+json")
    assert (cls["metadata"]["generation"], changed["metadata"]["generation"]) == (1, 2)
