"""The proxy subresources as a user reaches them: `kubectl get --raw` and
`kubectl proxy` to a simulated pod's port directly and through its
Service, the Python client's connect_* calls, upstream's errors as kubectl
prints them, RBAC on services/proxy, a node's kubelet endpoints, and a real
HTTP server in a `--runtime process` pod (its links rewritten under the proxy
path)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import KUBECTL, PROCESS_RUNTIME, http_get, process_cluster, running_cluster, wait_for

APP = [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
     "spec": {"initContainers": [{"name": "fetch", "image": "busybox", "command": ["true"],
                                  "ports": [{"containerPort": 9999}]}],  # (closed once it finished)
              "containers": [{"name": "web", "image": "nginx", "ports": [{"name": "http", "containerPort": 8000}]}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}},
]
ANSWER = "nanokube simulated pod default/web port 8000\n"


@pytest.fixture(scope="module")
def c(store_url):
    with running_cluster("proxy", store=store_url) as cluster:
        cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": APP}))
        wait_for(lambda: any(ep.get("conditions", {}).get("ready") for s in cluster.kubectl_json(
            "get", "endpointslices", "-l", "kubernetes.io/service-name=web")["items"] for ep in s.get("endpoints") or []),
            60, "the web Service's ready endpoint")
        yield cluster


def test_get_raw_reaches_the_pod_and_the_service(c):
    for path in ("/api/v1/namespaces/default/pods/web/proxy/", "/api/v1/namespaces/default/pods/web:8000/proxy/x",
                 "/api/v1/namespaces/default/services/web:http/proxy/", "/api/v1/namespaces/default/services/web:80/proxy/a/b",
                 "/api/v1/namespaces/default/services/http:web:http/proxy/"):
        assert c.kubectl("get", "--raw", path).stdout == ANSWER, path


def test_kubectl_proxy_serves_the_service_path(c):
    p = subprocess.Popen([KUBECTL, "proxy", "--port=0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "KUBECONFIG": c.kubeconfig})
    try:
        port = re.search(r"Starting to serve on 127\.0\.0\.1:(\d+)", p.stdout.readline()).group(1)
        base = f"http://127.0.0.1:{port}/api/v1/namespaces/default"
        assert http_get(f"{base}/services/web:http/proxy/") == ANSWER
        assert http_get(f"{base}/pods/web/proxy/index.html") == ANSWER
        status = json.loads(http_get(f"{base}/services/web:81/proxy/"))
        assert (status["code"], status["reason"], status["message"]) == (
            503, "ServiceUnavailable", 'no service port 81 found for service "web"')
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_errors_as_kubectl_prints_them(c):
    """nginx's own port answers though the pod does not declare it; one nothing listens on is
    closed, as is one only its finished init container declares."""
    ip = c.kubectl_json("get", "pod", "web")["status"]["podIP"]
    r = c.kubectl("get", "--raw", "/api/v1/namespaces/default/pods/web:80/proxy/")
    assert r.stdout == "nanokube simulated pod default/web port 80\n"
    for port in (9000, 9999):
        r = c.kubectl("get", "--raw", f"/api/v1/namespaces/default/pods/web:{port}/proxy/", check=False)
        assert r.returncode == 1
        assert (f"Error from server (ServiceUnavailable): error trying to reach service: dial tcp {ip}:{port}: "
                "connect: connection refused") in r.stderr
    r = c.kubectl("get", "--raw", "/api/v1/namespaces/default/services/web:nope/proxy/", check=False)
    assert 'Error from server (ServiceUnavailable): no endpoints available for service "web:nope"' in r.stderr
    r = c.kubectl("get", "--raw", "/api/v1/namespaces/default/services/gone/proxy/", check=False)
    assert 'Error from server (NotFound): services "gone" not found' in r.stderr
    r = c.kubectl("get", "--raw", "/api/v1/namespaces/default/pods/ftp:web:80/proxy/", check=False)
    assert 'Error from server (BadRequest): invalid pod request "ftp:web:80"' in r.stderr


def test_the_python_client_connects(c):
    from kubernetes import client

    api = client.CoreV1Api(c.client())
    assert api.connect_get_namespaced_service_proxy_with_path("web:http", "default", "status") == ANSWER
    assert api.connect_get_namespaced_pod_proxy("web", "default") == ANSWER
    assert api.connect_post_namespaced_pod_proxy_with_path("web:8000", "default", "submit") == ANSWER
    # a POST through the proxy is a create of pods/proxy, audited as the writes are (the audit
    # log is written after the response, so it is read until the event is there)

    def audited():
        return [(e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"], e["responseStatus"]["code"])
                for e in c.audit_events() if (e.get("objectRef") or {}).get("subresource") == "proxy"]
    wait_for(audited, 30, "the proxy request's audit event")
    assert audited() == [("create", "pods", "web:8000", 200)]


def test_rbac_on_the_proxy_subresource(c):
    c.kubectl("create", "rolebinding", "jane-view", "--clusterrole=view", "--user=jane")
    path = "/api/v1/namespaces/default/services/web:http/proxy/"
    r = c.kubectl("get", "--raw", path, "--as=jane", check=False)
    assert ('Error from server (Forbidden): services "web:http" is forbidden: User "jane" cannot get resource '
            '"services/proxy" in API group "" in the namespace "default"') in r.stderr
    assert c.kubectl("auth", "can-i", "get", "services", "--subresource=proxy", "--as=jane", check=False).stdout.strip() == "no"
    c.kubectl("create", "rolebinding", "jane-edit", "--clusterrole=edit", "--user=jane")
    wait_for(lambda: c.kubectl("get", "--raw", path, "--as=jane", check=False).stdout == ANSWER, 30,
             "jane reaches the Service once bound to edit")
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    as_jane = c.client()
    as_jane.set_default_header("Impersonate-User", "jane")
    with pytest.raises(ApiException) as e:  # OPTIONS has no verb: edit's verbs do not grant it
        client.CoreV1Api(as_jane).connect_options_namespaced_service_proxy("web:http", "default")
    assert e.value.status == 403 and json.loads(e.value.body)["message"] == (
        'services "web:http" is forbidden: User "jane" cannot  resource "services/proxy" in API group "" '
        'in the namespace "default"')


def test_nodes_proxy_reaches_the_kubelet_endpoints(c):
    node = c.kubectl_json("get", "pod", "web")["spec"]["nodeName"]
    base = f"/api/v1/nodes/{node}/proxy"
    assert c.kubectl("get", "--raw", f"{base}/healthz").stdout == "ok"
    pods = json.loads(c.kubectl("get", "--raw", f"{base}/pods").stdout)
    assert pods["kind"] == "PodList" and "web" in [p["metadata"]["name"] for p in pods["items"]]
    summary = json.loads(c.kubectl("get", "--raw", f"{base}/stats/summary").stdout)
    assert summary["node"]["nodeName"] == node
    web = next(p for p in summary["pods"] if p["podRef"]["name"] == "web")
    assert web["containers"][0]["name"] == "web" and web["cpu"]["usageNanoCores"] == 1_000_000, "the idle 1m"
    assert summary["node"]["cpu"]["usageNanoCores"] == 101_000_000, "the pod plus the system's 100m"
    metrics = c.kubectl("get", "--raw", f"{base}/metrics/resource").stdout
    assert "# TYPE container_cpu_usage_seconds_total counter" in metrics
    assert 'container_memory_working_set_bytes{container="web",namespace="default",pod="web"} ' in metrics
    assert "\nresource_scrape_error 0\n" in metrics
    web_pod = c.kubectl_json("get", "pod", "web")
    cid = web_pod["status"]["containerStatuses"][0]["containerID"].partition("://")[2]
    cadvisor = c.kubectl("get", "--raw", f"{base}/metrics/cadvisor").stdout
    assert (f'container_cpu_usage_seconds_total{{container="web",cpu="total",id="/kubepods/pod'
            f'{web_pod["metadata"]["uid"]}/{cid}",image="docker.io/library/nginx:latest",name="{cid}",namespace="default",pod="web"}} ') \
        in cadvisor
    assert 'container_memory_working_set_bytes{container="",id="/",image="",name="",namespace="",pod=""} ' in cadvisor
    assert re.search(r'\nmachine_cpu_cores\{boot_id="[^"]+",machine_id="\w+",system_uuid="[^"]+"\} \d', cadvisor)
    kubelet = c.kubectl("get", "--raw", f"{base}/metrics").stdout
    assert f'kubelet_node_name{{node="{node}"}} 1' in kubelet and "\nkubelet_running_pods 1\n" in kubelet
    # parsed as Prometheus would: the feature gates and the process, every component's; a simulated
    # kubelet's process is `up`'s, the API server's too
    scraped = {f.name: f.samples for f in text_string_to_metric_families(kubelet)}
    served = {f.name: f.samples for f in text_string_to_metric_families(c.kubectl("get", "--raw", "/metrics").stdout)}
    gates = {(s.labels["name"], s.labels["stage"]): s.value for s in scraped["kubernetes_feature_enabled"]}
    assert gates[("DynamicResourceAllocation", "")] == 1 and gates[("AllAlpha", "ALPHA")] == 0
    assert gates == {(s.labels["name"], s.labels["stage"]): s.value for s in served["kubernetes_feature_enabled"]}
    assert scraped["process_start_time_seconds"] == served["process_start_time_seconds"]
    assert scraped["process_resident_memory_bytes"][0].value > 0 and scraped["process_open_fds"][0].value > 0
    assert scraped["process_cpu_seconds"][0].name == "process_cpu_seconds_total"
    logs = c.kubectl("get", "--raw", f"{base}/containerLogs/default/web/web").stdout
    assert logs == c.kubectl("logs", "web").stdout and "container web started" in logs
    r = c.kubectl("get", "--raw", f"{base}/containerLogs/default/web/nope", check=False)
    assert r.returncode == 1 and "(NotFound)" in r.stderr
    config = json.loads(c.kubectl("get", "--raw", f"{base}/configz").stdout)["kubeletconfig"]
    assert (config["port"], config["nodeLeaseDurationSeconds"], config["maxPods"]) == (10250, 40, 110)
    r = c.kubectl("get", "--raw", f"{base}/nope", check=False)
    assert r.returncode == 1 and "Error from server (NotFound)" in r.stderr, "the kubelet's 404, not a Status"
    # the kubelet's address is the Node's first of --kubelet-preferred-address-types (Hostname first)
    host = next(a["address"] for a in c.kubectl_json("get", "node", node)["status"]["addresses"]
                if a["type"] == "Hostname")
    r = c.kubectl("get", "--raw", f"/api/v1/nodes/{node}:9100/proxy/metrics", check=False)
    assert f"error trying to reach service: dial tcp {host}:9100: connect: connection refused" in r.stderr


SERVER = """
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ('<a href="/docs/">docs</a> ' + self.path + ' ' + self.headers.get("X-Forwarded-Uri", "")).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", 8080), H).serve_forever()
"""


@PROCESS_RUNTIME
def test_a_real_server_in_a_process_pod_answers_through_both_proxies(store_url):
    app = [{**APP[0], "spec": {"containers": [{
        "name": "web", "image": "python:3.11", "command": ["python3", "-c", SERVER],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}}]}}, APP[1]]
    with process_cluster(store_url, "proxy-process", ("--cluster", "examples/clusters/process-3cpu.yaml")) as pc:
        pc.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": app}))
        wait_for(lambda: any(ep.get("conditions", {}).get("ready") for s in pc.kubectl_json(
            "get", "endpointslices", "-l", "kubernetes.io/service-name=web")["items"] for ep in s.get("endpoints") or []),
            90, "the web Service's ready endpoint")
        for base in ("/api/v1/namespaces/default/services/web:http/proxy",
                     "/api/v1/namespaces/default/pods/web/proxy"):
            out = pc.kubectl("get", "--raw", f"{base}/some/page?q=1").stdout
            assert out == f'<a href="{base}/docs/">docs</a> /some/page?q=1 {base}/some/page', out
