"""Every component's /metrics against upstream's list of STABLE and BETA metrics
(tests/e2e/stable_metrics.py): after a little load (a Deployment, a pod no node fits, a
watch, a request at a Limited priority level), each family is served under upstream's name
and type, with its label names and bucket bounds; and a real Prometheus (scripts/prometheus.sh
installs it) scraping `up` answers recording rules and queries as upstream's dashboards write them."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from .conftest import wait_for
from .stable_metrics import STABLE

PROMETHEUS = shutil.which("prometheus")

BIG = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "too-big", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "5000"}}}]}}


def families(text: str) -> dict[str, dict]:
    """The text format's families: type, the label names their series carry (`le` apart), and
    the `le` bounds of a histogram's first series, in order."""
    out: dict[str, dict] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            out[name] = {"type": kind, "labels": set(), "le": None, "series": 0}
        elif line and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? ", line)
            name = m.group(1)
            fam = out.get(name) or out.get(re.sub(r"_(bucket|sum|count|total)$", "", name))
            if fam is None:
                continue
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            le = labels.pop("le", None)
            fam["labels"] |= labels.keys()
            fam["series"] += 1
            if le is not None:
                key = tuple(sorted(labels.items()))
                if fam.get("first", key) == key:
                    fam["first"], fam["le"] = key, (fam["le"] or []) + [le]
    return out


@pytest.fixture(scope="module")
def loaded(cluster):
    """The cluster after the load: a Deployment's pods running, one pod unschedulable, a watch."""
    cluster.kubectl("create", "deployment", "web", "--image=pause", "--replicas=2")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(BIG))
    cluster.kubectl("get", "--raw", "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1")
    cluster.kubectl("--as=alice", "get", "pods", check=False)  # global-default, a Limited level
    wait_for(lambda: cluster.kubectl("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}").stdout == "2",
             60, "the Deployment's pods")
    wait_for(lambda: 'scheduler_pending_pods{queue="unschedulable"} 1' in cluster.kubectl("get", "--raw", "/metrics").stdout,
             60, "the unschedulable pod")
    return cluster


def test_stable_and_beta_metrics_match_upstreams_list(loaded):
    node = loaded.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    scraped = {path: families(loaded.kubectl("get", "--raw", path.format(node=node)).stdout)
               for path in {path for path, *_ in STABLE.values()}}
    for name, (path, kind, labels, bounds) in STABLE.items():
        fam = scraped[path].get(name)
        assert fam is not None and fam["series"], f"{name}: not served at {path}"
        assert (name, fam["type"]) == (name, kind)
        assert (name, sorted(fam["labels"])) == (name, sorted(labels.split()))
        if bounds is not None:
            assert (name, fam["le"]) == (name, [f"{b:g}" for b in bounds] + ["+Inf"])


#: recording rules as kube-prometheus' kubernetes-mixin writes them (its apiserver and scheduler groups)
RULES = """groups:
- name: mixin
  rules:
  - record: code_verb:apiserver_request_total:increase1m
    expr: sum by (code, verb) (increase(apiserver_request_total{job="apiserver"}[1m]))
  - record: cluster_quantile:scheduler_scheduling_attempt_duration_seconds:histogram_quantile
    expr: histogram_quantile(0.99, sum(rate(scheduler_scheduling_attempt_duration_seconds_bucket{job="apiserver"}[1m]))
      without (instance, profile))
    labels: {quantile: "0.99"}
"""

#: dashboard queries (the mixin's API server, scheduler and controller-manager panels, the kubelet's resource metrics)
QUERIES = (
    'code_verb:apiserver_request_total:increase1m{verb="POST"}',
    'cluster_quantile:scheduler_scheduling_attempt_duration_seconds:histogram_quantile{result="scheduled"}',
    'sum by (verb, code) (rate(apiserver_request_total{job="apiserver"}[1m]))',
    'histogram_quantile(0.99, sum by (verb, le) (rate(apiserver_request_duration_seconds_bucket{verb!~"WATCH|CONNECT"}[1m])))',
    'sum by (name) (rate(workqueue_adds_total{job="apiserver"}[1m]))',
    'sum by (queue) (scheduler_pending_pods)',
    'sum by (priority_level) (apiserver_flowcontrol_nominal_limit_seats)',
    'sum by (namespace) (container_memory_working_set_bytes{job="kubelet", container!=""})',
)


def _query(url: str, promql: str) -> list:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=5) as r:
            return [s for s in json.load(r)["data"]["result"] if s["value"][1] not in ("NaN", "+Inf")]
    except OSError:
        return []


@pytest.mark.skipif(PROMETHEUS is None, reason="SKIPPED LOUDLY: no `prometheus` binary on PATH (scripts/prometheus.sh)")
def test_prometheus_answers_the_dashboards_queries(loaded):
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-stable-"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    pki = loaded.data_dir / "pki"
    tls = f"{{ca_file: '{pki / 'ca.crt'}', cert_file: '{pki / 'admin.crt'}', key_file: '{pki / 'admin.key'}'}}"
    target = urllib.parse.urlsplit(loaded.url).netloc
    node = loaded.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    (d / "rules.yml").write_text(RULES)
    (d / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: ['{d / 'rules.yml'}']\n"
        "scrape_configs:\n"
        f"- {{job_name: apiserver, scheme: https, tls_config: {tls}, static_configs: [{{targets: ['{target}']}}]}}\n"
        f"- {{job_name: kubelet, scheme: https, tls_config: {tls}, metrics_path: /api/v1/nodes/{node}/proxy/metrics/resource,"
        f" static_configs: [{{targets: ['{target}']}}]}}\n")
    with open(d / "prometheus.log", "wb") as log:
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: len(_query(url, "up == 1")) == 2, 60, "both targets scraped")
        # attempts and writes between two scrapes, for the rates
        loaded.kubectl("scale", "deployment", "web", "--replicas=4")
        answers = {promql: wait_for(lambda: _query(url, promql), 60, promql) for promql in QUERIES}
    finally:
        prom.terminate()
        prom.wait(timeout=20)
        shutil.rmtree(d, ignore_errors=True)
    for promql, samples in answers.items():  # every panel has a series, each a finite number
        assert samples and all(float(s["value"][1]) >= 0 for s in samples), (promql, samples)
