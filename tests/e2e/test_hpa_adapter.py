"""The HPA on metrics an adapter serves, against `nanokube up`: an adapter process (HTTPS, as KEDA's metrics
server or prometheus-adapter) behind a Service, its EndpointSlice and KEDA's APIService manifest applied
over the built-in adapter's local one. The HPA reads through the API server, so it scales on the adapter's
values (from zero too), `kubectl get --raw` answers from the adapter, and an adapter that went away is
upstream's FailedGetExternalMetric with the aggregator's 503 in client-go's words; a Pods metric comes
from the same adapter's custom.metrics.k8s.io at v1beta1, the version its APIService registers."""

from __future__ import annotations

import json

import pytest

from tests.apiserver.metrics_adapter import Adapter
from tests.e2e.conftest import running_cluster, wait_for
from tests.e2e.test_aggregation import host_ip

SERVICE = "keda-operator-metrics-apiserver"
QUEUE = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length"


def deployment(name: str, replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}


def hpa(name: str, metric: dict, lo: int) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": lo, "maxReplicas": 6, "metrics": [metric],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}


def apiservice(group: str, version: str) -> dict:
    """KEDA's APIService manifest for group/version, naming the adapter's Service."""
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": f"{version}.{group}"},
            "spec": {"service": {"name": SERVICE, "namespace": "default"}, "group": group, "version": version,
                     "insecureSkipTLSVerify": True, "groupPriorityMinimum": 100, "versionPriority": 100}}


@pytest.fixture(scope="module")
def cluster(store_url):
    with running_cluster("hpa-adapter", env={"NANOKUBE_HPA_SYNC_PERIOD": "1"}, store=store_url) as c:
        yield c


@pytest.fixture
def adapter(cluster, tmp_path):
    a = Adapter(tmp_path, host_ip(), {"external": {"queue_length": "0"}})
    try:
        cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": "default"},
             "spec": {"ports": [{"port": 443, "targetPort": a.port}]}},
            endpoints(a, ready=True)]}))
        yield a
    finally:
        a.stop()


def endpoints(a: Adapter, ready: bool) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{SERVICE}-1", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4", "endpoints": [{"addresses": [a.ip], "conditions": {"ready": ready}}],
            "ports": [{"name": "", "port": a.port, "protocol": "TCP"}]}


def register(c, group: str, version: str) -> None:
    c.kubectl("apply", "-f", "-", input=json.dumps(apiservice(group, version)))
    wait_for(lambda: available(c, f"{version}.{group}") == ("True", "Passed"), 30, f"{version}.{group} Available")


def available(c, name: str):
    a = c.kubectl_json("get", "apiservice", name)
    return next(((x["status"], x["reason"]) for x in (a.get("status") or {}).get("conditions") or []
                 if x["type"] == "Available"), None)


def condition(c, name: str, typ: str):
    h = c.kubectl_json("get", "hpa", name)
    return next(((x["status"], x["reason"], x["message"]) for x in (h.get("status") or {}).get("conditions") or []
                 if x["type"] == typ), None)


def replicas(c, name: str) -> int:
    return c.kubectl_json("get", "deployment", name)["spec"]["replicas"]


def test_an_external_metric_from_an_adapter_scales_from_zero_and_its_loss_is_failed_get_external_metric(cluster, adapter):
    c = cluster
    # the built-in adapter's value, which the HPA must not read once the adapter serves the group
    c.kubectl("create", "configmap", "nanokube-external-metrics", "--from-literal=queue_length=30")
    register(c, "external.metrics.k8s.io", "v1beta1")
    assert f"default/{SERVICE}" in c.kubectl("get", "apiservice", "v1beta1.external.metrics.k8s.io").stdout

    c.kubectl("apply", "-f", "-", input=json.dumps(deployment("queue", 2)))
    c.kubectl("apply", "-f", "-", input=json.dumps(hpa("queue", {"type": "External", "external": {
        "metric": {"name": "queue_length"}, "target": {"type": "AverageValue", "averageValue": "5"}}}, lo=0)))
    wait_for(lambda: replicas(c, "queue") == 0, 60, "scaled to zero on the adapter's 0")
    assert condition(c, "queue", "ScaledToZero")[:2] == ("True", "ScaledToZero")

    adapter.set({"external": {"queue_length": "12"}})
    raw = json.loads(c.kubectl("get", "--raw", QUEUE).stdout)
    assert raw["items"][0]["value"] == "12" and raw["items"][0]["timestamp"] == "2026-01-01T00:00:00Z"  # the adapter's
    wait_for(lambda: replicas(c, "queue") == 3, 60, "woken to ceil(12 / 5) = 3 replicas")
    assert any(r["path"] == QUEUE for r in adapter.requests())

    adapter.stop()  # its pod died: its endpoint goes unready
    c.kubectl("apply", "-f", "-", input=json.dumps(endpoints(adapter, ready=False)))
    wait_for(lambda: (available(c, "v1beta1.external.metrics.k8s.io") or ("",))[0] == "False", 30, "Available False")
    cause = ("unable to get external metric default/queue_length/nil: unable to fetch metrics from external metrics "
             "API: the server is currently unable to handle the request (get queue_length.external.metrics.k8s.io)")
    got = wait_for(lambda: (s := condition(c, "queue", "ScalingActive")) and s[1] == "FailedGetExternalMetric" and s,
                   30, "ScalingActive FailedGetExternalMetric")
    assert got == ("False", "FailedGetExternalMetric", f"the HPA was unable to compute the replica count: {cause}")
    events = c.kubectl_json("get", "events", "--field-selector", "involvedObject.name=queue")["items"]
    assert cause in {e["message"] for e in events if e["reason"] == "FailedGetExternalMetric"}
    assert replicas(c, "queue") == 3  # kept while the metric cannot be read

    # its APIService deleted, nothing serves the group (upstream has no built-in adapter): a 404
    c.kubectl("delete", "apiservice", "v1beta1.external.metrics.k8s.io")
    gone = ("unable to get external metric default/queue_length/nil: unable to fetch metrics from external metrics "
            "API: the server could not find the requested resource")
    wait_for(lambda: (s := condition(c, "queue", "ScalingActive")) and gone in s[2], 30, "the metric not found")
    # the built-in adapter's local APIService again (as `up` makes it on start): its 30
    local = apiservice("external.metrics.k8s.io", "v1beta1")
    del local["spec"]["service"], local["spec"]["insecureSkipTLSVerify"]
    c.kubectl("apply", "-f", "-", input=json.dumps(local))
    wait_for(lambda: replicas(c, "queue") == 6, 60, "scaled on the built-in adapter's value again")


def test_a_pods_metric_from_a_custom_metrics_adapter(cluster, adapter):
    c = cluster
    c.kubectl("apply", "-f", "-", input=json.dumps(deployment("web", 2)))
    pods = wait_for(lambda: (names := [p["metadata"]["name"] for p in c.kubectl_json(
        "get", "pods", "-l", "app=web")["items"] if (p.get("status") or {}).get("phase") == "Running"]) and
        len(names) == 2 and names, 60, "web's two pods running")
    adapter.set({"custom": {"requests_per_second": {p: "30" for p in pods}}})
    register(c, "custom.metrics.k8s.io", "v1beta1")  # beside the built-in adapter's v1beta2
    group = json.loads(c.kubectl("get", "--raw", "/apis/custom.metrics.k8s.io").stdout)
    assert group["preferredVersion"]["version"] == "v1beta1"
    raw = json.loads(c.kubectl("get", "--raw", "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/"
                               "requests_per_second").stdout)
    assert sorted((i["describedObject"]["name"], i["value"]) for i in raw["items"]) == sorted((p, "30") for p in pods)

    c.kubectl("apply", "-f", "-", input=json.dumps(hpa("web", {"type": "Pods", "pods": {
        "metric": {"name": "requests_per_second"}, "target": {"type": "AverageValue", "averageValue": "10"}}}, lo=1)))
    wait_for(lambda: replicas(c, "web") == 6, 60, "scaled up on the adapter's values")
    first = wait_for(lambda: [e["message"] for e in c.kubectl_json("get", "events", "--field-selector",
                                                                   "involvedObject.name=web")["items"]
                              if e["reason"] == "SuccessfulRescale"], 30, "the SuccessfulRescale Event")
    # 30 per pod against 10: ratio 3 on the two pods, within the default scaleUp policies (+4 pods or +100%)
    assert first[0] == "New size: 6; reason: pods metric requests_per_second above target"
    # the HPA found v1beta1 preferred in the group's discovery and read the adapter there
    assert any(r["path"] == "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/requests_per_second"
               and r["query"].get("labelSelector") == "app=web" and r["user"] != "kubernetes-super-admin"
               for r in adapter.requests())
    c.kubectl("delete", "apiservice", "v1beta1.custom.metrics.k8s.io")
