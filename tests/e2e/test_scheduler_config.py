"""`nanokube up --scheduler-config`: a KubeSchedulerConfiguration with a
second profile schedules the pods that name it; a bad file is refused."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml

from .conftest import running_cluster

CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "bin-packer", "pluginConfig": [{"name": "NodeResourcesFit", "args": {
            "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]}}}]},
    ],
}


@pytest.fixture(scope="module")
def configured(tmp_path_factory):
    cfg = tmp_path_factory.mktemp("sched") / "scheduler.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    with running_cluster("sched-config", ("--scheduler-config", str(cfg))) as c:
        yield c


def node_of(c, name, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node = c.kubectl("get", "pod", name, "-o", "jsonpath={.spec.nodeName}").stdout
        if node:
            return node
        time.sleep(0.3)
    raise AssertionError(f"pod {name} was never scheduled")


def pod(name, scheduler):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox",
                                                    "resources": {"requests": {"cpu": "1"}}}]}}


def test_second_profile_packs_pods_onto_one_node(configured):
    c = configured
    for i in range(3):
        c.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod(f"packed-{i}", "bin-packer")))
    nodes = {node_of(c, f"packed-{i}") for i in range(3)}
    assert len(nodes) == 1, "MostAllocated puts every pod on the fullest node"
    ev = c.kubectl_json("get", "events", "--field-selector", "involvedObject.name=packed-0,reason=Scheduled")
    assert ev["items"][0]["reportingComponent"] == "bin-packer", "each profile reports as its schedulerName"


def test_unknown_profile_is_left_pending(configured):
    c = configured
    c.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod("nobody", "no-such-scheduler")))
    # the scheduler sees pods in the order they were made: once it has bound a later one, it has
    # passed this one by
    c.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod("after-nobody", "default-scheduler")))
    node_of(c, "after-nobody")
    assert c.kubectl("get", "pod", "nobody", "-o", "jsonpath={.spec.nodeName}").stdout == ""


def test_bad_config_is_refused(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**CONFIG, "profiles": [{"schedulerName": "x", "plugin": {}}]}))
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path / "d"), "--port", "0",
                        "--store", "memory", "--scheduler-config", str(bad)],
                       check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert 'nanokube: --scheduler-config: strict decoding error: unknown field "profiles[0].plugin"' in r.stderr
