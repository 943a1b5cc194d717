"""The cycle collector's cadence once a long-lived process has started (`nanokube up`, a simulation run)."""

from __future__ import annotations

import gc

#: the young generation's collection cadence after start-up (CPython's default: every 700 allocations)
YOUNG = 10_000
#: the oldest generation's threshold (collections of the middle one) that no run reaches
NEVER = 1 << 30


def settle(full: bool = True) -> tuple[int, int, int]:
    """Once everything has started: what start-up built (modules, schemas, components, and in a
    simulation every node's objects) lives as long as the run, so it leaves the collector's
    generations (gc.freeze) instead of being rescanned by every full collection, and the young
    generation is collected every 10,000 allocations instead of 700, so a burst of writes (each
    leaving a long-lived object in the watch cache) does not set off a full collection every few
    hundred writes (openb inflation, first 4,000 pods: 16 full collections, 5.7 of 46.7 CPU-s,
    none finding garbage). Reference counting still frees everything acyclic at once; only the
    cycle collector's cadence changes. Returns the thresholds to restore (`restore`).

    `full=False` (a simulation run): no full collection at all until `restore`. Nearly all a
    run builds lives until it ends, so each walked a heap of live objects to find little (openb
    inflation 1.3: the run's two took 0.7 and 1.3 CPU-s at load 7 over 0.66 and 1.14 million
    objects and found nothing; the whole openb replay's one found 8,359 among 574,000); the
    young and middle generations still collect the cycles that die younger (the replay's 427,000)."""
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, before[1], before[2] if full else NEVER)
    return before


def restore(thresholds: tuple[int, int, int]) -> None:
    """Undoes `settle`: what was frozen is the collector's again (garbage once a run ends)."""
    gc.unfreeze()
    gc.set_threshold(*thresholds)
