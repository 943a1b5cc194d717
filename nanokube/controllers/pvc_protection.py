"""PVC protection: removes `kubernetes.io/pvc-protection` from a deleting
claim only when no scheduled, non-terminal pod of its namespace mounts it, so
a claim cannot vanish under a running pod."""

from __future__ import annotations

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from ..machinery.podphase import pod_is_terminal
from ..volume.binding import PVC_PROTECTION
from .base import Controller, in_turns


def claims_of(pod: dict) -> set[str]:
    """Claims a pod mounts: named ones, and generic ephemeral volumes (`<pod>-<volume>`)."""
    out = set()
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if v.get("persistentVolumeClaim"):
            out.add(v["persistentVolumeClaim"].get("claimName", ""))
        elif v.get("ephemeral"):
            out.add(f"{pod['metadata']['name']}-{v['name']}")
    return out


def uses_claims(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and not pod_is_terminal(pod)


class PVCProtectionController(Controller):
    name = "persistentvolumeclaim-protection-controller"
    aliases = ("pvc-protection",)
    queue_name = "pvcprotection"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.pvcs = client.resource("", "v1", "persistentvolumeclaims")
        self.claims = self.informer_factory.informer(self.pvcs)
        self.pods = self.informer_factory.informer(client.resource("", "v1", "pods"))
        #: the claims being deleted: only they wait on pods, so while there is none a pod event has nothing to do
        self._deleting: set[str] = set()
        self.claims.add_handlers(on_add=self._claim_seen, on_update=lambda old, new: self._claim_seen(new),
                                 on_delete=self._claim_gone)
        self.pods.add_handlers(on_update=self._pod_updated, on_delete=self._pod)

    def informers(self):
        return [self.claims, self.pods]

    def _claim_seen(self, pvc: dict) -> None:
        key = f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}"
        if pvc["metadata"].get("deletionTimestamp"):
            self._deleting.add(key)
            self.queue.add(key)
        else:
            self._deleting.discard(key)

    def _claim_gone(self, pvc: dict) -> None:
        self._deleting.discard(f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}")

    def _pod(self, pod: dict) -> None:
        """The pod's claims that are being deleted."""
        if not self._deleting:
            return
        ns = pod["metadata"].get("namespace")
        for name in claims_of(pod):
            if (key := f"{ns}/{name}") in self._deleting:
                self.queue.add(key)

    def _pod_updated(self, old: dict, pod: dict) -> None:
        """podAddedDeletedUpdated: a scheduled pod that has not finished still uses its claims,
        so its update (most are status writes) cannot release one; an update that replaced the
        pod (another uid under its name) may have released the old one's."""
        if not self._deleting:
            return
        if old["metadata"].get("uid") != pod["metadata"].get("uid"):
            self._pod(old)
        if not uses_claims(pod):
            self._pod(pod)

    async def in_use(self, namespace: str, name: str) -> bool:
        """Whether a pod of the namespace uses the claim, from a pass over its pods in turns (in_turns)."""
        async for part in in_turns(self.pods.list_namespace(namespace)):
            if any(uses_claims(p) and name in claims_of(p) for p in part):
                return True
        return False

    async def sync(self, key: str) -> None:
        pvc = self.claims.get(key)
        if pvc is None or not pvc["metadata"].get("deletionTimestamp"):
            return
        md = pvc["metadata"]
        finalizers = md.get("finalizers") or []
        if PVC_PROTECTION not in finalizers or await self.in_use(md["namespace"], md["name"]):
            return
        # an update, as upstream's removeFinalizer (its role may update claims, not patch them)
        body = {**pvc, "metadata": {**md, "finalizers": [f for f in finalizers if f != PVC_PROTECTION]}}
        try:
            await self.pvcs.update(body)
        except APIError as e:
            if e.code != 404:
                raise
