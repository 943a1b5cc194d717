"""A dynamic provisioner for local directories, acting through the API as an
external provisioner (sig-storage-lib-external-provisioner) does: a claim the
PV controller annotated with `volume.kubernetes.io/storage-provisioner:
nanokube.io/local-path` gets a directory `<root>/<pv-name>` and a hostPath
PersistentVolume pre-bound to it; for a WaitForFirstConsumer class it waits
for the scheduler's `volume.kubernetes.io/selected-node` and pins the volume
to that node; an Immediate one is pinned to its class's allowedTopologies, if
any. A Released volume of ours with reclaim policy Delete has its
directory removed, then its PersistentVolume deleted.

Every node of a cluster runs on this one host, so a volume's directory is
reachable from all of them; the node affinity of a WaitForFirstConsumer volume
keeps the local-volume semantics users expect. A claim cloned from another
claim of the class (`dataSource` kind PersistentVolumeClaim) starts as a copy of
its directory; one restored from a VolumeSnapshot fails, as the driver takes no
snapshots, one with a selector fails, and one whose data source is another kind
is left to that kind's populator, as the CSI external-provisioner does. Its
resizers (`resizer.LocalPathResizer`, one per driver name,
started and stopped with it, as a CSI driver's deployment runs the
external-resizer beside its provisioner) expand and modify the volumes it made.

The same directories are also served as a CSI driver, `local.csi.nanokube.io`
(a CSIDriver object that needs no attach; its external-attacher, attacher.py, runs
beside the resizers for an admin who recreates it with attachRequired): a class naming it as provisioner
gets `spec.csi` volumes (the directory in volumeAttributes `path`, read by the
node's volume manager), which, unlike hostPath ones, may carry a
VolumeAttributesClass: a claim that names one is provisioned with it, if the
class exists and is the driver's."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil

from ...client.informer import Informer
from ...clock import REAL, Clock
from ...client.record import CoreEventRecorder
from ...controllers.base import Controller
from ...machinery.errors import APIError
from ...machinery.quantity import QuantityError, parse_quantity
from ...machinery.user import User
from ...volume.binding import PROVISIONED_BY, SELECTED_NODE, STORAGE_PROVISIONER
from .attacher import LocalPathAttacher
from .resizer import DriverError, LocalPathResizer, check_parameters
from ...volume.classes import IS_DEFAULT, WAIT_FOR_FIRST_CONSUMER, claim_class

log = logging.getLogger(__name__)

PROVISIONER = "nanokube.io/local-path"
#: the CSI driver name the same volumes are served under (a CSI driver name has no `/`)
CSI_DRIVER = "local.csi.nanokube.io"
PROVISIONERS = (PROVISIONER, CSI_DRIVER)
#: the provisioner acts as its own service account, as a deployed provisioner would
PROVISIONER_USER = User("system:serviceaccount:kube-system:local-path-provisioner",
                        ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))
DEFAULT_CLASS = "standard"
SNAPSHOT_GROUP = "snapshot.storage.k8s.io"


def default_class_object() -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": DEFAULT_CLASS, "annotations": {IS_DEFAULT: "true"}},
            "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER}


def csi_driver_object() -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": CSI_DRIVER},
            "spec": {"attachRequired": False, "podInfoOnMount": False, "volumeLifecycleModes": ["Persistent"]}}


async def ensure_default_class(client) -> None:
    """Install the default class and the CSIDriver unless they exist (an admin's edits are kept)."""
    for plural, obj in (("storageclasses", default_class_object()), ("csidrivers", csi_driver_object())):
        try:
            await client.resource("storage.k8s.io", "v1", plural).create(obj)
        except APIError as e:
            if e.code != 409:
                raise


def local_path(pv: dict) -> str | None:
    """The directory behind one of the driver's volumes: a hostPath one's path, a CSI one's
    `path` attribute."""
    spec = pv.get("spec") or {}
    if (spec.get("csi") or {}).get("driver") == CSI_DRIVER:
        return (spec["csi"].get("volumeAttributes") or {}).get("path")
    return (spec.get("hostPath") or {}).get("path")


class AttributesClassMissing(Exception):
    """A claim's VolumeAttributesClass does not exist (yet): provisioning is tried again."""


def volume_name(pvc: dict) -> str:
    return f"pvc-{pvc['metadata']['uid']}"


class LocalPathProvisioner(Controller):
    name = "local-path-provisioner"
    retriable = (AttributesClassMissing,)

    def __init__(self, client, root: str, clock: Clock = REAL):
        super().__init__(client, clock)
        self.root = os.path.abspath(root)
        self.pvs = client.resource("", "v1", "persistentvolumes")
        self.pvcs = client.resource("", "v1", "persistentvolumeclaims")
        self.claims = Informer(self.pvcs, clock=clock)
        self.volumes = Informer(self.pvs, clock=clock)
        self.classes = Informer(client.resource("storage.k8s.io", "v1", "storageclasses"), clock=clock)
        #: events come from the provisioner of the claim's driver name, as each driver runs its own
        self.recorders = {name: CoreEventRecorder(client, name, clock) for name in PROVISIONERS}
        self.vacs = Informer(client.resource("storage.k8s.io", "v1", "volumeattributesclasses"), clock=clock)
        #: one external resizer per driver name, as each CSI driver's deployment runs its own
        self.resizers = [LocalPathResizer(client, name, self.root, clock) for name in PROVISIONERS]
        #: and the CSI driver's external-attacher, for the VolumeAttachments of an attachRequired CSIDriver
        self.sidecars = [*self.resizers, LocalPathAttacher(client, CSI_DRIVER, clock)]
        self.claims.add_handlers(on_add=self._claim, on_update=lambda old, new: self._claim(new))
        self.volumes.add_handlers(on_add=self._volume, on_update=lambda old, new: self._volume(new))
        self.vacs.add_handlers(on_add=self._vac)

    def informers(self):
        return [self.classes, self.vacs, self.volumes, self.claims]

    async def start(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        await ensure_default_class(self.client)
        await super().start()
        for r in self.sidecars:
            await r.start()

    async def stop(self) -> None:
        for r in self.sidecars:
            await r.stop()
        await super().stop()

    def _claim(self, pvc: dict) -> None:
        if (pvc["metadata"].get("annotations") or {}).get(STORAGE_PROVISIONER) in PROVISIONERS:
            self.queue.add(("claim", f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}"))

    def _vac(self, vac: dict) -> None:
        """A claim waiting for this class to exist is provisioned now, not at its next retry."""
        for pvc in self.claims.list():
            if (pvc.get("spec") or {}).get("volumeAttributesClassName") == vac["metadata"]["name"] \
                    and not pvc["spec"].get("volumeName"):
                self._claim(pvc)

    def _volume(self, pv: dict) -> None:
        if (pv["metadata"].get("annotations") or {}).get(PROVISIONED_BY) in PROVISIONERS:
            self.queue.add(("volume", pv["metadata"]["name"]))

    async def sync(self, key) -> None:
        kind, name = key
        if kind == "claim":
            pvc = self.claims.get(name)
            if pvc is not None and not (pvc.get("spec") or {}).get("volumeName"):
                await self._provision(pvc)
        else:
            pv = self.volumes.get(name)
            if pv is not None:
                await self._reclaim(pv)

    def path(self, pv_name: str) -> str:
        return os.path.join(self.root, pv_name)

    async def _provision(self, pvc: dict) -> None:
        md, spec = pvc["metadata"], pvc.get("spec") or {}
        ann = md.get("annotations") or {}
        driver = ann.get(STORAGE_PROVISIONER)
        if spec.get("volumeName") or md.get("deletionTimestamp") or driver not in PROVISIONERS:
            return
        sc = self.classes.get(claim_class(pvc))
        if sc is None or sc.get("provisioner") != driver:
            return
        node = ann.get(SELECTED_NODE)
        if sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER and not node:
            return
        name = volume_name(pvc)
        if self.volumes.get(name) is not None:
            return
        recorder = self.recorders[driver]
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": md["namespace"], "name": md["name"],
               "uid": md["uid"], "resourceVersion": md.get("resourceVersion", "")}
        claim_obj = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **pvc}
        await recorder.emit(claim_obj, "Normal", "Provisioning",
                                 f'External provisioner is provisioning volume for claim "{md["namespace"]}/{md["name"]}"')
        src = spec.get("dataSourceRef") or spec.get("dataSource")
        if src and src.get("kind") != "VolumeSnapshot" and (src.get("apiGroup") or "", src.get("kind")) != \
                ("", "PersistentVolumeClaim"):  # a volume populator's kind
            await recorder.emit(claim_obj, "Normal", "Provisioning",
                                     "Assuming an external populator will provision the volume")
            return
        failed = f"failed to provision volume with StorageClass \"{sc['metadata']['name']}\""
        source, problem = self._clone_source(pvc, src)
        if problem:
            problem = f"{failed}: {problem}"
        elif spec.get("selector"):
            problem = f"{failed}: claim Selector is not supported"
        vac_name = spec.get("volumeAttributesClassName")
        if vac_name and not problem:
            vac = self.vacs.get(vac_name)
            if vac is None:
                message = f'{failed}: volumeattributesclass.storage.k8s.io "{vac_name}" not found'
                await recorder.emit(claim_obj, "Warning", "ProvisioningFailed", message)
                raise AttributesClassMissing(message)
            if driver != CSI_DRIVER or vac.get("driverName") != driver:
                problem = (f"{failed}: VAC {vac_name} referenced in PVC is for driver {vac.get('driverName')} which "
                           f"does not match driver name {driver}")
            else:
                try:  # CreateVolume's mutable parameters
                    check_parameters(driver, vac.get("parameters") or {})
                except DriverError as e:
                    problem = f"{failed}: {e}"
        if problem:
            await recorder.emit(claim_obj, "Warning", "ProvisioningFailed", problem)
            return
        path = self.path(name)
        if source and not os.path.exists(path):
            await asyncio.to_thread(shutil.copytree, source, path, symlinks=True)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o777)
        pv_spec = {
            "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")},
            "accessModes": list(spec.get("accessModes") or []),
            "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
            "storageClassName": sc["metadata"]["name"], "volumeMode": spec.get("volumeMode") or "Filesystem",
            "claimRef": ref,
        }
        if driver == CSI_DRIVER:
            pv_spec["csi"] = {"driver": CSI_DRIVER, "volumeHandle": name, "volumeAttributes": {"path": path}}
            if vac_name:
                pv_spec["volumeAttributesClassName"] = vac_name
        else:
            pv_spec["hostPath"] = {"path": path, "type": "DirectoryOrCreate"}
        if sc.get("mountOptions"):
            pv_spec["mountOptions"] = list(sc["mountOptions"])
        if node:
            pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
        elif sc.get("allowedTopologies"):  # an Immediate volume is made where its class allows
            pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": e["key"], "operator": "In", "values": list(e["values"])}
                for e in term.get("matchLabelExpressions") or []]} for term in sc["allowedTopologies"]]}}
        pv = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {"name": name, "annotations": {PROVISIONED_BY: driver}}, "spec": pv_spec}
        try:
            await self.pvs.create(pv)
        except APIError as e:
            if e.code != 409:
                await recorder.emit(claim_obj, "Warning", "ProvisioningFailed",
                                         f"failed to provision volume with StorageClass \"{sc['metadata']['name']}\": {e.message}")
                raise
            return
        await recorder.emit(claim_obj, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume {name}")

    def _clone_source(self, pvc: dict, src: dict | None) -> tuple[str | None, str]:
        """(the source volume's directory, why the claim cannot be made from its data source):
        another claim of the class is copied; a VolumeSnapshot cannot be restored, the driver
        taking no snapshots (the external-provisioner's capability check); (None, '') without a
        source."""
        if not src:
            return None, ""
        if src.get("kind") == "VolumeSnapshot":
            if src.get("apiGroup") != SNAPSHOT_GROUP:
                return None, (f"the PVC source does not belong to the right APIGroup. Expected {SNAPSHOT_GROUP}, "
                              f"Got {src.get('apiGroup') or ''}")
            return None, ("CSI driver does not support snapshot restore: controller CREATE_DELETE_SNAPSHOT "
                          "capability is not reported")
        ns, name = pvc["metadata"]["namespace"], src.get("name", "")
        what = f"error getting handle for DataSource Type PersistentVolumeClaim by Name {name}"
        source = self.claims.get(f"{ns}/{name}")
        if source is None:
            return None, f"{what}: claim in dataSource not found"
        if claim_class(source) != claim_class(pvc):
            return None, f"{what}: the source PVC and destination PVCs must be in the same storage class for cloning"
        pv = self.volumes.get((source.get("spec") or {}).get("volumeName") or "")
        path = local_path(pv or {})
        if not path or (source.get("status") or {}).get("phase") != "Bound":
            return None, f"{what}: claim in dataSource not bound or its volume missing"
        try:
            if parse_quantity(((pvc["spec"].get("resources") or {}).get("requests") or {}).get("storage", "0")) < \
                    parse_quantity(((pv.get("spec") or {}).get("capacity") or {}).get("storage", "0")):
                return None, f"{what}: requested PV size is smaller than the source volume"
        except QuantityError:
            return None, f"{what}: unreadable size"
        return path, ""

    async def _reclaim(self, pv: dict) -> None:
        spec = pv.get("spec") or {}
        if (pv.get("status") or {}).get("phase") != "Released" or spec.get("persistentVolumeReclaimPolicy") != "Delete":
            return
        path = os.path.realpath(local_path(pv) or "")
        if os.path.dirname(path) == os.path.realpath(self.root):
            shutil.rmtree(path, ignore_errors=True)
        else:
            log.warning("volume %s: %s is not under %s; not removed", pv["metadata"]["name"], path, self.root)
        try:
            await self.pvs.delete(pv["metadata"]["name"])
        except APIError as e:
            if e.code != 404:
                raise
