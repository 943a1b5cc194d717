"""Validation of backoffLimitPerIndex, maxFailedIndexes, the FailIndex
action and status.failedIndexes, with upstream's field paths and messages."""

import copy

import pytest

from tests.registry.test_batch import STRATEGY, _pod_rules, created, job  # noqa: F401  (autouse fixture)

FAIL_INDEX = {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}]}


def indexed(**spec):
    return job(completionMode="Indexed", completions=4, parallelism=2, **spec)


def problems(obj):
    return {(e.reason, e.field, e.detail) for e in STRATEGY.validate(obj)}


@pytest.mark.parametrize("spec, want", [
    (indexed(backoffLimitPerIndex=1, maxFailedIndexes=4, podFailurePolicy=FAIL_INDEX), set()),
    (indexed(backoffLimitPerIndex=0, maxFailedIndexes=0), set()),
    (job(backoffLimitPerIndex=1),
     {("FieldValueInvalid", "spec.backoffLimitPerIndex", "requires indexed completion mode")}),
    (job(backoffLimitPerIndex=1, maxFailedIndexes=1, completionMode="NonIndexed"),
     {("FieldValueInvalid", "spec.backoffLimitPerIndex", "requires indexed completion mode"),
      ("FieldValueInvalid", "spec.maxFailedIndexes", "requires indexed completion mode")}),
    (indexed(maxFailedIndexes=1),
     {("FieldValueRequired", "spec.backoffLimitPerIndex", "when maxFailedIndexes is specified")}),
    (indexed(backoffLimitPerIndex=1, maxFailedIndexes=5),
     {("FieldValueInvalid", "spec.maxFailedIndexes", "must be less than or equal to completions")}),
    (job(completionMode="Indexed", completions=200_000, parallelism=10, backoffLimitPerIndex=1,
         maxFailedIndexes=100_001),
     {("FieldValueInvalid", "spec.maxFailedIndexes", "must be less than or equal to 100000")}),
    (indexed(backoffLimitPerIndex=-1, maxFailedIndexes=-1),
     {("FieldValueInvalid", "spec.backoffLimitPerIndex", "must be greater than or equal to 0"),
      ("FieldValueInvalid", "spec.maxFailedIndexes", "must be greater than or equal to 0")}),
    (indexed(podFailurePolicy=FAIL_INDEX),
     {("FieldValueInvalid", "spec.podFailurePolicy.rules[0].action", "requires the backoffLimitPerIndex to be set")}),
    (job(completionMode="Indexed", completions=200_000, parallelism=20_000, backoffLimitPerIndex=1),
     {("FieldValueInvalid", "spec.parallelism", ("must be less than or equal to 10000 when completions are above "
                                                  "100000 and used with backoff limit per index")),
      ("FieldValueRequired", "spec.maxFailedIndexes", ("must be specified when completions are above 100000 "
                                                       "and used with backoff limit per index"))}),
])
def test_spec_rules(spec, want):
    assert problems(created(spec)) == want


def test_backoff_limit_defaults_to_max_int32_with_per_index():
    assert created(indexed(backoffLimitPerIndex=1))["spec"]["backoffLimit"] == 2**31 - 1
    assert created(indexed(backoffLimitPerIndex=1, backoffLimit=3))["spec"]["backoffLimit"] == 3


def test_per_index_fields_are_immutable():
    old = created(indexed(backoffLimitPerIndex=1, maxFailedIndexes=2))
    new = copy.deepcopy(old)
    new["spec"]["backoffLimitPerIndex"] = 2
    new["spec"]["maxFailedIndexes"] = 3
    fields = {(e.reason, e.field) for e in STRATEGY.validate_update(new, old)}
    assert ("FieldValueInvalid", "spec.backoffLimitPerIndex") in fields
    assert not any(f == "spec.maxFailedIndexes" for _, f in fields)


@pytest.mark.parametrize("spec, old_status, status, want", [
    (indexed(backoffLimitPerIndex=1), {}, {"completedIndexes": "0,2", "failedIndexes": "1,3"}, set()),
    (indexed(backoffLimitPerIndex=1), {}, {"failedIndexes": ""}, set()),
    (indexed(backoffLimitPerIndex=1), {}, {"failedIndexes": "1-4"},
     {("status.failedIndexes", 'error parsing failedIndexes: too large index: "4"')}),
    (indexed(backoffLimitPerIndex=1), {}, {"failedIndexes": "2,1"},
     {("status.failedIndexes", "error parsing failedIndexes: non-increasing order, previous: 2, current: 1")}),
    (indexed(backoffLimitPerIndex=1), {}, {"completedIndexes": "0-2", "failedIndexes": "2-3"},
     {("status.failedIndexes", "failedIndexes and completedIndexes overlap at index: 2")}),
    (indexed(), {}, {"failedIndexes": "1"},
     {("status.failedIndexes", "cannot set non-null failedIndexes when backoffLimitPerIndex is null")}),
    (job(completions=2), {}, {"completedIndexes": "0"},
     {("status.completedIndexes", "cannot set non-empty completedIndexes when non-indexed completion mode")}),
    (indexed(), {}, {"completedIndexes": "x"},
     {("status.completedIndexes", 'error parsing completedIndexes: cannot convert string to integer for index: "x"')}),
    # the overlap is found interval by interval, skipping those that do not parse (fuzz50: "," was a 500)
    (indexed(backoffLimitPerIndex=1), {}, {"completedIndexes": "0", "failedIndexes": ","},
     {("status.failedIndexes", 'error parsing failedIndexes: cannot convert string to integer for index: ""')}),
    (indexed(backoffLimitPerIndex=1), {}, {"completedIndexes": "0,x,3", "failedIndexes": "1-2,y,3"},
     {("status.completedIndexes", 'error parsing completedIndexes: cannot convert string to integer for index: "x"'),
      ("status.failedIndexes", 'error parsing failedIndexes: cannot convert string to integer for index: "y"'),
      ("status.failedIndexes", "failedIndexes and completedIndexes overlap at index: 3")}),
    (job(completionMode="Indexed", completions=2**31 - 1, parallelism=1, backoffLimitPerIndex=1), {},
     {"completedIndexes": "5-2147483646", "failedIndexes": "0-4,7-9"},  # (two billion indexes were made a set)
     {("status.failedIndexes", "failedIndexes and completedIndexes overlap at index: 7")}),
    # unchanged values written before these rules are left alone
    (indexed(backoffLimitPerIndex=1), {"failedIndexes": "9"}, {"failedIndexes": "9", "failed": 1}, set()),
])
def test_status_rules(spec, old_status, status, want):
    old = created(spec)
    old["status"] = old_status
    new = copy.deepcopy(old)
    new["status"] = status
    got = {(e.field, e.detail) for e in STRATEGY.validate_status_update(new, old)}
    assert got == want
