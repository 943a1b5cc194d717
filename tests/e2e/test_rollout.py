"""`kubectl rollout` against `nanokube up`: a Deployment rolls out a new
image, `rollout history` lists revisions with their change-cause, `rollout
undo` (and `--to-revision`) rolls back, and the deployment controller's
ScalingReplicaSet events say what it scaled."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.conftest import wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): its four Deployments (roll, evented, paused,
    quiet) stay, each looked up by its own name and label."""
    return session_cluster


def _deployment(name: str, image: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "annotations": {"kubernetes.io/change-cause": "create"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 1,
                                           "containers": [{"name": "main", "image": image,
                                                           "command": ["sleep", "infinity"]}]}}}}


def _rollout_done(cluster, name: str) -> str:
    return cluster.kubectl("rollout", "status", f"deployment/{name}", "--timeout=60s", timeout=70).stdout


def _image(cluster, name: str) -> str:
    return cluster.kubectl_json("get", "deployment", name)["spec"]["template"]["spec"]["containers"][0]["image"]


def _history(cluster, name: str) -> list[tuple[str, str]]:
    lines = cluster.kubectl("rollout", "history", f"deployment/{name}").stdout.strip().splitlines()
    assert lines[0] == f"deployment.apps/{name} "
    assert lines[1].split() == ["REVISION", "CHANGE-CAUSE"]
    return [tuple(line.split(None, 1)) for line in lines[2:]]


def test_a_deployment_rolls_out_a_new_image_and_rolls_back(cluster):
    cluster.kubectl("create", "-f", "-", input=json.dumps(_deployment("roll", "busybox:1.36")))
    assert _rollout_done(cluster, "roll").endswith('deployment "roll" successfully rolled out\n')

    cluster.kubectl("set", "image", "deployment/roll", "main=busybox:1.37")
    cluster.kubectl("annotate", "deployment/roll", "kubernetes.io/change-cause=to 1.37", "--overwrite")
    assert "successfully rolled out" in _rollout_done(cluster, "roll")
    assert _history(cluster, "roll") == [("1", "create"), ("2", "to 1.37")]

    out = cluster.kubectl("rollout", "undo", "deployment/roll").stdout
    assert out == "deployment.apps/roll rolled back\n"
    assert "successfully rolled out" in _rollout_done(cluster, "roll")
    assert _image(cluster, "roll") == "busybox:1.36"
    assert _history(cluster, "roll") == [("2", "to 1.37"), ("3", "create")]
    d = cluster.kubectl_json("get", "deployment", "roll")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert (d["status"]["replicas"], d["status"]["updatedReplicas"], d["status"]["availableReplicas"]) == (2, 2, 2)
    rs = [r for r in cluster.kubectl_json("get", "replicasets", "-l", "app=roll")["items"]
          if r["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"]
    assert rs[0]["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    assert rs[0]["spec"]["replicas"] == 2

    detail = cluster.kubectl("rollout", "history", "deployment/roll", "--revision=2").stdout
    assert "busybox:1.37" in detail and "to 1.37" in detail
    cluster.kubectl("rollout", "undo", "deployment/roll", "--to-revision=2")
    assert "successfully rolled out" in _rollout_done(cluster, "roll")
    assert _image(cluster, "roll") == "busybox:1.37"
    assert _history(cluster, "roll") == [("3", "create"), ("4", "to 1.37")]

    bad = cluster.kubectl("rollout", "undo", "deployment/roll", "--to-revision=9", check=False)
    assert bad.returncode != 0 and "unable to find specified revision 9 in history" in bad.stderr


def test_scaling_events_name_the_replica_set_and_both_sizes(cluster):
    cluster.kubectl("create", "-f", "-", input=json.dumps(_deployment("evented", "busybox:1.36")))
    _rollout_done(cluster, "evented")
    first = cluster.kubectl_json("get", "replicasets", "-l", "app=evented")["items"][0]["metadata"]["name"]
    cluster.kubectl("set", "image", "deployment/evented", "main=busybox:1.37")
    _rollout_done(cluster, "evented")
    second = next(r["metadata"]["name"] for r in cluster.kubectl_json("get", "replicasets", "-l", "app=evented")["items"]
                  if r["metadata"]["name"] != first)

    def scaled():  # the controller writes its Events from a queue, maybe after the rollout is seen done
        events = cluster.kubectl_json("get", "events", "--field-selector",
                                      "involvedObject.kind=Deployment,involvedObject.name=evented")["items"]
        messages = [e["message"] for e in sorted(events, key=lambda e: (e["metadata"]["creationTimestamp"],
                                                                        e["metadata"]["name"]))
                    if e["reason"] == "ScalingReplicaSet"]
        return f"Scaled down replica set {first} from 1 to 0" in messages and messages
    messages = wait_for(scaled, 30, "the last scaling Event")
    assert messages[0] == f"Scaled up replica set {first} from 0 to 2"
    assert f"Scaled up replica set {second} from 0 to 1" in messages
    assert f"Scaled down replica set {first} from 2 to 1" in messages
    assert f"Scaled up replica set {second} from 1 to 2" in messages
    described = cluster.kubectl("describe", "deployment", "evented").stdout
    assert f"Scaled down replica set {first} from 1 to 0" in described


def test_a_paused_deployment_scales_but_rolls_out_only_when_resumed(cluster):
    cluster.kubectl("create", "-f", "-", input=json.dumps(_deployment("paused", "busybox:1.36")))
    _rollout_done(cluster, "paused")
    assert cluster.kubectl("rollout", "pause", "deployment/paused").stdout == "deployment.apps/paused paused\n"
    cluster.kubectl("set", "image", "deployment/paused", "main=busybox:1.37")

    def progressing():
        d = cluster.kubectl_json("get", "deployment", "paused")
        return next(c for c in d["status"]["conditions"] if c["type"] == "Progressing")
    deadline = time.monotonic() + 20
    while (cond := progressing())["reason"] != "DeploymentPaused" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (cond["status"], cond["reason"], cond["message"]) == ("Unknown", "DeploymentPaused", "Deployment is paused")
    assert len(cluster.kubectl_json("get", "replicasets", "-l", "app=paused")["items"]) == 1
    cluster.kubectl("scale", "deployment/paused", "--replicas=3")
    deadline = time.monotonic() + 20
    while cluster.kubectl_json("get", "deployment", "paused")["status"].get("availableReplicas") != 3 \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    [rs] = cluster.kubectl_json("get", "replicasets", "-l", "app=paused")["items"]
    assert (rs["spec"]["replicas"], rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"]) == (3, "3")
    cluster.kubectl("rollout", "resume", "deployment/paused")
    assert "successfully rolled out" in _rollout_done(cluster, "paused")
    assert progressing()["reason"] == "NewReplicaSetAvailable"
    assert [h[0] for h in _history(cluster, "paused")] == ["1", "2"]


def test_a_completed_rollout_back_to_an_old_replica_set_keeps_progressings_message(cluster):
    """Upstream's SetDeploymentCondition leaves a condition whose status and reason stay as it
    is: with no replicas to move, rolling back completes at once and Progressing keeps the
    message (and lastUpdateTime) naming the replica set that completed before."""
    d = _deployment("quiet", "busybox:1.36")
    d["spec"]["replicas"] = 0
    cluster.kubectl("create", "-f", "-", input=json.dumps(d))

    def progressing_at(generation: int) -> dict:
        deadline = time.monotonic() + 20
        while True:
            got = cluster.kubectl_json("get", "deployment", "quiet")
            cond = next((c for c in got["status"].get("conditions") or [] if c["type"] == "Progressing"), {})
            if got["status"].get("observedGeneration") == generation and cond.get("reason") == "NewReplicaSetAvailable" \
                    or time.monotonic() > deadline:
                assert got["status"].get("observedGeneration") == generation
                return cond

    def replica_set(image: str) -> str:
        return next(r["metadata"]["name"] for r in cluster.kubectl_json("get", "replicasets", "-l", "app=quiet")["items"]
                    if r["spec"]["template"]["spec"]["containers"][0]["image"] == image)

    first = progressing_at(1)
    assert first["message"] == f'ReplicaSet "{replica_set("busybox:1.36")}" has successfully progressed.'
    cluster.kubectl("set", "image", "deployment/quiet", "main=busybox:1.37")
    second = progressing_at(2)
    assert second["message"] == f'ReplicaSet "{replica_set("busybox:1.37")}" has successfully progressed.'
    cluster.kubectl("rollout", "undo", "deployment/quiet")
    after = progressing_at(3)
    assert _image(cluster, "quiet") == "busybox:1.36"
    assert (after["status"], after["reason"], after["message"], after["lastUpdateTime"]) == \
        ("True", "NewReplicaSetAvailable", second["message"], second["lastUpdateTime"])


def test_rolling_back_a_rollout_stuck_past_its_progress_deadline_rolls_out(cluster):
    """An image that cannot be pulled: the rollout exceeds progressDeadlineSeconds and `rollout status`
    says so; `rollout undo` back to the ready ReplicaSet is progress (upstream's syncRolloutStatus
    weighs it before the deadline), so the next `rollout status` waits for it and succeeds."""
    cluster.kubectl("create", "-f", "-", input=json.dumps(_deployment("stuck", "busybox:1.36")))
    _rollout_done(cluster, "stuck")
    cluster.kubectl("patch", "deployment/stuck", "-p", json.dumps(
        {"spec": {"progressDeadlineSeconds": 2,
                  "template": {"metadata": {"annotations": {"sim.nanokube.io/pull-error": "not-found"}},
                               "spec": {"containers": [{"name": "main", "image": "busybox:stuck"}]}}}}))
    failed = cluster.kubectl("rollout", "status", "deployment/stuck", "--timeout=60s", check=False, timeout=70)
    assert (failed.returncode, failed.stderr) == (1, 'error: deployment "stuck" exceeded its progress deadline\n')
    # time enough for the rollback on a loaded machine; an exceeded deadline stays exceeded
    cluster.kubectl("patch", "deployment/stuck", "-p", '{"spec": {"progressDeadlineSeconds": 600}}')
    assert cluster.kubectl("rollout", "undo", "deployment/stuck").stdout == "deployment.apps/stuck rolled back\n"
    assert _rollout_done(cluster, "stuck").endswith('deployment "stuck" successfully rolled out\n')
    progressing = next(c for c in cluster.kubectl_json("get", "deployment", "stuck")["status"]["conditions"]
                       if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "NewReplicaSetAvailable")
