"""What the kubelet shows a user of the pods it cannot start or lets run too long, read with
kubectl as on a real cluster: `kubectl get`'s STATUS column and the Events `kubectl describe`
lists."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e.conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def kubelet_cluster(store_url):
    with running_cluster("kubelet", store=store_url) as c:
        yield c


def status_is(c, name: str, want: str):
    def check():
        row = c.kubectl("get", "pod", name, "--no-headers").stdout.split()
        return row if len(row) > 2 and row[2] == want else None
    return check


def create(c, pod: dict) -> None:
    c.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Pod", **pod}))


def test_never_pull_of_an_image_the_node_lacks_is_err_image_never_pull(kubelet_cluster):
    c = kubelet_cluster
    create(c, {"metadata": {"name": "local"},
               "spec": {"containers": [{"name": "app", "image": "kind.local/app:dev", "imagePullPolicy": "Never"}]}})
    assert wait_for(status_is(c, "local", "ErrImageNeverPull"))[1] == "0/1"
    message = 'Container image "kind.local/app:dev" is not present with pull policy of Never'
    # the kubelet writes its Events from a queue, maybe after the status above
    wait_for(lambda: "ErrImageNeverPull" in (out := c.kubectl("describe", "pod", "local").stdout) and message in out,
             30, "ErrImageNeverPull in describe's Events")
    waiting = c.kubectl("get", "pod", "local", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.message}")
    assert waiting.stdout == message
    logs = c.kubectl("logs", "local", check=False)
    assert 'container "app" in pod "local" is waiting to start: ErrImageNeverPull' in logs.stderr, logs.stderr


def test_an_image_that_is_no_valid_reference_is_invalid_image_name_never_pulled(kubelet_cluster):
    """kubectl run refuses `--image=Foo:a:b` itself; applied, the kubelet parses it before all else
    (upper case in the repository): InspectFailed, then Failed "Error: InvalidImageName", each sync."""
    c = kubelet_cluster
    create(c, {"metadata": {"name": "bad-ref"}, "spec": {"containers": [{"name": "app", "image": "Foo:a:b"}]}})
    assert wait_for(status_is(c, "bad-ref", "InvalidImageName"))[1] == "0/1"
    message = ('Failed to apply default image tag "Foo:a:b": couldn\'t parse image name "Foo:a:b": '
               "invalid reference format: repository name (library/Foo) must be lowercase")
    status = c.kubectl_json("get", "pod", "bad-ref")["status"]["containerStatuses"][0]
    assert status["state"]["waiting"] == {"reason": "InvalidImageName", "message": message}
    assert (status["image"], status["imageID"]) == ("Foo:a:b", ""), "never created: the image as given, no ID"
    events = wait_for(lambda: (items := c.kubectl_json("get", "events", "--field-selector",
                                                       "involvedObject.name=bad-ref")["items"])
                      and {e["reason"] for e in items} >= {"InspectFailed", "Failed"} and items, 30, "the events")
    assert {(e["type"], e["reason"], e["message"]) for e in events if e["reason"] != "Scheduled"} == {
        ("Warning", "InspectFailed", message), ("Warning", "Failed", "Error: InvalidImageName")}
    logs = c.kubectl("logs", "bad-ref", check=False)
    assert 'container "app" in pod "bad-ref" is waiting to start: InvalidImageName' in logs.stderr, logs.stderr


def test_an_init_container_whose_pull_fails_is_init_err_image_pull(kubelet_cluster):
    c = kubelet_cluster
    create(c, {"metadata": {"name": "init-pull", "annotations": {"sim.nanokube.io/pull-error": "not-found"}},
               "spec": {"initContainers": [{"name": "setup", "image": "busybox:1.99-missing"}],
                        "containers": [{"name": "app", "image": "busybox:1.99-missing"}]}})
    # Init:ErrImagePull for the second until the next sync, then backing off for 10 s
    assert wait_for(status_is(c, "init-pull", "Init:ImagePullBackOff"))[1] == "0/1"
    reason = c.kubectl("get", "pod", "init-pull", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}")
    assert reason.stdout == "PodInitializing"
    # kubectl logs says why there is no log yet, in the kubelet's words
    logs = c.kubectl("logs", "init-pull", "-c", "setup", check=False)
    assert 'container "setup" in pod "init-pull" is waiting to start: trying and failing to pull image' in \
        logs.stderr, logs.stderr
    logs = c.kubectl("logs", "init-pull", "-c", "app", check=False)
    assert 'container "app" in pod "init-pull" is waiting to start: PodInitializing' in logs.stderr, logs.stderr


def test_a_pod_past_its_deadline_while_its_image_is_pulled_is_deadline_exceeded(kubelet_cluster):
    c = kubelet_cluster
    create(c, {"metadata": {"name": "slow", "annotations": {"sim.nanokube.io/pull-seconds": "600"}},
               "spec": {"activeDeadlineSeconds": 2, "containers": [{"name": "app", "image": "busybox:1.36"}]}})
    # kubectl prints the never-started container's reason over the pod's, as for an evicted pod
    assert wait_for(status_is(c, "slow", "ContainerStatusUnknown"))[1] == "0/1"
    got = c.kubectl("get", "pod", "slow", "-o", "jsonpath={.status.phase} {.status.reason}")
    assert got.stdout == "Failed DeadlineExceeded"


def _node_of(c, pod: str) -> str:
    return wait_for(lambda: c.kubectl("get", "pod", pod, "-o", "jsonpath={.spec.nodeName}").stdout)


def test_kubelet_endpoints_through_nodes_proxy(kubelet_cluster):
    """/runningpods/, /logs/ (the pods' log files), /metrics/probes and the streaming endpoints, read
    with `kubectl get --raw` on nodes/proxy as on a real cluster."""
    c = kubelet_cluster
    create(c, {"metadata": {"name": "talker", "annotations": {"sim.nanokube.io/log": "hello\nworld"}},
               "spec": {"containers": [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}})
    c.kubectl("wait", "pod/talker", "--for=condition=Ready", "--timeout=60s")
    node, uid = _node_of(c, "talker"), c.kubectl("get", "pod", "talker", "-o", "jsonpath={.metadata.uid}").stdout
    proxy = f"/api/v1/nodes/{node}/proxy"
    running = json.loads(c.kubectl("get", "--raw", f"{proxy}/runningpods/").stdout)
    assert running["kind"] == "PodList"
    mine = [p for p in running["items"] if p["metadata"]["name"] == "talker"]
    # ToAPIPod leaves creationTimestamp zero: omitted (ObjectMeta's omitzero since 1.34), not null
    assert mine == [{"metadata": {"name": "talker", "namespace": "default", "uid": uid},
                     "spec": {"containers": [{"name": "app", "image": "docker.io/library/busybox:1.36",
                                              "resources": {}}]}, "status": {}}]
    assert "local" not in {p["metadata"]["name"] for p in running["items"]}  # never started
    assert '<a href="pods/">pods/</a>' in c.kubectl("get", "--raw", f"{proxy}/logs/").stdout
    pod_dir = f"default_talker_{uid}"
    assert f'<a href="{pod_dir}/">{pod_dir}/</a>' in c.kubectl("get", "--raw", f"{proxy}/logs/pods/").stdout
    assert '<a href="0.log">0.log</a>' in c.kubectl("get", "--raw", f"{proxy}/logs/pods/{pod_dir}/app/").stdout
    log = c.kubectl("get", "--raw", f"{proxy}/logs/pods/{pod_dir}/app/0.log").stdout.splitlines()
    assert [line.split(" ", 1)[1] for line in log][-2:] == ["stdout F hello", "stdout F world"], log
    assert c.kubectl("logs", "talker").stdout.splitlines() == [line.split(" ", 3)[3] for line in log]
    probes = c.kubectl("get", "--raw", f"{proxy}/metrics/probes").stdout
    assert probes.startswith("# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or "
                             "startup probe for a container by result.\n# TYPE prober_probe_total counter\n")
    refused = c.kubectl("get", "--raw", f"{proxy}/exec/default/talker/app?command=ls&stdout=1", check=False)
    assert refused.returncode != 0 and "Upgrade request required" in refused.stderr, refused.stderr
    missing = c.kubectl("get", "--raw", f"{proxy}/exec/default/talker/other?command=ls&stdout=1", check=False)
    assert missing.returncode != 0 and "(NotFound)" in missing.stderr, missing.stderr  # the kubelet's 404


def test_a_host_network_pod_has_its_nodes_ip(kubelet_cluster):
    """The kubelet reports a hostNetwork pod's IPs as its node's (`kubectl debug node/N` makes one;
    `kubectl get pods -o wide` shows the node's address), taking no address from the node's podCIDR."""
    c = kubelet_cluster
    out = c.kubectl("debug", "node/gpu-0", "--image=busybox", "--", "sleep", "600").stdout
    name = out.split("Creating debugging pod ")[1].split()[0]
    node_ip = next(a["address"] for a in c.kubectl_json("get", "node", "gpu-0")["status"]["addresses"]
                   if a["type"] == "InternalIP")
    st = wait_for(lambda: (s := c.kubectl_json("get", "pod", name)["status"]).get("podIP") and s, 60, "a pod IP")
    assert (st["podIP"], st["podIPs"], st["hostIP"]) == (node_ip, [{"ip": node_ip}], node_ip)
    create(c, {"metadata": {"name": "beside"}, "spec": {"nodeName": "gpu-0", "containers": [
        {"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}]}})
    ip = wait_for(lambda: c.kubectl_json("get", "pod", "beside")["status"].get("podIP"), 60, "a pod IP")
    assert ip.startswith("10.244.") and ip != node_ip
    c.kubectl("delete", "pod", name, "beside", "--wait=false")


def test_a_node_reports_its_runtime_handlers_and_features(kubelet_cluster):
    """The kubelet copies what its runtime reports into the Node: each handler (runc and the default,
    "") with what it supports (the simulated runtime's read-only mounts are recursive; it has no user
    namespaces), and that a pod's supplementalGroupsPolicy Strict is honoured."""
    out = kubelet_cluster.kubectl("get", "node", "gpu-0", "-o", "yaml").stdout
    status = yaml.safe_load(out)["status"]
    features = {"recursiveReadOnlyMounts": True, "userNamespaces": False}
    assert status["runtimeHandlers"] == [{"name": "runc", "features": features}, {"name": "", "features": features}]
    assert status["features"] == {"supplementalGroupsPolicy": True}


def test_container_statuses_list_the_volume_mounts(kubelet_cluster):
    """The kubelet reports each container's mounts in its status (VolumeMountStatus, RecursiveReadOnlyMounts
    GA): name and path, and for a read-only one whether it is recursively read-only."""
    c = kubelet_cluster
    c.kubectl("create", "configmap", "settings", "--from-literal=a=b")
    create(c, {"metadata": {"name": "mounts"}, "spec": {
        "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}, {"name": "scratch", "emptyDir": {}}],
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"], "volumeMounts": [
            {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True},
            {"name": "cfg", "mountPath": "/etc/cfg-rro", "readOnly": True, "recursiveReadOnly": "Enabled"},
            {"name": "scratch", "mountPath": "/scratch"}]}]}})
    wait_for(status_is(c, "mounts", "Running"))
    [cs] = c.kubectl_json("get", "pod", "mounts")["status"]["containerStatuses"]
    token = next(m for m in cs["volumeMounts"] if m["name"].startswith("kube-api-access-"))
    assert cs["volumeMounts"] == [
        {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True, "recursiveReadOnly": "Disabled"},
        {"name": "cfg", "mountPath": "/etc/cfg-rro", "readOnly": True, "recursiveReadOnly": "Enabled"},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": token["name"], "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True,
         "recursiveReadOnly": "Disabled"}]
    c.kubectl("delete", "pod", "mounts", "--wait=false")


def test_a_pod_whose_volume_cannot_mount_has_no_sandbox_so_no_ip_until_it_mounts(kubelet_cluster):
    """The kubelet mounts volumes (and prepares DRA claims) before createPodSandbox: a pod stuck on a
    missing ConfigMap has no podIP (`-o wide` shows <none>) and PodReadyToStartContainers=False;
    before, it reported an IP and True. Once the ConfigMap exists it starts with both."""
    c = kubelet_cluster
    create(c, {"metadata": {"name": "awaits-config"},
               "spec": {"containers": [{"name": "app", "image": "busybox", "command": ["sleep", "inf"],
                                        "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}],
                        "volumes": [{"name": "cfg", "configMap": {"name": "later"}}]}})
    wait_for(lambda: "FailedMount" in c.kubectl("events", "--for", "pod/awaits-config").stdout, 60, "FailedMount")

    def status() -> dict:
        st = c.kubectl_json("get", "pod", "awaits-config")["status"]
        return {"ip": st.get("podIP"), **{x["type"]: x["status"] for x in st.get("conditions") or ()}}
    assert (status()["ip"], status()["PodReadyToStartContainers"]) == (None, "False")
    assert c.kubectl("get", "pod", "awaits-config", "-o", "wide", "--no-headers").stdout.split()[5] == "<none>"
    c.kubectl("create", "configmap", "later", "--from-literal=k=v")
    wait_for(status_is(c, "awaits-config", "Running"), 60, "awaits-config Running")
    st = status()
    assert st["ip"] and st["PodReadyToStartContainers"] == "True"
