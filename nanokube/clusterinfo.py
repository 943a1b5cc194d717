"""What `kubeadm init` leaves for nodes to join with bootstrap tokens (its bootstrap-token phase),
which `nanokube up` writes once its API server serves: the kube-public/cluster-info ConfigMap (a
kubeconfig of the server and its CA, which the bootstrap signer signs with each signing token),
readable without credentials through a Role bound to system:anonymous; and the bindings that let
kubeadm's token group create certificate requests, have the node client request auto-approved and
read Nodes, and let nodes have their renewals auto-approved; and kubeadm's kubeadm:cluster-admins
binding to cluster-admin (its kubeconfig phase's), the group of the API server's kubelet client
certificate, whose requests the kubelets ask the API server to authorize.

They are written as `kubeadm init` (1.29+) writes them: by admin.conf's user, kubernetes-admin in
kubeadm:cluster-admins, whose power is that binding; so that binding alone is created by
super-admin.conf's user, once admin.conf's has been refused it (EnsureAdminClusterRoleBinding)."""

from __future__ import annotations

import base64

import yaml

from .machinery import bootstraptoken as bt
from .machinery.errors import APIError
from .machinery.user import User
from .pki.ca import CLUSTER_ADMINS, MASTERS, SUPER_ADMIN

#: who writes them: admin.conf's user, cluster-admin by the kubeadm:cluster-admins binding
KUBEADM_USER = User("kubernetes-admin", (CLUSTER_ADMINS, "system:authenticated"))
#: who writes that binding when admin.conf's user may not yet: super-admin.conf's
KUBEADM_SUPER_ADMIN = User(SUPER_ADMIN, (MASTERS, "system:authenticated"))
CLUSTER_INFO_ROLE = "kubeadm:bootstrap-signer-clusterinfo"
_RBAC = "rbac.authorization.k8s.io"
_CSR_ROLE = "system:certificates.k8s.io:certificatesigningrequests:"


def cluster_info_kubeconfig(server: str, ca_pem: bytes) -> str:
    """The kubeconfig cluster-info holds: one unnamed cluster, no user or context (clientcmd's
    writing of kubeadm's, keys sorted)."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "", "preferences": {}, "contexts": None, "users": None,
        "clusters": [{"name": "", "cluster": {"server": server,
                                              "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
    })


def _binding(kind: str, name: str, role_kind: str, role: str, subject: tuple[str, str], namespace: str = "") -> dict:
    return {"apiVersion": f"{_RBAC}/v1", "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
            "roleRef": {"apiGroup": _RBAC, "kind": role_kind, "name": role},
            "subjects": [{"apiGroup": _RBAC, "kind": subject[0], "name": subject[1]}]}


def _objects(server: str, ca_pem: bytes) -> list[tuple[str, dict]]:
    """(plural, object) of everything, in kubeadm's order."""
    pub, group = bt.CLUSTER_INFO_NAMESPACE, ("Group", bt.KUBEADM_GROUP)
    return [
        ("clusterrolebindings", _binding("ClusterRoleBinding", CLUSTER_ADMINS, "ClusterRole", "cluster-admin",
                                         ("Group", CLUSTER_ADMINS))),
        ("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": bt.CLUSTER_INFO, "namespace": pub},
                        "data": {bt.KUBECONFIG_KEY: cluster_info_kubeconfig(server, ca_pem)}}),
        ("roles", {"apiVersion": f"{_RBAC}/v1", "kind": "Role", "metadata": {"name": CLUSTER_INFO_ROLE, "namespace": pub},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                              "resourceNames": [bt.CLUSTER_INFO]}]}),
        ("rolebindings", _binding("RoleBinding", CLUSTER_INFO_ROLE, "Role", CLUSTER_INFO_ROLE,
                                  ("User", "system:anonymous"), pub)),
        ("clusterrolebindings", _binding("ClusterRoleBinding", "kubeadm:kubelet-bootstrap", "ClusterRole",
                                         "system:node-bootstrapper", group)),
        ("clusterrolebindings", _binding("ClusterRoleBinding", "kubeadm:node-autoapprove-bootstrap", "ClusterRole",
                                         _CSR_ROLE + "nodeclient", group)),
        ("clusterrolebindings", _binding("ClusterRoleBinding", "kubeadm:node-autoapprove-certificate-rotation",
                                         "ClusterRole", _CSR_ROLE + "selfnodeclient", ("Group", "system:nodes"))),
        ("clusterroles", {"apiVersion": f"{_RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": "kubeadm:get-nodes"},
                          "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}),
        ("clusterrolebindings", _binding("ClusterRoleBinding", "kubeadm:get-nodes", "ClusterRole", "kubeadm:get-nodes",
                                         group)),
    ]


async def _ensure_cluster_admins(admin, super_admin, binding: dict) -> None:
    """The admin's own binding: created by the admin where it already may (409 if it exists), else by the
    super-admin, its creation by the admin refused as an escalation (403)."""
    try:
        await admin.resource(_RBAC, "v1", "clusterrolebindings").create(binding)
        return
    except APIError as e:
        if e.code == 409:
            return
        if e.code != 403:
            raise
    try:
        await super_admin.resource(_RBAC, "v1", "clusterrolebindings").create(binding)
    except APIError as e:
        if e.code != 409:
            raise


async def publish(admin, super_admin, server: str, ca_pem: bytes) -> None:
    """Create what is missing, as `admin` (KUBEADM_USER's client) save its own binding; cluster-info's
    kubeconfig is written anew when the server moved (a restart on another port), its signatures left
    for the bootstrap signer to redo."""
    (_, cluster_admins), *rest = _objects(server, ca_pem)
    await _ensure_cluster_admins(admin, super_admin, cluster_admins)
    for plural, obj in rest:
        rc = admin.resource("" if plural == "configmaps" else _RBAC, "v1", plural)
        namespace = obj["metadata"].get("namespace")
        try:
            await rc.create(obj, namespace)
        except APIError as e:
            if e.code != 409:
                raise
            if plural == "configmaps":
                found = await rc.get(bt.CLUSTER_INFO, namespace)
                if (found.get("data") or {}).get(bt.KUBECONFIG_KEY) != obj["data"][bt.KUBECONFIG_KEY]:
                    await rc.update({**found, "data": {**(found.get("data") or {}), **obj["data"]}})
