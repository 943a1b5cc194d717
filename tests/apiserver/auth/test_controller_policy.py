"""The bootstrap policy's controller roles: every controller kube-controller-manager runs here has
a system:controller:<client name> ClusterRole bound to kube-system/<client name>, and the roles let
each do what upstream's let it (checked through the RBAC authorizer)."""

from nanokube.apiserver.auth import bootstrap_policy, namespace_policy
from nanokube.apiserver.auth.authorizer import Attributes
from nanokube.apiserver.auth.rbac import RBACAuthorizer
from nanokube.controllers.csrsigning import CSRSigningController
from nanokube.controllers.manager import CLIENT_NAMES, CONTROLLERS
from nanokube.machinery.user import User


class _Policy:
    def __init__(self):
        roles, bindings = bootstrap_policy()
        self.objects = {"clusterroles": roles, "clusterrolebindings": bindings, "roles": [], "rolebindings": []}

    def list(self, plural, namespace=None):
        return self.objects[plural]

    def get(self, plural, namespace, name):
        return next((o for o in self.objects[plural] if o["metadata"]["name"] == name), None)


def sa(name: str) -> User:
    return User(f"system:serviceaccount:kube-system:{name}",
                ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))


def allowed(user: User, verb: str, group: str, resource: str, subresource: str = "", namespace: str = "default") -> bool:
    a = Attributes(verb=verb, resource_request=True, group=group, resource=resource, subresource=subresource,
                   namespace=namespace)
    return RBACAuthorizer(_Policy()).authorize(user.name, user.groups, a).allowed


def test_every_controller_has_its_role_and_binding():
    roles, bindings = bootstrap_policy()
    role_names = {r["metadata"]["name"] for r in roles}
    bound = {b["metadata"]["name"]: b for b in bindings}
    ns_roles, ns_bindings = namespace_policy()
    namespaced = {(o["metadata"]["namespace"], "RoleBinding" if "roleRef" in o else "Role", o["metadata"]["name"])
                  for o in ns_roles + ns_bindings}
    for kind in [*CONTROLLERS, CSRSigningController]:
        account = CLIENT_NAMES.get(kind.name, kind.name)
        if account in ("bootstrap-signer", "token-cleaner"):  # upstream's give them Roles where they act alone
            assert {("kube-system", "Role", f"system:controller:{account}"),
                    ("kube-system", "RoleBinding", f"system:controller:{account}")} <= namespaced, kind.name
            continue
        assert f"system:controller:{account}" in role_names, kind.name
        binding = bound[f"system:controller:{account}"]
        assert binding["roleRef"]["name"] == f"system:controller:{account}"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "namespace": "kube-system", "name": account}]


def test_roles_grant_what_upstreams_grant():
    assert allowed(sa("replicaset-controller"), "create", "", "pods")
    assert not allowed(sa("replicaset-controller"), "create", "apps", "replicasets")
    assert allowed(sa("deployment-controller"), "update", "apps", "deployments", "status")
    assert not allowed(sa("deployment-controller"), "patch", "apps", "deployments")
    assert allowed(sa("service-account-controller"), "create", "", "serviceaccounts")
    assert not allowed(sa("namespace-controller"), "create", "", "serviceaccounts")
    assert allowed(sa("endpoint-controller"), "create", "", "endpoints")
    assert not allowed(sa("endpointslice-controller"), "create", "", "endpoints")
    assert allowed(sa("pvc-protection-controller"), "update", "", "persistentvolumeclaims")
    assert not allowed(sa("pvc-protection-controller"), "patch", "", "persistentvolumeclaims")
    assert allowed(sa("generic-garbage-collector"), "delete", "batch", "jobs")
    assert allowed(sa("attachdetach-controller"), "create", "storage.k8s.io", "volumeattachments", namespace="")
    assert allowed(sa("attachdetach-controller"), "patch", "", "nodes", "status", namespace="")
    assert not allowed(sa("attachdetach-controller"), "update", "storage.k8s.io", "volumeattachments", "status",
                       namespace="")
    assert allowed(sa("node-controller"), "delete", "", "pods")
    assert allowed(sa("certificate-controller"), "update", "certificates.k8s.io", "certificatesigningrequests",
                   "approval", namespace="")
