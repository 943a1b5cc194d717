"""HPA scale to zero through kubectl against `nanokube up`, with a 1s sync
period (NANOKUBE_HPA_SYNC_PERIOD) so the test runs in seconds."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import running_cluster, wait_for

DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer", "namespace": "default"},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "infer"}},
                   "template": {"metadata": {"labels": {"app": "infer"}},
                                "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}


def hpa(metrics, name="infer"):
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "infer"},
                     "minReplicas": 0, "maxReplicas": 5, "metrics": metrics,
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}


QUEUE = [{"type": "External", "external": {"metric": {"name": "queue_length"},
                                           "target": {"type": "AverageValue", "averageValue": "5"}}}]


@pytest.fixture(scope="module")
def hpa_cluster(store_url):
    with running_cluster("hpa", env={"NANOKUBE_HPA_SYNC_PERIOD": "1"}, store=store_url) as c:
        yield c


def condition(c, typ):
    h = c.kubectl_json("get", "hpa", "infer")
    return next(((x["status"], x["reason"]) for x in (h.get("status") or {}).get("conditions") or [] if x["type"] == typ), None)


def test_scale_to_zero_and_wake_on_an_external_metric(hpa_cluster):
    c = hpa_cluster
    c.kubectl("create", "configmap", "nanokube-external-metrics", "--from-literal=queue_length=0")
    c.kubectl("apply", "-f", "-", input=json.dumps(DEPLOY))
    c.kubectl("apply", "-f", "-", input=json.dumps(hpa(QUEUE)))
    replicas = lambda: c.kubectl_json("get", "deployment", "infer")["spec"]["replicas"]
    wait_for(lambda: replicas() == 0)
    assert wait_for(lambda: condition(c, "ScaledToZero") == ("True", "ScaledToZero"))
    # the controller's recorder writes its Events from a queue, maybe after the status the test saw
    wait_for(lambda: any(e["reason"] == "SuccessfulRescale" and e["message"].startswith("New size: 0;") for e in
                         c.kubectl_json("get", "events", "--field-selector", "involvedObject.name=infer")["items"]),
             30, "the SuccessfulRescale to 0 Event")

    raw = json.loads(c.kubectl("get", "--raw", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length").stdout)
    assert raw["kind"] == "ExternalMetricValueList" and raw["items"][0]["value"] == "0"

    c.kubectl("patch", "configmap", "nanokube-external-metrics", "-p", '{"data":{"queue_length":"12"}}')
    assert wait_for(lambda: replicas() >= 1)
    assert wait_for(lambda: condition(c, "ScaledToZero") == ("False", "NotScaledToZero"))


def test_min_replicas_zero_needs_an_object_or_external_metric(hpa_cluster):
    cpu = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]
    r = hpa_cluster.kubectl("apply", "-f", "-", input=json.dumps(hpa(cpu, name="cpu-only")), check=False)
    assert r.returncode != 0
    assert "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas" in r.stderr


def test_metrics_groups_are_discoverable(hpa_cluster):
    """(On the module's cluster: its short HPA sync period changes nothing discovery serves.)"""
    out = hpa_cluster.kubectl("api-versions").stdout.split()
    assert "external.metrics.k8s.io/v1beta1" in out and "metrics.k8s.io/v1beta1" in out
    resources = hpa_cluster.kubectl("api-resources", "--api-group=metrics.k8s.io").stdout
    assert "pods" in resources and "PodMetrics" in resources


def _samples(c, prefix):
    body = c.kubectl("get", "--raw", "/metrics").stdout
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for fam in text_string_to_metric_families(body)
            for s in fam.samples if s.name.startswith(prefix)}


def test_the_controller_counts_its_reconciles_and_metric_computations(hpa_cluster):
    """The horizontal_pod_autoscaler_controller_* metrics on `up`'s /metrics: a metric that cannot be read
    is an internal error that scales nothing, the pass that scales up is counted as scale_up, and the
    HPA's desired replicas and the number of HPAs are gauges."""
    c, ns, prefix = hpa_cluster, "metered", "horizontal_pod_autoscaler_controller_"
    c.kubectl("create", "namespace", ns)
    deploy = {**DEPLOY, "metadata": {"name": "infer", "namespace": ns}, "spec": {**DEPLOY["spec"], "replicas": 1}}
    c.kubectl("apply", "-f", "-", input=json.dumps(deploy))
    metered = hpa([{"type": "External", "external": {"metric": {"name": "tokens"}, "target": {"type": "Value", "value": "1"}}}])
    metered["metadata"]["namespace"], metered["spec"]["minReplicas"], metered["spec"]["maxReplicas"] = ns, 1, 3
    c.kubectl("apply", "-f", "-", input=json.dumps(metered))
    failed = (f"{prefix}metric_computation_total", (("action", "none"), ("error", "internal"), ("metric_type", "External")))
    wait_for(lambda: _samples(c, prefix).get(failed, 0) >= 1, 30, "a failed External computation counted")
    # (the pass is counted once its status is written, after the computation)
    failed_pass = (f"{prefix}reconciliations_total", (("action", "none"), ("error", "internal")))
    wait_for(lambda: _samples(c, prefix).get(failed_pass, 0) >= 1, 30, "the failed pass counted")
    c.kubectl("create", "configmap", "nanokube-external-metrics", "-n", ns, "--from-literal=tokens=3")
    desired = (f"{prefix}desired_replicas", (("hpa_name", "infer"), ("namespace", ns)))
    scaled = (f"{prefix}reconciliations_total", (("action", "scale_up"), ("error", "none")))
    wait_for(lambda: _samples(c, prefix).get(desired) == 3 and _samples(c, prefix).get(scaled), 60,
             "the HPA's desired replicas at 3, its scale-up counted")
    got = _samples(c, prefix)
    assert got[(f"{prefix}reconciliation_duration_seconds_count", (("action", "scale_up"), ("error", "none")))] >= 1
    assert got[(f"{prefix}metric_computation_total", (("action", "scale_up"), ("error", "none"), ("metric_type", "External")))] >= 1
    hpas = (f"{prefix}num_horizontal_pod_autoscalers", ())
    assert got[hpas] >= 1
    # a deleted HPA leaves the count, but its desired_replicas series stays: upstream's monitor deletes none
    c.kubectl("delete", "hpa", "infer", "-n", ns)
    wait_for(lambda: _samples(c, prefix)[hpas] == got[hpas] - 1, 30, "the deleted HPA no longer counted")
    assert _samples(c, prefix)[desired] == 3
    c.kubectl("delete", "namespace", ns, "--wait=false")


def test_memory_usage_reads_in_binary_si(hpa_cluster):
    """buildQuantity: a memory metric's current averageValue is written as metrics-server writes memory
    (544Mi, not 570425344), so `get hpa` and `describe hpa` compare it with a target in the same units."""
    c, ns = hpa_cluster, "memory"
    c.kubectl("create", "namespace", ns)
    template = {"metadata": {"labels": {"app": "infer"}, "annotations": {"sim.nanokube.io/memory-usage": "544Mi"}},
                "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"memory": "1Gi"}}}]}}
    deploy = {**DEPLOY, "metadata": {"name": "infer", "namespace": ns},
              "spec": {**DEPLOY["spec"], "replicas": 1, "template": template}}
    c.kubectl("apply", "-f", "-", input=json.dumps(deploy))
    memory = hpa([{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}},
                  {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 90}}}])
    memory["metadata"]["namespace"], memory["spec"]["minReplicas"] = ns, 1
    c.kubectl("apply", "-f", "-", input=json.dumps(memory))

    def current():
        return [m.get("resource", {}).get("current") for m in
                (c.kubectl_json("get", "hpa", "infer", "-n", ns).get("status") or {}).get("currentMetrics") or []]
    got = wait_for(lambda: (m := current()) and all(m) and m, 60, "both memory metrics read")
    assert got == [{"averageValue": "544Mi"}, {"averageUtilization": 53, "averageValue": "544Mi"}]
    assert "544Mi/1Gi" in c.kubectl("get", "hpa", "infer", "-n", ns).stdout
    c.kubectl("delete", "namespace", ns, "--wait=false")
