"""Access, rules and token reviews over an in-memory RBAC policy."""

import asyncio

import pytest

from nanokube.apiserver.auth.rbac import RBACAuthorizer
from nanokube.apiserver.auth.reviews import Reviews
from nanokube.machinery.errors import APIError
from nanokube.machinery.user import User
from nanokube.registry.base import all_resources

from .test_rbac import ALICE, Source, binding, role

RES = {r.plural: r for r in all_resources() if r.group in ("authorization.k8s.io", "authentication.k8s.io")}
READ_PODS = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
AUTHZ = RBACAuthorizer(Source(
    roles=[role("reader", READ_PODS, ns="team")],
    rolebindings=[binding("alice-reads", "Role", "reader", ALICE, ns="team")],
    clusterroles=[role("health", [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}])],
    clusterrolebindings=[binding("everyone-health", "ClusterRole", "health",
                                 [{"kind": "Group", "name": "system:authenticated"}])],
))
ALICE_USER = User("alice", ("system:authenticated",), "uid-a", {"scopes": ["x"]})


async def tokens(token, audiences):
    if token != "good":
        return None, [], "invalid bearer token"
    return ALICE_USER, list(audiences or ["https://kubernetes.default.svc.cluster.local"]), ""


async def decide(user, a):
    return AUTHZ.authorize(user.name, user.groups, a)


REVIEWS = Reviews(decide, AUTHZ.rules_for, tokens)


def ask(plural, spec, user=ALICE_USER, namespace=None):
    return asyncio.run(REVIEWS(RES[plural], {"spec": spec}, user, namespace))


def pods(verb, ns="team"):
    return {"verb": verb, "resource": "pods", "namespace": ns}


def test_subject_access_review_asks_about_the_named_subject():
    got = ask("subjectaccessreviews", {"user": "alice", "groups": ["system:authenticated"], "resourceAttributes": pods("list")})
    assert got["kind"] == "SubjectAccessReview" and got["status"]["allowed"] is True
    assert got["status"]["reason"] == 'RBAC: allowed by RoleBinding "alice-reads/team" of Role "reader" to User "alice"'
    assert ask("subjectaccessreviews", {"user": "bob", "resourceAttributes": pods("list")})["status"] == {"allowed": False}
    assert ask("subjectaccessreviews", {"groups": ["system:authenticated"],
                                        "nonResourceAttributes": {"verb": "get", "path": "/healthz"}})["status"]["allowed"]


def test_subject_access_review_validation():
    with pytest.raises(APIError) as e:
        ask("subjectaccessreviews", {"resourceAttributes": pods("get")})
    assert e.value.code == 422
    assert e.value.message == ('SubjectAccessReview.authorization.k8s.io "" is invalid: '
                               'spec.user: Invalid value: "": at least one of user or group must be specified')


def test_local_subject_access_review_is_bound_to_its_namespace():
    got = ask("localsubjectaccessreviews", {"user": "alice", "resourceAttributes": pods("get")}, namespace="team")
    assert got["kind"] == "LocalSubjectAccessReview" and got["metadata"]["namespace"] == "team"
    assert got["status"]["allowed"]
    with pytest.raises(APIError) as e:
        ask("localsubjectaccessreviews", {"user": "alice", "resourceAttributes": pods("get", "other")}, namespace="team")
    assert (e.value.code, e.value.message) == (400, "spec.resourceAttributes.namespace must match namespace: team")
    with pytest.raises(APIError) as e:
        ask("localsubjectaccessreviews", {"user": "alice", "nonResourceAttributes": {"verb": "get", "path": "/x"}}, namespace="team")
    # the internal NonResourceAttributes field.Invalid is handed: Go's field names, in its order
    assert 'spec.nonResourceAttributes: Invalid value: {"Path":"/x","Verb":"get"}: disallowed on this kind of request' \
        in e.value.message


def test_self_subject_rules_review_lists_rules_in_the_namespace():
    status = ask("selfsubjectrulesreviews", {"namespace": "team"})["status"]
    assert status == {"resourceRules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}],
                      "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}], "incomplete": False}
    assert ask("selfsubjectrulesreviews", {"namespace": "other"})["status"]["resourceRules"] == []


def test_self_subject_rules_review_needs_a_namespace_and_echoes_nothing():
    """Found by the fuzzer: a review without a spec was a 500 (KeyError); upstream's REST.Create answers a new
    object (no metadata or spec of the request) and refuses an empty namespace."""
    for spec in ({}, {"namespace": ""}):
        with pytest.raises(APIError) as e:
            ask("selfsubjectrulesreviews", spec)
        assert (e.value.code, e.value.message) == (400, "no namespace on request")
    with pytest.raises(APIError) as e:
        asyncio.run(REVIEWS(RES["selfsubjectrulesreviews"], {}, ALICE_USER))
    assert e.value.code == 400
    got = asyncio.run(REVIEWS(RES["selfsubjectrulesreviews"], {"metadata": {"name": "a", "labels": {"k": "v"}},
                                                              "spec": {"namespace": "team"}}, ALICE_USER))
    assert (got["metadata"], got["spec"]) == ({}, {})  # a zero creationTimestamp is omitted (omitzero, 1.34+)


def test_token_review():
    got = ask("tokenreviews", {"token": "good", "audiences": ["api"]})
    assert got["status"] == {"authenticated": True, "audiences": ["api"], "user": {
        "username": "alice", "uid": "uid-a", "groups": ["system:authenticated"], "extra": {"scopes": ["x"]}}}
    assert ask("tokenreviews", {"token": "bad"})["status"] == {"user": {}, "error": "invalid bearer token"}
    with pytest.raises(APIError) as e:
        ask("tokenreviews", {})
    assert (e.value.code, e.value.message) == (400, "token is required for TokenReview in authentication")


async def test_access_reviews_judge_their_selectors_over_http(tmp_path):
    """A reviewed request's field and label selectors are validated as upstream's
    validateFieldSelectorAttributes does (they were stored into the decision unjudged): raw and
    requirements together, neither, a requirement without its values or with values it may not have,
    a bad label key; an operator this server does not know, and a raw selector that does not parse, pass."""
    from tests.served import send, served
    az = "/apis/authorization.k8s.io/v1"
    sel = "spec.resourceAttributes"
    cases = [
        ({"fieldSelector": {"rawSelector": "a=b", "requirements": [{"key": "a", "operator": "In", "values": ["b"]}]}},
         f'{sel}.fieldSelector.rawSelector: Invalid value: "a=b": may not specified at the same time as requirements'),
        ({"labelSelector": {}}, f"{sel}.labelSelector.requirements: Required value: when {sel}.labelSelector is specified, "
                                "requirements or rawSelector is required"),
        ({"fieldSelector": {"requirements": [{"key": "", "operator": "Bogus"}]}},
         f"{sel}.fieldSelector.requirements[0].key: Required value: must be specified"),
        ({"fieldSelector": {"requirements": [{"key": "k", "operator": "NotIn", "values": []}]}},
         f"{sel}.fieldSelector.requirements[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        ({"labelSelector": {"requirements": [{"key": "k", "operator": "DoesNotExist", "values": ["v"]}]}},
         f"{sel}.labelSelector.requirements[0].values: Forbidden: may not be specified when `operator` is 'Exists' or "
         "'DoesNotExist'"),
        ({"labelSelector": {"requirements": [{"key": "()foo", "operator": "Exists"}]}},
         f'{sel}.labelSelector.requirements[0].key: Invalid value: "()foo": name part must consist of alphanumeric'),
        ({"labelSelector": {"requirements": [{"key": "k", "operator": "Gt", "values": ["1"]}]}}, None),
        ({"fieldSelector": {"rawSelector": "!!!"}}, None),
    ]
    async with served(tmp_path) as (_, api):
        for attrs, message in cases:
            spec = {"resourceAttributes": {"verb": "list", "resource": "pods", **attrs}}
            for path, body in ((f"{az}/subjectaccessreviews", {"spec": {**spec, "user": "u"}}),
                               (f"{az}/selfsubjectaccessreviews", {"spec": spec})):
                code, status = await send(api, "POST", path, body)
                if message is None:
                    assert code == 201, status
                else:
                    assert (code, status["reason"]) == (422, "Invalid"), status
                    assert message in status["message"], status["message"]
        code, status = await send(api, "POST", f"{az}/subjectaccessreviews", {"spec": {"nonResourceAttributes": {"path": "/x"},
                                                                                  "resourceAttributes": {}}})
        assert code == 422 and "at least one of user or group must be specified" in status["message"]
