"""Proportional scaling of a Deployment's active ReplicaSets mid-rollout,
with the sizes upstream's algorithm gives."""

from nanokube.controllers.deployment_scale import DESIRED, MAX_REPLICAS, is_scaling_event, scaled_sizes


def rs(name, replicas, desired=None, max_replicas=None, created="2026-01-01T00:00:00Z"):
    ann = {}
    if desired is not None:
        ann[DESIRED] = str(desired)
    if max_replicas is not None:
        ann[MAX_REPLICAS] = str(max_replicas)
    return {"metadata": {"name": name, "annotations": ann, "creationTimestamp": created}, "spec": {"replicas": replicas}}


def dep(replicas, status_replicas=0):
    return {"spec": {"replicas": replicas}, "status": {"replicas": status_replicas}}


NEW = "2026-01-02T00:00:00Z"


def test_a_scaling_event_is_an_active_replicaset_sized_for_another_count():
    assert is_scaling_event(dep(20), [rs("a", 5, desired=10), rs("b", 0, desired=20)])
    assert not is_scaling_event(dep(10), [rs("a", 5, desired=10), rs("b", 0, desired=3)])
    assert not is_scaling_event(dep(10), [rs("a", 5)])


def test_growing_splits_by_size_and_gives_the_leftover_to_the_largest_newest():
    new, old = rs("new", 5, 10, 13, created=NEW), rs("old", 5, 10, 13)
    assert scaled_sizes(dep(20), new, [old], max_surge=3, saturated=False, rolling=True) == {"new": 14, "old": 9}


def test_shrinking_takes_from_each_in_proportion():
    new, old = rs("new", 6, 10, 10, created=NEW), rs("old", 4, 10, 10)
    assert scaled_sizes(dep(5), new, [old], max_surge=0, saturated=False, rolling=True) == {"new": 3, "old": 2}


def test_scaling_to_zero_empties_every_active_replicaset():
    new, old = rs("new", 3, 6, 8, created=NEW), rs("old", 4, 6, 8)
    assert scaled_sizes(dep(0), new, [old], max_surge=0, saturated=False, rolling=True) == {"new": 0, "old": 0}


def test_without_the_ceiling_annotation_the_current_size_is_the_base():
    new, old = rs("new", 2, created=NEW), rs("old", 2)
    assert scaled_sizes(dep(8, status_replicas=4), new, [old], max_surge=0, saturated=False,
                        rolling=True) == {"new": 4, "old": 4}


def test_one_active_replicaset_takes_the_whole_count_and_saturation_empties_the_old():
    assert scaled_sizes(dep(7), rs("new", 3, created=NEW), [rs("old", 0)], 1, False, True) == {"new": 7}
    assert scaled_sizes(dep(7), None, [rs("a", 0), rs("b", 0, created=NEW)], 1, False, True) == {"b": 7}
    new, old = rs("new", 7, 7, 8, created=NEW), rs("old", 2, 5, 6)
    assert scaled_sizes(dep(7), new, [old], 1, saturated=True, rolling=True) == {"old": 0}
    assert scaled_sizes(dep(9), new, [old], 1, saturated=False, rolling=False) == {}
