"""The volume expand controller, as upstream's pkg/controller/volume/expand: a
bound claim that asks for more than its status.capacity is noted with an
ExternalExpanding event, since no volume kind nanokube serves is expanded
in-tree: the external resizer of the volume's driver grows it (for the
built-in local-path driver, node/storage/resizer.py). The event is a Warning,
as upstream's is for every volume but Fibre Channel: its plugin lookup among
the expandable in-tree plugins fails."""

from __future__ import annotations

from ..client.informer import InformerFactory
from ..client.record import CoreEventRecorder
from ..clock import REAL, Clock
from ..volume.resize import capacity, requested
from .base import Controller

EXTERNAL_EXPANDING = "waiting for an external controller to expand this PVC"


def _grew(old: dict, new: dict) -> bool:
    """The expand controller's update filter: the request or the capacity went up."""
    def more(a, b):
        return a is not None and (b is None or a > b)
    return more(requested(new), requested(old)) or more(capacity(new), capacity(old))


class ExpandController(Controller):
    name = "persistentvolume-expander-controller"
    aliases = ("persistentvolume-expander",)
    queue_name = "volume_expand"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.claims = self.informer_factory.informer(client.resource("", "v1", "persistentvolumeclaims"))
        self.volumes = self.informer_factory.informer(client.resource("", "v1", "persistentvolumes"))
        self.recorder = CoreEventRecorder(client, "volume_expand", clock)
        self.claims.add_handlers(on_add=self._enqueue,
                                 on_update=lambda old, new: self._enqueue(new) if _grew(old, new) else None)

    def informers(self):
        return [self.volumes, self.claims]

    def _enqueue(self, pvc: dict) -> None:
        self.queue.add(f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}")

    async def sync(self, key: str) -> None:
        pvc = self.claims.get(key)
        if pvc is None:
            return
        pv = self.volumes.get((pvc.get("spec") or {}).get("volumeName") or "")
        ref = ((pv or {}).get("spec") or {}).get("claimRef") or {}
        if pv is None or ref.get("uid") != pvc["metadata"].get("uid"):
            return
        want, have = requested(pvc), capacity(pvc)
        if want is None or have is None or have >= want:
            return
        await self.recorder.emit({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **pvc}, "Warning",
                                 "ExternalExpanding", EXTERNAL_EXPANDING)
