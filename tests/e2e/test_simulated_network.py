"""A new user's first "can I reach my service" checks on the simulated runtime: `kubectl exec` of
busybox's wget and nslookup (and curl) in a client pod reach a Deployment behind a Service, by
name and ClusterIP and pod IP, as kube-proxy and cluster DNS would route them (simulated_net); a
Service whose only endpoint is not ready, a port the Service does not have, and a name no one
has fail in busybox's words and exit codes; busybox has no curl (curlimages/curl has); an init
container's `until nslookup` loop ends once its Service is made, and a polling container's endless
wget loop reaches a Service made after it started."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import running_cluster, wait_for

LABELS = {"app": "web"}
OBJECTS = [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"replicas": 2, "selector": {"matchLabels": LABELS}, "template": {
         "metadata": {"labels": LABELS},
         "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
             "name": "web", "image": "nginx", "ports": [{"name": "http", "containerPort": 8080}]}]}}}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"selector": LABELS, "ports": [{"port": 80, "targetPort": "http"}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-headless", "namespace": "default"},
     "spec": {"clusterIP": "None", "selector": LABELS, "ports": [{"port": 8080}]}},
    # never Ready: its readiness gate's condition is set by no one
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "slow", "namespace": "default", "labels": {"app": "slow"}},
     "spec": {"terminationGracePeriodSeconds": 1, "readinessGates": [{"conditionType": "example.com/warm"}],
              "containers": [{"name": "slow", "image": "nginx", "ports": [{"containerPort": 8080}]}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "slow", "namespace": "default"},
     "spec": {"selector": {"app": "slow"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": "default"},
     "spec": {"terminationGracePeriodSeconds": 1,
              "containers": [{"name": "client", "image": "busybox", "command": ["sleep", "3600"]}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "curl", "namespace": "default"},
     "spec": {"terminationGracePeriodSeconds": 1,
              "containers": [{"name": "curl", "image": "curlimages/curl", "command": ["sleep", "3600"]}]}},
    # polls a Service no one has made yet, with the pod's own ndots
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "poller", "namespace": "default"},
     "spec": {"terminationGracePeriodSeconds": 1, "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
              "containers": [{"name": "poller", "image": "busybox", "command": [
                  "sh", "-c", "while true; do wget -qO- late; sleep 1; done"]}]}},
]


def _endpoints(c, service: str) -> list[dict]:
    slices = c.kubectl_json("get", "endpointslices", "-l", f"kubernetes.io/service-name={service}")["items"]
    return [ep for es in slices for ep in es.get("endpoints") or ()]


@pytest.fixture(scope="module")
def net():
    """A cluster running the web Deployment behind its Services, the never-ready pod and the client."""
    with running_cluster("simnet") as c:
        c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": OBJECTS}))
        wait_for(lambda: sum((ep.get("conditions") or {}).get("ready") is True for ep in _endpoints(c, "web")) == 2,
                 60, "two ready web endpoints")
        wait_for(lambda: len(_endpoints(c, "slow")) == 1, 60, "the slow pod's endpoint")
        for pod in ("client", "curl", "poller"):
            wait_for(lambda: c.kubectl_json("get", "pod", pod)["status"].get("phase") == "Running", 60,
                     f"{pod} running")
        yield c


def _pods(c) -> dict[str, str]:
    """The web pods' IPs by name."""
    return {p["metadata"]["name"]: p["status"]["podIP"]
            for p in c.kubectl_json("get", "pods", "-l", "app=web")["items"]}


def test_wget_reaches_the_service_by_name_and_lands_on_one_of_its_pods(net):
    pods = _pods(net)
    out = net.kubectl("exec", "client", "--", "wget", "-qO-", "http://web").stdout
    served = {f"nanokube simulated pod default/{name} port 8080\n" for name in pods}
    assert out in served  # the named targetPort, resolved by the EndpointSlice
    ip = net.kubectl_json("get", "service", "web")["spec"]["clusterIP"]
    assert net.kubectl("exec", "client", "--", "wget", "-qO-", f"{ip}:80").stdout in served
    name, pod_ip = sorted(pods.items())[0]
    assert net.kubectl("exec", "client", "--", "wget", "-qO-", f"http://{pod_ip}:8080/").stdout == \
        f"nanokube simulated pod default/{name} port 8080\n"
    r = net.kubectl("exec", "curl", "--", "sh", "-c",
                    "curl -s -o /tmp/page -w '%{http_code}\\n' web.default.svc.cluster.local && cat /tmp/page")
    code, page = r.stdout.split("\n", 1)
    assert code == "200" and page in served
    r = net.kubectl("exec", "client", "--", "nc", "-zv", "web", "80")  # busybox's nc: the port is open
    assert r.stderr == f"web ({ip}:80) open\n"
    shell = net.kubectl("exec", "-i", "client", "--", "sh", input="wget -qO- web\nwget -qO- web:9; echo $?\n")
    assert shell.stdout.splitlines()[0] + "\n" in served and shell.stdout.splitlines()[1] == "1"


def test_nslookup_answers_as_cluster_dns_through_the_search_path(net):
    ip = net.kubectl_json("get", "service", "web")["spec"]["clusterIP"]
    # the nameserver is the kube-dns Service's ClusterIP, the Service range's tenth address, as under kubeadm
    dns = net.kubectl_json("get", "service", "kube-dns", "-n", "kube-system")["spec"]["clusterIP"]
    assert dns == net.kubectl_json("get", "service", "kubernetes")["spec"]["clusterIP"].rsplit(".", 1)[0] + ".10"
    out = net.kubectl("exec", "client", "--", "nslookup", "web.default.svc.cluster.local").stdout
    assert out == (f"Server:\t\t{dns}\nAddress:\t{dns}:53\n\nName:\tweb.default.svc.cluster.local\nAddress: {ip}\n\n"
                   "*** Can't find web.default.svc.cluster.local: No answer\n\n")  # the AAAA query
    r = net.kubectl("exec", "client", "--", "nslookup", "web", check=False)  # busybox: under each search domain
    assert r.returncode == 1 and f"Name:\tweb.default.svc.cluster.local\nAddress: {ip}\n" in r.stdout
    assert "** server can't find web.svc.cluster.local: NXDOMAIN\n" in r.stdout
    headless = net.kubectl("exec", "client", "--", "nslookup", "web-headless.default.svc.cluster.local.").stdout
    assert sorted(line.split()[1] for line in headless.splitlines() if line.startswith("Address: ")) == \
        sorted(_pods(net).values())  # a headless Service answers with its ready endpoints
    assert net.kubectl("exec", "client", "--", "cat", "/etc/resolv.conf").stdout == (
        f"search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver {dns}\noptions ndots:5\n")
    r = net.kubectl("exec", "client", "--", "nslookup", "nope", check=False)
    assert r.returncode == 1
    assert "** server can't find nope.default.svc.cluster.local: NXDOMAIN\n" in r.stdout


def test_no_ready_endpoint_a_wrong_port_and_an_unknown_name_fail_as_busybox_says(net):
    ip = net.kubectl_json("get", "service", "slow")["spec"]["clusterIP"]
    r = net.kubectl("exec", "client", "--", "wget", "-qO-", "http://slow", check=False)
    assert (r.returncode, r.stdout) == (1, "")
    assert f"wget: can't connect to remote host ({ip}): Connection refused" in r.stderr
    web = net.kubectl_json("get", "service", "web")["spec"]["clusterIP"]
    r = net.kubectl("exec", "client", "--", "wget", "-qO-", "http://web:8080", check=False)
    assert r.returncode == 1 and f"wget: can't connect to remote host ({web}): Connection refused" in r.stderr
    r = net.kubectl("exec", "client", "--", "wget", "-qO-", "http://nope", check=False)
    assert r.returncode == 1 and "wget: bad address 'nope'" in r.stderr
    r = net.kubectl("exec", "curl", "--", "curl", "-sS", "http://slow", check=False)
    assert r.returncode == 7 and "curl: (7) Failed to connect to slow port 80 after 0 ms" in r.stderr
    r = net.kubectl("exec", "client", "--", "sh", "-c", "curl -s web", check=False)  # busybox has wget, no curl
    assert r.returncode == 127 and r.stderr.startswith("sh: curl: not found\n")


def test_a_containers_own_command_reaches_the_service(net):
    net.kubectl("run", "probe", "--image=busybox", "--restart=Never", "--", "wget", "-qO-", "web")
    wait_for(lambda: net.kubectl_json("get", "pod", "probe")["status"].get("phase") == "Succeeded", 30,
             "the probe pod's wget to finish")
    assert net.kubectl("logs", "probe").stdout.startswith("nanokube simulated pod default/web-")
    r = net.kubectl("run", "-i", "--rm", "once", "--image=busybox", "--restart=Never", "--", "wget", "-qO-", "web",
                    timeout=30)
    assert "nanokube simulated pod default/web-" in r.stdout


def test_an_init_container_waits_for_its_service_as_the_docs_example_does(net):
    """The init containers docs' `until nslookup myservice...; do sleep 2; done` (1 s here): it loops until the
    Service is made, then the pod starts."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "myapp", "namespace": "default"},
           "spec": {"terminationGracePeriodSeconds": 1,
                    "initContainers": [{"name": "init-myservice", "image": "busybox", "command": [
                        "sh", "-c", "until nslookup myservice.default.svc.cluster.local; do echo waiting for myservice;"
                        " sleep 1; done"]}],
                    "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}]}}
    net.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: "waiting for myservice" in net.kubectl("logs", "myapp", "-c", "init-myservice",
                                                             check=False).stdout, 30, "the init container looping")
    assert net.kubectl_json("get", "pod", "myapp")["status"]["phase"] == "Pending"
    net.kubectl("create", "service", "clusterip", "myservice", "--tcp=80:9376")
    wait_for(lambda: net.kubectl_json("get", "pod", "myapp")["status"].get("phase") == "Running", 30,
             "myapp running once myservice resolves")
    log = net.kubectl("logs", "myapp", "-c", "init-myservice").stdout
    assert "** server can't find myservice.default.svc.cluster.local: NXDOMAIN" in log
    assert log.rstrip("\n").endswith("*** Can't find myservice.default.svc.cluster.local: No answer")


def test_a_polling_loop_sees_a_service_made_later_through_its_own_ndots(net):
    """`while true; do wget -qO- late; sleep 1; done` fails while no Service `late` exists; each later pass
    sees the cluster as it is then, so it reaches the web pods once the Service is made."""
    assert net.kubectl("exec", "poller", "--", "cat", "/etc/resolv.conf").stdout.endswith("options ndots:2\n")
    wait_for(lambda: "wget: bad address 'late'" in net.kubectl("logs", "poller").stdout, 30, "the poller failing")
    net.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "late", "namespace": "default"},
        "spec": {"selector": LABELS, "ports": [{"port": 80, "targetPort": "http"}]}}))
    wait_for(lambda: "nanokube simulated pod default/web-" in net.kubectl("logs", "poller").stdout, 30,
             "the poller reaching the web pods through Service late")
