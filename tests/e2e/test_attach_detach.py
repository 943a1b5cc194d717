"""A CSI driver that needs attaching, on one `nanokube up`, through kubectl 1.37: the admin
recreates the built-in driver's CSIDriver with `attachRequired: true`; a claim of its class is
provisioned for a pod, which runs only once the attach/detach controller's VolumeAttachment is
attached (`kubectl get volumeattachments` in its columns, the Node's volumesAttached, the pod's
SuccessfulAttachVolume); after the pod goes the attachment does too."""

from __future__ import annotations

from tests.e2e.conftest import wait_for

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
