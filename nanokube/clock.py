"""Injected time. Components read time and wait only through a Clock, so the
same code runs in real time under `nanokube up` and in virtual time in
simulation."""

from __future__ import annotations

import asyncio
import datetime as _dt
import time


class Clock:
    def now(self) -> float:
        """Seconds since the epoch."""
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def rfc3339(self, t: float | None = None) -> str:
        """Kubernetes' metav1.Time form: second precision, UTC, `Z` suffix."""
        return format_time(self.now() if t is None else t)

    def rfc3339_micro(self, t: float | None = None) -> str:
        """metav1.MicroTime form, used by Leases and events.k8s.io."""
        t = self.now() if t is None else t
        return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_time(t: float) -> str:
    """metav1.Time text of `t`; the last second's text is kept, since every
    write in that second (managedFields, conditions, events) asks for it."""
    sec = int(t)
    if sec != _last[0]:
        _last[:] = sec, _dt.datetime.fromtimestamp(sec, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return _last[1]


_last: list = [None, ""]


def parse_time(s: str) -> float:
    """Parse RFC3339 (with or without fraction); returns epoch seconds."""
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    return _dt.datetime.fromisoformat(s).timestamp()


REAL = Clock()
