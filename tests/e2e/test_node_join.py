"""A node joins as upstream's do with kubeadm: an admin creates a bootstrap token Secret; the token
authenticates as system:bootstrap:<id> (an expired one does not, and the token cleaner deletes
its Secret); cluster-info is readable without credentials and the bootstrap signer's JWS of it
verifies with the token; `nanokube kubelet --bootstrap-kubeconfig` has its client certificate
approved and issued, writes its kubeconfig, registers a Ready node, answers /healthz, runs a pod
bound to it whose log, exec and kubelet endpoints kubectl reaches through the API server, and a
static pod whose mirror pod it makes with its own credentials (NodeRestriction's), and stops
on SIGTERM; its client certificate is rotated as the node. Everything it makes is removed after it
(the session's cluster)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml
from cryptography import x509

from nanokube.client import kubeconfig
from nanokube.client.http import HTTPClient
from nanokube.clock import Clock
from nanokube.node import bootstrap
from tests.e2e.conftest import KUBECTL, http_get, wait_for

TOKEN_ID, TOKEN_SECRET = "join61", "s3cr3tt0k3n00061"
EXPIRED_ID = "gone61"
NODE = "joined-61"
NAMESPACE = "node-join"
#: a kubelet without --config opens the read-only port 10255 and healthz port 10248, as upstream's:
#: tests' kubelets (several at once) open neither
NO_HTTP_PORTS = ("--read-only-port", "0", "--healthz-port", "0")


@pytest.fixture(scope="module")
def cluster(session_cluster):
    return session_cluster


def _token(token_id: str, **extra: str) -> str:
    data = {"token-id": token_id, "token-secret": TOKEN_SECRET, "usage-bootstrap-authentication": "true", **extra}
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
                           "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
                           "stringData": data})


def _admin(cluster) -> tuple[str, bytes]:
    """The server's URL and CA, from the admin kubeconfig."""
    cfg = yaml.safe_load(open(cluster.kubeconfig))["clusters"][0]["cluster"]
    return cfg["server"], base64.b64decode(cfg["certificate-authority-data"])


def _call(cluster, path: str, token: str = "", body: dict | None = None) -> tuple[int, dict]:
    """(status, JSON body) of a request with `token` as its bearer token, or none at all."""
    server, ca = _admin(cluster)
    req = urllib.request.Request(server + path, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cadata=ca.decode()), timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def token(cluster):
    cluster.kubectl("apply", "-f", "-", input=_token(
        TOKEN_ID, **{"usage-bootstrap-signing": "true", "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
                     "expiration": "2099-01-01T00:00:00Z"}))
    yield f"{TOKEN_ID}.{TOKEN_SECRET}"
    cluster.kubectl("delete", "secret", "-n", "kube-system", f"bootstrap-token-{TOKEN_ID}", "--ignore-not-found")


def test_a_bootstrap_token_authenticates_until_it_expires(cluster, token):
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    code, got = _call(cluster, "/apis/authentication.k8s.io/v1/selfsubjectreviews", token, review)
    assert code == 201, got
    assert got["status"]["userInfo"] == {"username": f"system:bootstrap:{TOKEN_ID}", "groups": [
        "system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"]}
    cluster.kubectl("apply", "-f", "-", input=_token(EXPIRED_ID, expiration="2020-01-01T00:00:00Z"))
    code, got = _call(cluster, "/api", f"{EXPIRED_ID}.{TOKEN_SECRET}")
    assert (code, got["reason"]) == (401, "Unauthorized")
    # the token cleaner deletes the expired token's Secret
    wait_for(lambda: not cluster.kubectl("get", "secret", "-n", "kube-system", f"bootstrap-token-{EXPIRED_ID}",
                                         "--ignore-not-found", "-o", "name").stdout.strip(), what="the expired token deleted")


def test_cluster_info_is_public_and_signed_with_the_token(cluster, token):
    def signed():
        code, cm = _call(cluster, "/api/v1/namespaces/kube-public/configmaps/cluster-info")  # no credentials
        assert code == 200, cm
        return cm if f"jws-kubeconfig-{TOKEN_ID}" in cm["data"] else None

    data = wait_for(signed, what="cluster-info signed by the token")["data"]
    kubeconfig = yaml.safe_load(data["kubeconfig"])
    server, ca = _admin(cluster)
    assert kubeconfig["clusters"][0]["cluster"] == {"server": server,
                                                    "certificate-authority-data": base64.b64encode(ca).decode()}
    header, payload, signature = data[f"jws-kubeconfig-{TOKEN_ID}"].split(".")
    assert payload == ""  # detached: the content is the ConfigMap's kubeconfig
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "HS256", "kid": TOKEN_ID}
    expected = hmac.new(TOKEN_SECRET.encode(), f"{header}.{_b64url(data['kubeconfig'].encode())}".encode(),
                        hashlib.sha256).digest()
    assert signature == _b64url(expected)


def _bootstrap_kubeconfig(cluster, token: str, path) -> None:
    server, ca = _admin(cluster)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "tls-bootstrap",
        "clusters": [{"name": "join", "cluster": {"server": server,
                                                  "certificate-authority-data": base64.b64encode(ca).decode()}}],
        "users": [{"name": "bootstrap", "user": {"token": token}}],
        "contexts": [{"name": "tls-bootstrap", "context": {"cluster": "join", "user": "bootstrap"}}]}))


def _delete_csrs(cluster, *usernames: str) -> None:
    for c in cluster.kubectl_json("get", "csr")["items"]:
        if c["spec"]["username"] in usernames:
            cluster.kubectl("delete", "csr", c["metadata"]["name"], "--ignore-not-found")


def test_kubelet_joins_with_the_token_and_runs_a_pod(cluster, token, tmp_path):
    bootstrap_conf = tmp_path / "bootstrap-kubelet.conf"
    _bootstrap_kubeconfig(cluster, token, bootstrap_conf)
    kubelet_conf, log_path = tmp_path / "kubelet.conf", tmp_path / "kubelet.log"
    with socket.socket() as s:  # a free port for its endpoints
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "manifests").mkdir()  # a static pod, as kubeadm's control plane's: its mirror pod is the node's to make
    (tmp_path / "manifests" / "agent.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "node-agent", "namespace": "kube-system"},
        "spec": {"containers": [{"name": "agent", "image": "busybox", "command": ["sleep", "3600"]}]}}))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "kubelet", "--bootstrap-kubeconfig", str(bootstrap_conf),
                                 "--kubeconfig", str(kubelet_conf), "--node-name", NODE, "--bind-address", "127.0.0.1",
                                 "--secure-port", str(port), "--hostname-override", "127.0.0.1",
                                 "--authorization-mode", "Webhook", "--pod-manifest-path", str(tmp_path / "manifests"),
                                 *NO_HTTP_PORTS], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        def ready():
            node = json.loads(cluster.kubectl("get", "node", NODE, "-o", "json", "--ignore-not-found").stdout or "null")
            return node and any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])

        wait_for(ready, what=f"node {NODE} Ready")
        csrs = [c for c in cluster.kubectl_json("get", "csr")["items"]
                if c["spec"]["username"] == f"system:bootstrap:{TOKEN_ID}"]
        assert len(csrs) == 1
        assert csrs[0]["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
        assert [(c["type"], c["status"], c["reason"], c["message"]) for c in csrs[0]["status"]["conditions"]] == [
            ("Approved", "True", "AutoApproved", "Auto approving kubelet client certificate after SubjectAccessReview.")]
        assert csrs[0]["status"]["certificate"]
        whoami = json.loads(cluster.kubectl("--kubeconfig", str(kubelet_conf), "auth", "whoami", "-o", "json").stdout)
        assert whoami["status"]["userInfo"]["username"] == f"system:node:{NODE}"
        assert "system:nodes" in whoami["status"]["userInfo"]["groups"]
        assert cluster.kubectl_json("get", "lease", "-n", "kube-node-lease", NODE)["spec"]["holderIdentity"] == NODE
        insecure = ssl._create_unverified_context()  # its serving certificate is a self-signed one
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=insecure, timeout=10) as r:
            assert r.read() == b"ok"

        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-joined"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                     "containers": [{"name": "c", "image": "busybox",
                                     "command": ["sh", "-c", "echo started on the joined node; sleep 3600"]},
                                    {"name": "web", "image": "trainer:1.0", "ports": [{"containerPort": 8080}]}]}}))

        def running():
            pod = cluster.kubectl_json("get", "pod", "-n", NAMESPACE, "on-joined")
            return pod if pod["status"].get("phase") == "Running" else None

        assert wait_for(running, what="the pod Running on the joined node")["spec"]["nodeName"] == NODE
        _streams_through_the_api_server(cluster, port)
        mirror = wait_for(lambda: (p := cluster.kubectl_json("get", "pod", "-n", "kube-system", f"node-agent-{NODE}"))
                          ["status"].get("phase") == "Running" and p, what="the static pod's mirror pod Running")
        assert mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"]
        assert "serviceAccountName" not in mirror["spec"]  # (a mirror pod may reference none)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        text = log_path.read_text()
        assert "forbidden" not in text, text  # its pod's kube-root-ca.crt watch by name is a node's to make
        # a node's credentials may not list Nodes: its address is of its name's hash, and it says so
        assert re.search(r"May not list Nodes: InternalIP 172\.1[89]\.\d+\.\d+ is of a hash of the node's name", text), text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", "--ignore-not-found")
        cluster.kubectl("delete", "pod", "-n", "kube-system", f"node-agent-{NODE}", "--ignore-not-found", "--force",
                        "--grace-period=0")
        cluster.kubectl("delete", "node", NODE, "--ignore-not-found")
        _delete_csrs(cluster, f"system:bootstrap:{TOKEN_ID}")


class _Jumping(Clock):
    """Real time, but a wait longer than a few seconds (the rotation deadline, months away) is
    skipped: the clock jumps to its end."""

    def __init__(self):
        self.offset = 0.0

    def now(self) -> float:
        return time.time() + self.offset

    async def sleep(self, seconds: float) -> None:
        if seconds > 5:
            self.offset += seconds
            seconds = 0
        await asyncio.sleep(seconds)


def test_the_client_certificate_is_rotated_as_the_node(cluster, token, tmp_path):
    """--rotate-certificates: once 70 to 90% of the certificate's life (a year) has passed on the
    kubelet's clock, it asks for a new one as the node itself; csrapproving approves it as
    selfnodeclient and the kubelet uses it from then on. Its 1.8-1.20 gate is gone since 1.21."""
    name, pem = "rotated-61", tmp_path / "pki" / bootstrap.CURRENT
    _bootstrap_kubeconfig(cluster, token, tmp_path / "bootstrap-kubelet.conf")

    async def factory(creds):
        client = HTTPClient(creds)
        await client.start()
        return client

    async def scenario() -> tuple[bytes, bytes, dict]:
        await bootstrap.bootstrap(str(tmp_path / "kubelet.conf"), str(tmp_path / "bootstrap-kubelet.conf"),
                                  str(tmp_path / "pki"), name, factory)
        first = pem.read_bytes()
        client = await factory(kubeconfig.load(str(tmp_path / "kubelet.conf"), env={}))
        rotation = asyncio.create_task(bootstrap.rotate(client, name, str(pem), _Jumping()))
        try:
            for _ in range(600):
                if pem.read_bytes() != first:
                    break
                await asyncio.sleep(0.1)
            review = await client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                          {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        finally:
            rotation.cancel()
            await asyncio.gather(rotation, return_exceptions=True)
            await client.close()
        return first, pem.read_bytes(), review

    try:
        first, rotated, review = asyncio.run(scenario())
        assert rotated != first
        assert x509.load_pem_x509_certificate(rotated).subject.rfc4514_string() == f"CN=system:node:{name},O=system:nodes"
        assert review["status"]["userInfo"]["username"] == f"system:node:{name}"
        renewals = [c for c in cluster.kubectl_json("get", "csr")["items"]
                    if c["spec"]["username"] == f"system:node:{name}"]
        assert renewals and all(c["spec"]["signerName"] == bootstrap.CLIENT_SIGNER for c in renewals)
        assert (renewals[0]["status"]["conditions"][0]["reason"], renewals[0]["status"]["conditions"][0]["message"]) == (
            "AutoApproved", "Auto approving self kubelet client certificate after SubjectAccessReview.")
    finally:
        _delete_csrs(cluster, f"system:bootstrap:{TOKEN_ID}", f"system:node:{name}")
    got = subprocess.run([sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", str(tmp_path / "kubelet.conf"),
                          "--feature-gates", "RotateKubeletClientCertificate=true"], capture_output=True, text=True,
                         timeout=60)
    assert got.returncode == 2 and "unrecognized feature gate: RotateKubeletClientCertificate" in got.stderr


def _streams_through_the_api_server(cluster, port: int) -> None:
    """The API server reaches the joined kubelet at the Node's Hostname address and kubelet port with
    its kubelet client certificate: logs, exec, port-forward, the kubelet's endpoints under
    nodes/proxy (and `kubectl top`); the kubelet asks the API server whether a caller may
    (anonymous may not)."""
    node = cluster.kubectl_json("get", "node", NODE)
    assert {"type": "Hostname", "address": "127.0.0.1"} in node["status"]["addresses"]
    assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == port
    assert wait_for(lambda: cluster.kubectl("logs", "-n", NAMESPACE, "on-joined", "-c", "c").stdout,
                    what="the pod's log") == "started on the joined node\n"
    assert cluster.kubectl("exec", "-n", NAMESPACE, "on-joined", "-c", "c", "--", "echo", "hi", "there").stdout == "hi there\n"
    forward = subprocess.Popen([KUBECTL, "port-forward", "-n", NAMESPACE, "pod/on-joined", ":8080", "--address",
                                "127.0.0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "KUBECONFIG": cluster.kubeconfig})
    try:
        local = int(re.search(r"127\.0\.0\.1:(\d+) -> 8080", forward.stdout.readline()).group(1))
        assert http_get(f"http://127.0.0.1:{local}/") == f"nanokube simulated pod {NAMESPACE}/on-joined port 8080\n"
    finally:
        forward.send_signal(signal.SIGINT)
        forward.wait(timeout=10)
    assert cluster.kubectl("top", "pod", "-n", NAMESPACE, "on-joined", "--no-headers").stdout.split()[0] == "on-joined"
    configz = json.loads(cluster.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/configz").stdout)
    assert (configz["kubeletconfig"]["address"], configz["kubeletconfig"]["port"]) == ("127.0.0.1", port)
    summary = json.loads(cluster.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/stats/summary").stdout)
    assert summary["node"]["nodeName"] == NODE
    assert sorted(p["podRef"]["name"] for p in summary["pods"]) == [f"node-agent-{NODE}", "on-joined"]  # (a static pod)
    insecure = ssl._create_unverified_context()
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"https://127.0.0.1:{port}/pods", context=insecure, timeout=10)
    assert e.value.code == 403 and b"system:anonymous" in e.value.read()


def test_an_unknown_pool_is_refused_before_bootstrapping(tmp_path):
    bootstrap_conf = tmp_path / "bootstrap-kubelet.conf"  # never read: the pool is checked first
    got = subprocess.run([sys.executable, "-m", "nanokube.cli", "kubelet", "--bootstrap-kubeconfig", str(bootstrap_conf),
                          "--kubeconfig", str(tmp_path / "kubelet.conf"), "--node-name", NODE, "--pool", "nosuch"],
                         capture_output=True, text=True, timeout=60)
    assert got.returncode == 2
    assert got.stderr.splitlines() == ["nanokube kubelet: no pool 'nosuch' (pools: gpu)"]
    assert not (tmp_path / "kubelet.conf").exists()


def test_a_node_ip_outside_the_simulated_nodes_is_refused(tmp_path):
    for ip, why in (("192.168.1.7", "not a simulated node's address (172.18.0.2-172.19.0.1)"),
                    ("fd00::7", "not a simulated node's address (172.18.0.2-172.19.0.1)"),
                    ("172.18.0.x", None)):
        got = subprocess.run([sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", str(tmp_path / "none.conf"),
                              "--node-name", NODE, "--node-ip", ip], capture_output=True, text=True, timeout=60)
        assert got.returncode == 2
        assert got.stderr.splitlines() == [f"nanokube kubelet: --node-ip {ip}: {why}" if why
                                           else f'nanokube kubelet: --node-ip: could not parse "{ip}"']


def test_a_kubelet_takes_its_node_ip_and_another_may_not(cluster, tmp_path):
    """--node-ip is the Node's InternalIP, and its pod network range follows from it; a second
    kubelet given the same address, whose credentials may list Nodes, refuses to start."""
    name, ip = "pinned-62", "172.18.40.9"  # index 10247: 10.244.0.0 + 10247 /24s, wrapped inside 10.0.0.0/8
    ports = []
    for _ in range(2):  # (a kubelet's port is never 0: validation refuses it, as upstream's)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(str(s.getsockname()[1]))
    with open(tmp_path / "kubelet.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", cluster.kubeconfig,
                                 "--node-name", name, "--node-ip", ip, "--bind-address", "127.0.0.1",
                                 "--secure-port", ports[0], "--hostname-override", "127.0.0.1", *NO_HTTP_PORTS],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        node = wait_for(lambda: json.loads(cluster.kubectl("get", "node", name, "-o", "json", "--ignore-not-found").stdout
                                           or "null"), what=f"node {name} registered")
        assert {"type": "InternalIP", "address": ip} in node["status"]["addresses"]
        assert node["spec"]["podCIDR"] == "10.28.7.0/24"
        got = subprocess.run([sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", cluster.kubeconfig,
                              "--node-name", "second-62", "--node-ip", ip, "--bind-address", "127.0.0.1",
                              "--secure-port", ports[1], *NO_HTTP_PORTS], capture_output=True, text=True, timeout=60)
        assert got.returncode == 1, got.stderr
        assert got.stderr.splitlines()[-1] == (
            f"nanokube kubelet: --node-ip {ip}: node {name} already reports that InternalIP")
        assert not cluster.kubectl("get", "node", "second-62", "--ignore-not-found", "-o", "name").stdout.strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        cluster.kubectl("delete", "node", name, "--ignore-not-found")


def test_a_kubelet_configured_by_a_file_and_flags(cluster, tmp_path):
    """--config: a KubeletConfiguration, each flag given overriding its field (--port, --max-pods,
    featureGates gate by gate), --node-labels on the Node; an unknown field logged as upstream's
    lenient v1beta1 decoding logs it. The API server's client certificate is verified with the
    file's clientCAFile (/configz reaches the kubelet through it, showing the merged
    configuration); anonymous requests are refused (anonymous.enabled false); the read-only port
    serves /pods to anyone over HTTP and the healthz port /healthz; the Node's pods capacity is
    maxPods."""
    name = "configured-62"
    _, ca = _admin(cluster)
    (tmp_path / "ca.crt").write_bytes(ca)
    ports = []
    for _ in range(3):  # free ports for the secure, read-only and healthz endpoints
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    secure, read_only, healthz = ports
    (tmp_path / "kubelet.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "address": "127.0.0.1",
        "port": 10250, "readOnlyPort": read_only, "healthzPort": healthz, "maxPods": 7,
        "clusterDNS": ["10.96.0.10"], "clusterDomain": "cluster.local", "noSuchField": 1,
        "staticPodPath": str(tmp_path / "manifests"),
        "authentication": {"x509": {"clientCAFile": str(tmp_path / "ca.crt"), "extra": 1},
                           "anonymous": {"enabled": False}},
        "featureGates": {"HPAScaleToZero": True, "DRAResourcePoolStatus": True}}))
    with open(tmp_path / "kubelet.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", cluster.kubeconfig,
                                 "--config", str(tmp_path / "kubelet.yaml"), "--port", str(secure), "--max-pods", "9",
                                 "--feature-gates", "HPAScaleToZero=false", "--node-name", name,
                                 "--node-labels", "node.kubernetes.io/pool=blue,team=ml",
                                 "--hostname-override", "127.0.0.1"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        node = wait_for(lambda: json.loads(cluster.kubectl("get", "node", name, "-o", "json", "--ignore-not-found").stdout
                                           or "null"), what=f"node {name} registered")
        assert node["status"]["capacity"]["pods"] == "9"
        assert (node["metadata"]["labels"]["node.kubernetes.io/pool"], node["metadata"]["labels"]["team"]) == (
            "blue", "ml")
        got = json.loads(cluster.kubectl("get", "--raw", f"/api/v1/nodes/{name}/proxy/configz").stdout)["kubeletconfig"]
        assert (got["address"], got["port"], got["readOnlyPort"], got["healthzPort"], got["maxPods"]) == (
            "127.0.0.1", secure, read_only, healthz, 9)
        assert got["authentication"] == {"x509": {"clientCAFile": str(tmp_path / "ca.crt")},
                                         "webhook": {"enabled": True, "cacheTTL": "2m0s"}, "anonymous": {"enabled": False}}
        assert got["authorization"]["mode"] == "Webhook"
        assert (got["clusterDNS"], got["clusterDomain"]) == (["10.96.0.10"], "cluster.local")
        assert got["featureGates"] == {"HPAScaleToZero": False, "DRAResourcePoolStatus": True}
        assert got["evictionHard"]["memory.available"] == "100Mi"
        assert "noSuchField" not in got
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"https://127.0.0.1:{secure}/pods", context=ssl._create_unverified_context(),
                                   timeout=10)
        assert (e.value.code, e.value.read()) == (401, b"Unauthorized")
        pods = json.loads(http_get(f"http://127.0.0.1:{read_only}/pods"))
        assert (pods["kind"], pods["items"]) == ("PodList", [])
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{read_only}/configz", timeout=10)
        assert e.value.code == 404
        assert http_get(f"http://127.0.0.1:{healthz}/healthz") == "ok"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert ('Using lenient decoding as strict decoding failed: err=strict decoding error: unknown field '
                '"authentication.x509.extra", unknown field "noSuchField"') in (text := (tmp_path / "kubelet.log").read_text())
        assert f"Unable to read config path: path does not exist, ignoring (path {tmp_path}/manifests)" in text
        # each configuration flag given says it belongs in the file, as upstream's
        assert [line.split()[1] for line in text.splitlines() if line.endswith(" for more information.")] == [
            "--port", "--max-pods", "--feature-gates"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.kubectl("delete", "node", name, "--ignore-not-found")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"),
                    reason="SKIPPED LOUDLY: the process runtime needs root and ip")
def test_a_process_runtime_kubelet_s_pod_is_proxied_at_its_ip(cluster, tmp_path):
    """--runtime process: the joined node runs its pod as a process in a network namespace of its
    own and routes its pod network from the host; pods/proxy (through `kubectl proxy`) reaches the
    pod's server at the pod's IP, as kube-apiserver dials it; logs and exec reach the pod through
    the kubelet. Its namespaces go with it."""
    from nanokube.node.runtime.netns import PREFIX, cluster_tag, list_netns

    name, namespace = "process-62", "node-join-process"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ("import http.server as h; h.ThreadingHTTPServer(('0.0.0.0', 8080), h.SimpleHTTPRequestHandler)"
              ".serve_forever()")
    with open(tmp_path / "kubelet.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", cluster.kubeconfig,
                                 "--runtime", "process", "--root-dir", str(tmp_path), "--node-name", name,
                                 "--bind-address", "127.0.0.1", "--secure-port", str(port),
                                 "--hostname-override", "127.0.0.1", *NO_HTTP_PORTS],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    proxy = None
    try:
        cluster.kubectl("create", "namespace", namespace)
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": name}, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "python", "command": ["python3", "-c", server],
                                     "ports": [{"containerPort": 8080}]}]}}))
        pod = wait_for(lambda: (p := cluster.kubectl_json("get", "pod", "-n", namespace, "web"))["status"].get("phase")
                       == "Running" and p, what="the pod Running on the process node")
        assert pod["spec"]["nodeName"] == name
        proxy = subprocess.Popen([KUBECTL, "proxy", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env={**os.environ, "KUBECONFIG": cluster.kubeconfig})
        local = int(re.search(r"127\.0\.0\.1:(\d+)", proxy.stdout.readline()).group(1))
        url = f"http://127.0.0.1:{local}/api/v1/namespaces/{namespace}/pods/web:8080/proxy/"
        listing = wait_for(lambda: "Directory listing" in (text := http_get(url)) and text, what="the pod's server")
        assert "<title>Directory listing for /</title>" in listing
        # its kubelet serves the pod's log and exec as up's process nodes do
        assert '"GET / HTTP/1.1" 200' in cluster.kubectl("logs", "-n", namespace, "web").stdout
        assert cluster.kubectl("exec", "-n", namespace, "web", "--", "sh", "-c", "echo $((6*7))").stdout == "42\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        tag = f"{PREFIX}{cluster_tag(str(tmp_path))}-"
        assert [n for n in list_netns() if n.startswith(tag)] == []
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found")
        cluster.kubectl("delete", "node", name, "--ignore-not-found")
