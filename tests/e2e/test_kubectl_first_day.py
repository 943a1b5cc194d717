"""An engineer's first day with kubectl against `nanokube up`: the everyday
commands whose results kube-apiserver and its controllers shape, checked
against what they show on an upstream cluster."""

from __future__ import annotations

from tests.e2e.conftest import wait_for

UNSCHEDULABLE = "node.kubernetes.io/unschedulable:NoSchedule"


def _taints_line(cluster, node: str) -> str:
    out = cluster.kubectl("describe", "node", node).stdout
    return next(line for line in out.splitlines() if line.startswith("Taints:"))


def test_cordon_taints_the_node_unschedulable_and_uncordon_lifts_it(cluster):
    node = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    assert cluster.kubectl("cordon", node).stdout.strip() == f"node/{node} cordoned"
    try:
        wait_for(lambda: _taints_line(cluster, node).split() == ["Taints:", UNSCHEDULABLE], timeout=15,
                 what="the unschedulable taint")
        taint = cluster.kubectl_json("get", "node", node)["spec"]["taints"][0]
        assert taint["timeAdded"]
    finally:
        cluster.kubectl("uncordon", node)
    wait_for(lambda: _taints_line(cluster, node).split() == ["Taints:", "<none>"], timeout=15,
             what="the taint lifted")
