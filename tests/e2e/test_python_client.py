"""The official `kubernetes` Python client (37.x) drives the new kinds with its
typed calls; every field round-trips without loss."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client, watch

from .manifests import all_kinds

#: the outcome depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store

NS = "pyclient"


@pytest.fixture(scope="module")
def api(cluster):
    c = cluster.client()
    client.CoreV1Api(c).create_namespace({"metadata": {"name": NS}})
    return c


def _manifest(kind: str) -> dict:
    return next(d for d in all_kinds(NS) if d["kind"] == kind)


def _strip_server_fields(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("status", "metadata")}


def _roundtrip(api_client, model_cls, created, manifest: dict) -> None:
    """The typed object the server returned holds every field we sent."""
    got = api_client.sanitize_for_serialization(created)
    sent = _strip_server_fields(manifest)
    for k, v in sent.items():
        if k in ("apiVersion", "kind"):
            assert got[k] == v
            continue
        assert _contains(got[k], v), (k, got[k], v)


def _contains(got, sent) -> bool:
    if isinstance(sent, dict):
        return isinstance(got, dict) and all(_contains(got.get(k), v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(got, list) and len(got) == len(sent) and all(_contains(g, s) for g, s in zip(got, sent))
    return got == sent


def test_podgroup_and_workload_typed_calls(api):
    s = client.SchedulingV1beta1Api(api)
    wl = _manifest("Workload")
    created = s.create_namespaced_workload(NS, wl)
    _roundtrip(api, None, created, wl)
    pg = _manifest("PodGroup")
    created = s.create_namespaced_pod_group(NS, pg)
    _roundtrip(api, None, created, pg)
    listed = s.list_namespaced_pod_group(NS)
    assert [p.metadata.name for p in listed.items] == ["trainers"]
    got = s.read_namespaced_pod_group("trainers", NS)
    _roundtrip(api, None, got, pg)
    alpha = client.SchedulingV1alpha3Api(api).read_namespaced_pod_group("trainers", NS)
    assert api.sanitize_for_serialization(alpha)["spec"] == api.sanitize_for_serialization(got)["spec"]


def test_dra_typed_calls_and_versions(api):
    r = client.ResourceV1Api(api)
    dc = _manifest("DeviceClass")
    _roundtrip(api, None, r.create_device_class(dc), dc)
    rs = _manifest("ResourceSlice")
    _roundtrip(api, None, r.create_resource_slice(rs), rs)
    claim = _manifest("ResourceClaim")
    _roundtrip(api, None, r.create_namespaced_resource_claim(NS, claim), claim)
    tmpl = _manifest("ResourceClaimTemplate")
    _roundtrip(api, None, r.create_namespaced_resource_claim_template(NS, tmpl), tmpl)
    dtr = _manifest("DeviceTaintRule")
    _roundtrip(api, None, r.create_device_taint_rule(dtr), dtr)
    beta1 = client.ResourceV1beta1Api(api).read_namespaced_resource_claim("gpu", NS)
    req = api.sanitize_for_serialization(beta1)["spec"]["devices"]["requests"][0]
    assert req["deviceClassName"] == dc["metadata"]["name"], "v1beta1 keeps request fields inline"
    beta2 = client.ResourceV1beta2Api(api).read_namespaced_resource_claim("gpu", NS)
    assert api.sanitize_for_serialization(beta2)["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == dc["metadata"]["name"]


def test_certificates_typed_calls(api):
    cv1 = client.CertificatesV1Api(api)
    ctb = _manifest("ClusterTrustBundle")
    _roundtrip(api, None, cv1.create_cluster_trust_bundle(ctb), ctb)
    pcr = _manifest("PodCertificateRequest")
    created = cv1.create_namespaced_pod_certificate_request(NS, pcr)
    _roundtrip(api, None, created, pcr)
    assert created.spec.max_expiration_seconds == 86400


def test_hpa_v2_served_as_v1(api):
    hpa = _manifest("HorizontalPodAutoscaler")
    client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(NS, hpa)
    v1 = client.AutoscalingV1Api(api).read_namespaced_horizontal_pod_autoscaler("web", NS)
    assert v1.spec.target_cpu_utilization_percentage == 70
    assert v1.spec.max_replicas == 5


def test_watch_new_kind(api):
    s = client.SchedulingV1beta1Api(api)
    seen: list[tuple[str, str]] = []
    rv = s.list_namespaced_pod_group(NS).metadata.resource_version
    w = watch.Watch()

    def consume():
        for ev in w.stream(s.list_namespaced_pod_group, NS, resource_version=rv, timeout_seconds=20):
            seen.append((ev["type"], ev["object"].metadata.name))
            if ev["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=consume)
    t.start()
    body = {"metadata": {"name": "watched"}, "spec": {"schedulingPolicy": {"basic": {}}}}
    s.create_namespaced_pod_group(NS, body)
    s.patch_namespaced_pod_group("watched", NS, {"metadata": {"labels": {"x": "y"}}})
    s.delete_namespaced_pod_group("watched", NS)
    t.join(30)
    # the podgroup-protection finalizer adds MODIFIED events (deletionTimestamp, finalizer removed) before DELETED
    assert seen[0] == ("ADDED", "watched") and seen[-1] == ("DELETED", "watched")
    assert len(seen) >= 3 and set(seen[1:-1]) == {("MODIFIED", "watched")}


def test_workload_kinds_typed_reads(api):
    """Statuses carry the fields Go always serialises, so typed reads succeed."""
    rs = _manifest("ReplicaSet")
    apps = client.AppsV1Api(api)
    created = apps.create_namespaced_replica_set(NS, rs)
    assert created.status.replicas == 0
    dep = _manifest("Deployment")
    apps.create_namespaced_deployment(NS, dep)
    assert apps.read_namespaced_deployment_scale("web", NS).spec.replicas == 2
    pdb = _manifest("PodDisruptionBudget")
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(NS, pdb)
    assert client.PolicyV1Api(api).read_namespaced_pod_disruption_budget("web", NS).spec.min_available == 1
