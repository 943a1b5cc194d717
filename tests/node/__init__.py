"""Shared helpers for the node-agent tests: a clock the test advances by hand, and an API server
whose requests carry it."""

from __future__ import annotations

import contextlib

from nanokube.clock import VirtualClock
from tests.controllers import make_stack


class ManualClock(VirtualClock):
    """The simulator's virtual clock, advanced by the test; `t` is its wall-clock reading,
    which a test may also set on its own (a wall-clock jump, with monotonic time unmoved)."""

    @property
    def t(self) -> float:
        return self.now()

    @t.setter
    def t(self, value: float) -> None:
        self._now = value


@contextlib.asynccontextmanager
async def api_on_manual_clock():
    """An in-process API server (with the kube-node-lease namespace node agents renew their Leases in)
    on a ManualClock: yields the stack and the clock."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    s.rest.clock = clock = ManualClock()
    try:
        yield s, clock
    finally:
        await s.close()
