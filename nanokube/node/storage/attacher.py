"""The built-in CSI driver's external-attacher (kubernetes-csi/external-attacher, one per driver
name beside its provisioner): it acts on the VolumeAttachments whose attacher is the driver. The
attach/detach controller makes one only where the driver's CSIDriver asks for attaching
(attachRequired, or no CSIDriver at all), which the one installed with nanokube does not; an
admin who recreates it with `attachRequired: true` gets the whole attach path. ControllerPublish
of a directory needs the volume to be the driver's, its directory and the node to exist: then the
attacher's finalizer and status.attached (no metadata), else status.attachError with the reason,
tried again with backoff. A deleted one is ControllerUnpublished (nothing to undo for a directory):
attached false, then the finalizer goes, letting the object go."""

from __future__ import annotations

import os

from ...client.informer import Informer
from ...clock import REAL, Clock
from ...controllers.base import Controller
from ...machinery.errors import APIError
from ...volume.attachment import attacher_finalizer


class PublishError(Exception):
    """ControllerPublishVolume failed: the VolumeAttachment's attachError says why."""


class LocalPathAttacher(Controller):
    name = "external-attacher"
    retriable = (PublishError,)

    def __init__(self, client, driver: str, clock: Clock = REAL):
        super().__init__(client, clock)
        self.driver = driver
        self.finalizer = attacher_finalizer(driver)
        self.vas = client.resource("storage.k8s.io", "v1", "volumeattachments")
        self.pvs = client.resource("", "v1", "persistentvolumes")
        self.nodes = client.resource("", "v1", "nodes")
        self.attachments = Informer(self.vas, clock=clock)
        self.attachments.add_handlers(on_add=self._attachment, on_update=lambda old, new: self._attachment(new))

    def informers(self):
        return [self.attachments]

    def _attachment(self, va: dict) -> None:
        if (va.get("spec") or {}).get("attacher") == self.driver:
            self.queue.add(va["metadata"]["name"])

    async def sync(self, name: str) -> None:
        va = self.attachments.get(name)
        if va is None:
            return
        md = va["metadata"]
        finalizers = md.get("finalizers") or []
        status = va.get("status") or {}
        if md.get("deletionTimestamp"):
            if self.finalizer in finalizers:
                if status.get("attached"):
                    va = await self._status(name, {"attached": False, "attachmentMetadata": None, "detachError": None})
                await self._finalizers(va, [f for f in finalizers if f != self.finalizer])
            return
        if self.finalizer not in finalizers:  # before publishing, so a detach always reaches the driver
            va = await self._finalizers(va, [*finalizers, self.finalizer])
        if status.get("attached"):
            return
        try:
            await self._publish(va)
        except PublishError as e:
            await self._status(name, {"attachError": {"message": str(e), "time": self.clock.rfc3339()}})
            raise
        await self._status(name, {"attached": True, "attachError": None})

    async def _publish(self, va: dict) -> None:
        """ControllerPublishVolume for a directory: nothing to do once volume and node are found."""
        spec = va.get("spec") or {}
        pv_name = (spec.get("source") or {}).get("persistentVolumeName") or ""
        try:
            pv = await self.pvs.get(pv_name)
            await self.nodes.get(spec.get("nodeName", ""))
        except APIError as e:
            if e.code != 404:
                raise
            raise PublishError(e.message) from None
        csi = (pv.get("spec") or {}).get("csi") or {}
        if csi.get("driver") != self.driver:
            raise PublishError(f"rpc error: code = InvalidArgument desc = volume {pv_name} is not a {self.driver} volume")
        path = (csi.get("volumeAttributes") or {}).get("path") or ""
        if not os.path.isdir(path):
            raise PublishError(f"rpc error: code = NotFound desc = volume {pv_name}: {path} does not exist")

    async def _status(self, name: str, status: dict) -> dict:
        return await self.vas.patch(name, {"status": status}, subresource="status")

    async def _finalizers(self, va: dict, finalizers: list[str]) -> dict:
        md = va["metadata"]
        return await self.vas.patch(md["name"], {"metadata": {"finalizers": finalizers or None,
                                                              "resourceVersion": md["resourceVersion"]}})
