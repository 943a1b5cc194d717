"""What the kubelet shows a user of the pods it cannot start or lets run too long, read with
kubectl as on a real cluster: `kubectl get`'s STATUS column and the Events `kubectl describe`
lists."""

from __future__ import annotations

import json

import pytest

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
    out = c.kubectl("describe", "pod", "local").stdout
    assert "ErrImageNeverPull" in out and message in out, out
    waiting = c.kubectl("get", "pod", "local", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.message}")
    assert waiting.stdout == message


def test_an_init_container_whose_pull_fails_is_init_err_image_pull(kubelet_cluster):
    c = kubelet_cluster
    create(c, {"metadata": {"name": "init-pull", "annotations": {"sim.nanokube.io/pull-error": "not-found"}},
               "spec": {"initContainers": [{"name": "setup", "image": "busybox:1.99-missing"}],
                        "containers": [{"name": "app", "image": "busybox:1.99-missing"}]}})
    # Init:ErrImagePull for the second until the next sync, then backing off for 10 s
    assert wait_for(status_is(c, "init-pull", "Init:ImagePullBackOff"))[1] == "0/1"
    reason = c.kubectl("get", "pod", "init-pull", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}")
    assert reason.stdout == "PodInitializing"


def test_a_pod_past_its_deadline_while_its_image_is_pulled_is_deadline_exceeded(kubelet_cluster):
    c = kubelet_cluster
    create(c, {"metadata": {"name": "slow", "annotations": {"sim.nanokube.io/pull-seconds": "600"}},
               "spec": {"activeDeadlineSeconds": 2, "containers": [{"name": "app", "image": "busybox:1.36"}]}})
    # kubectl prints the never-started container's reason over the pod's, as for an evicted pod
    assert wait_for(status_is(c, "slow", "ContainerStatusUnknown"))[1] == "0/1"
    got = c.kubectl("get", "pod", "slow", "-o", "jsonpath={.status.phase} {.status.reason}")
    assert got.stdout == "Failed DeadlineExceeded"
