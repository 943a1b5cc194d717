"""DaemonSets, StatefulSets and their ControllerRevisions against `nanokube up`
through kubectl: one daemon pod per node (none on a tainted node without a
toleration), an image rolled node by node with rollout status/history/undo,
a StatefulSet of 3 created in order with bound claims, and the kubectl
columns, describe and explain of these kinds."""

from __future__ import annotations

import json
import threading
import time

from kubernetes import client

from tests.e2e.conftest import wait_for


def _daemonset(name: str, image: str, **spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "agent", "image": image}]}}, **spec}}


def _statefulset(name: str, replicas: int = 3) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"serviceName": name, "replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "web", "image": "nginx:1.27",
                                                           "volumeMounts": [{"name": "www", "mountPath": "/data"}]}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}


def _pods(cluster, selector: str) -> list[dict]:
    return [p for p in cluster.kubectl_json("get", "pods", "-l", selector)["items"]
            if not p["metadata"].get("deletionTimestamp")]


def _nodes(cluster) -> list[str]:
    return sorted(n["metadata"]["name"] for n in cluster.kubectl_json("get", "nodes")["items"])


def test_daemonset_one_pod_per_node_rolls_node_by_node_and_undoes(cluster):
    nodes = _nodes(cluster)
    assert len(nodes) >= 2
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_daemonset("agent", "agent:1")))
    out = cluster.kubectl("rollout", "status", "daemonset/agent", "--timeout=60s", timeout=70).stdout
    assert out.endswith('daemon set "agent" successfully rolled out\n')
    pods = _pods(cluster, "app=agent")
    assert sorted(p["spec"]["nodeName"] for p in pods) == nodes, "one pod on each node"
    for p in pods:
        terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [p["spec"]["nodeName"]]}]}]

    table = cluster.kubectl("get", "ds", "agent").stdout.splitlines()
    assert table[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE", "SELECTOR", "AGE"]
    n = str(len(nodes))
    assert table[1].split()[:7] == ["agent", n, n, n, n, n, "<none>"]
    wide = cluster.kubectl("get", "ds", "agent", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-4:] == ["AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert wide[1].split()[-3:] == ["agent", "agent:1", "app=agent"]

    seen_ready: list[int] = []
    stop = threading.Event()
    core = client.CoreV1Api(cluster.client())

    def watch():
        while not stop.is_set():
            pods = [p for p in core.list_namespaced_pod("default", label_selector="app=agent").items
                    if not p.metadata.deletion_timestamp]
            seen_ready.append(sum(1 for p in pods if any(
                c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))))
            time.sleep(0.05)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        cluster.kubectl("set", "image", "daemonset/agent", "agent=agent:2")
        out = cluster.kubectl("rollout", "status", "daemonset/agent", "--timeout=60s", timeout=70).stdout
    finally:
        stop.set()
        watcher.join()
    assert "successfully rolled out" in out
    assert min(seen_ready) >= len(nodes) - 1, "maxUnavailable 1: never more than one node without a ready pod"
    pods = _pods(cluster, "app=agent")
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"agent:2"}
    assert sorted(p["spec"]["nodeName"] for p in pods) == nodes

    history = cluster.kubectl("rollout", "history", "daemonset/agent").stdout.strip().splitlines()
    assert history[0] == "daemonset.apps/agent " and history[1].split() == ["REVISION", "CHANGE-CAUSE"]
    assert [line.split()[0] for line in history[2:]] == ["1", "2"]
    revs = cluster.kubectl("get", "controllerrevisions", "-l", "app=agent").stdout.splitlines()
    assert revs[0].split() == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert sorted(line.split()[1] for line in revs[1:]) == ["daemonset.apps/agent"] * 2
    assert cluster.kubectl("rollout", "undo", "daemonset/agent").stdout == "daemonset.apps/agent rolled back\n"
    cluster.kubectl("rollout", "status", "daemonset/agent", "--timeout=60s", timeout=70)
    wait_for(lambda: {p["spec"]["containers"][0]["image"] for p in _pods(cluster, "app=agent")} == {"agent:1"},
             what="pods back on agent:1")
    history = cluster.kubectl("rollout", "history", "daemonset/agent").stdout.strip().splitlines()
    assert [line.split()[0] for line in history[2:]] == ["2", "3"]
    detail = cluster.kubectl("rollout", "history", "daemonset/agent", "--revision=2").stdout
    assert "agent:2" in detail and "Pod Template:" in detail
    cluster.kubectl("rollout", "undo", "daemonset/agent", "--to-revision=2")
    cluster.kubectl("rollout", "status", "daemonset/agent", "--timeout=60s", timeout=70)
    wait_for(lambda: {p["spec"]["containers"][0]["image"] for p in _pods(cluster, "app=agent")} == {"agent:2"},
             what="pods on agent:2 again")

    described = cluster.kubectl("describe", "daemonset", "agent").stdout
    assert "Desired Number of Nodes Scheduled: " + n in described and "SuccessfulCreate" in described
    explained = cluster.kubectl("explain", "daemonset.spec.updateStrategy").stdout
    assert "KIND:       DaemonSet" in explained and "rollingUpdate" in explained


def test_no_daemon_pod_on_a_tainted_node_without_a_toleration(cluster):
    nodes = _nodes(cluster)
    tainted = nodes[-1]
    cluster.kubectl("taint", "node", tainted, "dedicated=storage:NoSchedule")
    try:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(_daemonset("plain", "agent:1")))
        tolerant = _daemonset("tolerant", "agent:1")
        tolerant["spec"]["template"]["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        cluster.kubectl("apply", "-f", "-", input=json.dumps(tolerant))
        for name in ("plain", "tolerant"):
            cluster.kubectl("rollout", "status", f"daemonset/{name}", "--timeout=60s", timeout=70)
        assert sorted(p["spec"]["nodeName"] for p in _pods(cluster, "app=plain")) == nodes[:-1]
        assert sorted(p["spec"]["nodeName"] for p in _pods(cluster, "app=tolerant")) == nodes
        status = cluster.kubectl_json("get", "ds", "plain")["status"]
        assert status["desiredNumberScheduled"] == len(nodes) - 1 and status["numberMisscheduled"] == 0
    finally:
        cluster.kubectl("taint", "node", tainted, "dedicated-")
        cluster.kubectl("delete", "ds", "plain", "tolerant")


def test_statefulset_creates_web_0_to_2_in_order_with_bound_claims(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
         "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 80}]}}))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_statefulset("web")))
    out = cluster.kubectl("rollout", "status", "statefulset/web", "--timeout=90s", timeout=100).stdout
    assert "partitioned roll out complete" in out or "statefulset rolling update complete" in out
    pods = {p["metadata"]["name"]: p for p in _pods(cluster, "app=web")}
    assert sorted(pods) == ["web-0", "web-1", "web-2"]
    created = [pods[f"web-{i}"]["metadata"]["creationTimestamp"] for i in range(3)]
    assert created == sorted(created)
    ready_at = [next(c["lastTransitionTime"] for c in pods[f"web-{i}"]["status"]["conditions"] if c["type"] == "Ready")
                for i in range(3)]
    assert ready_at[0] <= created[1] and ready_at[1] <= created[2], "each pod waits for its predecessor to be Ready"
    assert (pods["web-1"]["spec"]["hostname"], pods["web-1"]["spec"]["subdomain"]) == ("web-1", "web")
    claims = {c["metadata"]["name"]: c for c in cluster.kubectl_json("get", "pvc", "-l", "app=web")["items"]}
    assert sorted(claims) == ["www-web-0", "www-web-1", "www-web-2"]
    wait_for(lambda: all(c["status"].get("phase") == "Bound" for c in
                         cluster.kubectl_json("get", "pvc", "-l", "app=web")["items"]), what="claims bound")

    table = cluster.kubectl("get", "sts", "web", "-o", "wide").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    assert table[1].split()[:2] == ["web", "3/3"] and table[1].split()[-2:] == ["web", "nginx:1.27"]

    cluster.kubectl("scale", "statefulset", "web", "--replicas=2")
    wait_for(lambda: sorted(p["metadata"]["name"] for p in _pods(cluster, "app=web")) == ["web-0", "web-1"],
             what="web-2 scaled away")
    cluster.kubectl("set", "image", "statefulset/web", "web=nginx:1.28")
    cluster.kubectl("rollout", "status", "statefulset/web", "--timeout=90s", timeout=100)
    assert {p["spec"]["containers"][0]["image"] for p in _pods(cluster, "app=web")} == {"nginx:1.28"}
    history = cluster.kubectl("rollout", "history", "statefulset/web").stdout.strip().splitlines()
    assert history[0] == "statefulset.apps/web " and [line.split()[0] for line in history[2:]] == ["1", "2"]
    assert cluster.kubectl("rollout", "undo", "statefulset/web").stdout == "statefulset.apps/web rolled back\n"
    cluster.kubectl("rollout", "status", "statefulset/web", "--timeout=90s", timeout=100)
    wait_for(lambda: {p["spec"]["containers"][0]["image"] for p in _pods(cluster, "app=web")} == {"nginx:1.27"},
             what="pods back on nginx:1.27")
    described = cluster.kubectl("describe", "statefulset", "web").stdout
    assert "Volume Claims:" in described and "www" in described
    explained = cluster.kubectl("explain", "statefulset.spec.persistentVolumeClaimRetentionPolicy").stdout
    assert "whenScaled" in explained


def test_claims_follow_the_retention_policy(cluster):
    sts = _statefulset("keep", replicas=2)
    sts["spec"]["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Delete", "whenScaled": "Delete"}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(sts))
    cluster.kubectl("rollout", "status", "statefulset/keep", "--timeout=90s", timeout=100)

    def claims():
        return sorted(c["metadata"]["name"] for c in cluster.kubectl_json("get", "pvc", "-l", "app=keep")["items"]
                      if not c["metadata"].get("deletionTimestamp"))
    assert claims() == ["www-keep-0", "www-keep-1"]
    cluster.kubectl("scale", "statefulset", "keep", "--replicas=1")
    wait_for(lambda: claims() == ["www-keep-0"], what="the scaled-away pod's claim deleted with it")
    cluster.kubectl("delete", "statefulset", "keep")
    wait_for(lambda: claims() == [], what="the set's claims deleted with it")


def test_a_daemonset_deleted_with_orphan_cascade_is_taken_back_whole(cluster):
    ds = _daemonset("keeper", "agent:1")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(ds))
    cluster.kubectl("rollout", "status", "daemonset/keeper", "--timeout=60s", timeout=70)
    before = sorted(p["metadata"]["uid"] for p in _pods(cluster, "app=keeper"))
    cluster.kubectl("delete", "daemonset", "keeper", "--cascade=orphan")
    wait_for(lambda: all(not p["metadata"].get("ownerReferences") for p in _pods(cluster, "app=keeper")),
             what="pods orphaned")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(ds))
    cluster.kubectl("rollout", "status", "daemonset/keeper", "--timeout=60s", timeout=70)
    wait_for(lambda: all(p["metadata"].get("ownerReferences") for p in _pods(cluster, "app=keeper")),
             what="pods adopted")
    assert sorted(p["metadata"]["uid"] for p in _pods(cluster, "app=keeper")) == before, "no pod was replaced"
    history = cluster.kubectl("rollout", "history", "daemonset/keeper").stdout.strip().splitlines()
    assert [line.split()[0] for line in history[2:]] == ["1"], "the orphaned revision is adopted, not duplicated"
    cluster.kubectl("delete", "daemonset", "keeper")
