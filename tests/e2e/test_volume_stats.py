"""A checkpoint's claim shows how full it is, where an ML engineer looks on a real cluster: the
kubelet's /stats/summary and its kubelet_volume_stats_* series, read through the API server's
node proxy with kubectl 1.37, after a checkpoint is written into the claim with `kubectl exec`.
The numbers are the volume directory's own (bytes and inodes used); the capacity is the
volume's. A hostPath claim (the default class's) is not measured, as upstream's kubelet
measures none. The cluster's kubelets keep a measurement 1 s (volumeStatsAggPeriod, 1 minute by
default), so the write shows soon."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("volstats", env={"NANOKUBE_VOLUME_STATS_AGG_PERIOD": "1"}) as c:
        yield c

MANIFESTS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: csi-ckpt}
provisioner: local.csi.nanokube.io
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ckpt}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: csi-ckpt
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: busybox
    command: [sleep, infinity]
    volumeMounts: [{name: data, mountPath: /data}, {name: scratch, mountPath: /scratch}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: ckpt}}
  - {name: scratch, persistentVolumeClaim: {claimName: scratch}}
"""

SERIES = ("available_bytes", "capacity_bytes", "inodes", "inodes_free", "inodes_used", "used_bytes")


def _raw(c, node: str, path: str) -> str:
    return c.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/{path}").stdout


def _volumes(c, node: str) -> dict[str, dict]:
    pod = next(p for p in json.loads(_raw(c, node, "stats/summary"))["pods"] if p["podRef"]["name"] == "trainer")
    return {v["name"]: v for v in pod.get("volume") or ()}


def _series(c, node: str) -> dict[str, float]:
    """kubelet_volume_stats_* samples of the claim `ckpt`, by series name."""
    out = {}
    for line in _raw(c, node, "metrics").splitlines():
        name, _, rest = line.partition("{")
        if name.startswith("kubelet_volume_stats_") and 'persistentvolumeclaim="ckpt"' in rest:
            assert rest.startswith('namespace="default",persistentvolumeclaim="ckpt"} '), line
            out[name.removeprefix("kubelet_volume_stats_")] = float(rest.rpartition(" ")[2])
    return out


def test_a_checkpoint_written_to_a_claim_shows_in_the_kubelets_volume_stats(cluster):
    c = cluster
    c.kubectl("apply", "-f", "-", input=MANIFESTS)
    pod = wait_for(lambda: (p := c.kubectl_json("get", "pod", "trainer"))["status"].get("phase") == "Running" and p,
                   90, "trainer running")
    node = pod["spec"]["nodeName"]
    before = wait_for(lambda: _volumes(c, node).get("data"), 30, "the claim's volume stats")
    assert before["pvcRef"] == {"name": "ckpt", "namespace": "default"}
    assert before["capacityBytes"] == 2**30, "the volume's capacity, not the host disk's"
    assert before["availableBytes"] == 2**30 - before["usedBytes"]
    assert set(before) == {"time", "availableBytes", "capacityBytes", "usedBytes", "inodesFree", "inodes",
                           "inodesUsed", "name", "pvcRef"}
    volumes = _volumes(c, node)
    assert "scratch" not in volumes, "hostPath volumes are not measured (MetricsNil)"
    token = [v for name, v in volumes.items() if name.startswith("kube-api-access-")]
    assert token and "pvcRef" not in token[0] and token[0]["usedBytes"] > 0, volumes

    size = 1 << 20
    r = c.kubectl("exec", "-i", "trainer", "--", "sh", "-c", "mkdir /data/step-100 && cat > /data/step-100/weights",
                  input="w" * size, check=False)
    assert r.returncode == 0, r.stderr
    after = wait_for(lambda: (v := _volumes(c, node)["data"])["usedBytes"] >= before["usedBytes"] + size and v, 30,
                     "the checkpoint in the claim's volume stats, once the last measurement's period ended")
    assert after["inodesUsed"] == before["inodesUsed"] + 2, "a directory and a file"
    assert after["availableBytes"] == 2**30 - after["usedBytes"]

    series = _series(c, node)
    assert set(series) == set(SERIES)
    assert series["capacity_bytes"] == 2**30 and series["used_bytes"] == after["usedBytes"]
    assert series["inodes_used"] == after["inodesUsed"]
    text = _raw(c, node, "metrics")
    assert "# HELP kubelet_volume_stats_used_bytes [ALPHA] Number of used bytes in the volume\n" \
           "# TYPE kubelet_volume_stats_used_bytes gauge\n" in text
    assert 'kubelet_volume_stats_capacity_bytes{namespace="default",persistentvolumeclaim="ckpt"} 1.073741824e+09' \
        in text
    assert 'persistentvolumeclaim="scratch"' not in text


def test_describe_names_the_pods_using_a_claim(cluster):
    """kubectl works out `Used By` itself, from the namespace's pods' volumes."""
    c = cluster
    c.kubectl("apply", "-f", "-", input=MANIFESTS)
    out = c.kubectl("describe", "pvc", "ckpt").stdout
    used_by = next(line for line in out.splitlines() if line.startswith("Used By:"))
    assert used_by.split() == ["Used", "By:", "trainer"], out
