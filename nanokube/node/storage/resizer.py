"""The local-path driver's external resizer, acting through the API as
kubernetes-csi/external-resizer does beside a CSI driver, for the volumes
the provisioner made.

Expansion (RecoverVolumeExpansionFailure's flow, expandAndRecover): a bound
claim asking for more than its status.capacity is marked
ControllerResizeInProgress with the size in status.allocatedResources and a
Resizing condition; the driver grows the volume (its size may not pass the
disk the volumes live on: OutOfRange, ControllerResizeInfeasible with a
ControllerResizeError condition); the volume's capacity follows; a
Filesystem volume then waits for the kubelet (NodeResizePending,
FileSystemResizePending), a Block one is done. A user recovers from a
failed expansion by asking for less again (not below status.capacity): the
next try takes the new request. An infeasible size is not tried again until
the request changes or RETRY_INFEASIBLE passes, as the resizer's slow set.

Modification (the modify controller), for the driver's CSI volumes: a claim whose
spec.volumeAttributesClassName differs from its current class is modified to
it: a class that does not exist leaves status.modifyVolumeStatus Pending;
otherwise InProgress with a ModifyingVolume condition, then the driver
applies the class's parameters (the local-path driver knows `iops` and
`throughput`, positive integers a directory has no use for; any other is
InvalidArgument: Infeasible), then the volume's and the claim's current
class are the new one."""

from __future__ import annotations

import shutil

from ...client.informer import Informer
from ...client.record import CoreEventRecorder
from ...clock import REAL, Clock
from ...controllers.base import Controller
from ...machinery.conditions import is_condition_true
from ...machinery.quantity import format_quantity
from ...volume.binding import PROVISIONED_BY
from ...volume.resize import (
    CONTROLLER_RESIZE_ERROR,
    CONTROLLER_RESIZE_IN_PROGRESS,
    CONTROLLER_RESIZE_INFEASIBLE,
    FILE_SYSTEM_RESIZE_PENDING,
    FS_RESIZE_PENDING_MESSAGE,
    NODE_RESIZE_IN_PROGRESS,
    NODE_RESIZE_INFEASIBLE,
    NODE_RESIZE_PENDING,
    RESIZING,
    allocated,
    capacity,
    condition,
    merge_conditions,
    requested,
    resize_finished,
    resize_status,
    volume_capacity,
    with_storage_status,
)

#: how long an infeasible size waits before it is tried again (the resizer's --retry-interval-max)
RETRY_INFEASIBLE = 300.0
#: the VolumeAttributesClass parameters the local-path driver accepts, each a positive integer
MUTABLE_PARAMETERS = ("iops", "throughput")
MODIFYING_VOLUME = "ModifyingVolume"
MODIFY_VOLUME_ERROR = "ModifyVolumeError"


class DriverError(Exception):
    """A CSI call's error: its gRPC code and description."""

    def __init__(self, code: str, desc: str):
        super().__init__(f"rpc error: code = {code} desc = {desc}")
        self.code = code


class LocalPathResizer(Controller):
    name = "local-path-resizer"

    def __init__(self, client, driver: str, root: str, clock: Clock = REAL):
        super().__init__(client, clock)
        self.driver = driver
        self.root = root
        self.pvs = client.resource("", "v1", "persistentvolumes")
        self.pvcs = client.resource("", "v1", "persistentvolumeclaims")
        self.claims = Informer(self.pvcs, clock=clock)
        self.volumes = Informer(self.pvs, clock=clock)
        self.vacs = Informer(client.resource("storage.k8s.io", "v1", "volumeattributesclasses"), clock=clock)
        self.recorder = CoreEventRecorder(client, f"external-resizer {driver}", clock)
        #: claim key -> (the size that was infeasible, when): not tried again before RETRY_INFEASIBLE
        self._infeasible: dict[str, tuple[str, float]] = {}
        self.claims.add_handlers(on_add=self._claim, on_update=lambda old, new: self._claim(new))
        self.volumes.add_handlers(on_update=lambda old, new: self._volume(new))
        self.vacs.add_handlers(on_add=lambda vac: self._pending(), on_update=lambda old, new: self._pending())

    def informers(self):
        return [self.vacs, self.volumes, self.claims]

    def _claim(self, pvc: dict) -> None:
        if (pvc.get("spec") or {}).get("volumeName"):
            self.queue.add(f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}")

    def _volume(self, pv: dict) -> None:
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref:
            self.queue.add(f"{ref.get('namespace')}/{ref.get('name')}")

    def _pending(self) -> None:
        """A class that appears may be the one a Pending modification waits for."""
        for pvc in self.claims.list():
            if ((pvc.get("status") or {}).get("modifyVolumeStatus") or {}).get("status") == "Pending":
                self._claim(pvc)

    def _ours(self, pvc: dict) -> dict | None:
        """The claim's volume, if it is one of the driver's and bound to this claim."""
        pv = self.volumes.get((pvc.get("spec") or {}).get("volumeName") or "")
        if pv is None or (pv["metadata"].get("annotations") or {}).get(PROVISIONED_BY) != self.driver:
            return None
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("uid") != pvc["metadata"].get("uid") or ref.get("namespace") != pvc["metadata"]["namespace"]:
            return None
        return pv

    async def sync(self, key: str) -> None:
        pvc = self.claims.get(key)
        if pvc is None or (pvc.get("status") or {}).get("phase") != "Bound":
            self._infeasible.pop(key, None)
            return
        pv = self._ours(pvc)
        if pv is None:
            return
        pvc, pv = await self._expand(key, pvc, pv)
        if (pv["spec"].get("csi") or {}).get("driver") == self.driver:  # only a CSI volume takes a class
            await self._modify(pvc, pv)

    async def _event(self, pvc: dict, type_: str, reason: str, message: str) -> None:
        await self.recorder.emit({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **pvc}, type_, reason, message)

    async def _write_status(self, pvc: dict, status: dict) -> dict:
        return await self.pvcs.update({**pvc, "status": status}, subresource="status")

    # --- expansion -----------------------------------------------------------------

    def _target(self, pvc: dict, pv: dict) -> str | None:
        """The size to expand to (expandAndRecover's choice), or None when there is nothing to do."""
        spec, cap, pv_size = requested(pvc), capacity(pvc), volume_capacity(pv)
        if spec is None or cap is None or pv_size is None or spec <= cap:
            return None
        want = pvc["spec"]["resources"]["requests"]["storage"]
        alloc = ((pvc.get("status") or {}).get("allocatedResources") or {}).get("storage")
        state = resize_status(pvc)
        if pv_size < spec:
            if state in (NODE_RESIZE_PENDING, NODE_RESIZE_IN_PROGRESS):
                # the node finishes the last size first
                return None if alloc is None or pv_size >= allocated(pvc) else alloc
            if state in (NODE_RESIZE_INFEASIBLE, CONTROLLER_RESIZE_IN_PROGRESS):
                return alloc or want
            return want
        if state in (NODE_RESIZE_PENDING, NODE_RESIZE_IN_PROGRESS):
            return None
        if state in (NODE_RESIZE_INFEASIBLE, CONTROLLER_RESIZE_IN_PROGRESS, CONTROLLER_RESIZE_INFEASIBLE):
            return alloc or want
        if state == "" and alloc:
            return alloc
        if is_condition_true((pvc.get("status") or {}).get("conditions"), FILE_SYSTEM_RESIZE_PENDING):
            return None
        return want

    async def _expand(self, key: str, pvc: dict, pv: dict) -> tuple[dict, dict]:
        size = self._target(pvc, pv)
        if size is None:
            return pvc, pv
        status = pvc.get("status") or {}
        same = (status.get("allocatedResources") or {}).get("storage") == size
        failed = self._infeasible.get(key)
        if same and failed is not None and failed[0] == size:
            left = failed[1] + RETRY_INFEASIBLE - self.clock.monotonic()
            if left > 0:
                self.queue.add_after(key, left)
                return pvc, pv
        now = self.clock.rfc3339()
        new = dict(status)
        new["conditions"] = merge_conditions(status.get("conditions"), [condition(RESIZING, now)], keep_old=same)
        if not same:
            new = with_storage_status(new, CONTROLLER_RESIZE_IN_PROGRESS)
        new["allocatedResources"] = {**(status.get("allocatedResources") or {}), "storage": size}
        pvc = await self._write_status(pvc, new)
        await self._event(pvc, "Normal", "Resizing", f"External resizer is resizing volume {pv['metadata']['name']}")
        try:
            self._controller_expand(size)
        except DriverError as e:
            self._infeasible[key] = (size, self.clock.monotonic())
            self.queue.add_after(key, RETRY_INFEASIBLE)
            status = with_storage_status(pvc.get("status") or {}, CONTROLLER_RESIZE_INFEASIBLE)
            error = condition(CONTROLLER_RESIZE_ERROR, self.clock.rfc3339(), f"failed to expand pvc with {e}")
            status["conditions"] = merge_conditions(status.get("conditions"), [error], keep_old=True)
            pvc = await self._write_status(pvc, status)
            await self._event(pvc, "Warning", "VolumeResizeFailed",
                              f'resize volume "{pv["metadata"]["name"]}" by resizer "{self.driver}" failed: {e}')
            return pvc, pv
        self._infeasible.pop(key, None)
        pv = await self.pvs.update({**pv, "spec": {**pv["spec"], "capacity": {**pv["spec"]["capacity"], "storage": size}}})
        status = pvc.get("status") or {}
        if (pv["spec"].get("volumeMode") or "Filesystem") == "Filesystem":
            # a filesystem on the volume is the kubelet's to grow, where a pod mounts it
            status = with_storage_status(status, NODE_RESIZE_PENDING)
            pending = condition(FILE_SYSTEM_RESIZE_PENDING, self.clock.rfc3339(), FS_RESIZE_PENDING_MESSAGE)
            status["conditions"] = merge_conditions(status.get("conditions"), [pending], keep_old=True)
            pvc = await self._write_status(pvc, status)
            await self._event(pvc, "Normal", "FileSystemResizeRequired", "Require file system resize of volume on node")
        else:
            pvc = await self._write_status(pvc, resize_finished(status, size))
            await self._event(pvc, "Normal", "VolumeResizeSuccessful", "Resize volume succeeded")
        return pvc, pv

    def _controller_expand(self, size: str) -> None:
        """ControllerExpandVolume: a directory grows to any size the disk under it has room for."""
        disk = shutil.disk_usage(self.root).total
        if requested({"spec": {"resources": {"requests": {"storage": size}}}}) > disk:
            raise DriverError("OutOfRange", f"requested size {size} exceeds the capacity of the disk under "
                                            f"{self.root} ({format_quantity(disk, 'BinarySI')})")

    # --- modification ------------------------------------------------------------------

    async def _modify(self, pvc: dict, pv: dict) -> None:
        want = (pvc.get("spec") or {}).get("volumeAttributesClassName") or ""
        status = pvc.get("status") or {}
        current = status.get("currentVolumeAttributesClassName") or ""
        modifying = status.get("modifyVolumeStatus")
        if modifying is None and want == current or not want:
            return
        if modifying is not None and modifying.get("status") == "Infeasible" \
                and modifying.get("targetVolumeAttributesClassName") == want:
            return  # the driver refused this class: the claim waits for another
        vac = self.vacs.get(want)
        if vac is None:
            await self._event(pvc, "Warning", "VolumeModifyFailed", f'VAC "{want}" does not exist.')
            if (modifying or {}).get("status") != "Pending":
                await self._write_status(pvc, {**status, "modifyVolumeStatus": {**(modifying or {}), "status": "Pending"}})
            return
        new = dict(status)
        new["modifyVolumeStatus"] = {"targetVolumeAttributesClassName": want, "status": "InProgress"}
        new["conditions"] = self._modify_conditions(status, condition(MODIFYING_VOLUME, self.clock.rfc3339(),
                                                                        "ModifyVolume operation in progress."))
        pvc = await self._write_status(pvc, new)
        await self._event(pvc, "Normal", "VolumeModify",
                          f"external resizer is modifying volume {pvc['metadata']['name']} with vac {want}")
        try:
            self._controller_modify(vac.get("parameters") or {})
        except DriverError as e:
            status = pvc.get("status") or {}
            failed = condition(MODIFYING_VOLUME, self.clock.rfc3339(),
                               f"ModifyVolume failed with error{e}. Waiting for retry.")
            await self._write_status(pvc, {**status, "modifyVolumeStatus": {**status["modifyVolumeStatus"], "status": "Infeasible"},
                                           "conditions": self._modify_conditions(status, failed)})
            await self._event(pvc, "Warning", "VolumeModifyFailed", str(e))
            return
        await self.pvs.update({**pv, "spec": {**pv["spec"], "volumeAttributesClassName": want}})
        status = {k: v for k, v in (pvc.get("status") or {}).items() if k != "modifyVolumeStatus"}
        status["currentVolumeAttributesClassName"] = want
        status["conditions"] = self._modify_conditions(status, None)
        if not status["conditions"]:
            del status["conditions"]
        pvc = await self._write_status(pvc, status)
        await self._event(pvc, "Normal", "VolumeModifySuccessful",
                          f"external resizer modified volume {pvc['metadata']['name']} with vac {want} successfully")

    @staticmethod
    def _modify_conditions(status: dict, new: dict | None) -> list[dict]:
        """MergeModifyVolumeConditionsOfPVC: the modification's conditions are replaced by `new`."""
        kept = [c for c in status.get("conditions") or [] if c.get("type") not in (MODIFYING_VOLUME, MODIFY_VOLUME_ERROR)]
        return kept + ([new] if new else [])

    def _controller_modify(self, parameters: dict) -> None:
        """ControllerModifyVolume: only the parameters the driver knows, with values it takes."""
        check_parameters(self.driver, parameters)


def check_parameters(driver: str, parameters: dict) -> None:
    """The driver's check of a VolumeAttributesClass's parameters (CreateVolume's and
    ControllerModifyVolume's mutable parameters): DriverError InvalidArgument for the first bad one."""
    for k, v in sorted(parameters.items()):
        if k not in MUTABLE_PARAMETERS:
            raise DriverError("InvalidArgument", f"parameter {k} is not supported by {driver}")
        if not str(v).isdigit() or int(v) <= 0:
            raise DriverError("InvalidArgument", f"parameter {k} must be a positive integer, not {v!r}")

