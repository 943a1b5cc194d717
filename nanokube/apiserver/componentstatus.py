"""The objects behind `kubectl get componentstatuses`.

kube-apiserver probes the scheduler's and controller-manager's /healthz on
their well-known local ports and etcd's health. nanokube's scheduler and
controller-manager run in this process or anywhere else with a kubeconfig, so
their health is read from what both always do: renew their leader-election
Lease in kube-system. etcd-0 is the store (SQLite, memory or etcd) answering.
Objects are written only when a component's health changes.
"""

from __future__ import annotations

from ..clock import parse_time
from ..client.informer import Informer
from ..controllers.base import Controller
from ..machinery.errors import APIError

COMPONENTS = {"scheduler": "kube-scheduler", "controller-manager": "kube-controller-manager"}
STORE = "etcd-0"
KEY = "componentstatuses"
RECHECK = 10.0


def status_object(name: str, healthy: bool, message: str, error: str) -> dict:
    cond = {"type": "Healthy", "status": "True" if healthy else "False", "message": message}
    if error:
        cond["error"] = error
    return {"metadata": {"name": name}, "conditions": [cond]}


def lease_health(lease: dict | None, lease_name: str, now: float) -> tuple[bool, str, str]:
    spec = (lease or {}).get("spec") or {}
    renew = spec.get("renewTime")
    if spec.get("holderIdentity") and renew and parse_time(renew) + spec.get("leaseDurationSeconds", 15) >= now:
        return True, "ok", ""
    return False, "", f"no holder renewed the kube-system/{lease_name} lease within its duration"


class ComponentStatuses(Controller):
    name = "componentstatus"

    def __init__(self, client, store, **kw):
        super().__init__(client, **kw)
        self.store = store
        self.leases = client.resource("coordination.k8s.io", "v1", "leases")
        self.statuses = client.resource("", "v1", "componentstatuses")
        self.lease_inf = Informer(self.leases, namespace="kube-system", clock=self.clock)
        self.lease_inf.add_handlers(self._changed, lambda old, new: self._changed(new), self._changed)

    def informers(self):
        return [self.lease_inf]

    def _changed(self, lease: dict) -> None:
        if lease["metadata"]["name"] in COMPONENTS.values():
            self.queue.add(KEY)

    async def start(self) -> None:
        await super().start()
        self.queue.add(KEY)

    async def _current(self) -> list[dict]:
        now = self.clock.now()
        out = []
        for name, lease_name in COMPONENTS.items():
            lease = self.lease_inf.get(f"kube-system/{lease_name}")
            out.append(status_object(name, *lease_health(lease, lease_name, now)))
        try:
            await self.store.current_revision()
            out.append(status_object(STORE, True, '{"health":"true","reason":""}', ""))
        except Exception as e:  # the store's own error is the message
            out.append(status_object(STORE, False, "", str(e)))
        return out

    async def sync(self, key: str) -> None:
        self.queue.add_after(KEY, RECHECK)
        for want in await self._current():
            name = want["metadata"]["name"]
            try:
                have = await self.statuses.get(name)
            except APIError as e:
                if e.code != 404:
                    raise
                await self.statuses.create(want)
                continue
            if have.get("conditions") != want["conditions"]:
                await self.statuses.update({**have, "conditions": want["conditions"]})
