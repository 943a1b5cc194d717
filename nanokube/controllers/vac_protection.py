"""VolumeAttributesClass protection, as upstream's pkg/controller/volume/vacprotection:
a class keeps `kubernetes.io/vac-protection` (StorageObjectInUseProtection admission
puts it on every new one; this controller adds it where it is missing) while a
volume names it in spec.volumeAttributesClassName, or a claim in its spec, its
status.currentVolumeAttributesClassName or its modification's target; a deleting
class no one names loses it, and goes."""

from __future__ import annotations

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from ..volume.binding import VAC_PROTECTION
from .base import Controller


def claim_classes(pvc: dict) -> set[str]:
    """The classes a claim names (getPVCReferencedVACNames)."""
    status = pvc.get("status") or {}
    names = {(pvc.get("spec") or {}).get("volumeAttributesClassName"), status.get("currentVolumeAttributesClassName"),
             (status.get("modifyVolumeStatus") or {}).get("targetVolumeAttributesClassName")}
    return {n for n in names if n}


def volume_classes(pv: dict) -> set[str]:
    name = (pv.get("spec") or {}).get("volumeAttributesClassName")
    return {name} if name else set()


class VACProtectionController(Controller):
    name = "volumeattributesclass-protection-controller"
    queue_name = "vacprotection"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.vacs_rc = client.resource("storage.k8s.io", "v1", "volumeattributesclasses")
        self.vacs = self.informer_factory.informer(self.vacs_rc)
        self.claims = self.informer_factory.informer(client.resource("", "v1", "persistentvolumeclaims"))
        self.volumes = self.informer_factory.informer(client.resource("", "v1", "persistentvolumes"))
        self.vacs.add_handlers(on_add=self._vac, on_update=lambda old, new: self._vac(new))
        for inf, names in ((self.claims, claim_classes), (self.volumes, volume_classes)):
            inf.add_handlers(on_update=lambda old, new, names=names: self._released(names(old) - names(new)),
                             on_delete=lambda obj, names=names: self._released(names(obj)))

    def informers(self):
        return [self.volumes, self.claims, self.vacs]

    def _vac(self, vac: dict) -> None:
        md = vac["metadata"]
        if (VAC_PROTECTION in (md.get("finalizers") or [])) == bool(md.get("deletionTimestamp")):
            self.queue.add(md["name"])  # a deleting class to release, or a live one to protect

    def _released(self, names: set[str]) -> None:
        for name in names:
            self.queue.add(name)

    def _in_use(self, name: str) -> bool:
        return any(name in volume_classes(pv) for pv in self.volumes.list()) or \
            any(name in claim_classes(pvc) for pvc in self.claims.list())

    async def sync(self, key: str) -> None:
        vac = self.vacs.get(key)
        if vac is None:
            return
        md = vac["metadata"]
        finalizers = md.get("finalizers") or []
        if md.get("deletionTimestamp"):
            if VAC_PROTECTION not in finalizers or self._in_use(key):
                return
            finalizers = [f for f in finalizers if f != VAC_PROTECTION]
        elif VAC_PROTECTION in finalizers:
            return
        else:
            finalizers = [*finalizers, VAC_PROTECTION]
        try:  # an update, as upstream's (its role may update classes, not patch them)
            await self.vacs_rc.update({**vac, "metadata": {**md, "finalizers": finalizers}})
        except APIError as e:
            if e.code != 404:
                raise
