"""An engineer's first day with kubectl against `nanokube up`: the everyday
commands whose results kube-apiserver and its controllers shape, checked
against what they show on an upstream cluster."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time

from tests.e2e.conftest import KUBECTL, running_cluster, wait_for

UNSCHEDULABLE = "node.kubernetes.io/unschedulable:NoSchedule"


def _taints_line(cluster, node: str) -> str:
    out = cluster.kubectl("describe", "node", node).stdout
    return next(line for line in out.splitlines() if line.startswith("Taints:"))


def test_cordon_taints_the_node_unschedulable_and_uncordon_lifts_it(cluster):
    node = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    assert cluster.kubectl("cordon", node).stdout.strip() == f"node/{node} cordoned"
    try:
        wait_for(lambda: _taints_line(cluster, node).split() == ["Taints:", UNSCHEDULABLE], timeout=30,
                 what="the unschedulable taint")
        taint = cluster.kubectl_json("get", "node", node)["spec"]["taints"][0]
        assert taint["timeAdded"]
    finally:
        cluster.kubectl("uncordon", node)
    wait_for(lambda: _taints_line(cluster, node).split() == ["Taints:", "<none>"], timeout=30,
             what="the taint lifted")


RBAC_MANIFEST = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: default}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: default}
roleRef: {kind: Role, name: reader}
subjects: [{kind: User, name: jane}, {kind: Group, name: devs}, {kind: ServiceAccount, name: default}]
"""


def test_auth_reconcile_of_a_binding_whose_api_groups_are_left_to_defaults(cluster, tmp_path):
    """rbac/v1 defaults roleRef.apiGroup and User/Group subjects' apiGroup, so `kubectl auth
    reconcile` (and apply) of a manifest that leaves them out creates the binding it names."""
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text(RBAC_MANIFEST)
    r = cluster.kubectl("auth", "reconcile", "-f", str(manifest))
    assert r.stdout.split() == ["role.rbac.authorization.k8s.io/reader", "reconciled",
                                "rolebinding.rbac.authorization.k8s.io/reader", "reconciled"]
    binding = cluster.kubectl_json("get", "rolebinding", "reader")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"},
        {"kind": "ServiceAccount", "name": "default"}]
    assert cluster.kubectl("auth", "can-i", "get", "configmaps", "--as=jane").stdout.strip() == "yes"
    # kubectl compares the manifest's roleRef, undefaulted, with the stored one: it recreates, as upstream
    again = cluster.kubectl("auth", "reconcile", "-f", str(manifest))
    assert "reconciliation required recreate" in again.stderr
    assert cluster.kubectl_json("get", "rolebinding", "reader")["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"


def test_a_host_path_persistent_volume_gets_the_unset_type_as_a_pods_volume_does(cluster):
    pv = ('{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "first-day-pv"}, "spec": {'
          '"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv"}}}')
    cluster.kubectl("create", "-f", "-", input=pv)
    try:
        spec = cluster.kubectl_json("get", "pv", "first-day-pv")["spec"]
        assert spec["hostPath"] == {"path": "/tmp/pv", "type": ""}
        assert (spec["persistentVolumeReclaimPolicy"], spec["volumeMode"]) == ("Retain", "Filesystem")
    finally:
        cluster.kubectl("delete", "pv", "first-day-pv")


def test_describe_of_a_namespace_stuck_terminating_shows_what_holds_it(cluster):
    cluster.kubectl("create", "namespace", "first-day-stuck")
    cluster.kubectl("create", "configmap", "held", "-n", "first-day-stuck")
    cluster.kubectl("patch", "configmap", "held", "-n", "first-day-stuck", "-p",
                    '{"metadata": {"finalizers": ["example.com/hold"]}}')
    cluster.kubectl("delete", "namespace", "first-day-stuck", "--wait=false")

    def described():
        out = cluster.kubectl("describe", "namespace", "first-day-stuck").stdout
        return out if "SomeFinalizersRemain" in out else None

    out = described() or wait_for(described, timeout=30, what="the namespace's deletion conditions")
    assert "Status:       Terminating" in out
    # Type, Status, LastTransitionTime (six words), Reason, Message
    rows = {line.split()[0]: line.split()[:9] for line in out.splitlines() if line.startswith("  Namespace")}
    assert rows["NamespaceContentRemaining"][1::7] == ["True", "SomeResourcesRemain"]
    assert rows["NamespaceFinalizersRemaining"][1::7] == ["True", "SomeFinalizersRemain"]
    assert rows["NamespaceDeletionContentFailure"][1::7] == ["False", "ContentDeleted"]
    assert "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances" in out
    cluster.kubectl("patch", "configmap", "held", "-n", "first-day-stuck", "--type=json", "-p",
                    '[{"op": "remove", "path": "/metadata/finalizers"}]')
    cluster.kubectl("wait", "--for=delete", "namespace/first-day-stuck", "--timeout=30s")


def test_deleting_a_node_has_its_pods_garbage_collected_and_replaced():
    """PodGC: a quarantine after `kubectl delete node` (40 s upstream, 2 s here by
    NANOKUBE_POD_GC_QUARANTINE) the pods bound to it are marked Failed (DisruptionTarget
    DeletionByPodGC) and force-deleted, so their ReplicaSet makes new ones on a node that exists."""
    with running_cluster("podgc", env={"NANOKUBE_POD_GC_QUARANTINE": "2"}) as c:
        c.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")
        pods = wait_for(lambda: (got := c.kubectl_json("get", "pods", "-l", "app=web")["items"])
                        and len(got) == 2 and all(p["spec"].get("nodeName") for p in got) and got, what="two bound pods")
        node = pods[0]["spec"]["nodeName"]
        doomed = {p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] == node}
        c.kubectl("delete", "node", node)
        for name in doomed:
            c.kubectl("wait", "--for=delete", f"pod/{name}", "--timeout=90s", timeout=100)
        now = wait_for(lambda: (got := c.kubectl_json("get", "pods", "-l", "app=web")["items"])
                       and len(got) == 2 and all(p["spec"].get("nodeName") for p in got) and got,
                       what="two pods again")
        assert node not in {p["spec"]["nodeName"] for p in now}
        by_gc = [(e["verb"], e["requestURI"].rsplit("/", 1)[-1]) for e in c.audit_events()
                 if e["userAgent"].endswith("/pod-garbage-collector")]
        for name in doomed:
            assert ("patch", "status") in by_gc and ("delete", name) in by_gc


SELECTORLESS = """
apiVersion: v1
kind: Service
metadata: {name: first-day-db}
spec:
  ports: [{name: pg, port: 5432}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: first-day-db}
subsets:
- addresses: [{ip: 192.0.2.10}]
  ports: [{name: pg, port: 5432}]
"""


def test_a_selectorless_services_endpoints_are_mirrored_into_a_slice(cluster):
    """The endpointslice-mirroring controller: `kubectl describe svc` (which reads EndpointSlices)
    lists the endpoints written by hand for a Service without a selector."""
    cluster.kubectl("apply", "-f", "-", input=SELECTORLESS)
    try:
        def mirrored():
            out = cluster.kubectl("describe", "service", "first-day-db").stdout
            return out if "192.0.2.10:5432" in out else None

        out = wait_for(mirrored, timeout=20, what="the mirrored endpoints")
        assert "Endpoints:                192.0.2.10:5432" in out
        [sl] = cluster.kubectl_json("get", "endpointslices", "-l", "kubernetes.io/service-name=first-day-db")["items"]
        assert sl["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == \
            "endpointslicemirroring-controller.k8s.io"
        assert sl["metadata"]["ownerReferences"][0]["kind"] == "Endpoints"
        assert sl["endpoints"] == [{"addresses": ["192.0.2.10"], "conditions": {"ready": True}}]
    finally:
        cluster.kubectl("delete", "-f", "-", input=SELECTORLESS)


def test_describe_node_shows_the_ttl_controllers_annotation(cluster):
    node = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout

    def annotated():
        out = cluster.kubectl("describe", "node", node).stdout
        return out if "node.alpha.kubernetes.io/ttl: 0" in out else None

    out = wait_for(annotated, timeout=30, what="the ttl annotation")
    assert next(line for line in out.splitlines() if line.startswith("Annotations:")).split() == [
        "Annotations:", "node.alpha.kubernetes.io/ttl:", "0"]


TOKEN_SECRET = """
apiVersion: v1
kind: Secret
metadata:
  name: first-day-robot-token
  annotations: {kubernetes.io/service-account.name: default}
type: kubernetes.io/service-account-token
"""


def test_a_long_lived_service_account_token_secret_is_filled_and_authenticates(cluster):
    """The documented long-lived API token: the token controller fills the Secret, the token
    authenticates as the account (kubectl with it alone), and deleting the Secret revokes it."""
    cluster.kubectl("apply", "-f", "-", input=TOKEN_SECRET)
    try:
        data = wait_for(lambda: (cluster.kubectl_json("get", "secret", "first-day-robot-token").get("data") or {})
                        .get("token") and cluster.kubectl_json("get", "secret", "first-day-robot-token")["data"],
                        timeout=20, what="the token")
        assert set(data) == {"ca.crt", "namespace", "token"}
        token = base64.b64decode(data["token"]).decode()
        as_token = ("--kubeconfig=/dev/null", f"--server={cluster.url}", "--certificate-authority",
                    str(cluster.data_dir / "pki" / "ca.crt"), f"--token={token}")
        days = {time.strftime("%Y-%m-%d", time.gmtime())}
        who = cluster.kubectl(*as_token, "auth", "whoami", "-o", "json")
        assert json.loads(who.stdout)["status"]["userInfo"]["username"] == "system:serviceaccount:default:default"
        # kube-apiserver labels the Secret with the day (UTC) its token was last used
        used = wait_for(lambda: cluster.kubectl("get", "secret", "first-day-robot-token", "-o",
                                                "jsonpath={.metadata.labels.kubernetes\\.io/legacy-token-last-used}").stdout,
                        timeout=30, what="the last-used label")
        assert used in days | {time.strftime("%Y-%m-%d", time.gmtime())}  # (a run across midnight)
    finally:
        cluster.kubectl("delete", "secret", "first-day-robot-token")
    denied = cluster.kubectl(*as_token, "auth", "whoami", check=False)
    assert denied.returncode == 1 and "Unauthorized" in denied.stderr


def test_create_token_bound_to_a_secret_or_a_node(cluster):
    """`kubectl create token --bound-object-kind Secret|Node`: upstream's TokenRequest binds to both
    (the node one tells whoami its node); a Secret-bound token dies with the Secret."""
    node = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    cluster.kubectl("create", "secret", "generic", "first-day-binding")
    by_secret = cluster.kubectl("create", "token", "default", "--bound-object-kind=Secret",
                                "--bound-object-name=first-day-binding").stdout.strip()
    by_node = cluster.kubectl("create", "token", "default", "--bound-object-kind=Node",
                              f"--bound-object-name={node}").stdout.strip()

    def whoami(token: str, check: bool = True):
        return cluster.kubectl("--kubeconfig=/dev/null", f"--server={cluster.url}", "--certificate-authority",
                               str(cluster.data_dir / "pki" / "ca.crt"), f"--token={token}", "auth", "whoami",
                               "-o", "json", check=check)

    extra = json.loads(whoami(by_node).stdout)["status"]["userInfo"]["extra"]
    assert extra["authentication.kubernetes.io/node-name"] == [node]
    assert json.loads(whoami(by_secret).stdout)["status"]["userInfo"]["username"] == \
        "system:serviceaccount:default:default"
    cluster.kubectl("delete", "secret", "first-day-binding")
    assert "Unauthorized" in whoami(by_secret, check=False).stderr


def test_a_standalone_controller_manager_with_the_signing_key_fills_token_secrets(tmp_path):
    """`nanokube controller-manager --service-account-private-key-file` (kube-controller-manager's
    flag) runs the token controller out of process too."""
    with running_cluster("kcm-tokens", ("--controllers", "")) as c:
        with open(tmp_path / "kcm.log", "wb") as log:
            kcm = subprocess.Popen(
                [sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig", c.kubeconfig,
                 "--controllers", "serviceaccount-token", "--secure-port", "0", "--leader-elect-retry-period", "500ms",
                 "--service-account-private-key-file", str(c.data_dir / "pki" / "sa.key")],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        try:
            # no serviceaccount controller here makes `default`: the Secret names an account of its own
            c.kubectl("create", "serviceaccount", "robot")
            c.kubectl("apply", "-f", "-", input=TOKEN_SECRET.replace("service-account.name: default",
                                                                     "service-account.name: robot"))
            token = wait_for(lambda: (c.kubectl_json("get", "secret", "first-day-robot-token").get("data") or {})
                             .get("token"), timeout=30, what="the token")
            who = c.kubectl("--kubeconfig=/dev/null", f"--server={c.url}", "--certificate-authority",
                            str(c.data_dir / "pki" / "ca.crt"), f"--token={base64.b64decode(token).decode()}",
                            "auth", "whoami", "-o", "json")
            assert json.loads(who.stdout)["status"]["userInfo"]["username"] == "system:serviceaccount:default:robot"
        finally:
            kcm.terminate()
            kcm.wait(timeout=20)


def test_a_rollout_set_image_and_undo_show_as_on_a_real_cluster(cluster):
    """create deployment, expose, scale, set image, rollout status/history/undo: the revisions kubectl
    lists, `get -o wide`'s columns, and the deployment controller's ScalingReplicaSet events, one for
    each scaling (a stale ReplicaSet scaled again made a second, repeated event)."""
    cluster.kubectl("create", "deployment", "first-day-web", "--image=nginx", "--replicas=2")
    assert cluster.kubectl("expose", "deployment", "first-day-web", "--port=80").stdout == \
        "service/first-day-web exposed\n"
    cluster.kubectl("rollout", "status", "deployment/first-day-web", "--timeout=60s")
    cluster.kubectl("scale", "deployment/first-day-web", "--replicas=3")
    cluster.kubectl("set", "image", "deployment/first-day-web", "nginx=nginx:1.27")
    cluster.kubectl("rollout", "status", "deployment/first-day-web", "--timeout=60s")

    def revisions() -> list[str]:
        out = cluster.kubectl("rollout", "history", "deployment/first-day-web").stdout.splitlines()
        assert out[:2] == ["deployment.apps/first-day-web ", "REVISION  CHANGE-CAUSE"], out
        return [line.split()[0] for line in out[2:] if line.strip()]
    assert revisions() == ["1", "2"]
    assert cluster.kubectl("rollout", "undo", "deployment/first-day-web").stdout == \
        "deployment.apps/first-day-web rolled back\n"
    cluster.kubectl("rollout", "status", "deployment/first-day-web", "--timeout=60s")
    assert revisions() == ["2", "3"]
    wide = cluster.kubectl("get", "deployment", "first-day-web", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert wide[1].split()[:4] + wide[1].split()[5:] == ["first-day-web", "3/3", "3", "3", "nginx", "nginx",
                                                        "app=first-day-web"]
    events = cluster.kubectl_json("get", "events", "--field-selector",
                                  "involvedObject.kind=Deployment,involvedObject.name=first-day-web")["items"]
    scaled = [(e["message"], e.get("count", 1)) for e in events if e["reason"] == "ScalingReplicaSet"
              and e["source"]["component"] == "deployment-controller"]
    # past 10 such events in 10 minutes the recorder's aggregator combines the rest into one, as client-go's
    assert scaled and all(count == 1 for message, count in scaled
                          if not message.startswith("(combined from similar events): ")), scaled
    assert ("Scaled up replica set first-day-web-" in scaled[0][0] and scaled[0][0].endswith(" from 0 to 2"))
    cluster.kubectl("delete", "deployment,service", "first-day-web")


def test_scaling_nginx_down_stops_it_with_sigquit_and_get_w_shows_completed(cluster):
    """nginx's image says STOPSIGNAL SIGQUIT, on which nginx shuts down gracefully and exits 0: as its
    Deployment scales down, `kubectl get -w` shows the pod Completed, as on a real node, not Error
    (143, a process SIGTERM ends). ContainerStopSignals is alpha and off in 1.37: no status.stopSignal."""
    cluster.kubectl("create", "deployment", "graceful-web", "--image=nginx:1.27", "--replicas=2")
    cluster.kubectl("rollout", "status", "deployment/graceful-web", "--timeout=60s")
    pods = cluster.kubectl_json("get", "pods", "-l", "app=graceful-web")["items"]
    assert [s.get("stopSignal") for p in pods for s in p["status"]["containerStatuses"]] == [None, None]
    cmd = [KUBECTL, "--kubeconfig", cluster.kubeconfig, "get", "pods", "-l", "app=graceful-web", "-w",
           "--output-watch-events"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(lambda: sum(line.startswith("ADDED") for line in lines) == 2, 60, "kubectl listing both pods")
        cluster.kubectl("scale", "deployment/graceful-web", "--replicas=1")
        wait_for(lambda: any(line.startswith("DELETED") for line in lines), 60, "a pod deleted")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    gone = next(line.split()[1] for line in lines if line.startswith("DELETED"))
    statuses = [line.split()[3] for line in lines if line.split()[1] == gone]  # EVENT NAME READY STATUS ...
    assert statuses[-1] == "Completed" and "Error" not in statuses, lines
    killing = cluster.kubectl("get", "events", "--field-selector", f"involvedObject.name={gone},reason=Killing",
                              "-o", "jsonpath={.items[*].message}").stdout
    assert killing == "Stopping container nginx"
    cluster.kubectl("delete", "deployment", "graceful-web")


KUSTOMIZATION = """
namePrefix: first-day-
labels:
- pairs: {env: first-day}
  includeSelectors: true
resources: [deploy.yaml, settings.yaml]
"""
KUSTOMIZED_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: kz}
spec:
  replicas: 1
  selector: {matchLabels: {app: kz}}
  template:
    metadata: {labels: {app: kz}}
    spec: {containers: [{name: main, image: busybox, command: [sleep, "3600"]}]}
"""


def test_kustomize_diff_and_apply_prune(cluster, tmp_path):
    """`kubectl apply -k` of a kustomization, `kubectl diff -k` (a server-side dry run: exit 0 when
    nothing would change, 1 and a unified diff when something would), and `apply --prune -l` removing
    what the configuration no longer lists."""
    (tmp_path / "kustomization.yaml").write_text(KUSTOMIZATION)
    (tmp_path / "deploy.yaml").write_text(KUSTOMIZED_DEPLOYMENT)
    (tmp_path / "settings.yaml").write_text("{apiVersion: v1, kind: ConfigMap, metadata: {name: settings}, "
                                            "data: {mode: fast}}\n")
    built = cluster.kubectl("kustomize", str(tmp_path)).stdout
    assert "name: first-day-kz" in built and "env: first-day" in built
    out = cluster.kubectl("apply", "-k", str(tmp_path)).stdout
    assert out.splitlines() == ["configmap/first-day-settings created", "deployment.apps/first-day-kz created"]
    same = cluster.kubectl("diff", "-k", str(tmp_path), check=False)
    assert (same.returncode, same.stdout) == (0, ""), same.stderr
    (tmp_path / "deploy.yaml").write_text(KUSTOMIZED_DEPLOYMENT.replace("replicas: 1", "replicas: 2"))
    changed = cluster.kubectl("diff", "-k", str(tmp_path), check=False)
    assert changed.returncode == 1, changed.stderr
    assert "-  replicas: 1\n+  replicas: 2\n" in changed.stdout and "-  generation: 1\n+  generation: 2\n" in changed.stdout
    (tmp_path / "kustomization.yaml").write_text(KUSTOMIZATION.replace(", settings.yaml", ""))
    out = cluster.kubectl("apply", "-k", str(tmp_path), "--prune", "-l", "env=first-day").stdout
    assert out.splitlines() == ["deployment.apps/first-day-kz configured", "configmap/first-day-settings pruned"]
    assert cluster.kubectl("get", "configmap", "first-day-settings", "--ignore-not-found", "-o", "name").stdout == ""
    assert cluster.kubectl_json("get", "deployment", "first-day-kz")["spec"]["replicas"] == 2
    cluster.kubectl("delete", "deployment", "first-day-kz")
