"""kubectl's typed RBAC generators (`create role/clusterrole/rolebinding/clusterrolebinding`)
send protobuf bodies: they must decode to the objects kubectl meant, and the bindings they
create must grant what they name."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from nanokube.pki.ca import KeyPair, issue

from .conftest import wait_for

G = "rbac.authorization.k8s.io"


def _create(cluster, *args: str) -> dict:
    """Run `kubectl create ...` for real and return what the server stored, after checking
    it carries what kubectl's own client-side rendering of the same command holds."""
    intended = json.loads(cluster.kubectl("create", *args, "--dry-run=client", "-o", "json").stdout)
    cluster.kubectl("create", *args)
    kind, name = args[0], args[1]
    ns = list(args[args.index("-n"):args.index("-n") + 2]) if "-n" in args else []
    stored = cluster.kubectl_json("get", kind, name, *ns)
    for field in ("rules", "aggregationRule", "subjects", "roleRef"):
        assert stored.get(field) == intended.get(field), field
    return stored


def _user_kubeconfig(cluster, tmp_path, user: str) -> tuple[str, str]:
    pki = cluster.data_dir / "pki"
    kp = issue(KeyPair((pki / "ca.crt").read_bytes(), (pki / "ca.key").read_bytes()), user, client=True, days=1)
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    for u in config["users"]:
        u["user"] = {"client-certificate-data": base64.b64encode(kp.cert_pem).decode(),
                     "client-key-data": base64.b64encode(kp.key_pem).decode()}
    path = tmp_path / f"{user}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return ("--kubeconfig", str(path))


def test_create_role(cluster):
    role = _create(cluster, "role", "r", "--verb=get", "--resource=pods", "-n", "default")
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "default"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]


def test_create_clusterrole_rules_and_aggregation(cluster):
    role = _create(cluster, "clusterrole", "cr", "--verb=get,list", "--resource=deployments.apps",
                   "--resource-name=web", "--resource-name=api")
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web", "api"],
                              "verbs": ["get", "list"]}]
    urls = _create(cluster, "clusterrole", "logs", "--verb=get", "--non-resource-url=/logs/*")
    assert urls["rules"] == [{"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}]
    agg = _create(cluster, "clusterrole", "agg", "--aggregation-rule=example.com/aggregate=true")
    assert agg["aggregationRule"] == {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate": "true"}}]}


def test_create_rolebinding(cluster):
    rb = _create(cluster, "rolebinding", "rb", "--role=r", "--user=bob", "--group=devs",
                 "--serviceaccount=default:builder", "-n", "default")
    assert rb["roleRef"] == {"apiGroup": G, "kind": "Role", "name": "r"}
    assert rb["subjects"] == [
        {"apiGroup": G, "kind": "User", "name": "bob"},
        {"apiGroup": G, "kind": "Group", "name": "devs"},
        {"kind": "ServiceAccount", "name": "builder", "namespace": "default"},
    ]


def test_create_clusterrolebinding(cluster):
    crb = _create(cluster, "clusterrolebinding", "crb", "--clusterrole=view", "--group=auditors")
    assert crb["roleRef"] == {"apiGroup": G, "kind": "ClusterRole", "name": "view"}
    assert crb["subjects"] == [{"apiGroup": G, "kind": "Group", "name": "auditors"}]


def test_cli_created_bindings_grant_access(cluster, tmp_path):
    carol = _user_kubeconfig(cluster, tmp_path, "carol")
    cluster.kubectl("create", "namespace", "carol-ns")
    cluster.kubectl("create", "role", "getter", "--verb=get", "--resource=pods", "-n", "carol-ns")
    cluster.kubectl("create", "rolebinding", "carol-gets", "--role=getter", "--user=carol", "-n", "carol-ns")
    assert cluster.kubectl(*carol, "auth", "can-i", "get", "pods", "-n", "carol-ns").stdout.strip() == "yes"
    r = cluster.kubectl(*carol, "auth", "can-i", "list", "pods", "-n", "carol-ns", check=False)
    assert (r.returncode, r.stdout.strip()) == (1, "no")
    cluster.kubectl("create", "clusterrolebinding", "carol-views", "--clusterrole=view", "--user=carol")
    assert cluster.kubectl(*carol, "auth", "can-i", "list", "pods", "-n", "kube-system").stdout.strip() == "yes"


def test_aggregated_clusterroles_show_their_rules(cluster):
    """The clusterrole-aggregation controller stores admin's rules, and an `aggregate-to-edit` role's
    rules show in `edit` as an operator checks them, gone again with its label."""
    def admin_with_rules():
        admin = yaml.safe_load(cluster.kubectl("get", "clusterrole", "admin", "-o", "yaml").stdout)
        return admin if admin.get("rules") else None

    admin = wait_for(admin_with_rules, what="admin's aggregated rules")
    parts = [cluster.kubectl_json("get", "clusterrole", f"system:aggregate-to-{r}")["rules"] for r in ("admin", "edit")]
    assert all(rule in admin["rules"] for rules in parts for rule in rules)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": f"{G}/v1", "kind": "ClusterRole",
        "metadata": {"name": "widgets-edit", "labels": {f"{G}/aggregate-to-edit": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "update"]}]}))
    wait_for(lambda: "widgets.example.com" in cluster.kubectl("describe", "clusterrole", "edit").stdout,
             what="widgets in edit")
    cluster.kubectl("label", "clusterrole", "widgets-edit", f"{G}/aggregate-to-edit-")
    wait_for(lambda: "widgets.example.com" not in cluster.kubectl("describe", "clusterrole", "edit").stdout,
             what="widgets gone from edit")
