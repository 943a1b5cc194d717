"""NVIDIA's best-effort policy for GetPreferredAllocation, as go-gpuallocator walks it."""

import random
from itertools import combinations

import pytest

from nanokube.node.devicemanager.besteffort import allocate, pair_score

GPUS = ["a", "b", "c", "d"]


def test_without_topology_the_first_gpus_in_the_kubelets_order_win():
    assert allocate(GPUS, [], 2, {}) == ["a", "b"]
    assert allocate(["d", "c", "b", "a"], [], 3, {}) == ["d", "c", "b"]


def test_required_gpus_are_grouped_in_the_first_partition_holding_them_whole():
    # [[a, b], [c, d]] is the first partition walked with c in a whole set
    assert allocate(GPUS, ["c"], 2, {}) == ["c", "d"]
    assert allocate(GPUS, ["b", "d"], 2, {}) == ["b", "d"]
    assert allocate(GPUS, ["a", "d"], 3, {}) == ["a", "b", "d"]


def test_gpus_on_one_numa_node_are_preferred():
    numa = {"a": 0, "b": 1, "c": 0, "d": 1}
    assert allocate(GPUS, [], 2, numa) == ["a", "c"]
    assert allocate(GPUS, ["b"], 2, numa) == ["b", "d"]
    # the partition of two whole NUMA nodes, then its first set
    assert allocate([*GPUS, "e", "f"], [], 3, {**numa, "e": 0, "f": 1}) == ["a", "c", "e"]


def test_a_gpu_without_a_numa_node_scores_nothing_with_the_others():
    assert allocate(GPUS, [], 2, {"a": 0, "b": None, "c": 1, "d": 0}) == ["a", "d"]


@pytest.mark.parametrize("available, required, size", [(GPUS, [], 0), (GPUS, [], 5), (GPUS, ["a", "b", "c"], 2)])
def test_no_answer_where_the_policy_has_none(available, required, size):
    assert allocate(available, required, size, {}) == []


def walked(available, required, size, numa):
    """go-gpuallocator's Allocate as it is written: every partition walked, the first with the
    highest total kept (the reference the answers are checked against)."""
    def set_score(s):
        return sum(pair_score(numa.get(a) if a else None, numa.get(b) if b else None) for a, b in combinations(s, 2))

    def partitions(left, accum):
        if len(left) == size:
            yield [*accum, left]
            return
        for rest in combinations(left[1:], size - 1):
            chosen = [left[0], *rest]
            if chosen.count(None) in (0, padding):
                yield from partitions([d for d in left if d not in chosen], [*accum, chosen])

    if size <= 0 or len(available) < size or len(required) > size:
        return []
    need = set(required)
    padded = [*available, *[None] * (-len(available) % size)]
    padding = padded.count(None)
    candidates = ([[d]] for d in available) if size == 1 else partitions(padded, [])
    best, best_score = None, 0
    for candidate in candidates:
        if any(need <= set(s) and None not in s for s in candidate):
            score = sum(set_score(s) for s in candidate)
            if best is None or score > best_score:
                best, best_score = candidate, score
    sets = [s for s in best or [] if need <= set(s)]
    if not sets:
        return []
    chosen = sets[0]
    for s in sets[1:]:
        if set_score(s) > set_score(chosen):
            chosen = s
    return [d for d in chosen if d is not None]


@pytest.mark.parametrize("seed", range(40))
def test_the_answers_are_those_of_the_walk_through_every_partition(seed):
    """Random nodes of up to 10 GPUs on up to three NUMA nodes (some GPUs without one), any size
    asked, with and without required GPUs."""
    rng = random.Random(seed)
    gpus = [f"g{i}" for i in range(rng.randint(2, 10))]
    rng.shuffle(gpus)
    numa = {g: rng.choice([0, 1, 2, None] if seed % 4 == 0 else [0, 1] if seed % 2 else [0, 1, 2]) for g in gpus}
    for size in range(1, len(gpus) + 1):
        for required in ([], rng.sample(gpus, 1), rng.sample(gpus, min(size, 2))):
            assert allocate(gpus, required, size, numa) == walked(gpus, required, size, numa), (size, required)


def test_a_16_gpu_node_is_answered_without_walking_its_partitions():
    """16 GPUs alternating between two NUMA nodes (go-gpuallocator would walk ~2 million
    partitions into pairs, ~6,000 into halves)."""
    gpus = [f"g{i}" for i in range(16)]
    numa = {g: i % 2 for i, g in enumerate(gpus)}
    # the pairs within NUMA nodes, the first of them in the walk's order
    assert allocate(gpus, [], 2, numa) == ["g0", "g2"]
    assert allocate(gpus, ["g3"], 2, numa) == ["g1", "g3"]
    # halves: a whole NUMA node, the required GPU's
    assert allocate(gpus, ["g3"], 8, numa) == gpus[1::2]
    assert allocate(gpus, [], 8, numa) == gpus[0::2]
    # a GPU of each node required: the set holding both, filled from the first NUMA node's
    assert allocate(gpus, ["g0", "g1"], 3, numa) == ["g0", "g1", "g2"]
