import pytest

from nanokube.machinery.errors import APIError
from nanokube.machinery.selectors import (
    matches_fields,
    matches_labels,
    parse_field_selector,
    parse_label_selector,
    selector_from_object,
    selector_to_string,
)

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    "sel,want",
    [
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("tier in (front,back)", True),
        ("tier in (back)", False),
        ("missing in (x)", False),
        ("env notin (dev,test)", True),
        ("env notin (prod)", False),
        ("missing notin (x)", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier in (front),!missing,env", True),
        ("app=web,tier=back", False),
        ("  app = web ,  tier  in ( front , back ) ", True),
    ],
)
def test_label_selector_operators(sel, want):
    assert matches_labels(parse_label_selector(sel), LABELS) is want


def test_label_selector_parses_requirements():
    assert parse_label_selector("a=b,c!=d,e in (x,y),f notin (z),g,!h") == [
        ("a", "=", ("b",)), ("c", "!=", ("d",)), ("e", "in", ("x", "y")),
        ("f", "notin", ("z",)), ("g", "exists", ()), ("h", "!", ()),
    ]


def test_empty_value_matches_only_a_present_empty_label():
    reqs = parse_label_selector("a=")
    assert reqs == [("a", "=", ("",))]
    assert matches_labels(reqs, {"a": ""})
    assert not matches_labels(reqs, {})
    assert not matches_labels(reqs, {"a": "x"})


@pytest.mark.parametrize("sel", ["a in x", "a in (x", "a b", "!", "a=b c", "a=b,,=c", "a in ()", "a notin ( )"])
def test_label_selector_syntax_errors_are_400(sel):
    with pytest.raises(APIError) as e:
        parse_label_selector(sel)
    assert e.value.code == 400
    assert "unable to parse requirement" in e.value.message


def test_selector_object_set_based():
    sel = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "back"]},
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "env", "operator": "Exists"},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    reqs = selector_from_object(sel)
    assert matches_labels(reqs, LABELS)
    assert not matches_labels(reqs, {**LABELS, "canary": "1"})
    assert not matches_labels(reqs, {**LABELS, "env": "dev"})
    assert selector_to_string(sel) == "app=web,tier in (back,front),env notin (dev),env,!canary"
    assert matches_labels(parse_label_selector(selector_to_string(sel)), LABELS)


def test_selector_object_nil_selects_nothing_empty_selects_everything():
    assert selector_from_object(None) is None
    assert not matches_labels(selector_from_object(None), LABELS)
    assert matches_labels(selector_from_object({}), LABELS)
    assert matches_labels(selector_from_object({}), None)


SUPPORTED = {"metadata.name": lambda o: o["metadata"]["name"], "spec.flag": lambda o: o["spec"].get("flag")}
OBJ = {"metadata": {"name": "x"}, "spec": {"flag": True}}


@pytest.mark.parametrize(
    "sel,want",
    [("metadata.name=x", True), ("metadata.name==x", True), ("metadata.name!=x", False),
     ("metadata.name=y", False), ("spec.flag=true", True), ("metadata.name=x,spec.flag!=false", True)],
)
def test_field_selector(sel, want):
    assert matches_fields(parse_field_selector(sel, SUPPORTED, "Thing", "v1"), OBJ) is want


def test_field_selector_unsupported_label_is_400():
    with pytest.raises(APIError) as e:
        parse_field_selector("spec.other=1", SUPPORTED, "Thing", "v1")
    assert e.value.code == 400
    assert "field label not supported: spec.other" in e.value.message


def test_field_selector_without_operator_is_400():
    with pytest.raises(APIError) as e:
        parse_field_selector("metadata.name", SUPPORTED, "Thing", "v1")
    assert e.value.code == 400
