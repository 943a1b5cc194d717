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
the required ones grouped in.

go-gpuallocator walks every partition (NVIDIA's plugin bounds nothing: 16 GPUs in pairs are
~2 million partitions a call). Here the answer is the same without the walk: a set's score
depends only on how many of its GPUs sit on each NUMA node, so the best total of any multiset of
GPUs is a small memoised search over such counts; the first partition of the walk reaching the
best total is then built set by set, each time the set earliest in the walk's order whose counts
leave a remainder that can still reach it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import combinations

#: gpulib's P2PLinkSameCPU and P2PLinkCrossCPU scores
SAME_NUMA = 20
CROSS_NUMA = 10
#: the class of padding in a partition walked (go-gpuallocator pads with nil GPUs)
_PAD = ("pad",)


def pair_score(a: int | None, b: int | None) -> int:
    """The score of two GPUs on NUMA nodes `a` and `b` (None: unknown, or padding)."""
    if a is None or b is None:
        return 0
    return SAME_NUMA if a == b else CROSS_NUMA


def allocate(available: Sequence[str], required: Sequence[str], size: int, numa: dict[str, int | None]) -> list[str]:
    """The preferred `size` GPUs of `available` (in the kubelet's order) holding `required`;
    `numa` gives each GPU's NUMA node. [] where the policy has no answer."""
    if size <= 0 or len(available) < size or len(required) > size or not set(required) <= set(available):
        return []
    need = set(required)
    if size == 1:  # the walk's partitions are then single GPUs, all scoring 0
        return [next(d for d in available if need <= {d})]
    partition = _best_partition(available, need, size, numa)

    def set_score(s: Sequence[str | None]) -> int:
        return sum(pair_score(numa.get(a) if a else None, numa.get(b) if b else None) for a, b in combinations(s, 2))

    sets = [s for s in partition if need <= set(s)]
    chosen = sets[0]
    for s in sets[1:]:
        if set_score(s) > set_score(chosen):
            chosen = s
    return [d for d in chosen if d is not None]


def _best_partition(available: Sequence[str], need: set[str], size: int,
                    numa: dict[str, int | None]) -> list[list[str | None]]:
    """The first partition in go-gpuallocator's walk with the highest total among those with a
    set holding every required GPU and no padding. The walk pads the GPUs with None to a
    multiple of `size`, puts the first GPU left in each next set with the others combined in
    list order, and skips sets with part of the padding."""
    padded: list[str | None] = [*available, *[None] * (-len(available) % size)]

    def class_of(d: str | None) -> tuple:
        return _PAD if d is None else (numa.get(d), d in need)

    # two classes a NUMA node (its GPUs required or not), then those of GPUs without one, and padding
    nodes = sorted({numa.get(d) for d in available} - {None})
    classes = [(v, required) for v in [*nodes, None] for required in (False, True)] + [_PAD]
    index = {c: i for i, c in enumerate(classes)}
    pad = index[_PAD]
    needed = [i for i, c in enumerate(classes) if c != _PAD and c[1]]
    numa_of = [None if c == _PAD else c[0] for c in classes]
    per_node = 2 * len(nodes)

    def counts(devices: Sequence[str | None]) -> tuple[int, ...]:
        out = [0] * len(classes)
        for d in devices:
            out[index[class_of(d)]] += 1
        return tuple(out)

    def score(comp: tuple[int, ...]) -> int:
        known = sum(n for i, n in enumerate(comp) if numa_of[i] is not None)
        by_node: dict[int, int] = {}
        for i, n in enumerate(comp):
            if numa_of[i] is not None:
                by_node[numa_of[i]] = by_node.get(numa_of[i], 0) + n
        return CROSS_NUMA * known * (known - 1) // 2 + (SAME_NUMA - CROSS_NUMA) * sum(
            n * (n - 1) // 2 for n in by_node.values())

    def sets(left: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The counts of each set the walk may take from GPUs counted `left`: all the padding or
        none, and all the required GPUs left (with no padding) or none."""
        out = []

        def fill(i: int, room: int, comp: list[int]) -> None:
            if i == len(left):
                if room == 0:
                    out.append(tuple(comp))
                return
            for n in range(min(left[i], room), -1, -1):
                if i == pad and n not in (0, left[i]):
                    continue
                comp.append(n)
                fill(i + 1, room - n, comp)
                comp.pop()

        fill(0, size, [])
        all_needed = [left[i] for i in needed]
        return [c for c in out if [c[i] for i in needed] in ([0] * len(needed), all_needed)
                and (not any(c[i] for i in needed) or c[pad] == 0)]

    def canonical(left: tuple[int, ...]) -> tuple[int, ...]:
        """`left` with its NUMA nodes in order of their counts: nodes are alike to the score."""
        pairs = sorted(left[i:i + 2] for i in range(0, per_node, 2))
        return (*(n for p in pairs for n in p), *left[per_node:])

    def best(left: tuple[int, ...]) -> int | None:
        """The highest total of a valid partition of GPUs counted `left` (None: there is none)."""
        return _best(canonical(left))

    @functools.cache
    def _best(left: tuple[int, ...]) -> int | None:
        if not any(left):
            return 0
        totals = [score(c) + rest for c in sets(left)
                  if (rest := best(tuple(n - m for n, m in zip(left, c, strict=True)))) is not None]
        return max(totals, default=None)

    partition: list[list[str | None]] = []
    left = padded
    while len(left) > size:
        have = counts(left)
        target = best(have)
        first = index[class_of(left[0])]
        earliest: list[int] | None = None
        for comp in sets(have):
            rest = best(tuple(n - m for n, m in zip(have, comp, strict=True)))
            if comp[first] == 0 or rest is None or score(comp) + rest != target:
                continue
            wanted, picked = list(comp), []
            for i, d in enumerate(left):
                if wanted[index[class_of(d)]]:
                    wanted[index[class_of(d)]] -= 1
                    picked.append(i)
            if earliest is None or picked < earliest:
                earliest = picked
        partition.append([left[i] for i in earliest])
        left = [d for i, d in enumerate(left) if i not in earliest]
    return [*partition, left]
