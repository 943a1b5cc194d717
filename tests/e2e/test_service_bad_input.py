"""Service allocation refusals through kubectl, each the 422 kube-apiserver
gives: a port outside the NodePort range, a NodePort already taken, a
ClusterIP outside the service CIDR or already allocated; nothing is created."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): it leaves the Services np-a (NodePort 30034) and
    ip-a (10.96.7.7), a port and an address no other module asks for; the port is of the range's static
    band, which dynamic picks (random, as upstream's) reach only once the rest is full."""
    return session_cluster


def svc(name: str, **spec) -> str:
    base = {"selector": {"app": name}, "ports": [{"port": 80}]}
    return json.dumps({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {**base, **spec}})


def refused(cluster, manifest: str) -> str:
    r = cluster.kubectl("create", "-f", "-", input=manifest, check=False)
    assert r.returncode != 0
    return r.stderr


def test_node_port_outside_the_range(cluster):
    err = refused(cluster, svc("np-low", type="NodePort", ports=[{"port": 80, "nodePort": 80}]))
    assert 'The Service "np-low" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in ' \
           'the valid range. The range of valid ports is 30000-32767' in err
    assert cluster.kubectl("get", "service", "np-low", check=False).returncode != 0


def test_node_port_already_allocated(cluster):
    cluster.kubectl("create", "-f", "-", input=svc("np-a", type="NodePort", ports=[{"port": 80, "nodePort": 30034}]))
    err = refused(cluster, svc("np-b", type="NodePort", ports=[{"port": 80, "nodePort": 30034}]))
    assert 'The Service "np-b" is invalid: spec.ports[0].nodePort: Invalid value: 30034: provided port is ' \
           'already allocated' in err


def test_cluster_ip_outside_the_cidr_or_taken(cluster):
    err = refused(cluster, svc("ip-out", clusterIP="192.168.0.1"))
    assert 'The Service "ip-out" is invalid: spec.clusterIPs: Invalid value: ["192.168.0.1"]: failed to allocate ' \
           'IP 192.168.0.1: the provided IP (192.168.0.1) is not in the valid range. The range of valid IPs is ' \
           '10.96.0.0/12' in err
    cluster.kubectl("create", "-f", "-", input=svc("ip-a", clusterIP="10.96.7.7"))
    err = refused(cluster, svc("ip-b", clusterIP="10.96.7.7"))
    assert 'failed to allocate IP 10.96.7.7: provided IP is already allocated' in err
