"""The NVIDIA device plugin's answer to GetPreferredAllocation for whole GPUs: go-gpuallocator's
best-effort policy, which the plugin's alignedAlloc runs over the available GPUs.

Every pair of GPUs scores by the link between them (NVLinks 100 each; on PCIe, from the same
board 60 down to across CPUs 10). The policy partitions all the available GPUs into sets of the
size asked (padded), keeps the first partition with the highest total among those holding a
whole set with every required GPU, and answers that partition's best such set (the first on
ties). A set chosen that way leaves the rest of the node well grouped for the next pods too.

A simulated node knows no NVLinks between its GPUs, only each GPU's NUMA node: two GPUs on one
NUMA node score as NVML's NODE level (P2PLinkSameCPU, 20), on two as SYSTEM (P2PLinkCrossCPU,
10), and a GPU without one scores 0 with every other. With no topology at all every partition
scores 0, so the first one walked wins: the first GPUs in the order the kubelet listed them,
the required ones grouped in. That walk stops there, rather than going through every
partition only to keep the first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations

#: gpulib's P2PLinkSameCPU and P2PLinkCrossCPU scores
SAME_NUMA = 20
CROSS_NUMA = 10


def pair_score(a: int | None, b: int | None) -> int:
    """The score of two GPUs on NUMA nodes `a` and `b` (None: unknown, or padding)."""
    if a is None or b is None:
        return 0
    return SAME_NUMA if a == b else CROSS_NUMA


def _partitions(devices: Sequence[str], size: int) -> Iterator[list[list[str | None]]]:
    """Every partition of `devices` into sets of `size`, in go-gpuallocator's order: padded with
    None to a multiple of `size`, each set's first member in list order, sets holding part of
    the padding skipped."""
    if size == 1:
        for d in devices:
            yield [[d]]
        return
    padded: list[str | None] = [*devices, *[None] * (-len(devices) % size)]
    padding = padded.count(None)

    def walk(left: list[str | None], accum: list[list[str | None]]) -> Iterator[list[list[str | None]]]:
        if len(left) == size:
            yield [*accum, left]
            return
        for rest in combinations(left[1:], size - 1):
            chosen = [left[0], *rest]
            if chosen.count(None) not in (0, padding):
                continue
            yield from walk([d for d in left if d not in chosen], [*accum, chosen])

    yield from walk(padded, [])


def allocate(available: Sequence[str], required: Sequence[str], size: int, numa: dict[str, int | None]) -> list[str]:
    """The preferred `size` GPUs of `available` (in the kubelet's order) holding `required`;
    `numa` gives each GPU's NUMA node. [] where the policy has no answer."""
    if size <= 0 or len(available) < size or len(required) > size:
        return []
    need = set(required)

    def set_score(s: Sequence[str | None]) -> int:
        return sum(pair_score(numa.get(a) if a else None, numa.get(b) if b else None) for a, b in combinations(s, 2))

    scored = sum(numa.get(d) is not None for d in available) > 1
    best: list[list[str | None]] | None = None
    best_score = 0
    for candidate in _partitions(available, size):
        if not any(need <= set(s) and None not in s for s in candidate):
            continue
        score = sum(set_score(s) for s in candidate) if scored else 0
        if best is None or score > best_score:
            best, best_score = candidate, score
        if not scored:
            break
    sets = [s for s in best or [] if need <= set(s)]
    if not sets:
        return []
    chosen = sets[0]
    for s in sets[1:]:
        if set_score(s) > set_score(chosen):
            chosen = s
    return [d for d in chosen if d is not None]
