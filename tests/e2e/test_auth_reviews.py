"""authorization.k8s.io and authentication.k8s.io reviews through the typed
client and `kubectl auth can-i --list`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from .conftest import wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module's one Role goes with the
    namespace it deletes; its token and kubeconfig are of the default ServiceAccount."""
    return session_cluster


@pytest.fixture
def reviews(cluster):
    """The namespace `reviews`, gone (Role and all) after the test, passed or not, before the next
    module of the shared cluster lists what there is."""
    core = client.CoreV1Api(cluster.client())
    core.create_namespace({"metadata": {"name": "reviews"}})
    yield
    core.delete_namespace("reviews")
    wait_for(lambda: not core.list_namespace(field_selector="metadata.name=reviews").items, 60, "reviews deleted")


def test_subject_access_reviews(cluster, reviews):
    api = client.AuthorizationV1Api(cluster.client())
    rbac = client.RbacAuthorizationV1Api(cluster.client())
    rbac.create_namespaced_role("reviews", {"metadata": {"name": "pod-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding("reviews", {"metadata": {"name": "alice"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]})
    sar = api.create_subject_access_review({"spec": {"user": "alice", "resourceAttributes": {
        "namespace": "reviews", "verb": "list", "resource": "pods"}}})
    assert sar.status.allowed and "pod-reader" in sar.status.reason
    request = api.api_client.param_serialize(
        "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body={"spec": {"user": "alice", "resourceAttributes": {"verb": "list", "resource": "pods"}}},
        header_params={"Content-Type": "application/json", "Accept": "application/json"})
    raw = api.api_client.call_api(*request)
    raw.read()
    assert json.loads(raw.data)["metadata"] == {}, "a zero creationTimestamp is omitted (1.34+), not null"
    sar = api.create_subject_access_review({"spec": {"user": "alice", "resourceAttributes": {
        "namespace": "reviews", "verb": "delete", "resource": "pods"}}})
    assert sar.status.allowed is False
    local = api.create_namespaced_local_subject_access_review("reviews", {"metadata": {"namespace": "reviews"}, "spec": {
        "user": "alice", "resourceAttributes": {"namespace": "reviews", "verb": "get", "resource": "pods"}}})
    assert local.status.allowed and local.metadata.namespace == "reviews"
    rules = api.create_self_subject_rules_review({"spec": {"namespace": "reviews"}})
    assert any(r.resources == ["*"] and r.verbs == ["*"] for r in rules.status.resource_rules)


def test_can_i_list(cluster):
    out = cluster.kubectl("auth", "can-i", "--list", "-n", "default").stdout.splitlines()
    assert out[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert ["*.*", "[]", "[]", "[*]"] in [line.split() for line in out]


def test_token_review(cluster):
    core = client.CoreV1Api(cluster.client())
    wait_for(lambda: core.list_namespaced_service_account("default", field_selector="metadata.name=default").items,
             60, "the default ServiceAccount")
    tr = core.create_namespaced_service_account_token("default", "default", {"spec": {"audiences": ["vault"]}})
    auth = client.AuthenticationV1Api(cluster.client())
    review = auth.create_token_review({"spec": {"token": tr.status.token, "audiences": ["vault", "other"]}})
    assert review.status.authenticated and review.status.audiences == ["vault"]
    assert review.status.user.username == "system:serviceaccount:default:default"
    assert "system:serviceaccounts:default" in review.status.user.groups
    wrong = auth.create_token_review({"spec": {"token": tr.status.token}})
    assert not wrong.status.authenticated


def test_impersonation(cluster):
    out = cluster.kubectl("auth", "can-i", "--list", "-n", "default", "--as=alice").stdout
    assert "*.*" not in out and "selfsubjectaccessreviews.authorization.k8s.io" in out
    assert cluster.kubectl("auth", "can-i", "list", "pods", "--as=alice", check=False).stdout.strip() == "no"
    assert cluster.kubectl("auth", "can-i", "list", "pods", "--as=alice", "--as-group=system:masters").stdout.strip() == "yes"
    r = cluster.kubectl("get", "pods", "-n", "default", "--as=system:serviceaccount:default:default", check=False)
    assert r.returncode != 0 and ('pods is forbidden: User "system:serviceaccount:default:default" cannot list '
                                  'resource "pods" in API group "" in the namespace "default"') in r.stderr
    core = client.CoreV1Api(cluster.client())
    wait_for(lambda: core.list_namespaced_service_account("default", field_selector="metadata.name=default").items,
             60, "the default ServiceAccount")
    token = core.create_namespaced_service_account_token("default", "default", {"spec": {}}).status.token
    sa_config = Path(cluster.data_dir) / "sa-kubeconfig"
    sa_config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": {"server": cluster.url, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}]}))
    r = cluster.kubectl("get", "pods", "--kubeconfig", str(sa_config), "--as=alice", check=False)
    assert 'users "alice" is forbidden: User "system:serviceaccount:default:default" cannot impersonate resource ' \
           '"users" in API group "" at the cluster scope' in r.stderr


def test_front_proxy_request_headers(cluster):
    import ssl
    import urllib.error
    import urllib.request

    pki = Path(cluster.data_dir) / "pki"
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "front-proxy-client.crt"), str(pki / "front-proxy-client.key"))

    def get(path, **headers):
        req = urllib.request.Request(cluster.url + path, headers=headers)
        try:
            with urllib.request.urlopen(req, context=ctx) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())
    code, body = get("/api/v1/namespaces/default/configmaps", **{"X-Remote-User": "alice"})
    assert code == 403 and 'User "alice" cannot list resource "configmaps"' in body["message"]
    code, _ = get("/api/v1/namespaces/default/configmaps", **{"X-Remote-User": "alice", "X-Remote-Group": "system:masters"})
    assert code == 200
    # naming no user, the front proxy's certificate is no client CA's either: a 401, not anonymous (upstream's
    # x509 authenticator errs on it, and an error fails the chain)
    code, body = get("/api/v1/namespaces/default/configmaps")
    assert (code, body["reason"]) == (401, "Unauthorized")
