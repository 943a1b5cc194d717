"""The older kubectl users may still have on PATH (e.g. v1.32), against the same server the
version-matched 1.37 kubectl drives in the rest of the suite: the everyday commands work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from .conftest import KUBECTL
from .manifests import all_kinds, to_yaml

NS = "legacy"


def _path_kubectl() -> str | None:
    """The kubectl on PATH when it is not the binary the suite already uses."""
    found = shutil.which("kubectl")
    if not found or os.path.realpath(found) == os.path.realpath(shutil.which(KUBECTL) or KUBECTL):
        return None
    return found


LEGACY = _path_kubectl()
pytestmark = pytest.mark.skipif(LEGACY is None, reason="no second kubectl on PATH")


@pytest.fixture(scope="module")
def kubectl(cluster):
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "KUBECACHEDIR": str(cluster.data_dir / "legacy-cache")}

    def run(*args: str, input: str | None = None, check: bool = True) -> str:
        r = subprocess.run([LEGACY, *args], input=input, capture_output=True, text=True, env=env, timeout=60)
        if not check:
            return r.stderr
        assert r.returncode == 0, f"kubectl {' '.join(args)} failed ({r.returncode}):\n{r.stderr}\n{r.stdout}"
        return r.stdout

    return run


def test_version_differs(kubectl):
    client = json.loads(kubectl("version", "--client", "-o", "json"))["clientVersion"]
    assert client["gitVersion"] != "v1.37.0"


def test_apply_get_describe_patch_delete(kubectl):
    docs = all_kinds(NS)
    out = kubectl("apply", "-f", "-", input=to_yaml(docs))
    assert out.count("created") == len(docs)
    assert "web" in kubectl("get", "deployments", "-n", NS, "-o", "wide")
    assert "Name:" in kubectl("describe", "deployment", "web", "-n", NS)
    kubectl("patch", "deployment", "web", "-n", NS, "-p", '{"metadata":{"labels":{"legacy":"yes"}}}')
    got = json.loads(kubectl("get", "deployment", "web", "-n", NS, "-o", "json"))
    assert got["metadata"]["labels"]["legacy"] == "yes"
    kubectl("scale", "deployment", "web", "-n", NS, "--replicas", "3")
    assert json.loads(kubectl("get", "deployment", "web", "-n", NS, "-o", "json"))["spec"]["replicas"] == 3
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": NS}, "data": {"a": "1"}}
    kubectl("apply", "--server-side", "-f", "-", input=json.dumps(cm))
    managers = json.loads(kubectl("get", "cm", "ssa", "-n", NS, "-o", "json", "--show-managed-fields"))["metadata"]["managedFields"]
    assert [m["manager"] for m in managers] == ["kubectl"]
    kubectl("delete", "namespace", NS, "--wait=true")
    assert f'namespaces "{NS}" not found' in kubectl("get", "namespace", NS, check=False)
