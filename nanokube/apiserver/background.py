"""The API server's own background loops (the `kubernetes` Service, the identity Lease, node port
repair): one task each, from `start` until `stop`."""

from __future__ import annotations

import asyncio


class BackgroundLoop:
    """Runs `_loop` as a task from `start` until `stop` cancels it."""

    _task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        raise NotImplementedError
