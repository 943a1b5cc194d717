"""RBAC evaluation over an in-memory policy, and the default policy; a served decision after policy changes."""

import asyncio

from nanokube.apiserver.auth.authorizer import Attributes, attributes_for
from nanokube.apiserver.auth.rbac import RBACAuthorizer, bootstrap_policy
from tests.served import send, served

G = "rbac.authorization.k8s.io"


class Source:
    def __init__(self, **objs):
        self.objs = objs

    def list(self, plural, namespace=None):
        return [o for o in self.objs.get(plural, []) if namespace is None or o["metadata"].get("namespace") == namespace]

    def get(self, plural, namespace, name):
        return next((o for o in self.list(plural, namespace) if o["metadata"]["name"] == name), None)


def role(name, rules, ns=None, labels=None, **extra):
    md = {"name": name, "labels": labels or {}}
    if ns:
        md["namespace"] = ns
    return {"metadata": md, "rules": rules, **extra}


def binding(name, kind, ref, subjects, ns=None):
    md = {"name": name}
    if ns:
        md["namespace"] = ns
    return {"metadata": md, "roleRef": {"apiGroup": G, "kind": kind, "name": ref}, "subjects": subjects}


ALICE = [{"kind": "User", "apiGroup": G, "name": "alice"}]


def allowed(authz, method, path, user="alice", groups=("system:authenticated",), query=None):
    return authz.authorize(user, groups, attributes_for(method, path, query or {})).allowed


def test_namespaced_role_applies_only_in_its_namespace():
    src = Source(roles=[role("reader", [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}], ns="team")],
                 rolebindings=[binding("r", "Role", "reader", ALICE, ns="team")])
    authz = RBACAuthorizer(src)
    d = authz.authorize("alice", (), attributes_for("GET", "/api/v1/namespaces/team/pods", {}))
    assert d.allowed and d.reason == 'RBAC: allowed by RoleBinding "r/team" of Role "reader" to User "alice"'
    assert not allowed(authz, "GET", "/api/v1/namespaces/default/pods")
    assert not allowed(authz, "GET", "/api/v1/pods")
    assert not allowed(authz, "DELETE", "/api/v1/namespaces/team/pods/p")
    assert not allowed(authz, "GET", "/api/v1/namespaces/team/pods", user="bob")
    assert not allowed(authz, "GET", "/api/v1/namespaces/team/pods/p/status")


def test_subresources_resource_names_and_wildcards():
    rules = [{"verbs": ["update"], "apiGroups": [""], "resources": ["pods/status"]},
             {"verbs": ["get"], "apiGroups": ["apps"], "resources": ["*/scale"]},
             {"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"]}]
    src = Source(clusterroles=[role("c", rules)], clusterrolebindings=[binding("b", "ClusterRole", "c", ALICE)])
    authz = RBACAuthorizer(src)
    assert allowed(authz, "PUT", "/api/v1/namespaces/a/pods/p/status")
    assert not allowed(authz, "PUT", "/api/v1/namespaces/a/pods/p")
    assert allowed(authz, "GET", "/apis/apps/v1/namespaces/a/deployments/d/scale")
    assert not allowed(authz, "GET", "/apis/apps/v1/namespaces/a/deployments/d")
    assert allowed(authz, "DELETE", "/api/v1/namespaces/a/configmaps/mine")
    assert not allowed(authz, "DELETE", "/api/v1/namespaces/a/configmaps/other")
    assert not allowed(authz, "GET", "/api/v1/namespaces/a/configmaps")


def test_rolebinding_to_clusterrole_is_confined_to_its_namespace():
    src = Source(clusterroles=[role("pods", [{"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}])],
                 rolebindings=[binding("b", "ClusterRole", "pods", [{"kind": "Group", "apiGroup": G, "name": "devs"}], ns="x")])
    authz = RBACAuthorizer(src)
    assert allowed(authz, "GET", "/api/v1/namespaces/x/pods", groups=("devs",))
    assert not allowed(authz, "GET", "/api/v1/namespaces/y/pods", groups=("devs",))
    assert not allowed(authz, "GET", "/api/v1/pods", groups=("devs",))


def test_service_account_subject_defaults_to_binding_namespace():
    src = Source(roles=[role("r", [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}], ns="ns")],
                 rolebindings=[binding("b", "Role", "r", [{"kind": "ServiceAccount", "name": "bot"}], ns="ns")])
    authz = RBACAuthorizer(src)
    assert allowed(authz, "GET", "/api/v1/namespaces/ns/secrets/s", user="system:serviceaccount:ns:bot")
    assert not allowed(authz, "GET", "/api/v1/namespaces/ns/secrets/s", user="system:serviceaccount:other:bot")


def test_non_resource_urls_with_prefix_wildcard():
    src = Source(clusterroles=[role("d", [{"verbs": ["get"], "nonResourceURLs": ["/apis/*", "/version"]}])],
                 clusterrolebindings=[binding("b", "ClusterRole", "d", ALICE)])
    authz = RBACAuthorizer(src)
    assert allowed(authz, "GET", "/apis/apps/v1")
    assert allowed(authz, "GET", "/version")
    assert not allowed(authz, "GET", "/metrics")
    assert not allowed(authz, "POST", "/version")


def test_aggregated_cluster_role_collects_labelled_rules():
    agg = role("agg", [], aggregationRule={"clusterRoleSelectors": [{"matchLabels": {"x/agg": "true"}}]})
    part = role("part", [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}], labels={"x/agg": "true"})
    other = role("other", [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}])
    authz = RBACAuthorizer(Source(clusterroles=[agg, part, other], clusterrolebindings=[binding("b", "ClusterRole", "agg", ALICE)]))
    assert allowed(authz, "GET", "/api/v1/namespaces/a/pods/p")
    assert not allowed(authz, "GET", "/api/v1/namespaces/a/secrets/s")


def test_masters_always_allowed():
    authz = RBACAuthorizer(Source())
    assert allowed(authz, "DELETE", "/api/v1/nodes/n", user="x", groups=("system:masters",))
    assert not allowed(authz, "DELETE", "/api/v1/nodes/n", user="x")


def test_default_policy():
    roles, bindings = bootstrap_policy()
    authz = RBACAuthorizer(Source(clusterroles=roles, clusterrolebindings=bindings))
    auth = ("system:authenticated",)
    assert allowed(authz, "GET", "/apis", groups=auth)
    assert allowed(authz, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", groups=auth)
    assert not allowed(authz, "GET", "/api/v1/namespaces/default/pods", groups=auth)
    assert allowed(authz, "GET", "/healthz", groups=("system:unauthenticated",))
    # system:node binds nobody (the Node authorizer grants a node its rules); the in-process agents are bound
    assert not allowed(authz, "PUT", "/api/v1/nodes/n1/status", user="system:node:n1", groups=("system:nodes",))
    assert allowed(authz, "PUT", "/api/v1/nodes/n1/status", user="system:node-agents", groups=("system:nodes",))
    assert allowed(authz, "GET", "/apis/certificates.k8s.io/v1/clustertrustbundles", user="system:serviceaccount:a:b",
                   groups=("system:serviceaccounts",))
    signer = "system:serviceaccount:kube-system:pod-identity-signer"
    sign = Attributes("sign", "", True, "certificates.k8s.io", "v1", "signers", "", "", "nanokube.io/pod-identity")
    assert authz.authorize(signer, auth, sign).allowed
    assert not authz.authorize(signer, auth, Attributes("sign", "", True, "certificates.k8s.io", "v1", "signers", "", "", "example.com/x")).allowed
    names = {r["metadata"]["name"]: r for r in roles}
    for want in ("cluster-admin", "admin", "edit", "view", "system:discovery", "system:public-info-viewer",
                 "system:basic-user", "system:node"):
        assert want in names
    # admin/edit/view aggregate: edit may write deployments, view only read them, and admin manages roles
    def bound_to(name):  # alice bound to the ClusterRole in namespace ns
        return RBACAuthorizer(Source(clusterroles=roles, clusterrolebindings=bindings,
                                     rolebindings=[binding("t", "ClusterRole", name, ALICE, ns="ns")]))
    for name, method, ok in (("view", "GET", True), ("view", "POST", False), ("edit", "POST", True), ("admin", "POST", True)):
        a = Attributes("get" if method == "GET" else "create", "", True, "apps", "v1", "deployments", "", "ns")
        assert bound_to(name).authorize("alice", (), a).allowed == ok
    a = Attributes("create", "", True, G, "v1", "roles", "", "ns")
    assert bound_to("admin").authorize("alice", (), a).reason == \
        'RBAC: allowed by RoleBinding "t/ns" of ClusterRole "admin" to User "alice"'
    assert not bound_to("edit").authorize("alice", (), a).allowed


def test_kubelet_api_admin_reaches_the_nodes_proxy():
    roles, bindings = bootstrap_policy()
    grant = binding("debug", "ClusterRole", "system:kubelet-api-admin", ALICE)
    authz = RBACAuthorizer(Source(clusterroles=roles, clusterrolebindings=[*bindings, grant]))
    for method in ("GET", "POST", "DELETE"):
        assert allowed(authz, method, "/api/v1/nodes/n1/proxy/stats/summary")
        assert not allowed(authz, method, "/api/v1/nodes/n1/proxy/stats/summary", user="bob")
    assert allowed(authz, "GET", "/api/v1/nodes")
    assert not allowed(authz, "DELETE", "/api/v1/nodes/n1")


async def test_a_served_decision_follows_each_change_of_roles_and_bindings(tmp_path):
    """What a user's bindings grant is resolved once per change of any role or binding: each
    change below (a binding made, a role's rules changed, an aggregated role's part added, a
    binding deleted) decides the next request."""
    async with served(tmp_path) as (_, api):
        def as_bob(path):
            r = api.rest_client.pool_manager.request("GET", api.configuration.host + path,
                                                     headers={"Impersonate-User": "bob"})
            return r.status
        pods, nodes = "/api/v1/namespaces/default/pods", "/api/v1/nodes"
        rbac = f"/apis/{G}/v1"
        read = {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}
        assert await asyncio.to_thread(as_bob, pods) == 403
        assert (await send(api, "POST", f"{rbac}/namespaces/default/roles",
                           {"metadata": {"name": "r"}, "rules": [read]}))[0] == 201
        assert await asyncio.to_thread(as_bob, pods) == 403  # bound to nothing yet
        assert (await send(api, "POST", f"{rbac}/namespaces/default/rolebindings",
                           binding("b", "Role", "r", [{"kind": "User", "apiGroup": G, "name": "bob"}])))[0] == 201
        assert await asyncio.to_thread(as_bob, pods) == 200
        assert (await send(api, "PATCH", f"{rbac}/namespaces/default/roles/r", {"rules": [{**read, "verbs": ["get"]}]},
                           "application/merge-patch+json"))[0] == 200
        assert await asyncio.to_thread(as_bob, pods) == 403
        assert (await send(api, "POST", f"{rbac}/clusterroles", {"metadata": {"name": "agg"}, "aggregationRule": {
            "clusterRoleSelectors": [{"matchLabels": {"to": "agg"}}]}}))[0] == 201
        assert (await send(api, "POST", f"{rbac}/clusterrolebindings",
                           binding("agg", "ClusterRole", "agg", [{"kind": "User", "apiGroup": G, "name": "bob"}])))[0] == 201
        assert await asyncio.to_thread(as_bob, nodes) == 403
        assert (await send(api, "POST", f"{rbac}/clusterroles", {"metadata": {"name": "part", "labels": {"to": "agg"}},
                                                                  "rules": [{**read, "resources": ["nodes"]}]}))[0] == 201
        assert await asyncio.to_thread(as_bob, nodes) == 200
        assert (await send(api, "DELETE", f"{rbac}/clusterrolebindings/agg"))[0] == 200
        assert await asyncio.to_thread(as_bob, nodes) == 403
