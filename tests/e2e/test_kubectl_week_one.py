"""An ML-platform engineer's first week with kubectl against `nanokube up`: logs, patches,
printers and the other everyday commands, checked against what kube-apiserver 1.37 and
the kubelet answer them on an upstream cluster."""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e.conftest import wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module deletes the workloads it
    runs (a ConfigMap and finished pods of its own names stay)."""
    return session_cluster


def test_a_json_patch_whose_test_fails_is_upstreams_generic_invalid(cluster):
    """patch.go answers a JSON patch that does not apply with NewGenericServerResponse(422, ...,
    isUnexpectedResponse=false): the library's message is dropped, details are empty, and
    kubectl prints its generic line (not 'The request is invalid: : testing value ...')."""
    cluster.kubectl("create", "configmap", "jp-test", "--from-literal=a=1")
    r = cluster.kubectl("patch", "configmap", "jp-test", "--type=json",
                        "-p", '[{"op":"test","path":"/data/a","value":"2"}]', check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == "The request is invalid: the server rejected our request due to an error in our request"
    r = cluster.kubectl("patch", "configmap", "jp-test", "--type=json", "-v=8",
                        "-p", '[{"op":"remove","path":"/data/nope"}]', check=False)
    body = next(line for line in r.stderr.splitlines() if '"kind":"Status"' in line)
    status = json.loads(body[body.index("{"):])
    assert (status["code"], status["reason"], status["details"]) == (422, "Invalid", {})
    assert cluster.kubectl_json("get", "configmap", "jp-test")["data"] == {"a": "1"}


#: (the agent's loop ends on SIGTERM by its trap: a rollout replacing its pods does not wait out their grace period)
ROLLBACK_KINDS = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: undo-agent}
spec:
  selector: {matchLabels: {app: undo-agent}}
  template:
    metadata: {labels: {app: undo-agent}}
    spec:
      containers: [{name: a, image: "busybox:1", command: [sh, -c, "trap 'exit 0' TERM && while true; do sleep 0.1; done"]}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: undo-db}
spec:
  replicas: 1
  serviceName: undo-db
  selector: {matchLabels: {app: undo-db}}
  template:
    metadata: {labels: {app: undo-db}}
    spec:
      containers: [{name: db, image: "postgres:15", env: [{name: Z, value: "<1>"}, {name: A, value: "2"}]}]
"""


def test_rollout_undo_to_the_current_revision_is_skipped(cluster, tmp_path):
    """kubectl's DaemonSet and StatefulSet rollbackers compare json.Marshal of the owner's template patch
    (map keys sorted, `<`, `>`, `&` escaped) with the revision's data bytes: equal, they skip the
    rollback and say so. Revisions whose data kept the template's own key order, or served `&&` or
    `<1>` unescaped, never matched, so every undo patched."""
    manifest = tmp_path / "undo.yaml"
    manifest.write_text(ROLLBACK_KINDS)
    cluster.kubectl("create", "-f", str(manifest))
    for kind, name, container in (("ds", "undo-agent", "a"), ("sts", "undo-db", "db")):
        cluster.kubectl("rollout", "status", f"{kind}/{name}", "--timeout=60s")
        cluster.kubectl("set", "image", f"{kind}/{name}", f"{container}=busybox:2")
        cluster.kubectl("rollout", "status", f"{kind}/{name}", "--timeout=60s")
        r = cluster.kubectl("rollout", "undo", f"{kind}/{name}", "--to-revision=2")
        kind_name = {"ds": "daemonset.apps", "sts": "statefulset.apps"}[kind]
        assert r.stdout.strip() == (
            f"{kind_name}/{name} skipped rollback (current template already matches revision 2)")
        assert cluster.kubectl("rollout", "undo", f"{kind}/{name}").stdout.strip() == f"{kind_name}/{name} rolled back"
    cluster.kubectl("delete", "-f", str(manifest), "--wait=false")


def test_kubelet_json_through_nodes_proxy_is_compact_go_json(cluster):
    """`kubectl get --raw /api/v1/nodes/N/proxy/stats/summary` (and /pods) prints the kubelet's
    json.Marshal / codec output as it is: compact, where Python's default separators showed."""
    node = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    summary = cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/stats/summary").stdout
    assert summary.startswith('{"node":{"nodeName":"' + node + '","startTime":"') and '", "' not in summary
    pods = cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/pods").stdout
    assert pods.startswith('{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[')


def test_openapi_pod_connect_and_log_operations(cluster):
    """/openapi/v3/api/v1 (and v2) describe pods/exec, attach and portforward as connect operations for GET
    and POST with their options' parameters (they carried the log's follow, previous, tailLines ...), pods/log
    with all of PodLogOptions', and proxy operation ids as clients are generated from them."""
    doc = json.loads(cluster.kubectl("get", "--raw", "/openapi/v3/api/v1").stdout)
    base = "/api/v1/namespaces/{namespace}/pods/{name}/"
    expected = {"exec": ("PodExecOptions", ["command", "container", "stderr", "stdin", "stdout", "tty"]),
                "attach": ("PodAttachOptions", ["container", "stderr", "stdin", "stdout", "tty"]),
                "portforward": ("PodPortForwardOptions", ["ports"])}
    for sub, (kind, params) in expected.items():
        path = doc["paths"][base + sub]
        assert [p["name"] for p in path["parameters"]] == ["name", "namespace"]
        for method in ("get", "post"):
            op = path[method]
            assert op["operationId"] == f"connectCoreV1{method.title()}NamespacedPod{sub.title()}"
            assert (op["x-kubernetes-action"], op["x-kubernetes-group-version-kind"]) == (
                "connect", {"group": "", "kind": kind, "version": "v1"})
            assert [p["name"] for p in op["parameters"]] == params
    log = doc["paths"][base + "log"]["get"]
    assert {p["name"] for p in log["parameters"]} == {
        "container", "follow", "insecureSkipTLSVerifyBackend", "limitBytes", "previous", "sinceSeconds", "stream",
        "tailLines", "timestamps"}
    assert doc["paths"][base + "proxy"]["get"]["operationId"] == "connectCoreV1GetNamespacedPodProxy"
    v2 = json.loads(cluster.kubectl("get", "--raw", "/openapi/v2").stdout)
    assert v2["paths"][base + "exec"]["post"]["operationId"] == "connectCoreV1PostNamespacedPodExec"


EXITED = """
apiVersion: v1
kind: Pod
metadata:
  name: exited-exec
  annotations: {sim.nanokube.io/run-seconds: "1", sim.nanokube.io/exit-code: "1"}
spec:
  containers: [{name: c, image: busybox}]
"""


def test_exec_into_a_container_that_exited_is_container_not_found(cluster, tmp_path):
    """The kubelet's GetExec finds the container among the runtime's running ones: one waiting out its
    crash-loop back-off is `container not found ("c")` before the upgrade, which kubectl prints as
    'unable to upgrade connection: ...' (it was an Internal error 'container c is not running')."""
    manifest = tmp_path / "exited.yaml"
    manifest.write_text(EXITED)
    cluster.kubectl("create", "-f", str(manifest))
    wait_for(lambda: "CrashLoopBackOff" in cluster.kubectl("get", "pod", "exited-exec", "--no-headers").stdout,
             timeout=30, what="the container waiting out its back-off")
    r = cluster.kubectl("exec", "exited-exec", "--", "echo", "hi", check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == 'error: unable to upgrade connection: container not found ("c")'
    cluster.kubectl("delete", "pod", "exited-exec", "--wait=false")


def test_get_pods_restarts_of_a_crash_looping_pod_are_those_of_the_run_that_ended(cluster):
    """The kubelet reports a container waiting out its back-off from its last dead instance
    (convertToAPIContainerStatuses): its restartCount and containerID are that instance's, one more
    only as the next starts. After the second exit (the first restarts at once) `kubectl get pods`
    shows `CrashLoopBackOff   1 (2s ago)`, the back-off 10 s; it said 2 before that restart."""
    cluster.kubectl("run", "crashy", "--image=busybox", "--", "sh", "-c", "echo boom; exit 1")

    def waiting():
        """The status and the printed row of one copy of the pod, waiting out its back-off: the row is
        taken between two reads of the same resourceVersion, so no restart came in between."""
        pod = cluster.kubectl_json("get", "pod", "crashy")
        [cs] = pod["status"].get("containerStatuses") or [{}]
        if "CrashLoopBackOff" != (cs.get("state") or {}).get("waiting", {}).get("reason"):
            return None
        row = cluster.kubectl("get", "pod", "crashy", "--no-headers").stdout.split()
        same = cluster.kubectl_json("get", "pod", "crashy")["metadata"]["resourceVersion"] == \
            pod["metadata"]["resourceVersion"]
        return (cs, row) if same else None
    cs, row = wait_for(waiting, 60, "crashy in CrashLoopBackOff")
    delay = int(re.search(r"back-off (\d+)s", cs["state"]["waiting"]["message"]).group(1))
    assert cs["restartCount"] == {10: 1, 20: 2, 40: 3}[delay], cs  # two runs, then 10 s; three, then 20 s
    assert row[2] == "CrashLoopBackOff" and row[3] == str(cs["restartCount"]), row
    assert cs["containerID"] == cs["lastState"]["terminated"]["containerID"], "the instance that ended"
    assert cluster.kubectl("logs", "crashy", "--previous").stdout == "boom\n"
    cluster.kubectl("delete", "pod", "crashy", "--wait=false")


def test_run_a_shell_on_its_stdin_prints_and_logs_only_what_the_shell_wrote(cluster):
    """`kubectl run -i -- sh` fed commands: the attached stream and the container's log are what
    the shell wrote, as on a real node; the simulation's own `nanokube: container ... exited with
    code 0` line (and its started/ready lines in the log) used to follow the output."""
    r = cluster.kubectl("run", "shell-in", "-i", "--restart=Never", "--image=busybox", "--command", "--", "sh",
                        input="echo hi-$((1+1))\n")
    assert r.stdout == "hi-2\n"
    wait_for(lambda: cluster.kubectl_json("get", "pod", "shell-in")["status"]["phase"] == "Succeeded", 30,
             "shell-in Succeeded")
    assert cluster.kubectl("logs", "shell-in").stdout == "hi-2\n"
    cluster.kubectl("delete", "pod", "shell-in", "--wait=false")


def test_a_shell_image_with_no_command_exits_at_once_and_crash_loops(cluster):
    """busybox's own command is `sh`: with no stdin it reads EOF at once and exits 0, so a Deployment
    of the bare image (`kubectl create deployment --image=busybox`) goes Completed, then
    CrashLoopBackOff, its restartCount rising, with the kubelet's BackOff event; one given stdin
    (`stdin: true`, as `kubectl run -i` makes) keeps its shell waiting on it, Running."""
    cluster.kubectl("create", "deployment", "bare", "--image=busybox")
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "listening", "namespace": "default"}, "spec": {
        "containers": [{"name": "sh", "image": "busybox", "stdin": True}]}}))

    def crash_looping():
        [pod] = cluster.kubectl_json("get", "pods", "-l", "app=bare")["items"] or [None]
        [cs] = (pod or {}).get("status", {}).get("containerStatuses") or [{}]
        waiting = (cs.get("state") or {}).get("waiting") or {}
        return (pod, cs) if waiting.get("reason") == "CrashLoopBackOff" and cs["restartCount"] >= 1 else None
    pod, cs = wait_for(crash_looping, 60, "the bare busybox pod in CrashLoopBackOff")
    last = cs["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (0, "Completed")
    name = pod["metadata"]["name"]
    warnings = cluster.kubectl("events", "--for", f"pod/{name}", "--types", "Warning").stdout
    assert re.search(rf"BackOff\s+Pod/{name}\s+Back-off restarting failed container busybox in pod "
                     rf"{name}_default\([0-9a-f-]{{36}}\)", warnings), warnings
    wait_for(lambda: cluster.kubectl_json("get", "pod", "-l", "app=bare")["items"][0]["status"]
             ["containerStatuses"][0]["restartCount"] > cs["restartCount"], 60, "the next restart")
    [held] = cluster.kubectl_json("get", "pod", "listening")["status"]["containerStatuses"]
    assert "running" in held["state"] and held["restartCount"] == 0, held
    cluster.kubectl("delete", "deployment", "bare", "--wait=false")
    cluster.kubectl("delete", "pod", "listening", "--wait=false")
