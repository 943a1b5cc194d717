"""The built-in CSI driver's external-attacher (kubernetes-csi/external-attacher, one per driver
name beside its provisioner): it acts on the VolumeAttachments whose attacher is the driver. The
attach/detach controller makes one only where the driver's CSIDriver asks for attaching
(attachRequired, or no CSIDriver at all), which the one installed with nanokube does not; an
admin who recreates it with `attachRequired: true` gets the whole attach path. ControllerPublish
of a directory needs the volume to be the driver's and not being deleted, its directory and the
node to exist: then the attacher's finalizer `external-attacher/<driver>` on the PersistentVolume
and on the VolumeAttachment, and status.attached (no metadata), else status.attachError with the
reason, tried again with backoff. A deleted one is ControllerUnpublished (nothing to undo for a
directory): attached false, then the finalizer goes, letting the object go. A PersistentVolume
being deleted keeps the finalizer while any VolumeAttachment names it, so it is not gone while
attached somewhere; once the last one went, the attacher takes its finalizer off."""

from __future__ import annotations

import os

from ...client.informer import Informer
from ...clock import REAL, Clock
from ...controllers.base import Controller
from ...volume.attachment import attacher_finalizer

_PV = "persistentVolumeName"


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
        self.attachments = Informer(self.vas, clock=clock)
        self.attachments.add_index(_PV, lambda va: ((va.get("spec") or {}).get("source") or {}).get(_PV))
        self.volumes = Informer(self.pvs, clock=clock)
        #: the Nodes, only read (the external-attacher's node lister): an attach costs no GET of its node
        self.node_lister = Informer(client.resource("", "v1", "nodes"), clock=clock)
        self.attachments.add_handlers(on_add=self._attachment, on_update=lambda old, new: self._attachment(new),
                                      on_delete=self._attachment_gone)
        self.volumes.add_handlers(on_add=self._volume, on_update=lambda old, new: self._volume(new))

    def informers(self):
        return [self.node_lister, self.volumes, self.attachments]

    def _attachment(self, va: dict) -> None:
        if (va.get("spec") or {}).get("attacher") == self.driver:
            self.queue.add(("va", va["metadata"]["name"]))

    def _attachment_gone(self, va: dict) -> None:
        """The volume may be free of attachments now: its finalizer goes if it is being deleted."""
        if pv := ((va.get("spec") or {}).get("source") or {}).get(_PV):
            self.queue.add(("pv", pv))

    def _volume(self, pv: dict) -> None:
        if pv["metadata"].get("deletionTimestamp") and self.finalizer in (pv["metadata"].get("finalizers") or ()):
            self.queue.add(("pv", pv["metadata"]["name"]))

    async def sync(self, key: tuple[str, str]) -> None:
        kind, name = key
        if kind == "pv":
            await self._release(name)
            return
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
                await self._finalizers(self.vas, va, [f for f in finalizers if f != self.finalizer])
            return
        if status.get("attached"):
            return
        try:
            await self._attach(va)
        except PublishError as e:
            await self._status(name, {"attachError": {"message": str(e), "time": self.clock.rfc3339()}})
            raise
        await self._status(name, {"attached": True, "attachError": None})

    async def _attach(self, va: dict) -> None:
        """csiAttach: what can be checked before the VolumeAttachment's finalizer (which would hold
        it back on an error), the PersistentVolume's finalizer first, then ControllerPublishVolume,
        which for a directory only needs it to exist."""
        spec = va.get("spec") or {}
        pv_name = (spec.get("source") or {}).get(_PV) or ""
        pv = self.volumes.get(pv_name)
        if pv is None:
            raise PublishError(f'persistentvolume "{pv_name}" not found')
        if pv["metadata"].get("deletionTimestamp"):
            raise PublishError(f'PersistentVolume "{pv_name}" is marked for deletion')
        csi = (pv.get("spec") or {}).get("csi") or {}
        if csi.get("driver") != self.driver:
            raise PublishError(f"rpc error: code = InvalidArgument desc = volume {pv_name} is not a {self.driver} volume")
        if self.finalizer not in (pv["metadata"].get("finalizers") or ()):
            await self._finalizers(self.pvs, pv, [*(pv["metadata"].get("finalizers") or ()), self.finalizer])
        node = spec.get("nodeName", "")
        if self.node_lister.get(node) is None:  # in the lister's words
            raise PublishError(f'node "{node}" not found')
        finalizers = va["metadata"].get("finalizers") or []
        if self.finalizer not in finalizers:  # before publishing, so a detach always reaches the driver
            await self._finalizers(self.vas, va, [*finalizers, self.finalizer])
        path = (csi.get("volumeAttributes") or {}).get("path") or ""
        if not os.path.isdir(path):
            raise PublishError(f"rpc error: code = NotFound desc = volume {pv_name}: {path} does not exist")

    async def _release(self, name: str) -> None:
        """SyncNewOrUpdatedPersistentVolume: a PersistentVolume being deleted loses the finalizer
        once no VolumeAttachment (of any attacher) names it."""
        pv = self.volumes.get(name)
        if pv is None or not pv["metadata"].get("deletionTimestamp") or \
                self.finalizer not in (pv["metadata"].get("finalizers") or ()) or self.attachments.by_index(_PV, name):
            return
        await self._finalizers(self.pvs, pv, [f for f in pv["metadata"]["finalizers"] if f != self.finalizer])

    async def _status(self, name: str, status: dict) -> dict:
        return await self.vas.patch(name, {"status": status}, subresource="status")

    @staticmethod
    async def _finalizers(rc, obj: dict, finalizers: list[str]) -> dict:
        md = obj["metadata"]
        return await rc.patch(md["name"], {"metadata": {"finalizers": finalizers or None,
                                                        "resourceVersion": md["resourceVersion"]}})
