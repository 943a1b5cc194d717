"""The kubelet's CSIDriver lister (its informer factory's csiDriverInformer): whether a CSI volume
needs attaching, and the driver's fsGroupPolicy, are read from one watch of the CSIDriver objects,
not a GET at each mount try. The watch starts at the node's first CSI volume, so a node (or a
simulation of thousands) that mounts none keeps none open."""

from __future__ import annotations

import asyncio
import contextlib

from ...client.informer import Informer
from ...clock import REAL, Clock
from .watch_based_manager import read, synced_within


class CSIDriverLister:
    def __init__(self, client, clock: Clock = REAL):
        self.clock = clock
        self.rc = client.resource("storage.k8s.io", "v1", "csidrivers")
        self._informer = Informer(self.rc, clock=clock)
        self._task: asyncio.Task | None = None

    async def get(self, name: str) -> dict | None:
        """The CSIDriver as the watch last saw it (None: there is none); read from the server
        while the watch has not listed within its SYNC_WAIT."""
        if self._task is None:
            self._task = asyncio.create_task(self._informer.run())
        if await synced_within(self._informer, self.clock):
            return self._informer.get(name)
        return await read(self.rc, name)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
