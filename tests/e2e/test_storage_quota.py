"""Storage, quota, limits and runtime classes end to end on one `nanokube up`:
PVCs of the default (WaitForFirstConsumer) class and of an Immediate class
bind through the built-in provisioner and their pods run; a static volume
binds and is kept Released; a ResourceQuota of 4 GPUs refuses the fifth GPU
pod and the fifth device in ResourceClaims with upstream's message and
`kubectl describe quota` shows used/hard; LimitRange defaults land on a pod;
RuntimeClass admission; and every kind round-trips through the official
client's typed API."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.conftest import wait_for

CLAIM = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 1Gi}}}}
{extra}
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1  # `sleep` as PID 1 ignores SIGTERM: a delete waited the default 30 s
  containers:
  - name: main
    image: busybox
    command: [sleep, infinity]
    volumeMounts: [{{name: data, mountPath: /data}}]
  volumes:
  - name: data
    persistentVolumeClaim: {{claimName: {claim}}}
"""


def phase(c, kind: str, name: str) -> str:
    return (c.kubectl_json("get", kind, name).get("status") or {}).get("phase", "")


def test_default_class_is_installed(cluster):
    out = cluster.kubectl("get", "storageclass").stdout
    assert "standard (default)   nanokube.io/local-path   Delete          WaitForFirstConsumer" in out


def test_wait_for_first_consumer_claim_binds_when_its_pod_is_scheduled(cluster):
    c = cluster
    c.kubectl("apply", "-f", "-", input=CLAIM.format(name="wffc", extra=""))
    claim = c.kubectl_json("get", "pvc", "wffc")
    assert claim["spec"]["storageClassName"] == "standard"
    assert claim["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    wait_for(lambda: "waiting for first consumer to be created before binding" in
             c.kubectl("get", "events", "--field-selector", "involvedObject.name=wffc").stdout, 60, "WFFC event")
    assert phase(c, "pvc", "wffc") == "Pending"
    c.kubectl("apply", "-f", "-", input=POD.format(name="wffc-user", claim="wffc"))
    wait_for(lambda: phase(c, "pod", "wffc-user") == "Running", 30, "pod running")
    claim = c.kubectl_json("get", "pvc", "wffc")
    node = c.kubectl_json("get", "pod", "wffc-user")["spec"]["nodeName"]
    assert claim["status"]["phase"] == "Bound"
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    pv = c.kubectl_json("get", "pv", claim["spec"]["volumeName"])
    assert pv["spec"]["hostPath"]["path"] == str(c.data_dir / "volumes" / pv["metadata"]["name"])
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [node]
    row = c.kubectl("get", "pv", pv["metadata"]["name"], "--no-headers").stdout.split()
    assert row[1:7] == ["1Gi", "RWO", "Delete", "Bound", "default/wffc", "standard"]
    # Delete reclaim: the claim outlives its pod (pvc-protection), then volume and directory go
    c.kubectl("delete", "pvc", "wffc", "--wait=false")
    assert phase(c, "pvc", "wffc") == "Bound"
    c.kubectl("delete", "pod", "wffc-user")
    wait_for(lambda: not c.kubectl("get", "pv", pv["metadata"]["name"], "--ignore-not-found").stdout, 30, "PV deleted")
    assert not (c.data_dir / "volumes" / pv["metadata"]["name"]).exists()


def test_immediate_class_binds_before_any_pod(cluster):
    c = cluster
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
        "provisioner": "nanokube.io/local-path", "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain"}))
    c.kubectl("apply", "-f", "-", input=CLAIM.format(name="now", extra="  storageClassName: fast"))
    wait_for(lambda: phase(c, "pvc", "now") == "Bound", 30, "immediate claim bound")
    c.kubectl("apply", "-f", "-", input=POD.format(name="now-user", claim="now"))
    wait_for(lambda: phase(c, "pod", "now-user") == "Running", 30, "pod running")
    volume = c.kubectl_json("get", "pvc", "now")["spec"]["volumeName"]
    c.kubectl("delete", "pod", "now-user")
    c.kubectl("delete", "pvc", "now")
    wait_for(lambda: phase(c, "pv", volume) == "Released", 30, "Retain volume released")
    assert (c.data_dir / "volumes" / volume).is_dir()


def test_static_volume_binds_to_matching_claim(cluster):
    c = cluster
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "static-10g", "labels": {"tier": "ssd"}},
          "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                   "storageClassName": "", "hostPath": {"path": str(c.data_dir / "static")}}}
    c.kubectl("apply", "-f", "-", input=json.dumps(pv))
    wait_for(lambda: phase(c, "pv", "static-10g") == "Available", 60, "volume available")
    c.kubectl("apply", "-f", "-", input=CLAIM.format(
        name="static", extra='  storageClassName: ""\n  selector: {matchLabels: {tier: ssd}}'))
    wait_for(lambda: phase(c, "pvc", "static") == "Bound", 60, "static claim bound")
    claim = c.kubectl_json("get", "pvc", "static")
    assert claim["spec"]["volumeName"] == "static-10g" and claim["status"]["capacity"] == {"storage": "10Gi"}
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert c.kubectl("get", "pvc", "static", "--no-headers").stdout.split()[:5] == \
        ["static", "Bound", "static-10g", "10Gi", "RWO,ROX"]
    c.kubectl("delete", "pvc", "static")
    wait_for(lambda: phase(c, "pv", "static-10g") == "Released", 60, "volume released")


def test_bad_claim_gets_upstream_message(cluster):
    r = cluster.kubectl("apply", "-f", "-", check=False, input=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "bad"},
        "spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    assert r.returncode != 0
    assert 'PersistentVolumeClaim "bad" is invalid: spec.accessModes: Forbidden: may not use ReadWriteOncePod ' \
           "with other access modes" in r.stderr


def gpu_pod(name: str) -> dict:
    """Kept Pending (no node matches): scheduled, its nvidia.com/gpu would be served by an
    extended-resource claim on gpu.nanokube.io, which the devices quota counts as well."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "gpus"},
            "spec": {"nodeSelector": {"example.com/pool": "none"},
                     "containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def gpu_claim(name: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "gpus"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io"}}]}}}


def test_quota_of_four_gpus_refuses_the_fifth(cluster):
    """gpu.nanokube.io serves nvidia.com/gpu here (its extendedResourceName), so a claim of
    its devices charges requests.nvidia.com/gpu as a pod asking for one does (kubernetes#134210):
    two pods and two claims fill a quota of four."""
    c = cluster
    c.kubectl("create", "namespace", "gpus")
    c.kubectl("create", "quota", "gpus", "-n", "gpus",
              "--hard=requests.nvidia.com/gpu=4,gpu.nanokube.io.deviceclass.resource.k8s.io/devices=2,pods=10")
    wait_for(lambda: (c.kubectl_json("get", "quota", "gpus", "-n", "gpus").get("status") or {}).get("used"), 60,
             "quota status")
    for i in range(2):
        c.kubectl("apply", "-f", "-", input=json.dumps(gpu_pod(f"train-{i}")))
        c.kubectl("apply", "-f", "-", input=json.dumps(gpu_claim(f"claim-{i}")))
    r = c.kubectl("apply", "-f", "-", input=json.dumps(gpu_pod("train-4")), check=False)
    assert 'pods "train-4" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, ' \
           "used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4" in r.stderr
    api = client.ResourceV1Api(c.client())
    with pytest.raises(ApiException) as e:
        api.create_namespaced_resource_claim("gpus", gpu_claim("claim-4"))
    body = json.loads(e.value.body)
    assert (e.value.status, body["reason"]) == (403, "Forbidden")
    devices = "gpu.nanokube.io.deviceclass.resource.k8s.io/devices"
    assert body["message"] == (
        f'resourceclaims.resource.k8s.io "claim-4" is forbidden: exceeded quota: gpus, requested: '
        f"{devices}=1,requests.nvidia.com/gpu=1, used: {devices}=2,requests.nvidia.com/gpu=4, "
        f"limited: {devices}=2,requests.nvidia.com/gpu=4")
    described = c.kubectl("describe", "quota", "gpus", "-n", "gpus").stdout
    lines = [line.split() for line in described.splitlines()]
    assert [devices, "2", "2"] in lines
    assert ["requests.nvidia.com/gpu", "4", "4"] in lines and ["pods", "2", "10"] in lines
    # deleting a pod gives its GPU back (the controller recounts the claims' too)
    c.kubectl("delete", "pod", "train-0", "-n", "gpus", "--grace-period=0", "--force")
    wait_for(lambda: c.kubectl_json("get", "quota", "gpus", "-n", "gpus")["status"]["used"]
             ["requests.nvidia.com/gpu"] == "3", 60, "quota replenished")
    c.kubectl("apply", "-f", "-", input=json.dumps(gpu_pod("train-4")))


def test_a_gpu_pod_under_a_quota_of_one_runs_its_claim_charged_once(cluster):
    """A pod asking nvidia.com/gpu: 1 on a node without the device plugin gets a claim made by
    the scheduler; quota charges requests.nvidia.com/gpu once (the pod's; its claim charges
    what the pod does not, kubernetes#134210), and the claim charges its class's devices and
    the class's implicit extended resource, which the pod did not ask by name."""
    c = cluster
    c.kubectl("create", "namespace", "one-gpu")
    hard = {"requests.nvidia.com/gpu": "1", "gpu.nanokube.io.deviceclass.resource.k8s.io/devices": "1",
            "requests.deviceclass.resource.kubernetes.io/gpu.nanokube.io": "1"}
    c.kubectl("create", "quota", "gpus", "-n", "one-gpu", "--hard=" + ",".join(f"{k}={v}" for k, v in hard.items()))
    wait_for(lambda: (c.kubectl_json("get", "quota", "gpus", "-n", "one-gpu").get("status") or {}).get("used"), 60,
             "quota status")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "one-gpu"},
           "spec": {"terminationGracePeriodSeconds": 0, "containers": [
               {"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    c.kubectl("create", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: c.kubectl_json("get", "pod", "train", "-n", "one-gpu")["status"].get("phase") == "Running", 60,
             "train running")
    assert c.kubectl_json("get", "pod", "train", "-n", "one-gpu")["status"]["extendedResourceClaimStatus"]
    wait_for(lambda: c.kubectl_json("get", "quota", "gpus", "-n", "one-gpu")["status"]["used"] == hard, 60,
             "one of each charged")


def test_limit_range_defaults_and_bounds(cluster):
    c = cluster
    c.kubectl("create", "namespace", "limited")
    c.kubectl("apply", "-n", "limited", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                             "defaultRequest": {"cpu": "100m", "memory": "128Mi"}, "max": {"cpu": "2"}}]}}))
    c.kubectl("run", "plain", "-n", "limited", "--image=busybox")
    pod = c.kubectl_json("get", "pod", "plain", "-n", "limited")
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m", "memory": "256Mi"},
                                                         "requests": {"cpu": "100m", "memory": "128Mi"}}
    assert pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu, memory request for container plain; cpu, memory limit for container plain"
    r = c.kubectl("run", "huge", "-n", "limited", "--image=busybox", "--overrides",
                  '{"spec":{"containers":[{"name":"huge","image":"busybox","resources":{"limits":{"cpu":"3"}}}]}}',
                  check=False)
    assert 'pods "huge" is forbidden: maximum cpu usage per Container is 2, but limit is 3' in r.stderr
    assert "limits" in c.kubectl("get", "limits", "-n", "limited").stdout.lower() or \
        "defaults" in c.kubectl("get", "limits", "-n", "limited").stdout


def test_runtime_class_admission(cluster):
    c = cluster
    api = client.NodeV1Api(c.client())
    api.create_runtime_class({"metadata": {"name": "sandboxed"}, "handler": "runsc",
                              "overhead": {"podFixed": {"cpu": "100m", "memory": "20Mi"}}})
    assert c.kubectl("get", "runtimeclass", "sandboxed", "--no-headers").stdout.split()[:2] == ["sandboxed", "runsc"]
    core = client.CoreV1Api(c.client())
    pod = {"metadata": {"name": "sandboxed"}, "spec": {"runtimeClassName": "sandboxed",
                                                       "containers": [{"name": "c", "image": "busybox",
                                                                       "command": ["sleep", "infinity"]}]}}
    assert core.create_namespaced_pod("default", pod).spec.overhead == {"cpu": "100m", "memory": "20Mi"}
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod("default", {**pod, "metadata": {"name": "x"},
                                               "spec": {**pod["spec"], "runtimeClassName": "kata"}})
    assert json.loads(e.value.body)["message"] == 'pods "x" is forbidden: pod rejected: RuntimeClass "kata" not found'


def test_api_resources_lists_the_kinds(cluster):
    out = cluster.kubectl("api-resources", "--no-headers").stdout.splitlines()
    rows = {tuple(line.split()) for line in out}
    for row in [("persistentvolumes", "pv", "v1", "false", "PersistentVolume"),
                ("persistentvolumeclaims", "pvc", "v1", "true", "PersistentVolumeClaim"),
                ("resourcequotas", "quota", "v1", "true", "ResourceQuota"),
                ("limitranges", "limits", "v1", "true", "LimitRange"),
                ("runtimeclasses", "node.k8s.io/v1", "false", "RuntimeClass"),
                ("storageclasses", "sc", "storage.k8s.io/v1", "false", "StorageClass"),
                ("csidrivers", "storage.k8s.io/v1", "false", "CSIDriver"),
                ("csinodes", "storage.k8s.io/v1", "false", "CSINode"),
                ("csistoragecapacities", "storage.k8s.io/v1", "true", "CSIStorageCapacity"),
                ("volumeattachments", "storage.k8s.io/v1", "false", "VolumeAttachment"),
                ("volumeattributesclasses", "vac", "storage.k8s.io/v1", "false", "VolumeAttributesClass")]:
        assert row in rows, row


def test_every_kind_round_trips_through_the_typed_client(cluster):
    api_client = cluster.client()
    core, storage, node = client.CoreV1Api(api_client), client.StorageV1Api(api_client), client.NodeV1Api(api_client)
    ns = "default"
    cases = [
        (core.create_persistent_volume, core.read_persistent_volume, core.delete_persistent_volume, None,
         client.V1PersistentVolume(metadata=client.V1ObjectMeta(name="rt-pv"), spec=client.V1PersistentVolumeSpec(
             capacity={"storage": "1Gi"}, access_modes=["ReadWriteOnce"], storage_class_name="manual",
             host_path=client.V1HostPathVolumeSource(path="/tmp/rt-pv")))),
        (core.create_namespaced_persistent_volume_claim, core.read_namespaced_persistent_volume_claim,
         core.delete_namespaced_persistent_volume_claim, ns,
         client.V1PersistentVolumeClaim(metadata=client.V1ObjectMeta(name="rt-pvc"), spec=client.V1PersistentVolumeClaimSpec(
             access_modes=["ReadWriteOnce"], storage_class_name="manual",
             resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"})))),
        (core.create_namespaced_resource_quota, core.read_namespaced_resource_quota,
         core.delete_namespaced_resource_quota, ns,
         client.V1ResourceQuota(metadata=client.V1ObjectMeta(name="rt-quota"),
                                spec=client.V1ResourceQuotaSpec(hard={"count/deployments.apps": "3"}))),
        (core.create_namespaced_limit_range, core.read_namespaced_limit_range, core.delete_namespaced_limit_range, ns,
         client.V1LimitRange(metadata=client.V1ObjectMeta(name="rt-lr"), spec=client.V1LimitRangeSpec(
             limits=[client.V1LimitRangeItem(type="PersistentVolumeClaim", max={"storage": "100Gi"})]))),
        (storage.create_storage_class, storage.read_storage_class, storage.delete_storage_class, None,
         client.V1StorageClass(metadata=client.V1ObjectMeta(name="rt-sc"), provisioner="example.com/csi")),
        (storage.create_csi_driver, storage.read_csi_driver, storage.delete_csi_driver, None,
         client.V1CSIDriver(metadata=client.V1ObjectMeta(name="csi.example.com"), spec=client.V1CSIDriverSpec())),
        (storage.create_csi_node, storage.read_csi_node, storage.delete_csi_node, None,
         client.V1CSINode(metadata=client.V1ObjectMeta(name="rt-node"), spec=client.V1CSINodeSpec(  # (gpu-0's: its kubelet's)
             drivers=[client.V1CSINodeDriver(name="csi.example.com", node_id="rt-node")]))),
        (storage.create_volume_attachment, storage.read_volume_attachment, storage.delete_volume_attachment, None,
         client.V1VolumeAttachment(metadata=client.V1ObjectMeta(name="rt-va"), spec=client.V1VolumeAttachmentSpec(
             attacher="csi.example.com", node_name="gpu-0",
             source=client.V1VolumeAttachmentSource(persistent_volume_name="rt-pv")))),
        (storage.create_namespaced_csi_storage_capacity, storage.read_namespaced_csi_storage_capacity,
         storage.delete_namespaced_csi_storage_capacity, ns,
         client.V1CSIStorageCapacity(metadata=client.V1ObjectMeta(name="rt-cap"), storage_class_name="rt-sc",
                                     capacity="100Gi")),
        (storage.create_volume_attributes_class, storage.read_volume_attributes_class,
         storage.delete_volume_attributes_class, None,
         client.V1VolumeAttributesClass(metadata=client.V1ObjectMeta(name="rt-vac"), driver_name="csi.example.com",
                                        parameters={"iops": "3000"})),
        (node.create_runtime_class, node.read_runtime_class, node.delete_runtime_class, None,
         client.V1RuntimeClass(metadata=client.V1ObjectMeta(name="rt-rc"), handler="runc")),
    ]
    for create, read, delete, namespace, body in cases:
        args = (namespace,) if namespace else ()
        made = create(*args, body)
        got = read(body.metadata.name, *args)
        assert type(got) is type(body) and got.metadata.uid == made.metadata.uid
        delete(body.metadata.name, *args)
    assert storage.read_csi_driver  # typed defaults came back
    drv = storage.create_csi_driver(client.V1CSIDriver(metadata=client.V1ObjectMeta(name="defaults.example.com"),
                                                       spec=client.V1CSIDriverSpec()))
    assert (drv.spec.attach_required, drv.spec.volume_lifecycle_modes, drv.spec.fs_group_policy) == \
        (True, ["Persistent"], "ReadWriteOnceWithFSType")


MIXED = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: yaml-sc}
provisioner: nanokube.io/local-path
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: yaml-pvc, namespace: default}
spec:
  storageClassName: yaml-sc
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: yaml-quota, namespace: default}
spec: {hard: {persistentvolumeclaims: "50"}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: yaml-lr, namespace: default}
spec: {limits: [{type: PersistentVolumeClaim, max: {storage: 1Ti}}]}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: yaml-rc}
handler: runc
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: yaml.csi.example.com}
spec: {attachRequired: false}
"""


def test_create_from_yaml_with_mixed_kinds(cluster, tmp_path):
    from kubernetes import utils

    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED)
    created = utils.create_from_yaml(cluster.client(), str(path))
    kinds = [type(o).__name__ for objs in created for o in objs]
    assert kinds == ["V1StorageClass", "V1PersistentVolumeClaim", "V1ResourceQuota", "V1LimitRange",
                     "V1RuntimeClass", "V1CSIDriver"]
    wait_for(lambda: phase(cluster, "pvc", "yaml-pvc") == "Bound", 30, "claim from the file bound")
