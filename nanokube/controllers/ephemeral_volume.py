"""The ephemeral volume controller: a pod's generic ephemeral volume
(`ephemeral.volumeClaimTemplate`) becomes the claim `<pod>-<volume>`, owned by
the pod (so the garbage collector removes it with the pod), with the
template's labels, annotations and spec."""

from __future__ import annotations

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from .base import Controller
from ..client.record import CoreEventRecorder


def ephemeral_claims(pod: dict) -> list[tuple[str, dict]]:
    """(claim name, volumeClaimTemplate) of each generic ephemeral volume."""
    name = pod["metadata"]["name"]
    return [(f"{name}-{v['name']}", v["ephemeral"].get("volumeClaimTemplate") or {})
            for v in (pod.get("spec") or {}).get("volumes") or [] if v.get("ephemeral")]


def owned_by(pvc: dict, pod: dict) -> bool:
    uid = pod["metadata"].get("uid")
    return any(r.get("uid") == uid and r.get("controller") for r in pvc["metadata"].get("ownerReferences") or [])


class EphemeralVolumeController(Controller):
    name = "ephemeral-volume-controller"
    queue_name = "ephemeral_volume"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.pvcs = client.resource("", "v1", "persistentvolumeclaims")
        self.pods = self.informer_factory.informer(client.resource("", "v1", "pods"))
        self.claims = self.informer_factory.informer(self.pvcs)
        self.recorder = CoreEventRecorder(client, self.name, clock)
        self.pods.add_handlers(on_add=self._pod, on_update=lambda old, new: self._pod(new))
        self.claims.add_handlers(on_delete=self._claim_gone)

    def informers(self):
        return [self.claims, self.pods]

    def _pod(self, pod: dict) -> None:
        """enqueuePod: a pod with a generic ephemeral volume, unless it is being deleted."""
        md = pod["metadata"]
        if md.get("deletionTimestamp"):
            return
        for v in (pod.get("spec") or {}).get("volumes") or ():
            if v.get("ephemeral"):
                self.queue.add(f"{md['namespace']}/{md['name']}")
                return

    def _claim_gone(self, pvc: dict) -> None:
        for ref in pvc["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Pod" and ref.get("controller"):
                self.queue.add(f"{pvc['metadata']['namespace']}/{ref.get('name')}")

    async def sync(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        ns = pod["metadata"]["namespace"]
        for name, template in ephemeral_claims(pod):
            if self.claims.get(f"{ns}/{name}") is not None:
                continue
            tmd = template.get("metadata") or {}
            claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": name, "namespace": ns, "ownerReferences": [{
                         "apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                         "uid": pod["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
                     "spec": dict(template.get("spec") or {})}
            for f in ("labels", "annotations"):
                if tmd.get(f):
                    claim["metadata"][f] = dict(tmd[f])
            try:
                await self.pvcs.create(claim)
            except APIError as e:
                if e.code == 409:
                    continue
                await self.recorder.emit({"apiVersion": "v1", "kind": "Pod", **pod}, "Warning", "FailedBinding",
                                         f"PVC creation failed: {e.message}")
                raise
