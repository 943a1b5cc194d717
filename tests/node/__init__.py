"""Shared helpers for the node-agent tests: a clock the test advances by hand."""

from __future__ import annotations

from nanokube.clock import VirtualClock


class ManualClock(VirtualClock):
    """The simulator's virtual clock, advanced by the test; `t` is its wall-clock reading,
    which a test may also set on its own (a wall-clock jump, with monotonic time unmoved)."""

    @property
    def t(self) -> float:
        return self.now()

    @t.setter
    def t(self, value: float) -> None:
        self._now = value
