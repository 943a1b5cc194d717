"""fsGroupChangePolicy under `nanokube up --runtime process`: a local PersistentVolume whose root is
already the fsGroup's (setgid, group-writable) but holds a root-group file is walked again under
Always (the file becomes the group's, 0660) and left alone under OnRootMismatch, as the kubelet's
SetVolumeOwnership does; a volume whose root does not match is walked under either.

Skipped (loudly) only without root, `ip` or `nft`, as the other process-runtime tests."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

pytestmark = PROCESS_RUNTIME

GROUP = 2000


@pytest.fixture(scope="module")
def c(store_url):
    with process_cluster(store_url, "fsgroup") as cluster:
        yield cluster


@pytest.fixture
def volumes():
    d = tempfile.mkdtemp(prefix="nanokube-e2e-fsgroup-")
    os.chmod(d, 0o755)  # (mkdtemp's 0700 would keep the pod's user out, were it not root)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def claim(c, d: str, name: str, root_group: int) -> str:
    """A local volume `name` bound to a claim of that name: its root `root_group`'s, 2775, with a
    file `old` of group 0, mode 0600."""
    path = os.path.join(d, name)
    os.mkdir(path)
    os.chown(path, -1, root_group)
    os.chmod(path, 0o2775)
    with open(os.path.join(path, "old"), "w") as f:
        f.write("x")
    os.chown(os.path.join(path, "old"), -1, 0)  # (made in a setgid directory, it took the group)
    os.chmod(os.path.join(path, "old"), 0o600)
    node = c.kubectl_json("get", "nodes")["items"][0]["metadata"]["name"]
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                  "local": {"path": path}, "nodeAffinity": affinity}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": name,
                  "resources": {"requests": {"storage": "1Gi"}}}}]}))
    return path


def run(c, name: str, policy: str) -> str:
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "securityContext": {"fsGroup": GROUP, "fsGroupChangePolicy": policy},
                 "containers": [{"name": "main", "image": "busybox", "command": ["stat", "-c", "%g %a", "/data/old"],
                                 "volumeMounts": [{"name": "data", "mountPath": f"/mnt/nanokube-e2e-{name}"}]}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]}}).replace(
        "/data/old", f"/mnt/nanokube-e2e-{name}/old"))
    wait_for(lambda: c.kubectl_json("get", "pod", name)["status"].get("phase") == "Succeeded", 90, f"{name} done")
    return c.kubectl("logs", name).stdout.strip()


def test_on_root_mismatch_skips_a_volume_whose_root_is_the_groups(c, volumes):
    claim(c, volumes, "kept", GROUP)
    claim(c, volumes, "walked", GROUP)
    claim(c, volumes, "mismatched", 0)
    assert run(c, "kept", "OnRootMismatch") == "0 600"
    assert run(c, "walked", "Always") == f"{GROUP} 660"
    assert run(c, "mismatched", "OnRootMismatch") == f"{GROUP} 660"
