"""A controller's own writes, until its informer shows them.

In process the informer hears of a write several turns of the loop after the write returned
(the store's commit, the watch cache, the watcher's queue, the informer's task), while a key
made dirty during a sync (its pods' events) is synced again on the next turn: that sync read the
copy its own write replaced, and its next write from it was a conflict (a wasted write, a requeue
and a warning) every time. The object a write returned is that copy with the write applied, so a
controller reads it instead; whatever anyone writes after it still makes the next write a conflict.
"""

from __future__ import annotations


class OwnWrites:
    """By key: the resourceVersion each write of this controller replaced, to the object it returned."""

    def __init__(self) -> None:
        self._after: dict[str, dict[str, dict]] = {}

    def wrote(self, key: str, before: dict, after: dict) -> None:
        """`before` (the copy written from) became `after` (what the write returned). A write that
        changed nothing (another writer had stored the same status) returns the object at the
        resourceVersion it was sent with: nothing is ahead of the informer then, and an entry from
        a version to itself would keep `latest` going round it for ever."""
        rv = before["metadata"]["resourceVersion"]
        if after["metadata"]["resourceVersion"] != rv:
            self._after.setdefault(key, {})[rv] = after

    def latest(self, key: str, obj: dict | None) -> dict | None:
        """`obj` (the informer's copy) with the writes made from it since applied."""
        chain = self._after.get(key)
        while obj is not None and chain and (after := chain.get(obj["metadata"]["resourceVersion"])) is not None:
            obj = after
        return obj

    def seen(self, key: str, now: dict) -> None:
        """The informer holds `now`: only the writes made from it or from what they returned are
        still ahead of it. The rest are the informer's now, or lost to another writer; a relist
        that skipped versions leaves no entry behind."""
        chain = self._after.pop(key, None)
        rv, ahead = now["metadata"]["resourceVersion"], {}
        while chain and (after := chain.pop(rv, None)) is not None:
            ahead[rv], rv = after, after["metadata"]["resourceVersion"]
        if ahead:
            self._after[key] = ahead

    def forget(self, key: str) -> None:
        self._after.pop(key, None)
