"""EndpointSlices and Endpoints through kubectl: pods created directly (the
scheduler places them on the simulated nodes, which give them IPs and mark
them ready) behind a Service."""

from __future__ import annotations

import json

import pytest

from .conftest import wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module deletes its Service and
    pods; an Endpoints of its own name stays."""
    return session_cluster


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "echo"}},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [
                {"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                 "ports": [{"name": "http", "containerPort": 8080}]}]}}


SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": "default"},
           "spec": {"selector": {"app": "echo"}, "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}}


def pod_ips(cluster) -> dict[str, str]:
    items = cluster.kubectl_json("get", "pods", "-l", "app=echo")["items"]
    return {p["metadata"]["name"]: p["status"]["podIP"] for p in items
            if p.get("status", {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))}


def table_addresses(cluster) -> set[str]:
    out = cluster.kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=echo").stdout
    rows = out.strip().splitlines()
    assert rows[0].split()[:4] == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS"]
    return {a for row in rows[1:] for a in row.split()[3].split(",") if a != "<unset>"}


def test_endpointslices_follow_ready_pods(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(SERVICE))
    for i in range(3):
        cluster.kubectl("apply", "-f", "-", input=json.dumps(pod(f"echo-{i}")))
    ips = wait_for(lambda: got if len(got := pod_ips(cluster)) == 3 else None)
    wait_for(lambda: table_addresses(cluster) == set(ips.values()))

    [sl] = cluster.kubectl_json("get", "endpointslices", "-l", "kubernetes.io/service-name=echo")["items"]
    assert sl["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == "endpointslice-controller.k8s.io"
    assert sl["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    nodes = {n["metadata"]["name"] for n in cluster.kubectl_json("get", "nodes")["items"]}
    assert all(ep["nodeName"] in nodes and ep["zone"] == "zone-a" for ep in sl["endpoints"])
    ep = cluster.kubectl_json("get", "endpoints", "echo")
    assert {a["ip"] for a in ep["subsets"][0]["addresses"]} == set(ips.values())

    cluster.kubectl("delete", "pod", "echo-1", "--wait=false")
    wait_for(lambda: table_addresses(cluster) == {ips["echo-0"], ips["echo-2"]})

    cluster.kubectl("delete", "service", "echo")
    wait_for(lambda: not cluster.kubectl_json("get", "endpointslices", "-l",
                                              "kubernetes.io/service-name=echo")["items"])
    cluster.kubectl("delete", "pods", "-l", "app=echo", "--wait=false")


def test_reading_or_writing_v1_endpoints_is_warned_as_deprecated(cluster):
    """KEP-4974: every request for v1 Endpoints carries the deprecation Warning (1.33+), as
    `kubectl get endpoints` prints it on a real cluster; EndpointSlices do not."""
    warning = "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
    assert warning in cluster.kubectl("get", "endpoints").stderr
    ep = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "by-hand", "namespace": "default"}}
    assert warning in cluster.kubectl("apply", "-f", "-", input=json.dumps(ep)).stderr
    assert "Warning" not in cluster.kubectl("get", "endpointslices").stderr
