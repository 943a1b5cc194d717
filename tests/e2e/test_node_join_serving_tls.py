"""The API server <-> kubelet TLS as kubeadm sets it up with serverTLSBootstrap: `up` runs with
--kubelet-certificate-authority (the cluster CA, made first as `kubeadm init phase certs ca`
would), a node joins with a bootstrap token and `--rotate-server-certificates`, its
kubernetes.io/kubelet-serving request waits for an admin (kube-controller-manager approves only
client requests) and once `kubectl certificate approve`d it serves the issued certificate, which
the API server verifies: kubectl logs and exec reach it. A node serving its self-signed
certificate is refused in upstream's words, `--insecure-skip-tls-verify-backend` excepted. The
API server's kubelet client certificate rewritten is presented from the next log request on (a
user the kubelet refuses: kubectl shows the kubelet's Forbidden text)."""

from __future__ import annotations

import base64
import ipaddress
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from nanokube.pki.ca import KeyPair, issue, new_ca
from tests.e2e.conftest import fresh_store, start_cluster, wait_for
from tests.e2e.test_node_join import TOKEN_ID, TOKEN_SECRET, _bootstrap_kubeconfig, _delete_csrs, _token

NAMESPACE = "serving-tls"


@pytest.fixture(scope="module")
def cluster():
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-serving-tls-"))
    ca = new_ca("kubernetes")
    (d / "pki").mkdir()
    (d / "pki" / "ca.crt").write_bytes(ca.cert_pem)
    (d / "pki" / "ca.key").write_bytes(ca.key_pem)
    with fresh_store() as store:
        c = start_cluster(d, store, ("--kubelet-certificate-authority", str(d / "pki" / "ca.crt")))
        try:
            yield c
        finally:
            c.stop()
            shutil.rmtree(d, ignore_errors=True)


def _kubelet(cluster, tmp_path: Path, name: str, *extra: str) -> tuple[subprocess.Popen, int]:
    """A `nanokube kubelet` joining with the token, reached at 127.0.0.1 (its Hostname address)."""
    d = tmp_path / name
    d.mkdir()
    _bootstrap_kubeconfig(cluster, f"{TOKEN_ID}.{TOKEN_SECRET}", d / "bootstrap-kubelet.conf")
    with socket.socket() as s:  # a free port for its endpoints
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(d / "kubelet.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "kubelet", "--bootstrap-kubeconfig",
                                 str(d / "bootstrap-kubelet.conf"), "--kubeconfig", str(d / "kubelet.conf"),
                                 "--node-name", name, "--bind-address", "127.0.0.1", "--secure-port", str(port),
                                 "--hostname-override", "127.0.0.1", "--read-only-port", "0",
                                 "--healthz-port", "0", "--authorization-mode", "Webhook", *extra],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc, port


def _run_pod(cluster, name: str, node: str) -> None:
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", f"echo {name}; sleep 3600"]}]}}))


def test_an_approved_serving_certificate_is_served_and_verified(cluster, tmp_path):
    cluster.kubectl("apply", "-f", "-", input=_token(
        TOKEN_ID, **{"auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
                     "expiration": "2099-01-01T00:00:00Z"}))
    cluster.kubectl("create", "namespace", NAMESPACE)
    bootstrapped, port = _kubelet(cluster, tmp_path, "tls-bootstrapped", "--rotate-server-certificates")
    self_signed, other_port = _kubelet(cluster, tmp_path, "self-signed")
    try:
        def serving_request():
            return next((c for c in cluster.kubectl_json("get", "csr")["items"]
                         if c["spec"]["signerName"] == "kubernetes.io/kubelet-serving"), None)

        csr = wait_for(serving_request, what="the kubelet's serving certificate request")
        assert csr["spec"]["username"] == "system:node:tls-bootstrapped"
        assert csr["spec"]["usages"] == ["digital signature", "server auth"]
        request = x509.load_pem_x509_csr(base64.b64decode(csr["spec"]["request"]))
        assert request.subject.rfc4514_string() == "CN=system:node:tls-bootstrapped,O=system:nodes"
        node = cluster.kubectl_json("get", "node", "tls-bootstrapped")
        internal = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.IPAddress) == sorted(
            {ipaddress.ip_address(internal), ipaddress.ip_address("127.0.0.1")}, key=str)
        assert sans.get_values_for_type(x509.DNSName) == []
        assert "status" not in csr or not csr["status"].get("conditions")  # no controller approves it

        _run_pod(cluster, "on-bootstrapped", "tls-bootstrapped")
        _run_pod(cluster, "on-self-signed", "self-signed")
        for pod in ("on-bootstrapped", "on-self-signed"):
            wait_for(lambda: cluster.kubectl_json("get", "pod", "-n", NAMESPACE, pod)["status"].get("phase") == "Running",
                     what=f"{pod} Running")
        before = cluster.kubectl("logs", "-n", NAMESPACE, "on-bootstrapped", check=False)
        where = f"https://127.0.0.1:{port}/containerLogs/{NAMESPACE}/on-bootstrapped/c"
        # none to serve yet: the handshake is refused with an alert, as upstream's GetCertificate error
        assert (before.returncode, before.stderr) == (1, f'Error from server: Get "{where}": remote error: tls: internal error\n')

        cluster.kubectl("certificate", "approve", csr["metadata"]["name"])
        assert wait_for(lambda: cluster.kubectl("logs", "-n", NAMESPACE, "on-bootstrapped", check=False).stdout,
                        what="the bootstrapped kubelet's log through a verified connection") == "on-bootstrapped\n"
        assert cluster.kubectl("exec", "-n", NAMESPACE, "on-bootstrapped", "--", "echo", "verified").stdout == "verified\n"
        configz = json.loads(cluster.kubectl("get", "--raw", "/api/v1/nodes/tls-bootstrapped/proxy/configz").stdout)
        assert configz["kubeletconfig"]["serverTLSBootstrap"] is True
        served = x509.load_pem_x509_certificate(
            (tmp_path / "tls-bootstrapped" / "pki" / "kubelet-server-current.pem").read_bytes())
        assert served.issuer.rfc4514_string() == "CN=kubernetes"

        # the API server's client certificate rewritten (as `kubeadm certs renew` would): presented by
        # the dials after the API server next looks at its files (a second apart at most), here one
        # for a user the kubelet's SubjectAccessReview refuses
        pki = cluster.data_dir / "pki"
        cert, key = pki / "apiserver-kubelet-client.crt", pki / "apiserver-kubelet-client.key"
        kept = cert.read_bytes(), key.read_bytes()
        nobody = issue(KeyPair((pki / "ca.crt").read_bytes(), (pki / "ca.key").read_bytes()), "nobody", client=True)
        cert.write_bytes(nobody.cert_pem)
        key.write_bytes(nobody.key_pem)
        got = wait_for(lambda: (r := cluster.kubectl("logs", "-n", NAMESPACE, "on-bootstrapped", check=False)).returncode
                       and r, what="the rewritten client certificate presented")
        assert got.stderr == ("Error from server (Forbidden): Forbidden (user=nobody, verb=get, "
                              "resource=nodes, subresource=proxy) ( pods/log on-bootstrapped)\n")
        cert.write_bytes(kept[0])
        key.write_bytes(kept[1])
        assert wait_for(lambda: cluster.kubectl("logs", "-n", NAMESPACE, "on-bootstrapped", check=False).stdout,
                        what="the restored client certificate presented") == "on-bootstrapped\n"

        where = f"https://127.0.0.1:{other_port}/containerLogs/{NAMESPACE}/on-self-signed/c"
        unknown = "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        got = cluster.kubectl("logs", "-n", NAMESPACE, "on-self-signed", check=False)
        assert (got.returncode, got.stderr) == (1, f'Error from server: Get "{where}": {unknown}\n')
        got = cluster.kubectl("exec", "-n", NAMESPACE, "on-self-signed", "--", "true", check=False)
        assert (got.returncode, got.stderr) == (1, f"error: unable to upgrade connection: error dialing backend: {unknown}\n")
        assert cluster.kubectl("logs", "-n", NAMESPACE, "on-self-signed",
                               "--insecure-skip-tls-verify-backend").stdout == "on-self-signed\n"
        for proc in (bootstrapped, self_signed):
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    finally:
        for proc in (bootstrapped, self_signed):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", "--ignore-not-found")
        cluster.kubectl("delete", "node", "tls-bootstrapped", "self-signed", "--ignore-not-found")
        _delete_csrs(cluster, f"system:bootstrap:{TOKEN_ID}", "system:node:tls-bootstrapped")
        cluster.kubectl("delete", "secret", "-n", "kube-system", f"bootstrap-token-{TOKEN_ID}", "--ignore-not-found")
