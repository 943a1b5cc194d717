"""The cache mutation detector, client-go's (KUBE_CACHE_MUTATION_DETECTOR) for nanokube.

The loopback client hands out the API server's cached objects themselves, and an informer hands
one object to every handler it serves. A component that changes such an object in place changes
the server's cache and every other reader's view, and its following update is then a silent no-op
(the server sees nothing new); over HTTPS the same code works, so the bug shows only in-process.

Off by default: with NANOKUBE_CACHE_MUTATION_DETECTOR=true (the test suite turns it on) each
object handed out is remembered with its JSON and where it came from, and `check` finds those that
changed since. Checks run as objects accumulate (amortized: a few encodes per object), on a write
whose body is such an object (raising at once), at the end of each test (tests/conftest.py) and at
exit (logged: the e2e suite reads the logs of the clusters it starts).
"""

from __future__ import annotations

import atexit
import copy
import logging
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import orjson

log = logging.getLogger(__name__)

ENV = "NANOKUBE_CACHE_MUTATION_DETECTOR"

#: a check runs once this many objects (or half as many as are kept, if more) came in since the last
_BATCH = 1024
#: a reference held by the entry, one by `check`'s loop variable, one by getrefcount's argument
_ONLY_OURS = 3
#: changed fields listed per object
_SHOWN = 8


class CacheMutationError(AssertionError):
    """A shared object was changed in place."""


def _snapshot(obj: Any) -> Any:
    try:
        return orjson.dumps(obj)
    except TypeError:  # not plain JSON (a set, a custom type): compared as a deep copy instead
        return copy.deepcopy(obj)


def _unchanged(obj: Any, snap: Any) -> bool:
    if isinstance(snap, bytes):
        try:
            return orjson.dumps(obj) == snap
        except TypeError:
            return False
    return obj == snap


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _changes(before: Any, after: Any, path: str, out: list[str]) -> None:
    """The paths at which `after` differs from `before` (at most _SHOWN + 1 of them)."""
    if len(out) > _SHOWN:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        at = len(out)
        for k in [*before, *(k for k in after if k not in before)]:
            p = f"{path}.{k}" if path else str(k)
            if k not in after:
                out.append(f"{p}: {_short(before[k])} -> (removed)")
            elif k not in before:
                out.append(f"{p}: (missing) -> {_short(after[k])}")
            else:
                _changes(before[k], after[k], p, out)
        if len(out) == at and list(before) != list(after):
            out.append(f"{path or '(top)'}: keys reordered")
    elif isinstance(before, list) and isinstance(after, list):
        for i, (b, a) in enumerate(zip(before, after)):
            _changes(b, a, f"{path}[{i}]", out)
        for i in range(len(after), len(before)):
            out.append(f"{path}[{i}]: {_short(before[i])} -> (removed)")
        for i in range(len(before), len(after)):
            out.append(f"{path}[{i}]: (missing) -> {_short(after[i])}")
    elif before != after or type(before) is not type(after):
        out.append(f"{path or '(top)'}: {_short(before)} -> {_short(after)}")


def describe(obj: Any, snap: Any, first: str, last: str) -> str:
    """What changed in `obj` since `snap`, and where it was handed out (first and last)."""
    before = orjson.loads(snap) if isinstance(snap, bytes) else snap
    try:
        after = orjson.loads(orjson.dumps(obj))
    except TypeError:
        after = obj
    md = (before.get("metadata") or {}) if isinstance(before, dict) else {}
    kind = before.get("kind", "object") if isinstance(before, dict) else type(before).__name__
    name = f"{md['namespace']}/{md.get('name')}" if md.get("namespace") else md.get("name", "?")
    changed: list[str] = []
    _changes(before, after, "", changed)
    shown = changed[:_SHOWN] + (["..."] if len(changed) > _SHOWN else [])
    origin = first if first == last else f"{first} (first) and {last} (last)"
    return (f"{kind} {name} (resourceVersion {md.get('resourceVersion')}), handed out by {origin}, was changed "
            f"in place (copy it before changing it: it is shared with the cache):\n    " + "\n    ".join(shown))


class MutationDetector:
    """Objects handed out, with their JSON at the time and where they came from."""

    def __init__(self, batch: int = _BATCH):
        self.batch = batch
        #: id(obj) -> [obj, its snapshot, first origin, last origin]; holding obj keeps its id unused
        self._kept: dict[int, list] = {}
        self._since = 0
        #: what checks found (each object once), until `take_found`
        self._found: list[str] = []

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, obj: Any, origin: str) -> None:
        """Remember `obj`, handed out by `origin` (only the origin, when it is remembered already)."""
        kept = self._kept
        e = kept.get(id(obj))
        if e is not None:
            e[3] = origin
            return
        kept[id(obj)] = [obj, _snapshot(obj), origin, origin]
        self._since += 1
        if self._since >= max(self.batch, len(kept) >> 1):
            self.check()

    def keep_all(self, objs, origin: str) -> None:
        for o in objs:
            self.keep(o, origin)

    def check(self) -> list[str]:
        """Compare every remembered object with its snapshot; the changed ones are logged, kept
        for `take_found` and forgotten, as are those nobody but the detector holds any more."""
        self._since = 0
        found = []
        kept = self._kept
        for k, (obj, snap, first, last) in list(kept.items()):
            if not _unchanged(obj, snap):
                found.append(describe(obj, snap, first, last))
                del kept[k]
            elif sys.getrefcount(obj) <= _ONLY_OURS:
                del kept[k]
        for f in found:
            log.error("cache mutation: %s", f)
        self._found.extend(found)
        return found

    def check_write(self, obj: Any) -> None:
        """Raise if the body of a write is a handed-out object changed in place: its write would be
        a no-op in-process (the cache already holds the change) and a real change over HTTPS."""
        entry = self._kept.get(id(obj))
        if entry is not None and entry[0] is obj and not _unchanged(obj, entry[1]):
            del self._kept[id(obj)]
            found = describe(*entry)
            self._found.append(found)  # reported again at the end, should the caller swallow the error
            raise CacheMutationError(found)

    def take_found(self) -> list[str]:
        """A final check; everything found since the last call; then forget everything."""
        self.check()
        found, self._found = self._found, []
        self._kept.clear()
        return found


class KeptStream:
    """A watch stream whose objects the detector remembers."""

    def __init__(self, stream, detector: MutationDetector, origin: str):
        self._stream, self._d, self._origin = stream, detector, origin

    def __aiter__(self) -> AsyncIterator[tuple[str, dict]]:
        return self

    async def __anext__(self) -> tuple[str, dict]:
        typ, obj = await self._stream.__anext__()
        self._d.keep(obj, self._origin)
        return typ, obj

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def caller(depth: int = 2) -> str:
    """file:line of the code that called the caller (`depth` frames up), for an origin."""
    f = sys._getframe(depth)
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def on_in_env() -> bool:
    return os.environ.get(ENV, "").lower() in ("1", "true", "yes")


#: the detector, when on; components look it up on each hand-out (a global load when off)
DETECTOR: MutationDetector | None = None


def enable() -> MutationDetector:
    """Turn the detector on in this process; a last check runs at exit, so a process that the e2e
    suite starts and stops logs what it found (and the suite reads its log)."""
    global DETECTOR
    if DETECTOR is None:
        DETECTOR = MutationDetector()
        atexit.register(DETECTOR.check)
    return DETECTOR


if on_in_env():
    enable()
