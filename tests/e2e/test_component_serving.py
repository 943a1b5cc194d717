"""The secure ports of `nanokube scheduler` and `nanokube controller-manager`
as processes beside `up --scheduler=none --controllers=''`: HTTPS with a
self-signed localhost certificate, /healthz open to anyone, /metrics only to
a token the API server authenticates (TokenReview) and authorizes for `get`
on the path (SubjectAccessReview), with the metrics the component updates."""

from __future__ import annotations

import json
import re
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from ipaddress import IPv4Address
from pathlib import Path

import pytest
from cryptography import x509

from .conftest import running_cluster, wait_for
from .test_kube_proxy import free_port
from .test_stable_metrics import families

_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


@pytest.fixture(scope="module")
def bare():
    # (no node lifecycle controller runs to take the not-ready taint TaintNodesByCondition puts on new
    # nodes off them: the plugin is off, as in upstream's integration clusters)
    with running_cluster("components", ("--scheduler", "none", "--controllers", "",
                                        "--disable-admission-plugins", "TaintNodesByCondition")) as c:
        # no controller manager runs yet to make default's ServiceAccount, which ServiceAccount admission
        # requires of a pod
        c.kubectl("create", "serviceaccount", "default")
        c.kubectl("create", "serviceaccount", "scraper")
        c.kubectl("create", "serviceaccount", "nobody")
        c.kubectl("create", "clusterrole", "metrics-reader", "--verb=get", "--non-resource-url=/metrics",
                  "--non-resource-url=/metrics/slis", "--non-resource-url=/metrics/resources",
                  "--non-resource-url=/configz")
        c.kubectl("create", "clusterrolebinding", "scraper", "--clusterrole=metrics-reader",
                  "--serviceaccount=default:scraper")
        c.kubectl("create", "clusterrole", "metrics-resetter", "--verb=delete", "--non-resource-url=/metrics")
        c.kubectl("create", "clusterrolebinding", "resetter", "--clusterrole=metrics-resetter",
                  "--serviceaccount=default:scraper")
        c.kubectl("create", "serviceaccount", "monitor")
        c.kubectl("create", "clusterrolebinding", "monitor", "--clusterrole=system:monitoring",
                  "--serviceaccount=default:monitor")
        yield c


def component(c, command: str, port: int, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "nanokube.cli", command, "--kubeconfig", c.kubeconfig,
                                 "--secure-port", str(port), "--bind-address", "127.0.0.1",
                                 "--leader-elect-retry-period", "500ms"],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL)


def get(port: int, path: str, token: str = "", method: str = "GET", accept: str = "",
        scheme: str = "Bearer") -> tuple[int, str, dict]:
    headers = {"Authorization": f"{scheme} {token}"} if token else {}
    if accept:
        headers["Accept"] = accept
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, context=_INSECURE, timeout=10) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def reachable(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False


def counter(body: str, metric: str, /, **labels: str) -> float:
    """The sum of `metric`'s samples carrying every label in `labels`."""
    total = 0.0
    for line in body.splitlines():
        m = re.match(rf"{metric}{{(.*)}} (\S+)$", line)
        if m and all(f'{k}="{v}"' in m.group(1) for k, v in labels.items()):
            total += float(m.group(2))
    return total


def assert_metrics_guarded(c, port: int) -> str:
    """/metrics refuses the anonymous, an unknown token and an unauthorized one; returns what the scraper gets."""
    code, body, headers = get(port, "/metrics")
    assert code == 403 and headers["Cache-Control"] == "no-cache, private"
    assert json.loads(body)["message"] == 'forbidden: User "system:anonymous" cannot get path "/metrics"'
    code, body, _ = get(port, "/metrics", "not-a-token")
    assert code == 401 and json.loads(body)["reason"] == "Unauthorized"
    code, body, _ = get(port, "/metrics", c.kubectl("create", "token", "nobody").stdout.strip())
    assert code == 403
    assert json.loads(body)["message"] == \
        'forbidden: User "system:serviceaccount:default:nobody" cannot get path "/metrics"'
    scraper = c.kubectl("create", "token", "scraper").stdout.strip()
    assert get(port, "/metrics", scraper, scheme="bearer")[0] == 200  # the scheme in any case, as the Python client's
    code, body, headers = get(port, "/metrics", scraper)
    assert code == 200 and headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
    assert not re.search(r"^\w+_created[{ ]", body, re.M), "client_golang's text format has no _created series"
    return body


#: component-base's restclient buckets, the same for the request and the rate limiter latency
_REST_CLIENT = [f"{b:g}" for b in (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)] + ["+Inf"]


def assert_client_metrics(c, body: str, lease: str) -> None:
    """client-go's request metrics (component-base's restclient names, labels and buckets) and
    leaderelection's gauge, as the kubernetes-mixin's scheduler and controller-manager dashboards read them."""
    fams, host = families(body), urllib.parse.urlsplit(c.url).netloc
    for name, kind, labels in (("rest_client_requests_total", "counter", ["code", "host", "method"]),
                               ("rest_client_request_duration_seconds", "histogram", ["host", "verb"]),
                               ("rest_client_rate_limiter_duration_seconds", "histogram", ["host", "verb"]),
                               ("leader_election_master_status", "gauge", ["name"])):
        assert name in fams, f"{name}: not served"
        assert (name, fams[name]["type"], sorted(fams[name]["labels"])) == (name, kind, labels)
        if kind == "histogram":
            assert fams[name]["le"] == _REST_CLIENT
    assert counter(body, "leader_election_master_status", name=lease) == 1
    # the lease is read through the leader-election client's bucket
    assert counter(body, "rest_client_requests_total", code="200", method="GET", host=host) >= 1
    assert counter(body, "rest_client_request_duration_seconds_count", verb="GET", host=host) >= 1
    assert counter(body, "rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host) >= 1
    assert counter(body, "rest_client_requests_total", code="201", method="POST", host=host) >= 1


def assert_zpages(c, port: int, name: str, paths: list[str]) -> None:
    """/statusz and /flagz for the bootstrap system:monitoring role only: text by default, the
    structured v1beta1 kinds when asked for."""
    monitor = c.kubectl("create", "token", "monitor").stdout.strip()
    assert get(port, "/statusz")[0] == 403 and get(port, "/flagz")[0] == 403
    code, body, headers = get(port, "/statusz", monitor)
    assert code == 200 and headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.startswith(f"\n{name} statusz\nWarning: This endpoint is not meant to be machine parseable")
    code, body, _ = get(port, "/statusz", monitor, accept="application/json;v=v1beta1;g=config.k8s.io;as=Statusz")
    statusz = json.loads(body)
    assert code == 200 and statusz["metadata"] == {"name": name} and statusz["paths"] == paths
    assert statusz["binaryVersion"] == "1.37.0-nanokube" and statusz["uptimeSeconds"] >= 0
    assert get(port, "/statusz", monitor, accept="application/json")[0] == 406
    code, body, _ = get(port, "/flagz", monitor, accept="application/json;v=v1beta1;g=config.k8s.io;as=Flagz")
    flags = json.loads(body)["flags"]
    assert code == 200 and flags["secure-port"] == str(port) and flags["kubeconfig"] == c.kubeconfig
    assert flags["leader-elect-retry-period"] == "500ms" and flags["bind-address"] == "127.0.0.1"


def test_scheduler_secure_port(bare):
    c, port = bare, free_port()
    proc = component(c, "scheduler", port, c.data_dir / "sched-serving.log")
    try:
        wait_for(lambda: reachable(port), what="the scheduler's secure port")
        cert = x509.load_pem_x509_certificate(ssl.get_server_certificate(("127.0.0.1", port)).encode())
        cn = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert cn.startswith("localhost@") and IPv4Address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
        assert get(port, "/healthz") [:2] == (200, "ok")
        assert get(port, "/livez")[:2] == (200, "ok")

        c.kubectl("run", "placed", "--image=nginx")
        wait_for(lambda: c.kubectl("get", "pod", "placed", "-o", "jsonpath={.spec.nodeName}").stdout,
                 what="the pod bound")

        def agents_seen() -> dict:
            return {(e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", "")): e["userAgent"]
                    for e in c.audit_events() if e["userAgent"].startswith("kube-scheduler/")}
        # kube-scheduler's user agents: client-go's default, '/scheduler' for the binding, '/leader-election'
        # (its Scheduled Event is written from its broadcaster's queue, maybe after the binding)
        agents = wait_for(lambda: (a := agents_seen()).keys() >= {("create", "pods", "binding"),
                                                                  ("create", "events", "")} and a,
                          what="the binding and the Scheduled Event in the audit log")
        assert re.fullmatch(r"kube-scheduler/v1\.37\.0 \(\w+/\w+\) kubernetes/0000000/scheduler",
                            agents["create", "pods", "binding"]), agents
        # ... and its events client's: the configuration's own, no suffix
        assert re.fullmatch(r"kube-scheduler/v1\.37\.0 \(\w+/\w+\) kubernetes/0000000",
                            agents["create", "events", ""]), agents
        leases = [ua for (_, resource, _), ua in agents.items() if resource == "leases"]
        assert leases and all(ua.endswith("/leader-election") for ua in leases), agents
        code, body, _ = get(port, "/readyz?verbose")
        assert code == 200 and body == ("[+]leaderElection ok\n[+]shutdown ok\n[+]sched-handler-sync ok\n"
                                        "readyz check passed\n")
        assert get(port, "/healthz?verbose")[1] == "[+]leaderElection ok\nhealthz check passed\n"
        # a check's own path is not always allowed: it takes a SubjectAccessReview
        assert get(port, "/healthz/leaderElection")[0] == 403

        wait_for(lambda: counter(get(port, "/metrics", c.kubectl("create", "token", "scraper").stdout.strip())[1],
                                 "scheduler_schedule_attempts_total", result="scheduled") >= 1,
                 what="the attempt counted")
        body = assert_metrics_guarded(c, port)
        assert counter(body, "scheduler_schedule_attempts_total", result="scheduled",
                       profile="default-scheduler") >= 1
        assert_client_metrics(c, body, "kube-scheduler")  # its POSTs: the binding, the Event

        # component-base's slis: the checks /readyz and /healthz ran above, by endpoint
        token = c.kubectl("create", "token", "scraper").stdout.strip()
        assert get(port, "/metrics/slis")[0] == 403
        code, slis, _ = get(port, "/metrics/slis", token)
        assert code == 200
        assert counter(slis, "kubernetes_healthcheck", name="sched-handler-sync", type="readyz") == 1
        assert counter(slis, "kubernetes_healthchecks_total", name="leaderElection", type="healthz",
                       status="success") >= 2
        assert counter(slis, "kubernetes_healthchecks_total", name="shutdown", type="readyz", status="error") == 0

        # kube-scheduler's /metrics resets on DELETE, for whoever may delete that path
        code, body, _ = get(port, "/metrics", method="DELETE")
        assert code == 403 and json.loads(body)["message"] == \
            'forbidden: User "system:anonymous" cannot delete path "/metrics"'
        assert get(port, "/metrics", token, "DELETE")[:2] == (200, "metrics reset\n")
        after = get(port, "/metrics", token)[1]
        # no series left: client_golang's Gather leaves the family out, HELP and TYPE too
        assert "scheduler_schedule_attempts_total" not in after and "# TYPE scheduler_pending_pods gauge" in after

        # /configz: the effective KubeSchedulerConfiguration, as the internal type's Go encoding
        assert get(port, "/configz")[0] == 403
        code, body, headers = get(port, "/configz", token)
        assert code == 200 and headers["Content-Type"] == "application/json"
        cfg = json.loads(body)
        assert list(cfg) == ["componentconfig"]
        cfg = cfg["componentconfig"]
        assert (cfg["apiVersion"], cfg["Parallelism"], cfg["PodInitialBackoffSeconds"], cfg["PodMaxBackoffSeconds"]) \
            == ("kubescheduler.config.k8s.io/v1", 16, 1, 10)
        assert cfg["LeaderElection"] == {"LeaderElect": True, "LeaseDuration": "15s", "RenewDeadline": "10s",
                                         "RetryPeriod": "500ms", "ResourceLock": "leases",
                                         "ResourceName": "kube-scheduler", "ResourceNamespace": "kube-system"}
        assert cfg["ClientConnection"]["Kubeconfig"] == c.kubeconfig and cfg["ClientConnection"]["QPS"] == 50
        [profile] = cfg["Profiles"]
        assert profile["SchedulerName"] == "default-scheduler"
        multi = profile["Plugins"]["MultiPoint"]["Enabled"]
        assert {"Name": "TaintToleration", "Weight": 3} in multi and {"Name": "DefaultBinder", "Weight": 0} in multi
        assert profile["Plugins"]["Filter"] == {"Enabled": None, "Disabled": None}
        args = {pc["Name"]: pc["Args"] for pc in profile["PluginConfig"]}
        assert args["DefaultPreemption"] == {"MinCandidateNodesPercentage": 10, "MinCandidateNodesAbsolute": 100}
        assert args["NodeResourcesFit"]["ScoringStrategy"]["Type"] == "LeastAllocated"

        assert_zpages(c, port, "kube-scheduler", ["/configz", "/flagz", "/healthz", "/livez", "/metrics", "/readyz"])
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


def test_controller_manager_secure_port(bare):
    c, port = bare, free_port()
    proc = component(c, "controller-manager", port, c.data_dir / "kcm-serving.log")
    try:
        wait_for(lambda: reachable(port), what="the controller manager's secure port")
        c.kubectl("create", "job", "once", "--image=busybox")
        wait_for(lambda: c.kubectl("get", "pods", "-l", "job-name=once", "-o", "name").stdout, what="the job's pod")
        code, body, _ = get(port, "/healthz?verbose")
        assert code == 200 and body.startswith("[+]leaderElection ok\n") and body.endswith("healthz check passed\n")
        assert "[+]job-controller ok\n" in body, body
        # kube-controller-manager serves neither /livez nor /readyz
        assert get(port, "/livez")[0] == 404 and get(port, "/readyz")[0] == 404

        token = c.kubectl("create", "token", "scraper").stdout.strip()
        code, slis, _ = get(port, "/metrics/slis", token)
        assert code == 200 and counter(slis, "kubernetes_healthcheck", name="job-controller", type="healthz") == 1
        code, body, _ = get(port, "/configz", token)
        generic = json.loads(body)["kubecontrollermanager.config.k8s.io"]["Generic"]
        assert code == 200 and generic["Controllers"] == ["*"] and generic["Port"] == port
        assert generic["LeaderElection"]["ResourceName"] == "kube-controller-manager"
        assert generic["LeaderElection"]["RetryPeriod"] == "500ms"

        body = assert_metrics_guarded(c, port)
        assert counter(body, "job_controller_job_pods_creation_total", reason="new", status="succeeded") >= 1
        assert_client_metrics(c, body, "kube-controller-manager")  # its POSTs: the Job's pod among them
        # client-go's workqueue metrics, by the queue names upstream's controllers give
        assert counter(body, "workqueue_adds_total", name="job") >= 1
        assert counter(body, "workqueue_work_duration_seconds_count", name="job") >= 1
        assert counter(body, "workqueue_depth", name="deployment") == 0
        assert 'workqueue_retries_total{name="endpoint_slice"}' in body
        assert "# TYPE workqueue_queue_duration_seconds histogram" in body
        # legacyregistry.Handler: a DELETE is answered as a GET, nothing reset
        code, body, _ = get(port, "/metrics", token, "DELETE")
        assert code == 200 and counter(body, "workqueue_adds_total", name="job") >= 1
        assert counter(get(port, "/metrics", token)[1], "workqueue_adds_total", name="job") >= 1
        assert_zpages(c, port, "kube-controller-manager", ["/configz", "/flagz", "/healthz", "/metrics"])
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


def test_a_standby_scheduler_is_ready(bare):
    """kube-scheduler syncs its informers before it campaigns: of two, the one not leading is
    ready as well (sched-handler-sync passes), and only its lease check tells them apart."""
    c = bare
    ports = free_port(), free_port()
    procs = [component(c, "scheduler", p, c.data_dir / f"sched-standby-{i}.log") for i, p in enumerate(ports)]
    try:
        for p in ports:
            wait_for(lambda p=p: reachable(p), what="a scheduler's secure port")
        wait_for(lambda: c.kubectl("get", "lease", "kube-scheduler", "-n", "kube-system", "-o",
                                   "jsonpath={.spec.holderIdentity}", check=False).stdout, what="a leader")
        for p in ports:
            wait_for(lambda p=p: get(p, "/readyz")[0] == 200, what="both schedulers ready")
            code, body, _ = get(p, "/readyz?verbose")
            assert code == 200 and body == ("[+]leaderElection ok\n[+]shutdown ok\n[+]sched-handler-sync ok\n"
                                            "readyz check passed\n")
        container = {"name": "c", "image": "nginx",
                     "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}}
        c.kubectl("run", "by-the-leader", "--image=nginx", f"--overrides={json.dumps({'spec': {'containers': [container]}})}")
        node = wait_for(lambda: c.kubectl("get", "pod", "by-the-leader", "-o", "jsonpath={.spec.nodeName}").stdout,
                        what="the pod bound")
        token = c.kubectl("create", "token", "scraper").stdout.strip()
        attempts = [counter(get(p, "/metrics", token)[1], "scheduler_schedule_attempts_total", result="scheduled")
                    for p in ports]
        assert sorted(attempts)[0] == 0 and sorted(attempts)[1] >= 1, "one scheduled, the standby did not"
        # /metrics/resources: the pods' requests and limits, from the leader only
        leader, standby = sorted(ports, key=lambda p: -attempts[ports.index(p)])
        # leaderelection's gauge: 1 on the leader; none on a standby that never led (leaderOn never ran)
        assert counter(get(leader, "/metrics", token)[1], "leader_election_master_status", name="kube-scheduler") == 1
        assert 'leader_election_master_status{name="kube-scheduler"}' not in get(standby, "/metrics", token)[1]
        assert get(standby, "/metrics/resources", token)[:2] == (200, "")
        code, body, _ = get(leader, "/metrics/resources", token)
        labels = dict(namespace="default", pod="by-the-leader", node=node, scheduler="default-scheduler", priority="0")
        assert code == 200
        assert counter(body, "kube_pod_resource_request", **labels, resource="cpu", unit="cores") == 0.25
        assert counter(body, "kube_pod_resource_request", **labels, resource="memory", unit="bytes") == 64 * 2 ** 20
        assert counter(body, "kube_pod_resource_limit", **labels, resource="memory", unit="bytes") == 128 * 2 ** 20
        assert counter(body, "kube_pod_resource_limit", **labels, resource="cpu") == 0, "no cpu limit, no series"
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            assert proc.wait(20) == 0


def test_apiserver_zpages_through_kubectl(bare):
    """`kubectl get --raw` asks for JSON, then anything: /statusz and /flagz answer in text."""
    statusz = bare.kubectl("get", "--raw", "/statusz").stdout
    assert statusz.startswith("\nkube-apiserver statusz\n")
    assert re.search(r"\nPaths(?::|: |=| ) /flagz /healthz /livez /metrics /readyz /version\n", statusz), statusz
    flagz = bare.kubectl("get", "--raw", "/flagz").stdout
    assert re.search(r"\nscheduler(?::|: |=| )none\n", flagz), flagz
    r = bare.kubectl("get", "--raw", "/statusz", "--as=prometheus", check=False)
    assert r.returncode != 0 and 'cannot get path \"/statusz\"' in r.stderr
    r = bare.kubectl("get", "--raw", "/flagz", "--as=prometheus", "--as-group=system:monitoring")
    assert r.stdout.startswith("\nkube-apiserver flagz\n")


def test_bad_secure_port_is_refused(bare):
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", bare.kubeconfig,
                        "--secure-port", "70000"], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--secure-port 70000 must be between 0 and 65535" in r.stderr


def test_secure_port_in_use_stops_the_component(bare):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig",
                            bare.kubeconfig, "--bind-address", "127.0.0.1", "--secure-port", str(port)],
                           check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    where = f"127.0.0.1:{port}"
    assert r.stderr.splitlines()[-1] == (f"nanokube controller-manager: failed to create listener: failed to listen on "
                                         f"{where}: listen tcp {where}: bind: address already in use")
