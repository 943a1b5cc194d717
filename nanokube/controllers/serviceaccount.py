"""The ServiceAccounts controller: every active namespace has a `default` ServiceAccount, made
again if deleted. It runs as kube-controller-manager's serviceaccount-controller does, on its own
client (service-account-controller, whose role may only create ServiceAccounts): it learns what
exists from the shared informers, not by asking."""

from __future__ import annotations

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import NAMESPACE_TERMINATING, APIError, has_status_cause
from .base import Controller

#: the accounts every namespace gets
ACCOUNTS = ("default",)


class ServiceAccountsController(Controller):
    name = "serviceaccount-controller"
    aliases = ("serviceaccount",)
    queue_name = "serviceaccount"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.accounts = client.resource("", "v1", "serviceaccounts")
        self.ns_inf = self.informer_factory.informer(client.resource("", "v1", "namespaces"))
        self.sa_inf = self.informer_factory.informer(self.accounts)
        self.ns_inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))
        self.sa_inf.add_handlers(on_delete=lambda sa: self.queue.add(sa["metadata"]["namespace"]))

    def informers(self):
        return [self.ns_inf, self.sa_inf]

    def _enqueue(self, ns: dict) -> None:
        self.queue.add(ns["metadata"]["name"])

    async def sync(self, name: str) -> None:
        ns = self.ns_inf.get(name)
        if ns is None or (ns.get("status") or {}).get("phase", "Active") != "Active":
            return
        for account in ACCOUNTS:
            if self.sa_inf.get(f"{name}/{account}") is not None:
                continue
            try:
                await self.accounts.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                            "metadata": {"name": account, "namespace": name}})
            except APIError as e:
                # already made, or the namespace began terminating meanwhile
                if e.code != 409 and not has_status_cause(e, NAMESPACE_TERMINATING):
                    raise
