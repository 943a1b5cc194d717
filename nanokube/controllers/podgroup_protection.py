"""PodGroup protection: keeps the `scheduling.k8s.io/podgroup-protection`
finalizer on every PodGroup, and removes it from a deleting one only when
every pod naming it in `spec.schedulingGroup.podGroupName` is terminal or
gone, so a group cannot vanish under its running pods."""

from __future__ import annotations

from ..machinery.podgroups import PODGROUP_PROTECTION
from ..machinery.errors import APIError
from ..machinery.meta import object_key
from ..machinery.podgroups import group_key
from ..machinery.podphase import pod_is_terminal
from .base import Controller


class PodGroupProtectionController(Controller):
    name = "podgroup-protection-controller"
    queue_name = "podgroup_protection"
    feature_gates = ("GenericWorkload",)

    def __init__(self, client, **kw):
        super().__init__(client, **kw)
        self.podgroups = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")
        self.pg_inf = self.informer_factory.informer(self.podgroups)
        self.pod_inf = self.informer_factory.informer(client.resource("", "v1", "pods"))
        self.members: dict[str, dict[str, dict]] = {}  # group key -> pod key -> pod
        self.pg_inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))
        self.pod_inf.add_handlers(on_add=self._observe_pod, on_update=lambda old, new: self._observe_pod(new),
                                  on_delete=self._forget_pod)

    def informers(self):
        return [self.pg_inf, self.pod_inf]

    def _enqueue(self, pg: dict) -> None:
        self.queue.add(object_key(pg))

    def _observe_pod(self, pod: dict) -> None:
        group = group_key(pod)
        if group is None:
            return
        self.members.setdefault(group, {})[object_key(pod)] = pod
        if pod_is_terminal(pod):
            self.queue.add(group)

    def _forget_pod(self, pod: dict) -> None:
        group = group_key(pod)
        if group is None:
            return
        self.members.get(group, {}).pop(object_key(pod), None)
        self.queue.add(group)

    def blocking_pods(self, group: str) -> list[str]:
        """Pods that still keep a deleting group: non-terminal members."""
        return sorted(k for k, p in self.members.get(group, {}).items() if not pod_is_terminal(p))

    async def sync(self, key: str) -> None:
        pg = self.pg_inf.get(key)
        if pg is None:
            return
        md = pg["metadata"]
        finalizers = md.get("finalizers") or []
        if not md.get("deletionTimestamp"):
            if PODGROUP_PROTECTION not in finalizers:
                await self._set_finalizers(pg, finalizers + [PODGROUP_PROTECTION])
            return
        if PODGROUP_PROTECTION in finalizers and not self.blocking_pods(key):
            await self._set_finalizers(pg, [f for f in finalizers if f != PODGROUP_PROTECTION])

    async def _set_finalizers(self, pg: dict, finalizers: list[str]) -> None:
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": pg["metadata"]["resourceVersion"]}}
        try:
            await self.podgroups.patch(pg["metadata"]["name"], body, namespace=pg["metadata"].get("namespace"))
        except APIError as e:
            if e.code != 404:
                raise
