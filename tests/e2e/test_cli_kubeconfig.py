"""nanokube's client subcommands find their kubeconfig as kubectl does: from another directory,
with only KUBECONFIG exported, `metrics`, `fault` and `scheduler` reach the cluster; in a
kubeconfig of two contexts `--context` picks one, and errors name the file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from .conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def bare():
    """No in-process scheduler: the external one started below must place the pod."""
    with running_cluster("kubeconfig", ("--scheduler", "none")) as c:
        yield c


def nanokube(c, tmp_path, *args: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """`nanokube ARGS` run in an empty directory with KUBECONFIG as the only pointer to the cluster."""
    environ = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    environ.update(env if env is not None else {"KUBECONFIG": c.kubeconfig})
    return subprocess.run([sys.executable, "-m", "nanokube.cli", *args], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=timeout)


def test_metrics_and_fault_use_the_exported_kubeconfig(bare, tmp_path):
    r = nanokube(bare, tmp_path, "metrics", "set", "queue_length", "7")
    assert r.returncode == 0, r.stderr
    r = nanokube(bare, tmp_path, "metrics", "get", "queue_length")
    assert r.returncode == 0 and "7" in r.stdout, r.stderr
    node = bare.kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    r = nanokube(bare, tmp_path, "fault", "node", node, "--not-ready")
    assert r.returncode == 0, r.stderr
    assert "not-ready" in bare.kubectl("get", "node", node, "-o", "jsonpath={.metadata.annotations}").stdout
    assert nanokube(bare, tmp_path, "fault", "node", node, "--clear").returncode == 0


def test_scheduler_uses_the_exported_kubeconfig(bare, tmp_path):
    environ = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with open(tmp_path / "scheduler.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "scheduler", "--secure-port", "0"], cwd=tmp_path,
                                env={**environ, "KUBECONFIG": bare.kubeconfig}, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL)
    try:
        bare.kubectl("run", "placed", "--image", "busybox", "--restart", "Never")
        assert wait_for(lambda: bare.kubectl("get", "pod", "placed", "-o", "jsonpath={.spec.nodeName}").stdout, 30,
                 "the external scheduler binding the pod")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_context_picks_one_of_two(bare, tmp_path):
    cfg = yaml.safe_load(open(bare.kubeconfig))
    good = cfg["contexts"][0]["name"]
    cfg["clusters"].append({"name": "elsewhere", "cluster": {"server": "https://127.0.0.1:1",
                                                            **{k: v for k, v in cfg["clusters"][0]["cluster"].items()
                                                               if k != "server"}}})
    cfg["contexts"].append({"name": "broken", "context": {"cluster": "elsewhere", "user": cfg["contexts"][0]["context"]["user"]}})
    cfg["current-context"] = "broken"
    two = tmp_path / "two-contexts"
    two.write_text(yaml.safe_dump(cfg))
    env = {"KUBECONFIG": str(two)}
    assert nanokube(bare, tmp_path, "metrics", "set", "queue_length", "3").returncode == 0
    r = nanokube(bare, tmp_path, "metrics", "get", "queue_length", env=env)
    assert r.returncode != 0 and "127.0.0.1:1" in r.stderr
    r = nanokube(bare, tmp_path, "metrics", "get", "queue_length", "--context", good, env=env)
    assert r.returncode == 0, r.stderr
    r = nanokube(bare, tmp_path, "metrics", "get", "queue_length", "--context", "nope", env=env)
    assert r.returncode != 0 and f'{two}: context "nope" not found' in r.stderr
