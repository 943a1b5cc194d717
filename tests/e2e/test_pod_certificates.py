"""Pod certificates end to end through `nanokube up`: the node agent makes
the key and the PodCertificateRequest, the pod starts only once a signer has
issued it, the projected files verify against the projected trust bundle
(`openssl verify` agrees), and a denial keeps the pod from starting.
Refresh in place, at least five minutes away under the API's rules, is
test_pod_certificate_refresh.py (and, in virtual time,
tests/node/volumes/test_projected.py).

Two signers take part: the built-in `nanokube.io/pod-identity`, and one run
by this test process as an ordinary API client (`e2e.nanokube.io/...`)."""

from __future__ import annotations

import datetime as dt
import subprocess
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from nanokube.pki import trustbundle
from nanokube.pki.signer import SIGNER_NAME, SignerCA, issue_leaf, spiffe_id, stub_key
from tests.e2e.manifests import to_yaml

from .conftest import wait_for

FAST = "e2e.nanokube.io/fast"
DENY = "e2e.nanokube.io/deny"
GROUP, VERSION = "certificates.k8s.io", "v1"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module deletes its pods; it leaves their
    requests and the ClusterTrustBundle e2e.nanokube.io:fast:ca (its own signer's, which no other
    module names)."""
    return session_cluster


def rfc3339(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class ExternalSigner(threading.Thread):
    """Serves FAST (issues with the earliest refresh the API server accepts:
    notBefore nearly 5 minutes back, beginRefreshAt 10 minutes after it) and
    DENY (denies everything), polling like any out-of-tree signer might."""

    def __init__(self, cluster, ca_dir: Path):
        super().__init__(daemon=True)
        from kubernetes import client

        self.api = client.CustomObjectsApi(cluster.client())
        self.ca = SignerCA(str(ca_dir))
        self.ca.load()
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.wait(0.2):
            for signer in (FAST, DENY):
                items = self.api.list_cluster_custom_object(GROUP, VERSION, "podcertificaterequests",
                                                            field_selector=f"spec.signerName={signer}")["items"]
                for pcr in items:
                    if not (pcr.get("status") or {}).get("conditions"):
                        self.answer(pcr)

    def answer(self, pcr: dict):
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        if pcr["spec"]["signerName"] == DENY:
            status = {"conditions": [{"type": "Denied", "status": "True", "reason": "PolicyRefused",
                                      "message": "e2e signer refuses every request", "lastTransitionTime": rfc3339(now)}]}
        else:
            nb = now - dt.timedelta(seconds=290)
            leaf = issue_leaf(self.ca.issuing(), stub_key(pcr["spec"]), spiffe_id(pcr["metadata"]["namespace"], "default"),
                              nb.timestamp(), pcr["spec"]["maxExpirationSeconds"])
            status = {"certificateChain": leaf.public_bytes(serialization.Encoding.PEM).decode(),
                      "notBefore": rfc3339(leaf.not_valid_before_utc), "notAfter": rfc3339(leaf.not_valid_after_utc),
                      "beginRefreshAt": rfc3339(nb + dt.timedelta(seconds=600)),
                      "conditions": [{"type": "Issued", "status": "True", "reason": "Issued", "message": "e2e",
                                      "lastTransitionTime": rfc3339(now)}]}
        md = pcr["metadata"]
        self.api.replace_namespaced_custom_object_status(GROUP, VERSION, md["namespace"], "podcertificaterequests",
                                                         md["name"], {**pcr, "status": status})


@pytest.fixture(scope="module")
def e2e_signer(cluster, tmp_path_factory):
    s = ExternalSigner(cluster, tmp_path_factory.mktemp("e2e-signer"))
    trust = b"".join(s.ca.trust_pems()).decode()
    cluster.kubectl("apply", "-f", "-", input=to_yaml([{
        "apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle",
        "metadata": {"name": "e2e.nanokube.io:fast:ca", "labels": {"e2e": "fast"}},
        "spec": {"signerName": FAST, "trustBundle": trust}}]))
    s.start()
    yield s
    s.stopped.set()
    s.join(timeout=5)


def pod(name: str, signer: str, key_type: str, **extra) -> dict:
    cert = {"signerName": signer, "keyType": key_type, "credentialBundlePath": "credentials.pem",
            "keyPath": "tls.key", "certificateChainPath": "tls.crt", **extra}
    bundle = {"signerName": signer, "labelSelector": {}, "path": "ca.pem"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}],
        "volumes": [{"name": "identity", "projected": {"sources": [{"podCertificate": cert},
                                                                   {"clusterTrustBundle": bundle}]}}]}}


def volume(cluster, p: dict) -> Path:
    return cluster.data_dir / "pods" / p["spec"]["nodeName"] / p["metadata"]["uid"] / "volumes" / "identity"


def running(cluster, name: str) -> dict:
    def check():
        p = cluster.kubectl_json("get", "pod", name)
        return p if p["status"].get("phase") == "Running" else None
    return wait_for(check, timeout=90)


def kubelet_metrics(cluster, p: dict) -> list[str]:
    """The lines of the /metrics of the kubelet running `p`, through nodes/proxy."""
    return cluster.kubectl("get", "--raw", f"/api/v1/nodes/{p['spec']['nodeName']}/proxy/metrics").stdout.splitlines()


def request_of(cluster, p: dict) -> dict:
    items = cluster.kubectl_json("get", "podcertificaterequests", "-n", "default")["items"]
    return next(r for r in items if r["spec"]["podUID"] == p["metadata"]["uid"])


@pytest.mark.parametrize("key_type", ["ECDSAP256", "ED25519", "RSA3072"])
def test_pod_starts_after_issuance_with_verifiable_files(cluster, key_type):
    name = f"cert-{key_type.lower()}"
    cluster.kubectl("apply", "-f", "-", input=to_yaml([pod(name, SIGNER_NAME, key_type)]))
    p = running(cluster, name)
    pcr = request_of(cluster, p)
    issued = next(c for c in pcr["status"]["conditions"] if c["type"] == "Issued")
    started = p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert issued["lastTransitionTime"] <= started, "containers start only after the certificate is issued"
    assert pcr["metadata"]["ownerReferences"][0]["uid"] == p["metadata"]["uid"]
    assert (pcr["spec"]["nodeName"], pcr["spec"]["podName"]) == (p["spec"]["nodeName"], name)

    vol = volume(cluster, p)
    key_pem, chain = (vol / "tls.key").read_bytes(), (vol / "tls.crt").read_bytes()
    assert (vol / "credentials.pem").read_bytes() == key_pem + chain
    key = serialization.load_pem_private_key(key_pem, None)
    leaf = x509.load_pem_x509_certificate(chain)
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(*der) == leaf.public_key().public_bytes(*der)
    assert trustbundle.verify_chain(chain.decode(), (vol / "ca.pem").read_text()) == leaf
    r = subprocess.run(["openssl", "verify", "-CAfile", str(vol / "ca.pem"), str(vol / "tls.crt")],
                       check=False, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().endswith(": OK"), r.stdout + r.stderr
    cluster.kubectl("delete", "pod", name, "--grace-period=0")


def test_denied_request_keeps_pod_from_starting(cluster, e2e_signer):
    cluster.kubectl("apply", "-f", "-", input=to_yaml([pod("refused", DENY, "ECDSAP256")]))

    def denied_events():
        evs = cluster.kubectl_json("get", "events", "--field-selector", "involvedObject.name=refused")["items"]
        return [e for e in evs if e["reason"] == "Denied"] and \
            [e for e in evs if e["reason"] == "FailedMount" and "denied" in e["message"]]
    wait_for(denied_events, timeout=60)
    evs = cluster.kubectl_json("get", "events", "--field-selector", "involvedObject.name=refused")["items"]
    mine = next(e for e in evs if e["reason"] == "Denied")  # upstream's kubelet: the condition's type
    assert mine["type"] == "Warning" and mine["message"].startswith("PodCertificateRequest default/")
    assert mine["message"].endswith(' was denied, reason="PolicyRefused", message="e2e signer refuses every request"')
    # the kubelet sets the volume up again (backing off from 1 s): where a second request would be made
    wait_for(lambda: [e for e in cluster.kubectl_json("get", "events", "--field-selector",
                                                      "involvedObject.name=refused,reason=FailedMount")["items"]
                      if "denied" in e["message"] and e.get("count", 1) >= 2], 30, "a second FailedMount after the denial")
    p = cluster.kubectl_json("get", "pod", "refused")
    assert p["status"]["phase"] == "Pending"
    assert p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    pcrs = [r for r in cluster.kubectl_json("get", "podcertificaterequests")["items"]
            if r["spec"]["podUID"] == p["metadata"]["uid"]]
    assert len(pcrs) == 1, "a denial is final: no second request"
    assert f'kubelet_podcertificate_states{{signer_name="{DENY}",state="denied"}} 1' in kubelet_metrics(cluster, p)
    cluster.kubectl("delete", "pod", "refused", "--grace-period=0")


def test_an_out_of_tree_signer_issues_through_the_api(cluster, e2e_signer):
    cluster.kubectl("apply", "-f", "-", input=to_yaml([pod("outside", FAST, "ECDSAP256", maxExpirationSeconds=3600)]))
    p = running(cluster, "outside")
    pcr = request_of(cluster, p)
    assert pcr["spec"]["signerName"] == FAST
    vol = volume(cluster, p)
    cert = x509.load_pem_x509_certificate((vol / "tls.crt").read_bytes())
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds() == 3600
    assert trustbundle.verify_chain((vol / "tls.crt").read_text(), (vol / "ca.pem").read_text()) is not None, \
        "the bundle selected by signerName is the out-of-tree signer's"
    assert f'kubelet_podcertificate_states{{signer_name="{FAST}",state="fresh"}} 1' in kubelet_metrics(cluster, p)
    cluster.kubectl("delete", "pod", "outside", "--grace-period=0")
