"""kubectl (the version-matched 1.37) against `nanokube up` through pods/ephemeralcontainers and
pods/resize: `kubectl debug` adds an ephemeral container that the node starts, `kubectl patch
--subresource resize` resizes a running pod in place, and discovery lists both."""

from __future__ import annotations

import json

import pytest
import yaml

from .conftest import wait_for

NS = "podsub"


@pytest.fixture(scope="module")
def running(cluster):
    cluster.kubectl("create", "namespace", NS)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": NS,
           "annotations": {"sim.nanokube.io/exec.hostname": "app\n"}},
           "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                  "limits": {"cpu": "200m", "memory": "128Mi"}}}]}}
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))
    wait_for(lambda: _pod(cluster)["status"].get("phase") == "Running", what="the pod running")
    return cluster


def _pod(cluster) -> dict:
    return cluster.kubectl_json("get", "pod", "app", "-n", NS)


def test_discovery_lists_the_subresources(cluster):
    out = cluster.kubectl("api-resources", "--no-headers", "-o", "name").stdout.split()
    assert "pods" in out
    raw = json.loads(cluster.kubectl("get", "--raw", "/api/v1").stdout)
    subs = {r["name"]: r for r in raw["resources"] if r["name"].startswith("pods/")}
    assert subs["pods/ephemeralcontainers"]["kind"] == "Pod"
    assert subs["pods/ephemeralcontainers"]["verbs"] == ["get", "patch", "update"]
    assert subs["pods/resize"]["kind"] == "Pod"
    assert subs["pods/resize"]["verbs"] == ["get", "patch", "update"]


def test_kubectl_debug_adds_an_ephemeral_container_the_node_starts(running):
    r = running.kubectl("debug", "app", "-n", NS, "--image=busybox", "--target=app", "-c", "dbg",
                        "--", "sh", "-c", "echo debugging; sleep infinity")
    assert "disabled" not in r.stderr
    pod = _pod(running)
    ec = [c for c in pod["spec"]["ephemeralContainers"] if c["name"] == "dbg"]  # (others' if they ran first)
    assert [(c["name"], c["image"], c.get("targetContainerName")) for c in ec] == [("dbg", "busybox", "app")]
    assert ec[0]["terminationMessagePolicy"] == "File" and ec[0]["imagePullPolicy"] == "Always"

    def started():
        st = [s for s in _pod(running)["status"].get("ephemeralContainerStatuses") or [] if s["name"] == "dbg"]
        return st if st and "running" in st[0]["state"] else None
    st = wait_for(started, what="the ephemeral container running")
    assert st[0]["name"] == "dbg" and st[0]["state"]["running"]["startedAt"]
    assert st[0]["ready"] is False and st[0]["restartCount"] == 0
    assert st[0]["image"] == "docker.io/library/busybox:latest"
    y = yaml.safe_load(running.kubectl("get", "pod", "app", "-n", NS, "-o", "yaml").stdout)
    assert "dbg" in [s["name"] for s in y["status"]["ephemeralContainerStatuses"]]
    # the node serves the new container's log and streams as any other's
    assert running.kubectl("logs", "app", "-n", NS, "-c", "dbg").stdout == "debugging\n"
    r = running.kubectl("exec", "app", "-n", NS, "-c", "dbg", "--", "hostname")
    assert r.stdout == "app\n"


def test_an_existing_ephemeral_container_may_not_change(running):
    added = {"spec": {"ephemeralContainers": [{"name": "kept", "image": "busybox", "command": ["sleep", "infinity"],
                                               "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}]}}
    running.kubectl("patch", "pod", "app", "-n", NS, "--subresource", "ephemeralcontainers", "-p", json.dumps(added))
    patch = {"spec": {"ephemeralContainers": [{"name": "kept", "image": "alpine"}]}}
    r = running.kubectl("patch", "pod", "app", "-n", NS, "--subresource", "ephemeralcontainers", "-p", json.dumps(patch),
                        check=False)
    assert r.returncode != 0
    assert 'spec.ephemeralContainers: Forbidden: existing ephemeral containers "kept" may not be changed' in r.stderr


def test_kubectl_patch_resize_resizes_the_running_pod_in_place(running):
    before = _pod(running)
    patch = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "150m"},
                                                                   "limits": {"cpu": "300m"}}}]}}
    out = running.kubectl("patch", "pod", "app", "-n", NS, "--subresource", "resize", "-p", json.dumps(patch)).stdout
    assert "pod/app patched" in out

    def resized():
        p = _pod(running)
        s = p["status"]["containerStatuses"][0]
        return p if s.get("resources", {}).get("requests", {}).get("cpu") == "150m" else None
    pod = wait_for(resized, what="the resize actuated")
    s = pod["status"]["containerStatuses"][0]
    assert s["resources"] == {"limits": {"cpu": "300m", "memory": "128Mi"}, "requests": {"cpu": "150m", "memory": "64Mi"}}
    assert s["allocatedResources"] == {"cpu": "150m", "memory": "64Mi"}
    assert s["restartCount"] == before["status"]["containerStatuses"][0]["restartCount"]
    assert pod["metadata"]["uid"] == before["metadata"]["uid"]
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "150m", "memory": "64Mi"}
    assert not [c for c in pod["status"]["conditions"] if c["type"].startswith("PodResize")]
    assert pod["metadata"]["generation"] > before["metadata"]["generation"]
    assert pod["status"]["observedGeneration"] == pod["metadata"]["generation"]
    gen = pod["metadata"]["generation"]

    def recorded():
        out = running.kubectl("events", "-n", NS, "--for", "pod/app").stdout
        return out if "ResizeCompleted" in out else None
    out = wait_for(recorded, what="the resize's events")
    spec = ('{"containers":[{"name":"app","resources":{"limits":{"cpu":"300m","memory":"128Mi"},'
            f'"requests":{{"cpu":"150m","memory":"64Mi"}}}}}}],"generation":{gen}}}')
    assert f"Pod resize started: {spec}" in out and f"Pod resize completed: {spec}" in out


def test_a_resize_beyond_the_node_is_pending_infeasible(running):
    patch = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1000"},
                                                                   "limits": {"cpu": "1000"}}}]}}
    actual = _pod(running)["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"]  # whatever ran before
    running.kubectl("patch", "pod", "app", "-n", NS, "--subresource", "resize", "-p", json.dumps(patch))

    def pending():
        return [c for c in _pod(running)["status"]["conditions"] if c["type"] == "PodResizePending"]
    cond = wait_for(pending, what="PodResizePending")[0]
    assert cond["status"] == "True" and cond["reason"] == "Infeasible"
    assert cond["message"].startswith("Node didn't have enough capacity: cpu, requested: 1000000, capacity: ")
    assert _pod(running)["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == actual


def test_a_resize_may_not_change_the_qos_class(running):
    patch = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "300m", "memory": "128Mi"},
                                                                   "limits": {"cpu": "300m", "memory": "128Mi"}}}]}}
    r = running.kubectl("patch", "pod", "app", "-n", NS, "--subresource", "resize", "-p", json.dumps(patch), check=False)
    assert r.returncode != 0
    assert 'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing' in r.stderr


def test_a_deferred_resize_is_actuated_once_the_node_has_room(running):
    node = _pod(running)["spec"]["nodeName"]
    big = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": NS},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx:1.27",
                                                      "resources": {"requests": {"cpu": "40"}}}]}}
    small = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "small", "namespace": NS},
             "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx:1.27",
                                                        "resources": {"requests": {"cpu": "1"}}}]}}
    running.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([big, small]))
    phase = lambda name: running.kubectl_json("get", "pod", name, "-n", NS)["status"].get("phase")  # noqa: E731
    wait_for(lambda: phase("big") == "Running" and phase("small") == "Running", what="both pods running")
    patch = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "30"}}}]}}
    running.kubectl("patch", "pod", "small", "-n", NS, "--subresource", "resize", "-p", json.dumps(patch))

    def condition():
        conds = running.kubectl_json("get", "pod", "small", "-n", NS)["status"]["conditions"]
        return [c for c in conds if c["type"] == "PodResizePending"]
    cond = wait_for(condition, what="PodResizePending")[0]
    assert cond["reason"] == "Deferred"
    assert cond["message"].startswith("Node didn't have enough resource: cpu, requested: 30000, used: ")
    running.kubectl("delete", "pod", "big", "-n", NS, "--wait=false")

    def actuated():
        st = running.kubectl_json("get", "pod", "small", "-n", NS)["status"]
        return st if st["containerStatuses"][0]["resources"]["requests"]["cpu"] == "30" else None
    st = wait_for(actuated, what="the deferred resize actuated")
    assert not [c for c in st["conditions"] if c["type"].startswith("PodResize")]
    assert st["containerStatuses"][0]["allocatedResources"] == {"cpu": "30"}
