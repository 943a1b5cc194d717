"""Security end to end: RBAC for a client-certificate user (403 wording,
`kubectl auth can-i`), unauthenticated requests, and pod certificates issued
by the built-in signer through the API and verified against its published
ClusterTrustBundle."""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from nanokube.pki.ca import KeyPair, issue
from nanokube.pki.trustbundle import verify_chain
from .conftest import wait_for
from tests.e2e.manifests import to_yaml

G = "rbac.authorization.k8s.io"


@pytest.fixture(scope="module")
def alice(cluster, tmp_path_factory):
    """kubectl flags for user alice, who may read pods in namespace `team` only."""
    pki = cluster.data_dir / "pki"
    ca = KeyPair((pki / "ca.crt").read_bytes(), (pki / "ca.key").read_bytes())
    kp = issue(ca, "alice", organizations=("dev",), client=True, days=1)
    with open(cluster.kubeconfig) as f:
        config = yaml.safe_load(f)
    for u in config["users"]:
        u["user"] = {"client-certificate-data": base64.b64encode(kp.cert_pem).decode(),
                     "client-key-data": base64.b64encode(kp.key_pem).decode()}
    path = tmp_path_factory.mktemp("alice") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {"apiVersion": f"{G}/v1", "kind": "Role", "metadata": {"name": "pod-reader", "namespace": "team"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": f"{G}/v1", "kind": "RoleBinding", "metadata": {"name": "alice-reads", "namespace": "team"},
         "roleRef": {"apiGroup": G, "kind": "Role", "name": "pod-reader"},
         "subjects": [{"apiGroup": G, "kind": "User", "name": "alice"}]},
    ]
    cluster.kubectl("apply", "-f", "-", input=to_yaml(docs))
    return ("--kubeconfig", str(path))


def test_role_user_is_confined_to_its_namespace(cluster, alice):
    assert cluster.kubectl(*alice, "get", "pods", "-n", "team").returncode == 0
    r = cluster.kubectl(*alice, "get", "pods", "-n", "default", check=False)
    assert r.returncode != 0
    assert 'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" ' \
           'in the namespace "default"' in r.stderr
    r = cluster.kubectl(*alice, "delete", "pod", "x", "-n", "team", check=False)
    assert 'pods "x" is forbidden: User "alice" cannot delete resource "pods" in API group "" in the namespace "team"' in r.stderr
    r = cluster.kubectl(*alice, "get", "clusterroles", check=False)
    assert 'User "alice" cannot list resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope' in r.stderr


def test_auth_can_i(cluster, alice):
    assert cluster.kubectl(*alice, "auth", "can-i", "list", "pods", "-n", "team").stdout.strip() == "yes"
    r = cluster.kubectl(*alice, "auth", "can-i", "list", "pods", "-n", "default", check=False)
    assert (r.returncode, r.stdout.strip()) == (1, "no")
    r = cluster.kubectl(*alice, "auth", "can-i", "create", "pods", "-n", "team", check=False)
    assert r.stdout.strip() == "no"
    assert cluster.kubectl("auth", "can-i", "delete", "nodes").stdout.strip() == "yes"


def test_default_roles_are_served(cluster):
    roles = {r["metadata"]["name"] for r in cluster.kubectl_json("get", "clusterroles")["items"]}
    assert {"cluster-admin", "admin", "edit", "view", "system:discovery", "system:node"} <= roles
    crb = cluster.kubectl_json("get", "clusterrolebinding", "cluster-admin")
    assert crb["subjects"] == [{"apiGroup": G, "kind": "Group", "name": "system:masters"}]


def _get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), context=ctx, timeout=10) as resp:
            return resp.status, {}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_requests_without_credentials(cluster):
    assert _get(cluster.url + "/healthz")[0] == 200
    code, body = _get(cluster.url + "/api/v1/namespaces/default/pods")
    assert code == 403
    assert body["message"] == 'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default"'
    code, body = _get(cluster.url + "/api/v1/pods", {"Authorization": "Bearer not-a-token"})
    assert (code, body["reason"]) == (401, "Unauthorized")


def _stub(key) -> str:
    algo = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([])).sign(key, algo)
    return base64.b64encode(csr.public_bytes(serialization.Encoding.DER)).decode()


def _request(name: str, version: str = "v1", **spec) -> str:
    return json.dumps({"apiVersion": f"certificates.k8s.io/{version}", "kind": "PodCertificateRequest",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"signerName": "nanokube.io/pod-identity", "podName": "web-0", "podUID": "uid-pod",
                                "serviceAccountName": "web", "serviceAccountUID": "uid-sa", "nodeName": "node-1",
                                "nodeUID": "uid-node", **spec}})


def _settled(cluster, name: str) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        obj = cluster.kubectl_json("get", "podcertificaterequests.v1.certificates.k8s.io", name, "-n", "default")
        if (obj.get("status") or {}).get("conditions"):
            return obj
        time.sleep(0.2)
    raise AssertionError(f"request {name} was never issued or denied")


@pytest.mark.parametrize("make", [lambda: ec.generate_private_key(ec.SECP256R1()), ed25519.Ed25519PrivateKey.generate],
                         ids=["ecdsa-p256", "ed25519"])
def test_pod_certificate_is_issued_and_verifies_against_the_bundle(cluster, make, request):
    name = f"req-{request.node.callspec.id}"
    key = make()
    cluster.kubectl("create", "-f", "-", input=_request(name, stubPKCS10Request=_stub(key)))
    st = _settled(cluster, name)["status"]
    assert [(c["type"], c["status"]) for c in st["conditions"]] == [("Issued", "True")]
    bundle = cluster.kubectl_json("get", "clustertrustbundle", "nanokube.io:pod-identity:ca")
    assert bundle["spec"]["signerName"] == "nanokube.io/pod-identity"
    leaf = verify_chain(st["certificateChain"], bundle["spec"]["trustBundle"])
    assert leaf.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == \
        key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == ["spiffe://cluster.local/ns/default/sa/web"]
    assert (cluster.data_dir / "pki" / "signers" / "nanokube.io_pod-identity").is_dir()


def test_rsa_2048_is_rejected(cluster):
    r = cluster.kubectl("create", "-f", "-", input=_request("req-rsa", stubPKCS10Request=_stub(rsa.generate_private_key(65537, 2048))),
                        check=False)
    assert r.returncode != 0
    assert ('The PodCertificateRequest "req-rsa" is invalid: spec.stubPKCS10Request: Invalid value: "2048-bit modulus": '
            "RSA keys must have modulus size 3072 or 4096") in r.stderr


def test_request_without_a_stub_is_denied_unsupported_key_type(cluster):
    """A v1beta1 request carrying only the deprecated pkixPublicKey reaches v1
    with no stub CSR: the signer cannot bind a certificate to it and denies."""
    key = ed25519.Ed25519PrivateKey.generate()
    pkix = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    cluster.kubectl("create", "-f", "-", input=_request(
        "req-legacy", "v1beta1", pkixPublicKey=base64.b64encode(pkix).decode(),
        proofOfPossession=base64.b64encode(key.sign(b"uid-pod")).decode()))
    (cond,) = _settled(cluster, "req-legacy")["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Denied", "True", "UnsupportedKeyType")


@pytest.fixture(scope="module")
def gpu0(cluster, tmp_path_factory):
    """Client-certificate files for node gpu-0's own identity, from the cluster CA."""
    pki = cluster.data_dir / "pki"
    ca = KeyPair((pki / "ca.crt").read_bytes(), (pki / "ca.key").read_bytes())
    kp = issue(ca, "system:node:gpu-0", organizations=("system:nodes",), client=True, days=1)
    d = tmp_path_factory.mktemp("gpu-0")
    (d / "tls.crt").write_bytes(kp.cert_pem)
    (d / "tls.key").write_bytes(kp.key_pem)
    return str(d / "tls.crt"), str(d / "tls.key")


def _call(cluster, creds, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    ctx = ssl.create_default_context(cafile=str(cluster.data_dir / "pki" / "ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(*creds)
    ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
    req = urllib.request.Request(cluster.url + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _bound_pod(name: str, node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node,
                     "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}]}}


def test_node_credentials_reach_only_their_own_pods(cluster, gpu0):
    cluster.kubectl("apply", "-f", "-", input=to_yaml([_bound_pod("here", "gpu-0"), _bound_pod("there", "gpu-1")]))
    assert _call(cluster, gpu0, "GET", "/api/v1/namespaces/default/pods/here")[0] == 200
    code, body = _call(cluster, gpu0, "GET", "/api/v1/namespaces/default/pods/there")
    assert (code, body["message"]) == (403, ('pods "there" is forbidden: User "system:node:gpu-0" cannot get resource '
                                             '"pods" in API group "" in the namespace "default": no relationship found '
                                             "between node 'gpu-0' and this object"))
    code, body = _call(cluster, gpu0, "GET", "/api/v1/pods")
    assert code == 403 and body["message"].endswith("can only list/watch pods with spec.nodeName field selector")
    code, body = _call(cluster, gpu0, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-0")
    assert code == 200 and {p["metadata"]["name"] for p in body["items"]} >= {"here"}
    assert "there" not in {p["metadata"]["name"] for p in body["items"]}
    assert _call(cluster, gpu0, "PATCH", "/api/v1/nodes/gpu-0/status", {"metadata": {"labels": {"x": "y"}}})[0] == 200
    code, body = _call(cluster, gpu0, "PATCH", "/api/v1/nodes/gpu-1/status", {"metadata": {"labels": {"x": "y"}}})
    assert (code, body["message"]) == (403, 'nodes "gpu-1" is forbidden: node "gpu-0" is not allowed to modify node '
                                            '"gpu-1"')
    code, body = _call(cluster, gpu0, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-1",
                       {"metadata": {"labels": {"x": "y"}}})
    assert code == 403 and body["message"].endswith("can only access node lease with the same name as the requesting node")
    assert _call(cluster, gpu0, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-0",
                 {"metadata": {"labels": {"x": "y"}}})[0] == 200


def test_node_credentials_read_and_write_only_their_own_node_objects(cluster, gpu0):
    """AuthorizeNodeWithSelectors' reads (its own Node, its ResourceSlices through spec.nodeName) and
    NodeRestriction's writes: no other node's CSINode, ResourceSlice, pods, tokens or certificates, nor
    the taints and restricted labels of its own Node."""
    def refused(method: str, path: str, body: dict | None = None) -> str:
        code, out = _call(cluster, gpu0, method, path, body)
        assert code == 403, (method, path, out)
        return out["message"]

    assert refused("GET", "/api/v1/nodes") == ('nodes is forbidden: User "system:node:gpu-0" cannot list resource '
                                               '"nodes" in API group "" at the cluster scope: node \'gpu-0\' cannot '
                                               "read all nodes, only its own Node object")
    assert refused("GET", "/api/v1/nodes/gpu-1").endswith("node 'gpu-0' cannot read 'gpu-1', only its own Node object")
    code, own = _call(cluster, gpu0, "GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dgpu-0")
    assert code == 200 and [n["metadata"]["name"] for n in own["items"]] == ["gpu-0"]
    assert refused("GET", "/apis/storage.k8s.io/v1/csinodes/gpu-1").endswith(
        "can only access CSINode with the same name as the requesting node")
    slices = "/apis/resource.k8s.io/v1/resourceslices"
    assert refused("GET", slices).endswith("can only list/watch/deletecollection resourceslices with nodeName field selector")
    code, listed = _call(cluster, gpu0, "GET", f"{slices}?fieldSelector=spec.nodeName%3Dgpu-0")
    assert code == 200 and listed["items"] and {s["spec"]["nodeName"] for s in listed["items"]} == {"gpu-0"}
    others = cluster.kubectl_json("get", "resourceslices", "--field-selector=spec.nodeName=gpu-1")["items"]
    assert refused("DELETE", f"{slices}/{others[0]['metadata']['name']}").endswith(
        "no relationship found between node 'gpu-0' and this object")
    stolen = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "gpu-1-stolen"},
              "spec": {"driver": "gpu.nanokube.io", "nodeName": "gpu-1",
                       "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1}, "devices": []}}
    assert refused("POST", slices, stolen) == ('resourceslices.resource.k8s.io "gpu-1-stolen" is forbidden: can only '
                                               "create ResourceSlice with the same NodeName as the requesting node")

    for change, why in ((None, "is not allowed to modify labels: node-restriction.kubernetes.io/trusted"),
                        ({"taints": [{"key": "x", "effect": "NoSchedule"}]}, 'node "gpu-0" is not allowed to modify taints')):
        body = {"spec": change} if change else {"metadata": {"labels": {"node-restriction.kubernetes.io/trusted": "yes"}}}
        assert refused("PATCH", "/api/v1/nodes/gpu-0", body) == f'nodes "gpu-0" is forbidden: {why}'
    assert _call(cluster, gpu0, "PATCH", "/api/v1/nodes/gpu-0", {"metadata": {"labels": {"example.com/own": "y"}}})[0] == 200

    cluster.kubectl("apply", "-f", "-", input=to_yaml([_bound_pod("here", "gpu-0"), _bound_pod("there", "gpu-1")]))
    there = cluster.kubectl_json("get", "pod", "there")
    assert refused("DELETE", "/api/v1/namespaces/default/pods/there") == (
        'pods "there" is forbidden: node "gpu-0" can only delete pods with spec.nodeName set to itself')
    assert refused("POST", "/api/v1/namespaces/default/pods/there/eviction",
                   {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "there"}}) == (
        'pods "there" is forbidden: node gpu-0 can only evict pods with spec.nodeName set to itself')
    # the default service account is here's too, so the Node authorizer allows the request; its binding is refused
    token = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
        "audiences": [], "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "there",
                                            "uid": there["metadata"]["uid"]}}}
    assert refused("POST", "/api/v1/namespaces/default/serviceaccounts/default/token", token) == (
        'serviceaccounts "default" is forbidden: node requested token bound to a pod scheduled on a different node')
    assert cluster.kubectl_json("get", "pod", "there")["metadata"]["uid"] == there["metadata"]["uid"]
    key = ec.generate_private_key(ec.SECP256R1())
    other = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
        x509.NameAttribute(NameOID.COMMON_NAME, "system:node:gpu-1")])).sign(key, hashes.SHA256())
    csr = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "gpu-1-by-gpu-0"},
           "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet", "usages": ["digital signature", "client auth"],
                    "request": base64.b64encode(other.public_bytes(serialization.Encoding.PEM)).decode()}}
    assert refused("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", csr) == (
        'certificatesigningrequests.certificates.k8s.io "gpu-1-by-gpu-0" is forbidden: can only create a node CSR with '
        "CN=system:node:gpu-0")


def test_node_tokens_are_for_the_audiences_its_pods_use(cluster, gpu0):
    """ServiceAccountNodeAudienceRestriction: a node's TokenRequest for its pod names at most one
    audience, one the pod's volumes use (its projected token's: the API server's, "") unless an admin
    lets the node `request-serviceaccounts-token-audience` on it."""
    cluster.kubectl("apply", "-f", "-", input=to_yaml([_bound_pod("here", "gpu-0")]))
    here = cluster.kubectl_json("get", "pod", "here")
    path = "/api/v1/namespaces/default/serviceaccounts/default/token"

    def request(*audiences: str) -> tuple[int, dict]:
        return _call(cluster, gpu0, "POST", path, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                                   "spec": {"audiences": list(audiences), "boundObjectRef": {
                                                       "apiVersion": "v1", "kind": "Pod", "name": "here",
                                                       "uid": here["metadata"]["uid"]}}})

    code, out = request()
    assert code == 201 and out["status"]["token"]
    assert request("vault")[1]["message"] == ('serviceaccounts "default" is forbidden: audience "vault" not found in pod '
                                              "spec volume, system:node:gpu-0 is not authorized to request tokens for "
                                              "this audience")
    assert request("vault", "")[1]["message"] == 'serviceaccounts "default" is forbidden: node may only request 0 or 1 audiences'
    cluster.kubectl("apply", "-f", "-", input=to_yaml([
        {"apiVersion": f"{G}/v1", "kind": "ClusterRole", "metadata": {"name": "gpu-0-vault"},
         "rules": [{"apiGroups": [""], "resources": ["vault"], "verbs": ["request-serviceaccounts-token-audience"]}]},
        {"apiVersion": f"{G}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "gpu-0-vault"},
         "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "gpu-0-vault"},
         "subjects": [{"apiGroup": G, "kind": "User", "name": "system:node:gpu-0"}]}]))
    try:
        code, out = wait_for(lambda: (r := request("vault"))[0] != 403 and r, what="the audience granted")
        assert (code, out["status"]["token"] != "") == (201, True)
    finally:
        cluster.kubectl("delete", "clusterrolebinding/gpu-0-vault", "clusterrole/gpu-0-vault")


def test_a_subject_access_review_asks_the_node_authorizer_with_its_field_selector(cluster):
    """A SubjectAccessReview's resourceAttributes.fieldSelector (rawSelector, or requirements of In or
    NotIn with one value) reaches the Node authorizer as a list's selector does."""
    def review(**selector) -> dict:
        attributes = {"verb": "list", "resource": "pods", **({"fieldSelector": selector} if selector else {})}
        sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": "system:node:gpu-0", "groups": ["system:nodes", "system:authenticated"],
            "resourceAttributes": attributes}}
        return json.loads(cluster.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(sar)).stdout)["status"]

    assert review() == {"allowed": False, "reason": "can only list/watch pods with spec.nodeName field selector"}
    assert review(rawSelector="spec.nodeName=gpu-0") == {"allowed": True}
    assert review(requirements=[{"key": "spec.nodeName", "operator": "In", "values": ["gpu-0"]}]) == {"allowed": True}
    assert review(requirements=[{"key": "spec.nodeName", "operator": "In", "values": ["gpu-0", "gpu-1"]}])["allowed"] is False


def test_a_node_identity_naming_no_node_is_refused_by_both(cluster):
    """`system:node:` in system:nodes names no node: the Node authorizer refuses it with why, and
    NodeRestriction any write an admin's binding lets through."""
    who = ["--as=system:node:", "--as-group=system:nodes"]
    r = cluster.kubectl(*who, "get", "pods", check=False)
    assert r.returncode != 0 and 'unknown node for user "system:node:"' in r.stderr, r.stderr
    cluster.kubectl("create", "clusterrole", "nameless-writer", "--verb=create", "--resource=configmaps")
    cluster.kubectl("create", "clusterrolebinding", "nameless-writer", "--clusterrole=nameless-writer",
                    "--user=system:node:")
    try:
        r = wait_for(lambda: "could not determine" in (r := cluster.kubectl(*who, "create", "configmap", "nameless",
                                                                             check=False)).stderr and r,
                     what="the binding applied")
        assert 'configmaps "nameless" is forbidden: could not determine node from user "system:node:"' in r.stderr
    finally:
        cluster.kubectl("delete", "clusterrolebinding/nameless-writer", "clusterrole/nameless-writer")


def test_an_admins_binding_grants_a_node_what_the_node_authorizer_refused(cluster, gpu0):
    """The default system:node binding names nobody (the Node authorizer grants a node the role's
    rules itself), and the Node authorizer's refusal of a Secret no pod of the node uses is no
    opinion: a Role an admin binds the node to grants it."""
    assert "subjects" not in yaml.safe_load(cluster.kubectl("get", "clusterrolebinding", "system:node", "-o", "yaml").stdout)
    cluster.kubectl("create", "secret", "generic", "node-extra", "--from-literal=k=v")
    path = "/api/v1/namespaces/default/secrets/node-extra"
    code, body = _call(cluster, gpu0, "GET", path)
    assert code == 403 and body["message"].endswith("no relationship found between node 'gpu-0' and this object")
    cluster.kubectl("create", "role", "node-extra-reader", "--verb=get", "--resource=secrets", "--resource-name=node-extra")
    cluster.kubectl("create", "rolebinding", "node-extra-reader", "--role=node-extra-reader", "--user=system:node:gpu-0")
    try:
        code, body = wait_for(lambda: (r := _call(cluster, gpu0, "GET", path))[0] != 403 and r, what="the binding applied")
        assert (code, body["data"]) == (200, {"k": base64.b64encode(b"v").decode()})
    finally:
        cluster.kubectl("delete", "rolebinding/node-extra-reader", "role/node-extra-reader", "secret/node-extra")


def test_node_cannot_request_or_sign_for_other_nodes_pods(cluster, gpu0):
    cluster.kubectl("apply", "-f", "-", input=to_yaml([_bound_pod("there", "gpu-1")]))
    there = cluster.kubectl_json("get", "pod", "there")
    sa = cluster.kubectl_json("get", "serviceaccount", "default")
    node = cluster.kubectl_json("get", "node", "gpu-0")
    spec = {"signerName": "nanokube.io/pod-identity", "podName": "there", "podUID": there["metadata"]["uid"],
            "serviceAccountName": "default", "serviceAccountUID": sa["metadata"]["uid"], "nodeName": "gpu-0",
            "nodeUID": node["metadata"]["uid"], "stubPKCS10Request": _stub(ec.generate_private_key(ec.SECP256R1()))}
    body = {"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest",
            "metadata": {"name": "req-stolen", "namespace": "default"}, "spec": spec}
    path = "/apis/certificates.k8s.io/v1/namespaces/default/podcertificaterequests"
    code, out = _call(cluster, gpu0, "POST", path, body)
    assert (code, out["message"]) == (403, ('podcertificaterequests.certificates.k8s.io "req-stolen" is forbidden: '
                                           'pod "there" is not bound to node "gpu-0"'))
    code, out = _call(cluster, gpu0, "POST", path, {**body, "spec": {**spec, "nodeName": "gpu-1"}})
    assert code == 403 and out["message"].endswith('PodCertificateRequest.Spec.NodeName="gpu-1", which is not the '
                                                   'requesting node "gpu-0"')
    # its own pod's request is for a signer the pod's podCertificate volume names (1.37's NodeRestriction)
    certs = {**_bound_pod("here-certs", "gpu-0"), "spec": {**_bound_pod("here-certs", "gpu-0")["spec"], "volumes": [
        {"name": "id", "projected": {"sources": [{"podCertificate": {
            "signerName": "nanokube.io/pod-identity", "keyType": "ED25519", "credentialBundlePath": "bundle.pem"}}]}}]}}
    cluster.kubectl("apply", "-f", "-", input=to_yaml([_bound_pod("here", "gpu-0"), certs]))
    answers = {}
    for pod in ("here", "here-certs"):
        uid = cluster.kubectl_json("get", "pod", pod)["metadata"]["uid"]
        answers[pod] = _call(cluster, gpu0, "POST", path, {**body, "metadata": {"generateName": "req-", "namespace": "default"},
                                                           "spec": {**spec, "podName": pod, "podUID": uid}})
    assert (answers["here-certs"][0], answers["here-certs"][1]["spec"]["podName"]) == (201, "here-certs")
    code, out = answers["here"]
    assert code == 403 and out["message"].endswith(
        'is forbidden: signer name "nanokube.io/pod-identity" not found in pod spec volume, system:node:gpu-0 is not '
        "authorized to request pod certificates for this signer")
    cluster.kubectl("create", "-f", "-", input=_request("req-for-signing", stubPKCS10Request=_stub(
        ec.generate_private_key(ec.SECP256R1()))))
    code, out = _call(cluster, gpu0, "PATCH", f"{path}/req-for-signing/status", {"status": {"conditions": []}})
    assert code == 403 and 'cannot patch resource "podcertificaterequests/status"' in out["message"]
    code, out = _call(cluster, gpu0, "POST",
                      "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                      {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {
                          "resourceAttributes": {"group": "certificates.k8s.io", "resource": "signers", "verb": "sign",
                                                 "name": "nanokube.io/pod-identity"}}})
    assert code == 201 and out["status"]["allowed"] is False


def test_trust_bundle_for_a_signer_needs_attest(cluster, alice):
    ca_pem = (cluster.data_dir / "pki" / "ca.crt").read_text()
    cluster.kubectl("apply", "-f", "-", input=to_yaml([
        {"apiVersion": f"{G}/v1", "kind": "ClusterRole", "metadata": {"name": "bundle-writer"},
         "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["clustertrustbundles"], "verbs": ["create"]}]},
        {"apiVersion": f"{G}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "alice-bundles"},
         "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "bundle-writer"},
         "subjects": [{"apiGroup": G, "kind": "User", "name": "alice"}]}]))
    bundle = {"apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle",
              "metadata": {"name": "example.com:foo:abc"}, "spec": {"signerName": "example.com/foo", "trustBundle": ca_pem}}
    r = cluster.kubectl(*alice, "create", "-f", "-", input=to_yaml([bundle]), check=False)
    assert r.returncode != 0
    assert ('clustertrustbundles.certificates.k8s.io "example.com:foo:abc" is forbidden: user not permitted to attest '
            'for signerName "example.com/foo"') in r.stderr
    cluster.kubectl("apply", "-f", "-", input=to_yaml([
        {"apiVersion": f"{G}/v1", "kind": "ClusterRole", "metadata": {"name": "example-attester"},
         "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["attest"],
                    "resourceNames": ["example.com/*"]}]},
        {"apiVersion": f"{G}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "alice-attests"},
         "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "example-attester"},
         "subjects": [{"apiGroup": G, "kind": "User", "name": "alice"}]}]))
    cluster.kubectl(*alice, "create", "-f", "-", input=to_yaml([bundle]))
    unsigned = {**bundle, "metadata": {"name": "alice-plain"}, "spec": {"trustBundle": ca_pem}}
    cluster.kubectl(*alice, "create", "-f", "-", input=to_yaml([unsigned]))


def test_writes_are_audited_with_user_and_decision(cluster, alice):
    cluster.kubectl("create", "configmap", "audited", "-n", "team", "--from-literal=a=1")
    cluster.kubectl("get", "configmap", "audited", "-n", "team")
    cluster.kubectl(*alice, "delete", "pod", "nothing", "-n", "team", check=False)
    events = cluster.audit_events()
    created = next(e for e in events if e["verb"] == "create" and e.get("objectRef", {}).get("name") == "audited")
    assert created["apiVersion"] == "audit.k8s.io/v1" and created["stage"] == "ResponseComplete"
    assert "system:masters" in created["user"]["groups"]
    assert created["objectRef"]["resource"] == "configmaps" and created["objectRef"]["namespace"] == "team"
    # the objectRef is the request's, not the answer's: a create logs no uid upstream (kubernetes#100466)
    assert created["responseStatus"]["code"] == 201 and "uid" not in created["objectRef"]
    assert created["annotations"]["authorization.k8s.io/decision"] == "allow"
    assert created["userAgent"].startswith("kubectl")
    assert not [e for e in events if e["verb"] in ("get", "list", "watch")], "reads are not audited"
    refused = next(e for e in reversed(events) if e["user"]["username"] == "alice" and e["verb"] == "delete")
    assert refused["responseStatus"]["code"] == 403 and refused["responseStatus"]["reason"] == "Forbidden"
    assert refused["annotations"]["authorization.k8s.io/decision"] == "forbid"
    assert refused["objectRef"] == {"resource": "pods", "namespace": "team", "name": "nothing", "apiVersion": "v1"}
