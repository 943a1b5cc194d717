"""Helm 4 (helm-python-sdk: Helm's own Go library, pinned in the test extra) against `nanokube up`:
install, upgrade, rollback and uninstall of a local chart with a CRD, a ServiceAccount with its
RBAC, a templated Deployment and a custom resource, each waiting for readiness as `--wait` does."""

from __future__ import annotations

import json

import helm_python
import pytest

NS = "helm"

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.demo.io}
spec:
  group: demo.io
  names: {kind: Gadget, plural: gadgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
"""

TEMPLATES = """apiVersion: v1
kind: ServiceAccount
metadata: {name: {{ .Release.Name }}-sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: {{ .Release.Name }}-reader}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: {{ .Release.Name }}-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ .Release.Name }}-reader}
subjects: [{kind: ServiceAccount, name: {{ .Release.Name }}-sa, namespace: {{ .Release.Namespace }}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}-web}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      serviceAccountName: {{ .Release.Name }}-sa
      containers: [{name: main, image: {{ .Values.image }}, command: [sleep, infinity]}]
---
apiVersion: demo.io/v1
kind: Gadget
metadata: {name: {{ .Release.Name }}-gadget}
spec: {size: {{ .Values.replicas }}}
"""


@pytest.fixture
def chart(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "crds").mkdir()
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\nappVersion: '1.0'\n")
    (tmp_path / "values.yaml").write_text("image: busybox:1.36\nreplicas: 1\n")
    (tmp_path / "crds" / "gadgets.yaml").write_text(CRD)
    (tmp_path / "templates" / "all.yaml").write_text(TEMPLATES)
    return tmp_path


def _web(cluster) -> dict:
    return cluster.kubectl_json("get", "deployment", "demo-web", "-n", NS)


def _ready(deployment: dict, image: str, replicas: int) -> bool:
    status = deployment.get("status") or {}
    return (deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
            and status.get("readyReplicas") == replicas and status.get("updatedReplicas") == replicas)


def test_install_upgrade_rollback_uninstall(cluster, chart):
    helm = helm_python.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=NS)
    helm.install(chart, "demo", namespace=NS, create_namespace=True, wait="watcher", timeout=60)
    assert _ready(_web(cluster), "busybox:1.36", 1)
    assert cluster.kubectl_json("get", "crd", "gadgets.demo.io")["spec"]["group"] == "demo.io"
    assert cluster.kubectl_json("get", "gadgets", "demo-gadget", "-n", NS)["spec"] == {"size": 1}
    binding = cluster.kubectl_json("get", "rolebinding", "demo-reader", "-n", NS)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo-sa", "namespace": NS}]
    assert cluster.kubectl("auth", "can-i", "list", "configmaps", "-n", NS,
                           f"--as=system:serviceaccount:{NS}:demo-sa").stdout.strip() == "yes"
    # Helm 4 writes by server-side apply (the field manager is the process's name, as client-go defaults it)
    shown = cluster.kubectl("get", "deployment", "demo-web", "-n", NS, "--show-managed-fields", "-o", "json").stdout
    applied = [m for m in json.loads(shown)["metadata"]["managedFields"] if m["operation"] == "Apply"]
    assert len(applied) == 1 and "f:template" in applied[0]["fieldsV1"]["f:spec"], applied

    helm.upgrade(chart, "demo", {"image": "busybox:1.37", "replicas": 2}, namespace=NS, wait="watcher", timeout=60)
    assert _ready(_web(cluster), "busybox:1.37", 2)
    assert cluster.kubectl_json("get", "gadgets", "demo-gadget", "-n", NS)["spec"] == {"size": 2}

    helm.rollback("demo", version=1, wait="watcher", timeout=60)
    assert _ready(_web(cluster), "busybox:1.36", 1)
    assert [(r["revision"], r["status"]) for r in helm.history("demo")] == [
        (1, "superseded"), (2, "superseded"), (3, "deployed")]
    stored = cluster.kubectl("get", "secrets", "-n", NS, "-l", "owner=helm", "-o", "name").stdout.split()
    assert sorted(stored) == [f"secret/sh.helm.release.v1.demo.v{n}" for n in (1, 2, 3)]

    helm.uninstall("demo", wait="watcher", timeout=60)
    left = json.loads(cluster.kubectl("get", "deployments,serviceaccounts,roles,rolebindings,gadgets,secrets",
                                      "-n", NS, "-o", "json").stdout)["items"]
    assert [(o["kind"], o["metadata"]["name"]) for o in left] == [("ServiceAccount", "default")]
    # Helm keeps the CRDs a chart installed
    assert cluster.kubectl("get", "crd", "gadgets.demo.io", check=False).returncode == 0
