"""`nanokube up`'s kubeconfigs, as kubeadm (1.29+) writes admin.conf and super-admin.conf: the
printed KUBECONFIG's user is kubernetes-admin in kubeadm:cluster-admins, cluster-admin by a
ClusterRoleBinding RBAC can take away; DIR/super-admin.conf's is in system:masters, which no
binding grants and none can revoke, as kubernetes-super-admin (the break-glass credential, which the
other tests act as)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .conftest import KUBECTL, wait_for

BINDING = "kubeadm:cluster-admins"


@pytest.fixture(scope="module")
def cluster(session_cluster):
    return session_cluster


def _kubectl_as(cluster, kubeconfig: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": kubeconfig, "KUBECACHEDIR": str(cluster.data_dir / "kubecache")}
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, timeout=60)


def test_the_printed_kubeconfig_is_kubeadms_admin_and_super_admin_conf_its_super_admin(cluster):
    printed = next(line for line in cluster.banner if line.startswith("export KUBECONFIG=")).strip().split("=", 1)[1]
    assert printed == str(cluster.data_dir / "kubeconfig")

    def whoami(kubeconfig: str) -> dict:
        r = _kubectl_as(cluster, kubeconfig, "auth", "whoami", "-o", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["status"]["userInfo"]
    assert whoami(printed) == {"username": "kubernetes-admin", "groups": [BINDING, "system:authenticated"]}
    assert whoami(cluster.kubeconfig) == {"username": "kubernetes-super-admin",
                                          "groups": ["system:masters", "system:authenticated"]}
    assert cluster.kubeconfig == str(cluster.data_dir / "super-admin.conf")
    assert _kubectl_as(cluster, printed, "auth", "can-i", "*", "*").stdout.strip() == "yes"
    binding = cluster.kubectl_json("get", "clusterrolebinding", BINDING)
    saved = {k: binding[k] for k in ("apiVersion", "kind", "roleRef", "subjects")} | {"metadata": {"name": BINDING}}
    assert (saved["roleRef"]["name"], saved["subjects"]) == (
        "cluster-admin", [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": BINDING}])
    cluster.kubectl("delete", "clusterrolebinding", BINDING)
    try:  # RBAC takes the admin's power away; the super-admin keeps it
        wait_for(lambda: "Forbidden" in _kubectl_as(cluster, printed, "get", "pods").stderr, 30, "the admin forbidden")
        assert cluster.kubectl("get", "pods", "-A", "-o", "name").returncode == 0
    finally:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(saved))
    wait_for(lambda: _kubectl_as(cluster, printed, "get", "pods").returncode == 0, 30, "the admin allowed again")


def test_up_writes_kubeadms_objects_as_kubeadm_init_does(cluster):
    """admin.conf's user writes cluster-info and the bootstrap bindings, as field manager kubeadm; its own
    binding, refused to it while it is not yet cluster-admin, is super-admin.conf's user's to create."""
    writes = [e for e in cluster.audit_events() if e["verb"] == "create" and e.get("userAgent") == "kubeadm"
              and e["stage"] == "ResponseComplete"]
    admin = {"username": "kubernetes-admin", "groups": [BINDING, "system:authenticated"]}
    super_admin = {"username": "kubernetes-super-admin", "groups": ["system:masters", "system:authenticated"]}
    assert [(e["objectRef"]["resource"], e["user"], e["responseStatus"]["code"]) for e in writes[:3]] == [
        ("clusterrolebindings", admin, 403), ("clusterrolebindings", super_admin, 201), ("configmaps", admin, 201)]
    assert [writes[1]["objectRef"]["name"], writes[2]["objectRef"]["name"]] == [BINDING, "cluster-info"]
    assert [e["user"] for e in writes[3:]] == [admin] * len(writes[3:]) and len(writes) == 10
    info = cluster.kubectl_json("get", "configmap", "cluster-info", "-n", "kube-public", "--show-managed-fields")
    assert ("kubeadm", "Update") in {(m["manager"], m["operation"]) for m in info["metadata"]["managedFields"]}
