"""Admission CEL (apiserver/admission/cel.py) over HTTP through the official client: an
expression whose worst case on the request's values is over the per-call cost limit fails
with cel-go's cancellation at once, instead of running (the engine cannot be stopped)."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.cel_work import count_cel_work
from tests.served import served
from tests.controllers import tries

TEN = "[1,2,3,4,5,6,7,8,9,10]"
#: a million iterations (seconds of the server's loop before)
NESTED = f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, {TEN}.all(d, {TEN}.all(e, {TEN}.all(f, a+b+c+d+e+f > 0))))))"
#: as many iterations as the square of the value's length
PAIRS = "object.data.v.split('').all(x, object.data.v.split('').all(y, x.size() == y.size()))"


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


@pytest.fixture
def work(monkeypatch):
    return count_cel_work(monkeypatch)


async def _policy(api, *expressions: str) -> None:
    adm = client.AdmissionregistrationV1Api(api)
    await asyncio.to_thread(adm.create_validating_admission_policy, {
        "metadata": {"name": "cost"}, "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "object.metadata.name != 'probe'"}]
            + [{"expression": e} for e in expressions]}})
    await asyncio.to_thread(adm.create_validating_admission_policy_binding, {
        "metadata": {"name": "cost"}, "spec": {"policyName": "cost", "validationActions": ["Deny"]}})


async def _create(api, name: str, value: str = "x") -> tuple[int, str]:
    core = client.CoreV1Api(api)
    try:
        await asyncio.to_thread(core.create_namespaced_config_map, "default",
                                {"metadata": {"name": name}, "data": {"v": value}}, dry_run="All")
    except ApiException as e:
        return e.status, json.loads(e.body)["message"]
    return 201, ""


async def _active(api) -> None:
    for _ in tries():
        if (await _create(api, "probe"))[0] == 422:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the policy never took effect")


async def test_over_http_an_expression_over_the_per_call_limit_is_stopped_at_the_limit(api, work):
    await _policy(api, NESTED)
    await _active(api)
    work.iterated = 0
    code, message = await _create(api, "c")
    assert code == 422
    assert message == (
        "configmaps \"c\" is forbidden: ValidatingAdmissionPolicy 'cost' with binding 'cost' denied request: "
        f"expression '{NESTED}' resulted in error: operation cancelled: actual cost limit exceeded")
    assert work.iterated < 1_111_110 // 10, work.iterated  # a full run: 10 + 100 + ... + 10^6 elements


async def test_over_http_the_bound_follows_the_request_values(api, work):
    await _policy(api, PAIRS)
    await _active(api)
    assert (await _create(api, "small", "x" * 100))[0] == 201  # 10^4 iterations: run
    work.iterated = 0
    code, message = await _create(api, "large", "x" * 3000)  # 9 * 10^6: refused
    assert code == 422
    assert message.endswith(f"expression '{PAIRS}' resulted in error: operation cancelled: actual cost limit exceeded")
    assert work.iterated < (3000 + 3000 * 3000) // 10, work.iterated


@pytest.mark.parametrize("expression", [
    "lists.range(5000000).size() > 0",  # five million integers built before anything was charged
    "'%.99999999f'.format([1.0]).size() > 0",  # a hundred million digits
    # 3,000 one-character pieces of a joined string, walked 3,000 times each (sizes of split and join)
    "lists.range(300).map(x, 'aaaaaaaaaa').join('').split('').all(c, lists.range(300).map(x, 'aaaaaaaaaa')"
    ".join('').split('').all(d, c == d))",
    "strings.quote(" * 22 + "'\\\\\\\\'" + ")" * 22 + ".size() > 0",  # each quote doubles the backslashes
    # doubling a string 24 times: 16 MiB from one character
    "cel.bind(a, object.data.v + object.data.v, cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, "
    "cel.bind(e, d + d, cel.bind(f, e + e, cel.bind(g, f + f, cel.bind(h, g + g, [h, h, h, h, h, h, h, h, h, h]"
    ".map(i, [h, h].join('')).join('').size() > 0))))))))",
])
async def test_over_http_what_an_expression_builds_is_charged(api, work, expression):
    await _policy(api, expression)
    await _active(api)
    work.iterated = 0
    code, message = await _create(api, "c", "x" * 4096)
    assert code == 422
    assert message.endswith("resulted in error: operation cancelled: actual cost limit exceeded"), message
    assert work.iterated < 90_000, work.iterated  # the joined-and-split walk's full run: 9 * 10^6 elements


#: each bind reads the one before twice: the engine's text doubled per bind (16 binds took 2.4 s to write, 18 9 s)
BINDS = ("cel.bind(a0, object.metadata.name, " + "".join(f"cel.bind(a{i}, a{i - 1} + a{i - 1}, " for i in range(1, 16))
         + "a15.size() > 0" + ")" * 16)
#: a chain of optional fields: the engine's text tripled per step (8 steps took 1.2 s to write, 10 over 10 s)
OPTIONALS = "object" + ".?spec" * 10 + ".hasValue() || true"


@pytest.mark.parametrize("expression", [BINDS, OPTIONALS])
async def test_over_http_a_policy_compiles_to_engine_text_linear_in_its_own(api, work, expression):
    adm = client.AdmissionregistrationV1Api(api)
    await _policy(api, expression)
    got = await asyncio.to_thread(adm.read_validating_admission_policy, "cost")
    assert got.spec.validations[1].expression == expression
    await _active(api)
    code, message = await _create(api, "c")
    assert code == 201, message  # runs (a name's 2^15 copies are within the limit; an absent field is none)
    # linear: a constant per operator (a `+` of two dyn values is reported to the meter), where the
    # engine's text doubled per bind
    assert work.compiled and max(work.compiled) <= 8 * len(expression), work.compiled


async def test_over_http_an_expression_over_cel_gos_size_limit_is_refused_unparsed(api, work):
    expression = "1 + " * 25_000 + "1 > 0"  # 100,005 code points (parsing 400,005 of them took 9 s)
    with pytest.raises(ApiException) as e:
        await _policy(api, expression * 4)
    assert max(work.parsed + work.compiled, default=0) <= 100_000, (work.parsed, work.compiled)
    assert e.value.status == 422
    assert ("compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: 400020, "
            "limit 100000") in json.loads(e.value.body)["message"]


async def test_over_http_a_selection_after_an_optional_one_is_optional(api):
    """`object.data.?v.size()`-style chains: after `.?` (or `[?i]`), further selections and indexes
    are optional too, as cel-go's checker types them and its interpreter qualifies them (none
    where absent). The policy was refused: "type 'optional(dyn)' does not support field selection"."""
    await _policy(api, "object.metadata.?labels.team.orValue('none') != 'blocked'",
                  "object.data.?v.orValue('') != 'bad'")
    await _active(api)
    assert await _create(api, "a") == (201, "")
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_config_map, "default", {
            "metadata": {"name": "b", "labels": {"team": "blocked"}}}, dry_run="All")
    assert e.value.status == 422
    assert json.loads(e.value.body)["message"].endswith(
        "denied request: failed expression: object.metadata.?labels.team.orValue('none') != 'blocked'")
