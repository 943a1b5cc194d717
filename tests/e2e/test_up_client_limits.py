"""`nanokube up`'s client-limit flags (kube-controller-manager's --kube-api-qps/--kube-api-burst, the
kubelet's --kube-api-qps/--kube-api-burst/--event-qps/--event-burst) reach the components they name:
the kubelets' show in each node's /configz, kube-controller-manager's hold back its controllers'
requests, as the audit log's times show."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

from .conftest import running_cluster, wait_for

LIMITS = ("--kubelet-kube-api-qps", "7", "--kubelet-kube-api-burst", "8", "--kubelet-event-qps", "0",
          "--kubelet-event-burst", "9", "--controller-manager-kube-api-qps", "2",
          "--controller-manager-kube-api-burst", "1")


def _at(event: dict) -> float:
    return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()


def test_the_limits_reach_the_kubelets_and_the_controllers():
    with running_cluster("limits", LIMITS) as c:
        node = c.kubectl_json("get", "nodes")["items"][0]["metadata"]["name"]
        config = json.loads(c.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/configz").stdout)["kubeletconfig"]
        # an event qps of 0 is client-go's default, 5 a second
        assert {k: config[k] for k in ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst")} == {
            "kubeAPIQPS": 7, "kubeAPIBurst": 8, "eventRecordQPS": 5, "eventBurst": 9}
        labels = {"app": "limited"}
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "limited"},
              "spec": {"replicas": 4, "selector": {"matchLabels": labels}, "template": {
                  "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
        c.kubectl("apply", "-f", "-", input=json.dumps(rs))
        wait_for(lambda: len(c.kubectl_json("get", "pods", "-l", "app=limited")["items"]) == 4, timeout=60,
                 what="the ReplicaSet's four pods")
        creates = sorted(_at(e) for e in c.audit_events() if e["verb"] == "create" and e["stage"] == "ResponseComplete"
                         and e["objectRef"]["resource"] == "pods" and "subresource" not in e["objectRef"]
                         and e["userAgent"].endswith("/replicaset-controller"))
        assert len(creates) == 4
        # a burst of one, then two a second: the four creates span 1.5 s at least (under the default 20/30, none)
        assert creates[-1] - creates[0] >= 1.2, creates


def test_a_negative_kubelet_limit_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path), "--kubelet-event-qps",
                        "-1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ("nanokube: invalid configuration: eventRecordQPS (--kubelet-event-qps) -1 "
                                         "must not be a negative number")


def test_a_controller_manager_qps_without_a_burst_is_refused(tmp_path):
    """client-go's NewForConfig refuses a positive qps with no burst, as `nanokube controller-manager` does."""
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path),
                        "--controller-manager-kube-api-qps", "10", "--controller-manager-kube-api-burst", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ("nanokube: burst is required to be greater than 0 when RateLimiter is not "
                                         "set and QPS is set to greater than 0")
