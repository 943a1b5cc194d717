"""PV protection: removes `kubernetes.io/pv-protection` from a deleting
PersistentVolume once no claim is bound to it (phase other than Bound)."""

from __future__ import annotations

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from ..volume.binding import PV_PROTECTION
from .base import Controller


class PVProtectionController(Controller):
    name = "persistentvolume-protection-controller"
    aliases = ("pv-protection",)
    queue_name = "pvprotection"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.pvs = client.resource("", "v1", "persistentvolumes")
        self.volumes = self.informer_factory.informer(self.pvs)
        self.volumes.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    def informers(self):
        return [self.volumes]

    def _enqueue(self, pv: dict) -> None:
        if pv["metadata"].get("deletionTimestamp"):
            self.queue.add(pv["metadata"]["name"])

    async def sync(self, key: str) -> None:
        pv = self.volumes.get(key)
        if pv is None or not pv["metadata"].get("deletionTimestamp"):
            return
        md = pv["metadata"]
        finalizers = md.get("finalizers") or []
        if PV_PROTECTION not in finalizers or (pv.get("status") or {}).get("phase") == "Bound":
            return
        # an update, as upstream's removeFinalizer (its role may update volumes, not patch them)
        body = {**pv, "metadata": {**md, "finalizers": [f for f in finalizers if f != PV_PROTECTION]}}
        try:
            await self.pvs.update(body)
        except APIError as e:
            if e.code != 404:
                raise
