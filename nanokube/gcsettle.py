"""The cycle collector's cadence once a long-lived process has started (`nanokube up`, a simulation run)."""

from __future__ import annotations

import gc

#: the young generation's collection cadence after start-up (CPython's default: every 700 allocations)
YOUNG = 10_000
#: a threshold no run reaches (see `settle`)
NEVER = 1 << 30
#: the full collections' threshold `defer` put aside until `settle`
_deferred: int | None = None


def defer() -> None:
    """From a server's start until `settle`: no full collection. What start-up builds lives as long as
    the server (restarted over 300,000 pods, the informers decode every one: 6.7 M tracked objects), and
    each full collection CPython ran as that heap grew by a quarter walked all of it, finding nothing:
    23 of them, 34-42 s of a 55-66 s start at load 5, the longest 11-14 s with the loop stopped. The
    young generations are collected as before; `settle` freezes what they leave."""
    global _deferred
    young0, young1, _deferred = gc.get_threshold()
    gc.set_threshold(young0, young1, NEVER)


def settle(young_only: bool = False) -> tuple[int, int, int]:
    """Once everything has started: what start-up built (modules, schemas, components, and in a
    simulation every node's objects) lives as long as the run, so it leaves the collector's
    generations (gc.freeze) instead of being rescanned by every full collection, and the young
    generation is collected every 10,000 allocations instead of 700, so a burst of writes (each
    leaving a long-lived object in the watch cache) does not set off a full collection every few
    hundred writes (openb inflation, first 4,000 pods: 16 full collections, 5.7 of 46.7 CPU-s,
    none finding garbage). Reference counting still frees everything acyclic at once; only the
    cycle collector's cadence changes. Returns the thresholds to restore (`restore`).

    `young_only` (a simulation run): the older generations are not collected until `restore`.
    Nearly all a run builds lives until it ends, and each object that survives a young
    collection was walked again by every middle and full one to find little (openb inflation
    1.3, seed 1, gc callbacks at load 7: middle 3.3 CPU-s finding 2,560 objects, full 2.0 CPU-s
    finding none; the whole openb replay: middle 2.0 CPU-s finding 100,000, full 0.6 finding
    8,359; its peak RSS 594 MB with the middle collections, 612 MB without); the young
    collections still free the cycles that die young (the replay's 356,000).

    After `defer` (a server's start-up) only the young generations are collected before the freeze, as
    node/manager.py's: every full collection of a start-up measured found nothing, and one now would walk
    the whole heap (12 s at 300,000 pods) to find nothing again; what start-up left is frozen either way."""
    global _deferred
    before = gc.get_threshold()
    if _deferred is not None:
        before, _deferred = (*before[:2], _deferred), None
        gc.collect(1)
    else:
        gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, *((NEVER, NEVER) if young_only else before[1:]))
    return before


def cancel() -> None:
    """Undoes a `defer` that no `settle` followed: a start-up that stopped early (a refused flag or
    file) gives the process its full collections back, as an in-process caller of `main` goes on."""
    global _deferred
    if _deferred is not None:
        gc.set_threshold(*gc.get_threshold()[:2], _deferred)
        _deferred = None


def restore(thresholds: tuple[int, int, int]) -> None:
    """Undoes `settle`: what was frozen is the collector's again (garbage once a run ends)."""
    gc.unfreeze()
    gc.set_threshold(*thresholds)
