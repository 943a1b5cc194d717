"""NVIDIA's best-effort policy for GetPreferredAllocation, as go-gpuallocator walks it."""

import pytest

from nanokube.node.devicemanager.besteffort import allocate

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
