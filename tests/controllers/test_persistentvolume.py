"""The PV controller, the local-path provisioner and its resizer, the expand
controller and the protection controllers, over the in-process API: claims
bind to fitting volumes or get provisioned ones, WaitForFirstConsumer waits
for a selected node, reclaim policies, claims kept while pods use them, and
claims that grow."""

from pathlib import Path

import pytest

from nanokube.controllers.expand import ExpandController
from nanokube.controllers.persistentvolume import PersistentVolumeController
from nanokube.controllers.pv_protection import PVProtectionController
from nanokube.controllers.pvc_protection import PVCProtectionController
from nanokube.machinery.errors import APIError
from nanokube.node.storage import CSI_DRIVER, PROVISIONER, LocalPathProvisioner
from nanokube.volume.classes import default_class
from nanokube.controllers.base import TURN
from tests.controllers import eventually, make_stack, turns_during


@pytest.fixture
async def env(tmp_path):
    s = await make_stack()
    ctrls = [PersistentVolumeController(s.client), PVCProtectionController(s.client), PVProtectionController(s.client),
             ExpandController(s.client), LocalPathProvisioner(s.client, str(tmp_path / "volumes"))]
    for c in ctrls:
        await c.start()
    yield s.client, tmp_path / "volumes"
    for c in ctrls:
        await c.stop()
    await s.close()


def claim(name, size="1Gi", **spec):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **spec}}


def volume(name, size, **spec):
    return {"metadata": {"name": name}, "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                                                 "hostPath": {"path": f"/tmp/{name}"}, **spec}}


async def state(client, plural, name, ns=None):
    try:
        return await client.resource("", "v1", plural).get(name, ns)
    except APIError as e:
        if e.code == 404:
            return None
        raise


def phase_is(client, plural, name, phase, ns=None):
    async def check():
        obj = await state(client, plural, name, ns)
        return obj is not None and (obj.get("status") or {}).get("phase") == phase and obj
    return check


async def test_default_class_installed_and_wffc_waits_for_a_node(env):
    client, root = env
    sc = await client.resource("storage.k8s.io", "v1", "storageclasses").get("standard")
    assert sc["provisioner"] == PROVISIONER and sc["volumeBindingMode"] == "WaitForFirstConsumer"
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("data"))

    async def waiting():
        evs, _ = await client.resource("", "v1", "events").list("default")
        return any(e["reason"] == "WaitForFirstConsumer" for e in evs)
    await eventually(waiting)
    assert not list(root.iterdir())
    await pvcs.patch("data", {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "gpu-0"}}},
                     namespace="default")
    bound = await eventually(phase_is(client, "persistentvolumeclaims", "data", "Bound", "default"))
    pv = await state(client, "persistentvolumes", bound["spec"]["volumeName"])
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == PROVISIONER
    assert pv["spec"]["claimRef"]["uid"] == bound["metadata"]["uid"]
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["gpu-0"]
    assert Path(pv["spec"]["hostPath"]["path"]) == root / pv["metadata"]["name"]
    assert bound["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    # Delete: the directory and the volume go with the claim
    await pvcs.delete("data", "default")
    await eventually(lambda: _gone(client, "persistentvolumes", pv["metadata"]["name"]))
    assert not (root / pv["metadata"]["name"]).exists()


async def _gone(client, plural, name, ns=None):
    return await state(client, plural, name, ns) is None


async def test_static_binding_takes_the_smallest_fit_and_retain_releases(env):
    client, _ = env
    pvs = client.resource("", "v1", "persistentvolumes")
    await pvs.create(volume("big", "100Gi", storageClassName=""))
    await pvs.create(volume("small", "5Gi", storageClassName=""))
    await pvs.create(volume("tiny", "1Mi", storageClassName=""))
    await eventually(phase_is(client, "persistentvolumes", "tiny", "Available"))
    await client.resource("", "v1", "persistentvolumeclaims").create(claim("c", "2Gi", storageClassName=""))
    bound = await eventually(phase_is(client, "persistentvolumeclaims", "c", "Bound", "default"))
    assert bound["spec"]["volumeName"] == "small"
    assert bound["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "yes",
                                                "pv.kubernetes.io/bound-by-controller": "yes"}
    pv = await eventually(phase_is(client, "persistentvolumes", "small", "Bound"))
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    await client.resource("", "v1", "persistentvolumeclaims").delete("c", "default")
    released = await eventually(phase_is(client, "persistentvolumes", "small", "Released"))
    assert released["status"]["lastPhaseTransitionTime"]


async def test_claim_in_use_outlives_its_deletion_until_the_pod_ends(env):
    client, _ = env
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "now"}, "provisioner": PROVISIONER, "volumeBindingMode": "Immediate"})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("used", storageClassName="now"))
    await eventually(phase_is(client, "persistentvolumeclaims", "used", "Bound", "default"))
    pods = client.resource("", "v1", "pods")
    pod = await pods.create({"metadata": {"name": "p", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "used"}}]}})
    await pods.update({**pod, "status": {"phase": "Running"}}, subresource="status")
    await pvcs.delete("used", "default")
    deleting = await state(client, "persistentvolumeclaims", "used", "default")
    assert deleting["metadata"]["deletionTimestamp"] and deleting["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    await pods.delete("p", "default", grace_period_seconds=0)
    await eventually(lambda: _gone(client, "persistentvolumeclaims", "used", "default"))


async def test_claim_without_class_gets_the_default_when_one_appears(env):
    client, _ = env
    classes = client.resource("storage.k8s.io", "v1", "storageclasses")
    await classes.delete("standard")
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("early"))
    assert "storageClassName" not in (await state(client, "persistentvolumeclaims", "early", "default"))["spec"]
    await classes.create({"metadata": {"name": "later", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": PROVISIONER,
        "volumeBindingMode": "Immediate"})
    bound = await eventually(phase_is(client, "persistentvolumeclaims", "early", "Bound", "default"))
    assert bound["spec"]["storageClassName"] == "later"


async def test_claims_grow_only_where_their_class_allows(env):
    client, _ = env
    classes = client.resource("storage.k8s.io", "v1", "storageclasses")
    await classes.create({"metadata": {"name": "elastic"}, "provisioner": PROVISIONER,
                          "volumeBindingMode": "Immediate", "allowVolumeExpansion": True})
    await classes.create({"metadata": {"name": "fixed"}, "provisioner": PROVISIONER, "volumeBindingMode": "Immediate"})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    for name, cls in (("grows", "elastic"), ("stays", "fixed")):
        await pvcs.create(claim(name, storageClassName=cls))
        await eventually(phase_is(client, "persistentvolumeclaims", name, "Bound", "default"))
    bigger = {"spec": {"resources": {"requests": {"storage": "3Gi"}}}}
    with pytest.raises(APIError) as e:
        await pvcs.patch("stays", bigger, namespace="default")
    assert (e.value.code, e.value.message) == (403, 'persistentvolumeclaims "stays" is forbidden: only dynamically '
                                               "provisioned pvc can be resized and the storageclass that provisions "
                                               "the pvc must support resize")
    await pvcs.patch("grows", bigger, namespace="default")

    async def resized():
        pvc = await state(client, "persistentvolumeclaims", "grows", "default")
        return (pvc["status"].get("allocatedResourceStatuses") or {}).get("storage") == "NodeResizePending" and pvc
    pvc = await eventually(resized)
    # the volume grew; its filesystem waits for a pod to mount it (the kubelet finishes, tests/node)
    assert pvc["status"]["capacity"] == {"storage": "1Gi"} and pvc["status"]["allocatedResources"] == {"storage": "3Gi"}
    conditions = {c["type"]: c for c in pvc["status"]["conditions"]}
    assert set(conditions) == {"Resizing", "FileSystemResizePending"}
    assert conditions["FileSystemResizePending"]["message"] == \
        "Waiting for user to (re-)start a pod to finish file system resize of volume on node."
    pv = await state(client, "persistentvolumes", pvc["spec"]["volumeName"])
    assert pv["spec"]["capacity"] == {"storage": "3Gi"}
    assert await eventually(events_of(client, "grows", "ExternalExpanding", "Resizing", "FileSystemResizeRequired")) == {
        "ExternalExpanding": ("volume_expand", "waiting for an external controller to expand this PVC"),
        "Resizing": (f"external-resizer {PROVISIONER}", f"External resizer is resizing volume {pv['metadata']['name']}"),
        "FileSystemResizeRequired": (f"external-resizer {PROVISIONER}", "Require file system resize of volume on node")}
    evs, _ = await client.resource("", "v1", "events").list("default")
    assert {e["reason"]: e["type"] for e in evs if e["involvedObject"]["name"] == "grows"
            and e["reason"] in ("ExternalExpanding", "Resizing")} == {"ExternalExpanding": "Warning", "Resizing": "Normal"}


async def _message_about(client, name, reason):
    evs, _ = await client.resource("", "v1", "events").list("default")
    return next((e["message"] for e in evs if e["involvedObject"]["name"] == name and e["reason"] == reason), None)


def events_of(client, claim_name, *reasons):
    """reason -> (source component, message) of the claim's events, once all of `reasons` are there."""
    async def check():
        evs, _ = await client.resource("", "v1", "events").list("default")
        got = {e["reason"]: (e["source"]["component"], e["message"]) for e in evs
               if e["involvedObject"]["name"] == claim_name and e["reason"] in reasons}
        return len(got) == len(reasons) and got
    return check


async def test_a_block_volume_is_done_growing_in_the_controller(env):
    """No filesystem to grow on a node: the resizer finishes (capacity, no resize status or condition)."""
    client, _ = env
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "elastic"}, "provisioner": PROVISIONER, "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("raw", storageClassName="elastic", volumeMode="Block"))
    await eventually(phase_is(client, "persistentvolumeclaims", "raw", "Bound", "default"))
    await pvcs.patch("raw", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}, namespace="default")

    async def grown():
        pvc = await state(client, "persistentvolumeclaims", "raw", "default")
        return pvc["status"]["capacity"] == {"storage": "2Gi"} and pvc
    pvc = await eventually(grown)
    assert pvc["status"]["allocatedResources"] == {"storage": "2Gi"}
    assert "allocatedResourceStatuses" not in pvc["status"] and "conditions" not in pvc["status"]
    assert (await eventually(events_of(client, "raw", "VolumeResizeSuccessful")))["VolumeResizeSuccessful"][1] == \
        "Resize volume succeeded"


async def test_an_infeasible_expansion_is_recovered_by_asking_for_less(env):
    """RecoverVolumeExpansionFailure: more than the disk holds is ControllerResizeInfeasible with a
    ControllerResizeError condition; the request may then shrink, not to status.capacity or below,
    and the resizer takes the smaller size."""
    client, _ = env
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "elastic"}, "provisioner": PROVISIONER, "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("ckpt", storageClassName="elastic"))
    bound = await eventually(phase_is(client, "persistentvolumeclaims", "ckpt", "Bound", "default"))
    await pvcs.patch("ckpt", {"spec": {"resources": {"requests": {"storage": "1Ei"}}}}, namespace="default")

    def storage_status_is(value):
        async def check():
            pvc = await state(client, "persistentvolumeclaims", "ckpt", "default")
            return (pvc["status"].get("allocatedResourceStatuses") or {}).get("storage") == value and pvc
        return check
    failed = await eventually(storage_status_is("ControllerResizeInfeasible"))
    assert failed["status"]["allocatedResources"] == {"storage": "1Ei"}
    assert failed["status"]["capacity"] == {"storage": "1Gi"}
    error = next(c for c in failed["status"]["conditions"] if c["type"] == "ControllerResizeError")
    assert error["message"].startswith("failed to expand pvc with rpc error: code = OutOfRange desc = requested size "
                                       "1Ei exceeds the capacity of the disk under ")
    pv_name = bound["spec"]["volumeName"]
    message = (await eventually(events_of(client, "ckpt", "VolumeResizeFailed")))["VolumeResizeFailed"][1]
    assert message.startswith(f'resize volume "{pv_name}" by resizer "{PROVISIONER}" failed: rpc error: code = OutOfRange')
    assert (await state(client, "persistentvolumes", pv_name))["spec"]["capacity"] == {"storage": "1Gi"}
    for size in ("512Mi", "1Gi"):
        with pytest.raises(APIError) as e:
            await pvcs.patch("ckpt", {"spec": {"resources": {"requests": {"storage": size}}}}, namespace="default")
        assert e.value.code == 422 and "spec.resources.requests.storage: Forbidden: field can not be less than " \
            "status.capacity" in e.value.message
    await pvcs.patch("ckpt", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}, namespace="default")
    recovered = await eventually(storage_status_is("NodeResizePending"))
    assert recovered["status"]["allocatedResources"] == {"storage": "2Gi"}
    assert {c["type"] for c in recovered["status"]["conditions"]} == {"Resizing", "FileSystemResizePending"}
    assert (await state(client, "persistentvolumes", pv_name))["spec"]["capacity"] == {"storage": "2Gi"}


async def test_a_bound_claim_moves_to_the_attributes_class_it_names(env):
    """The resizer's modify controller: a class that does not exist leaves the modification Pending;
    once it exists the volume is modified (InProgress, then the claim's current class and the
    volume's are the new one); parameters the driver does not know are Infeasible."""
    client, _ = env
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "now"}, "provisioner": CSI_DRIVER, "volumeBindingMode": "Immediate"})
    vacs = client.resource("storage.k8s.io", "v1", "volumeattributesclasses")
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("ckpt", storageClassName="now"))
    bound = await eventually(phase_is(client, "persistentvolumeclaims", "ckpt", "Bound", "default"))
    pv_name = bound["spec"]["volumeName"]
    await pvcs.patch("ckpt", {"spec": {"volumeAttributesClassName": "gold"}}, namespace="default")

    def modify_status_is(value):
        async def check():
            pvc = await state(client, "persistentvolumeclaims", "ckpt", "default")
            return pvc["status"].get("modifyVolumeStatus") == value and pvc
        return check
    pending = await eventually(modify_status_is({"status": "Pending"}))
    assert "currentVolumeAttributesClassName" not in pending["status"] and "conditions" not in pending["status"]
    assert (await eventually(events_of(client, "ckpt", "VolumeModifyFailed")))["VolumeModifyFailed"] == \
        (f"external-resizer {CSI_DRIVER}", 'VAC "gold" does not exist.')
    await vacs.create({"metadata": {"name": "gold"}, "driverName": CSI_DRIVER, "parameters": {"iops": "16000"}})

    async def current_is(name):
        pvc = await state(client, "persistentvolumeclaims", "ckpt", "default")
        return pvc["status"].get("currentVolumeAttributesClassName") == name and pvc
    modified = await eventually(lambda: current_is("gold"))
    assert "modifyVolumeStatus" not in modified["status"] and "conditions" not in modified["status"]
    assert (await state(client, "persistentvolumes", pv_name))["spec"]["volumeAttributesClassName"] == "gold"
    assert await eventually(events_of(client, "ckpt", "VolumeModify", "VolumeModifySuccessful")) == {
        "VolumeModify": (f"external-resizer {CSI_DRIVER}", "external resizer is modifying volume ckpt with vac gold"),
        "VolumeModifySuccessful": (f"external-resizer {CSI_DRIVER}",
                                   "external resizer modified volume ckpt with vac gold successfully")}
    await vacs.create({"metadata": {"name": "replicated"}, "driverName": CSI_DRIVER, "parameters": {"replicas": "3"}})
    await pvcs.patch("ckpt", {"spec": {"volumeAttributesClassName": "replicated"}}, namespace="default")
    refused = await eventually(modify_status_is({"targetVolumeAttributesClassName": "replicated", "status": "Infeasible"}))
    assert refused["status"]["currentVolumeAttributesClassName"] == "gold"
    [cond] = refused["status"]["conditions"]
    assert cond["type"] == "ModifyingVolume" and cond["message"] == (
        "ModifyVolume failed with errorrpc error: code = InvalidArgument desc = parameter replicas is not supported "
        f"by {CSI_DRIVER}. Waiting for retry.")
    assert (await state(client, "persistentvolumes", pv_name))["spec"]["volumeAttributesClassName"] == "gold"


async def test_the_csi_driver_provisions_with_the_claims_attributes_class(env):
    """The built-in driver's CSI name serves the same directories as spec.csi volumes (no attach
    needed); a claim naming a VolumeAttributesClass waits for it to exist, then its volume carries it."""
    client, root = env
    driver = await client.resource("storage.k8s.io", "v1", "csidrivers").get(CSI_DRIVER)
    assert driver["spec"]["attachRequired"] is False and driver["spec"]["volumeLifecycleModes"] == ["Persistent"]
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "csi"}, "provisioner": CSI_DRIVER, "volumeBindingMode": "Immediate"})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("ckpt", storageClassName="csi", volumeAttributesClassName="fast"))

    async def failed():
        evs, _ = await client.resource("", "v1", "events").list("default")
        return [e["message"] for e in evs if e["reason"] == "ProvisioningFailed"]
    assert (await eventually(failed))[0] == ('failed to provision volume with StorageClass "csi": '
                                             'volumeattributesclass.storage.k8s.io "fast" not found')
    await client.resource("storage.k8s.io", "v1", "volumeattributesclasses").create(
        {"metadata": {"name": "fast"}, "driverName": CSI_DRIVER, "parameters": {"throughput": "500"}})
    bound = await eventually(phase_is(client, "persistentvolumeclaims", "ckpt", "Bound", "default"))
    assert bound["status"]["currentVolumeAttributesClassName"] == "fast"
    sources = await eventually(events_of(client, "ckpt", "Provisioning", "ProvisioningFailed", "ProvisioningSucceeded"))
    assert {component for component, _ in sources.values()} == {CSI_DRIVER}  # the driver's own provisioner
    pv = await state(client, "persistentvolumes", bound["spec"]["volumeName"])
    assert pv["spec"]["volumeAttributesClassName"] == "fast"
    assert pv["spec"]["csi"] == {"driver": CSI_DRIVER, "volumeHandle": pv["metadata"]["name"],
                                 "volumeAttributes": {"path": str(root / pv["metadata"]["name"])}}
    assert (root / pv["metadata"]["name"]).is_dir()
    await client.resource("storage.k8s.io", "v1", "volumeattributesclasses").create(
        {"metadata": {"name": "striped"}, "driverName": CSI_DRIVER, "parameters": {"stripes": "4"}})
    await pvcs.create(claim("odd", storageClassName="csi", volumeAttributesClassName="striped"))
    assert await eventually(lambda: _message_about(client, "odd", "ProvisioningFailed")) == (
        'failed to provision volume with StorageClass "csi": rpc error: code = InvalidArgument desc = parameter '
        f"stripes is not supported by {CSI_DRIVER}")
    await pvcs.delete("ckpt", "default")
    await eventually(lambda: _gone(client, "persistentvolumes", pv["metadata"]["name"]))
    assert not (root / pv["metadata"]["name"]).exists()


async def test_claim_cloned_from_another_starts_as_a_copy(env):
    client, root = env
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "now"}, "provisioner": PROVISIONER, "volumeBindingMode": "Immediate"})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("dataset", storageClassName="now"))
    src = await eventually(phase_is(client, "persistentvolumeclaims", "dataset", "Bound", "default"))
    (root / src["spec"]["volumeName"] / "shard-0").write_text("tokens")
    await pvcs.create(claim("copy", storageClassName="now",
                            dataSource={"kind": "PersistentVolumeClaim", "name": "dataset"}))
    copy = await eventually(phase_is(client, "persistentvolumeclaims", "copy", "Bound", "default"))
    assert (root / copy["spec"]["volumeName"] / "shard-0").read_text() == "tokens"
    await pvcs.create(claim("small", "1Mi", storageClassName="now",
                            dataSource={"kind": "PersistentVolumeClaim", "name": "dataset"}))

    async def refused():
        evs, _ = await client.resource("", "v1", "events").list("default")
        return [e["message"] for e in evs if e["reason"] == "ProvisioningFailed"]
    assert (await eventually(refused))[0] == (
        'failed to provision volume with StorageClass "now": error getting handle for DataSource Type '
        "PersistentVolumeClaim by Name dataset: requested PV size is smaller than the source volume")


async def test_a_claim_the_driver_cannot_make_as_asked_is_not_provisioned_empty(env):
    """As the CSI external-provisioner: a claim restored from a VolumeSnapshot fails (the driver
    takes no snapshots), so does one with a selector (a new volume has no labels to match), and
    one whose data source is another kind waits for that kind's populator; none gets an empty
    volume."""
    client, root = env
    await client.resource("storage.k8s.io", "v1", "storageclasses").create({
        "metadata": {"name": "now"}, "provisioner": PROVISIONER, "volumeBindingMode": "Immediate"})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("restored", storageClassName="now", dataSource={
        "apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "ckpt-step-1000"}))
    await pvcs.create(claim("picky", storageClassName="now", selector={"matchLabels": {"tier": "gold"}}))
    await pvcs.create(claim("populated", storageClassName="now", dataSourceRef={
        "apiGroup": "populator.example.com", "kind": "ModelWeights", "name": "llama"}))
    failed = 'failed to provision volume with StorageClass "now": '
    assert await eventually(lambda: _message_about(client, "restored", "ProvisioningFailed")) == (
        failed + "CSI driver does not support snapshot restore: controller CREATE_DELETE_SNAPSHOT capability is "
        "not reported")
    assert await eventually(lambda: _message_about(client, "picky", "ProvisioningFailed")) == (
        failed + "claim Selector is not supported")

    async def populator_assumed():
        evs, _ = await client.resource("", "v1", "events").list("default")
        return [e for e in evs if e["involvedObject"]["name"] == "populated"
                and e["message"] == "Assuming an external populator will provision the volume"]
    assert (await eventually(populator_assumed))[0]["reason"] == "Provisioning"
    for name in ("restored", "picky", "populated"):
        got = await pvcs.get(name, "default")
        assert got["status"]["phase"] == "Pending" and not got["spec"].get("volumeName")
    assert not list(root.iterdir())


async def test_pvc_protection_passes_over_many_pods_in_turns():
    """Whether a deleting claim is in use is read from a pass over its namespace's pods that lets
    the loop run every TURN pods, and still finds the one user, last of 3 * TURN + 1."""
    s = await make_stack()
    ctrl = PVCProtectionController(s.client)
    try:
        n = 3 * TURN + 1
        pods = [{"metadata": {"name": f"p{i}", "namespace": "default"}, "spec": {"nodeName": "n1", "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data" if i == n - 1 else f"other-{i}"}}]},
            "status": {"phase": "Running"}} for i in range(n)]
        ctrl.pods.list_namespace = lambda ns: pods if ns == "default" else []
        during, used = await turns_during(ctrl.in_use("default", "data"))
        assert used is True and during >= 3
        pods[-1]["status"]["phase"] = "Succeeded"
        assert await ctrl.in_use("default", "data") is False
    finally:
        await s.close()


async def test_a_bound_claims_capacity_is_not_overwritten_from_its_volume():
    """updateClaimStatus copies the volume's capacity only when the claim becomes Bound: later the
    claim's status.capacity belongs to the resizer (it may differ from the volume's on purpose, a
    filesystem smaller than its block device), so the binder's resync must not undo a resize."""
    s = await make_stack()
    ctrl = PersistentVolumeController(s.client)
    await ctrl.start()
    try:
        pvs, pvcs = s.client.resource("", "v1", "persistentvolumes"), s.client.resource("", "v1", "persistentvolumeclaims")
        await pvs.create(volume("disk", "5Gi", storageClassName=""))
        await pvcs.create(claim("c", "2Gi", storageClassName=""))
        bound = await eventually(phase_is(s.client, "persistentvolumeclaims", "c", "Bound", "default"))
        assert bound["status"]["capacity"] == {"storage": "5Gi"}
        pv = await pvs.patch("disk", {"spec": {"capacity": {"storage": "8Gi"}}})
        await eventually(lambda: _seen(ctrl.volumes, "disk", pv["metadata"]["resourceVersion"]))
        await ctrl.sync(("claim", "default/c"))
        await ctrl.sync(("volume", "disk"))
        assert (await state(s.client, "persistentvolumeclaims", "c", "default"))["status"]["capacity"] == {"storage": "5Gi"}
    finally:
        await ctrl.stop()
        await s.close()


async def _seen(informer, key, rv):
    obj = informer.get(key)
    return obj is not None and obj["metadata"]["resourceVersion"] == rv


async def test_a_requested_volume_that_does_not_fit_says_why(env):
    """checkVolumeSatisfyClaim: a claim naming a volume that cannot serve it stays Pending with a
    VolumeMismatch event giving upstream's reason; a volume with an attributes class serves only
    claims asking for that class, and the bound claim reports it as its current class."""
    client, _ = env
    pvs, pvcs = client.resource("", "v1", "persistentvolumes"), client.resource("", "v1", "persistentvolumeclaims")
    await pvs.create(volume("small", "1Gi", storageClassName=""))
    gold = volume("gold", "10Gi", storageClassName="", volumeAttributesClassName="gold")
    del gold["spec"]["hostPath"]
    await pvs.create({**gold, "spec": {**gold["spec"], "csi": {"driver": "disk.example.com", "volumeHandle": "v-1"}}})
    await eventually(phase_is(client, "persistentvolumes", "gold", "Available"))
    await pvcs.create(claim("big", "5Gi", storageClassName="", volumeName="small"))
    await pvcs.create(claim("plain", "5Gi", storageClassName="", volumeName="gold"))
    await pvcs.create(claim("any", "5Gi", storageClassName=""))

    async def mismatches():
        evs, _ = await client.resource("", "v1", "events").list("default")
        got = {e["involvedObject"]["name"]: e["message"] for e in evs if e["reason"] == "VolumeMismatch"}
        return len(got) == 2 and got
    assert await eventually(mismatches) == {
        "big": 'Cannot bind to requested volume "small": requested PV is too small',
        "plain": 'Cannot bind to requested volume "gold": volumeAttributesClassName does not match'}
    assert (await state(client, "persistentvolumeclaims", "big", "default"))["status"]["phase"] == "Pending"
    await pvcs.create(claim("fancy", "5Gi", storageClassName="", volumeAttributesClassName="gold"))
    bound = await eventually(phase_is(client, "persistentvolumeclaims", "fancy", "Bound", "default"))
    assert bound["spec"]["volumeName"] == "gold" and bound["status"]["currentVolumeAttributesClassName"] == "gold"
    assert (await state(client, "persistentvolumeclaims", "any", "default"))["status"]["phase"] == "Pending"
    # a volume made for a claim (claimRef) is bound to it even without the claim's attributes class
    made = await pvcs.create(claim("made", storageClassName="", volumeAttributesClassName="gold"))
    await pvs.create(volume("for-made", "1Gi", storageClassName="", claimRef={
        "kind": "PersistentVolumeClaim", "namespace": "default", "name": "made", "uid": made["metadata"]["uid"]}))
    bound = await eventually(phase_is(client, "persistentvolumeclaims", "made", "Bound", "default"))
    assert bound["spec"]["volumeName"] == "for-made"


def test_the_default_class_is_the_newest_then_the_first_by_name():
    """GetDefaultClass sorts defaults newest first and, made in the same second, by name."""
    def sc(name, at, default=True):
        ann = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
        return {"metadata": {"name": name, "creationTimestamp": at, "annotations": ann}}
    same = "2026-01-01T00:00:01Z"
    assert default_class([sc("b-slow", same), sc("a-fast", same), sc("z", "2026-01-01T00:00:00Z")])["metadata"]["name"] == "a-fast"
    assert default_class([sc("b", "2026-01-01T00:00:02Z"), sc("a", same), sc("c", "2026-01-01T00:00:03Z", False)])[
        "metadata"]["name"] == "b"
    assert default_class([sc("c", same, False)]) is None


async def test_a_class_no_provisioner_serves_fails_and_a_migrated_one_names_its_csi_driver(env):
    """provisionClaim: an Immediate claim of a `kubernetes.io/` provisioner kube-controller-manager has
    no plugin for (no-provisioner) is ProvisioningFailed; an in-tree one CSI migration took over is
    asked of its CSI driver by that name."""
    client, _ = env
    classes = client.resource("storage.k8s.io", "v1", "storageclasses")
    await classes.create({"metadata": {"name": "manual"}, "provisioner": "kubernetes.io/no-provisioner",
                          "volumeBindingMode": "Immediate"})
    await classes.create({"metadata": {"name": "gp2"}, "provisioner": "kubernetes.io/aws-ebs",
                          "volumeBindingMode": "Immediate"})
    pvcs = client.resource("", "v1", "persistentvolumeclaims")
    await pvcs.create(claim("nvme", storageClassName="manual"))
    await pvcs.create(claim("ebs", storageClassName="gp2"))

    async def events():
        evs, _ = await client.resource("", "v1", "events").list("default")
        got = {(e["involvedObject"]["name"], e["reason"]): e["message"] for e in evs
               if e["reason"] in ("ProvisioningFailed", "ExternalProvisioning")}
        return len(got) == 2 and got
    assert await eventually(events) == {
        ("nvme", "ProvisioningFailed"): "no volume plugin matched name: kubernetes.io/no-provisioner",
        ("ebs", "ExternalProvisioning"): "Waiting for a volume to be created either by the external provisioner "
                                         "'ebs.csi.aws.com' or manually by the system administrator. If volume creation "
                                         "is delayed, please verify that the provisioner is running and correctly registered."}
    assert (await state(client, "persistentvolumeclaims", "ebs", "default"))["metadata"]["annotations"][
        "volume.kubernetes.io/storage-provisioner"] == "ebs.csi.aws.com"
    assert "volume.kubernetes.io/storage-provisioner" not in (
        (await state(client, "persistentvolumeclaims", "nvme", "default"))["metadata"].get("annotations") or {})
