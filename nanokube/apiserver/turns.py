"""Writes of one object that lost a race with another write take turns.

A patch, an update naming no resourceVersion and a delete that find the object changed since they
read it are made again on the newer object, as upstream's GuaranteedUpdate makes them. With N
clients writing one object at once, every loser of a round tried again at once, after the commit
that beat it: all of them read the same newer object and all but one lost again, so a write lost
about N rounds (N² work for N writes), and one that lost PATCH_ATTEMPTS rounds was refused with a
409 (scripts/race.py: 8 patches without a resourceVersion in a minute, 48 clients of which 6 patched
one ConfigMap). Now a write that lost waits for the writes of its object that lost before it, one
at a time, as do the writes that come while they do, so the one whose turn it is competes with
none of them (only with writes of other kinds: an update naming a resourceVersion, a subresource's,
another worker's). Upstream's retries are not ordered (each takes etcd's current object at once and
tries again); every write is still a compare-and-swap, so no guarantee changes, and a write of a key
that nobody else writes at once takes no turn.

A turn is for the read, the change and the compare-and-swap, which is what upstream's
GuaranteedUpdate retries: a write sets its turn aside while a webhook may be answering its admission
(`set_aside`, `take_back`; upstream's webhook calls happen in each try too, but hold no one else), so
a slow webhook holds no other writer of the key, and a webhook that itself writes the object does not
wait for the turn of the write that called it. A write waits at most WAIT for its turn, then tries
without one, competing as upstream's retries do.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar

from ..clock import Clock

#: the turn that the write running in this task holds, or has set aside (None: none)
HELD: ContextVar[Turn | None] = ContextVar("turn", default=None)

#: seconds a write waits for its turn (a storm's queue passes in ~0.1 s: 24 writers of one object)
WAIT = 1.0


class Turns:
    """The writes of each key that lost a race (`of` a key: one write's `Turn`)."""

    def __init__(self, clock: Clock | None = None) -> None:
        #: per key: its lock, and how many writes hold or wait for it
        self._keys: dict[str, list] = {}
        self.clock = clock or Clock()

    def of(self, key: str) -> Turn:
        return Turn(self, key)


class Turn:
    """One write's place among the writes of its key that lost a race: taken at its first loss
    (`lost`), kept for its later tries, given up when the write ends (`done`)."""

    __slots__ = ("_turns", "_key", "_joined", "_holds", "_aside", "_token")

    def __init__(self, turns: Turns, key: str) -> None:
        self._turns, self._key = turns, key
        self._joined = self._holds = self._aside = False
        self._token = None

    @property
    def taken(self) -> bool:
        """Whether writes of this key take turns now: a write's first try then waits for its turn
        too (`lost`), as a first try that read the object sooner than the write whose turn it is
        would win (that one reads it a loop turn after each commit, once the cache has it: it lost
        every round to the other clients' first tries)."""
        return self._key in self._turns._keys

    async def lost(self) -> None:
        """The write lost a round: returns once it is its turn to try again, or WAIT later without
        one (its later tries then do not wait)."""
        if self._joined:
            return
        keys = self._turns._keys
        entry = keys.get(self._key)
        if entry is None:
            entry = keys[self._key] = [asyncio.Lock(), 0]
        entry[1] += 1
        self._joined = True
        await self._wait(entry[0])
        if self._holds:
            self._token = HELD.set(self)

    async def _wait(self, lock: asyncio.Lock) -> None:
        """Waits up to WAIT for `lock`; `_holds` says whether it was taken."""
        waiting = asyncio.ensure_future(lock.acquire())
        timer = self._turns.clock.call_later(WAIT, waiting.cancel)
        try:
            await asyncio.wait((waiting,))
        finally:  # (also when the request is cancelled: a lock acquired meanwhile is released by `done`)
            timer.cancel()
            waiting.cancel()  # a no-op once acquired; an acquire cancelled leaves the lock to the next
            self._holds = waiting.done() and not waiting.cancelled()

    def set_aside(self) -> None:
        """The write waits on something outside the server (a webhook): the next write of its key
        takes the turn meanwhile."""
        if self._holds:
            self._turns._keys[self._key][0].release()
            self._holds, self._aside = False, True

    async def take_back(self) -> None:
        """After `set_aside`: waits for the turn again (WAIT at most, as `lost`)."""
        if self._aside:
            self._aside = False
            await self._wait(self._turns._keys[self._key][0])

    @property
    def joined(self) -> bool:
        """Whether the write has waited for a turn (what it read before may be stale by now)."""
        return self._joined

    async def __aenter__(self) -> Turn:
        """A write's start: where writes of its key take turns (`taken`), its first try waits too."""
        if self.taken:
            await self.lost()
        return self

    async def __aexit__(self, *exc) -> None:
        self.done()

    def done(self) -> None:
        if not self._joined:
            return
        keys = self._turns._keys
        entry = keys[self._key]
        if self._holds:
            entry[0].release()
        entry[1] -= 1
        if not entry[1]:
            del keys[self._key]
        if self._token is not None:
            HELD.reset(self._token)
            self._token = None
        self._joined = self._holds = self._aside = False
