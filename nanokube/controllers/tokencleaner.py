"""kube-controller-manager's tokencleaner (off by default; kubeadm turns it on): a bootstrap token's
Secret is deleted once its expiration has passed, so the token stops working for good, and one
still live is looked at again the moment it expires. A Secret whose expiration does not parse is
deleted as expired, as upstream's. It watches kube-system's bootstrap token Secrets and deletes as
the token-cleaner, whose Role there may."""

from __future__ import annotations

import logging

from ..clock import REAL, Clock
from ..client.informer import InformerFactory
from ..machinery import bootstraptoken as bt
from ..machinery.errors import APIError
from .bootstraptoken import BootstrapTokenController

log = logging.getLogger(__name__)


class TokenCleanerController(BootstrapTokenController):
    name = "token-cleaner-controller"
    aliases = ("tokencleaner",)
    queue_name = "token_cleaner"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.secret_inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    def informers(self):
        return [self.secret_inf]

    def _enqueue(self, secret: dict) -> None:
        self.queue.add(f"{bt.NAMESPACE}/{secret['metadata']['name']}")

    async def sync(self, key: str) -> None:
        secret = self.secret_inf.get(key)
        if secret is None:
            return
        at = bt.expiration(secret)
        if at is None:
            return
        left = at - self.clock.now()
        if left >= 0:
            self.queue.add_after(key, left + 0.001)  # (past it: expired means after the stamp)
            return
        log.info("deleting expired bootstrap token %s", key)
        try:
            await self.secrets.delete(secret["metadata"]["name"], bt.NAMESPACE,
                                      preconditions={"uid": secret["metadata"]["uid"]})
        except APIError as e:
            if e.code not in (404, 409):  # gone, or another Secret of the name since
                raise
