"""Objects kube-apiserver keeps itself: API Priority and Fairness
configuration, ComponentStatuses; and LeaseCandidates at both served versions."""

from __future__ import annotations

import json

from kubernetes import client

from .conftest import wait_for


def test_flowcontrol_bootstrap_configuration(cluster):
    api = client.FlowcontrolApiserverV1Api(cluster.client())
    names = {fs.metadata.name for fs in api.list_flow_schema().items}
    assert {"exempt", "probes", "system-leader-election", "global-default", "catch-all"} <= names
    pl = api.read_priority_level_configuration("workload-low")
    assert pl.spec.limited.nominal_concurrency_shares == 100 and pl.spec.limited.lendable_percent == 90
    assert pl.metadata.annotations["apf.kubernetes.io/autoupdate-spec"] == "true"
    fs = wait_for(lambda: (s := api.read_flow_schema("global-default")).status.conditions and s, 60, "Dangling condition")
    assert [(c.type, c.status, c.reason) for c in fs.status.conditions] == [("Dangling", "False", "Found")]
    rows = [r.split() for r in cluster.kubectl("get", "flowschemas", "--no-headers").stdout.splitlines()]
    assert [r[0] for r in rows][:3] == ["exempt", "probes", "system-leader-election"]  # by matchingPrecedence
    assert ["exempt", "exempt", "1", "<none>"] == rows[[r[0] for r in rows].index("exempt")][:4]
    api.create_flow_schema({"metadata": {"name": "orphan"}, "spec": {
        "priorityLevelConfiguration": {"name": "nope"}, "rules": [{"subjects": [{"kind": "Group", "group": {"name": "x"}}],
                                                                   "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}]}})
    fs = wait_for(lambda: (s := api.read_flow_schema("orphan")).status.conditions and s, 60, "Dangling condition")
    assert fs.status.conditions[0].status == "True" and fs.spec.matching_precedence == 1000
    api.delete_flow_schema("orphan")


def test_component_statuses(cluster):
    rows = wait_for(lambda: [r.split() for r in cluster.kubectl("get", "componentstatuses", "--no-headers").stdout.splitlines()],
                    60, "componentstatuses")
    assert sorted(r[0] for r in rows) == ["controller-manager", "etcd-0", "scheduler"]
    assert ["etcd-0", "Healthy"] in [r[:2] for r in rows]
    assert "Warning: v1 ComponentStatus is deprecated in v1.19+" in cluster.kubectl("get", "cs").stderr
    wait_for(lambda: all(r[1] == "Healthy" for r in (line.split() for line in cluster.kubectl(
        "get", "cs", "--no-headers").stdout.splitlines())), 30, "every component Healthy")
    r = cluster.kubectl("delete", "cs", "etcd-0", check=False)
    assert r.returncode != 0 and "MethodNotAllowed" in r.stderr or "not allow" in r.stderr


def test_lease_candidates(cluster):
    api = client.CoordinationV1beta1Api(cluster.client())
    body = {"metadata": {"name": "kcm-1"}, "spec": {"leaseName": "kube-controller-manager", "binaryVersion": "1.37.0",
                                                    "emulationVersion": "1.37.0", "strategy": "OldestEmulationVersion"}}
    got = api.create_namespaced_lease_candidate("kube-system", body)
    assert got.spec.lease_name == "kube-controller-manager"
    alpha = cluster.kubectl_json("get", "leasecandidates.v1alpha2.coordination.k8s.io", "kcm-1", "-n", "kube-system")
    assert alpha["apiVersion"] == "coordination.k8s.io/v1alpha2" and alpha["spec"]["binaryVersion"] == "1.37.0"
    got.spec.lease_name = "other"
    try:
        api.replace_namespaced_lease_candidate("kcm-1", "kube-system", got)
        raise AssertionError("leaseName changed")
    except client.ApiException as e:
        assert e.status == 422 and "spec.leaseName: Invalid value" in e.body
    api.delete_namespaced_lease_candidate("kcm-1", "kube-system")


def test_bindings_resource_binds_a_pod(cluster):
    core = client.CoreV1Api(cluster.client())
    core.create_namespaced_pod("default", {"metadata": {"name": "bind-me"}, "spec": {
        "schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]}})
    node = core.list_node().items[0].metadata.name
    # kube-apiserver answers a Status, which the client cannot read as a Binding (kubernetes-client/python#547)
    resp = core.create_namespaced_binding("default", {"metadata": {"name": "bind-me"},
                                                      "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
                                          _preload_content=False)
    assert json.loads(resp.data)["status"] == "Success"
    assert core.read_namespaced_pod("bind-me", "default").spec.node_name == node
    r = cluster.kubectl("delete", "--raw", "/api/v1/namespaces", check=False)
    assert r.returncode != 0 and "MethodNotAllowed" in r.stderr or "not allow" in r.stderr
    core.delete_namespaced_pod("bind-me", "default", grace_period_seconds=0)


def test_storage_version_migration(cluster):
    core = client.CoreV1Api(cluster.client())
    for i in range(3):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"svm-{i}"}, "data": {"i": str(i)}})
    svm_api = client.StoragemigrationV1Api(cluster.client())
    svm_api.create_storage_version_migration({"metadata": {"name": "configmaps"},
                                              "spec": {"resource": {"group": "", "resource": "configmaps"}}})

    def finished():
        s = svm_api.read_storage_version_migration("configmaps")
        return s if any(c.type == "Succeeded" and c.status == "True" for c in s.status.conditions or []) else None
    done = wait_for(finished, 60, "the migration succeeded")
    assert done.status.resource_version
    by_type = {c.type: (c.status, c.reason) for c in done.status.conditions}
    assert by_type == {"Running": ("False", "StorageVersionMigrationInProgress"),
                       "Succeeded": ("True", "StorageVersionMigrationSucceeded")}
    assert core.read_namespaced_config_map("svm-1", "default").data == {"i": "1"}

    # a resource discovery does not know yet: no condition (none is valid before a resourceVersion), retried
    # until the CRD serves it, then migrated
    svm_api.create_storage_version_migration({"metadata": {"name": "gadgets"},
                                              "spec": {"resource": {"group": "svm.example.com", "resource": "gadgets"}}})
    assert not svm_api.read_storage_version_migration("gadgets").status.conditions
    ext = client.ApiextensionsV1Api(cluster.client())
    ext.create_custom_resource_definition({"metadata": {"name": "gadgets.svm.example.com"}, "spec": {
        "group": "svm.example.com", "scope": "Cluster", "names": {"plural": "gadgets", "kind": "Gadget"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    later = wait_for(lambda: (s := svm_api.read_storage_version_migration("gadgets")).status.conditions and s, 60,
                     "the migration of gadgets finished")
    assert later.status.resource_version
    assert {c.type: c.status for c in later.status.conditions} == {"Running": "False", "Succeeded": "True"}
    v1beta1 = cluster.kubectl_json("get", "storageversionmigrations.v1beta1.storagemigration.k8s.io", "configmaps")
    assert v1beta1["apiVersion"] == "storagemigration.k8s.io/v1beta1"
    for name in ("configmaps", "gadgets"):
        svm_api.delete_storage_version_migration(name)
    ext.delete_custom_resource_definition("gadgets.svm.example.com")
    for i in range(3):
        core.delete_namespaced_config_map(f"svm-{i}", "default")


def test_identity_lease_and_storage_versions(cluster):
    leases = client.CoordinationV1Api(cluster.client()).list_namespaced_lease(
        "kube-system", label_selector="apiserver.kubernetes.io/identity=kube-apiserver").items
    assert len(leases) == 1 and leases[0].metadata.name.startswith("apiserver-")
    assert leases[0].spec.holder_identity.startswith(leases[0].metadata.name + "_")
    internal = client.InternalApiserverV1alpha1Api(cluster.client())
    sv = wait_for(lambda: _storage_version(internal, "apps.deployments"), 60, "apps.deployments StorageVersion")
    assert sv.status.common_encoding_version == "apps/v1"
    [entry] = sv.status.storage_versions
    assert (entry.api_server_id, entry.encoding_version, entry.decodable_versions) == (
        leases[0].metadata.name, "apps/v1", ["apps/v1"])
    assert [(c.type, c.status, c.reason) for c in sv.status.conditions] == [
        ("AllEncodingVersionsEqual", "True", "CommonEncodingVersionSet")]
    core = wait_for(lambda: _storage_version(internal, "core.pods"), 60, "core.pods StorageVersion")
    assert core.status.common_encoding_version == "v1"
    names = {s.metadata.name for s in internal.list_storage_version().items}
    assert "core.componentstatuses" not in names and "authorization.k8s.io.subjectaccessreviews" not in names


def _storage_version(api, name):
    try:
        return api.read_storage_version(name)
    except client.ApiException:
        return None


def test_priority_and_fairness_classifies_requests(cluster):
    import ssl
    import urllib.request

    from .test_bad_input import HTTP

    fc = client.FlowcontrolApiserverV1Api(cluster.client())
    uids = {fs.metadata.name: fs.metadata.uid for fs in fc.list_flow_schema().items}
    h = HTTP(cluster.kubeconfig)
    with urllib.request.urlopen(urllib.request.Request(h.server + "/api/v1/namespaces"), context=h.ctx) as r:
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uids["exempt"]
    core = client.CoreV1Api(cluster.client())
    wait_for(lambda: core.list_namespaced_service_account("default", field_selector="metadata.name=default").items,
             60, "the default ServiceAccount")
    token = core.create_namespaced_service_account_token("default", "default", {"spec": {}}).status.token
    anonymous_tls = ssl.create_default_context()  # no client certificate: the token is the identity
    anonymous_tls.check_hostname, anonymous_tls.verify_mode = False, ssl.CERT_NONE
    req = urllib.request.Request(h.server + "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", method="POST",
                                 data=json.dumps({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/x"}}}).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=anonymous_tls) as r:
        assert r.headers["X-Kubernetes-PF-FlowSchema-UID"] == uids["service-accounts"]
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    assert 'apiserver_flowcontrol_dispatched_requests_total{flow_schema="service-accounts",priority_level="workload-low"}' in metrics


def test_resource_pool_status_request(cluster):
    api = client.ResourceV1alpha3Api(cluster.client())
    wait_for(lambda: client.ResourceV1Api(cluster.client()).list_resource_slice().items, 60, "the GPU driver's slices")
    api.create_resource_pool_status_request({"metadata": {"name": "gpus"}, "spec": {"driver": "gpu.nanokube.io"}})
    done = wait_for(lambda: (r := api.read_resource_pool_status_request("gpus")).status and r, 60, "the answer")
    assert [(c.type, c.status, c.reason) for c in done.status.conditions] == [("Complete", "True", "CalculationComplete")]
    assert done.status.pool_count == len(done.status.pools) >= 1
    pool = done.status.pools[0]
    assert pool.driver == "gpu.nanokube.io" and pool.total_devices == pool.available_devices + pool.allocated_devices \
        + pool.unavailable_devices
    api.delete_resource_pool_status_request("gpus")
