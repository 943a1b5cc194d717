"""Simulated nodes seen through kubectl: Ready nodes with the declared
capacity, bound pods that run, finish and delete, and renewed leases."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import running_cluster, wait_for

CLUSTER_FILE = "examples/clusters/mixed.yaml"


@pytest.fixture(scope="module")
def nodes_cluster(store_url):
    """The nodes renew their leases every 2 s instead of 10, so a renewal is soon seen."""
    with running_cluster("nodes", ("--cluster", CLUSTER_FILE), {"NANOKUBE_NODE_RENEW_INTERVAL": "2"},
                         store=store_url) as c:
        yield c


def pod_manifest(name: str, annotations: dict | None = None, restart: str = "Always") -> str:
    """A pod no scheduler claims (schedulerName names none), so the test binds it itself."""
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
                       "spec": {"restartPolicy": restart, "terminationGracePeriodSeconds": 5,
                                "schedulerName": "manual-binding",
                                "containers": [{"name": "main", "image": "busybox:1.36",
                                                "command": ["sleep", "infinity"]}]}})


def bind(cluster, name: str, node: str) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    r = cluster.kubectl("create", "--raw", f"/api/v1/namespaces/default/pods/{name}/binding", "-f", "-", input=body)
    assert json.loads(r.stdout)["status"] == "Success"


def phase(cluster, name: str, want: str):
    def check():
        p = cluster.kubectl_json("get", "pod", name)
        return p if p.get("status", {}).get("phase") == want else None
    return check


def test_every_node_is_ready_with_declared_capacity(nodes_cluster):
    items = nodes_cluster.kubectl_json("get", "nodes")["items"]
    assert len(items) == 18
    for n in items:
        ready = {c["type"]: c["status"] for c in n["status"]["conditions"]}["Ready"]
        assert ready == "True"
    train = next(n for n in items if n["metadata"]["name"] == "train-0")
    assert train["status"]["capacity"]["cpu"] == "192" and train["status"]["capacity"]["memory"] == "2Ti"
    assert train["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    table = nodes_cluster.kubectl("get", "nodes").stdout
    assert table.count(" Ready ") == 18 and "v1.37.0" in table


def test_bound_pod_runs_with_an_ip(nodes_cluster):
    nodes_cluster.kubectl("apply", "-f", "-", input=pod_manifest("web"))
    bind(nodes_cluster, "web", "cpu-3")
    p = wait_for(phase(nodes_cluster, "web", "Running"))
    cidr = nodes_cluster.kubectl_json("get", "node", "cpu-3")["spec"]["podCIDR"]
    assert p["status"]["podIP"].rsplit(".", 1)[0] == cidr.rsplit(".", 1)[0]
    assert p["status"]["containerStatuses"][0]["ready"] is True
    wide = nodes_cluster.kubectl("get", "pod", "web", "-o", "wide").stdout
    assert "Running" in wide and p["status"]["podIP"] in wide and "cpu-3" in wide


def test_pod_with_run_seconds_succeeds(nodes_cluster):
    nodes_cluster.kubectl("apply", "-f", "-", input=pod_manifest(
        "once", {"sim.nanokube.io/run-seconds": "1", "sim.nanokube.io/exit-code": "0"}, restart="Never"))
    bind(nodes_cluster, "once", "infer-0")
    p = wait_for(phase(nodes_cluster, "once", "Succeeded"))
    assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert "Completed" in nodes_cluster.kubectl("get", "pod", "once").stdout


def test_deleting_a_running_pod_completes(nodes_cluster):
    nodes_cluster.kubectl("apply", "-f", "-", input=pod_manifest("doomed"))
    bind(nodes_cluster, "doomed", "train-1")
    wait_for(phase(nodes_cluster, "doomed", "Running"))
    nodes_cluster.kubectl("delete", "pod", "doomed", "--timeout=30s")
    r = nodes_cluster.kubectl("get", "pod", "doomed", check=False)
    assert r.returncode != 0 and "NotFound" in r.stderr


def test_leases_are_renewed(nodes_cluster):
    def renew_times():
        items = nodes_cluster.kubectl_json("get", "leases", "-n", "kube-node-lease")["items"]
        return {lease["metadata"]["name"]: lease["spec"]["renewTime"] for lease in items}
    first = renew_times()
    assert len(first) == 18
    def all_renewed():
        now = renew_times()
        return now if all(now[k] > first[k] for k in first) else None
    later = wait_for(all_renewed, timeout=60)
    assert set(later) == set(first)


def test_scheduler_places_and_runs_a_pod(nodes_cluster):
    cluster = nodes_cluster
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scheduled", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"],
                                    "resources": {"requests": {"cpu": "500m"}}}]}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod))
    cluster.kubectl("wait", "pod/scheduled", "-n", "default", "--for=condition=Ready", "--timeout=60s")
    got = cluster.kubectl_json("get", "pod", "scheduled", "-n", "default")
    assert got["spec"]["nodeName"]
    assert got["status"]["phase"] == "Running" and got["status"]["podIP"]
    huge = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "too-big", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"],
                                     "resources": {"requests": {"cpu": "100000"}}}]}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(huge))
    cluster.kubectl("wait", "pod/too-big", "-n", "default", "--for=jsonpath={.status.conditions[0].reason}=Unschedulable",
                    "--timeout=60s")
    # the scheduler's Events are written from a queue, maybe after the condition
    wait_for(lambda: "FailedScheduling" in (events := cluster.kubectl(
        "get", "events", "-n", "default", "--field-selector", "involvedObject.name=too-big").stdout)
        and "Insufficient cpu" in events, 30, "the FailedScheduling Event")


def test_describe_node_and_kubectl_events_show_the_kubelet_and_node_controller_events(nodes_cluster):
    """What `kubectl describe node` shows under Events: the kubelet's (on its nodeRef, uid = the
    node's name) beside the node controller's RegisteredNode (on the Node's uid). `kubectl events
    --for node/NAME` selects involvedObject.apiVersion=v1 as well, which the kubelet's nodeRef has
    none of: it lists the node controller's alone, as upstream's does (a known kubectl limitation)."""
    def described():
        out = nodes_cluster.kubectl("describe", "node", "cpu-1").stdout
        return out if "RegisteredNode" in out else None
    out = wait_for(described).split("Events:", 1)[1]
    for reason, source, message in (
            ("Starting", "kubelet", "Starting kubelet."),
            ("NodeHasSufficientMemory", "kubelet", "Node cpu-1 status is now: NodeHasSufficientMemory"),
            ("NodeHasNoDiskPressure", "kubelet", "Node cpu-1 status is now: NodeHasNoDiskPressure"),
            ("NodeHasSufficientPID", "kubelet", "Node cpu-1 status is now: NodeHasSufficientPID"),
            ("NodeAllocatableEnforced", "kubelet", "Updated Node Allocatable limit across pods"),
            ("NodeReady", "kubelet", "Node cpu-1 status is now: NodeReady"),
            ("RegisteredNode", "node-controller", "Node cpu-1 event: Registered Node cpu-1 in Controller")):
        assert any(line.split()[:2] == ["Normal", reason] and line.split()[3] == source and line.endswith(message)
                   for line in out.splitlines()), (reason, out)
    table = nodes_cluster.kubectl("events", "--for", "node/cpu-1").stdout
    assert "Registered Node cpu-1" in table and "Starting kubelet." not in table
    table = nodes_cluster.kubectl("get", "events", "--field-selector", "involvedObject.name=cpu-1").stdout
    assert "node/cpu-1" in table and "Starting kubelet." in table and "Registered Node cpu-1" in table
