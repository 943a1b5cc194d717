"""CRD schema patterns as RE2 matches them (apiextensions/regex.py): linear time, Go's semantics,
and RE2's invalid patterns refused when the CRD is written."""

from __future__ import annotations

import copy

import pytest

from nanokube.apiserver.apiextensions.regex import PatternError, compile_pattern
from nanokube.machinery.errors import APIError

from .test_serving import GROUP, SCHEMA, crd, env, established  # noqa: F401 - env is the fixture

DNS = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


@pytest.mark.parametrize("pattern, text, matches", [
    (r"^(a+)+$", "a" * 5000 + "!", False),  # exponential for a backtracking matcher
    (r"^(a|aa)*$", "a" * 5000, True),
    (r"^[0-9]+(Mi|Gi)$", "10Gi", True),
    (r"^[0-9]+(Mi|Gi)$", "10Gi\n", False),  # Go's $ is the end of the text
    (r"(?m)^b$", "a\nb", True),
    (r"abc", "xxabcxx", True),  # a search, not a full match
    (r"^abc", "xxabc", False),
    (r"(?i)^ABC$", "abc", True),
    (r"\bfoo\b", "a foo b", True),
    (r"\bfoo\b", "afoob", False),
    (r"^\w+$", "é", False),  # ASCII classes
    (r"^\d+\z", "123", True),
    (r"a{2,3}", "xaay", True),
    (r"^[^a-c]+$", "xaz", False),
    (r"^.*$", "a\nb", False),
    (r"(?s)^.*$", "a\nb", True),
    (DNS, "a.b-c", True),
    (DNS, "a..b", False),
])
def test_patterns_match_as_go_does(pattern, text, matches):
    assert compile_pattern(pattern).search(text) is matches


@pytest.mark.parametrize("pattern, why", [
    ("(", "missing ), unterminated subpattern"),
    (r"(a)\1", "invalid or unsupported Perl syntax (backreferences)"),
    (r"(?=a)", "invalid or unsupported Perl syntax (lookaround)"),
    (r"a\Z", r"invalid escape sequence: `\Z`"),
    ("a{1001}", "invalid repeat count"),
])
def test_what_re2_cannot_express_is_invalid(pattern, why):
    with pytest.raises(PatternError) as e:
        compile_pattern(pattern)
    assert str(e.value).startswith(f"error parsing regexp: {why}")


def test_unicode_classes_leave_the_pattern_unchecked():
    assert compile_pattern(r"^\p{L}+$") is None


async def test_a_crd_with_an_invalid_pattern_is_refused_and_a_pathological_one_cannot_hang_the_server(env):  # noqa: F811
    bad = crd()
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["s"] = {
        "type": "string", "pattern": "("}
    with pytest.raises(APIError) as e:
        await env.crds.create(bad)
    assert e.value.code == 422
    assert ("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[s].pattern: Invalid value: \"(\": "
            "must be a valid regular expression, but isn't: error parsing regexp: missing )") in e.value.message
    slow = crd()
    schema = slow["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = copy.deepcopy(SCHEMA)
    schema["properties"]["spec"]["properties"]["s"] = {"type": "string", "pattern": "^(a+)+$"}
    await env.crds.create(slow)
    await established(env, f"widgets.{GROUP}")
    widgets = env.stack.client.resource(GROUP, "v1", "widgets")
    with pytest.raises(APIError) as e:  # Python's re took minutes on this (the server's loop with it)
        await widgets.create({"metadata": {"name": "w", "namespace": "default"}, "spec": {"s": "a" * 64 + "!"}})
    assert e.value.code == 422 and "spec.s in body should match '^(a+)+$'" in e.value.message
