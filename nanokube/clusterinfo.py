"""What `kubeadm init` leaves for nodes to join with bootstrap tokens (its bootstrap-token phase),
which `nanokube up` writes once its API server serves: the kube-public/cluster-info ConfigMap (a
kubeconfig of the server and its CA, which the bootstrap signer signs with each signing token),
readable without credentials through a Role bound to system:anonymous; and the bindings that let
kubeadm's token group create certificate requests, have the node client request auto-approved and
read Nodes, and let nodes have their renewals auto-approved; and kubeadm's kubeadm:cluster-admins
binding to cluster-admin (its kubeconfig phase's), the group of the API server's kubelet client
certificate, whose requests the kubelets ask the API server to authorize."""

from __future__ import annotations

import base64

import yaml

from .machinery import bootstraptoken as bt
from .machinery.errors import APIError
from .machinery.user import User
from .pki.ca import CLUSTER_ADMINS

#: who writes them: kubeadm's admin (a binding's roles are no escalation for a master)
KUBEADM_USER = User("kubernetes-admin", ("system:masters", "system:authenticated"))
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


async def publish(client, server: str, ca_pem: bytes) -> None:
    """Create what is missing; cluster-info's kubeconfig is written anew when the server moved (a
    restart on another port), its signatures left for the bootstrap signer to redo."""
    for plural, obj in _objects(server, ca_pem):
        rc = client.resource("" if plural == "configmaps" else _RBAC, "v1", plural)
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
