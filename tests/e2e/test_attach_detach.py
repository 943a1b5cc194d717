"""A CSI driver that needs attaching, on one `nanokube up`, through kubectl 1.37: the admin
recreates the built-in driver's CSIDriver with `attachRequired: true`; a claim of its class is
provisioned for a pod, which runs only once the attach/detach controller's VolumeAttachment is
attached (`kubectl get volumeattachments` in its columns, the Node's volumesAttached, the pod's
SuccessfulAttachVolume); after the pod goes the attachment does too. Then a driver's volume count
on the nodes' CSINodes (as its node plugin would register it) keeps a third pod Pending, in the
scheduler's words, until a pod holding one of its volumes goes."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import running_cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    """The module's cluster, its kubelets posting status every 0.5 s (not 10 s): a volume is reported
    in status.volumesInUse, which its mount waits for, and dropped from it, which its detach waits
    for, at the kubelet's next status post."""
    with running_cluster("attach", env={"NANOKUBE_NODE_RENEW_INTERVAL": "0.5"}) as c:
        yield c


DRIVER = "local.csi.nanokube.io"
MANIFESTS = f"""
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {{name: {DRIVER}}}
spec: {{attachRequired: true, podInfoOnMount: false, volumeLifecycleModes: [Persistent]}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: attached}}
provisioner: {DRIVER}
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: disk}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: attached
  resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: trainer}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: busybox
    command: [sleep, infinity]
    volumeMounts: [{{name: data, mountPath: /data}}]
  volumes:
  - name: data
    persistentVolumeClaim: {{claimName: disk}}
"""


def test_a_volume_is_attached_for_its_pod_and_detached_after_it(cluster):
    cluster.kubectl("delete", "csidriver", DRIVER)
    cluster.kubectl("apply", "-f", "-", input=MANIFESTS)
    try:
        wait_for(lambda: cluster.kubectl_json("get", "pod", "trainer")["status"].get("phase") == "Running",
                 90, "the pod running on its attached volume")
        pod = cluster.kubectl_json("get", "pod", "trainer")
        node, pv = pod["spec"]["nodeName"], cluster.kubectl_json("get", "pvc", "disk")["spec"]["volumeName"]
        lines = cluster.kubectl("get", "volumeattachments").stdout.splitlines()
        assert lines[0].split() == ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"], lines
        assert [line.split()[1:5] for line in lines[1:]] == [[DRIVER, pv, node, "true"]], lines
        handle = cluster.kubectl_json("get", "pv", pv)["spec"]["csi"]["volumeHandle"]
        status = cluster.kubectl_json("get", "node", node)["status"]
        assert status["volumesAttached"] == [{"name": f"kubernetes.io/csi/{DRIVER}^{handle}", "devicePath": ""}]
        assert status["volumesInUse"] == [f"kubernetes.io/csi/{DRIVER}^{handle}"]
        events = cluster.kubectl("get", "events", "--field-selector", "involvedObject.name=trainer",
                                 "-o", "custom-columns=REASON:.reason,MESSAGE:.message").stdout
        assert f'SuccessfulAttachVolume   AttachVolume.Attach succeeded for volume "{pv}"' in events, events
        cluster.kubectl("delete", "pod", "trainer")
        wait_for(lambda: not cluster.kubectl("get", "volumeattachments", "-o", "name").stdout.strip(), 60,
                 "the volume detached")
        assert not cluster.kubectl_json("get", "node", node)["status"].get("volumesAttached")
    finally:
        cluster.kubectl("delete", "pod", "trainer", "--ignore-not-found")
        cluster.kubectl("delete", "pvc", "disk", "--ignore-not-found")
        cluster.kubectl("delete", "csidriver", DRIVER)
        cluster.kubectl("apply", "-f", "-", input=MANIFESTS.split("---")[0].replace("true", "false"))


EBS = "ebs.csi.aws.com"


def _ebs(i: int) -> str:
    return f"""
apiVersion: v1
kind: PersistentVolume
metadata: {{name: ebs-{i}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  claimRef: {{namespace: default, name: ebs-{i}}}
  csi: {{driver: {EBS}, volumeHandle: vol-{i}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: ebs-{i}}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: ebs-{i}
  resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: ebs-{i}}}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{{name: main, image: busybox, command: [sleep, infinity]}}]
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: ebs-{i}}}}}]
"""


def _drivers(cluster, node: str, drivers: list) -> None:
    cluster.kubectl("patch", "csinode", node, "--type", "merge", "-p",
                    json.dumps({"spec": {"drivers": drivers}}))


def test_a_drivers_volume_count_on_the_nodes_keeps_a_third_pod_pending(cluster):
    nodes = ("gpu-0", "gpu-1")
    cluster.kubectl("apply", "-f", "-", input=f"""
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {{name: {EBS}}}
spec: {{attachRequired: false}}
""")
    for n in nodes:
        _drivers(cluster, n, [{"name": EBS, "nodeID": f"i-{n}", "allocatable": {"count": 1}}])
    try:
        cluster.kubectl("apply", "-f", "-", input="---".join(_ebs(i) for i in (1, 2)))
        placed = wait_for(lambda: (p := [cluster.kubectl_json("get", "pod", f"ebs-{i}")["spec"].get("nodeName")
                                         for i in (1, 2)]) and all(p) and p, 60, "two pods placed")
        assert sorted(placed) == list(nodes)
        cluster.kubectl("apply", "-f", "-", input=_ebs(3))

        def refused():
            out = cluster.kubectl("get", "events", "--field-selector", "involvedObject.name=ebs-3,reason=FailedScheduling",
                                  "-o", "jsonpath={.items[*].message}").stdout
            return out or None
        assert wait_for(refused, 60, "the third pod refused") == (
            "0/2 nodes are available: 2 node(s) exceed max volume count. preemption: 0/2 nodes are available: "
            "2 No preemption victims found for incoming pod.")
        cluster.kubectl("delete", "pod", "ebs-1")
        assert wait_for(lambda: cluster.kubectl_json("get", "pod", "ebs-3")["spec"].get("nodeName"), 60,
                        "the third pod placed") == placed[0]
    finally:
        for i in (1, 2, 3):
            cluster.kubectl("delete", "pod", f"ebs-{i}", "--ignore-not-found")
            cluster.kubectl("delete", "pvc", f"ebs-{i}", "--ignore-not-found")
            cluster.kubectl("delete", "pv", f"ebs-{i}", "--ignore-not-found")
        for n in nodes:
            _drivers(cluster, n, [])
        cluster.kubectl("delete", "csidriver", EBS)
