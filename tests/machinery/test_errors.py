"""errors.invalid builds NewInvalid's Status: a cause per field error, repeats included, and the
message ToAggregate's, each distinct error once; past CAUSES_BUDGET bytes of cause messages,
identical causes collapse too, so errors that each repeat a huge value cannot make a Status
hundreds of times the request's size."""

from nanokube.machinery import errors
from nanokube.machinery.validation import invalid, required


def test_repeated_errors_keep_a_cause_each_within_the_budget():
    scopes = ["Bad", "Worse"]
    errs = [invalid("spec.scopes", scopes, "unsupported scope") for _ in scopes] + [required("spec.hard")]
    st = errors.invalid("", "ResourceQuota", "q", errs).status()
    assert st["code"] == 422 and st["reason"] == "Invalid"
    assert st["message"] == ('ResourceQuota "q" is invalid: [spec.scopes: Invalid value: ["Bad","Worse"]: '
                             'unsupported scope, spec.hard: Required value]')
    cause = {"reason": "FieldValueInvalid", "message": 'Invalid value: ["Bad","Worse"]: unsupported scope',
             "field": "spec.scopes"}
    assert st["details"]["causes"] == [cause, cause, {"reason": "FieldValueRequired",
                                                      "message": "Required value", "field": "spec.hard"}]


def test_identical_causes_collapse_past_the_budget():
    big = [f"s{i:07d}" for i in range(errors.CAUSES_BUDGET // 20)]  # three messages print over the budget
    errs = [invalid("spec.scopes", big, "unsupported scope"), required("spec.hard"),
            invalid("spec.scopes", big, "unsupported scope"), invalid("spec.scopes", big, "other")]
    st = errors.invalid("", "ResourceQuota", "q", errs).status()
    printed = '["' + '","'.join(big) + '"]'
    assert [(c["field"], c["message"]) for c in st["details"]["causes"]] == [
        ("spec.scopes", f"Invalid value: {printed}: unsupported scope"),
        ("spec.hard", "Required value"),
        ("spec.scopes", f"Invalid value: {printed}: other"),
    ]
    assert st["message"] == (f'ResourceQuota "q" is invalid: [spec.scopes: Invalid value: {printed}: unsupported scope, '
                             f'spec.hard: Required value, spec.scopes: Invalid value: {printed}: other]')


def test_causes_of_distinct_fields_are_not_collapsed():
    big = "x" * (errors.CAUSES_BUDGET // 2)  # two messages print over the budget
    errs = [invalid("a", big, "d"), invalid("b", big, "d"), invalid("a", big, "d")]
    causes = errors.invalid("g", "K", "n", errs).status()["details"]["causes"]
    assert [c["field"] for c in causes] == ["a", "b"]
