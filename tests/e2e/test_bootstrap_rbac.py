"""The default ClusterRoles of the system components, as `kubectl get clusterroles` shows them,
and the docs' "Configure Multiple Schedulers" RBAC: a ServiceAccount bound to
system:kube-scheduler and system:volume-scheduler runs a second scheduler. And the kubelet's
/healthz checks, which a monitoring role reaches through nodes/proxy, and the metrics.k8s.io
kinds in the OpenAPI documents, as metrics-server publishes them."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
import yaml

from .conftest import wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module adds a ServiceAccount, its
    bindings and a pod it deletes."""
    return session_cluster


SA = "system:serviceaccount:kube-system:my-scheduler"
COMPONENT_ROLES = ("system:kube-scheduler", "system:volume-scheduler", "system:kube-controller-manager",
                   "system:node-proxier", "system:kube-dns", "system:persistent-volume-provisioner",
                   "system:heapster", "system:node-problem-detector", "system:kube-aggregator", "system:monitoring",
                   "system:service-account-issuer-discovery", "system:public-info-viewer")
#: the docs' manifest (tasks/extend-kubernetes/configure-multiple-schedulers), less the Deployment
RBAC = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: my-scheduler, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: my-scheduler-as-kube-scheduler}
subjects: [{kind: ServiceAccount, name: my-scheduler, namespace: kube-system}]
roleRef: {kind: ClusterRole, name: system:kube-scheduler, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: my-scheduler-as-volume-scheduler}
subjects: [{kind: ServiceAccount, name: my-scheduler, namespace: kube-system}]
roleRef: {kind: ClusterRole, name: system:volume-scheduler, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: my-scheduler-extension-apiserver-authentication-reader, namespace: kube-system}
roleRef: {kind: Role, name: extension-apiserver-authentication-reader, apiGroup: rbac.authorization.k8s.io}
subjects: [{kind: ServiceAccount, name: my-scheduler, namespace: kube-system}]
"""
CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: my-scheduler
leaderElection:
  leaderElect: false
"""


@pytest.fixture(scope="module")
def my_scheduler(cluster):
    cluster.kubectl("apply", "-f", "-", input=RBAC)
    return cluster


def can_i(cluster, *args: str) -> str:
    """`kubectl auth can-i` as the ServiceAccount (TYPE/NAME names an object: a subresource is
    asked with --subresource)."""
    r = cluster.kubectl("auth", "can-i", "--as", SA, *args, check=False)
    return r.stdout.strip()


def test_component_roles_are_listed_with_the_bootstrap_label_and_annotation(cluster):
    listed = cluster.kubectl_json("get", "clusterroles", "-l", "kubernetes.io/bootstrapping=rbac-defaults")["items"]
    roles = {r["metadata"]["name"]: r for r in listed}
    for name in COMPONENT_ROLES:
        assert name in roles, name
        assert roles[name]["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
        assert roles[name]["rules"], name
    bindings = {b["metadata"]["name"]: b for b in cluster.kubectl_json("get", "clusterrolebindings")["items"]}
    for name, kind, subject in (("system:kube-scheduler", "User", "system:kube-scheduler"),
                                ("system:volume-scheduler", "User", "system:kube-scheduler"),
                                ("system:kube-controller-manager", "User", "system:kube-controller-manager"),
                                ("system:node-proxier", "User", "system:kube-proxy"),
                                ("system:kube-dns", "ServiceAccount", "kube-dns")):
        b = bindings[name]
        assert b["roleRef"]["name"] == name
        assert [(s["kind"], s["name"]) for s in b["subjects"]] == [(kind, subject)]
        assert b["metadata"]["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
    assert cluster.kubectl("auth", "can-i", "create", "pods", "--subresource=binding", "--as", "system:kube-scheduler").stdout.strip() == "yes"
    assert cluster.kubectl("auth", "can-i", "list", "endpointslices.discovery.k8s.io", "--as", "system:kube-proxy",
                           "-A").stdout.strip() == "yes"


def test_the_docs_scheduler_service_account_may_do_what_a_scheduler_does(my_scheduler):
    c = my_scheduler
    for args in (("create", "pods", "--subresource=binding"), ("list", "nodes"), ("patch", "pods", "--subresource=status"),
                 ("update", "persistentvolumes"),
                 ("update", "resourceclaims.resource.k8s.io", "--subresource=status"), ("list", "resourceslices.resource.k8s.io"),
                 ("watch", "podgroups.scheduling.k8s.io"), ("patch", "podgroups.scheduling.k8s.io", "--subresource=status"),
                 ("create", "leases.coordination.k8s.io", "-n", "kube-system"),
                 ("get", "configmaps/extension-apiserver-authentication", "-n", "kube-system")):
        assert can_i(c, *args) == "yes", args
    for args in (("delete", "nodes"), ("create", "deployments.apps"), ("get", "secrets"),
                 ("update", "leases.coordination.k8s.io/my-scheduler", "-n", "kube-system"),
                 ("get", "configmaps/other", "-n", "kube-system")):
        assert can_i(c, *args) == "no", args


def test_a_second_scheduler_runs_as_the_service_account(my_scheduler, tmp_path):
    c = my_scheduler
    token = c.kubectl("create", "token", "my-scheduler", "-n", "kube-system").stdout.strip()
    config = yaml.safe_load(open(c.kubeconfig))
    for u in config["users"]:
        u["user"] = {"token": token}
    kubeconfig = tmp_path / "my-scheduler.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    (tmp_path / "config.yaml").write_text(CONFIG)
    log = tmp_path / "my-scheduler.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", str(kubeconfig),
                                 "--config", str(tmp_path / "config.yaml"), "--secure-port", "0"],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    try:
        c.kubectl("run", "annotation-second-scheduler", "--image=registry.k8s.io/pause:3.10",
                  "--overrides", '{"spec": {"schedulerName": "my-scheduler"}}')
        node = wait_for(lambda: c.kubectl("get", "pod", "annotation-second-scheduler", "-o",
                                          "jsonpath={.spec.nodeName}").stdout, 30, "the pod bound by my-scheduler")
        assert node
        events = c.kubectl_json("get", "events.events.k8s.io", "--field-selector",
                                "regarding.name=annotation-second-scheduler,reason=Scheduled")["items"]
        assert [e["reportingController"] for e in events] == ["my-scheduler"]
    finally:
        proc.terminate()
        assert proc.wait(20) == 0
        c.kubectl("delete", "pod", "annotation-second-scheduler", "--wait=false", check=False)
    text = log.read_text()
    assert "forbidden" not in text.lower(), text


def test_kubelet_healthz_checks_through_nodes_proxy(cluster):
    node = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    base = f"/api/v1/nodes/{node}/proxy/healthz"
    assert cluster.kubectl("get", "--raw", base).stdout == "ok"
    assert cluster.kubectl("get", "--raw", base + "?verbose").stdout == \
        "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n"
    assert cluster.kubectl("get", "--raw", base + "?verbose&exclude=log").stdout.splitlines()[1] == "[+]log excluded: ok"
    assert cluster.kubectl("get", "--raw", base + "/syncloop").stdout == "ok"


@pytest.mark.parametrize("output, head, item", [
    ("plaintext-openapiv2", "KIND:     PodMetrics\nVERSION:  metrics.k8s.io/v1beta1\n", "Object"),
    ("plaintext", "GROUP:      metrics.k8s.io\nKIND:       PodMetrics\nVERSION:    v1beta1\n", "ContainerMetrics"),
])
def test_kubectl_explains_the_metrics_kinds(cluster, output, head, item):
    explained = cluster.kubectl("explain", "podmetrics", f"--output={output}").stdout
    assert explained.startswith(head), explained
    assert "PodMetrics sets resource usage metrics of a pod." in explained
    assert f"containers\t<[]{item}> -required-" in explained, explained
    usage = cluster.kubectl("explain", "nodemetrics.usage", f"--output={output}").stdout
    assert "The memory usage is the memory working set." in usage


def test_the_metrics_document_is_indexed_by_its_hash(cluster):
    url = json.loads(cluster.kubectl("get", "--raw", "/openapi/v3").stdout)["paths"]["apis/metrics.k8s.io/v1beta1"][
        "serverRelativeURL"]
    document = cluster.kubectl("get", "--raw", url).stdout.encode()
    assert url == f"/openapi/v3/apis/metrics.k8s.io/v1beta1?hash={hashlib.sha512(document).hexdigest().upper()}"
    assert "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics" in json.loads(document)["components"]["schemas"]


@pytest.mark.parametrize("group_version, kind", [
    ("external.metrics.k8s.io/v1beta1", "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValue"),
    ("custom.metrics.k8s.io/v1beta2", "io.k8s.metrics.pkg.apis.custom_metrics.v1beta2.MetricValue"),
])
def test_the_adapter_metrics_kinds_are_in_both_documents(cluster, group_version, kind):
    url = json.loads(cluster.kubectl("get", "--raw", "/openapi/v3").stdout)["paths"][f"apis/{group_version}"][
        "serverRelativeURL"]
    document = cluster.kubectl("get", "--raw", url).stdout.encode()
    assert url == f"/openapi/v3/apis/{group_version}?hash={hashlib.sha512(document).hexdigest().upper()}"
    group, version = group_version.split("/")
    schemas = json.loads(document)["components"]["schemas"]
    assert schemas[kind + "List"]["x-kubernetes-group-version-kind"] == [
        {"group": group, "kind": kind.rsplit(".", 1)[1] + "List", "version": version}]
    assert schemas[kind + "List"]["properties"]["items"]["items"]["$ref"] == f"#/components/schemas/{kind}"
    definitions = json.loads(cluster.kubectl("get", "--raw", "/openapi/v2").stdout)["definitions"]
    assert definitions[kind]["required"] == schemas[kind]["required"]
    assert "timestamp" in definitions[kind]["required"]


def test_kubectl_explains_the_external_metrics_from_the_swagger_document(cluster):
    """The v2 explainer finds a kind by its group-version-kind; the v3 one needs a path naming the resource,
    which the adapter's metric-named routes do not give."""
    explained = cluster.kubectl("explain", "externalmetrics", "--output=plaintext-openapiv2").stdout
    assert explained.startswith("KIND:     ExternalMetricValueList\nVERSION:  external.metrics.k8s.io/v1beta1\n")
    assert "ExternalMetricValueList is a list of values for a given metric for some set labels" in " ".join(
        explained.split()), explained  # kubectl wraps the description
    assert "items\t<[]Object> -required-" in explained, explained
    labels = cluster.kubectl("explain", "externalmetrics.items.metricLabels", "--output=plaintext-openapiv2").stdout
    assert "a set of labels that identify a single time series for the metric" in " ".join(labels.split()), labels
