"""A container's environment as `kubectl exec` and its own command see it, the same on both
runtimes (container_env computes it for both): env values with their $(VAR) references, envFrom
with a prefix, valueFrom's fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef, the
kubelet's service link variables, HOSTNAME and the image's PATH and HOME. The process runtime's
case is skipped (loudly) only without root, `ip` or `nft`."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, running_cluster, wait_for

SETUP = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "train", "namespace": "default"},
     "data": {"epochs": "3", "lr": "0.1"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "default"},
     "stringData": {"value": "s3cr3t"}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "model-server", "namespace": "default"},
     "spec": {"ports": [{"name": "http", "port": 8080}], "selector": {"app": "none"}}},
]
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "default",
                                                        "labels": {"team": "ml"}},
       "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
           "name": "main", "image": "busybox",
           "command": ["sh", "-c", "echo $(GREETING) from $HOSTNAME: $MY_VAR; sleep 3600"],
           "resources": {"limits": {"memory": "128Mi"}},
           "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "train"}}],
           "env": [{"name": "GREETING", "value": "hello"},
                   {"name": "MY_VAR", "value": "$(GREETING) world"},
                   {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                   {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
                   {"name": "MEMORY_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                                            "divisor": "1Mi"}}},
                   {"name": "EPOCHS", "valueFrom": {"configMapKeyRef": {"name": "train", "key": "epochs"}}},
                   {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "token", "key": "value"}}}]}]}}


@pytest.fixture(scope="module", params=["simulated", pytest.param("process", marks=PROCESS_RUNTIME)])
def trainer(request, store_url):
    """A cluster of each runtime running the trainer pod."""
    with (running_cluster("env") if request.param == "simulated" else process_cluster(store_url, "env")) as c:
        c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": SETUP}))
        c.kubectl("apply", "-f", "-", input=json.dumps(POD))
        wait_for(lambda: c.kubectl_json("get", "pod", "trainer")["status"].get("phase") == "Running", 90,
                 "trainer running")
        yield c


def test_exec_env_prints_the_containers_environment(trainer):
    lines = trainer.kubectl("exec", "trainer", "--", "env").stdout.splitlines()
    env = dict(line.split("=", 1) for line in lines)
    ip = trainer.kubectl_json("get", "service", "model-server")["spec"]["clusterIP"]
    assert [k for k in env][:3] == ["PATH", "HOSTNAME", "HOME"]
    assert (env["PATH"], env["HOSTNAME"], env["HOME"]) == (
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "trainer", "/root")
    assert env["MODEL_SERVER_SERVICE_HOST"] == ip and env["MODEL_SERVER_SERVICE_PORT_HTTP"] == "8080"
    assert env["MODEL_SERVER_PORT"] == f"tcp://{ip}:8080" and "KUBERNETES_SERVICE_HOST" in env
    own = {"CFG_epochs": "3", "CFG_lr": "0.1", "GREETING": "hello", "MY_VAR": "hello world", "POD_NAME": "trainer",
           "TEAM": "ml", "MEMORY_MI": "128", "EPOCHS": "3", "TOKEN": "s3cr3t"}
    assert [k for k in env][-len(own):] == list(own)  # envFrom, then env in its order, after the kubelet's
    assert {k: env[k] for k in own} == own


def test_a_shell_expands_the_environment_in_exec_and_in_the_containers_command(trainer):
    out = trainer.kubectl("exec", "trainer", "--", "sh", "-c", 'echo "$MY_VAR" ${NOPE:-unset} $HOSTNAME').stdout
    assert out == "hello world unset trainer\n"
    assert trainer.kubectl("exec", "trainer", "--", "printenv", "EPOCHS", "TOKEN").stdout == "3\ns3cr3t\n"
    r = trainer.kubectl("exec", "trainer", "--", "printenv", "EPOCHS", "MISSING", check=False)
    assert (r.returncode, r.stdout) == (1, "3\n")
    wait_for(lambda: trainer.kubectl("logs", "trainer").stdout, 30, "the trainer's first line")
    assert trainer.kubectl("logs", "trainer").stdout == "hello from trainer: hello world\n"
