"""User-supplied patterns as Go's regexp (RE2) matches them, run by google-re2 (machinery/regex.py):
linear time, Go's semantics and syntax (\\p{Greek}, [[:alpha:]]), and what Go refuses refused with
Go's `error parsing regexp: ...` when the CRD is written, over HTTP through the official client."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.machinery.regex import PatternError, compile_pattern, search
from nanokube.cel.errors import CELError
from nanokube.cel.library.regex import _find, _find_all
from tests.served import served

from .test_serving import GROUP, SCHEMA, crd
from tests.controllers import tries

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
    (r"^\w+$", "é", False),  # Perl classes are ASCII
    (r"^.$", "é", True),  # UTF-8: one character, not two bytes
    (r"^\p{Greek}+$", "αβγ", True),
    (r"^\p{Greek}+$", "abc", False),
    (r"^\pL+$", "héllo", True),
    (r"^[[:alpha:]]+$", "abcXYZ", True),
    (r"^[[:alpha:]]+$", "abc1", False),
    (r"^[[:^digit:]]+$", "abc", True),
    (r"^a{,2}$", "a{,2}", True),  # Go and RE2 read {,n} as literal text
    (r"^\d+\z", "123", True),
    (r"\Q*.\E$", "a*.", True),
    (r"a{2,3}", "xaay", True),
    (r"^[^a-c]+$", "xaz", False),
    (r"^.*$", "a\nb", False),
    (r"(?s)^.*$", "a\nb", True),
    (r"^.b$", "\ud800b", True),  # a lone surrogate is U+FFFD, as Go's encoding/json reads it
    (DNS, "a.b-c", True),
    (DNS, "a..b", False),
])
def test_patterns_match_as_go_does(pattern, text, matches):
    assert search(pattern, text) is matches


@pytest.mark.parametrize("pattern, message", [
    ("(a", "missing closing ): `(a`"),
    ("a)", "unexpected ): `a)`"),
    ("+", "missing argument to repetition operator: `+`"),
    ("a**", "invalid nested repetition operator: `**`"),
    ("[a", "missing closing ]: `[a`"),
    ("[z-a]", "invalid character class range: `z-a`"),
    ("[[:foo:]]", "invalid character class range: `[:foo:]`"),
    (r"\p{Foo}", r"invalid character class range: `\p{Foo}`"),
    (r"(a)\1", r"invalid escape sequence: `\1`"),
    (r"a\Z", r"invalid escape sequence: `\Z`"),
    (r"a\C", r"invalid escape sequence: `\C`"),  # RE2's any-byte, which Go lacks
    ("(?=a)", "invalid or unsupported Perl syntax: `(?=`"),
    ("a\\", "trailing backslash at end of expression: ``"),
    ("a{1001}", "invalid repeat count: `{1001}`"),
    ("(?P<>a)", "invalid named capture: `(?P<>`"),
])
def test_what_go_refuses_is_refused_with_gos_message(pattern, message):
    with pytest.raises(PatternError) as e:
        compile_pattern(pattern)
    assert str(e.value) == f"error parsing regexp: {message}"


def test_an_escaped_backslash_before_c_and_a_quoted_c_are_literal():
    assert search(r"^\\C$", "\\C") and search(r"^\Q\C\E$", "\\C")


def test_cel_find_and_find_all_run_on_re2_with_gos_empty_match_rule():
    assert _find_all("baaac", "a*") == ["", "aaa", ""]  # Go skips the empty match right after "aaa"
    assert _find_all("ab", "$") == [""]
    assert _find_all("é", "") == ["", ""]  # steps by a character, not a byte
    assert _find_all("a1b22c333", r"\d+", 2) == ["1", "22"]
    assert _find("x αβ y", r"\p{Greek}+") == "αβ"
    assert _find("a" * 5000 + "!", r"^(a+)+$") == ""
    with pytest.raises(CELError, match=r"^error parsing regexp: missing closing \): `\(`$"):
        _find("a", "(")


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


def _with_pattern(pattern: str) -> dict:
    body = crd()
    schema = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = copy.deepcopy(SCHEMA)
    schema["properties"]["spec"]["properties"]["s"] = {"type": "string", "pattern": pattern}
    return body


async def test_over_http_a_refused_pattern_is_gos_error_and_a_pathological_one_cannot_hang_the_server(api):
    ext = client.ApiextensionsV1Api(api)
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(ext.create_custom_resource_definition, _with_pattern("+"))
    assert e.value.status == 422
    assert ("spec.validation.openAPIV3Schema.properties[spec].properties[s].pattern: Invalid value: \"+\": "
            "must be a valid regular expression, but isn't: error parsing regexp: missing argument to repetition "
            "operator: `+`") in json.loads(e.value.body)["message"]
    await asyncio.to_thread(ext.create_custom_resource_definition, _with_pattern(r"^(a+)+$|^\p{Greek}+$"))
    objs = client.CustomObjectsApi(api)

    async def create(name: str, s: str):
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"s": s}}
        for _ in tries():  # until the new kind is served
            try:
                return await asyncio.to_thread(objs.create_namespaced_custom_object, GROUP, "v1", "default",
                                               "widgets", body)
            except ApiException as err:
                if err.status != 404:
                    raise
            await asyncio.sleep(0.05)
        raise AssertionError("widgets never served")

    with pytest.raises(ApiException) as e:  # Python's re took minutes on this (the server's loop with it)
        await create("w", "a" * 64 + "!")
    assert e.value.status == 422
    assert "spec.s in body should match '^(a+)+$|^\\p{Greek}+$'" in json.loads(e.value.body)["message"]
    assert (await create("g", "αβγ"))["spec"]["s"] == "αβγ"
