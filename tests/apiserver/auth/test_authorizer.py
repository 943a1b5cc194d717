"""Request → attributes mapping and upstream's Forbidden wording."""

import pytest

from nanokube.apiserver.auth.authorizer import Attributes, Decision, access_review, attributes_for, forbidden, review_attributes


@pytest.mark.parametrize("method,path,query,want", [
    ("GET", "/api/v1/namespaces/default/pods", {}, Attributes("list", "/api/v1/namespaces/default/pods", True, "", "v1", "pods", "", "default", "")),
    ("GET", "/api/v1/namespaces/default/pods", {"watch": "true"}, Attributes("watch", "/api/v1/namespaces/default/pods", True, "", "v1", "pods", "", "default", "")),
    ("GET", "/api/v1/watch/namespaces/ns/pods/p", {}, Attributes("watch", "/api/v1/watch/namespaces/ns/pods/p", True, "", "v1", "pods", "", "ns", "p")),
    # ?watch on an object's own path is a get: RequestInfo turns only a collection's get into a watch
    ("GET", "/api/v1/namespaces/ns/pods/p", {"watch": "true"}, Attributes("get", "/api/v1/namespaces/ns/pods/p", True, "", "v1", "pods", "", "ns", "p")),
    ("PUT", "/api/v1/namespaces/ns/pods/p/status", {}, Attributes("update", "/api/v1/namespaces/ns/pods/p/status", True, "", "v1", "pods", "status", "ns", "p")),
    ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", {}, Attributes("patch", "/apis/apps/v1/namespaces/ns/deployments/d/scale", True, "apps", "v1", "deployments", "scale", "ns", "d")),
    ("DELETE", "/api/v1/namespaces/ns/pods", {}, Attributes("deletecollection", "/api/v1/namespaces/ns/pods", True, "", "v1", "pods", "", "ns", "")),
    ("DELETE", "/api/v1/nodes/n1", {}, Attributes("delete", "/api/v1/nodes/n1", True, "", "v1", "nodes", "", "", "n1")),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {}, Attributes("create", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", True, "authorization.k8s.io", "v1", "selfsubjectaccessreviews")),
    ("GET", "/api/v1/namespaces/foo", {}, Attributes("get", "/api/v1/namespaces/foo", True, "", "v1", "namespaces", "", "foo", "foo")),
    ("PUT", "/api/v1/namespaces/foo/finalize", {}, Attributes("update", "/api/v1/namespaces/foo/finalize", True, "", "v1", "namespaces", "finalize", "foo", "foo")),
    ("GET", "/apis/apps/v1", {}, Attributes("get", "/apis/apps/v1")),
    ("GET", "/apis", {}, Attributes("get", "/apis")),
    ("POST", "/metrics", {}, Attributes("post", "/metrics")),
    # a method RequestInfo does not map (OPTIONS through a proxy) has no verb; only "*" grants it
    ("OPTIONS", "/api/v1/namespaces/ns/pods/p/proxy/x", {}, Attributes("", "/api/v1/namespaces/ns/pods/p/proxy/x", True, "", "v1", "pods", "proxy", "ns", "p")),
])
def test_attributes(method, path, query, want):
    assert attributes_for(method, path, query) == want


def test_forbidden_namespaced_list():
    e = forbidden("alice", attributes_for("GET", "/api/v1/namespaces/default/pods", {}))
    assert (e.code, e.reason) == (403, "Forbidden")
    assert e.message == 'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default"'
    assert e.details == {"group": "", "kind": "pods"}


def test_forbidden_named_cluster_scoped_group():
    e = forbidden("bob", attributes_for("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", {}))
    assert e.message == ('clusterroles.rbac.authorization.k8s.io "admin" is forbidden: User "bob" cannot get resource '
                         '"clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope')
    assert e.details["name"] == "admin"


def test_forbidden_subresource_and_nonresource():
    e = forbidden("bob", attributes_for("PUT", "/api/v1/namespaces/a/pods/p/status", {}))
    assert 'cannot update resource "pods/status" in API group "" in the namespace "a"' in e.message
    assert forbidden("bob", Attributes("get", "/metrics")).message == 'forbidden: User "bob" cannot get path "/metrics"'


def test_access_review_uses_the_named_attributes():
    body = {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "x"}}}
    assert review_attributes(body) == Attributes("get", "", True, "", "", "pods", "", "x", "")
    assert access_review(Decision(True, "because"), body)["status"] == {"allowed": True, "reason": "because"}
    body = {"spec": {"nonResourceAttributes": {"verb": "post", "path": "/x"}}}
    assert review_attributes(body) == Attributes("post", "/x")
    assert access_review(Decision(False), body)["status"] == {"allowed": False}
