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
the request changes or RETRY_INFEASIBLE passes, as the resizer's slow set."""

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
        self.recorder = CoreEventRecorder(client, f"external-resizer {driver}", clock)
        #: claim key -> (the size that was infeasible, when): not tried again before RETRY_INFEASIBLE
        self._infeasible: dict[str, tuple[str, float]] = {}
        self.claims.add_handlers(on_add=self._claim, on_update=lambda old, new: self._claim(new))
        self.volumes.add_handlers(on_update=lambda old, new: self._volume(new))

    def informers(self):
        return [self.volumes, self.claims]

    def _claim(self, pvc: dict) -> None:
        if (pvc.get("spec") or {}).get("volumeName"):
            self.queue.add(f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}")

    def _volume(self, pv: dict) -> None:
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref:
            self.queue.add(f"{ref.get('namespace')}/{ref.get('name')}")

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
        await self._expand(key, pvc, pv)

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
