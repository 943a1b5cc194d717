from nanokube.machinery.conditions import (
    find_condition,
    is_condition_true,
    remove_condition,
    set_condition,
    transition_time,
)

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def _ready(status: str, reason: str = "R", message: str = "m", at: str = T0, **more) -> dict:
    return {"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": at,
            **more}


def test_find_returns_the_first_of_the_type_or_none():
    first, second = _ready("True"), _ready("False")
    conds = [{"type": "Other", "status": "True"}, first, second]
    assert find_condition(conds, "Ready") is first
    assert find_condition(conds, "Missing") is None
    assert find_condition(None, "Ready") is None and find_condition([], "Ready") is None


def test_is_true_needs_the_type_with_status_true():
    assert is_condition_true([_ready("True")], "Ready")
    assert not is_condition_true([_ready("False")], "Ready")
    assert not is_condition_true([_ready("Unknown")], "Ready")
    assert not is_condition_true([{"type": "Other", "status": "True"}], "Ready")
    assert not is_condition_true(None, "Ready")
    assert is_condition_true([_ready("False"), _ready("True")], "Ready")


def test_set_appends_a_new_type_with_its_own_time():
    other = {"type": "Other", "status": "True"}
    out = set_condition([other], _ready("True", at=T1))
    assert out == [other, _ready("True", at=T1)]


def test_set_keeps_the_transition_time_while_the_status_stays():
    old = [_ready("True", at=T0)]
    out = set_condition(old, _ready("True", reason="Other", message="changed", at=T1, observedGeneration=3))
    assert out == [_ready("True", reason="Other", message="changed", at=T0, observedGeneration=3)]


def test_set_moves_the_transition_time_when_the_status_changes():
    out = set_condition([_ready("True", at=T0)], _ready("False", at=T1))
    assert out == [_ready("False", at=T1)]


def test_set_takes_the_new_time_when_the_old_condition_had_none():
    old = [{"type": "Ready", "status": "True"}]
    assert set_condition(old, _ready("True", at=T1))[0]["lastTransitionTime"] == T1


def test_set_keeps_the_position_drops_later_duplicates_and_changes_nothing_given():
    a, b, c = {"type": "A", "status": "True"}, _ready("False", at=T0), {"type": "C", "status": "False"}
    dup = _ready("Unknown", at=T0)
    given = [a, b, c, dup]
    snapshot = [dict(x) for x in given]
    new = _ready("True", at=T1)
    out = set_condition(given, new)
    assert out == [a, _ready("True", at=T1), c]
    assert out[0] is a and out[2] is c
    assert given == snapshot and new == _ready("True", at=T1)


def test_remove_drops_every_condition_of_the_type():
    a = {"type": "A", "status": "True"}
    given = [_ready("True"), a, _ready("False")]
    assert remove_condition(given, "Ready") == [a]
    assert len(given) == 3
    assert remove_condition(None, "Ready") == []


def test_transition_time_is_the_old_one_only_while_the_status_stays():
    assert transition_time(_ready("True", at=T0), "True", T1) == T0
    assert transition_time(_ready("True", at=T0), "False", T1) == T1
    assert transition_time({"type": "Ready", "status": "True"}, "True", T1) == T1
    assert transition_time(None, "True", T1) == T1
