"""The Prometheus metrics provider end to end: a throwaway `prometheus`
scrapes a tiny exporter this test runs, `nanokube up --metrics-provider
prometheus=URL` serves the series as an external metric, and an HPA scales a
Deployment on it - up, to zero, awake again, and not at all once Prometheus
is gone. Needs the `prometheus` binary (Debian: `apt-get install -y prometheus`)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nanokube.metrics.prometheus import PrometheusMetrics
from nanokube.metrics.rules import load_rules
from nanokube.registry.base import all_resources
from tests.e2e.conftest import start_cluster

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="SKIPPED LOUDLY: no `prometheus` binary on PATH, so the Prometheus metrics provider is not tested "
           "end to end (install it: apt-get install -y prometheus)")

DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "worker", "namespace": "default"},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "worker"}},
                   "template": {"metadata": {"labels": {"app": "worker"}},
                                "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}
HPA = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
       "metadata": {"name": "worker", "namespace": "default"},
       "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "worker"},
                "minReplicas": 0, "maxReplicas": 5,
                "metrics": [{"type": "External", "external": {
                    "metric": {"name": "queue_length", "selector": {"matchLabels": {"queue": "jobs"}}},
                    "target": {"type": "AverageValue", "averageValue": "5"}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError("condition never held")


class Exporter:
    """Serves `queue_length{queue="jobs"} VALUE` in the text exposition format."""

    def __init__(self):
        self.value = "12"
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = (f'# TYPE queue_length gauge\nqueue_length{{queue="jobs"}} {exporter.value}\n'
                        'queue_length{queue="mail"} 1\n').encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def query(url: str, promql: str) -> list:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=5) as r:
            return json.load(r)["data"]["result"]
    except OSError:
        return []


@pytest.fixture(scope="module")
def env(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-prom-"))
    exporter = Exporter()
    port = free_port()
    (d / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs: [{{job_name: exporter, static_configs: [{{targets: ['127.0.0.1:{exporter.port}']}}]}}]\n")
    with open(d / "prometheus.log", "wb") as log:
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={d / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={d / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    cluster = None
    try:
        wait_for(lambda: query(url, 'queue_length{queue="jobs"}'))
        os.environ["NANOKUBE_HPA_SYNC_PERIOD"] = "1"
        try:
            cluster = start_cluster(d / "cluster", store_url, ("--metrics-provider", f"prometheus={url}"))
        finally:
            del os.environ["NANOKUBE_HPA_SYNC_PERIOD"]
        yield cluster, exporter, prom, url
    finally:
        if cluster is not None:
            cluster.stop()
        if prom.poll() is None:
            prom.terminate()
            prom.wait(timeout=20)
        exporter.close()
        shutil.rmtree(d, ignore_errors=True)


def test_external_metrics_api_answers_from_prometheus(env):
    c, _, _, _ = env
    path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length"
    got = json.loads(c.kubectl("get", "--raw", path).stdout)
    assert got["kind"] == "ExternalMetricValueList"
    assert sorted((i["metricLabels"]["queue"], i["value"]) for i in got["items"]) == [("jobs", "12"), ("mail", "1")]
    assert all(i["metricName"] == "queue_length" and i["metricLabels"]["job"] == "exporter" for i in got["items"])
    one = json.loads(c.kubectl("get", "--raw", path + "?labelSelector=queue%3Djobs").stdout)
    assert [i["metricLabels"]["queue"] for i in one["items"]] == ["jobs"]
    missing = c.kubectl("get", "--raw", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/no_such_metric",
                        check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr


RULES = """
rules:
- seriesQuery: 'queue_length{queue!=""}'
  name: {as: "queued_${0}"}
  resources: {overrides: {queue: {resource: service}, job: {resource: namespace}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__=~"^queue_.*$",queue!=""}'
  name: {matches: "^queue_(.*)$", as: "backlog_$1"}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
"""


async def test_rendered_promql_is_what_prometheus_accepts(env):
    """The queries rules render (discovery, escaped regex alternations,
    namespace and selector matchers) against the real PromQL engine."""
    _, _, _, url = env
    src = PrometheusMetrics(url, load_rules(RULES))
    services = next(r for r in all_resources() if r.plural == "services" and not r.group)
    assert await src.object_values("exporter", services, ["jobs", "mail", "a.b|c"], "queued_queue_length") == \
        {"jobs": 12_000, "mail": 1000}
    assert await src.object_values("elsewhere", services, ["jobs"], "queued_queue_length") == {}
    got = await src.external_metric("default", "backlog_length", "queue notin (mail),queue,!absent")
    assert [(s.labels, s.value) for s in got] == [({"queue": "jobs"}, 12_000)]
    assert await src.external_metric("default", "queue_length") is None  # not a name the rules expose


def test_hpa_scales_on_a_prometheus_metric_and_not_once_prometheus_is_gone(env):
    """Last in the module: it stops Prometheus."""
    c, exporter, prom, url = env
    replicas = lambda: c.kubectl_json("get", "deployment", "worker")["spec"]["replicas"]

    def active():
        h = c.kubectl_json("get", "hpa", "worker")
        return next(((x["status"], x["reason"]) for x in (h.get("status") or {}).get("conditions") or []
                     if x["type"] == "ScalingActive"), None)

    c.kubectl("apply", "-f", "-", input=json.dumps(DEPLOY))
    c.kubectl("apply", "-f", "-", input=json.dumps(HPA))
    wait_for(lambda: replicas() == 3)  # 12 queued, 5 per pod
    metrics = lambda: c.kubectl_json("get", "hpa", "worker")["status"].get("currentMetrics") or []
    assert wait_for(lambda: [m["external"]["current"] for m in metrics()] == [{"averageValue": "4"}])

    exporter.value = "0"
    wait_for(lambda: replicas() == 0)
    exporter.value = "17"
    wait_for(lambda: replicas() == 4)
    assert query(url, 'queue_length{queue="jobs"}')[0]["value"][1] == "17"

    prom.terminate()
    prom.wait(timeout=20)
    exporter.value = "0"
    assert wait_for(lambda: active() == ("False", "FailedGetExternalMetric"))
    assert replicas() == 4
    # the controller's recorder writes its Events from a queue, maybe after the condition
    assert wait_for(lambda: any("unable to fetch metrics from Prometheus" in e["message"] for e in c.kubectl_json(
        "get", "events", "--field-selector", "involvedObject.name=worker")["items"]), 30)
