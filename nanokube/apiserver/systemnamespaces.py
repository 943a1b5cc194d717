"""kube-apiserver's system namespaces controller: the namespaces every cluster has are made again,
within a minute, once deleted (a node agent's Lease lives in kube-node-lease, the `kubernetes`
Service in default)."""

from __future__ import annotations

import logging

from ..machinery.errors import APIError
from .background import BackgroundLoop

log = logging.getLogger(__name__)

#: made at the server's first start and kept
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: how often the controller looks (upstream: a minute)
INTERVAL = 60.0


class SystemNamespaces(BackgroundLoop):
    """Creates each system namespace the watch cache does not hold (createNamespaceIfNeeded); one
    still terminating is left until it is gone."""

    def __init__(self, server) -> None:
        self.server = server

    async def _loop(self) -> None:
        while True:
            await self.sync()
            await self.server.clock.sleep(INTERVAL)

    async def sync(self) -> None:
        for name in SYSTEM_NAMESPACES:
            try:
                await self.server.ensure("", "v1", "namespaces", None, {"metadata": {"name": name}})
            except APIError as e:
                log.warning("unable to create required kubernetes system Namespace %s: %s", name, e.message)
